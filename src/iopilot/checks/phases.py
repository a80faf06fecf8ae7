"""I/O phases and stragglers, from the per-operation records.

The public :func:`phases` helper is the phase detection the checks use, for
reports that want to draw phases.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from ..model import RECORD_LAYERS, Records, display
from ..model.aggregate import group_sum, median
from ..units import human_size
from . import advice, recordtools
from .base import (
    Check,
    Context,
    FileEvidence,
    Finding,
    Level,
    PhaseLocation,
    RankLocation,
    check,
    pct,
)
from .iotime import price
from .ranks import counter_load
from .recordtools import (
    PHASES_LISTED,
    _busy,
    _cached,
    _layer_records,
    _rank_list,
    chunks,
    distinct,
    key_order,
    small_type,
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


def _busy_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the time some operation is running: the union of all
    ``[start, end]`` spans, in time order."""
    parts = list(_busy_steps(start, end, _start_order(start)))
    if not parts:
        return np.zeros(0), np.zeros(0)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _start_order(start: np.ndarray) -> np.ndarray | None:
    """The order of the operations by start, as a stable sort gives it;
    None when they are in it already (one process's operations are).

    Otherwise in time windows of about a step's operations each, with cut
    times drawn from a sample: each operation's window found step by step,
    the windows grouped by a counting sort, then each sorted on its own.
    The order takes 4 bytes per operation, and a window's worth besides."""
    n = len(start)
    if all(np.all(s[1:] >= s[:-1]) for s in (start[cut] for cut in chunks(n, seam=1))):
        return None
    windows = -(-n // recordtools.STEP)
    sample = np.sort(start[:: max(1, n // (64 * windows))])
    cuts = sample[len(sample) * np.arange(1, windows) // windows]
    which = np.empty(n, small_type(windows - 1))
    for cut in chunks(n):
        which[cut] = np.searchsorted(cuts, start[cut], side="right")
    order = key_order(which)
    if order is None:  # the windows follow one another already
        order = np.arange(n, dtype=np.uint32 if n <= 1 << 32 else np.int64)
    ends = np.zeros(windows, np.int64)
    for cut in chunks(n):
        ends += np.bincount(which[cut], minlength=windows)
    np.cumsum(ends, out=ends)
    del which
    for a, b in zip([0, *ends[:-1].tolist()], ends.tolist(), strict=True):
        window = order[a:b]
        window[:] = window[np.argsort(start[window], kind="stable")]
    return order


def _busy_steps(start: np.ndarray, end: np.ndarray,
                order: np.ndarray | None) -> Iterator[tuple[np.ndarray, np.ndarray]]:  # fmt: skip
    """The busy intervals (see :func:`_busy_intervals`) step by step over the
    operations in start order (``order``, or as they are when None): each
    step's (starts, ends), given once the next step cannot extend its last
    interval, so only a step's worth is in memory.  The union does not
    depend on the order of operations that start together."""
    pending: tuple[np.ndarray, np.ndarray] | None = None
    reach = -np.inf  # the latest end so far
    for cut in chunks(len(start)):
        if order is None:
            s, e = start[cut], end[cut].copy()
        else:
            o = order[cut]
            s, e = start[o], end[o]
        np.maximum(e, s, out=e)
        run = np.maximum.accumulate(e)
        np.maximum(run, reach, out=run)
        new = np.empty(len(s), bool)
        new[0] = s[0] > reach
        np.greater(s[1:], run[:-1], out=new[1:])
        heads = np.flatnonzero(new)
        h0 = int(heads[0]) if len(heads) else len(s)
        if h0 and pending is not None:  # the interval open at the seam goes on
            pending[1][-1] = max(pending[1][-1], float(e[:h0].max()))
        if len(heads):
            if pending is not None:
                yield pending
            pending = (s[heads], np.maximum.reduceat(e, heads))
        reach = float(run[-1])
    if pending is not None:
        yield pending


def _phases(records: Records, gap: float | None,
            min_gap_share: float) -> tuple[dict[str, np.ndarray], np.ndarray]:  # fmt: skip
    """:func:`phases` plus the phase of every record (the smallest unsigned type).

    Busy intervals may be as many as the operations, so they are never all
    in memory: one pass finds the mean gap between them, a second the phases."""
    n = len(records)
    if not n:
        empty = {k: np.zeros(0) for k in _PHASE_KEYS}
        return empty, np.zeros(0, np.int64)
    order = _start_order(records.start)

    def intervals() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Each step's intervals with the gap before each (the first: none)."""
        last = None
        for b_start, b_end in _busy_steps(records.start, records.end, order):
            gaps = np.empty(len(b_start))
            gaps[0] = np.nan if last is None else b_start[0] - last
            np.subtract(b_start[1:], b_end[:-1], out=gaps[1:])
            last = float(b_end[-1])
            yield b_start, b_end, gaps

    if gap is not None and gap > 0:
        def splits(gaps: np.ndarray) -> np.ndarray:
            return gaps > gap
    else:
        total, count, first, last = 0.0, 0, None, 0.0
        for b_start, b_end, gaps in intervals():
            first = float(b_start[0]) if first is None else first
            last = float(b_end[-1])
            g = gaps[1:] if np.isnan(gaps[0]) else gaps
            total += float(g.sum())
            count += len(g)
        mean = total / count if count else np.inf
        # ">=" so that equal gaps (regular bursts) all split rather than all join.
        least = min_gap_share * (last - (first or 0.0))

        def splits(gaps: np.ndarray) -> np.ndarray:
            return (gaps >= mean * (1 - 1e-9)) & (gaps > least)

    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    busy: list[np.ndarray] = []
    for b_start, b_end, gaps in intervals():
        head = splits(gaps)
        head[0] |= not starts  # the first interval opens the first phase
        heads = np.flatnonzero(head)
        h0 = int(heads[0]) if len(heads) else len(b_start)
        if h0:  # the phase open at the seam goes on
            ends[-1][-1] = max(ends[-1][-1], float(b_end[:h0].max()))
            busy[-1][-1] += float((b_end[:h0] - b_start[:h0]).sum())
        if len(heads):
            starts.append(b_start[heads])
            ends.append(np.maximum.reduceat(b_end, heads))
            busy.append(np.add.reduceat(b_end - b_start, heads))
    table: dict[str, np.ndarray] = {"start": np.concatenate(starts), "end": np.concatenate(ends)}
    table["duration"] = table["end"] - table["start"]
    table["busy"] = np.concatenate(busy)
    n_ph = len(table["start"])
    # Idle time separates phases, so an operation's start tells its phase.
    rec_phase = np.zeros(n, small_type(n_ph - 1))
    if n_ph > 1:
        for cut in chunks(n):
            found = np.searchsorted(table["start"], records.start[cut], side="right")
            rec_phase[cut] = found - 1
    table.update(_phase_sums(records, rec_phase, n_ph))
    return table, rec_phase


def _phase_sums(records: Records, rec_phase: np.ndarray, n_ph: int) -> dict[str, np.ndarray]:
    """Operations, bytes and per-rank times of each phase, in steps."""
    rank = records.rank
    lo = int(rank.min())
    width = int(rank.max()) - lo + 1
    n = len(rank)
    if n_ph * width > 4 * n + (1 << 20):  # too sparse for counting arrays
        key = rec_phase.astype(np.int64) * width + (rank - lo)
        keys, inv = np.unique(key, return_inverse=True)
        del key
        sums = np.stack([group_sum(inv, w, len(keys), as_float=True)
                         for w in (None, records.length.clip(0),
                                   _busy(records.start, records.end))])  # fmt: skip
        del inv
    else:
        sums = np.zeros((3, n_ph * width))
        for cut in chunks(n):
            key = rec_phase[cut].astype(np.int64)
            key *= width
            key += rank[cut]
            key -= lo
            sums[0] += group_sum(key, None, n_ph * width)
            sums[1] += group_sum(key, records.length[cut].clip(0), n_ph * width, as_float=True)
            sums[2] += group_sum(key, _busy(records.start[cut], records.end[cut]), n_ph * width)
        keys = np.flatnonzero(sums[0])
        sums = sums[:, keys]
    p_phase, p_rank = keys // width, keys % width + lo
    out = {"ops": group_sum(p_phase, sums[0], n_ph).astype(np.int64),
           "bytes": group_sum(p_phase, sums[1], n_ph).astype(np.int64)}
    p_time = sums[2]
    order = np.lexsort((p_time, p_phase))
    p_phase, p_rank, p_time = p_phase[order], p_rank[order], p_time[order]
    count = np.bincount(p_phase, minlength=n_ph)
    first = np.concatenate([[0], np.cumsum(count)[:-1]])
    last = first + count - 1
    mid_lo, mid_hi = first + (count - 1) // 2, first + count // 2
    return out | {
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
        present = set(distinct(ctx.trace.records.layer).tolist())
        return next((name for name in ("MPIIO", "POSIX") if RECORD_LAYERS.index(name) in present),
                    None)  # fmt: skip

    return _cached(ctx, "phase_layer", compute)


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
            PhaseLocation(round(float(table["start"][i]), 6), round(float(table["end"][i]), 6)),
        )
        for i in rows
    ]


@check
class IoPhases(Check):
    """When the job did I/O: phases of activity and the idle time between them.

    Describes the job; nothing to fix, so nothing at stake (cost 0)."""

    id = "io-phases"
    layer = "PHASES"
    site_layers = ()  # describes the run
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
        yield price(ctx, self.finding(
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
        ), 0.0)


@check
class PhaseStragglers(Check):
    """Phases in which one rank takes much longer than the typical rank.

    Cost: per straggler phase, the slowest rank's seconds minus the median
    rank's, summed over those phases (the wait the others see at the end of
    each phase).  Without per-operation records, or when no phase has a
    straggler, the whole run is judged from the per-rank counters, metadata
    time included; the cost is then the straggler's seconds above the median
    rank's."""

    id = "phase-stragglers"
    layer = "PHASES"
    site_layers = RECORD_LAYERS
    uses = ("straggler_ratio", "straggler_min_time", "phase_gap", "phase_min_gap_share")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        found = list(self._from_records(ctx)) if len(ctx.trace.records) else []
        # Records hold data operations only: a rank slowed down by its opens
        # and stats shows in the whole run's counters, metadata time included.
        yield from found or self._from_counters(ctx)

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
        slow_b, med_b = float(b_w[slow_r - lo]), float(median(b_w[active]))
        rows = idx[np.argsort(-ratio[idx], kind="stable")[: ctx.max_files]]
        files = _phase_rows(table, rows)
        for f, i in zip(files, rows, strict=True):
            f.numbers["slowest / median"] = round(float(ratio[i]), 2)
        host = ctx.trace.job.hosts.get(slow_r, "")
        evidence: dict[str, float | int | str] = {"host": host} if host else {}
        cost = float((table["slowest_time"][idx] - table["median_time"][idx]).sum())
        yield price(ctx, self.finding(
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
            ranks=[slow_r, *top],
            files=files,
            files_total=len(idx),
            recommendation=_straggler_advice(slow_b, med_b, float(t["straggler_ratio"])),
            snippet=advice.MPIIO_COLLECTIVE_WRITE,
            snippet_lang="c",
        ), cost)

    def _from_counters(self, ctx: Context) -> Iterable[Finding]:
        """The whole run as one phase, seen through per-rank counters: seconds
        reading, writing and in metadata calls (open, stat, seek, sync)."""
        if ctx.trace.job.nprocs < 2:
            return
        load = counter_load(ctx)
        if load is None or load.unattributed_ops:
            return
        active = np.flatnonzero(load.ops > 0)
        if len(active) < 2:
            return
        meta = load.meta_seconds if load.meta_seconds is not None else np.zeros(len(load.ops))
        all_sec = load.seconds + meta
        sec = all_sec[active]
        med = float(median(sec))
        i = int(np.argmax(sec))
        slow, slow_r = float(sec[i]), int(active[i])
        t = ctx.thresholds
        ratio = slow / med if med > 0 else float("inf")
        if ratio <= float(t["straggler_ratio"]) or slow <= float(t["straggler_min_time"]):
            return
        med_b = float(median(load.bytes[active]))
        slow_b = float(load.bytes[slow_r])
        limit = float(t["straggler_ratio"]) * med
        n_slow = int(np.count_nonzero(sec > limit))
        order = active[np.argsort(-sec, kind="stable")][: min(n_slow, ctx.max_files)]
        where = ("no I/O phase has a straggler in the data operations, but over the whole "
                 "run" if len(ctx.trace.records)
                 else "over the whole run (per-rank counters, no per-operation trace)")
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"{where[0].upper()}{where[1:]} rank {slow_r} spent {slow:.3g} s in I/O "
            f"({float(meta[slow_r]):.3g} s of it in metadata calls), {ratio:.1f}× the median "
            f"rank ({med:.3g} s); "
            f"{n_slow} of {len(active)} ranks with I/O took over {t['straggler_ratio']:g}× "
            "the median.",
            evidence={
                "layer": "POSIX/MPI-IO counters",
                "straggler_ranks": n_slow,
                "worst_ratio": round(ratio, 3),
                "worst_rank": slow_r,
                "worst_rank_seconds": round(slow, 6),
                "worst_rank_meta_seconds": round(float(meta[slow_r]), 6),
                "median_seconds": round(med, 6),
                "worst_rank_bytes": int(slow_b),
                "median_bytes": int(med_b),
                "source": "counters",
            },
            files=[
                FileEvidence(
                    f"rank {int(r)}",
                    {
                        "seconds": round(float(all_sec[r]), 6),
                        "metadata seconds": round(float(meta[r]), 6),
                        "bytes": int(load.bytes[r]),
                        "operations": int(load.ops[r]),
                    },
                    RankLocation(int(r)),
                )
                for r in order
            ],
            ranks=[slow_r],
            files_total=n_slow,
            recommendation=_meta_advice(float(meta[slow_r]), slow)
            or _straggler_advice(slow_b, med_b, float(t["straggler_ratio"])),
            snippet=advice.MPIIO_COLLECTIVE_WRITE,
            snippet_lang="c",
        ), slow - med)


def _meta_advice(meta: float, total: float) -> str:
    """Advice when most of a straggler's time is metadata calls, else ''."""
    if 2 * meta <= total:
        return ""
    return (
        f"{meta:.3g} s of the straggler's {total:.3g} s are opens, stats, seeks and syncs: "
        "open each file once and keep it open, stat once and share the result, and look at "
        "the metadata path of its node (metadata server load, a slow mount)."
    )


def _straggler_advice(slow_bytes: float, median_bytes: float, ratio: float) -> str:
    if median_bytes > 0 and slow_bytes > ratio * median_bytes:
        return (
            f"The straggler moved {human_size(slow_bytes)} against a median of "
            f"{human_size(median_bytes)}: it has more of the work. Balance the data "
            "per rank, or use collective I/O so aggregators even it out."
        )
    return (
        f"The straggler moved {human_size(slow_bytes)}, about as much as the median "
        f"rank ({human_size(median_bytes)}), yet took longer: look at its node, network "
        "link or storage target (OST), or use collective I/O so that a few aggregators hide "
        "one slow path."
    )
