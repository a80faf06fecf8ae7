"""Hosts' clocks put on one timeline: world rank 0's.

Each process stamps its records against its own host's clock.  An MPI job's
ranks measure, at ``MPI_Init`` and before ``MPI_Finalize``, how far their
host's clock is from world rank 0's (``clock`` in each summary: ``[when,
offset, uncertainty]``, seconds).  Every process of a host, ranks and the
processes they start alike, moves by its host's offset, taken at the middle
of the process's life on the line through the host's samples (a clock that
drifts between the two samples is followed); what a process's own timeline
may still be off by is the samples' uncertainty plus the drift over half its
life.
"""

from __future__ import annotations

import math

from .._record import record
from ..model import ClockAlignment
from .trace_procs import Proc


@record(frozen=True)
class HostClock:
    """A host's clock against rank 0's: offset(T) = offset + drift * (T - when)."""

    when: float  # epoch seconds, the host's clock, of the first sample
    offset: float  # rank 0's clock minus this host's, at ``when``
    drift: float  # seconds per second
    uncertainty: float  # seconds: the worse of the samples'

    def at(self, t: float) -> float:
        return self.offset + self.drift * (t - self.when)


def host_clock(samples: list[tuple[float, float, float]]) -> HostClock:
    """The line through a host's samples (one sample: no drift known)."""
    first, last = min(samples), max(samples)
    span = last[0] - first[0]
    drift = (last[1] - first[1]) / span if span > 0 else 0.0
    return HostClock(first[0], first[1], drift, max(s[2] for s in samples))


def align_clocks(procs: list[Proc]) -> ClockAlignment | None:
    """Move each process's time zero onto rank 0's clock.  None on one host;
    on several without a measurement (no MPI, or IOPILOT_CLOCK_SYNC=0), an
    alignment of no host, so that the report can say the clocks may differ."""
    samples: dict[str, list[tuple[float, float, float]]] = {}
    for p in sorted(procs, key=lambda p: (p.rank is None, p.rank or 0, p.pid)):
        got = p.summary.get("clock") if p.summary else None
        if got and p.host not in samples:  # the host's ranks share one measurement
            samples[p.host] = got
    hosts = len({p.host for p in procs})
    if not samples:
        return ClockAlignment(hosts, 0, 0.0, None) if hosts > 1 else None
    clocks = {h: host_clock(s) for h, s in samples.items()}
    shift = worst = 0.0
    for p in procs:
        c = clocks.get(p.host)
        if c is None or not math.isfinite(p.t0):
            continue
        half = max(p.t_end, 0.0) / 2
        moved = c.at(p.t0 + half)
        p.t0 += moved
        shift = max(shift, abs(moved))
        worst = max(worst, c.uncertainty + abs(c.drift) * half)
    return ClockAlignment(hosts, len(clocks), shift, worst)
