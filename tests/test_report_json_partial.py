"""The JSON report's ``partial``: true when what was read is incomplete (a
damaged region of a Darshan log left out with a warning, a trace's record
file cut short), false for the same input undamaged.  The damaged inputs are
made here from real ones: a Darshan log (one of the shared corpus when it is
present, and one bundled with PyDarshan) and the trace of a real program."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from iopilot.capture.run import library_path
from iopilot.cli import main
from iopilot.demo import example_dir
from iopilot.sources.darshan_header import check_header
from kit import CORPUS_ABSENT, SHARED


def json_reports(capsys, path: Path) -> dict:
    assert main(["report", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def damage_region(log: Path, module: str, out: Path) -> Path:
    """A copy of ``log`` with the middle of ``module``'s compressed region
    overwritten: the region no longer decompresses."""
    off, length = check_header(str(log)).regions[module]
    data = bytearray(log.read_bytes())
    at, n = off + length // 4, max(8, length // 2)
    data[at : at + n] = b"\xff" * n
    out.write_bytes(bytes(data))
    return out


def _darshan_logs() -> list:
    bundled = pytest.param(example_dir() / "ior_hdf5_example.darshan", "DXT_POSIX", id="bundled")
    shared = SHARED / "LOCAL_mpi-io-test_coll_4p_dxt_v3.5.0.darshan"
    marks = [] if shared.exists() else [pytest.mark.skip(reason=CORPUS_ABSENT)]
    return [bundled, pytest.param(shared, "DXT_MPIIO", id="shared", marks=marks)]


@pytest.mark.parametrize(("log", "module"), _darshan_logs())
def test_a_damaged_darshan_region_makes_the_report_partial(capsys, tmp_path, log, module):
    whole = json_reports(capsys, log)["reports"][0]
    assert whole["partial"] is False and whole["warnings"] == []
    doc = json_reports(capsys, damage_region(log, module, tmp_path / "damaged.darshan"))
    assert doc["errors"] == []
    r = doc["reports"][0]
    assert any(w.startswith(f"the {module} region is damaged") for w in r["warnings"])
    assert r["partial"] is True


@pytest.mark.skipif(not (SHARED / "damaged").is_dir(), reason=CORPUS_ABSENT)
def test_logs_that_cannot_be_read_give_errors_not_a_complete_report(capsys):
    logs = sorted((SHARED / "damaged").glob("*.darshan"))
    assert logs
    for log in logs:
        main(["report", str(log), "--json"])
        doc = json.loads(capsys.readouterr().out)
        assert doc["reports"] == [] and [e["path"] for e in doc["errors"]] == [str(log)]


def traced_dd(root: Path) -> Path:
    """The trace of dd writing 256 KiB in 4 KiB writes."""
    trace = root / "trace"
    trace.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_")}
    env.update(LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(trace))
    subprocess.run(["dd", "if=/dev/zero", f"of={root / 'out'}", "bs=4096", "count=64"],
                   env=env, check=True, capture_output=True, timeout=60)  # fmt: skip
    return trace


@pytest.mark.skipif(shutil.which("dd") is None, reason="no dd")
def test_a_trace_cut_short_makes_the_report_partial(capsys):
    root = Path(tempfile.mkdtemp(prefix="iop-partial-"))
    trace = traced_dd(root)
    whole = json_reports(capsys, trace)["reports"][0]
    assert whole["partial"] is False and whole["warnings"] == []
    (rec,) = trace.glob("*.rec")
    os.truncate(rec, rec.stat().st_size - 100)  # the last records, and half of one, are gone
    r = json_reports(capsys, trace)["reports"][0]
    assert any("cut short" in w for w in r["warnings"])
    assert not any(m["partial"] for m in r["modules"])  # the warnings alone say so
    assert r["partial"] is True
    shutil.rmtree(root, ignore_errors=True)
