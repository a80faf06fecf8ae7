"""Phases and stragglers view: I/O phases per layer at several gap thresholds."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...checks.phases import phases
from ...model import RECORD_LAYERS, Records
from .common import FS_CODES, GAP_CHOICES, LABELS, NL, PHASE_ROWS, pack
from .context import PageContext


def data(ctx: PageContext) -> dict[str, Any] | None:
    """The phases, None without records."""
    return of(ctx)


def of(ctx: PageContext) -> dict[str, Any] | None:
    """The phases, computed once per page (the summary reads their busy time)."""
    return ctx.once("phases", lambda c: compute(c) if c.records is not None else None)


def timing_view(r: Records, layer: int) -> Records:
    """One layer's records with only what phase detection reads (rank, length, times).

    The other columns are zero-stride views of one value: no memory per record.
    """
    m = r.layer == layer
    n = int(m.sum())

    def const(dtype: type, value: int = 0) -> np.ndarray:
        return np.broadcast_to(np.full(1, value, dtype), (n,))

    return Records(r.rank[m], const(np.uint8, layer), const(np.uint8), const(np.uint64),
                   const(np.int64), r.length[m], r.start[m], r.end[m])  # fmt: skip



def compute(ctx: PageContext) -> dict[str, Any]:
    """Phases of every traced layer; also sets the context's busy time."""
    r = ctx.t.records
    th = ctx.d.thresholds
    default = ctx.phase_gap
    if default is None:
        default = float(th.get("phase_gap", 0.0)) or None
    share = float(th.get("phase_min_gap_share", 0.01))
    ratio_lim = float(th.get("straggler_ratio", 1.5))
    min_time = float(th.get("straggler_min_time", 0.0))
    present = [lay for lay in range(NL) if ctx.layer_n[lay]]
    # The layer the application called: MPI-IO when traced, as the checks do.
    primary = next((RECORD_LAYERS.index(n) for n in ("MPIIO", "POSIX")
                    if ctx.layer_n[RECORD_LAYERS.index(n)]), present[0])  # fmt: skip
    # What the file system saw, for the summary's "operations in flight".
    busy_layer = next((x for x in FS_CODES if ctx.layer_n[x]), primary)
    span = ctx.t_hi - ctx.t_lo
    out: dict[str, Any] = {}
    for lay in present:
        recs = r if ctx.layer_n[lay] == len(r) else timing_view(r, lay)
        gaps: list[float | None] = [default]
        if lay == primary:  # more thresholds only where the checks look
            gaps += [g for g in GAP_CHOICES if g < span and g != default]
        options = []
        for g in gaps:
            tab = phases(recs, g, share)
            label = (f"{g:g} s" if g else "automatic (mean gap)") + (
                " (default)" if g == default else "")  # fmt: skip
            options.append(_phase_option(tab, g, label, ratio_lim, min_time))
        del recs
        out[RECORD_LAYERS[lay]] = {"options": options}  # the first is the default
        if lay == busy_layer:
            runtime = max(float(ctx.t.job.runtime), ctx.t_hi)
            busy = options[0]["busy"]
            ctx.phase_busy = {
                "busy_layer": LABELS[RECORD_LAYERS[lay]],
                "busy_seconds": busy,
                "busy_share": busy / runtime if runtime > 0 else None,
            }
    return {"primary": RECORD_LAYERS[primary], "layers": out,
            "min_gap_share": share}  # fmt: skip


def _phase_option(tab: dict[str, np.ndarray], gap: float | None, label: str,
                  ratio_lim: float, min_time: float) -> dict[str, Any]:  # fmt: skip
    n = len(tab["start"])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(tab["median_time"] > 0, tab["slowest_time"] / tab["median_time"],
                         np.where(tab["slowest_time"] > 0, np.inf, 1.0))  # fmt: skip
    strag = (tab["ranks"] >= 2) & (ratio > ratio_lim) & (tab["slowest_time"] > min_time)
    rows = np.arange(n)
    if n > PHASE_ROWS:  # the longest ones, in time order
        rows = np.sort(np.argsort(-tab["duration"], kind="stable")[:PHASE_ROWS])
    cols = {k: pack(v[rows], "f8") for k, v in tab.items()}
    return {
        "label": label,
        "gap": gap,
        "total": n,
        "shown": len(rows),
        "index": pack(rows, "u4"),
        "cols": cols,
        "ratio": pack(np.nan_to_num(ratio[rows], posinf=1e300), "f8"),
        "straggler": pack(strag[rows], "u1"),
        "stragglers": int(strag.sum()),
        "busy": float(tab["busy"].sum()),
    }
