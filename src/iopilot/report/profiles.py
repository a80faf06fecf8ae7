"""Plain-data summaries of the time profiles a source may hold: Darshan's
HEATMAP module (bytes per rank and time bin) and AutoPerf's APMPI module
(time in MPI per rank).  The JSON report carries them, the terminal and the
HTML page show them; all read them from here."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model import Heatmap, MpiProfile, Trace, display

TOP_OPERATIONS = 10  # MPI operations listed, most seconds first


def heatmap_summary(trace: Trace) -> dict[str, Any] | None:
    """Per layer: ranks, bins, bin width, bytes and the busiest bin; None without a heatmap."""
    if not trace.heatmaps:
        return None
    return {"source": "Darshan HEATMAP module",
            "layers": [_layer_summary(h) for h in trace.heatmaps.values()]}  # fmt: skip


def _layer_summary(h: Heatmap) -> dict[str, Any]:
    per_bin = (h.read + h.write).sum(axis=0) if len(h) else np.zeros(h.bins, np.int64)
    busiest = int(np.argmax(per_bin)) if per_bin.size and per_bin.max() > 0 else None
    return {
        "layer": display(h.layer),
        "ranks": len(h),
        "bins": h.bins,
        "bin_seconds": h.bin_width,
        "bytes_read": h.total("read"),
        "bytes_written": h.total("write"),
        "busiest_bin": None if busiest is None else {
            "start": round(busiest * h.bin_width, 6),
            "end": round((busiest + 1) * h.bin_width, 6),
            "bytes": int(per_bin[busiest])},
    }  # fmt: skip


def mpi_summary(trace: Trace, top: int = TOP_OPERATIONS) -> dict[str, Any] | None:
    """Time in MPI: over ranks, the slowest rank, sync time, the costliest
    operations; None without an MPI profile."""
    m = trace.mpi
    if m is None or not len(m):
        return None
    slow = int(np.argmax(m.comm_seconds))
    return {
        "source": "AutoPerf APMPI module",
        "ranks": len(m),
        "seconds": round(m.job_comm_seconds, 6),
        "mean_rank_seconds": round(float(m.comm_seconds.mean()), 6),
        "slowest_rank": int(m.rank[slow]),
        "slowest_rank_seconds": round(float(m.comm_seconds[slow]), 6),
        "variance": m.comm_variance,
        "sync_measured": m.sync_measured,
        "sync_seconds": round(m.job_sync_seconds, 6) if m.sync_measured else None,
        "operations": top_operations(m, top),
    }


def top_operations(m: MpiProfile, top: int = TOP_OPERATIONS) -> list[dict[str, Any]]:
    """The operations with the most seconds over all ranks (called ones only)."""
    seconds = m.seconds.sum(axis=0)
    calls = m.calls.sum(axis=0)
    order = [int(i) for i in np.argsort(-seconds, kind="stable") if calls[i] > 0][:top]
    worst = m.seconds.max(axis=0)
    return [{"operation": m.ops[i], "calls": int(calls[i]), "seconds": round(float(seconds[i]), 6),
             "slowest_rank_seconds": round(float(worst[i]), 6),
             "bytes": int(m.bytes[:, i].sum())} for i in order]  # fmt: skip
