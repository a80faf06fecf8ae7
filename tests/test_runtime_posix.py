"""The runtime against programs whose I/O is known exactly (POSIX, STDIO, threads, fork, exec)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from iopilot.capture.run import library_path
from iopilot.model import OP_READ, OP_WRITE, RECORD_LAYERS
from iopilot.sources import load

RUNTIME = Path(__file__).resolve().parents[1] / "runtime"
CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")


@pytest.fixture(scope="module")
def lib() -> Path:
    return library_path()  # built by `make`; a clear error if not


@pytest.fixture(scope="module")
def known(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("bin") / "posix_known"
    subprocess.run([CC, "-O2", "-pthread", "-o", str(exe), str(RUNTIME / "tests/posix_known.c")],
                   check=True)  # fmt: skip
    return exe


def iopilot(*args, **kw):
    return subprocess.run([sys.executable, "-m", "iopilot", *args], capture_output=True,
                          text=True, timeout=120, **kw)  # fmt: skip


@pytest.fixture(scope="module")
def traced(known, tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    trace = tmp_path_factory.mktemp("t") / "trace"
    p = iopilot("run", "--trace-only", "--trace-dir", str(trace), "--", str(known), str(work))
    return p, work, load(str(trace))


def row(t, layer, path):
    c = t.counters[layer]
    ids = [k for k, v in t.names.items() if v == str(path)]
    assert ids, f"{path} not traced"
    m = np.isin(c.file_id, np.array(ids, np.uint64))
    assert m.sum() == 1
    out: dict[str, float] = {n: float(c.floats[m][0, i]) for i, n in enumerate(c.float_names)}
    out.update({n: int(c.ints[m][0, i]) for i, n in enumerate(c.int_names)})
    return out


def test_program_behaviour_is_unchanged(traced):
    p, _, _ = traced
    assert p.returncode == 3  # the program's own status
    assert p.stdout == "ok\n"


def test_exact_posix_counters(traced):
    _, work, t = traced
    a = row(t, "POSIX", work / "a.dat")
    assert a["POSIX_WRITES"] == 102  # the failed write (EBADF) is not counted
    assert a["POSIX_BYTES_WRITTEN"] == 100 * 1000 + 4096 + 1000
    assert a["POSIX_READS"] == 10 and a["POSIX_BYTES_READ"] == 10_000
    assert a["POSIX_OPENS"] == 2 and a["POSIX_STATS"] == 2 and a["POSIX_FSYNCS"] == 1
    # 100 writes and the writev of 1000 B (below 1 KiB), the pwrite of 4096 B
    assert a["POSIX_SIZE_WRITE_100_1K"] == 101
    assert a["POSIX_SIZE_WRITE_1K_10K"] == 1
    # Darshan's rule: the first write, at offset 0, is neither consecutive nor
    # sequential; the pwrite at 1 MiB is sequential; the writev back at 100,000 is neither
    assert a["POSIX_CONSEC_WRITES"] == 99
    assert a["POSIX_SEQ_WRITES"] == 100
    assert a["POSIX_MAX_BYTE_WRITTEN"] == (1 << 20) + 4096 - 1
    assert a["POSIX_FILE_NOT_ALIGNED"] > 0
    assert a["POSIX_RW_SWITCHES"] == 1  # the writes, then the reads: one switch
    # the one gap between accesses: from byte 99,999 to the pwrite at 1 MiB
    assert (a["POSIX_STRIDE1_STRIDE"], a["POSIX_STRIDE1_COUNT"]) == ((1 << 20) - 100_000, 1)
    # the commonest sizes: 1000 B (100 writes, the writev, 10 preads), 4096 B once
    assert (a["POSIX_ACCESS1_ACCESS"], a["POSIX_ACCESS1_COUNT"]) == (1000, 111)
    assert (a["POSIX_ACCESS2_ACCESS"], a["POSIX_ACCESS2_COUNT"]) == (4096, 1)
    # the first of the two opens, before the first write; the second open is later
    assert 0 < a["POSIX_F_OPEN_START_TIMESTAMP"] <= a["POSIX_F_WRITE_START_TIMESTAMP"]


def test_a_dup_keeps_the_writes_consecutive_and_memory_alignment_is_per_call(traced):
    _, work, t = traced
    d = row(t, "POSIX", work / "d.dat")
    assert (d["POSIX_WRITES"], d["POSIX_OPENS"], d["POSIX_DUPS"]) == (20, 2, 1)  # as Darshan
    assert (d["POSIX_CONSEC_WRITES"], d["POSIX_SEQ_WRITES"]) == (19, 19)
    assert d["POSIX_MEM_NOT_ALIGNED"] == 10  # the writes from one byte past the boundary


def test_stdio_threads_and_fork(traced):
    _, work, t = traced
    b = row(t, "STDIO", work / "b.txt")
    assert b["STDIO_WRITES"] == 11 and b["STDIO_BYTES_WRITTEN"] == 1006
    for i in range(4):
        th = row(t, "POSIX", work / f"thread{i}.dat")
        assert th["POSIX_WRITES"] == 1000 and th["POSIX_BYTES_WRITTEN"] == 64_000
        # the thread's last I/O, in a destructor run after the runtime's own
        ex = row(t, "POSIX", work / f"exit{i}.dat")
        assert ex["POSIX_WRITES"] == 1 and ex["POSIX_BYTES_WRITTEN"] == 10
    child = row(t, "POSIX", work / "child.dat")
    assert child["POSIX_WRITES"] == 50 and child["POSIX_BYTES_WRITTEN"] == 500


def test_records_match_counters(traced):
    _, work, t = traced
    r = t.records
    posix = r.layer == RECORD_LAYERS.index("POSIX")
    c = t.counters["POSIX"]
    assert int((posix & (r.op == OP_WRITE)).sum()) == c.total("POSIX_WRITES")
    assert int((posix & (r.op == OP_READ)).sum()) == c.total("POSIX_READS")
    assert int(r.length[posix & (r.op == OP_WRITE)].sum()) == c.total("POSIX_BYTES_WRITTEN")
    assert np.all(r.end >= r.start) and np.all(r.start >= 0)
    # The pwrite at 1 MiB is recorded at its offset.
    a = next(k for k, v in t.names.items() if v == str(work / "a.dat"))
    assert ((r.file_id == a) & (r.offset == 1 << 20) & (r.length == 4096)).sum() == 1


def test_record_limit_keeps_counters_exact(known, tmp_path):
    work, trace = tmp_path / "w", tmp_path / "t"
    work.mkdir()
    p = iopilot("run", "--trace-only", "--max-records", "100", "--trace-dir", str(trace), "--",
                str(known), str(work))  # fmt: skip
    assert p.returncode == 3
    t = load(str(trace))
    th = row(t, "POSIX", work / "thread0.dat")
    assert th["POSIX_WRITES"] == 1000  # counters exact beyond the record limit
    assert any("dropped" in w for w in t.warnings)
    procs = [json.loads(f.read_text()) for f in trace.glob("p*.json")]
    assert sum(p["records_dropped"] for p in procs) > 0
    assert all(p["records"] <= 100 for p in procs)


def test_exec_child_is_traced(tmp_path):
    src = tmp_path / "in.dat"
    src.write_bytes(b"x" * 5000)
    trace = tmp_path / "t"
    dst = tmp_path / "out.dat"
    p = iopilot("run", "--trace-only", "--trace-dir", str(trace), "--", "/bin/sh", "-c",
                f"exec dd if={src} of={dst} bs=1000 status=none")  # fmt: skip
    assert p.returncode == 0 and dst.read_bytes() == src.read_bytes()
    t = load(str(trace))
    assert row(t, "POSIX", src)["POSIX_BYTES_READ"] == 5000
    assert row(t, "POSIX", dst)["POSIX_WRITES"] == 5


def test_unwritable_trace_dir_never_breaks_the_program(known, lib, tmp_path):
    env = dict(os.environ, LD_PRELOAD=str(lib), IOPILOT_TRACE_DIR="/proc/no/such/dir")
    p = subprocess.run([str(known), str(tmp_path)], env=env, capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert p.returncode == 3 and p.stdout == "ok\n"
    assert p.stderr == ""  # the program's streams are never the runtime's


def test_preloaded_but_not_asked_to_trace(known, lib, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "IOPILOT_TRACE_DIR"}
    env["LD_PRELOAD"] = str(lib)
    p = subprocess.run([str(known), str(tmp_path)], env=env, capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert p.returncode == 3 and p.stdout == "ok\n" and p.stderr == ""


def test_run_reports_and_keeps_the_exit_status(known, tmp_path):
    work, trace = tmp_path / "w", tmp_path / "t"
    work.mkdir()
    p = iopilot("run", "--color", "never", "--trace-dir", str(trace), "--", str(known), str(work))
    assert p.returncode == 3
    assert "iopilot report:" in p.stdout and "POSIX" in p.stdout
    assert f"trace in {trace}" in p.stderr


def test_run_errors_are_one_line(tmp_path):
    p = iopilot("run", "--trace-dir", str(tmp_path / "t"), "--", "/no/such/program")
    assert p.returncode == 127 and "command not found" in p.stderr and "Traceback" not in p.stderr


def test_sanitizer_build_selftest(sanitized, tmp_path):
    """The runtime's sources built with ASan+UBSan into one program, run traced."""
    out = sanitized
    trace = tmp_path / "trace"
    trace.mkdir()
    env = dict(os.environ, IOPILOT_TRACE_DIR=str(trace), ASAN_OPTIONS="detect_leaks=0")
    p = subprocess.run([str(out / "selftest-asan"), str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr
    t = load(str(trace))
    assert row(t, "POSIX", tmp_path / "selftest.dat")["POSIX_WRITES"] == 2000
    # [posix] direct: twins, bounce buffers, a close-all under them.
    (tmp_path / "d").mkdir()
    (tmp_path / "d.toml").write_text("[posix]\ndirect = true\n")
    (tmp_path / "dtrace").mkdir()
    p = subprocess.run([str(out / "direct-asan"), str(tmp_path / "d")],
                       env=dict(env, IOPILOT_TRACE_DIR=str(tmp_path / "dtrace"),
                                IOPILOT_SETTINGS=str(tmp_path / "d.toml")),
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode == 0 and "WRONG" not in p.stdout, p.stdout + p.stderr
    assert "odirect 1 cloexec 1" in p.stderr


def test_damaged_trace_directories_are_one_line_errors(traced, tmp_path):
    import shutil as sh

    _, _, t = traced
    src = Path(t.source)
    broken = tmp_path / "broken"
    sh.copytree(src, broken)
    victim = sorted(broken.glob("p*.json"))[0]
    victim.write_text(victim.read_text()[:100])
    p = iopilot("report", str(broken))
    assert p.returncode == 2 and "damaged process summary" in p.stderr
    assert "Traceback" not in p.stderr and p.stderr.count("\n") == 1
    orphans = tmp_path / "orphans"
    orphans.mkdir()
    for rec in src.glob("p*.rec"):
        sh.copy(rec, orphans)
    # Records without summaries (every process killed): kept, and said so.
    p = iopilot("report", "--color", "never", str(orphans))
    assert p.returncode == 0 and "ended without a summary (killed or crashed)" in p.stdout
    assert len(load(str(orphans)).records) == len(t.records)
    cut = tmp_path / "cut"
    sh.copytree(src, cut)
    rec = max(cut.glob("p*.rec"), key=lambda f: f.stat().st_size)
    rec.write_bytes(rec.read_bytes()[:-7])  # the last record cut short
    t2 = load(str(cut))
    assert any("cut short" in w for w in t2.warnings)
    # The lost record may be a metadata one, which the model does not keep.
    assert len(t.records) - 1 <= len(t2.records) <= len(t.records)
