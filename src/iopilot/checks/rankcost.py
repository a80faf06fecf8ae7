"""Seconds per rank, for the ``cost_seconds`` of a finding: the slowest rank's
seconds that the problem explains."""

from __future__ import annotations

import numpy as np

from .base import Context


def per_rank(ctx: Context, rank: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per-rank sums of ``values`` (one per counters row, ``rank`` its rank).

    Rows of shared files reduced over all ranks (rank -1) do not say which
    rank spent the time: they are spread evenly over the job's ranks, so the
    estimate never blames one rank for everybody's time."""
    v = np.asarray(values, np.float64)
    n = max(int(ctx.trace.job.nprocs), int(rank.max()) + 1 if len(rank) else 1, 1)
    own = rank >= 0
    out = np.bincount(rank[own], weights=v[own], minlength=n).astype(np.float64)
    out += float(v[~own].sum()) / n
    return out


def slowest(seconds: np.ndarray) -> tuple[int, float]:
    """(rank, seconds) of the rank with the most seconds."""
    if not len(seconds):
        return 0, 0.0
    r = int(np.argmax(seconds))
    return r, float(seconds[r])


def is_python(ctx: Context) -> bool:
    """The traced program is a Python interpreter (advice in Python's idiom)."""
    exe = ctx.trace.job.executable.split()
    if not exe:
        return False
    name = exe[0].rsplit("/", 1)[-1]
    return name.startswith(("python", "pypy")) or any(a.endswith(".py") for a in exe[1:3])
