"""One vocabulary: layers, operations, size bins and counters are written once
(src/iopilot/vocabulary.py); the C header is generated from it, Python
imports it and the HTML page receives it in its data."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from iopilot import vocabulary as v

ROOT = Path(__file__).resolve().parents[1]
HEADER = ROOT / "runtime/include/iopilot_vocab.h"


def _generator():
    gen = ROOT / "tools/gen_vocabulary.py"
    spec = importlib.util.spec_from_file_location("gen_vocabulary", gen)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_committed_header_is_what_the_generator_writes_now():
    gen = _generator()
    assert HEADER.read_text() == gen.render(gen.load_vocabulary()), (
        "runtime/include/iopilot_vocab.h is stale: run python tools/gen_vocabulary.py")


def test_an_edit_of_the_vocabulary_changes_the_header():
    """The check above can fail: any change of a list reaches the header."""
    gen = _generator()
    voc = gen.load_vocabulary()
    base = gen.render(voc)
    for name, value in (("COUNTERS", (*voc.COUNTERS, "NEW_COUNTER")),
                        ("OP_NAMES", (*voc.OP_NAMES, "fsync_range")),
                        ("SIZE_BIN_UPPER", (99, *voc.SIZE_BIN_UPPER[1:])),
                        ("RUNTIME_LAYERS", voc.RUNTIME_LAYERS[::-1])):  # fmt: skip
        old = getattr(voc, name)
        setattr(voc, name, value)
        try:
            assert gen.render(voc) != base, name
        finally:
            setattr(voc, name, old)
    assert gen.main(["--check"]) == 0


def test_the_c_side_has_no_list_of_its_own():
    fmt = (ROOT / "runtime/include/iopilot_format.h").read_text()
    assert '#include "iopilot_vocab.h"' in fmt
    assert not re.search(r"#define IOP_(LAYERS|OPS|COUNTERS|FCOUNTERS|SIZE_BIN_UPPER)\b", fmt)
    for src in (ROOT / "runtime/src").glob("*.[ch]"):
        text = src.read_text()
        # bin edges and the number of bins come from the header
        assert "1048576" not in text and "104857600" not in text, src.name
        assert not re.search(r"#define IOP_(LAYERS|OPS|COUNTERS|FCOUNTERS)\(", text), src.name


def test_the_format_codes_never_change():
    """Traces store these codes: a reorder would misread every existing trace."""
    assert v.OP_NAMES[:13] == ("read", "write", "open", "close", "seek", "sync", "stat",
                               "truncate", "mmap", "flush", "unlink", "rename", "mkdir")
    assert v.RUNTIME_LAYERS[:5] == ("POSIX", "STDIO", "MPIIO", "H5F", "H5D")
    assert (v.OP_READ, v.OP_WRITE) == (0, 1)
    doc = (ROOT / "docs/trace-format.md").read_text()
    assert " ".join(o.upper() for o in v.OP_NAMES) in re.sub(r"\s+", " ", doc)
    assert json.dumps(list(v.RUNTIME_LAYERS)) in doc


def test_the_size_bins_are_darshans():
    assert len(v.SIZE_BINS) == len(v.SIZE_BIN_UPPER) == len(v.SIZE_BIN_LABELS) == 10
    assert v.SIZE_BIN_UPPER[4] == 1 << 20 and v.SIZE_BINS[4] == "100K_1M"
    assert list(v.SIZE_BIN_UPPER) == sorted(v.SIZE_BIN_UPPER)
    sizes = [c for c in v.COUNTERS if c.startswith("SIZE_READ_")]
    assert sizes == [f"SIZE_READ_{b}" for b in v.SIZE_BINS]


def test_python_takes_its_lists_from_the_vocabulary():
    from iopilot import model
    from iopilot.bench import synthetic
    from iopilot.capture import run
    from iopilot.report import html
    from iopilot.sources import darshan_header, trace_procs, trace_records

    for name in ("OP_NAMES", "SIZE_BINS", "SIZE_BIN_UPPER", "RECORD_LAYERS", "COUNTER_LAYERS"):
        assert getattr(model, name) is getattr(v, name), name
    assert trace_procs.LAYER_CODES is v.RUNTIME_LAYERS
    assert trace_records.N_OPS == len(v.OP_NAMES)
    assert run.LAYERS is v.RUNTIME_SWITCHES
    assert synthetic.LAYERS is v.RUNTIME_LAYERS and synthetic.INT_NAMES is v.COUNTERS
    assert {k: lay for k, (lay, _) in darshan_header.COUNTER_MODULES.items()} == {
        m.darshan: m.name for m in v.MODULES}
    assert html.LABELS["H5D"] == "HDF5" and html.LABELS["MPIIO"] == "MPI-IO"
    assert model.display("MPIIO") == "MPI-IO" and model.display("LUSTRE") == "LUSTRE"


def test_no_python_file_keeps_its_own_list():
    """Lists of layers, operations, size bins or MPI-IO classes live in the vocabulary."""
    names = "|".join(m.name for m in v.MODULES)
    lists = {
        "layers": rf'"({names})",\s*"({names})",\s*"({names})"',
        "operations": r'"(open|close|seek|stat|sync)",\s*"(close|seek|sync|stat|truncate)"',
        "size bins": r'"(0_100|100_1K|1K_10K)",\s*"(100_1K|1K_10K|10K_100K)"',
        "MPI-IO classes": r'"(INDEP|COLL|SPLIT|NB)",\s*"(COLL|SPLIT|NB)"',
        "MPI-IO counters": r'"MPIIO_\w+_(READS|WRITES)",\s*"MPIIO_\w+_(READS|WRITES)"',
    }
    for path in (ROOT / "src/iopilot").rglob("*.py"):
        if path.name == "vocabulary.py":
            continue
        # Darshan's numbering of the modules of its log format is Darshan's, not ours
        text = re.sub(r"\nMODULE_IDS = \(.*?\)", "", path.read_text(), flags=re.S)
        for what, pattern in lists.items():
            m = re.search(pattern, text)
            assert not m, f"{path.relative_to(ROOT)} lists {what}: {m.group()}"


def test_module_counter_names():
    mpiio, posix = v.MODULE["MPIIO"], v.MODULE["POSIX"]
    assert mpiio.op_counters("WRITE") == ("MPIIO_INDEP_WRITES", "MPIIO_COLL_WRITES",
                                          "MPIIO_SPLIT_WRITES", "MPIIO_NB_WRITES")
    assert mpiio.op_counters("READ") == v.mpiio_counters("READ")
    assert v.mpiio_counters("READ", v.MPIIO_COLLECTIVE) == ("MPIIO_COLL_READS",
                                                              "MPIIO_SPLIT_READS")
    assert posix.op_counters("READ") == ("POSIX_READS",)
    assert mpiio.size_counter("READ", "0_100") == "MPIIO_SIZE_READ_AGG_0_100"
    assert posix.size_counter("WRITE", "1G_PLUS") == "POSIX_SIZE_WRITE_1G_PLUS"
    assert v.MODULE["H5D"].darshan_name("SIZE_WRITE_1M_4M") == "H5D_SIZE_WRITE_AGG_1M_4M"
    assert posix.darshan_name("SIZE_WRITE_1M_4M") == "POSIX_SIZE_WRITE_1M_4M"
    # every MPI-IO operation counter is a runtime counter
    for d in v.DIRECTIONS:
        assert all(c.removeprefix("MPIIO_") in v.COUNTERS for c in v.mpiio_counters(d))
    with pytest.raises(AttributeError):
        posix.name = "X"  # type: ignore[misc]


def test_the_runtime_writes_the_vocabulary(tmp_path):
    """What the built library writes into a summary is the vocabulary."""
    s = _run_traced(tmp_path, ["/bin/true"])
    assert tuple(s["layers"]) == v.RUNTIME_LAYERS
    assert tuple(s["counter_names"]) == v.COUNTERS
    assert tuple(s["fcounter_names"]) == v.FCOUNTERS


def _c_code(path: Path) -> str:
    """A C file without its comments."""
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", path.read_text(), flags=re.S)


def test_the_runtime_core_names_no_layer():
    """Only the modules know their layers; the core iterates over modules.c."""
    words = (*v.RUNTIME_LAYERS, *v.RUNTIME_SWITCHES, "HDF5", "ROMIO", "OMPI_MCA", "AIO",
             "FAPL", "SPLIT", "aio", "fapl", "split")  # fmt: skip
    for name in ("core.c", "process.c", "output.c", "records.c", "tables.c", "files.c",
                 "core_private.h"):
        code = _c_code(ROOT / "runtime/src" / name)
        for w in words:
            assert w not in code, f"runtime/src/{name} names {w}"


def test_every_module_declares_itself_and_is_listed():
    src = ROOT / "runtime/src"
    table = _c_code(src / "modules.c")
    declared = {}
    for path in src.glob("*.c"):
        code = _c_code(path)
        for var, word in re.findall(r"const iop_module (\w+) = \{\s*IOP_MODULE_OF\((\w+)\)",
                                    code):  # fmt: skip
            declared[word] = var
            assert f"&{var}," in table, f"{var} ({path.name}) is not in modules.c"
    assert sorted(declared) == sorted(v.RUNTIME_SWITCHES)


def _run_traced(tmp_path: Path, argv: list[str], **env: str) -> dict:
    from iopilot.capture.run import library_path

    out = tmp_path / f"t{len(list(tmp_path.iterdir()))}"
    out.mkdir()
    full = dict(os.environ, LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(out), **env)
    subprocess.run(argv, env=full, check=True, timeout=60)
    (summary,) = out.glob("p*.json")
    return json.loads(summary.read_text())


def test_iopilot_layers_switches_modules_by_name(tmp_path):
    target = tmp_path / "written.txt"
    script = ["/bin/sh", "-c", f"echo hello > {target}"]
    codes = {}
    for want in ("POSIX", "STDIO,HDF5", ""):
        s = _run_traced(tmp_path, script, IOPILOT_LAYERS=want)
        (fid,) = [k for k, n in s["names"].items() if n == str(target)] or [None]
        codes[want] = sorted(s["layers"][row[0]] for row in s["counters"] if row[1] == fid)
    assert codes == {"POSIX": ["POSIX"], "STDIO,HDF5": [], "": ["POSIX"]}


def test_modules_write_their_parts_of_the_summary(tmp_path):
    s = _run_traced(tmp_path, ["/bin/true"], HDF5_PLUGIN_PATH="/plugins", SLURM_JOB_ID="42")
    # module tables first (MPI-IO's only when built with MPI headers), then the core's
    assert [k for k in s["overflows"] if k != "split"] == ["aio", "fapl", "fortran_units",
                                                           "handles", "notes",
                                                           "sites"]  # fmt: skip
    assert s["env"]["HDF5_PLUGIN_PATH"] == "/plugins" and s["env"]["SLURM_JOB_ID"] == "42"


def test_the_page_has_no_copies_of_the_vocabulary():
    js = (ROOT / "src/iopilot/report/html_page.js").read_text()
    assert "SIZE_UPPER = D.size_upper" in js
    for edge in v.SIZE_BIN_UPPER[2:-1]:  # 100 and 1024 are percentages and byte units
        assert not re.search(rf"\b{edge}\b", js), edge
    for label in v.SIZE_BIN_LABELS:
        assert label not in js, label
    assert not re.search(r"\bb\s*<\s*10\b", js), "the number of size bins is SIZE_UPPER.length"
    for m in v.MODULES:
        for q in "'\"`":
            assert f"{q}{m.name}" not in js, m.name  # also 'MPIIO+POSIX'
            assert f"{q}{m.interface}{q}" not in js, m.interface
    for op in v.OP_NAMES[2:]:
        assert f"'{op}'" not in js, op
    assert not re.search(r"\?\s*'write'\s*:\s*'read'", js), "operation names are D.op_names"
