"""The MPI view: time in MPI per rank and the costliest MPI operations, from
AutoPerf's APMPI module."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..profiles import mpi_summary
from .common import pack
from .context import PageContext

STACKED_OPS = 5  # operations drawn one by one in the per-rank bars; the rest are "other"
MPI_BARS = 4096  # rank bars; more ranks share a bar


def data(ctx: PageContext) -> dict[str, Any] | None:
    """Per rank (grouped past MPI_BARS): seconds in each of the costliest
    operations, in the others and waiting before collectives; the summary
    and its operations table.  None without an MPI profile."""
    trace = ctx.t
    summary = mpi_summary(trace)
    m = trace.mpi
    if summary is None or m is None:
        return None
    nranks = max(int(trace.job.nprocs), int(m.rank.max()) + 1)
    per_bar = -(-nranks // MPI_BARS)
    bars = -(-nranks // per_bar)
    row = m.rank // per_bar

    def per_rank(values: np.ndarray) -> dict[str, str]:
        return pack(np.bincount(row, weights=values, minlength=bars), "f8")

    top = [o["operation"] for o in summary["operations"][:STACKED_OPS]]
    cols = [m.ops.index(op) for op in top]
    sync = m.rank_sync_seconds
    other = m.comm_seconds - sync - m.seconds[:, cols].sum(axis=1)
    return {
        "summary": summary,
        "bars": bars,
        "per_bar": per_bar,
        "stacked": [{"operation": op, "seconds": per_rank(m.seconds[:, c])}
                    for op, c in zip(top, cols, strict=True)],
        # rounding of the runtime's sums can leave a hair below zero
        "other": per_rank(np.clip(other, 0, None)),
        "sync": per_rank(sync) if m.sync_measured else None,
        "total": per_rank(m.comm_seconds),
        "mean_rank_seconds": {o["operation"]: o["seconds"] / len(m)
                              for o in summary["operations"]},
    }  # fmt: skip
