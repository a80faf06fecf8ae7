"""What asynchronous I/O costs on this machine: the copy of a write's buffer,
the hand-off of an operation to the background thread, and what the
thread's writes take from a computation beside it.

Measured in a second or two each time the advisor runs: a copy of a
buffer larger than the caches (best of three); what the C engine itself
measures for a submission while its thread is busy and for waking it when
idle; and how much a computing loop slows while the engine's thread
writes beside it, twice: with the thread on another CPU (the loss even
with a core to spare) and with both held on one CPU, as under a launcher
that binds a rank to one core (the write's CPU time and what taking turns
adds: switches, caches refilled).  The first two are what the engine adds
to the program's own thread per I/O phase.
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
    # Seconds of computation lost per CPU second of write calls made on the
    # computation's own core (a rank bound to one core, its I/O thread
    # inheriting it): at least 1, the two taking turns.
    shared_core: float = 1.0

    def as_dict(self) -> dict[str, Any]:
        return {"copy_bytes_per_second": self.copy_bytes_per_second,
                "handoff_seconds": self.handoff_seconds, "wakeup_seconds": self.wakeup_seconds,
                "thread_seconds": self.thread_seconds,
                "cores": self.cores, "interference": self.interference,
                "shared_core": self.shared_core,
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


def _spin(rounds: int) -> float:
    """Seconds for ``rounds`` rounds of floating-point work on a small array
    that stays in the processor's first cache (arithmetic, not memory
    traffic: what a computation loses here is processor time)."""
    a = np.ones(4096)
    t0 = time.perf_counter()
    for _ in range(rounds):
        np.multiply(a, 0.9999999, out=a)
        np.add(a, 1e-7, out=a)
    return time.perf_counter() - t0


WRITE_SECONDS = 0.1  # the thread's writes per measurement, and the loop beside them


def _write_cpu(es: EventSet, fd: int, block: np.ndarray, n: int) -> float:
    """Process CPU seconds of ``n`` writes of ``block`` by the engine's thread
    into an emptied file, the calling thread blocked in the wait meanwhile."""
    os.ftruncate(fd, 0)  # new pages each time, as a program's new data needs
    t0 = time.process_time()
    for k in range(n):
        es.write(fd, block, k * len(block))
    es.wait()
    return time.process_time() - t0


def _beside(es: EventSet, fd: int, block: np.ndarray, n: int,
            rounds: int) -> tuple[float, float]:  # fmt: skip
    """The loop's seconds while ``n`` writes run, and the seconds until both
    the loop and the writes were done."""
    os.ftruncate(fd, 0)
    t0 = time.perf_counter()
    for k in range(n):
        es.write(fd, block, k * len(block))
    spun = _spin(rounds)
    es.wait()
    return spun, time.perf_counter() - t0


def _interference() -> tuple[float, float]:
    """(computation lost per second of writes beside it on another CPU,
    computation lost per CPU second of writes on its own CPU), each the
    median of three.  The writes fill an emptied file, as a program's new
    data does, and last about as long as the loop, so the loss is not a
    small difference over a short overlap."""
    block = np.ones(COPY_BYTES // 4, np.uint8)
    mine = os.sched_getaffinity(0)
    here = {min(mine)}  # the CPU the loop is held on
    free, shared = [], []
    with tempfile.TemporaryFile() as f:
        fd = f.fileno()
        try:
            # Both on this CPU: the thread inherits the one CPU it is made on.
            os.sched_setaffinity(0, here)
            with EventSet() as es:
                cpu = min(_write_cpu(es, fd, block, 2) / 2 for _ in range(2))
                n = max(1, min(16, round(WRITE_SECONDS / max(cpu, 1e-4))))
                rounds = 2000
                alone = min(_spin(rounds) for _ in range(2))
                rounds = max(int(rounds * WRITE_SECONDS / alone), 100)
                alone = min(_spin(rounds) for _ in range(3))
                for _ in range(3):
                    cpu_n = _write_cpu(es, fd, block, n)
                    _, both = _beside(es, fd, block, n, rounds)
                    shared.append(max(both - alone, 0.0) / cpu_n if cpu_n > 0 else 1.0)
            if len(mine) > 1:
                # The thread on another CPU (the engine places it off the
                # creator's), the loop held on its own.
                os.sched_setaffinity(0, mine)
                with EventSet() as es:
                    os.sched_setaffinity(0, here)
                    for _ in range(3):
                        before = es.stats()["busy_seconds"]
                        spun, _ = _beside(es, fd, block, n, rounds)
                        overlap = min(spun, es.stats()["busy_seconds"] - before)
                        free.append(max(spun - alone, 0.0) / overlap if overlap > 0 else 0.0)
        finally:
            os.sched_setaffinity(0, mine)
    lost = sorted(free)[1] if free else 0.0
    return min(max(lost, 0.0), 1.0), min(max(sorted(shared)[1], 1.0), 3.0)


def measure(cores: int | None = None) -> Calibration:
    """Calibrate on this machine (about two seconds)."""
    submit, wake, thread = costs()
    free, shared = _interference()
    return Calibration(_copy_rate(), submit, int(cores or os.cpu_count() or 1),
                       wakeup_seconds=wake, thread_seconds=thread,
                       interference=free, shared_core=shared)
