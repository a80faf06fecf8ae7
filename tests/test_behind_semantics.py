"""The program sees the same thing whatever iopilot does with its writes:
traced, with write-behind (``--async``, also with a small buffer) and with
``[posix] direct``.  Each case of runtime/tests/behind_semantics.c is run
untraced and in each mode; output, exit status and files must be equal."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from iopilot.capture.run import library_path
from iopilot.sources import load
from test_runtime_safety import CC, same_behaviour

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")


def _build(tmp_path_factory, name: str) -> Path:
    """runtime/tests/NAME.c compiled into a fresh directory."""
    exe = tmp_path_factory.mktemp("bin") / name
    subprocess.run([CC, "-O1", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                    str(ROOT / f"runtime/tests/{name}.c")], check=True)  # fmt: skip
    return exe


@pytest.fixture(scope="module")
def prog(tmp_path_factory) -> Path:
    return _build(tmp_path_factory, "behind_semantics")


@pytest.fixture(scope="module")
def direct_settings(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("settings") / "direct.toml"
    p.write_text('[posix]\ndirect = true\ndirect_min_size = "4k"\n')
    return p


MODES = ["traced", "async", "async-small", "direct"]


def env_for(mode: str, direct_settings: Path) -> dict[str, str]:
    return {"traced": {}, "async": {"IOPILOT_ASYNC": "1"},
            "async-small": {"IOPILOT_ASYNC": "1", "IOPILOT_ASYNC_MAX_BYTES": "64k"},
            "direct": {"IOPILOT_SETTINGS": str(direct_settings)}}[mode]  # fmt: skip


# What the untraced program itself prints, so that equality is not empty.
EXPECTED = {
    "clone": ["child sees 4194304", "child sees 8388608", "size 9437184"],
    "dotdot": ["sizes 2097152 1048576"],
    "unlink": ["new file 10", "old file 9437184 links 0", "u.dat: 10 bytes"],
    "links": ["linkat 0 size 8388608", "after more 9437184", "through the link 8388608",
              "new link 8388608", "new link after more 9437184"],
    "statx": ["statx path 0 4194304", "statx fd 0 5242880", "fstatat dirfd 0 6291456"],
    "pipe": ["reader sees 67108864"],
    "efault": ["bad pointer: -1 EFAULT pos 8192", "half readable: 4096 0 pos 12288",
               "pwrite unmapped: -1 EFAULT pos 12288", "good: 1048576 0 pos 1060864"],
    "fsize": ["write 3: 10000 0 pos 100000", "write 4: -1 EFBIG pos 100000",
              "pwrite from 0: 100000 0", "pwrite past: -1 EFBIG", "pwrite at 2^60: -1 EFBIG",
              "size 100000"],
    "fsize-die": ["write 2: 30000 0 pos 90000"],
    "setfl": ["after append 12", "after clear 14", "a.dat: 14 bytes"],
    "setfl-other": ["o.dat: 65536 bytes"],
    "sync-range": ["sync_file_range 0"],
}
STATUS = {"fsize-die": -signal.SIGXFSZ, "sync-range": -signal.SIGKILL}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_the_program_sees_the_same(prog, direct_settings, case, mode):
    run = same_behaviour([str(prog), case, "WORK"], env=env_for(mode, direct_settings))
    assert run.p.returncode == STATUS.get(case, 0), run.p.stderr
    out = run.p.stdout.decode()
    for line in EXPECTED[case]:
        assert line in out, out


# Cases where the writes can be queued: write-behind must have taken some,
# or the equality above proves nothing about it.
DEFERRED = ["clone", "dotdot", "unlink", "statx", "pipe", "efault"]


@pytest.mark.parametrize("case", DEFERRED)
def test_write_behind_took_writes_in(prog, direct_settings, case):
    run = same_behaviour([str(prog), case, "WORK"], env=env_for("async", direct_settings))
    wb = load(str(run.trace)).write_behind
    assert wb is not None and wb["writes"] > 0 and wb["bytes"] == wb["bytes_written"]


def test_a_file_with_two_names_is_written_at_once(prog, direct_settings):
    run = same_behaviour([str(prog), "links", "WORK"], env=env_for("async", direct_settings))
    wb = load(str(run.trace)).write_behind
    # queued: the temporary file's and l.dat's first 8 MiB in 4 KiB writes;
    # made at once: their 1 MiB after the link (h.dat had two names at open,
    # so its writes never reach write-behind)
    assert (wb["writes"], wb["synchronous"]) == (2 * 2048, 2 * 256)


# -- the same cases with the runtime built under AddressSanitizer+UBSan and
# ThreadSanitizer, linked into the program ----------------------------------


def _sanitized_run(exe: Path, case: str, env: dict[str, str], traced: bool):
    work = Path(tempfile.mkdtemp(prefix="iop-work-"))
    e = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_") and k != "LD_PRELOAD"}
    e.update(ASAN_OPTIONS="detect_leaks=0", TSAN_OPTIONS="halt_on_error=1 exitcode=66")
    if traced:
        e.update(env, IOPILOT_TRACE_DIR=tempfile.mkdtemp(prefix="iop-trace-"))
    p = subprocess.run([str(exe), case, str(work)], env=e, capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    files = {str(f.relative_to(work)): f.read_bytes() for f in sorted(work.rglob("*"))
             if f.is_file()}  # fmt: skip
    return p, files


@pytest.mark.parametrize("tool", ["asan", "tsan"])
@pytest.mark.parametrize("mode", ["async", "direct"])
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_the_same_under_sanitizers(sanitized, direct_settings, tool, mode, case):
    if tool == "tsan" and case == "clone":
        # ThreadSanitizer follows fork() but not clone(): in the child it
        # still counts the parent's threads, and calls the reset of the
        # child's copy of the queue a race with a thread that is not there.
        # The case runs under ASan and uninstrumented above.
        return
    exe = sanitized / f"semantics-{tool}"
    plain, plain_files = _sanitized_run(exe, case, {}, traced=False)
    run, files = _sanitized_run(exe, case, env_for(mode, direct_settings), traced=True)
    assert "Sanitizer" not in run.stderr and "runtime error" not in run.stderr, run.stderr
    assert run.returncode == plain.returncode == STATUS.get(case, 0), run.stderr
    assert run.stdout == plain.stdout
    assert files == plain_files


# -- an MPI message tells another rank that the file is there ------------------


@pytest.mark.skipif(not (shutil.which("mpicc") and shutil.which("mpirun")),
                    reason="mpicc/mpirun not installed")  # fmt: skip
@pytest.mark.parametrize("mode", ["plain", "async"])
def test_an_mpi_message_publishes_pending_writes(tmp_path, mode):
    exe = tmp_path / "behind_mpi"
    subprocess.run(["mpicc", "-O1", "-Wall", "-Werror", "-o", str(exe),
                    str(ROOT / "runtime/tests/behind_mpi.c")], check=True)  # fmt: skip
    trace = tmp_path / "trace"
    trace.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("IOPILOT_") and k != "LD_PRELOAD"}  # fmt: skip
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")  # fmt: skip
    cmd = ["mpirun", "-np", "2"]
    if mode == "async":
        cmd += ["-x", f"LD_PRELOAD={library_path()}", "-x", f"IOPILOT_TRACE_DIR={trace}",
                "-x", "IOPILOT_ASYNC=1"]  # fmt: skip
    r = subprocess.run([*cmd, str(exe), str(tmp_path)], env=env, capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == [f"{k}: rank 1 sees {32 * 2**20}"
                                             for k in ("allreduce", "bcast", "send")]  # fmt: skip
    if mode == "async":
        wb = load(str(trace)).write_behind
        assert wb is not None and wb["writes"] >= 3 * 8192


# -- a write that is not queued lands after the file's queued writes ----------
# runtime/tests/behind_order.c holds the background thread with ptrace while
# 16 small pwrites are queued, then makes a write of other bytes over the
# same range that cannot be queued: the file holds those bytes only if that
# write waited for the queue.  The order does not depend on timing.

ORDER_CASES = {"large": "large: 131072", "full": "full: 4096", "sync": "sync: 65536",
               "odirect": "odirect: 65536", "writev": "writev: 65536",
               "fork": "fork: 0"}  # fmt: skip


@pytest.fixture(scope="module")
def order_prog(tmp_path_factory) -> Path:
    return _build(tmp_path_factory, "behind_order")


def _order_run(exe: Path, case: str, env: dict[str, str] | None):
    work = Path(tempfile.mkdtemp(prefix="iop-order-"))
    trace = Path(tempfile.mkdtemp(prefix="iop-order-trace-"))
    e = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_") and k != "LD_PRELOAD"}
    if env is not None:
        e.update(env, LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(trace))
    p = subprocess.run([str(exe), case, str(work)], env=e, capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    data = (work / "order.dat").read_bytes() if (work / "order.dat").exists() else None
    shutil.rmtree(work, ignore_errors=True)
    return p, data, trace


@pytest.mark.parametrize("case", sorted(ORDER_CASES))
def test_a_write_that_is_not_queued_waits_for_the_files_queued_writes(order_prog, case):
    plain, want, _ = _order_run(order_prog, case, None)
    assert plain.returncode == 0 and ORDER_CASES[case] in plain.stdout, plain.stdout
    async_env = {"IOPILOT_ASYNC": "1", "IOPILOT_ASYNC_MAX_BYTES": "64k"}
    run, got, trace = _order_run(order_prog, case, async_env)
    if run.returncode == 77:
        pytest.skip(run.stderr.strip())
    assert run.returncode == 0, run.stdout + run.stderr
    assert "write-behind thread held" in run.stderr  # the queued writes were still pending
    assert run.stdout == plain.stdout
    # the second pattern over the first (the plain run's bytes), not the queued writes last
    assert got == want
    wb = load(str(trace)).write_behind
    assert wb["writes"] >= 16 and wb["waits"] >= 1


@pytest.mark.parametrize("case", ["exec", "vfork"])
def test_a_program_that_execs_leaves_no_queued_write_behind(order_prog, case):
    """exec ends the background thread: the program (or its vfork child,
    which shares the queue) waits for every queued write first, so the
    program it becomes sees them."""
    plain, want, _ = _order_run(order_prog, case, None)
    assert plain.returncode == 0 and f"{case}: 65536 bytes seen" in plain.stdout, plain.stdout
    run, got, _ = _order_run(order_prog, case, {"IOPILOT_ASYNC": "1"})
    if run.returncode == 77:
        pytest.skip(run.stderr.strip())
    assert "write-behind thread held" in run.stderr
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout == plain.stdout
    assert got == want


def test_a_path_waits_for_queued_writes_only_when_it_may_name_their_file(order_prog):
    """stat() of a directory names no file with queued writes: it returns
    while they are still queued (the background thread is held).  stat() of
    a link that loops cannot say which file it names: every queued write
    lands before it returns."""
    plain, want, _ = _order_run(order_prog, "paths", None)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "directory 0: 65536 bytes landed; loop -1 " in plain.stdout, plain.stdout
    run, got, _ = _order_run(order_prog, "paths", {"IOPILOT_ASYNC": "1"})
    if run.returncode == 77:
        pytest.skip(run.stderr.strip())
    assert "write-behind thread held" in run.stderr
    assert run.returncode == 0, run.stdout + run.stderr
    loop = os.strerror(errno.ELOOP)
    assert f"directory 0: 0 bytes landed; loop -1 {loop}: 65536 bytes landed" in run.stdout
    assert got == want  # the same file in the end


def test_a_fatal_signal_stops_waiting_for_a_thread_that_makes_no_progress(order_prog):
    """abort() with writes queued and the background thread held (stopped
    with ptrace until the program is gone): the runtime waits for the queue,
    gives up once the thread has moved nothing for 2 s, and the program ends
    by its signal, as documented (those writes are lost), instead of hanging."""
    plain, _, _ = _order_run(order_prog, "stall", None)
    assert plain.returncode == -signal.SIGABRT
    t0 = time.monotonic()
    run, _, _ = _order_run(order_prog, "stall", {"IOPILOT_ASYNC": "1"})
    took = time.monotonic() - t0
    if run.returncode == 77:
        pytest.skip(run.stderr.strip())
    assert "write-behind thread held" in run.stderr
    assert run.returncode == -signal.SIGABRT, run.stdout + run.stderr
    assert 2.0 <= took < 30.0  # the holder itself lets go only after 60 s
