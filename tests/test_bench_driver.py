"""`iopilot bench KERNEL` and `iopilot bench sweep`: launching, parsing, bandwidths."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iopilot.bench.catalog import KERNELS
from iopilot.bench.kernels import KERNEL_DIR, failure, kernel_options, summarise

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
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("iopilot: error: iopilot bench hacc:")
    assert "nonsense" in last and "---" not in last  # the kernel's words, not mpirun's banner


def test_kernel_usage_and_message_reach_the_user(tmp_path):
    p = iopilot("bench", "ior", "--ranks", "2", "--dir", str(tmp_path), "--bogus")
    assert p.returncode == 2
    assert "usage: ior" in p.stderr and "MPI_ABORT" not in p.stderr
    assert p.stderr.strip().splitlines()[-1] == (
        "iopilot: error: iopilot bench ior: unknown option '--bogus' (rank 0)")


def test_wrong_data_exits_3_with_the_kernels_message(tmp_path):
    small = ("--block", "64k", "--transfer", "16k")
    p = iopilot("bench", "ior", "--ranks", "2", "--dir", str(tmp_path), "--write", "--keep", *small)
    assert p.returncode == 0, p.stderr
    f = tmp_path / "iopilot-ior.dat"
    data = bytearray(f.read_bytes())
    data[70_000] ^= 0xFF  # rank 1's block
    f.write_bytes(bytes(data))
    p = iopilot("bench", "ior", "--ranks", "2", "--dir", str(tmp_path), "--read", *small)
    assert p.returncode == 3, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert "verification failed" in last and "offset 70000" in last
    data[70_000] ^= 0xFF  # put it back: the same command passes
    f.write_bytes(bytes(data))
    p = iopilot("bench", "ior", "--ranks", "2", "--dir", str(tmp_path), "--read", *small)
    assert p.returncode == 0, p.stderr


def test_keep_reaches_the_kernel_and_keeps_the_directory():
    small = ("--block", "64k", "--transfer", "16k")
    p = iopilot("bench", "ior", "--keep", *small)
    assert p.returncode == 0, p.stderr
    kept = re.search(r"kernel files kept in (\S+)", p.stderr)
    assert kept, p.stderr
    d = Path(kept.group(1))
    try:
        assert (d / "iopilot-ior.dat").stat().st_size == 64 * 1024
    finally:
        shutil.rmtree(d)
    p = iopilot("bench", "ior", *small)
    assert p.returncode == 0 and "kept" not in p.stderr


def test_failure_reasons_from_stderr():
    banner = "-" * 74
    usage = "usage: k [--a N]\n  defaults: none"
    e = failure("k", 2, f"{usage}\nk: error (rank 1): --a: not an integer: 'x'\n{banner}\n"
                        f"MPI_ABORT was invoked on rank 1\n{banner}\n")  # fmt: skip
    assert (e.status, e.reason, e.usage) == (2, "--a: not an integer: 'x' (rank 1)", usage)
    e = failure("k", 3, "k: verification failed (rank 0): f: byte at offset 5 is 0x00\n")
    assert e.status == 3 and e.reason == "verification failed: f: byte at offset 5 is 0x00 (rank 0)"
    e = failure("k", 1, f"{banner}\nmpirun noticed that process rank 0 exited on signal 11\n"
                        f"(Segmentation fault).\n{banner}\nlater text\n")  # fmt: skip
    assert e.status == 2
    assert e.reason == ("mpirun noticed that process rank 0 exited on signal 11 "
                        "(Segmentation fault).")
    assert failure("k", 7, "").reason == "exit status 7"
    assert failure("k", -9, "").reason.startswith("killed by signal 9")
    assert str(failure("k", 7, "")) == "iopilot bench k: exit status 7"


def test_every_kernel_lists_its_options():
    for name in KERNELS:
        valued, flags = kernel_options(name)
        assert valued and not (valued & flags), name
    valued, flags = kernel_options("ior")
    assert {"transfer", "iterations", "block"} <= valued and {"keep", "fsync"} <= flags


def test_counts_take_binary_suffixes(tmp_path):
    p = iopilot("bench", "vpicio", "--dir", str(tmp_path), "--json", "--particles", "1k",
                "--steps", "1")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["params"]["particles"] == 1024
    p = iopilot("bench", "vpicio", "--dir", str(tmp_path), "--particles", "1x", "--steps", "1")
    assert p.returncode == 2 and "not an integer: '1x'" in p.stderr


def test_summary_uses_bytes_moved_over_time():
    res = {"iterations": [
        {"iteration": 0, "open_s": 0.5, "write_s": 1.0, "read_s": 2.0, "close_s": 0.5,
         "bytes_written": 100 * 2**20, "bytes_read": 100 * 2**20, "write_ops": 100,
         "read_ops": 50, "meta_ops": 0, "verified": True}]}  # fmt: skip
    s = summarise(res)
    # open to close, as IOR: open and close added when a kernel gives no total
    assert s["write"]["max_mib_s"] == 50.0 and s["read"]["max_mib_s"] == 100 / 3
    assert s["write"]["max_mib_s_transfer"] == 100.0 and s["read"]["max_mib_s_transfer"] == 50.0
    assert s["write"]["max_mib_s_with_open_close"] == 50.0
    assert s["read"]["max_ops_s"] == 50 / 3 and s["verified"] is True


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


def h5bench_setup(tmp_path, read_option="FULL", particles=1024):
    cfg = {
        "mpi": {"command": "mpirun", "ranks": "4", "configuration": "-n 2 --oversubscribe"},
        "vol": {}, "file-system": {}, "directory": "store",
        "benchmarks": [
            {"benchmark": "write", "file": "particles.h5",
             "configuration": {"MEM_PATTERN": "CONTIG", "FILE_PATTERN": "CONTIG",
                               "TIMESTEPS": "2", "NUM_DIMS": "1", "DIM_1": str(particles),
                               "DIM_2": "1", "DIM_3": "1", "MODE": "SYNC",
                               "COLLECTIVE_DATA": "YES"}},
            {"benchmark": "read", "file": "particles.h5",
             "configuration": {"MEM_PATTERN": "CONTIG", "FILE_PATTERN": "CONTIG",
                               "TIMESTEPS": "2", "NUM_DIMS": "1", "DIM_1": str(particles),
                               "DIM_2": "1", "DIM_3": "1", "MODE": "SYNC",
                               "READ_OPTION": read_option}},
        ],
    }  # fmt: skip
    path = tmp_path / "setup.json"
    path.write_text(json.dumps(cfg))
    return path


def test_h5bench_configuration_runs_write_then_read(tmp_path):
    work = tmp_path / "work"
    p = iopilot("bench", "h5bench", str(h5bench_setup(tmp_path)), "--json", "--dir", str(work))
    assert p.returncode == 0, p.stderr
    write, read = json.loads(p.stdout)
    assert (write["kernel"], read["kernel"]) == ("vpicio", "bdcats")
    assert write["ranks"] == read["ranks"] == 2
    # 2 ranks x 1024 particles x 8 variables x 4 bytes x 2 steps, written then read back
    assert write["summary"]["write"]["bytes"] == read["summary"]["read"]["bytes"] == 131072
    assert read["summary"]["verified"] is True
    assert (work / "store" / "particles.h5").exists()


def test_h5bench_configuration_we_cannot_honour_is_refused(tmp_path):
    p = iopilot("bench", "h5bench", str(h5bench_setup(tmp_path, read_option="RDC")))
    assert p.returncode == 2 and "READ_OPTION" in p.stderr and "RDC" in p.stderr
    assert "vpicio on" not in p.stderr  # refused before anything ran


def test_ior_json_summary_is_written_where_asked(tmp_path):
    out = tmp_path / "ior.json"
    p = iopilot("bench", "ior", "--ranks", "2", "--block", "64k", "--transfer", "16k",
                "--iterations", "2", "--ior-json", str(out))  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    write = next(s for s in doc["summary"] if s["operation"] == "write")
    assert write["numTasks"] == 2 and write["repetitions"] == 2
    assert write["bwMinMIB"] <= write["bwMeanMIB"] <= write["bwMaxMIB"]
    assert "Max Write" in p.stdout  # the table is still printed
    p = iopilot("bench", "hacc", "--ior-json", str(out))
    assert p.returncode == 2  # an ior option only


def test_io_per_step_counts_reads_too():
    def step(write_s, read_s):
        return {"iteration": 0, "open_s": 0.1, "write_s": write_s, "read_s": read_s,
                "close_s": 0.2, "bytes_written": 0, "bytes_read": 0, "write_ops": 0,
                "read_ops": 0, "meta_ops": 0, "verified": None, "compute_s": 1.0}  # fmt: skip

    s = summarise({"iterations": [step(0.0, 2.0), step(1.0, 0.0)]})
    assert s["compute"]["io_mean_s"] == pytest.approx((2.3 + 1.3) / 2)
    assert s["compute"]["mean_s"] == 1.0


def test_every_kernel_answers_help_with_its_usage():
    # A kernel run by hand: --help prints the usage on standard output and
    # exits 0, with nothing from the MPI library on standard error.
    for name in KERNELS:
        r = subprocess.run([str(KERNEL_DIR / name), "--help"], capture_output=True, text=True,
                           timeout=60)  # fmt: skip
        assert r.returncode == 0 and r.stdout.startswith(f"usage: {name}"), (name, r.stderr)
        assert r.stderr == "", name
