"""Ranks: who does the I/O (rank 0 funnels, unbalanced ranks), from the
per-operation records or, without them, the per-rank counters."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .._record import record
from ..model import OP_READ, OP_WRITE, RECORD_LAYERS
from ..model.aggregate import isin, per_rank, unique
from ..units import human_size
from ..vocabulary import MODULE
from . import advice
from .base import (
    Check,
    Context,
    FileEvidence,
    Finding,
    Level,
    Operations,
    RankLocation,
    check,
    pct,
)
from .iotime import io_time, price
from .language import snippet_fields
from .rankcost import fs_rows
from .recordtools import _app_mask, _busy, _cached, _rank_list, chunks
from .reopen import rereads

# ---------------------------------------------------------------------------
# Per-rank loads
# ---------------------------------------------------------------------------


@record
class RankLoad:
    """Reads, writes, bytes and seconds per rank (index = rank)."""

    reads: np.ndarray
    writes: np.ndarray
    bytes: np.ndarray
    seconds: np.ndarray
    source: str  # "records" or "counters"
    unattributed_bytes: int = 0  # counters of shared files reduced over all ranks
    unattributed_ops: int = 0
    # Seconds in open, stat, seek, sync ... per rank (counters only), which
    # stragglers count as I/O time too: a slow metadata path makes a straggler.
    meta_seconds: np.ndarray | None = None

    @property
    def ops(self) -> np.ndarray:
        return self.reads + self.writes


def rank_load(ctx: Context) -> RankLoad | None:
    """Per-rank load from the records, else from the per-rank counter rows."""
    return _cached(ctx, "rank_load", lambda: _rank_load(ctx))


def _rank_load(ctx: Context) -> RankLoad | None:
    tr = ctx.trace
    r = tr.records
    if len(r):
        keep = _app_mask(r)
        if not keep.all():
            r = r.select(keep)
        if not len(r) or r.rank.min() < 0:
            return None
        n = max(tr.job.nprocs, int(r.rank.max()) + 1)
        sums = np.zeros((4, n))
        for cut in chunks(len(r)):
            rank = r.rank[cut]
            cols = (r.op[cut] == OP_READ, r.op[cut] == OP_WRITE, r.length[cut].clip(0),
                    _busy(r.start[cut], r.end[cut]))  # fmt: skip
            # Traces hold each rank's operations in one run: sum runs, then ranks.
            heads = np.flatnonzero(np.concatenate([[True], rank[1:] != rank[:-1]]))
            if len(heads) * 8 <= len(rank):
                for row, col in zip(sums, cols, strict=True):
                    np.add.at(row, rank[heads], np.add.reduceat(col, heads, dtype=np.float64))
            else:
                for row, col in zip(sums, cols, strict=True):
                    row += per_rank(rank, col, n)
        return RankLoad(
            reads=sums[0].astype(np.int64),
            writes=sums[1].astype(np.int64),
            bytes=sums[2],
            seconds=sums[3],
            source="records",
        )
    return _counter_load(ctx)


_COUNTER_COLS = {m.name: (m.op_counters("READ"), m.op_counters("WRITE"),
                          *(f"{m.name}_{k}" for k in ("BYTES_READ", "BYTES_WRITTEN",
                                                      "F_READ_TIME", "F_WRITE_TIME",
                                                      "F_META_TIME")))
                 for m in (MODULE["POSIX"], MODULE["MPIIO"])}  # fmt: skip


def counter_load(ctx: Context) -> RankLoad | None:
    """Per-rank load from the per-rank counter rows, records or not."""
    return _cached(ctx, "counter_load", lambda: _counter_load(ctx))


def _counter_load(ctx: Context) -> RankLoad | None:
    mpiio = ctx.layer("MPIIO")
    mpiio_files = unique(mpiio.file_id) if mpiio is not None else np.zeros(0, np.uint64)
    n = ctx.trace.job.nprocs
    parts = []
    for name in ("POSIX", "MPIIO"):
        c = ctx.layer(name)
        if c is None:
            continue
        if name == "POSIX":  # files opened through MPI-IO count at that level
            c = c.select(~isin(c.file_id, mpiio_files))
        reads_c, writes_c, br, bw, tr_, tw, tm = _COUNTER_COLS[name]
        cols = {
            "reads": sum((c[k] for k in reads_c if c.has(k)), np.zeros(len(c), np.int64)),
            "writes": sum((c[k] for k in writes_c if c.has(k)), np.zeros(len(c), np.int64)),
            "bytes": c[br] + c[bw],
            "seconds": c[tr_] + c[tw],
            "meta": c[tm] if c.has(tm) else np.zeros(len(c)),
        }
        parts.append((c.rank, cols))
    if not parts:
        return None
    rank = np.concatenate([p[0] for p in parts])
    if len(rank):
        n = max(n, int(rank.max()) + 1)
    cols = {k: np.concatenate([p[1][k] for p in parts]) for k in parts[0][1]}
    own = rank >= 0
    per = {k: per_rank(rank, v.astype(np.float64), n) for k, v in cols.items()}
    return RankLoad(
        reads=per["reads"].astype(np.int64),
        writes=per["writes"].astype(np.int64),
        bytes=per["bytes"],
        seconds=per["seconds"],
        source="counters",
        unattributed_bytes=int(cols["bytes"][~own].sum()),
        unattributed_ops=int((cols["reads"] + cols["writes"])[~own].sum()),
        meta_seconds=per["meta"],
    )


@check
class RankZeroHeavy(Check):
    """Rank 0 does much more I/O than the other ranks.

    Cost: rank 0's I/O seconds (all layers, see :mod:`.iotime`) minus the
    mean of the other ranks', when rank 0 is the slowest rank; otherwise the
    funnel does not set the job's I/O time (0)."""

    id = "rank-zero-heavy"
    layer = "RANKS"
    site_layers = RECORD_LAYERS
    drishti = "D01"
    uses = ("rank0_heavy",)

    def concerns(self, ctx: Context, finding: Finding) -> Operations | None:
        """Rank 0's reads and writes: the funnel, not the other ranks' I/O."""
        ops = super().concerns(ctx, finding)
        if ops is not None:
            ops.ranks = (0,)
        return ops

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        if ctx.trace.job.nprocs < 2:
            return
        load = rank_load(ctx)
        if load is None or len(load.bytes) < 2:
            return
        k = float(ctx.thresholds["rank0_heavy"])
        others = len(load.bytes) - 1
        # Bytes of shared files reduced over all ranks may belong to any rank:
        # give them all to the others, so a counter-based finding is never an artefact.
        b0, o0 = float(load.bytes[0]), int(load.ops[0])
        b_mean = (float(load.bytes[1:].sum()) + load.unattributed_bytes) / others
        o_mean = (int(load.ops[1:].sum()) + load.unattributed_ops) / others
        heavy_b = b0 > 0 and b0 >= k * b_mean
        heavy_o = o0 > 0 and o0 >= k * o_mean
        if not (heavy_b or heavy_o):
            return
        total_b = float(load.bytes.sum()) + load.unattributed_bytes
        total_o = int(load.ops.sum()) + load.unattributed_ops
        share_b, share_o = pct(b0, total_b), pct(o0, total_o)
        parts = []
        if heavy_b:
            parts.append(
                f"{human_size(b0)} ({share_b:.1f} % of all bytes, "
                + (f"{b0 / b_mean:.1f}× the mean of the other ranks)" if b_mean
                   else "the other ranks move none)")
            )  # fmt: skip
        if heavy_o:
            parts.append(
                f"{o0:,} operations ({share_o:.1f} % of all, "
                + (f"{o0 / o_mean:.1f}× the mean of the other ranks)" if o_mean
                   else "the other ranks do none)")
            )  # fmt: skip
        level = Level.HIGH if share_b > 50 else Level.WARN
        where = "traced operations" if load.source == "records" else "per-rank counters"
        cause = reread_cause(ctx, [0], [b0 - b_mean], [o0 - o_mean])
        if cause:
            yield price(ctx, self.finding(
                ctx,
                Level.INFO,
                f"Rank 0 of {len(load.bytes)} does {' and '.join(parts)} (from {where}), but "
                f"its extra work is re-reading {cause}: reopened-files has the cause and "
                "its fix (read once, on one rank, and broadcast).",
                evidence={"ranks": len(load.bytes), "rank0_bytes": int(b0), "rank0_ops": o0,
                          "cause": "re-reads", "reread_files": cause},
                ranks=[0],
            ), 0.0)
            return
        workers = ctx.trace.job.rank_source == "workers"
        rec = (
            "Spread the I/O over the workers instead of funnelling it through the main process "
            "(rank 0): let each worker read its own input and write its own part (its own file, "
            "or its block of a shared file with os.pwrite), and return only what is small"
            if workers else
            "Spread the I/O over the ranks instead of funnelling it through rank 0: let every "
            "rank write (or read) its own block of a shared file collectively (MPI-IO "
            "MPI_File_write_at_all, mpi4py Write_at_all, or parallel HDF5/PnetCDF), so the "
            "library does the merging"
        )  # fmt: skip
        if heavy_o and not heavy_b and not workers:
            rec += (
                "; many small operations on rank 0 alone are often library metadata (HDF5 "
                "headers, attributes) that collective metadata I/O spreads"
            )
        secs = io_time(ctx).rank_seconds
        cost = 0.0
        if len(secs) > 1 and io_time(ctx).slowest_rank == 0:
            cost = float(secs[0] - secs[1:].mean())
        else:  # rank 0 is not the slowest: its extra work does not set the job's I/O time
            level = Level.INFO
        yield price(ctx, self.finding(
            ctx,
            level,
            f"Rank 0 of {len(load.bytes)} does {' and '.join(parts)} (from {where}).",
            evidence={
                "ranks": len(load.bytes),
                "rank0_bytes": int(b0),
                "rank0_ops": o0,
                "others_mean_bytes": round(b_mean, 1),
                "others_mean_ops": round(o_mean, 2),
                "rank0_byte_share_pct": round(share_b, 2),
                "source": load.source,
            },
            ranks=[0],
            recommendation=rec + ".",
            **({"snippet": advice.PY_WORKER_WRITE, "snippet_lang": "python"} if workers else
               snippet_fields(ctx, advice.PY_DISTRIBUTED_WRITE, advice.DISTRIBUTED_WRITE,
                              fortran=advice.FORTRAN_DISTRIBUTED_WRITE)),
        ), cost)


@check
class UnbalancedRanks(Check):
    """Some ranks do far more I/O than the rest (all their load metrics above mean + 1σ).

    Cost: the slowest rank's I/O seconds minus the mean rank's (all layers)."""

    id = "unbalanced-ranks"
    layer = "RANKS"
    site_layers = RECORD_LAYERS
    drishti = "D02"
    uses = ("rank_excess",)

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        if ctx.trace.job.nprocs < 3:
            return
        load = rank_load(ctx)
        # Reduced shared-file counters hide how the ranks shared the work.
        if load is None or len(load.bytes) < 3 or load.unattributed_ops:
            return
        b = load.bytes.astype(np.float64)
        # Bytes and time always count; read and write counts only when they
        # vary (a write-only job has no read count to be high in).
        metrics = {"bytes": b, "seconds": load.seconds.astype(np.float64)}
        for name, v in (("reads", load.reads), ("writes", load.writes)):
            if v.std() > 0:
                metrics[name] = v.astype(np.float64)
        high = np.ones(len(b), bool)
        for v in metrics.values():
            high &= v > v.mean() + v.std()
        # Above mean + 1σ is also true of a rank with a few bytes more than
        # perfectly balanced peers: ask for a real excess of work.
        high &= b >= (1 + float(ctx.thresholds["rank_excess"])) * b.mean()
        ranks = np.flatnonzero(high)
        if not len(ranks):
            return
        worst = ranks[np.argsort(-b[ranks], kind="stable")]
        mean_b = float(b.mean())
        ops = load.ops.astype(np.float64)
        cause = reread_cause(ctx, [int(x) for x in worst], list(b[worst] - mean_b),
                             list(ops[worst] - ops.mean()))
        if cause:
            yield price(ctx, self.finding(
                ctx,
                Level.INFO,
                f"Rank(s) {_rank_list(worst)} of {len(b)} do markedly more I/O than the "
                f"others, but their extra work is re-reading {cause}: reopened-files has the "
                "cause and its fix.",
                evidence={"ranks": len(b), "unbalanced": len(ranks), "cause": "re-reads",
                          "reread_files": cause},
                ranks=[int(x) for x in worst[:10]],
            ), 0.0)
            return
        share = pct(float(b[ranks].sum()), float(b.sum()))
        secs = io_time(ctx).rank_seconds
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"{len(ranks)} of {len(b)} ranks do markedly more I/O than the others (bytes, "
            f"time{', reads' if 'reads' in metrics else ''}"
            f"{', writes' if 'writes' in metrics else ''} all above the mean + 1σ) and move "
            f"{share:.1f} % of the bytes: rank(s) {_rank_list(worst)}; the mean rank moves "
            f"{human_size(mean_b)}.",
            drishti_note="read or write counts that are equal on all ranks are left out, "
            "and the ranks must move clearly more bytes than the mean",
            evidence={
                "ranks": len(b),
                "unbalanced": len(ranks),
                "listed_ranks": " ".join(str(int(x)) for x in worst[:10]),
                "unbalanced_byte_share_pct": round(share, 2),
                "mean_bytes": round(mean_b, 1),
                "max_bytes": int(b.max()),
                "mean_seconds": round(float(load.seconds.mean()), 6),
                "source": load.source,
            },
            files=[
                FileEvidence(
                    f"rank {int(x)}",
                    {
                        "reads": int(load.reads[x]),
                        "writes": int(load.writes[x]),
                        "bytes": int(b[x]),
                        "seconds": round(float(load.seconds[x]), 6),
                    },
                    RankLocation(int(x)),
                )
                for x in worst[: ctx.max_files]
            ],
            files_total=len(ranks),
            **(_worker_balance() if ctx.trace.job.rank_source == "workers" else {
                "recommendation": "Give the ranks equal shares of the I/O, or use collective "
                "I/O so that aggregators even the load out; if the decomposition must stay "
                "uneven, overlap these ranks' I/O with computation.",
                **snippet_fields(ctx, advice.PY_MPIIO_COLLECTIVE_WRITE,
                                 advice.MPIIO_COLLECTIVE_WRITE,
                                 fortran=advice.FORTRAN_MPIIO_COLLECTIVE_WRITE)}),
        ), float(secs.max() - secs.mean()))


def _worker_balance() -> dict[str, str]:
    """The advice for Python workers (a pool, Dask) that share the I/O unevenly."""
    return {"recommendation": "Give the workers equal shares of the I/O: tasks of even size, "
            "or many small tasks (Pool.map with chunksize=1, imap_unordered; Dask partitions "
            "of even size) so that an idle worker takes the next one."}


def reread_cause(ctx: Context, ranks: list[int], extra_bytes: list[float],
                 extra_ops: list[float]) -> str:  # fmt: skip
    """The files ``ranks`` re-read at every step (see :func:`.reopen.rereads`)
    when those re-reads are at least half of each rank's extra bytes or
    extra operations over the mean rank; "" when the re-reads do not
    explain the load."""
    rows = fs_rows(ctx)
    if rows is None or not ranks:
        return ""
    again = rereads(ctx, rows)
    if not again.any():
        return ""
    names: list[str] = []
    for r, xb, xo in zip(ranks, extra_bytes, extra_ops, strict=True):
        mine = again & (rows["rank"] == r)
        rb = float(rows["bytes_read"][mine].sum())
        ro = float(rows["reads"][mine].sum())
        if not mine.any() or not (rb >= 0.5 * max(xb, 0) or ro >= 0.5 * max(xo, 0)):
            return ""
        names += [ctx.trace.name(int(f)) for f in unique(rows["file"][mine])]
    listed = list(dict.fromkeys(names))
    return ", ".join(listed[:3]) + (f" and {len(listed) - 3} more" if len(listed) > 3 else "")
