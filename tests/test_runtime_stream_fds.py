"""A stream's descriptor read and written by the program (fileno), as C++
fstreams do: the C library opens and closes it without our open and close,
so POSIX offsets, byte counts and sequential counters must still be what the
kernel saw (worked out from strace of the same programs)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from iopilot.capture.run import library_path
from iopilot.model import OP_READ, OP_WRITE
from rawtrace import RawProc

RUNTIME = Path(__file__).resolve().parents[1] / "runtime"
CC = shutil.which("cc") or shutil.which("gcc")
CXX = shutil.which("g++") or shutil.which("c++")
MiB = 1 << 20
CHUNK = 64 << 10


def build(compiler: str | None, source: str, out: Path) -> Path:
    if compiler is None:
        pytest.skip("no compiler")
    subprocess.run([compiler, "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                    str(RUNTIME / "tests" / source)], check=True)  # fmt: skip
    return out


@pytest.fixture(scope="module")
def c_prog(tmp_path_factory) -> Path:
    return build(CC, "stream_fds.c", tmp_path_factory.mktemp("bin") / "stream_fds")


@pytest.fixture(scope="module")
def cpp_run(tmp_path_factory) -> tuple[RawProc, Path]:
    exe = build(CXX, "stream_fds.cpp", tmp_path_factory.mktemp("bin") / "stream_fds_cpp")
    return run(exe)


def run(exe: Path, *args: str) -> tuple[RawProc, Path]:
    work = Path(tempfile.mkdtemp(prefix="iop-work-"))
    trace = Path(tempfile.mkdtemp(prefix="iop-trace-"))
    env = dict(os.environ, LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(trace))
    subprocess.run([str(exe), *args, str(work)], env=env, check=True, timeout=60)
    (proc,) = [RawProc(p) for p in trace.glob("p*.json")]
    return proc, work


def accesses(proc: RawProc, path: Path, op: int) -> list[tuple[int, int]]:
    """(offset, bytes) of a file's POSIX reads or writes, in time order."""
    return [(r[2], r[3]) for r in proc.records_of("POSIX", path, op)]


def test_a_stream_reopened_reads_from_the_start_each_time(c_prog):
    proc, work = run(c_prog, "reread")
    a = proc.get("POSIX", work / "a.dat")
    one_pass = [(off, CHUNK) for off in range(0, MiB, CHUNK)]
    assert accesses(proc, work / "a.dat", OP_READ) == one_pass * 3
    assert a["BYTES_READ"] == 3 * MiB and a["READS"] == 48
    assert a["MAX_BYTE_READ"] == MiB - 1  # not 3 MiB - 1: the file is 1 MiB
    # 15 consecutive reads after each pass's first (at 0, below the last byte)
    assert a["CONSEC_READS"] == 45 and a["SEQ_READS"] == 45
    # Darshan's counting kept: every fileno an open of the kind FILENOS
    assert a["FILENOS"] == 48 and a["OPENS"] == 1 + 48


def test_a_new_stream_with_the_same_number_is_another_file(c_prog):
    proc, work = run(c_prog, "two")
    assert accesses(proc, work / "a.dat", OP_READ) == [(0, CHUNK)]
    assert accesses(proc, work / "b.dat", OP_READ) == [(0, CHUNK), (CHUNK, CHUNK)]
    assert proc.get("POSIX", work / "a.dat")["BYTES_READ"] == CHUNK
    assert proc.get("POSIX", work / "b.dat")["BYTES_READ"] == 2 * CHUNK


def test_a_descriptor_starts_where_the_stream_left_the_kernel(c_prog):
    proc, work = run(c_prog, "readahead")  # fread of 10 B read 4 KiB ahead
    assert accesses(proc, work / "a.dat", OP_READ) == [(4096, CHUNK)]


def test_an_fdopened_descriptor_keeps_its_position_and_is_closed_by_fclose(c_prog):
    proc, work = run(c_prog, "fdopen")
    # make's 1 MiB, then 100 B at 0 and, through fileno, 10 B after them
    assert accesses(proc, work / "a.dat", OP_WRITE) == [(0, MiB), (0, 100), (100, 10)]
    a = proc.get("POSIX", work / "a.dat")
    assert a["OPENS"] == 3 and a["FILENOS"] == 1 and "READS" not in a
    assert accesses(proc, work / "b.dat", OP_READ) == [(0, CHUNK)]


def test_freopen_gives_the_descriptor_to_the_new_file(c_prog):
    proc, work = run(c_prog, "freopen")
    assert accesses(proc, work / "a.dat", OP_READ) == [(0, CHUNK)]
    assert accesses(proc, work / "b.dat", OP_READ) == [(0, CHUNK)]


def test_appends_through_a_streams_descriptor_land_at_the_end(c_prog):
    proc, work = run(c_prog, "append")
    assert accesses(proc, work / "a.dat", OP_WRITE) == [(0, MiB), (MiB, 10), (MiB + 10, 10)]
    assert proc.get("POSIX", work / "a.dat")["MAX_BYTE_WRITTEN"] == MiB + 19


def test_cpp_ifstream_read_three_times(cpp_run):
    proc, work = cpp_run
    c = proc.get("POSIX", work / "in.dat")
    assert accesses(proc, work / "in.dat", OP_READ) == [(0, MiB)] * 3
    assert c["BYTES_READ"] == 3 * MiB and c["MAX_BYTE_READ"] == MiB - 1
    assert c.get("SEQ_READS", 0) == 0 and c.get("CONSEC_READS", 0) == 0
    assert accesses(proc, work / "in.dat", OP_WRITE) == [(0, MiB)]


def test_cpp_ofstream_closed_and_reopened(cpp_run):
    proc, work = cpp_run
    lines = [(7 * i, 7) for i in range(10)]  # "line i\n", one write per std::endl
    assert accesses(proc, work / "out.txt", OP_WRITE) == lines * 2  # truncated, rewritten
    out = proc.get("POSIX", work / "out.txt")
    assert out["BYTES_WRITTEN"] == 140 and out["MAX_BYTE_WRITTEN"] == 69
    assert out["CONSEC_WRITES"] == 18 and out["SEQ_WRITES"] == 18
    log = proc.get("POSIX", work / "log.txt")  # then reopened to append
    assert accesses(proc, work / "log.txt", OP_WRITE) == [(7 * i, 7) for i in range(20)]
    assert log["MAX_BYTE_WRITTEN"] == 139 and log["CONSEC_WRITES"] == 19
