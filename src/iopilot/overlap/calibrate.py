"""What asynchronous I/O costs on this machine: the copy of a write's buffer
and the hand-off of an operation to the background thread.

Measured in about a second each time the advisor runs: a copy of a
buffer larger than the caches (best of three), what the C engine itself
measures for a submission while its thread is busy and for waking it when
idle, and how much a computing loop slows while the
engine's thread writes 64 MiB beside it.  The first two are what the
engine adds to the program's own thread per I/O phase; the third is what
overlapped writes cost the computation even when a core is free.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import numpy as np

from .._record import record
from .engine import EventSet, costs

COPY_BYTES = 64 << 20


@record(frozen=True)
class Calibration:
    copy_bytes_per_second: float
    handoff_seconds: float  # per operation submitted while the thread is busy
    cores: int  # processors of this machine, for one node's ranks and I/O threads
    measured: bool = True  # False: given by the caller
    # Waking the idle thread for a phase's first operation.
    wakeup_seconds: float = 0.0
    # The thread's own time per operation beyond the system call (taking it
    # off the queue, accounting, freeing the copy).
    thread_seconds: float = 0.0
    # Seconds of computation lost per second of write calls running beside
    # it, even with a core to spare (shared memory bandwidth, the kernel's
    # own writeback threads, virtual CPUs on one physical core).
    interference: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"copy_bytes_per_second": self.copy_bytes_per_second,
                "handoff_seconds": self.handoff_seconds, "wakeup_seconds": self.wakeup_seconds,
                "thread_seconds": self.thread_seconds,
                "cores": self.cores, "interference": self.interference,
                "measured": self.measured}  # fmt: skip


def _copy_rate() -> float:
    src = np.ones(COPY_BYTES, np.uint8)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return COPY_BYTES / best


def _spin(n: int) -> float:
    """Seconds for ``n`` rounds of a pure-computation loop."""
    t0 = time.perf_counter()
    x = 1.0
    for _ in range(n):
        x = x * 0.9999999 + 1e-7
    return time.perf_counter() - t0


def _interference() -> float:
    """Computation lost per second of write calls the engine's thread makes
    beside it: the same loop alone and while 64 MiB are written (median of
    three), over the thread's time in the write."""
    n = 200_000
    alone = min(_spin(n) for _ in range(3))
    n = max(int(n * 0.15 / alone), 1000)  # about 150 ms of loop
    alone = min(_spin(n) for _ in range(3))
    block = np.ones(COPY_BYTES, np.uint8)
    losses = []
    with tempfile.TemporaryFile() as f, EventSet() as es:
        for _ in range(3):
            before = es.stats()["busy_seconds"]
            es.write(f.fileno(), block, 0)
            spun = _spin(n)
            es.wait()
            busy = es.stats()["busy_seconds"] - before
            overlap = min(spun, busy)
            losses.append(max(spun - alone, 0.0) / overlap if overlap > 0 else 0.0)
    return float(min(max(sorted(losses)[1], 0.0), 1.0))


def measure(cores: int | None = None) -> Calibration:
    """Calibrate on this machine (about a second)."""
    submit, wake, thread = costs()
    return Calibration(_copy_rate(), submit, int(cores or os.cpu_count() or 1),
                       wakeup_seconds=wake, thread_seconds=thread,
                       interference=_interference())
