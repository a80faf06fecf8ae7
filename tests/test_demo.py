"""`make demo`'s job: trace the built-in 4-rank MPI example and diagnose it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from iopilot.demo import EXAMPLE_PROGRAM

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")


def test_demo_traces_four_ranks_and_finds_the_small_writes(tmp_path):
    assert EXAMPLE_PROGRAM.exists(), "built by `make`"
    p = subprocess.run([sys.executable, "-m", "iopilot", "demo", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "read-back verified" in p.stdout
    (r,) = json.loads((tmp_path / "report.json").read_text())["reports"]
    assert r["job"]["nprocs"] == 4
    found = {f["check"]: f for f in r["findings"]}
    f = found["mpiio-collective-writes"]
    assert f["evidence"]["independent"] == 4 * 1024
    # Critical only when the example's I/O takes long enough to matter.
    it = r["io_time"]
    matters = it["slowest_rank_seconds"] >= 1 and (it["share"] or 1) >= 0.01
    assert f["level"] == ("HIGH" if matters else "WARN")
    assert f["cost_seconds"] is not None and f["cost_seconds"] > 0
    # The small POSIX writes beneath are the same calls' pieces: one finding.
    assert "posix-small-writes" not in found and "P06" in f["evidence"]["drishti_also"]
    small = re.search(r"posix-small-writes \(Drishti P06\): ([\d,]+) of",
                      f["evidence"]["also_seen_as"])
    assert small and int(small.group(1).replace(",", "")) >= 4096
    assert (tmp_path / "data" / "shared.dat").stat().st_size == 16 * 1024 * 1024
    page = (tmp_path / "report.html").read_text()
    assert "mpiio-collective-writes" in page and "<script src=" not in page
    assert "report.html in a browser" in p.stdout
    # The findings are on the terminal, with the I/O time first.
    assert "mpiio-collective-writes" in p.stdout and "I/O time" in p.stdout
