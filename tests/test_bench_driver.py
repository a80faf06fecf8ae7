"""`iopilot bench KERNEL` and `iopilot bench sweep`: launching, parsing, bandwidths."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys

import pytest

from iopilot.bench.kernels import KERNEL_DIR, summarise

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")


def iopilot(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "iopilot", *args], capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def test_kernels_are_built():
    for name in ("vpicio", "bdcats", "hacc", "ior", "epochs", "mdtest"):
        assert (KERNEL_DIR / name).exists(), f"{name} is built by `make`"


def test_bench_json_bytes_and_verification(tmp_path):
    p = iopilot("bench", "hacc", "--ranks", "2", "--json", "--dir", str(tmp_path),
                "--layout", "mpiio", "--particles", "1000", "--read")  # fmt: skip
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["kernel"] == "hacc" and r["ranks"] == 2
    s = r["summary"]
    assert s["write"]["bytes"] == 2 * 1000 * 38 == s["read"]["bytes"]
    assert s["verified"] is True
    assert s["write"]["max_mib_s"] >= s["write"]["min_mib_s"] > 0


def test_bench_terminal_summary(tmp_path):
    p = iopilot("bench", "vpicio", "--ranks", "2", "--dir", str(tmp_path),
                "--particles", "2000", "--steps", "2")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "iopilot bench vpicio: 2 rank(s)" in p.stdout
    assert p.stdout.count("\nwrite ") == 2 and "Max Write" in p.stdout


def test_kernel_errors_are_one_line(tmp_path):
    p = iopilot("bench", "hacc", "--dir", str(tmp_path), "--layout", "nonsense")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].startswith("iopilot: error: iopilot bench hacc:")


def test_summary_uses_bytes_moved_over_time():
    res = {"iterations": [
        {"iteration": 0, "open_s": 0.5, "write_s": 1.0, "read_s": 2.0, "close_s": 0.5,
         "bytes_written": 100 * 2**20, "bytes_read": 100 * 2**20, "write_ops": 100,
         "read_ops": 50, "meta_ops": 0, "verified": True}]}  # fmt: skip
    s = summarise(res)
    assert s["write"]["max_mib_s"] == 100.0 and s["read"]["max_mib_s"] == 50.0
    assert s["write"]["max_mib_s_with_open_close"] == 50.0
    assert s["read"]["max_ops_s"] == 25.0 and s["verified"] is True


def test_sweep_table_and_plot(tmp_path):
    out = tmp_path / "out"
    p = iopilot("bench", "sweep", "hacc", "--grid", "ranks=1,2", "--grid",
                "layout=mpiio,hdf5-datasets", "--set", "particles=500", "--set", "read=1",
                "--out", str(out))  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "[4/4] hacc" in p.stderr
    rows = list(csv.DictReader(open(out / "sweep.csv")))
    assert len(rows) == 4
    assert all(float(r["write_mib_s"]) > 0 and r["verified"] == "True" for r in rows)
    png = (out / "sweep.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
