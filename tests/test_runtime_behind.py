"""Write-behind (``iopilot run --async``, IOPILOT_ASYNC=1): the program sees
what it would see without it, deferred errors come back at the next sync or
close, and the runtime's hard cases (signals, threads, descriptors closed
under it, vfork, exec, kill -9) behave."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from iopilot.capture.run import library_path
from iopilot.sources import load
from kit import killed_after_durable_steps
from test_runtime_safety import (  # noqa: F401  (faults: a fixture)
    PY,
    SANITIZED_CASES,
    VFORK_PY,
    Run,
    blocks,
    faults,
    same_behaviour,
)

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "runtime" / "tests"
ASYNC = {"IOPILOT_ASYNC": "1"}


@pytest.fixture(scope="module")
def behind_prog(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("bin") / "behind"
    subprocess.run(["cc", "-O1", "-Wall", "-Werror", "-pthread", "-o", str(exe),
                    str(SOURCES / "behind.c")], check=True, timeout=120)  # fmt: skip
    return exe


@pytest.fixture
def small_fs(tmp_path):
    """A 1 MiB tmpfs, or a skip naming why none can be mounted here."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)  # fmt: skip
    if r.returncode != 0:
        pytest.skip(f"cannot mount a size-limited tmpfs here: {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def _run(exe: Path, work: Path, env: dict[str, str], *extra: str) -> tuple[str, Path]:
    work.mkdir()
    trace = Path(tempfile.mkdtemp(prefix="iop-trace-"))
    e = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_") and k != "LD_PRELOAD"}
    if env is not None:
        e.update(env, LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(trace))
    r = subprocess.run([str(exe), str(work), *extra], env=e, capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout, trace


def _files(work: Path) -> dict[str, bytes]:
    """The files, but the signal handler's, whose length is the number of
    timer ticks (the program checks that one itself)."""
    return {f.name: f.read_bytes() for f in sorted(work.iterdir())
            if f.is_file() and f.name != "signal.dat"}  # fmt: skip


def test_the_program_sees_what_it_would_without_write_behind(behind_prog, tmp_path):
    plain, _ = _run(behind_prog, tmp_path / "plain", None)
    deferred, trace = _run(behind_prog, tmp_path / "async", ASYNC)
    assert deferred == plain and "failed" not in plain
    assert "handlers ran on the program's thread: yes" in plain
    # the same numbers every way the file can be seen, and the child's and
    # the shell's view after fork and system()
    assert "position 145000 end 145000 fstat 145000 stat 145000" in plain
    assert "same fd 'OVagainTE' other fd 'OVagainTE'" in plain
    assert "stream 'OVagainTE'" in plain
    assert f"{8 * 2**20 + 11}\n" in plain  # wc -c saw the parent's writes and the child's
    assert _files(tmp_path / "async") == _files(tmp_path / "plain")
    wb = load(str(trace)).write_behind
    assert wb is not None and wb["writes"] > 9000 and wb["errors"] == 0
    assert wb["bytes"] == wb["bytes_written"]  # every deferred byte landed


def test_a_full_file_system_fails_the_write_that_does_not_fit(behind_prog, tmp_path, small_fs):
    """Writes are queued only while the file system has room for them: the
    call that fills it fails, as without write-behind, not a later fsync."""
    plain, _ = _run(behind_prog, tmp_path / "plain", None, str(small_fs))
    deferred, trace = _run(behind_prog, tmp_path / "async", ASYNC, str(small_fs))
    assert "full at write" in plain
    assert deferred == plain
    wb = load(str(trace)).write_behind
    assert wb["synchronous"] > 0 and wb["errors"] == 0


def test_a_small_buffer_writes_at_once_in_order(behind_prog, tmp_path):
    plain, _ = _run(behind_prog, tmp_path / "plain", None)
    small, trace = _run(behind_prog, tmp_path / "async", {**ASYNC,
                                                          "IOPILOT_ASYNC_MAX_BYTES": "64k"})
    assert small == plain
    assert _files(tmp_path / "async") == _files(tmp_path / "plain")
    wb = load(str(trace)).write_behind
    assert wb["synchronous"] > 0 and wb["writes"] > 0  # 1 MiB writes do not fit: made at once


@pytest.mark.parametrize("how", ["closeall", "close_range", "closefrom", "rlimit"])
def test_descriptors_closed_or_scarce(faults, how):  # noqa: F811
    run = same_behaviour([str(faults), how, "WORK"], env=ASYNC)
    assert run.procs()[0].json.get("write_behind") is not None


def test_64_threads_on_one_descriptor_with_write_behind(faults):  # noqa: F811
    run = same_behaviour([str(faults), "threads64", "WORK"], env=ASYNC, content=blocks)
    (proc,) = run.procs()
    wb = proc.json["write_behind"]
    # queued, or written at once when the queue of operations was full
    assert wb["writes"] + wb["synchronous"] == 64 * 2000 and wb["writes"] > 0


def test_signal_handlers_writing_with_write_behind(faults):  # noqa: F811
    run = Run([str(faults), "signals", "WORK", "50000"], traced=True, timeout=30, env=ASYNC)
    assert run.p.returncode == 0, run.p.stderr
    main, handler = (int(x) for x in run.p.stdout.split()[1::2])
    assert main == 50000 and handler > 0
    assert (run.work / "signals.dat").stat().st_size == main + handler


def test_cancelled_threads_with_write_behind(faults):  # noqa: F811
    run = Run([str(faults), "cancel", "WORK"], traced=True, timeout=60, env=ASYNC)
    assert run.p.returncode == 0 and b"cancelled 800" in run.p.stdout


def test_vfork_and_exec_see_the_writes(faults):  # noqa: F811
    run = same_behaviour([PY, "-c", VFORK_PY, "WORK"], env=ASYNC)
    assert (run.work / "out.bin").stat().st_size == 6 + 20000 + 9000
    script = ('exec 3>WORK/sh.out; echo a >&3; cat WORK/sh.out > WORK/copy; echo b >&3; '
              'wc -c < WORK/sh.out >&3')  # fmt: skip
    run = same_behaviour(["/bin/sh", "-c", script.replace("WORK", "$0"), "WORK"], env=ASYNC)
    assert (run.work / "copy").read_bytes() == b"a\n"
    assert (run.work / "sh.out").read_bytes() == b"a\nb\n4\n"


_STEPS = textwrap.dedent("""
    import os, sys
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
    step = 0
    while True:
        os.write(fd, bytes([step % 251]) * (1 << 20))
        os.fsync(fd)
        print("durable", step, flush=True)
        step += 1
""")


def test_kill_9_keeps_every_byte_up_to_the_last_completed_fsync(tmp_path):
    trace = tmp_path / "t"
    trace.mkdir()
    env = dict(os.environ, LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(trace),
               **ASYNC)  # fmt: skip
    path = tmp_path / "steps.dat"
    killed_after_durable_steps([sys.executable, "-c", _STEPS, str(path)], path, 15, env)


def test_iopilot_run_async_shows_what_was_deferred(behind_prog, tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    r = subprocess.run([sys.executable, "-m", "iopilot", "run", "--async", "--color", "never",
                        "--trace-dir", str(tmp_path / "t"), "--", str(behind_prog), str(work)],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "Write-behind" in r.stdout and "made by the background thread" in r.stdout
    d = json.loads(subprocess.run([sys.executable, "-m", "iopilot", "report", "--json", "-",
                                   str(tmp_path / "t")], capture_output=True, text=True,
                                  timeout=120).stdout)  # fmt: skip
    assert d["reports"][0]["write_behind"]["writes"] > 9000
    bad = subprocess.run([sys.executable, "-m", "iopilot", "run", "--async",
                          "--async-max-bytes", "lots", "--", "true"], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "--async-max-bytes" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize("tool", ["asan", "tsan"])
@pytest.mark.parametrize("case", ["threads64", "signals", "cancel", "closeall", "close_range"])
def test_fault_cases_with_write_behind_under_sanitizers(sanitized, tool, case):
    work = Path(tempfile.mkdtemp(prefix="iop-work-"))
    trace = Path(tempfile.mkdtemp(prefix="iop-trace-"))
    env = dict(os.environ, IOPILOT_TRACE_DIR=str(trace), ASAN_OPTIONS="detect_leaks=0",
               TSAN_OPTIONS="halt_on_error=1 exitcode=66", **ASYNC)  # fmt: skip
    env.pop("LD_PRELOAD", None)
    extra = ["20000"] if case == "signals" else []
    p = subprocess.run([str(sanitized / f"faults-{tool}"), case, str(work), *extra], env=env,
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert "Sanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
    assert p.returncode == 0, p.stderr
    assert (work / SANITIZED_CASES[case]).stat().st_size > 0
    (summary,) = trace.glob("p*.json")
    assert json.loads(summary.read_text())["write_behind"]["writes"] > 0


def _async_env(trace: Path, **extra: str) -> dict[str, str]:
    """This environment without iopilot's variables, traced into ``trace``
    with write-behind on (and ``extra``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_")}
    env.update(ASYNC, LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(trace), **extra)
    return env


@pytest.mark.parametrize(("spelled", "size", "deferred"), [
    ("4096", 4096, True), ("4096", 4097, False),
    ("4k", 4096, True), ("4K", 4097, False),
    ("1m", 2**20, True), ("1M", 2**20 + 1, False),
    # not a size: the default (256 MiB) holds the write
    ("4096x", 4097, True), ("0", 4097, True), ("", 4097, True),
])  # fmt: skip
def test_the_buffer_size_is_read_as_spelled(tmp_path, spelled, size, deferred):
    """IOPILOT_ASYNC_MAX_BYTES in bytes, k, m: a write of exactly the buffer
    is deferred and one byte more is made at once, whatever the spelling."""
    out = tmp_path / "out.dat"
    trace = tmp_path / "trace"
    trace.mkdir()
    env = _async_env(trace, IOPILOT_ASYNC_MAX_BYTES=spelled)
    subprocess.run(["dd", "if=/dev/zero", f"of={out}", f"bs={size}", "count=1", "status=none"],
                   env=env, check=True, timeout=60)  # fmt: skip
    assert out.stat().st_size == size
    wb = load(str(trace)).write_behind
    # a write larger than the buffer is the program's own call, not counted as queued
    assert (wb["writes"], wb["bytes"]) == ((1, size) if deferred else (0, 0))


@pytest.fixture
def overlay_fs(tmp_path):
    """An overlay file system (a type write-behind does not know the largest
    file of), or a skip naming why none can be mounted here."""
    for d in ("lower", "upper", "work", "mnt"):
        (tmp_path / d).mkdir()
    opts = ",".join(f"{d}dir={tmp_path / d}" for d in ("lower", "upper", "work"))
    r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", opts, str(tmp_path / "mnt")],
                       capture_output=True, text=True)  # fmt: skip
    if r.returncode != 0:
        pytest.skip(f"cannot mount an overlay file system here: {r.stderr.strip()}")
    yield tmp_path / "mnt"
    subprocess.run(["umount", str(tmp_path / "mnt")], check=False)


_PWRITE_AT = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.pwrite(fd, b"x" * 4096, int(sys.argv[2]))
os.close(fd)
"""


def _ext_end(path: Path) -> int:
    return 2**29 * os.statvfs(path).f_bsize  # ext2/3/4: 2**29 blocks, a bound below theirs


# A write is deferred only if it ends within the largest file the file
# system takes (else its EFBIG would come too late): ext4's is known, an
# unknown type's is taken as 1 TiB.  Sparse files: no byte between.
@pytest.mark.parametrize("fs", ["ext4", "unknown"])
@pytest.mark.parametrize(("past", "deferred"), [(0, True), (1, False)])
def test_a_write_is_deferred_only_within_the_largest_file(tmp_path, request, fs, past, deferred):
    where = request.getfixturevalue("overlay_fs") if fs == "unknown" else tmp_path
    magic = subprocess.run(["stat", "-f", "-c", "%t", str(where)], capture_output=True,
                           text=True, check=True).stdout.strip()  # fmt: skip
    if fs == "ext4" and magic != "ef53":
        pytest.skip(f"the test directory {where} is not on ext2/3/4 (type {magic})")
    end = (2**40 if fs == "unknown" else _ext_end(where)) + past
    out = where / "sparse.dat"
    trace = tmp_path / "trace"
    trace.mkdir()
    env = _async_env(trace)
    r = subprocess.run([sys.executable, "-c", _PWRITE_AT, str(out), str(end - 4096)], env=env,
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size == end
    wb = load(str(trace)).write_behind
    assert (wb["writes"], wb["synchronous"]) == ((1, 0) if deferred else (0, 1)), wb


_MANY_FILES = """
import os, sys
d, n, write = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "write"
for i in range(n):
    fd = os.open(os.path.join(d, f"f{i}"), os.O_WRONLY | os.O_CREAT, 0o644)
    if write:
        os.write(fd, b"x" * 16)
    os.close(fd)
fd = os.open(os.path.join(d, "last"), os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"y" * 4096)
os.close(fd)
"""


# Write-behind follows up to 4096 files with deferred writes in a process;
# a file opened and closed without a write takes none of them.
@pytest.mark.parametrize(("write", "deferred", "synchronous"), [(False, 1, 0),
                                                               (True, 4096, 4097 - 4096)])
def test_files_never_written_take_no_place_among_the_deferred(tmp_path, write, deferred,
                                                              synchronous):  # fmt: skip
    trace = tmp_path / "trace"
    trace.mkdir()
    env = _async_env(trace)
    r = subprocess.run([sys.executable, "-c", _MANY_FILES, str(tmp_path), "4096",
                        "write" if write else "open"], env=env, capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "last").read_bytes() == b"y" * 4096
    wb = load(str(trace)).write_behind
    assert (wb["writes"], wb["synchronous"]) == (deferred, synchronous), wb


_FORKS = """
import os, sys
pid = os.fork()
with open(os.path.join(sys.argv[1], "child.dat" if pid == 0 else "parent.dat"), "wb") as f:
    f.write(b"x" * 4096)
if pid:
    os.waitpid(pid, 0)
"""


def test_a_forked_child_has_no_background_thread_of_its_own(tmp_path):
    """With relaxed syncs a forked child still reports what write-behind did
    (it writes synchronously), but never a background thread: only its
    parent has one.  (Its summary once lost the object's closing brace, and
    the whole trace could not be read.)"""
    trace = tmp_path / "trace"
    trace.mkdir()
    env = _async_env(trace, IOPILOT_ASYNC_RELAXED="1")
    subprocess.run([sys.executable, "-c", _FORKS, str(tmp_path)], env=env, check=True,
                   timeout=60)  # fmt: skip
    summaries = [json.loads(p.read_text()) for p in sorted(trace.glob("p*.json"))]
    assert len(summaries) == 2
    threads = ["thread_cpus" in s["write_behind"] for s in summaries]
    assert sorted(threads) == [False, True]
    assert all(s["write_behind"]["relaxed"] == 1 for s in summaries)
    assert load(str(trace)).write_behind["writes"] == 1  # the parent's, deferred


_STDIN_AFTER_FORK = """
import os, sys
with open(os.path.join(sys.argv[1], "before.dat"), "wb") as f:
    f.write(b"x" * 4096)
pid = os.fork()
if pid == 0:
    print("child reads", sys.stdin.read().strip(), flush=True)
    sys.exit(0)
os.waitpid(pid, 0)
"""


def test_a_forked_child_keeps_the_descriptors_it_inherited(tmp_path):
    """After fork the child drops the runtime's own descriptors, and only
    those: its standard input is still there."""
    trace = tmp_path / "trace"
    trace.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_")}
    cmd = [sys.executable, "-c", _STDIN_AFTER_FORK, str(tmp_path)]
    plain = subprocess.run(cmd, env=env, input="hello", capture_output=True, text=True, timeout=60)
    env.update(ASYNC, LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(trace))
    traced = subprocess.run(cmd, env=env, input="hello", capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    assert plain.stdout == "child reads hello\n"
    assert (traced.stdout, traced.stderr, traced.returncode) == (plain.stdout, plain.stderr, 0)
