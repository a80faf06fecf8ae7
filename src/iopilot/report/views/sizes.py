"""Request-size view: Darshan's size histograms per interface (counters, else records)."""

from __future__ import annotations

from typing import Any

from ...model import RECORD_LAYERS, SIZE_BINS
from ...vocabulary import MODULE
from .common import NB, NL, TABLE_LAYERS
from .context import PageContext


def data(ctx: PageContext) -> dict[str, Any] | None:
    """Histograms per interface; None when there are neither counters nor records."""
    out: dict[str, Any] = {}
    hist_rec = ctx.hist_rec
    for layer in TABLE_LAYERS:
        c = ctx.t.layer(layer)
        m = MODULE[layer]
        if (c is not None and len(c) and m.histogram
                and c.has(m.size_counter("READ", SIZE_BINS[0]))):  # fmt: skip
            out[layer] = {
                "source": "counters",
                "aggregate": m.agg_sizes,
                "read": [int(c[m.size_counter("READ", b)].sum()) for b in SIZE_BINS],
                "write": [int(c[m.size_counter("WRITE", b)].sum()) for b in SIZE_BINS],
            }
        elif hist_rec is not None and layer in RECORD_LAYERS:
            lay = RECORD_LAYERS.index(layer)
            h = hist_rec.reshape(NL, 2, NB)[lay]
            if h.sum():
                out[layer] = {"source": "records", "read": h[0].tolist(),
                              "write": h[1].tolist()}  # fmt: skip
    return out if out or ctx.records is not None else None

# -- phases ---------------------------------------------------------------
