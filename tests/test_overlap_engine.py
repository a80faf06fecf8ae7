"""The asynchronous I/O engine: its C tests built plain and under the
sanitizers, and its Python binding from a plain program, under mpi4py, on a
full file system and killed mid-run."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from iopilot.overlap.engine import AsyncIOError, EventSet
from kit import killed_after_durable_steps

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "runtime"
LIB = ROOT / "src" / "iopilot" / "_lib" / "libiopilot_async.so"
TIMEOUT = 300
HAVE_MPI = bool(shutil.which("mpirun"))

pytestmark = pytest.mark.skipif(not LIB.exists(), reason="engine not built (make -C runtime)")

CASES = ("order", "copies", "failures", "too_big", "timeout", "capped", "threads")


@pytest.fixture(scope="module")
def engine_builds(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("async-bin")
    r = subprocess.run(["make", "-s", "-C", str(RUNTIME), f"OUT={out}", f"{out}/async-tsan",
                        f"{out}/async-asan"], capture_output=True, text=True,
                       timeout=TIMEOUT)  # fmt: skip
    assert r.returncode == 0, r.stderr
    plain = out / "async-plain"
    subprocess.run(["cc", "-std=gnu11", "-O2", "-pthread", "-Wall", "-Wextra", "-Werror", "-o",
                    str(plain), str(RUNTIME / "tests/async_engine.c"),
                    str(RUNTIME / "src/async.c"), "-ldl"], check=True, timeout=TIMEOUT)  # fmt: skip
    return out


@pytest.mark.parametrize("build", ["plain", "tsan", "asan"])
def test_engine_cases_pass_clean_under_sanitizers(engine_builds: Path, tmp_path: Path,
                                                  build: str) -> None:  # fmt: skip
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1 exitcode=66",
               ASAN_OPTIONS="detect_leaks=1")  # fmt: skip
    r = subprocess.run([str(engine_builds / f"async-{build}"), str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    assert "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == [w for c in CASES for w in (c, "ok")]


def test_writes_are_copied_ordered_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "f.dat"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        with EventSet() as es:
            buf = bytearray(b"a" * 8192)
            first = es.write(fd, buf, 0)
            buf[:] = b"b" * 8192  # changed after queuing: the file keeps the a's
            es.write(fd, memoryview(b"0123456789")[3:7], 100)  # a slice of read-only bytes
            es.write(fd, b"z", 8191)
            es.fsync(fd)
            r = es.read(fd, 10_000, 96)  # queued after the writes: sees them
            assert es.wait() == 0
            assert r.data == b"aaaa3456" + b"a" * (8191 - 104) + b"z"
            assert first == 1 and r.id == 5
            st = es.stats()
        assert st["submitted"] == st["completed"] == 5 and st["failed"] == 0
        assert st["bytes_written"] == 8192 + 4 + 1 and st["bytes_read"] == 8192 - 96
    finally:
        os.close(fd)
    assert path.read_bytes()[:8] == b"a" * 8


def test_a_write_without_copy_is_made_from_the_caller_s_buffer(tmp_path: Path) -> None:
    """copy=False: nothing is copied (the engine's copy time stays 0, and a
    copied write's does not), and the file gets the buffer's bytes."""
    path = tmp_path / "f.dat"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    big = 64 << 20
    try:
        with EventSet() as es:
            bufs = [bytearray(b"x" * big), bytearray(b"y" * big)]  # two taking turns
            es.write(fd, bufs[0], 0, copy=False)
            es.write(fd, memoryview(b"ro")[0:2], big, copy=False)  # read-only: its own copy
            assert es.wait() == 0
            es.write(fd, bufs[1], big + 2, copy=False)
            assert es.wait() == 0
            nocopy = es.stats()["copy_seconds"]
            es.write(fd, bufs[0], 2 * big + 2)
            assert es.wait() == 0
            copied = es.stats()["copy_seconds"] - nocopy
        assert nocopy == 0.0 and copied > 0.0
    finally:
        os.close(fd)
    data = path.read_bytes()
    assert data == b"x" * big + b"ro" + b"y" * big + b"x" * big


def test_failures_raise_once_with_errno_and_the_set_goes_on(tmp_path: Path) -> None:
    (tmp_path / "ro").write_bytes(b"x" * 10)
    ro = os.open(tmp_path / "ro", os.O_RDONLY)
    try:
        es = EventSet()
        bad = es.write(ro, b"y" * 5, 3)
        good = es.read(ro, 4, 0)
        with pytest.raises(AsyncIOError) as e:
            es.wait()
        assert e.value.errno == errno.EBADF
        (f,) = e.value.failures
        assert (f.id, f.op, f.fd, f.offset, f.bytes, f.done) == (bad, "write", ro, 3, 5, 0)
        assert good.data == b"xxxx"
        assert es.wait() == 0  # reported once
        es.close()
        with pytest.raises(ValueError, match="closed"):
            es.write(ro, b"y", 0)
    finally:
        os.close(ro)


def test_wait_with_a_timeout_returns_what_is_pending(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "big", os.O_RDWR | os.O_CREAT, 0o644)
    block = b"\1" * (64 << 20)
    try:
        with EventSet() as es:
            for i in range(8):
                es.write(fd, block, i * len(block))
                es.fsync(fd)
            assert es.wait(0) > 0  # 512 MiB and 8 fsyncs are not done in microseconds
            assert es.wait() == 0
    finally:
        os.close(fd)
    assert os.path.getsize(tmp_path / "big") == 8 * len(block)


def _small_fs(tmp_path: Path) -> Path:
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)  # fmt: skip
    if r.returncode != 0:
        pytest.skip(f"cannot mount a size-limited tmpfs here ({r.stderr.strip()}); the "
                    "engine's EFBIG case covers deferred errors")  # fmt: skip
    return mnt


def test_a_full_file_system_is_reported_at_the_next_wait(tmp_path: Path) -> None:
    mnt = _small_fs(tmp_path)
    try:
        fd = os.open(mnt / "f", os.O_WRONLY | os.O_CREAT, 0o644)
        with EventSet() as es:
            es.write(fd, b"q" * (4 << 20), 0)  # queued: the program goes on
            es.fsync(fd)
            with pytest.raises(AsyncIOError) as e:
                es.wait()
        os.close(fd)
        assert e.value.errno == errno.ENOSPC
        f = e.value.failures[0]
        assert f.op == "write" and 0 < f.done < f.bytes == 4 << 20
        assert os.path.getsize(mnt / "f") == f.done  # the bytes before the error stay
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


_STEPS = textwrap.dedent("""
    import os, sys
    from iopilot.overlap.engine import EventSet
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
    es = EventSet()
    step = 0
    while True:
        es.write(fd, bytes([step % 251]) * (1 << 20), step << 20)
        es.fsync(fd)
        es.wait()
        print("durable", step, flush=True)
        step += 1
""")


def test_kill_9_keeps_every_byte_up_to_the_last_completed_fsync(tmp_path: Path) -> None:
    path = tmp_path / "steps.dat"
    killed_after_durable_steps([sys.executable, "-c", _STEPS, str(path)], path, 20)


@pytest.mark.skipif(not HAVE_MPI, reason="mpirun not installed")
def test_the_binding_under_mpi4py(tmp_path: Path) -> None:
    script = tmp_path / "ranks.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        from mpi4py import MPI
        from iopilot.overlap.engine import EventSet
        comm = MPI.COMM_WORLD
        rank, size = comm.Get_rank(), comm.Get_size()
        path = sys.argv[1]
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        with EventSet() as es:
            for step in range(4):
                block = bytes([65 + rank]) * 65536
                es.write(fd, block, (step * size + rank) * 65536)
            es.fsync(fd)
            x = sum(i * i for i in range(200000))  # computing while the thread writes
            es.wait()
        os.close(fd)
        comm.Barrier()
        if rank == 0:
            data = open(path, "rb").read()
            ok = all(data[i * 65536] == 65 + i % size for i in range(4 * size))
            print("ranks", size, "ok" if ok and len(data) == 4 * size * 65536 else "WRONG")
    """))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")  # fmt: skip
    r = subprocess.run(["mpirun", "-np", "2", sys.executable, str(script),
                        str(tmp_path / "shared.dat")], env=env, capture_output=True, text=True,
                       timeout=TIMEOUT)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ranks 2 ok" in r.stdout


def test_the_engine_is_found_where_iopilot_async_lib_says(tmp_path: Path, monkeypatch) -> None:
    from iopilot.errors import InputError
    from iopilot.overlap.engine import library_path

    monkeypatch.delenv("IOPILOT_ASYNC_LIB", raising=False)
    assert library_path() == LIB.resolve()
    copy = tmp_path / "engine.so"
    shutil.copy(LIB, copy)
    monkeypatch.setenv("IOPILOT_ASYNC_LIB", str(copy))
    assert library_path() == copy
    monkeypatch.setenv("IOPILOT_ASYNC_LIB", str(tmp_path / "absent.so"))
    with pytest.raises(InputError) as e:
        library_path()
    assert str(tmp_path / "absent.so") in str(e.value) and "not built" in str(e.value)


@pytest.mark.parametrize("op", ["write", "read", "fsync"])
def test_an_operation_that_cannot_be_queued_says_which_and_why(tmp_path: Path, op: str) -> None:
    """A negative descriptor is refused at once, naming the operation."""
    es = EventSet()
    try:
        with pytest.raises(OSError) as e:
            {"write": lambda: es.write(-1, b"x", 0), "read": lambda: es.read(-1, 1, 0),
             "fsync": lambda: es.fsync(-1)}[op]()  # fmt: skip
        assert e.value.errno == errno.EINVAL
        assert str(e.value).startswith(f"[Errno {errno.EINVAL}] cannot queue the {op}: ")
        assert es.wait() == 0  # nothing was queued
    finally:
        es.close()
