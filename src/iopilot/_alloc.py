"""Allocator settings for analysing big traces in this process.

The checks make and drop temporary arrays of tens of megabytes in turn.  By
default glibc hands freed memory back to the kernel at once and asks for it
again for the next array, and every fresh page then costs a fault: on a
5-million-record trace that was over a second of a 4-second report.  Here
freed memory stays with the process for the next array instead (peak memory
is unchanged: it is the same pages, used again).  Only this process is
affected; other C libraries are left alone.
"""

from __future__ import annotations

import ctypes

_M_TRIM_THRESHOLD, _M_TOP_PAD = -1, -2  # mallopt parameters (malloc.h)
_done = False


def keep_freed_memory() -> None:
    """Keep freed heap memory for reuse (glibc only; once per process)."""
    global _done
    if _done:
        return
    _done = True
    try:
        # The symbols already loaded (libc among them): no ldconfig subprocess.
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc: nothing to tune
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt(_M_TRIM_THRESHOLD, 1 << 30)  # give memory back only past 1 GiB free at the top
    mallopt(_M_TOP_PAD, 256 << 20)  # grow the heap in big steps: fewer calls, fewer faults


# Inputs from this size on make arrays big enough for the setting to pay
# (a 5-million-record trace is ~100 MiB); below it the default allocator is as
# fast, and loading ctypes to change it costs 4 ms of a 0.2 s report.
BIG_INPUT = 1 << 20


def keep_freed_memory_for(path: str) -> None:
    """``keep_freed_memory()`` when ``path`` (a log, or a trace directory's
    files) holds at least ``BIG_INPUT`` bytes."""
    import os

    try:
        if os.path.isdir(path):
            size = sum(e.stat().st_size for e in os.scandir(path) if e.is_file())
        else:
            size = os.stat(path).st_size
    except OSError:  # the reader says what is wrong with it
        return
    if size >= BIG_INPUT:
        keep_freed_memory()


_quiet = False


def quiet_start() -> None:
    """No cyclic garbage collection while modules load: importing NumPy and the
    checks makes tens of thousands of long-lived objects, and the collector
    walked them again and again (4 % of a one-log report).  ``settled()``
    turns it back on once the imports are done.  For the program's own
    process only, never a process that imported iopilot."""
    import gc

    global _quiet
    if gc.isenabled():
        _quiet = True
        gc.disable()


def settled() -> None:
    """After start-up: keep what is loaded out of every later collection, and
    collect again (analyses of big traces make and drop many objects)."""
    import gc

    global _quiet
    if _quiet:
        _quiet = False
        gc.freeze()
        gc.enable()


def single_threaded_blas() -> None:
    """Start NumPy's BLAS with one thread unless the user chose otherwise.

    iopilot does no linear algebra; OpenBLAS would still start a thread per
    core at import and spin them, which cost a third of the CPU time of a
    small report.  Call before NumPy is imported.
    """
    import os

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
