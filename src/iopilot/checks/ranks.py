"""Ranks, I/O phases and byte ranges, from the per-operation records.

Everything here is column arithmetic on NumPy arrays (sorts, running
maxima, bincounts): a trace may hold tens of millions of operations, so
nothing loops over records.  The public :func:`phases` helper is the
phase detection the checks use, for reports that want to draw phases.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import OP_READ, OP_WRITE, RECORD_LAYERS, Records, display
from . import advice
from .base import Check, Context, FileEvidence, Finding, Level, check, pct

_MPIIO = RECORD_LAYERS.index("MPIIO")
# Per file, only the highest layer that traced it counts for rank loads, so
# the bytes an application asked MPI-IO (or HDF5) for are not counted twice,
# and MPI-IO's aggregators do not make rank 0 look like a funnel.
_LEVEL = {"POSIX": 1, "STDIO": 1, "MPIIO": 2, "H5D": 3}
_INT63 = 2**62  # products of sort keys must stay below this to fit int64

PHASES_LISTED = 50

# ---------------------------------------------------------------------------
# Shared vectorised helpers
# ---------------------------------------------------------------------------

_CACHE: weakref.WeakKeyDictionary[Context, dict[str, Any]] = weakref.WeakKeyDictionary()


def _cached(ctx: Context, key: str, compute: Callable[[], Any]) -> Any:
    """Compute a derived table once per diagnosis: several checks share it."""
    store = _CACHE.setdefault(ctx, {})
    if key not in store:
        store[key] = compute()
    return store[key]


def _dense(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique values, index of each value): np.unique's own inverse is slower."""
    uniq = np.unique(ids)
    return uniq, np.searchsorted(uniq, ids).astype(np.int64)


def _sort2(major: np.ndarray, minor: np.ndarray,
           runs: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Sort by (major, minor), both non-negative int64: (order, major, minor) sorted.

    When both fit in one int64 key the sorted columns are decoded from the
    sorted key, which saves two random gathers over the arrays.  ``runs``:
    the input is made of long sorted runs, which a merge sort exploits.
    """
    if not len(major):
        return np.zeros(0, np.int64), major, minor
    bits = int(minor.max()).bit_length()  # a power-of-two span: shifts, not divisions
    if (int(major.max()) + 1) << bits < _INT63:
        key = (major << bits) | minor
        order = np.argsort(key, kind="stable" if runs else None)
        key = key[order]
        hi = key >> bits
        key &= (1 << bits) - 1
        return order, hi, key
    order = np.lexsort((minor, major))
    return order, major[order], minor[order]


def _prev_max(group: np.ndarray, end: np.ndarray,
              holders: bool = False) -> tuple[np.ndarray, np.ndarray | None]:  # fmt: skip
    """For arrays sorted by ``group`` (non-negative): the max ``end`` over the
    earlier elements of each element's group (-1 for a group's first) and, if
    asked, the position of the element holding that max (-1 likewise).
    """
    n = len(end)
    if not n:
        return np.zeros(0, np.int64), (np.zeros(0, np.int64) if holders else None)
    # Shift each group above all earlier ones so one running max restarts per group.
    width = int(end.max()) + 1
    base = group
    if (int(group[-1]) + 1) * width >= _INT63:  # sparse group numbers: renumber densely
        first = np.ones(n, bool)
        first[1:] = group[1:] != group[:-1]
        base = np.cumsum(first) - 1
    ranked = None
    if (int(base[-1]) + 1) * width >= _INT63:  # still too wide: rank the ends
        ranked = np.unique(end)
        width = len(ranked)
    offset = base * width
    shifted = offset + (end if ranked is None else np.searchsorted(ranked, end))
    run = np.maximum.accumulate(shifted)
    if not holders:
        del shifted
    prev = np.empty(n, np.int64)
    prev[0] = -1
    # At a group's first element the previous run value lies below the group's
    # shifted range, so this difference is negative there.
    np.subtract(run[:-1], offset[1:], out=prev[1:])
    del offset
    np.maximum(prev, -1, out=prev)
    if ranked is not None:
        known = prev >= 0
        prev[known] = ranked[prev[known]]
    who = None
    if holders:
        who = np.empty(n, np.int64)
        who[0] = -1
        who[1:] = np.maximum.accumulate(np.where(shifted == run, np.arange(n), 0))[:-1]
        who[prev < 0] = -1
    return prev, who


def _busy(records: Records, mask: np.ndarray | None = None) -> np.ndarray:
    dur = records.end - records.start
    np.maximum(dur, 0.0, out=dur)
    return dur if mask is None else dur[mask]


# ---------------------------------------------------------------------------
# Per-rank loads
# ---------------------------------------------------------------------------


@dataclass
class RankLoad:
    """Reads, writes, bytes and seconds per rank (index = rank)."""

    reads: np.ndarray
    writes: np.ndarray
    bytes: np.ndarray
    seconds: np.ndarray
    source: str  # "records" or "counters"
    unattributed_bytes: int = 0  # counters of shared files reduced over all ranks
    unattributed_ops: int = 0

    @property
    def ops(self) -> np.ndarray:
        return self.reads + self.writes


def _app_mask(records: Records) -> np.ndarray:
    """Records of the highest traced layer of their file (see ``_LEVEL``)."""
    level_of = np.array([_LEVEL.get(name, 1) for name in RECORD_LAYERS], np.int8)
    level = level_of[records.layer]
    if np.all(level == level[0]):
        return np.ones(len(records), bool)
    _, fidx = _dense(records.file_id)
    top = np.zeros(int(fidx.max()) + 1, np.int8)
    np.maximum.at(top, fidx, level)
    return level == top[fidx]


def rank_load(ctx: Context) -> RankLoad | None:
    """Per-rank load from the records, else from the per-rank counter rows."""
    return _cached(ctx, "rank_load", lambda: _rank_load(ctx))


def _rank_load(ctx: Context) -> RankLoad | None:
    tr = ctx.trace
    r = tr.records
    if len(r):
        keep = _app_mask(r)
        rank = r.rank[keep].astype(np.int64)
        if not len(rank) or rank.min() < 0:
            return None
        n = max(tr.job.nprocs, int(rank.max()) + 1)
        op = r.op[keep]
        return RankLoad(
            reads=np.bincount(rank[op == OP_READ], minlength=n),
            writes=np.bincount(rank[op == OP_WRITE], minlength=n),
            bytes=np.bincount(rank, weights=r.length[keep].clip(0), minlength=n),
            seconds=np.bincount(rank, weights=_busy(r, keep), minlength=n),
            source="records",
        )
    return _counter_load(ctx)


_COUNTER_COLS = {
    "POSIX": (("POSIX_READS",), ("POSIX_WRITES",), "POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN",
              "POSIX_F_READ_TIME", "POSIX_F_WRITE_TIME"),
    "MPIIO": (("MPIIO_INDEP_READS", "MPIIO_COLL_READS", "MPIIO_SPLIT_READS", "MPIIO_NB_READS"),
              ("MPIIO_INDEP_WRITES", "MPIIO_COLL_WRITES", "MPIIO_SPLIT_WRITES",
               "MPIIO_NB_WRITES"),
              "MPIIO_BYTES_READ", "MPIIO_BYTES_WRITTEN", "MPIIO_F_READ_TIME",
              "MPIIO_F_WRITE_TIME"),
}  # fmt: skip


def _counter_load(ctx: Context) -> RankLoad | None:
    mpiio = ctx.layer("MPIIO")
    mpiio_files = np.unique(mpiio.file_id) if mpiio is not None else np.zeros(0, np.uint64)
    n = ctx.trace.job.nprocs
    parts = []
    for name in ("POSIX", "MPIIO"):
        c = ctx.layer(name)
        if c is None:
            continue
        if name == "POSIX":  # files opened through MPI-IO count at that level
            c = c.select(~np.isin(c.file_id, mpiio_files))
        reads_c, writes_c, br, bw, tr_, tw = _COUNTER_COLS[name]
        cols = {
            "reads": sum((c[k] for k in reads_c if c.has(k)), np.zeros(len(c), np.int64)),
            "writes": sum((c[k] for k in writes_c if c.has(k)), np.zeros(len(c), np.int64)),
            "bytes": c[br] + c[bw],
            "seconds": c[tr_] + c[tw],
        }
        parts.append((c.rank, cols))
    if not parts:
        return None
    rank = np.concatenate([p[0] for p in parts])
    if len(rank):
        n = max(n, int(rank.max()) + 1)
    cols = {k: np.concatenate([p[1][k] for p in parts]) for k in parts[0][1]}
    own = rank >= 0
    per = {
        k: np.bincount(rank[own], weights=v[own].astype(np.float64), minlength=n)
        for k, v in cols.items()
    }
    return RankLoad(
        reads=per["reads"].astype(np.int64),
        writes=per["writes"].astype(np.int64),
        bytes=per["bytes"],
        seconds=per["seconds"],
        source="counters",
        unattributed_bytes=int(cols["bytes"][~own].sum()),
        unattributed_ops=int((cols["reads"] + cols["writes"])[~own].sum()),
    )


def _rank_list(ranks: np.ndarray, limit: int = 10) -> str:
    shown = ", ".join(str(int(x)) for x in ranks[:limit])
    return shown + (f" and {len(ranks) - limit} more" if len(ranks) > limit else "")


@check
class RankZeroHeavy(Check):
    """Rank 0 does much more I/O than the other ranks."""

    id = "rank-zero-heavy"
    layer = "RANKS"
    drishti = "D01"
    uses = ("rank0_heavy",)

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
                f"{advice.human_size(b0)} ({share_b:.1f} % of all bytes, "
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
        rec = (
            "Spread the I/O over the ranks instead of funnelling it through rank 0: let every "
            "rank write (or read) its own part of a shared file, with collective MPI-IO or "
            "parallel HDF5/PnetCDF doing the merging"
        )
        if heavy_o and not heavy_b:
            rec += (
                "; many small operations on rank 0 alone are often library metadata (HDF5 "
                "headers, attributes) that collective metadata I/O spreads"
            )
        yield self.finding(
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
            recommendation=rec + ".",
            snippet=advice.DISTRIBUTED_WRITE,
            snippet_lang="c",
        )


@check
class UnbalancedRanks(Check):
    """Some ranks do far more I/O than the rest (all their load metrics above mean + 1σ)."""

    id = "unbalanced-ranks"
    layer = "RANKS"
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
        share = pct(float(b[ranks].sum()), float(b.sum()))
        yield self.finding(
            ctx,
            Level.WARN,
            f"{len(ranks)} of {len(b)} ranks do markedly more I/O than the others (bytes, "
            f"time{', reads' if 'reads' in metrics else ''}"
            f"{', writes' if 'writes' in metrics else ''} all above the mean + 1σ) and move "
            f"{share:.1f} % of the bytes: rank(s) {_rank_list(worst)}; the mean rank moves "
            f"{advice.human_size(mean_b)}.",
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
                )
                for x in worst[: ctx.max_files]
            ],
            files_total=len(ranks),
            recommendation="Give the ranks equal shares of the I/O, or use collective I/O so "
            "that aggregators even the load out; if the decomposition must stay uneven, "
            "overlap these ranks' I/O with computation.",
            snippet=advice.MPIIO_COLLECTIVE_WRITE,
            snippet_lang="c",
        )


# ---------------------------------------------------------------------------
# I/O phases
# ---------------------------------------------------------------------------

_PHASE_KEYS = (
    "start", "end", "duration", "busy", "ops", "bytes", "ranks",
    "fastest_rank", "fastest_time", "slowest_rank", "slowest_time", "median_time",
)  # fmt: skip


def phases(records: Records, gap: float | None = None,
           min_gap_share: float = 0.01) -> dict[str, np.ndarray]:  # fmt: skip
    """I/O phases of ``records``: bursts of operations separated by idle time.

    The operations of all ranks are merged into busy intervals (overlapping or
    touching ``[start, end]`` spans become one).  Consecutive busy intervals
    are joined into one phase when the idle gap between them is short: at
    most ``gap`` seconds if ``gap`` is positive; otherwise shorter than the
    mean gap, or shorter than ``min_gap_share`` of the traced time span (so
    the jitter between back-to-back operations never splits a phase).

    Pass one layer's records (``records.of_layer("POSIX")``): layers stack,
    so mixing them counts one transfer twice.

    Returns a dict of arrays, one element per phase in time order:
    ``start``, ``end``, ``duration`` and ``busy`` (seconds some operation was
    running) in seconds; ``ops``, ``bytes``, ``ranks`` (ranks with I/O in the
    phase); ``fastest_rank``/``slowest_rank`` with their ``fastest_time``/
    ``slowest_time`` (sum of the rank's operation durations in the phase) and
    ``median_time`` over the ranks active in the phase.
    """
    return _phases(records, gap, min_gap_share)[0]


def _phases(records: Records, gap: float | None,
            min_gap_share: float) -> tuple[dict[str, np.ndarray], np.ndarray]:  # fmt: skip
    """:func:`phases` plus the phase of every record."""
    n = len(records)
    if not n:
        empty = {k: np.zeros(0) for k in _PHASE_KEYS}
        return empty, np.zeros(0, np.int64)
    order = np.argsort(records.start)
    s = records.start[order]
    e = np.maximum(records.end[order], s)
    run = np.maximum.accumulate(e)
    new = np.ones(n, bool)
    new[1:] = s[1:] > run[:-1]
    heads = np.flatnonzero(new)
    b_start = s[heads]
    b_end = np.maximum.reduceat(e, heads)
    gaps = b_start[1:] - b_end[:-1]
    if gap is not None and gap > 0:
        split = gaps > gap
    elif len(gaps):
        span = float(b_end[-1] - b_start[0])
        # ">=" so that equal gaps (regular bursts) all split rather than all join.
        split = (gaps >= gaps.mean() * (1 - 1e-9)) & (gaps > min_gap_share * span)
    else:
        split = np.zeros(0, bool)
    b_phase = np.concatenate([[0], np.cumsum(split)])
    n_ph = int(b_phase[-1]) + 1
    p_heads = np.flatnonzero(np.concatenate([[True], split]))
    if n_ph == 1:  # the common case: no need to scatter phase numbers back
        rec_phase = np.zeros(n, np.int64)
    else:
        rec_phase = np.empty(n, np.int64)
        rec_phase[order] = b_phase[np.cumsum(new) - 1]
    del order, s, e, run

    table: dict[str, np.ndarray] = {
        "start": b_start[p_heads],
        "end": np.maximum.reduceat(b_end, p_heads),
    }
    table["duration"] = table["end"] - table["start"]
    table["busy"] = np.add.reduceat(b_end - b_start, p_heads)
    table["ops"] = np.bincount(rec_phase, minlength=n_ph)
    table["bytes"] = np.bincount(
        rec_phase, weights=records.length.clip(0), minlength=n_ph
    ).astype(np.int64)
    table.update(_rank_times(records, rec_phase, n_ph))
    return table, rec_phase


def _pairs(rec_phase: np.ndarray, rank: np.ndarray, weights: dict[str, np.ndarray],
           n_ph: int) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:  # fmt: skip
    """Sums of ``weights`` per (phase, rank) that occur, sorted by phase then rank."""
    rank = rank.astype(np.int64)
    lo = int(rank.min())
    width = int(rank.max()) - lo + 1
    key = rec_phase * width + (rank - lo)
    if n_ph * width <= 4 * len(rank) + (1 << 20):  # dense enough for bincount
        counts = np.bincount(key, minlength=n_ph * width)
        keys = np.flatnonzero(counts)
        sums = {k: np.bincount(key, weights=w, minlength=n_ph * width)[keys]
                for k, w in weights.items()}  # fmt: skip
    else:
        keys, inv = np.unique(key, return_inverse=True)
        sums = {k: np.bincount(inv, weights=w, minlength=len(keys)) for k, w in weights.items()}
    return keys // width, keys % width + lo, sums


def _rank_times(records: Records, rec_phase: np.ndarray, n_ph: int) -> dict[str, np.ndarray]:
    p_phase, p_rank, sums = _pairs(rec_phase, records.rank, {"t": _busy(records)}, n_ph)
    p_time = sums["t"]
    order = np.lexsort((p_time, p_phase))
    p_phase, p_rank, p_time = p_phase[order], p_rank[order], p_time[order]
    count = np.bincount(p_phase, minlength=n_ph)
    first = np.concatenate([[0], np.cumsum(count)[:-1]])
    last = first + count - 1
    mid_lo, mid_hi = first + (count - 1) // 2, first + count // 2
    return {
        "ranks": count,
        "fastest_rank": p_rank[first],
        "fastest_time": p_time[first],
        "slowest_rank": p_rank[last],
        "slowest_time": p_time[last],
        "median_time": (p_time[mid_lo] + p_time[mid_hi]) / 2,
    }


def _phase_layer(ctx: Context) -> str | None:
    """MPI-IO phases if MPI-IO was traced (what the application asked), else POSIX."""

    def compute() -> str | None:
        counts = np.bincount(ctx.trace.records.layer, minlength=len(RECORD_LAYERS))
        return next((name for name in ("MPIIO", "POSIX") if counts[RECORD_LAYERS.index(name)]),
                    None)  # fmt: skip

    return _cached(ctx, "phase_layer", compute)


def _layer_records(ctx: Context, layer: str) -> Records:
    r = ctx.trace.records
    code = RECORD_LAYERS.index(layer)
    return _cached(ctx, f"records:{layer}",
                   lambda: r if np.all(r.layer == code) else r.of_layer(layer))  # fmt: skip


def _layer_phases(ctx: Context, layer: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
    t = ctx.thresholds

    def compute() -> tuple[dict[str, np.ndarray], np.ndarray]:
        return _phases(
            _layer_records(ctx, layer),
            float(t["phase_gap"]) or None,
            float(t["phase_min_gap_share"]),
        )

    return _cached(ctx, f"phases:{layer}", compute)


def _phase_rows(table: dict[str, np.ndarray], rows: np.ndarray) -> list[FileEvidence]:
    return [
        FileEvidence(
            f"phase {int(i) + 1}",
            {
                "start s": round(float(table["start"][i]), 6),
                "end s": round(float(table["end"][i]), 6),
                "duration s": round(float(table["duration"][i]), 6),
                "operations": int(table["ops"][i]),
                "bytes": int(table["bytes"][i]),
                "ranks": int(table["ranks"][i]),
                "fastest rank": int(table["fastest_rank"][i]),
                "fastest rank s": round(float(table["fastest_time"][i]), 6),
                "slowest rank": int(table["slowest_rank"][i]),
                "slowest rank s": round(float(table["slowest_time"][i]), 6),
            },
        )
        for i in rows
    ]


@check
class IoPhases(Check):
    """When the job did I/O: phases of activity and the idle time between them."""

    id = "io-phases"
    layer = "PHASES"
    uses = ("phase_gap", "phase_min_gap_share")
    needs_records = True

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        layer = _phase_layer(ctx)
        if layer is None:
            return
        table, _ = _layer_phases(ctx, layer)
        n = len(table["start"])
        if not n:
            return
        in_phases = float(table["duration"].sum())
        busy = float(table["busy"].sum())
        runtime = max(float(ctx.trace.job.runtime), float(table["end"][-1]))
        longest = int(np.argmax(table["duration"]))
        # The longest phases, listed in time order.
        rows = np.sort(np.argsort(-table["duration"], kind="stable")[:PHASES_LISTED])
        idle = in_phases - busy
        if busy >= 0.5 * runtime:
            rec = (
                "Some operation is in flight for most of the run, so I/O is on the critical "
                "path: make it faster (larger, collective requests) or overlap it with "
                "computation through non-blocking or asynchronous I/O."
            )
        elif n > 1:
            rec = (
                f"The job computes for {runtime - in_phases:.3g} s outside these phases; "
                "non-blocking or asynchronous I/O could hide a phase behind the computation "
                "that follows it."
            )
        else:
            rec = ""
        yield self.finding(
            ctx,
            Level.INFO,
            f"I/O through {display(layer)} ran in {n} phase(s) covering {in_phases:.3g} s of "
            f"the {runtime:.3g} s run ({pct(in_phases, runtime):.1f} %), with operations in "
            f"flight for {busy:.3g} s of it; the longest, phase {longest + 1}, lasted "
            f"{float(table['duration'][longest]):.3g} s (from "
            f"{float(table['start'][longest]):.3g} s to {float(table['end'][longest]):.3g} s).",
            evidence={
                "layer": display(layer),
                "phases": n,
                "phase_seconds": round(in_phases, 6),
                "busy_seconds": round(busy, 6),
                "idle_in_phases_seconds": round(idle, 6),
                "runtime_seconds": round(runtime, 6),
                "phase_share_pct": round(pct(in_phases, runtime), 2),
                "longest_phase": longest + 1,
                "longest_phase_seconds": round(float(table["duration"][longest]), 6),
                "first_io_seconds": round(float(table["start"][0]), 6),
                "last_io_seconds": round(float(table["end"][-1]), 6),
            },
            files=_phase_rows(table, rows),
            files_total=n,
            recommendation=rec,
        )


@check
class PhaseStragglers(Check):
    """Phases in which one rank takes much longer than the typical rank."""

    id = "phase-stragglers"
    layer = "PHASES"
    uses = ("straggler_ratio", "straggler_min_time", "phase_gap", "phase_min_gap_share")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        if len(ctx.trace.records):
            yield from self._from_records(ctx)
        else:
            yield from self._from_counters(ctx)

    def _from_records(self, ctx: Context) -> Iterable[Finding]:
        layer = _phase_layer(ctx)
        if layer is None:
            return
        table, rec_phase = _layer_phases(ctx, layer)
        if not len(table["start"]):
            return
        t = ctx.thresholds
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(table["median_time"] > 0,
                             table["slowest_time"] / table["median_time"], np.inf)  # fmt: skip
        bad = (
            (table["ranks"] >= 2)
            & (ratio > float(t["straggler_ratio"]))
            & (table["slowest_time"] > float(t["straggler_min_time"]))
        )
        if not bad.any():
            return
        idx = np.flatnonzero(bad)
        worst = int(idx[np.argmax(ratio[idx])])
        who = table["slowest_rank"][idx].astype(np.int64)
        freq = np.bincount(who - who.min())
        top = np.argsort(-freq, kind="stable")
        top = top[freq[top] > 0][:10] + who.min()
        # Did the worst straggler move more data (uneven work) or the same (a slow path)?
        recs = _layer_records(ctx, layer)
        in_worst = rec_phase == worst
        r_w = recs.rank[in_worst].astype(np.int64)
        lo = int(r_w.min())
        b_w = np.bincount(r_w - lo, weights=recs.length[in_worst].clip(0))
        active = np.bincount(r_w - lo) > 0
        slow_r = int(table["slowest_rank"][worst])
        slow_b, med_b = float(b_w[slow_r - lo]), float(np.median(b_w[active]))
        rows = idx[np.argsort(-ratio[idx], kind="stable")[: ctx.max_files]]
        files = _phase_rows(table, rows)
        for f, i in zip(files, rows, strict=True):
            f.numbers["slowest / median"] = round(float(ratio[i]), 2)
        host = ctx.trace.job.hosts.get(slow_r, "")
        evidence: dict[str, float | int | str] = {"host": host} if host else {}
        yield self.finding(
            ctx,
            Level.WARN,
            f"{len(idx)} of {len(table['start'])} I/O phase(s) through {display(layer)} have "
            f"a straggler: in phase {worst + 1} rank {slow_r}"
            + (f" (on {host})" if host else "")
            + f" spent {float(table['slowest_time'][worst]):.3g} s in I/O, "
            f"{float(ratio[worst]):.1f}× the median rank "
            f"({float(table['median_time'][worst]):.3g} s); slowest most often: "
            f"rank(s) {_rank_list(top, 5)}.",
            evidence=evidence | {
                "layer": display(layer),
                "phases": len(table["start"]),
                "straggler_phases": len(idx),
                "worst_phase": worst + 1,
                "worst_ratio": round(float(ratio[worst]), 3),
                "worst_rank": slow_r,
                "worst_rank_seconds": round(float(table["slowest_time"][worst]), 6),
                "median_seconds": round(float(table["median_time"][worst]), 6),
                "worst_rank_bytes": int(slow_b),
                "median_bytes": int(med_b),
                "frequent_stragglers": " ".join(str(int(x)) for x in top),
                "source": "records",
            },
            files=files,
            files_total=len(idx),
            recommendation=_straggler_advice(slow_b, med_b, float(t["straggler_ratio"])),
            snippet=advice.MPIIO_COLLECTIVE_WRITE,
            snippet_lang="c",
        )

    def _from_counters(self, ctx: Context) -> Iterable[Finding]:
        """Without a trace the whole run is one phase, seen through per-rank counters."""
        if ctx.trace.job.nprocs < 2:
            return
        load = rank_load(ctx)
        if load is None or load.unattributed_ops:
            return
        active = np.flatnonzero(load.ops > 0)
        if len(active) < 2:
            return
        sec = load.seconds[active]
        med = float(np.median(sec))
        i = int(np.argmax(sec))
        slow, slow_r = float(sec[i]), int(active[i])
        t = ctx.thresholds
        ratio = slow / med if med > 0 else float("inf")
        if ratio <= float(t["straggler_ratio"]) or slow <= float(t["straggler_min_time"]):
            return
        med_b = float(np.median(load.bytes[active]))
        slow_b = float(load.bytes[slow_r])
        limit = float(t["straggler_ratio"]) * med
        n_slow = int(np.count_nonzero(sec > limit))
        order = active[np.argsort(-sec, kind="stable")][: min(n_slow, ctx.max_files)]
        yield self.finding(
            ctx,
            Level.WARN,
            f"Over the whole run (per-rank counters, no per-operation trace) rank {slow_r} "
            f"spent {slow:.3g} s in I/O, {ratio:.1f}× the median rank ({med:.3g} s); "
            f"{n_slow} of {len(active)} ranks with I/O took over {t['straggler_ratio']:g}× "
            "the median.",
            evidence={
                "layer": "POSIX/MPI-IO counters",
                "straggler_ranks": n_slow,
                "worst_ratio": round(ratio, 3),
                "worst_rank": slow_r,
                "worst_rank_seconds": round(slow, 6),
                "median_seconds": round(med, 6),
                "worst_rank_bytes": int(slow_b),
                "median_bytes": int(med_b),
                "source": "counters",
            },
            files=[
                FileEvidence(
                    f"rank {int(r)}",
                    {
                        "seconds": round(float(load.seconds[r]), 6),
                        "bytes": int(load.bytes[r]),
                        "operations": int(load.ops[r]),
                    },
                )
                for r in order
            ],
            files_total=n_slow,
            recommendation=_straggler_advice(slow_b, med_b, float(t["straggler_ratio"])),
            snippet=advice.MPIIO_COLLECTIVE_WRITE,
            snippet_lang="c",
        )


def _straggler_advice(slow_bytes: float, median_bytes: float, ratio: float) -> str:
    if median_bytes > 0 and slow_bytes > ratio * median_bytes:
        return (
            f"The straggler moved {advice.human_size(slow_bytes)} against a median of "
            f"{advice.human_size(median_bytes)}: it has more of the work. Balance the data "
            "per rank, or use collective I/O so aggregators even it out."
        )
    return (
        f"The straggler moved {advice.human_size(slow_bytes)}, about as much as the median "
        f"rank ({advice.human_size(median_bytes)}), yet took longer: look at its node, network "
        "link or storage target (OST), or use collective I/O so that a few aggregators hide "
        "one slow path."
    )


# ---------------------------------------------------------------------------
# Overlapping byte ranges
# ---------------------------------------------------------------------------


@dataclass
class Overlaps:
    """Bytes of one kind of access (reads or writes) accessed more than once.

    Per-file arrays follow ``files``; "same" counts re-accesses by the rank
    that had already accessed the bytes, "cross" by another rank.
    """

    ops: int
    bytes: int
    files: np.ndarray
    same_ops: np.ndarray  # operations overlapping earlier ones of the same rank
    same_bytes: np.ndarray
    cross_ops: np.ndarray  # per-rank extents overlapping another rank's
    cross_bytes: np.ndarray
    total_bytes: np.ndarray  # bytes accessed
    pair_a: np.ndarray  # per cross-rank overlap: the two ranks
    pair_b: np.ndarray


def _overlaps(op: np.ndarray, rank: np.ndarray, file_id: np.ndarray, offset: np.ndarray,
              length: np.ndarray) -> dict[int, Overlaps]:  # fmt: skip
    """Byte ranges accessed more than once, per operation kind, file and rank.

    Pass 1 sorts by (kind, file, rank, offset): an operation starting below
    the running max end of its rank's earlier operations re-accesses bytes.
    The per-rank extents left over are disjoint, so in pass 2, sorted by
    (kind, file, offset), any extent starting below the running max end
    overlaps bytes of another rank.  Both passes are one sort each.
    """
    files, fidx = _dense(file_id)
    nf = len(files)
    rlo = int(rank.min())
    rbits = (int(rank.max()) - rlo).bit_length()  # ranks packed in the low bits
    group = ((op.astype(np.int64) * nf + fidx) << rbits) | (rank - rlo)
    del fidx
    order, g, s = _sort2(group, offset)
    del group
    e = s + length[order]
    del order
    kf = g >> rbits  # (kind, file) of each operation
    prev, _ = _prev_max(g, e)
    n_kf = 2 * nf
    covered = np.minimum(e, prev)
    covered -= s
    np.maximum(covered, 0, out=covered)
    same_bytes = np.bincount(kf, weights=covered, minlength=n_kf)
    same_ops = np.bincount(kf[covered > 0], minlength=n_kf)
    del covered
    covered = e - s
    total = np.bincount(kf, weights=covered, minlength=n_kf)
    count = np.bincount(kf, minlength=n_kf)
    ops = [int(count[:nf].sum()), int(count[nf:].sum())]
    del covered
    # Per-rank extents: runs of operations that overlap or touch their predecessor.
    heads = np.flatnonzero(prev < s)
    del prev
    x_start = s[heads]
    x_end = np.maximum.reduceat(e, heads)
    x_kf = kf[heads]
    x_rank = g[heads] & ((1 << rbits) - 1)
    del s, e, g, kf, heads
    # Order by (kind, file, start); the rank rides in the low bits when it fits.
    if (int(x_start.max()) + 1) << rbits < _INT63 // n_kf:
        # Each rank's extents are already in order: merge-friendly runs.
        order, x_kf, packed = _sort2(x_kf, (x_start << rbits) | x_rank, runs=True)
        x_start = packed >> rbits
        x_rank = packed & ((1 << rbits) - 1)
        del packed
    else:
        order, x_kf, x_start = _sort2(x_kf, x_start)
        x_rank = x_rank[order]
    x_end = x_end[order]
    x_rank += rlo
    del order
    prev, who = _prev_max(x_kf, x_end, holders=True)
    assert who is not None
    covered = np.minimum(x_end, prev)
    covered -= x_start
    np.maximum(covered, 0, out=covered)
    clash = covered > 0
    cross_ops = np.bincount(x_kf[clash], minlength=n_kf)
    cross_bytes = np.bincount(x_kf, weights=covered, minlength=n_kf)
    pair_a, pair_b, pair_kind = x_rank[who[clash]], x_rank[clash], x_kf[clash] // nf
    out = {}
    for k in (OP_READ, OP_WRITE):
        sl = slice(k * nf, (k + 1) * nf)
        out[k] = Overlaps(
            ops=int(ops[k]),
            bytes=int(total[sl].sum()),
            files=files,
            same_ops=same_ops[sl],
            same_bytes=same_bytes[sl].astype(np.int64),
            cross_ops=cross_ops[sl],
            cross_bytes=cross_bytes[sl].astype(np.int64),
            total_bytes=total[sl].astype(np.int64),
            pair_a=pair_a[pair_kind == k],
            pair_b=pair_b[pair_kind == k],
        )
    return out


def file_overlaps(ctx: Context, op: int) -> Overlaps | None:
    """Overlaps of the POSIX reads or writes (the byte ranges the file system saw)."""

    def compute() -> dict[int, Overlaps] | None:
        r = _layer_records(ctx, "POSIX")
        if not len(r):
            return None
        keep = (r.length > 0) & (r.offset >= 0)
        if keep.all():
            return _overlaps(r.op, r.rank.astype(np.int64), r.file_id, r.offset, r.length)
        if not keep.any():
            return None
        return _overlaps(r.op[keep], r.rank[keep].astype(np.int64), r.file_id[keep],
                         r.offset[keep], r.length[keep])  # fmt: skip

    both = _cached(ctx, "overlaps", compute)
    if both is None or not both[op].ops:
        return None
    return both[op]


def _top_pair(a: np.ndarray, b: np.ndarray) -> tuple[int, int, int]:
    """The most frequent unordered rank pair and how often it occurs."""
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    base = int(lo.min())
    width = int(hi.max()) - base + 1
    key = (lo - base) * width + (hi - base)
    if width * width <= 4 * len(key) + (1 << 20):
        counts = np.bincount(key)
        best = int(np.argmax(counts))
        n = int(counts[best])
    else:
        keys, counts = np.unique(key, return_counts=True)
        i = int(np.argmax(counts))
        best, n = int(keys[i]), int(counts[i])
    return best // width + base, best % width + base, n


@check
class OverlappingWrites(Check):
    """The same bytes of a file are written more than once."""

    id = "overlapping-writes"
    layer = "POSIX"
    uses = ("overlap_count",)
    needs_records = True

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        ov = file_overlaps(ctx, OP_WRITE)
        if ov is None:
            return
        cross, cross_b = int(ov.cross_ops.sum()), int(ov.cross_bytes.sum())
        same, same_b = int(ov.same_ops.sum()), int(ov.same_bytes.sum())
        if cross and cross >= int(ctx.thresholds["overlap_count"]):
            a, b, n_ab = _top_pair(ov.pair_a, ov.pair_b)
            ranks = np.unique(np.concatenate([ov.pair_a, ov.pair_b]))
            files, n_files = ctx.top_files(
                ov.files, ov.cross_bytes.astype(np.float64),
                {"conflicting ranges": ov.cross_ops, "bytes rewritten by another rank":
                 ov.cross_bytes, "bytes written": ov.total_bytes},
                ov.cross_ops > 0,
            )  # fmt: skip
            rec = (
                "Make sure each byte has one writer, or order the writers: under MPI-IO's "
                "default (non-atomic) semantics, overlapping writes of different ranks give "
                "undefined file contents unless separated by sync-barrier-sync, or made with "
                "atomic mode on"
            )
            rec += _mpiio_cause(ctx, ov, ov.cross_ops > 0)
            yield self.finding(
                ctx,
                Level.WARN,
                f"{cross:,} byte range(s) written by one rank were also written by another "
                f"({advice.human_size(cross_b)} written again, {len(ranks)} ranks involved, "
                f"on {n_files} file(s)); most often ranks {a} and {b} ({n_ab:,}×).",
                evidence={
                    "conflicts": cross,
                    "conflict_bytes": cross_b,
                    "ranks_involved": len(ranks),
                    "files": n_files,
                    "top_pair": f"{a}-{b}",
                },
                files=files,
                files_total=n_files,
                recommendation=rec + ".",
                snippet=advice.MPIIO_SYNC_BARRIER_SYNC,
                snippet_lang="c",
            )
        if same:
            files, n_files = ctx.top_files(
                ov.files, ov.same_bytes.astype(np.float64),
                {"rewrites": ov.same_ops, "bytes rewritten": ov.same_bytes,
                 "bytes written": ov.total_bytes},
                ov.same_ops > 0,
            )  # fmt: skip
            yield self.finding(
                ctx,
                Level.INFO,
                f"{same:,} POSIX write(s) rewrite bytes the same rank had already written "
                f"({advice.human_size(same_b)} of {advice.human_size(ov.bytes)} written, "
                f"{pct(same_b, ov.bytes):.1f} %, on {n_files} file(s)).",
                evidence={
                    "rewrites": same,
                    "rewritten_bytes": same_b,
                    "bytes_written": ov.bytes,
                    "files": n_files,
                },
                files=files,
                files_total=n_files,
                recommendation="Rewriting is harmless when rare (headers, metadata updates); "
                "if it is bulk data, write each block once from memory"
                + _mpiio_cause(ctx, ov, ov.same_ops > 0)
                + ".",
            )


def _mpiio_cause(ctx: Context, ov: Overlaps, mask: np.ndarray) -> str:
    """Where repeated POSIX writes on MPI-IO files come from, as far as the data tells."""
    ids = ov.files[mask]
    distinct = (ov.total_bytes - ov.same_bytes - ov.cross_bytes)[mask]
    c = ctx.layer("MPIIO")
    if c is not None:
        m_ids, asked = c.by_file("MPIIO_BYTES_WRITTEN")
        _, indep = c.by_file("MPIIO_INDEP_WRITES")
    else:  # records only
        r = ctx.trace.records
        w = (r.layer == _MPIIO) & (r.op == OP_WRITE)
        m_ids, inv = np.unique(r.file_id[w], return_inverse=True)
        asked = np.bincount(inv, weights=r.length[w].clip(0), minlength=len(m_ids))
        indep = None
    hit = np.isin(m_ids, ids)
    if not hit.any():
        return ""
    at = np.searchsorted(ids, m_ids[hit])  # ids come sorted from np.unique
    asked_b, distinct_b = float(asked[hit].sum()), float(distinct[at].sum())
    if asked_b > distinct_b:
        return (
            f"; the application itself asked MPI-IO to write {advice.human_size(asked_b)} to "
            f"these file(s), which hold {advice.human_size(distinct_b)} of distinct data: it "
            "writes the same ranges more than once, and MPI-IO passes the repeats on"
        )
    if indep is None or indep[hit].sum() > 0:
        return (
            "; if the application's MPI-IO requests do not overlap, these are ROMIO's "
            "data-sieving read-modify-write cycles, which lock the file: collective writes "
            "or romio_ds_write=disable avoid them"
        )
    return ""


def _mpiio_write_only(ctx: Context) -> np.ndarray:
    """Files the application opened through MPI-IO and never read through it."""
    c = ctx.layer("MPIIO")
    if c is not None:
        ids, read = c.by_file("MPIIO_BYTES_READ")
        return ids[read == 0]
    r = ctx.trace.records
    m = r.layer == _MPIIO
    ids = np.unique(r.file_id[m])
    return ids[~np.isin(ids, r.file_id[m & (r.op == OP_READ)])]


@check
class OverlappingReads(Check):
    """The same bytes of a file are read more than once."""

    id = "overlapping-reads"
    layer = "POSIX"
    uses = ("reread_share", "reread_min_bytes")
    needs_records = True

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        ov = file_overlaps(ctx, OP_READ)
        if ov is None:
            return
        cross_b, same_b = int(ov.cross_bytes.sum()), int(ov.same_bytes.sum())
        again = cross_b + same_b
        if not again:
            return
        t = ctx.thresholds
        share = again / ov.bytes
        big = share > float(t["reread_share"]) and again >= float(t["reread_min_bytes"])
        per_file = ov.cross_bytes + ov.same_bytes
        # POSIX reads of a file the application only wrote through MPI-IO are
        # MPI-IO's own: read-modify-write around holes in the ranks' pieces.
        internal = np.isin(ov.files, _mpiio_write_only(ctx))
        internal_b = int(per_file[internal].sum())
        files, n_files = ctx.top_files(
            ov.files, per_file.astype(np.float64),
            {"bytes read again": per_file, "by the same rank": ov.same_bytes,
             "by other ranks": ov.cross_bytes, "bytes read": ov.total_bytes},
            per_file > 0,
        )  # fmt: skip
        unique = ov.bytes - again
        message = (
            f"{advice.human_size(again)} of {advice.human_size(ov.bytes)} read through POSIX "
            f"({100 * share:.1f} %) are bytes read before ({advice.human_size(unique)} of "
            f"distinct data): {advice.human_size(cross_b)} re-read by other ranks, "
            f"{advice.human_size(same_b)} by the same rank, on {n_files} file(s)"
        )
        if internal_b:
            message += (
                f"; {advice.human_size(internal_b)} of it on file(s) the application only "
                "wrote through MPI-IO, so MPI-IO read them itself"
            )
        if 2 * internal_b >= again:
            rec = (
                "These reads come from MPI-IO, not from the application: ROMIO reads a region "
                "back before writing it when the ranks' pieces leave holes in it. Make the "
                "pieces of one collective write tile the file contiguously, or for "
                "independent writes disable data sieving"
            )
            snippet = advice.ROMIO_READ_MODIFY_WRITE
        elif cross_b >= same_b:
            rec = (
                "Several ranks read the same bytes: read them once (one rank, or a few) and "
                "share them with MPI_Bcast or a collective read"
            )
            snippet = advice.READ_ONCE_BCAST
        else:
            rec = "Ranks re-read bytes they already read: keep them in memory instead"
            snippet = ""
        yield self.finding(
            ctx,
            Level.WARN if big else Level.INFO,
            message + ".",
            evidence={
                "bytes_read": ov.bytes,
                "distinct_bytes": unique,
                "reread_bytes": again,
                "reread_by_other_ranks": cross_b,
                "reread_by_same_rank": same_b,
                "reread_by_mpiio_itself": internal_b,
                "files": n_files,
            },
            files=files,
            files_total=n_files,
            recommendation=rec + ".",
            snippet=snippet,
            snippet_lang="c",
        )
