"""Run one piece of the program in a forked child and wait for its exit status.

A one-log report runs whole in a child: a log that crashes the C library
kills the child, not the report.  Two things make that child cheap:

* it is forked before NumPy, the checks and the readers are imported: a child
  forked from a process that has them loaded copies every page of them it
  touches (their reference counts change as it runs), about 5,000 page copies
  and 10-15 ms of a 0.2 s report;
* the program forks it at start (``warm_up``), so that it imports those
  modules on one core while the parent reads its command line on the other;
  ``run_in_child`` then hands it the work, and ``release`` stops it when the
  command needs no child after all.

This module imports nothing heavy, so the parent stays small.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

# The child warm_up() started and has not been given work: (pid, the write
# end of its work pipe, the read end that reaches end of file when it exits).
_warm: list[int] = []


def flush_std() -> None:
    """Flush standard output and error; a stream that cannot be flushed is left."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):
            pass


def _child_runs(work: Callable[[], tuple[Callable[..., int], tuple[Any, ...]] | None]) -> None:
    """In the child: run the function ``work()`` returns, exit with its status."""
    code = 1
    try:
        job = work()
        if job is None:  # no work came: the parent did not need this child
            code = 0
        else:
            import faulthandler

            faulthandler.disable()  # a crash is the parent's one-line error, not a stack dump
            fn, args = job
            code = fn(*args)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # a traceback and status 1, as the program would have
        import traceback

        traceback.print_exc()
    finally:
        flush_std()
        os._exit(code)


def warm_up(preload: Callable[[], None]) -> None:
    """Fork, now, the child that ``run_in_child`` will use: it runs
    ``preload()`` (imports), then waits for its work or for end of file."""
    if _warm:
        return
    flush_std()  # else the child would write out the parent's buffered text again
    work_r, work_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; its effects are tested through the parent
        os.close(work_w)
        os.close(done_r)

        def work() -> tuple[Callable[..., int], tuple[Any, ...]] | None:
            try:
                preload()
            except Exception:  # the work imports them again and reports what is wrong
                pass
            chunks = []
            while chunk := os.read(work_r, 1 << 16):
                chunks.append(chunk)
            if not chunks:
                return None
            import pickle

            return pickle.loads(b"".join(chunks))  # type: ignore[no-any-return]

        _child_runs(work)
    os.close(work_r)
    os.close(done_w)  # the child holds the only write end: end of file when it has gone
    _warm[:] = [pid, work_w, done_r]


def release() -> None:
    """Stop the child ``warm_up`` started if it was given no work."""
    if not _warm:
        return
    pid, work_w, done_r = _warm
    _warm.clear()
    os.close(work_w)
    os.close(done_r)
    try:
        os.kill(pid, 9)  # it may be in the middle of its imports: no need to wait for them
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


def run_in_child(fn: Callable[..., int], args: tuple[Any, ...],
                 timeout: float | None = None) -> tuple[int, bool]:  # fmt: skip
    """``fn(*args)`` in a forked child (the one ``warm_up`` started, if any;
    then ``fn`` and ``args`` must pickle) that exits with the status it returns.

    Returns (the child's exit status, or minus the signal that killed it;
    whether it ran past ``timeout`` seconds and was killed).  The child skips
    the interpreter's shutdown: it flushes its output and leaves.
    """
    import select

    if _warm:
        import pickle

        data = pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL)  # before: may fail
        pid, work_w, r = _warm
        _warm.clear()
        try:
            with os.fdopen(work_w, "wb") as pipe:  # closed: the child sees the end of its work
                pipe.write(data)
        except BrokenPipeError:  # it died before it read: its exit status says how
            pass
    else:
        flush_std()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.close(r)
            _child_runs(lambda: (fn, args))
        os.close(w)  # the child holds the only write end: end of file when it has gone
    late = False
    try:
        if not select.select([r], [], [], timeout)[0]:
            late = True
            os.kill(pid, 9)
    finally:
        os.close(r)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), late
