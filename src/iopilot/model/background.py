"""What a background I/O thread did for the program, from its per-operation
records (:class:`~iopilot.model.BackgroundOps`): how long operations waited in
the queue, how long the thread was busy, and how much of that time the program
spent on something other than I/O calls -- the overlap achieved."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..vocabulary import OP_NAMES
from .aggregate import unique
from .trace import BackgroundOps, Records, Trace

OP_SYNC = OP_NAMES.index("sync")


Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]


def busy_and_overlap(rank: np.ndarray, start: np.ndarray, end: np.ndarray,
                     other_rank: np.ndarray, other_start: np.ndarray,
                     other_end: np.ndarray) -> Arrays:  # fmt: skip
    """Per rank that has intervals ``(start, end)``: the time covered by them
    (overlaps counted once), and the part of it also covered by the ``other``
    intervals of the same rank.  Returns (ranks, covered, covered by both)."""
    ranks = unique(rank)
    if not len(ranks):
        z = np.zeros(0)
        return ranks, z, z
    keep = np.isin(other_rank, ranks)
    o_rank, o_start, o_end = other_rank[keep], other_start[keep], other_end[keep]
    # one sweep over every interval edge, rank by rank in time order; an end
    # sorts before a start at the same time, so touching intervals never overlap
    t = np.concatenate([start, end, o_start, o_end])
    g = np.concatenate([rank, rank, o_rank, o_rank]).astype(np.int64)
    n, m = len(start), len(o_start)
    mine = np.concatenate([np.ones(n), -np.ones(n), np.zeros(2 * m)])
    theirs = np.concatenate([np.zeros(2 * n), np.ones(m), -np.ones(m)])
    order = np.lexsort((mine + theirs, t, g))
    t, g, mine, theirs = t[order], g[order], np.cumsum(mine[order]), np.cumsum(theirs[order])
    same = g[1:] == g[:-1]
    width = np.where(same, np.diff(t), 0.0)
    in_mine = mine[:-1] > 0.5
    both = in_mine & (theirs[:-1] > 0.5)
    at = np.searchsorted(ranks, g[:-1])
    covered = np.bincount(at, weights=np.where(in_mine, width, 0.0), minlength=len(ranks))
    shared = np.bincount(at, weights=np.where(both, width, 0.0), minlength=len(ranks))
    return ranks, covered, shared


def _quantiles(x: np.ndarray) -> dict[str, float]:
    if not len(x):
        return {"mean": 0.0, "p50": 0.0, "p95": 0.0, "max": 0.0}
    p50, p95 = np.quantile(x, [0.5, 0.95])
    return {"mean": float(x.mean()), "p50": float(p50), "p95": float(p95), "max": float(x.max())}


# The last trace's per-rank figures: the report, its check and its page all
# ask for them.  Identity, not equality, decides, and holding the objects
# (until the next trace) means they are never mistaken for another's.
_last: tuple[BackgroundOps, Records, Records, Arrays] | None = None


def per_rank(trace: Trace) -> Arrays:
    """(ranks, busy, busy during the program's own I/O calls) of the trace's
    background operations, computed once per trace."""
    global _last
    b = trace.background
    assert b is not None
    if _last is not None and _last[0] is b and _last[1] is trace.records \
            and _last[2] is trace.meta_records:  # fmt: skip
        return _last[3]
    prog = Records.concat([trace.records, trace.meta_records])
    out = busy_and_overlap(b.rank, b.issued, b.completed, prog.rank, prog.start, prog.end)
    _last = (b, trace.records, trace.meta_records, out)
    return out


def background_summary(trace: Trace) -> dict[str, Any] | None:
    """Plain figures for reports (docs/json-report.md, ``background_io``);
    None when the trace has no background operations."""
    b: BackgroundOps | None = trace.background
    if b is None or not len(b):
        return None
    ranks, busy, during_io = per_rank(trace)
    hidden = busy - during_io
    sync = b.op == OP_SYNC
    slowest = int(np.argmax(busy - hidden))
    return {
        "operations": len(b),
        "writes": int(np.count_nonzero(~sync)),
        "syncs": int(np.count_nonzero(sync)),
        "bytes": int(b.length[~sync].sum()),
        "failed": int(np.count_nonzero(b.failed)),
        "ranks": len(ranks),
        "busy_seconds": float(busy.sum()),
        "hidden_seconds": float(hidden.sum()),
        "exposed_seconds": float(during_io.sum()),
        "overlap_share": float(hidden.sum() / busy.sum()) if busy.sum() > 0 else 0.0,
        "queue_delay": _quantiles(b.issued - b.queued),
        "service": _quantiles(b.completed - b.issued),
        "least_hidden_rank": {
            "rank": int(ranks[slowest]),
            "busy_seconds": float(busy[slowest]),
            "hidden_seconds": float(hidden[slowest]),
        },
    }
