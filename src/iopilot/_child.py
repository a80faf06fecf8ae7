"""Work in forked children: the one way iopilot runs code in another process.

Three users, one mechanism:

* a one-log ``iopilot report`` runs whole in a child (``run_in_child``): a
  log that crashes the Darshan C library kills the child, not the report;
* many logs run in a pool of such children (``run_isolated``): a log whose
  child dies costs its own row, not the run;
* the Darshan reader reads an uncompressed log, which has no checksum to
  check it by, in a child (``run_in_child``).

A child is forked: it inherits the function and the items, serves one item
at a time over a pipe and sends each result back pickled.  A child that dies
(a signal, an exit) or runs past its time-out is killed, reaped and replaced;
its item's ``Outcome`` says which, and ``Outcome.reason`` is the one line a
report prints for it.  This module imports nothing heavy (no
``multiprocessing``, whose socket, selectors and threading are a measurable
part of a one-log report's start-up), so the parent stays small.

A one-log report's child is forked when the report starts, not when the
program starts.  A "warm" child forked first imports the report's modules on
one core while the parent reads its command line on the other: the same CPU
time, less wall time only where a second core is idle.  On a 2-core machine
shared with other work it lost (``iopilot report LOG`` over every eighth log
of the shared corpus, 15 runs each, interleaved: 92 ms wall at best with it,
85 ms without); on the same machine quiet, the code before and after it
went (``iopilot bench diagnose --repeat 5`` over the 58 logs) took 0.084 s
and 0.091 s per log, with 118 ms and 117 ms of CPU a report.  Seven
milliseconds on an idle machine did not pay for a second process
life-cycle to keep right; a pool of many logs never had the gain.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ._record import record

_SIZE = 8  # bytes of the length that comes before each pickled message

# The parent's ends of the pipes of every child alive: a child closes them
# first, so that each child's pipes end when the parent closes them.
_parent_ends: set[int] = set()


def flush_std() -> None:
    """Flush standard output and error; a stream that cannot be flushed is left."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):
            pass


def signal_name(sig: int) -> str:
    """``signal 6 (SIGABRT)``."""
    try:
        return f"signal {sig} ({signal.Signals(sig).name})"
    except ValueError:
        return f"signal {sig}"


@record
class Outcome:
    """How one item's run ended: its ``value`` when ``ok``; else the child's
    exit status (minus the signal that killed it), ``late`` when it ran past
    its time-out and was killed."""

    ok: bool
    value: Any = None
    code: int = 0
    late: bool = False

    def reason(self, timeout: float | None) -> str:
        """The one-line reason an item gave no result."""
        return (f"timed out after {timeout:g} s while reading" if self.late else
                f"crashed while reading: {signal_name(-self.code)}" if self.code < 0 else
                f"the worker exited with status {self.code} while reading")  # fmt: skip


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _send(fd: int, data: bytes) -> None:
    """``data`` (a pickle) on ``fd``, after its length."""
    head = len(data).to_bytes(_SIZE, "little")
    if len(data) < 1 << 16:
        _write_all(fd, head + data)
    else:  # not copied into one buffer with its length
        _write_all(fd, head)
        _write_all(fd, data)


def _pickle(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _read_exact(fd: int, n: int) -> bytearray | None:
    """``n`` bytes from ``fd``; None if it ends first (the writer has gone)."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = os.readv(fd, [view[got:]])
        if not k:
            return None
        got += k
    return buf


def _receive(fd: int) -> tuple[bool, Any]:
    """(True, the next object sent on ``fd``) or (False, None) at its end."""
    head = _read_exact(fd, _SIZE)
    data = None if head is None else _read_exact(fd, int.from_bytes(head, "little"))
    if data is None:
        return False, None
    try:
        return True, pickle.loads(data)
    except Exception:  # cut short by a crash mid-write
        return False, None


def _serve(do: Callable[[Any], Any], tasks: int, results: int) -> None:
    """In the child: ``do(task)`` for each task received, each result sent
    back; exit 0 at the end of the tasks, 1 with a traceback if ``do`` raises."""
    code = 1
    try:
        import faulthandler

        faulthandler.disable()  # a crash is the parent's one-line error, not a stack dump
        while True:
            more, task = _receive(tasks)
            if not more:
                break
            _send(results, _pickle(do(task)))
        code = 0
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # a traceback and status 1, as the program would have
        import traceback

        traceback.print_exc()
    finally:
        flush_std()
        os._exit(code)


class _Child:
    """A forked process that runs ``do(task)`` for each task it is given."""

    def __init__(self, do: Callable[[Any], Any]) -> None:
        flush_std()  # else the child would write out the parent's buffered text again
        task_r, self.tasks = os.pipe()
        self.results, result_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # pragma: no cover - the child; its effects are tested through the parent
            for fd in (*_parent_ends, self.tasks, self.results):
                os.close(fd)
            _parent_ends.clear()
            _serve(do, task_r, result_w)
        os.close(task_r)
        os.close(result_w)  # the child holds the only write end: end of file when it has gone
        _parent_ends.update((self.tasks, self.results))
        self.item = -1
        self.since = 0.0

    def give(self, item: int, task: bytes) -> None:
        """Send it ``task`` (the pickled index) for ``item``."""
        self.item, self.since = item, time.monotonic()
        try:
            _send(self.tasks, task)
        except BrokenPipeError:  # it died before it read: its end of file says how
            pass

    def end(self, kill: bool = False) -> int:
        """Stop the child (at once with ``kill``) and reap it: its exit
        status, or minus the signal that ended it."""
        if kill:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for fd in (self.tasks, self.results):  # the end of its tasks: it leaves
            os.close(fd)
            _parent_ends.discard(fd)
        return os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])


def run_each(fn: Callable[..., Any], items: Sequence[tuple[Any, ...]], jobs: int = 1,
             timeout: float | None = None,
             each: Callable[[], None] | None = None) -> list[Outcome]:  # fmt: skip
    """``fn(*item)`` for each item in ``jobs`` forked children, one item at a
    time each: an Outcome per item, in order.  A child that dies or runs past
    ``timeout`` seconds on one item is replaced, and the other items go on.
    ``each`` is called as each item ends (a progress bar)."""
    out: list[Outcome] = [Outcome(False)] * len(items)
    todo = deque(range(len(items)))
    busy: list[_Child] = []

    def add() -> None:
        child = _Child(lambda i: fn(*items[i]))
        busy.append(child)
        i = todo.popleft()
        child.give(i, _pickle(i))

    def finish(child: _Child, outcome: Outcome, alive: bool) -> None:
        out[child.item] = outcome
        if each:
            each()
        if alive and todo:  # the same child serves the next item
            i = todo.popleft()
            child.give(i, _pickle(i))
            return
        busy.remove(child)
        if alive:
            child.end()
        if todo:
            add()

    try:
        while todo and len(busy) < max(1, jobs):
            add()
        while busy:
            left = None
            if timeout:
                left = max(0.0, min(c.since for c in busy) + timeout - time.monotonic())
            ready = select.select([c.results for c in busy], [], [], left)[0]
            now = time.monotonic()
            for child in list(busy):
                if child.results in ready:
                    # A result first: a child may send it and die right after.
                    sent, value = _receive(child.results)
                    if sent:
                        finish(child, Outcome(True, value), alive=True)
                    else:
                        finish(child, Outcome(False, code=child.end()), alive=False)
                elif timeout and now - child.since >= timeout:
                    finish(child, Outcome(False, code=child.end(kill=True), late=True),
                           alive=False)  # fmt: skip
    finally:
        for child in busy:  # an exception here (Ctrl-C): no child outlives the call
            child.end(kill=True)
    return out


def run_isolated(fn: Callable[..., Any], items: Sequence[tuple[Any, ...]], jobs: int,
                 failed: Callable[[int, str], Any], timeout: float | None = None,
                 each: Callable[[], None] | None = None) -> list[Any]:  # fmt: skip
    """``[fn(*item) for item in items]`` as ``run_each`` runs them; an item
    whose child gave no result is ``failed(index, why)``."""
    outs = run_each(fn, items, jobs, timeout, each)
    return [o.value if o.ok else failed(i, o.reason(timeout)) for i, o in enumerate(outs)]


def run_in_child(fn: Callable[..., Any], args: tuple[Any, ...],
                 timeout: float | None = None) -> Outcome:  # fmt: skip
    """``fn(*args)`` in a forked child, as ``run_each`` runs one item."""
    return run_each(fn, [args], 1, timeout)[0]
