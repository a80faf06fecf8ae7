"""Reading many logs in worker processes where one bad log costs one row.

A damaged log can abort or crash the C library that reads it (libdarshan-util
calls ``abort()`` on some), which ends the whole process.  With
``concurrent.futures`` one such death breaks the pool and every other log
with it; here each worker serves one log at a time, the parent knows which
log each worker holds, and a worker that dies is replaced while its log is
reported as crashed.  Workers are forked, so the function and its arguments
are inherited, never pickled; only results travel back.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

from .._child import flush_std
from .darshan_log import signal_name


def _serve(fn: Callable[..., Any], items: Sequence[tuple[Any, ...]], conn: Connection) -> None:
    import faulthandler

    faulthandler.disable()  # a crash is the parent's one-line row, not a stack dump
    while True:
        i = conn.recv()
        if i is None:
            return
        conn.send((i, fn(*items[i])))


class _Worker:
    def __init__(self, ctx: Any, fn: Callable[..., Any], items: Sequence[tuple[Any, ...]]):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(fn, items, child), daemon=True)
        self.proc.start()
        child.close()
        self.task: int | None = None
        self.since = 0.0

    def give(self, i: int | None) -> None:
        self.task, self.since = i, time.monotonic()
        try:
            self.conn.send(i)
        except OSError:  # already dead: its sentinel reports it
            pass


def why(code: int, late: bool, timeout: float | None) -> str:
    """The one-line reason an item failed, from its worker's exit code."""
    return (f"timed out after {timeout:g} s while reading" if late else
            f"crashed while reading: {signal_name(-code)}" if code < 0 else
            f"the worker exited with status {code} while reading")  # fmt: skip


def _run_one(fn: Callable[..., Any], item: tuple[Any, ...], failed: Callable[[int, str], Any],
             timeout: float | None) -> Any:  # fmt: skip
    """``fn(*item)`` in one forked child, with a pipe and pickle.

    The same isolation as the pool below, without importing multiprocessing
    (and the socket, selectors and threading it pulls in), which is a
    measurable part of a one-log report's start-up.
    """
    import pickle
    import select

    flush_std()  # else the child would write out the parent's buffered text again
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; its effects are tested through the parent
        code = 1
        try:
            os.close(r)
            import faulthandler

            faulthandler.disable()  # a crash is the parent's one-line row, not a stack dump
            data = pickle.dumps(fn(*item), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(w, "wb") as out:
                out.write(data)
            code = 0
        except BaseException:  # as a multiprocessing worker: a traceback, status 1
            import traceback

            traceback.print_exc()
        finally:
            flush_std()
            os._exit(code)
    os.close(w)
    chunks: list[bytes] = []
    late = False
    deadline = time.monotonic() + timeout if timeout else None
    with os.fdopen(r, "rb", buffering=0) as pipe:
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([pipe], [], [], left)[0]:
                late = True
                os.kill(pid, 9)
                break
            chunk = pipe.read(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if not late and chunks:
        try:  # a result first: a worker may send it and die right after
            return pickle.loads(b"".join(chunks))
        except Exception:  # cut short by a crash mid-write
            pass
    return failed(0, why(code, late, timeout))


def run_isolated(fn: Callable[..., Any], items: Sequence[tuple[Any, ...]], jobs: int,
                 failed: Callable[[int, str], Any], timeout: float | None = None,
                 each: Callable[[], None] | None = None) -> list[Any]:  # fmt: skip
    """``[fn(*item) for item in items]`` in ``jobs`` forked workers.

    When a worker dies (a signal, an exit) or runs longer than ``timeout``
    seconds on one item, that item's result is ``failed(index, why)``, the
    worker is replaced, and the other items go on.  ``each`` is called as
    each item ends (a progress bar).
    """
    if len(items) == 1:
        result = _run_one(fn, items[0], failed, timeout)
        if each:
            each()
        return [result]
    import multiprocessing
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("fork")
    todo = deque(range(len(items)))
    results: list[Any] = [None] * len(items)
    done = [False] * len(items)
    workers: list[_Worker] = []

    def start_one() -> None:
        w = _Worker(ctx, fn, items)
        workers.append(w)
        w.give(todo.popleft())

    for _ in range(min(jobs, len(todo))):
        start_one()
    while workers:
        left = None
        busy = [w.since for w in workers if w.task is not None]
        if timeout and busy:
            left = max(0.0, min(busy) + timeout - time.monotonic())
        ready = set(wait([w.conn for w in workers] + [w.proc.sentinel for w in workers], left))
        for w in list(workers):
            # A result first: a worker may send it and die right after.
            while w.task is not None and w.conn in ready and w.conn.poll():
                try:
                    i, res = w.conn.recv()
                except (EOFError, OSError):
                    break
                results[i], done[i] = res, True
                if each:
                    each()
                w.give(todo.popleft() if todo else None)
            dead = w.proc.sentinel in ready or w.task is None
            late = timeout and w.task is not None and time.monotonic() - w.since > timeout
            if late:
                w.proc.kill()
            if not (dead or late):
                continue
            w.proc.join()
            if w.task is not None and not done[w.task]:
                reason = why(w.proc.exitcode or 0, bool(late), timeout)
                results[w.task], done[w.task] = failed(w.task, reason), True
                if each:
                    each()
            w.conn.close()
            workers.remove(w)
            if todo:
                start_one()
    return results
