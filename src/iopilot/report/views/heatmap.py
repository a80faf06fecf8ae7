"""The heatmap view: bytes per rank and time bin, per layer, from Darshan's
HEATMAP module."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...model import display
from .common import pack
from .context import PageContext

HEAT_ROWS = 256  # rank rows drawn; more ranks share a row


def data(ctx: PageContext) -> dict[str, Any] | None:
    """Per layer: read and written bytes as [row, bin] grids (ranks grouped
    into at most HEAT_ROWS rows), the bin width and what a row holds; None
    without a heatmap."""
    trace = ctx.t
    if not trace.heatmaps:
        return None
    hm = [h for h in trace.heatmaps.values() if len(h) and h.bins]
    if not hm:
        return None
    # Every rank of the job gets its row, with or without a record: a rank
    # that moved nothing shows as an empty row, not as a missing one.
    nranks = max(int(trace.job.nprocs), *(int(h.rank.max()) + 1 for h in hm))
    per_row = -(-nranks // HEAT_ROWS)
    rows = -(-nranks // per_row)
    layers = []
    for h in hm:
        grids = {}
        for what in ("read", "write"):
            grid = np.zeros((rows, h.bins), np.float64)
            np.add.at(grid, h.rank // per_row, getattr(h, what))
            # float32: seven digits are plenty for a colour and a hover, half the bytes
            grids[what] = pack(grid, "f4") if grid.any() else None
        layers.append({
            "layer": h.layer,
            "label": display(h.layer),
            "bins": h.bins,
            "bin_seconds": h.bin_width,
            "ranks": len(h),
            "read": grids["read"],
            "write": grids["write"],
            "bytes_read": h.total("read"),
            "bytes_written": h.total("write"),
        })  # fmt: skip
    return {"nranks": nranks, "rows": rows, "per_row": per_row, "layers": layers}
