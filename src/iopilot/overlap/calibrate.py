"""What asynchronous I/O costs on this machine: the copy of a write's buffer
and the hand-off of an operation to the background thread.

Measured in about a tenth of a second each time the advisor runs: a copy of
a buffer larger than the caches (best of three), and small operations sent
through an event set of the real engine one at a time (submit, wait), less
the system call itself.  Both are what the engine adds to the program's own
thread, so they are the overhead the advisor charges per I/O phase.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import numpy as np

from .._record import record

COPY_BYTES = 64 << 20
HANDOFF_OPS = 200


@record(frozen=True)
class Calibration:
    copy_bytes_per_second: float
    handoff_seconds: float  # per operation, beyond the system call
    cores: int  # processors of this machine, for one node's ranks and I/O threads
    measured: bool = True  # False: given by the caller

    def as_dict(self) -> dict[str, Any]:
        return {"copy_bytes_per_second": self.copy_bytes_per_second,
                "handoff_seconds": self.handoff_seconds, "cores": self.cores,
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


def _handoff() -> float:
    from .engine import EventSet

    with tempfile.TemporaryFile() as f:
        fd = f.fileno()
        t0 = time.perf_counter()
        for _ in range(HANDOFF_OPS):
            os.pwrite(fd, b"x", 0)
        direct = (time.perf_counter() - t0) / HANDOFF_OPS
        with EventSet() as es:
            es.write(fd, b"x", 0)
            es.wait()  # the thread is up and the file warm
            t0 = time.perf_counter()
            for _ in range(HANDOFF_OPS):
                es.write(fd, b"x", 0)
                es.wait()
            through = (time.perf_counter() - t0) / HANDOFF_OPS
    return max(through - direct, 0.0)


def measure(cores: int | None = None) -> Calibration:
    """Calibrate on this machine (about 0.1 s)."""
    return Calibration(_copy_rate(), _handoff(), int(cores or os.cpu_count() or 1))
