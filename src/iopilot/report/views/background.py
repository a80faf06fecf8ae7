"""Background I/O view: what background threads (write-behind's, the
event-set engine's) did for each rank, one stroke per operation from queued
to issued (waiting) and from issued to completed (running), beside the
program's own I/O calls."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...model import Records
from ...model.background import per_rank
from .common import pack
from .context import PageContext

OPS_DRAWN = 20_000  # background operations embedded; the longest are kept first
CALLS_DRAWN = 20_000  # program calls embedded for ranks with background I/O


def _longest(duration: np.ndarray, cap: int) -> np.ndarray:
    """Indices of the ``cap`` longest, in their original order."""
    if len(duration) <= cap:
        return np.arange(len(duration))
    return np.sort(np.argpartition(-duration, cap - 1)[:cap])


def data(ctx: PageContext) -> dict[str, Any] | None:
    b = ctx.t.background
    if b is None or not len(b):
        return None
    prog = Records.concat([ctx.t.records, ctx.t.meta_records])
    ranks, busy, during_io = per_rank(ctx.t)
    keep = _longest(b.completed - b.queued, OPS_DRAWN)
    mine = np.isin(prog.rank, ranks)
    calls = np.flatnonzero(mine)[_longest((prog.end - prog.start)[mine], CALLS_DRAWN)]
    file_at = ctx.file_index(b.file_id[keep])
    return {
        "n": len(b),
        "drawn": len(keep),
        "ops": {
            "rank": pack(b.rank[keep], "i4"),
            "op": pack(b.op[keep], "u1"),
            "file": pack(file_at, "i4"),
            "offset": pack(b.offset[keep], "f8"),
            "length": pack(b.length[keep], "f8"),
            "queued": pack(b.queued[keep], "f8"),
            "issued": pack(b.issued[keep], "f8"),
            "completed": pack(b.completed[keep], "f8"),
            "failed": pack(b.failed[keep], "u1"),
        },
        "calls_total": int(np.count_nonzero(mine)),
        "calls": {
            "rank": pack(prog.rank[calls], "i4"),
            "op": pack(prog.op[calls], "u1"),
            "start": pack(prog.start[calls], "f8"),
            "end": pack(prog.end[calls], "f8"),
        },
        "ranks": {
            "rank": pack(ranks, "i4"),
            "busy": pack(busy, "f8"),
            "hidden": pack(busy - during_io, "f8"),
        },
    }
