"""Work in a forked child (src/iopilot/_child.py) and the program's warm child."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

from iopilot import _alloc

# Run in a fresh interpreter: forks from the test process would copy pytest.
_SCRIPT = """
import os, signal, sys
from iopilot import _child

def preload():
    with open(sys.argv[1], "w") as f:
        f.write(str(os.getpid()))
    {preload}

def work(path, how):
    if how == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if how == "hang":
        signal.pause()
    with open(path, "w") as f:
        f.write(str(os.getpid()))
    return 7

{start}
code, late = _child.run_in_child(work, (sys.argv[2], sys.argv[3]), timeout=2)
print(code, late)
"""


def _script(tmp_path, how: str, warm: bool = True, preload: str = "") -> tuple[str, str, str]:
    code = _SCRIPT.format(preload=preload, start="_child.warm_up(preload)" if warm else "")
    pre, done = tmp_path / "pre", tmp_path / "done"
    r = subprocess.run([sys.executable, "-c", code, str(pre), str(done), how],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.stderr == "" or how == "raise", r.stderr
    return r.stdout.strip(), _read(pre), _read(done)


def _read(p) -> str:
    return p.read_text() if p.exists() else ""


def test_the_warm_child_loads_first_then_runs_the_work_it_is_given(tmp_path):
    out, pre, done = _script(tmp_path, "ok")
    assert out == "7 False"
    assert pre and pre == done  # one child: preloaded, then ran the work


def test_without_a_warm_child_the_work_gets_a_fresh_one(tmp_path):
    out, pre, done = _script(tmp_path, "ok", warm=False)
    assert out == "7 False" and pre == "" and done


@pytest.mark.parametrize("warm", [True, False])
def test_a_child_that_crashes_or_hangs_is_told_apart(tmp_path, warm):
    assert _script(tmp_path, "segv", warm)[0] == "-11 False"
    t = time.monotonic()
    assert _script(tmp_path, "hang", warm)[0] == "-9 True"
    assert time.monotonic() - t < 30


def test_a_warm_child_that_dies_while_loading_gives_its_status(tmp_path):
    out, pre, done = _script(tmp_path, "ok", preload="os._exit(5)")
    assert out == "5 False" and pre and done == ""


def _alive_with(mark: str) -> list[int]:
    """Processes whose environment holds ``mark``."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/environ", "rb") as f:
                    if mark.encode() in f.read():
                        pids.append(int(d))
            except OSError:
                pass
    return pids


@pytest.mark.parametrize("argv", [["report", "--help"], ["report", "--no-such-option", "x"],
                                  ["report", "two", "logs"]])  # fmt: skip
def test_the_program_leaves_no_warm_child_behind(argv):
    # `iopilot report` starts its child before it reads the command line;
    # help, usage errors and reports of several inputs do not use it.
    mark = f"IOPILOT_TEST_MARK={uuid.uuid4().hex}"
    env = dict(os.environ, IOPILOT_TEST_MARK=mark.split("=")[1])
    # Not through pipes: reading them to their end would wait for every
    # process that holds them, a left-over child too.
    quiet = subprocess.DEVNULL
    r = subprocess.run([sys.executable, "-m", "iopilot", *argv], env=env, stdout=quiet,
                       stderr=quiet, timeout=60)  # fmt: skip
    assert r.returncode in (0, 2)
    assert _alive_with(mark) == []


def test_the_allocator_setting_is_for_big_inputs_only(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(_alloc, "keep_freed_memory", lambda: calls.append(1))
    small, big = tmp_path / "small.darshan", tmp_path / "big.darshan"
    small.write_bytes(b"x" * (_alloc.BIG_INPUT - 1))
    big.write_bytes(b"x" * _alloc.BIG_INPUT)
    trace = tmp_path / "trace"
    trace.mkdir()
    for i in range(2):  # a directory counts its files together
        (trace / f"r{i}").write_bytes(b"x" * (_alloc.BIG_INPUT // 2))
    for path, want in ((small, 0), (big, 1), (trace, 1), (tmp_path / "missing", 0)):
        calls.clear()
        _alloc.keep_freed_memory_for(str(path))
        assert len(calls) == want, path


def test_work_that_cannot_be_sent_leaves_the_warm_child_to_release():
    # A function or arguments that do not pickle fail in the parent, and the
    # warm child is still stopped by release() (the program calls it last).
    code = ("import os, sys\nfrom iopilot import _child\n"
            "_child.warm_up(lambda: None)\npid = _child._warm[0]\n"
            "try:\n    _child.run_in_child(print, (lambda: 0,))\n"
            "except Exception as e:\n    print(type(e).__name__)\n"
            "_child.release()\n"
            "try:\n    os.kill(pid, 0)\n    print('alive')\n"
            "except ProcessLookupError:\n    print('gone')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["PicklingError", "gone"], r.stderr
