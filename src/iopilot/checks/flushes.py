"""Flushes and syncs issued over and over: fsync/fdatasync, H5Fflush/H5Dflush,
MPI_File_sync, each making the step wait for the library or the disk.

A file's flushes are counted at the highest layer that issued them: an
H5Fflush through HDF5's MPI-IO driver also shows as MPI_File_sync, and an
MPI_File_sync as fsync, but the program made one call.  Their time comes
from the per-operation records when the source has them (``sync`` and
``flush`` operations), else from the counters: the layer's metadata time of
the file (an upper bound, which also holds opens and seeks) or, for H5F,
that time less the open and close.  A plain fflush hands the buffer to the
kernel, not to the disk (STDIO checks judge its small writes); an fsync of
the stream's descriptor after it counts here as an fsync.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..model import Counters
from ..model.aggregate import group_sum, isin, per_rank, unique
from ..vocabulary import MODULE, OP_NAMES, RECORD_LAYERS
from . import advice
from .base import Check, Context, Finding, Level, check
from .hdf5 import dataset_files
from .iotime import io_time, price, times
from .language import in_language

# Highest layer first: (layer, its flush counters, the call, the record operation).
_LAYERS: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("H5F", ("H5F_FLUSHES",), "H5Fflush", "flush"),
    ("H5D", ("H5D_FLUSHES",), "H5Dflush", "flush"),
    ("MPIIO", ("MPIIO_SYNCS",), "MPI_File_sync", "sync"),
    ("POSIX", ("POSIX_FSYNCS", "POSIX_FDSYNCS"), "fsync/fdatasync", "sync"),
)


def _file_of(ctx: Context, c: Counters) -> np.ndarray:
    """The file each row belongs to (a dataset's is its file's)."""
    if c.layer == "H5D":
        par = dataset_files(ctx, c)
        return np.where(par != 0, par, c.file_id)
    return c.file_id


def _writes(ctx: Context, layer: str, files: np.ndarray) -> int:
    """Data writes the program made on ``files`` through the flushing layer's
    interface (H5Dwrite for HDF5 files)."""
    if layer in ("H5F", "H5D"):
        d = ctx.layer("H5D")
        return int(d["H5D_WRITES"][isin(_file_of(ctx, d), files)].sum()) if d is not None else 0
    c = ctx.layer(layer)
    if c is None:
        return 0
    on = isin(c.file_id, files)
    return int(sum(np.maximum(c[x][on], 0).sum() for x in MODULE[layer].op_counters("WRITE")
                   if c.has(x)))  # fmt: skip


def _counter_seconds(c: Counters, n: np.ndarray) -> np.ndarray:
    """Per row, the flushes' seconds as the counters tell: metadata time, less
    the open and close of an HDF5 file opened once."""
    meta = times(c, "F_META_TIME")
    if c.layer != "H5F":
        return meta
    span = np.zeros(len(c))
    for edge in ("OPEN", "CLOSE"):
        a, b = f"H5F_F_{edge}_START_TIMESTAMP", f"H5F_F_{edge}_END_TIMESTAMP"
        if c.has(a) and c.has(b):
            span += np.maximum(c[b] - c[a], 0.0)
    opens = np.maximum(c["H5F_OPENS"], 0) if c.has("H5F_OPENS") else np.ones(len(c))
    by_span = np.maximum(meta - span, 0.0)
    # Several opens: their span covers flushes too; share the time by calls.
    by_calls = meta * n / np.maximum(n + 2 * opens, 1)
    return np.where(opens <= 1, by_span, by_calls)


@check
class FlushPerStep(Check):
    """Flushes or syncs issued over and over during the run, not once at the end.

    Cost: the slowest rank's time in those flushes (see the module's
    docstring) less one final flush per file: what flushing at the end only
    would save."""

    id = "flush-per-step"
    layer = "POSIX"
    site_ops, site_layers = ("sync", "flush"), tuple(lay for lay, *_ in _LAYERS)  # not STDIO
    finds = ("fsync/fdatasync, `H5Fflush`/`H5Dflush` or `MPI_File_sync` issued over and over "
             "(at least 10 on a file, taking at least 10 % of the I/O time), each call "
             "counted once at the layer the program called")
    cost = "the syncs' seconds less one final sync per file"
    drishti = None
    uses = ("flush_count", "flush_time_share")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.thresholds
        times_ = io_time(ctx)
        nprocs = max(times_.nprocs, 1)
        claimed = np.zeros(0, np.uint64)  # files whose flushes a higher layer counted
        metas = ctx.trace.meta_records
        for layer, counts, call, op in _LAYERS:
            c = ctx.layer(layer)
            if c is None or not all(c.has(n) for n in counts):
                continue
            n = sum(np.maximum(c[x], 0) for x in counts)
            files = _file_of(ctx, c)
            fresh = ~isin(files, claimed)
            per_process = np.where(c.rank >= 0, n, n / nprocs)
            hit = fresh & (per_process >= t["flush_count"])
            claimed = unique(np.concatenate([claimed, files[n > 0].astype(np.uint64)]))
            if not hit.any():
                continue
            ids = unique(c.file_id[hit])
            code = RECORD_LAYERS.index(layer) if layer in RECORD_LAYERS else -1
            mine = (metas.layer == code) & (metas.op == OP_NAMES.index(op)) if code >= 0 else (
                np.zeros(len(metas), bool))
            mine &= isin(metas.file_id, ids)
            if mine.any():
                dur = np.maximum(metas.end[mine] - metas.start[mine], 0.0)
                per = per_rank(metas.rank[mine], dur, nprocs)
                spent = float(per[times_.slowest_rank])
                calls = per_rank(metas.rank[mine], None, nprocs)[times_.slowest_rank]
                # One final flush per file and rank would remain.
                kept = spent * len(ids) / calls if calls else 0.0
                source = "records"
            else:
                secs = np.where(hit, _counter_seconds(c, n), 0.0)
                spent = times_.rows_at_slowest(c, secs)
                kept = times_.rows_at_slowest(c, np.where(hit, secs / np.maximum(n, 1), 0.0))
                source = "counters"
            io = times_.slowest_seconds
            share = spent / io if io > 0 else 0.0
            if share < t["flush_time_share"]:
                continue
            yield self._finding(ctx, c, hit, n, layer, call, spent, kept, share, source)
            return  # one finding: the layer the program called

    def _finding(self, ctx: Context, c: Counters, hit: np.ndarray, n: np.ndarray, layer: str,
                 call: str, spent: float, kept: float, share: float, source: str) -> Finding:
        total = int(n[hit].sum())
        ids, inv = np.unique(c.file_id[hit], return_inverse=True)
        per_file = group_sum(inv, n[hit], len(ids))
        files, n_files = ctx.top_files(ids, per_file.astype(np.float64),
                                       {"flush calls": per_file})  # fmt: skip
        writes = _writes(ctx, layer, unique(_file_of(ctx, c)[hit].astype(np.uint64)))
        step = ""
        if writes:
            every = writes / max(total, 1)
            step = (", 1 per write" if every <= 1.05 else f", 1 every {every:.1f} writes")
        where = f"{n_files} file(s)" if n_files > 1 else ctx.trace.name(int(ids[0]))
        ranks = ctx.trace.job.nprocs if (c.rank[hit] < 0).any() else len(unique(c.rank[hit]))
        if ranks > 1:
            where = f"{where} ({total / ranks:,.0f} per rank)"
        kind = {"H5F": "hdf5", "H5D": "hdf5", "MPIIO": "mpiio"}.get(layer, "posix")
        snippet, lang = in_language(ctx, advice.flush_once("python", kind),
                                    advice.flush_once("c", kind),
                                    fortran=advice.flush_once("fortran", kind))  # fmt: skip
        f = self.finding(
            ctx,
            Level.WARN,
            f"{total:,} {call} calls on {where}{step}: {spent:.3g} s = {100 * share:.0f} % of "
            "the I/O time is spent waiting for flushes during the run.",
            evidence={"calls": total, "files": n_files, "writes": writes,
                      "flush_seconds": round(spent, 6), "io_share": round(share, 4),
                      "time_from": source},
            files=files,
            files_total=n_files,
            recommendation=f"Flush once at the end, or at checkpoints only: every {call} makes "
            "the step wait until the library's caches (and, for a sync, the disk) have taken "
            "the data, while closing the file flushes it anyway.",
            snippet=snippet,
            snippet_lang=lang,
        )
        f.layer = layer  # the layer the program called
        return price(ctx, f, spent - kept)
