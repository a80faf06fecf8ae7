"""One vocabulary: the size bins and counter names the C runtime, the Python
side and the HTML page use must be the same lists."""

from __future__ import annotations

import re
from pathlib import Path

from iopilot.model import OP_NAMES, SIZE_BIN_UPPER, SIZE_BINS

ROOT = Path(__file__).resolve().parents[1]
FORMAT_H = (ROOT / "runtime/include/iopilot_format.h").read_text()


def test_c_and_python_size_bin_edges_are_the_same():
    m = re.search(r"#define IOP_SIZE_BIN_UPPER \{([^}]*)\}", FORMAT_H)
    assert m, "IOP_SIZE_BIN_UPPER not found"
    edges = [int(x) for x in re.sub(r"\\\s*", " ", m.group(1)).replace(",", " ").split()]
    assert edges == list(SIZE_BIN_UPPER[:-1])  # the last bin is open-ended


def test_c_counter_names_have_every_python_size_bin():
    for rw in ("READ", "WRITE"):
        c_bins = re.findall(rf"X\(SIZE_{rw}_([0-9A-Z_]+?)\)", FORMAT_H)
        assert c_bins == list(SIZE_BINS)


def test_the_page_takes_its_bin_edges_from_the_data():
    js = (ROOT / "src/iopilot/report/html_page.js").read_text()
    assert "SIZE_UPPER = D.size_upper" in js
    assert "1048576" not in js and "104857600" not in js


def test_c_and_python_operation_codes_are_the_same():
    block = FORMAT_H[FORMAT_H.index("#define IOP_OPS(X)") :]
    block = block[: block.index("enum iop_op")]
    assert [x.lower() for x in re.findall(r"X\((\w+)\)", block)] == list(OP_NAMES)
