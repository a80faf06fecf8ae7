"""POSIX reads inside MPI-IO writes: ROMIO's data sieving reads a region
back before writing it whenever the pieces leave holes (read-modify-write),
and locks the file while it does."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..model import OP_READ, OP_WRITE, RECORD_LAYERS
from ..model.aggregate import isin, per_file, unique
from ..units import human_size
from . import advice
from .base import Check, Context, Finding, Level, check, pct
from .iotime import price
from .rankcost import per_rank, slowest

_POSIX, _MPIIO = RECORD_LAYERS.index("POSIX"), RECORD_LAYERS.index("MPIIO")


def _from_records(ctx: Context) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                         np.ndarray, float] | None:  # fmt: skip
    """POSIX reads that start while the same rank is inside an MPI-IO write of
    the same file: (file ids, their ranks, bytes, seconds, MPI-IO bytes written)."""
    r = ctx.trace.records
    mw = (r.layer == _MPIIO) & (r.op == OP_WRITE)
    if not mw.any():
        return None
    files = unique(r.file_id[mw])
    pr = (r.layer == _POSIX) & (r.op == OP_READ) & isin(r.file_id, files)
    written = float(r.length[mw].clip(0).sum())
    empty = np.zeros(0)
    if not pr.any():
        return files[:0], empty.astype(np.int64), empty, empty, written
    nf = len(files)
    t0 = float(min(r.start[mw].min(), r.start[pr].min()))
    span = float(max(r.end[mw].max(), r.start[pr].max())) - t0 + 1.0
    # One sortable number per (rank, file, start): groups apart by more than the span.
    def key(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        g = r.rank[mask].astype(np.int64) * nf + np.searchsorted(files, r.file_id[mask])
        return g, g * (2 * span) + (r.start[mask] - t0)

    wg, wk = key(mw)
    order = np.argsort(wk, kind="stable")
    wg, wk, we = wg[order], wk[order], r.end[mw][order]
    pg, pk = key(pr)
    at = np.searchsorted(wk, pk, side="right") - 1
    ok = at >= 0
    at = np.maximum(at, 0)
    inside = ok & (wg[at] == pg) & (r.start[pr] <= we[at])
    return (r.file_id[pr][inside], r.rank[pr][inside].astype(np.int64),
            r.length[pr][inside].clip(0).astype(np.float64),
            np.maximum(r.end[pr] - r.start[pr], 0.0)[inside], written)  # fmt: skip


def _from_counters(ctx: Context) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                          np.ndarray, float] | None:  # fmt: skip
    """Without records: POSIX reads of files the application only wrote
    through MPI-IO (it never asked to read them, so MPI-IO did)."""
    m, p = ctx.layer("MPIIO"), ctx.layer("POSIX")
    if m is None or p is None:
        return None
    ids, wrote = m.by_file("MPIIO_BYTES_WRITTEN")
    _, read = m.by_file("MPIIO_BYTES_READ")
    only_w = ids[(wrote > 0) & (read == 0)]
    on = isin(p.file_id, only_w) & (p["POSIX_READS"] > 0)
    return (p.file_id[on], p.rank[on].astype(np.int64),
            p["POSIX_BYTES_READ"][on].astype(np.float64), p["POSIX_F_READ_TIME"][on],
            float(wrote[isin(ids, only_w)].sum()))  # fmt: skip


@check
class MpiioReadModifyWrite(Check):
    """MPI-IO reads file regions back while writing them (data-sieving read-modify-write).

    ``cost_seconds``: the slowest rank's seconds in those POSIX reads, which
    disabling data sieving for writes removes (locking and waiting aside).
    """

    id = "mpiio-read-modify-write"
    layer = "MPIIO"
    site_ops = ("write",)  # the MPI-IO writes that read back
    finds = ("POSIX reads inside the same rank's MPI-IO writes (ROMIO data sieving); advises "
             "`romio_ds_write=disable`")
    cost = "the slowest rank's seconds in those reads"
    uses = ("rmw_share",)

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        found = _from_records(ctx) if len(ctx.trace.records) else None
        source = "records"
        if found is None:
            found, source = _from_counters(ctx), "counters"
        if found is None:
            return
        fid, rank, nbytes, secs, written = found
        back = float(nbytes.sum())
        if not back or back <= float(ctx.thresholds["rmw_share"]) * written:
            return
        who, cost = slowest(per_rank(ctx, rank, secs))
        ids, per = per_file(fid, {"bytes": nbytes, "reads": None}, as_float=True)
        per_b = per["bytes"]
        per_n = per["reads"]
        files, n = ctx.top_files(ids, per_b, {"bytes read back": per_b, "POSIX reads": per_n})
        when = ("during the same rank's MPI-IO writes" if source == "records"
                else "of files the application only wrote through MPI-IO")  # fmt: skip
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"{len(nbytes):,} POSIX reads ({human_size(back)}) happen {when}: MPI-IO "
            f"reads back {pct(back, written):.1f} % of the {human_size(written)} it "
            f"writes, on {n} file(s) (read-modify-write by data sieving); rank {who} spends "
            f"{cost:.3g} s in them.",
            evidence={
                "posix_reads": len(nbytes),
                "bytes_read_back": int(back),
                "mpiio_bytes_written": int(written),
                "slowest_rank": who,
                "slowest_rank_seconds": round(cost, 6),
                "source": source,
            },
            ranks=[who],
            files=files,
            files_total=n,
            recommendation="Switch data sieving off for writes with the MPI-IO hint "
            "romio_ds_write=disable (in the code, or without rebuilding through a ROMIO_HINTS "
            "file holding the line \"romio_ds_write disable\"), or make the pieces of each "
            "write cover their region without holes, ideally in one collective write.",
            snippet=advice.ROMIO_READ_MODIFY_WRITE,
            snippet_lang="c",
        ), cost)  # fmt: skip
