"""Run a piece of the program in a forked child and wait for its exit status.

For a one-log report the whole report runs in the child, forked before NumPy,
the checks and the readers are imported: a child forked from a process that
has them loaded copies every page it touches of them (their reference counts
change as it runs), about 5,000 page copies and 10-15 ms of a 0.2 s report.
This module imports nothing heavy, so the parent stays small.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):
            pass


def run_in_child(fn: Callable[[], int], timeout: float | None = None) -> tuple[int, bool]:
    """``fn()`` in a forked child that exits with the status it returns.

    Returns (the child's exit status, or minus the signal that killed it;
    whether it ran past ``timeout`` seconds and was killed).  The child skips
    the interpreter's shutdown: it flushes its output and leaves.
    """
    import select

    _flush_std()  # else the child would write out the parent's buffered text again
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; its effects are tested through the parent
        code = 1
        try:
            os.close(r)
            import faulthandler

            faulthandler.disable()  # a crash is the parent's one-line error, not a stack dump
            code = fn()
        except KeyboardInterrupt:
            code = 130
        except BaseException:  # a traceback and status 1, as the program would have
            import traceback

            traceback.print_exc()
        finally:
            _flush_std()
            os._exit(code)
    os.close(w)  # the child holds the only write end: end of file when it has gone
    late = False
    try:
        if not select.select([r], [], [], timeout)[0]:
            late = True
            os.kill(pid, 9)
    finally:
        os.close(r)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), late
