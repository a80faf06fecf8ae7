"""Work in forked children (src/iopilot/_child.py): one item or a pool of them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from iopilot import _alloc, _child


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
def test_the_program_leaves_no_child_behind(argv):
    # Help, usage errors and reports of several inputs (whose workers end
    # with the report) leave no process running.
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


# ---------------------------------------------------------------------------
# Many items: run_each and run_isolated (in this process: the children are
# forked from it, and each test checks none is left).


def _die_on_odd(i: int) -> int:
    if i % 2:
        os.kill(os.getpid(), signal.SIGSEGV)
    if i == 4:
        os._exit(3)
    if i == 6:
        signal.pause()  # hangs
    return i * 10


def _raise(i: int) -> int:
    raise ValueError(i)


def _no_child_left() -> bool:
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_run_isolated_reports_each_kind_of_death_and_keeps_order():
    items = [(i,) for i in range(8)]
    got = _child.run_isolated(_die_on_odd, items, 2, lambda i, why: why, timeout=3)
    assert got[0] == 0 and got[2] == 20
    assert got[1] == got[3] == got[5] == got[7] == "crashed while reading: signal 11 (SIGSEGV)"
    assert got[4] == "the worker exited with status 3 while reading"
    assert got[6] == "timed out after 3 s while reading"
    assert _no_child_left() and _child._parent_ends == set()


@pytest.mark.parametrize("i,want", [
    (2, _child.Outcome(True, 20)),
    (1, _child.Outcome(False, code=-signal.SIGSEGV)),  # crashes
    (4, _child.Outcome(False, code=3)),  # exits without a result
    (5, _child.Outcome(False, code=-signal.SIGSEGV)),
    (6, _child.Outcome(False, code=-signal.SIGKILL, late=True)),  # hangs: killed at its time-out
])  # fmt: skip
def test_one_item_returns_crashes_exits_or_times_out(i, want):
    t = time.monotonic()
    assert _child.run_in_child(_die_on_odd, (i,), timeout=1) == want
    assert time.monotonic() - t < 10 and _no_child_left()


def test_one_item_that_raises_is_status_1_with_its_traceback(capfd):
    assert _child.run_isolated(_raise, [(5,)], 1, lambda j, why: why) == [
        "the worker exited with status 1 while reading"]  # fmt: skip
    assert "ValueError: 5" in capfd.readouterr().err


def test_a_result_larger_than_a_pipe_buffer_arrives_whole():
    got = _child.run_each(lambda n: bytes(range(256)) * n, [(4096,), (1,)], 2)
    assert [o.value for o in got] == [bytes(range(256)) * 4096, bytes(range(256))]


def test_each_child_serves_items_until_none_are_left():
    # One child per job, not per item: two children serve six items.
    pids = _child.run_isolated(os.getpid, [()] * 6, 2, lambda i, why: why)
    assert len(set(pids)) == 2 and os.getpid() not in pids


def test_an_error_in_the_parent_leaves_no_child_behind():
    # Ctrl-C or a failing progress callback: the children still running are killed.
    def each() -> None:
        raise KeyboardInterrupt

    t = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        _child.run_each(_die_on_odd, [(0,), (6,), (6,)], 3, each=each)
    assert _no_child_left() and _child._parent_ends == set() and time.monotonic() - t < 10


def test_reasons_name_the_signal_the_status_or_the_time_out():
    def why(timeout: float | None = None, **outcome) -> str:
        return _child.Outcome(False, **outcome).reason(timeout)

    assert why(code=-6) == "crashed while reading: signal 6 (SIGABRT)"
    assert why(code=-99) == "crashed while reading: signal 99"
    assert why(code=2) == "the worker exited with status 2 while reading"
    assert why(2.5, code=-9, late=True) == "timed out after 2.5 s while reading"
