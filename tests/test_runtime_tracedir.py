"""The runtime's trace directory and the names it records: a directory swapped
for a link while the program runs gets nothing more and leads nothing
elsewhere; a file system that fills up is named as the reason the trace is
incomplete; relative names that start with '<' keep their directory; files
below directories too deep for getcwd keep distinct names.  Each case runs
plain and with write-behind (IOPILOT_ASYNC=1)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iopilot.capture.run import library_path
from rawtrace import RawProc
from test_runtime_behind import small_fs  # noqa: F401  (a fixture)

RUNTIME = Path(__file__).resolve().parents[1] / "runtime"
CC = shutil.which("cc") or shutil.which("gcc")
PY = sys.executable
MODES = pytest.mark.parametrize("env", [{}, {"IOPILOT_ASYNC": "1"}], ids=["plain", "async"])
DEEP = "d" * 200  # 25 of them make a path longer than PATH_MAX


@pytest.fixture(scope="module")
def names_prog(tmp_path_factory) -> Path:
    if CC is None:
        pytest.skip("no C compiler")
    exe = tmp_path_factory.mktemp("bin") / "names"
    subprocess.run([CC, "-O1", "-Wall", "-Werror", "-o", str(exe), str(RUNTIME / "tests/names.c")],
                   check=True)  # fmt: skip
    return exe


def traced_env(trace: Path, env: dict[str, str]) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_") and k != "LD_PRELOAD"}
    return {**e, **env, "LD_PRELOAD": str(library_path()), "IOPILOT_TRACE_DIR": str(trace)}


def procs(trace: Path) -> list[RawProc]:
    return [RawProc(p) for p in sorted(trace.glob("p*.json"))]


def fill(fs: Path, leave: int) -> None:
    """Fill the file system ``fs`` to the last byte, then free ``leave`` bytes."""
    fd = os.open(fs / "filler", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        for chunk in (b"\0" * (1 << 16), b"\0" * 512):
            while True:
                try:
                    if os.write(fd, chunk) < len(chunk):
                        continue  # the next write says why
                except OSError as e:
                    assert e.errno == errno.ENOSPC, e
                    break
        os.ftruncate(fd, os.fstat(fd).st_size - leave)
    finally:
        os.close(fd)


# -- a trace directory swapped for a link --------------------------------------

# Waits on stdin while the test swaps its trace directory, then makes new names,
# a forked image and an exec'd image, and exits: every one of them would write.
SWAPPED = r"""
import os, subprocess, sys
work = sys.argv[1]
print("ready", flush=True)
sys.stdin.readline()
for i in range(300):
    with open(os.path.join(work, f"after-{i:03d}-" + "x" * 100), "w") as f:
        f.write("y")
pid = os.fork()
if pid == 0:
    with open(os.path.join(work, "child.dat"), "w") as f:
        f.write("c")
    os._exit(0)
os.waitpid(pid, 0)
subprocess.run(["/bin/true"], check=True)
print("done", flush=True)
"""


@MODES
def test_a_trace_dir_swapped_for_a_link_leads_no_file_elsewhere(tmp_path, env):
    trace, work, target = tmp_path / "trace", tmp_path / "work", tmp_path / "target"
    for d in (trace, work, target):
        d.mkdir()
    p = subprocess.Popen([PY, "-c", SWAPPED, str(work)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=traced_env(trace, env))  # fmt: skip
    assert p.stdout.readline() == "ready\n"
    moved = tmp_path / "moved"
    trace.rename(moved)
    trace.symlink_to(target)
    out, err = p.communicate("go\n", timeout=60)
    assert p.returncode == 0 and out == "done\n", err
    assert len(list(work.iterdir())) == 301  # the program did all it meant to
    assert list(target.iterdir()) == []
    assert list(moved.glob("p*.rec"))  # the runtime had started in the real directory


# -- a file system that fills up ------------------------------------------------

# 400 files with long names: their names outgrow the little room left.
MANY_NAMES = r"""
import os, sys
for i in range(400):
    with open(os.path.join(sys.argv[1], f"{i:03d}-" + "n" * 200), "w") as f:
        f.write("x")
"""


@MODES
def test_a_file_system_that_fills_up_is_the_reason_given(tmp_path, small_fs, env):  # noqa: F811
    work, d = tmp_path / "work", small_fs / "t"
    work.mkdir()
    fill(small_fs, leave=8 * 4096)  # job.json, the header and a few pages of names
    e = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_")}
    p = subprocess.run([PY, "-m", "iopilot", "run", "--color", "never", "--trace-dir", str(d),
                        "--", PY, "-c", MANY_NAMES, str(work)], capture_output=True, text=True,
                       timeout=120, env={**e, **env}, cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert len(list(work.iterdir())) == 400
    assert "Traceback" not in p.stderr and "could not diagnose" not in p.stderr, p.stderr
    assert "damaged" not in p.stdout + p.stderr
    assert f"the trace is incomplete: the file system of {d} was full (no space left on " \
           "device)" in p.stdout  # fmt: skip


# -- names ----------------------------------------------------------------------


@MODES
def test_relative_names_that_start_with_lt_keep_their_directory(names_prog, tmp_path, env):
    trace, work = tmp_path / "trace", tmp_path / "work"
    trace.mkdir()
    work.mkdir()
    p = subprocess.run([str(names_prog), "lt"], cwd=work, capture_output=True, text=True,
                       timeout=60, env=traced_env(trace, env))  # fmt: skip
    assert p.returncode == 0 and p.stdout == "lt done\n", p.stderr
    (proc,) = procs(trace)
    assert proc.get("POSIX", f"{work}/<weird>.dat")["BYTES_WRITTEN"] == 3
    assert proc.get("STDIO", f"{work}/<odd>.txt")["BYTES_WRITTEN"] == 5
    assert proc.get("STDIO", "<STDOUT>")["BYTES_WRITTEN"] == len("lt done\n")  # ours keep theirs


def _innermost(top: Path) -> os.stat_result:
    """The deepest directory below ``top``, found step by step (its path is too long)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(25):
            fd, old = os.open(DEEP, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
            os.close(old)
        return os.fstat(fd)
    finally:
        os.close(fd)


@MODES
def test_files_below_directories_too_deep_for_getcwd_keep_distinct_names(names_prog, tmp_path,
                                                                         env):  # fmt: skip
    trace, work = tmp_path / "trace", tmp_path / "work"
    trace.mkdir()
    work.mkdir()
    p = subprocess.run([str(names_prog), "deep", str(work)], capture_output=True, text=True,
                       timeout=60, env=traced_env(trace, env))  # fmt: skip
    assert p.returncode == 0 and p.stdout == "deep done\n", (p.returncode, p.stderr)
    (proc,) = procs(trace)
    written = {path: c["BYTES_WRITTEN"] for (layer, path), c in proc.counters.items()
               if layer == "POSIX" and path.endswith("f.dat")}  # fmt: skip
    expected = {}
    for sub, n in (("a", 100), ("b", 200)):
        st = _innermost(work / sub)
        expected[f"<directory {os.major(st.st_dev)}:{os.minor(st.st_dev)} inode {st.st_ino}>"
                 "/f.dat"] = n  # fmt: skip
    assert written == expected
