"""How much of the run was I/O: seconds per rank and per layer, once per diagnosis.

Each operation is counted once, at the highest layer that traced its file
(per file, the layer with the highest ``level`` in the vocabulary): a POSIX
write issued by ``MPI_File_write_all`` is inside the MPI-IO call's time, so
files opened through MPI-IO (or HDF5, PnetCDF) count that layer's time only.

Per layer and file the seconds come from per-operation records when the
source has them for that file (iopilot traces, Darshan's DXT; not when the
source marks them partial) and from the counters otherwise:
``F_READ_TIME + F_WRITE_TIME + F_META_TIME``.  Records carry the rank of each
operation.  Counter rows of shared files (rank -1) are sums over the ranks;
they are spread over the ranks with Darshan's ``F_SLOWEST_RANK_TIME`` and
``F_FASTEST_RANK_TIME`` (and their ranks) where the row has consistent ones,
the rest evenly over the other ranks, or evenly over all ranks otherwise.

Checks use :func:`io_time` for the table, :meth:`IoTime.rows_at_slowest` and
:func:`records_share_at_slowest` to turn the seconds of the operations a
problem concerns into seconds of the slowest rank, and :func:`price` to put
them in the finding.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np

from .._record import record
from ..model import RECORD_LAYERS, Counters, Trace, display
from ..model.aggregate import per_rank
from ..vocabulary import MODULE, SIZE_BIN_UPPER, SIZE_BINS
from .base import Context, Finding, Level
from .recordtools import _busy, _cached, chunks, distinct

TIME_PARTS = ("F_READ_TIME", "F_WRITE_TIME", "F_META_TIME")
SPREAD_RANK_TIMES = "fastest and slowest rank times"  # how rank -1 rows were spread
SPREAD_MEAN = "mean over ranks"


def _col(c: Counters, name: str) -> np.ndarray:
    """A time counter of ``c`` (zeros when the layer has no such counter; Darshan
    writes -1 for a time it did not record)."""
    full = f"{c.layer}_{name}"
    return np.maximum(c[full], 0.0) if c.has(full) else np.zeros(len(c))


def _timed(c: Counters) -> np.ndarray:
    """Rows whose times were recorded (none of them is -1)."""
    ok = np.ones(len(c), bool)
    for p in TIME_PARTS:
        if c.has(f"{c.layer}_{p}"):
            ok &= c[f"{c.layer}_{p}"] >= 0
    return ok


def _among(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Which of ``ids`` are in ``sorted_ids`` (sorted, unique): a binary search
    per value, cheaper than np.isin's sort of both arrays when ``ids`` is long."""
    if not len(sorted_ids):
        return np.zeros(len(ids), bool)
    i = np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
    return sorted_ids[i] == ids


def _file_key(c: Counters) -> np.ndarray:
    """The file a row belongs to: datasets and variables count for their file."""
    if MODULE[c.layer].parent and c.parent_id is not None:
        return c.parent_id
    return c.file_id


@record
class IoTime:
    """I/O seconds per rank and layer, each operation at its highest layer."""

    nprocs: int
    run_seconds: float  # 0 when the source does not know
    per_rank: dict[str, np.ndarray]  # layer -> seconds per rank (index = rank)
    source: dict[str, str]  # layer -> "records", "counters" or "records and counters"
    spread: dict[str, int]  # rank -1 rows spread per method (SPREAD_*)

    @cached_property  # asked for by every estimate; the table is complete by then
    def rank_seconds(self) -> np.ndarray:
        """Seconds of I/O per rank, all layers."""
        out = np.zeros(self.nprocs)
        for v in self.per_rank.values():
            out += v
        return out

    @property
    def slowest_rank(self) -> int:
        return int(np.argmax(self.rank_seconds)) if self.nprocs else 0

    @property
    def slowest_seconds(self) -> float:
        return float(self.rank_seconds.max()) if self.nprocs else 0.0

    @property
    def share(self) -> float | None:
        """Slowest rank's I/O seconds over the run's (None when the run time is unknown)."""
        if self.run_seconds <= 0:
            return None
        return min(self.slowest_seconds / self.run_seconds, 1.0)

    def share_text(self, seconds: float) -> str:
        """"1.23 s, 4.5 % of the run" (without the share when the run time is unknown)."""
        if self.run_seconds > 0:
            return f"{seconds:.3g} s, {100 * seconds / self.run_seconds:.1f} % of the run"
        return f"{seconds:.3g} s"

    def spread_rows(self, c: Counters, seconds: np.ndarray) -> np.ndarray:
        """Seconds per rank of ``seconds`` given per row of ``c``: rank -1 rows
        are spread as the layer's total time is (see the module's docstring)."""
        n = self.nprocs
        out = per_rank(c.rank, seconds, n)
        shared = c.rank == -1
        if not shared.any():
            return out
        fs, ss, fr, sr, ok = self._spread_weights(c)
        x = seconds[shared]
        fs, ss, fr, sr, ok = fs[shared], ss[shared], fr[shared], sr[shared], ok[shared]
        # Evenly: every rank gets x / n.
        out += x[~ok].sum() / n
        if ok.any():
            x, fs, ss, fr, sr = x[ok], fs[ok], ss[ok], fr[ok], sr[ok]
            np.add.at(out, fr, x * fs)
            np.add.at(out, sr, x * ss)
            rest = x * (1.0 - fs - ss) / (n - 2)
            out += rest.sum()
            np.subtract.at(out, fr, rest)
            np.subtract.at(out, sr, rest)
        return out

    def _spread_weights(self, c: Counters) -> tuple[np.ndarray, ...]:
        """Per row: share of the fastest and the slowest rank, their ranks, and
        whether those are usable (otherwise the row is spread evenly)."""
        n = self.nprocs
        total = sum(_col(c, p) for p in TIME_PARTS)
        zeros = np.zeros(len(c), np.int64)
        p = c.layer
        if n > 2 and c.has(f"{p}_F_FASTEST_RANK_TIME") and c.has(f"{p}_FASTEST_RANK"):
            ft, st = c[f"{p}_F_FASTEST_RANK_TIME"], c[f"{p}_F_SLOWEST_RANK_TIME"]
            fr, sr = c[f"{p}_FASTEST_RANK"], c[f"{p}_SLOWEST_RANK"]
            with np.errstate(divide="ignore", invalid="ignore"):
                fs = np.where(total > 0, ft / total, 0.0)
                ss = np.where(total > 0, st / total, 0.0)
            # Darshan leaves these zero or inconsistent in some logs: use them
            # only when they name two ranks of the job and fit in the total.
            ok = ((total > 0) & (fr != sr) & (fr >= 0) & (fr < n) & (sr >= 0) & (sr < n)
                  & (fs >= 0) & (ss >= fs) & (fs + ss <= 1.0 + 1e-9) & (st > 0))  # fmt: skip
            fr, sr = np.where(ok, fr, 0), np.where(ok, sr, 0)
            w = (np.where(ok, fs, 0.0), np.where(ok, ss, 0.0), fr, sr, ok)
        else:
            w = (np.zeros(len(c)), np.zeros(len(c)), zeros, zeros, np.zeros(len(c), bool))
        return w

    def rows_at_slowest(self, c: Counters, seconds: np.ndarray) -> float:
        """Seconds the slowest rank spends in ``seconds`` (per row of ``c``)."""
        if not len(c):
            return 0.0
        return float(self.spread_rows(c, seconds)[self.slowest_rank])

    def as_dict(self) -> dict[str, Any]:
        """The report's ``io_time`` field (see docs/json-report.md)."""
        slow = self.slowest_rank
        ranks = self.rank_seconds
        share = self.share
        return {
            "run_seconds": round(self.run_seconds, 6),
            "slowest_rank": slow,
            "slowest_rank_seconds": round(self.slowest_seconds, 6),
            "share": None if share is None else round(share, 6),
            "mean_rank_seconds": round(float(ranks.mean()) if len(ranks) else 0.0, 6),
            "nprocs": self.nprocs,
            "by_layer": {
                "slowest_rank": {display(k): round(float(v[slow]), 6)
                                 for k, v in self.per_rank.items()},
                "all_ranks": {display(k): round(float(v.sum()), 6)
                              for k, v in self.per_rank.items()},
            },
            "source": {display(k): v for k, v in self.source.items()},
            "shared_rows": dict(self.spread),
        }


def io_time(ctx: Context) -> IoTime:
    """The job's I/O time model, computed once per diagnosis."""
    return _cached(ctx, "io_time", lambda: compute(ctx.trace))


def compute(trace: Trace) -> IoTime:
    """Build the I/O time model of ``trace`` (see the module's docstring)."""
    tables = {k: c for k, c in trace.counters.items() if len(c) and k in MODULE}
    recs, metas = trace.records, trace.meta_records
    seen = [int(c.rank.max()) for c in tables.values()]
    seen += [int(r.rank.max()) for r in (recs, metas) if len(r)]
    nprocs = max([max(trace.job.nprocs, 1), *(s + 1 for s in seen)])
    # Records of a layer the source marks partial would undercount: skip them.
    partial = {m.name.removeprefix("DXT_") for m in trace.modules
               if m.partial and m.name.startswith("DXT_")}  # fmt: skip
    usable = {name for name in RECORD_LAYERS if name not in partial}

    # Files each record layer touched: few distinct values among many records.
    rec_files = {(kind, code): distinct(r.file_id, lambda cut, r=r, code=code: r.layer[cut] == code)
                 for kind, r in (("data", recs), ("meta", metas)) if len(r)
                 for code in distinct(r.layer).tolist()}  # fmt: skip

    # Highest level that traced each file, over counters and records; a row
    # without recorded times (PnetCDF's in some Darshan versions) cannot
    # stand for the layers below it.
    keys, levels = [], []
    for name, c in tables.items():
        timed = _timed(c)
        keys.append(_file_key(c)[timed])
        levels.append(np.full(int(timed.sum()), MODULE[name].level, np.int8))
    for (_, code), files in rec_files.items():
        keys.append(files)
        levels.append(np.full(len(files), MODULE[RECORD_LAYERS[code]].level, np.int8))
    if keys:
        uniq, inv = np.unique(np.concatenate(keys).astype(np.uint64), return_inverse=True)
        top = np.zeros(len(uniq), np.int8)
        np.maximum.at(top, inv, np.concatenate(levels))
    else:
        uniq, top = np.zeros(0, np.uint64), np.zeros(0, np.int8)

    def at_top(layer: str, k: np.ndarray) -> np.ndarray:
        return _among(uniq, k) & (top[np.minimum(np.searchsorted(uniq, k), len(uniq) - 1)]
                                  == MODULE[layer].level)  # fmt: skip

    model = IoTime(nprocs, float(trace.job.runtime or 0.0), {}, {}, {})
    spread = {SPREAD_RANK_TIMES: 0, SPREAD_MEAN: 0}
    for name in MODULE:
        c = tables.get(name)
        per = np.zeros(nprocs)
        used: list[str] = []
        covered = {"data": np.zeros(0, np.uint64), "meta": np.zeros(0, np.uint64)}
        code = RECORD_LAYERS.index(name) if name in RECORD_LAYERS else -1
        for kind, r in (("data", recs), ("meta", metas)):
            files = rec_files.get((kind, code))
            if name not in usable or files is None:
                continue
            files = files[at_top(name, files)]
            if not len(files):
                continue
            some = len(files) < len(rec_files[(kind, code)])  # some of its files sit higher
            for cut in chunks(len(r)):  # in steps: no copy of whole columns
                sel = r.layer[cut] == code
                if some:
                    sel[sel] = _among(files, r.file_id[cut][sel])
                dur = _busy(r.start[cut][sel], r.end[cut][sel])
                per += per_rank(r.rank[cut][sel], dur, nprocs)
            covered[kind] = files
            if "records" not in used:
                used.append("records")
        if c is not None:
            keep = at_top(name, _file_key(c))
            # Files whose operations the records already counted keep only
            # what the records lack (metadata, for Darshan's DXT).
            data = np.where(_among(covered["data"], c.file_id), 0.0,
                            _col(c, "F_READ_TIME") + _col(c, "F_WRITE_TIME"))  # fmt: skip
            meta = np.where(_among(covered["meta"], c.file_id), 0.0, _col(c, "F_META_TIME"))
            secs = np.where(keep, data + meta, 0.0)
            if secs.any():
                used.append("counters")
                shared = (c.rank == -1) & (secs > 0)
                if shared.any():
                    ok = model._spread_weights(c)[4]
                    spread[SPREAD_RANK_TIMES] += int((shared & ok).sum())
                    spread[SPREAD_MEAN] += int((shared & ~ok).sum())
                per += model.spread_rows(c, secs)
        if used:
            model.per_rank[name] = per
            model.source[name] = " and ".join(used)
    model.spread = {k: v for k, v in spread.items() if v}
    return model


# ---------------------------------------------------------------------------
# Seconds at stake: what the checks use to fill ``Finding.cost_seconds``.
# ---------------------------------------------------------------------------


def price(ctx: Context, f: Finding, seconds: float | None, why: str = "", *,
          outside: float = 0.0) -> Finding:  # fmt: skip
    """Set ``f``'s cost: seconds of the slowest rank's I/O (never more than all
    of it), stated in the message with its share of the run (always for
    problems, for notes when above 0); None with ``why`` in the evidence
    (``cost_unknown``) when the source cannot support an estimate.
    ``outside``: seconds between the I/O calls that the fix also saves (a
    tight loop's per-call work), within the run's time outside I/O."""
    if seconds is None:
        f.cost_seconds = None
        f.evidence["cost_unknown"] = why
        return f
    times = io_time(ctx)
    room = max(times.run_seconds - times.slowest_seconds, 0.0) if times.run_seconds > 0 else (
        max(outside, 0.0))
    beyond = min(max(outside, 0.0), room)
    s = round(min(max(float(seconds), 0.0), times.slowest_seconds) + beyond, 6)
    if beyond > 0:  # what a cap on the I/O time leaves out
        f.evidence["outside_io_seconds"] = round(beyond, 6)
    f.cost_seconds = s
    if s > 0 or f.level >= Level.WARN:
        f.message += f" At stake: {times.share_text(s)} (slowest rank)."
    return f


def times(c: Counters, *parts: str) -> np.ndarray:
    """Per row, the sum of the named time counters (``F_READ_TIME`` ...)."""
    out = np.zeros(len(c))
    for p in parts:
        out += _col(c, p)
    return out


def direction_time(c: Counters, direction: str) -> np.ndarray:
    """Per row, the time of reads ("READ") or writes ("WRITE")."""
    return _col(c, "F_READ_TIME" if direction.startswith("READ") else "F_WRITE_TIME")


def share_of(seconds: np.ndarray, part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    """``seconds * part / whole`` per row (0 where ``whole`` is 0): the time of
    some of a row's operations, taking each operation to cost the same."""
    whole = np.asarray(whole, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(whole > 0, seconds * np.asarray(part, np.float64) / whole, 0.0)


def small_request_seconds(ctx: Context, c: Counters, prefix: str, rw: str,
                          small: np.ndarray, ops: np.ndarray,
                          moved: np.ndarray) -> np.ndarray:  # fmt: skip
    """Per row, the seconds small requests lose against large ones.

    The small requests' time is the direction's time times their share of
    the row's requests; their bytes are estimated from the size histogram
    (bin midpoints).  Fixing them would move the same bytes at the rate the
    job's large requests of that layer and direction reached (bytes over
    time), or at ``default_bandwidth`` when it made none.  The cost is the
    difference, never below zero."""
    t = direction_time(c, rw)
    small_t = share_of(t, small, ops)
    cols = ctx.small_bins(c, prefix, rw)
    lower = (0, *(u + 1 for u in SIZE_BIN_UPPER[:-1]))
    mid = {f"{prefix}_{rw}_{b}": (lo + up) / 2
           for b, lo, up in zip(SIZE_BINS, lower, SIZE_BIN_UPPER, strict=True)}
    in_bins = np.zeros(len(c))
    est = np.zeros(len(c))
    for col in cols:
        n = np.maximum(c[col], 0)
        in_bins += n
        est += n * mid[col]
    small_b = np.minimum(share_of(est, small, in_bins), np.maximum(moved, 0))
    large_t = float((t - small_t).sum())
    large_b = float((np.maximum(moved, 0) - small_b).sum())
    if large_t > 0 and large_b > 0 and int((ops - small).sum()) > 0:
        rate = large_b / large_t
    else:
        rate = float(ctx.thresholds["default_bandwidth"])
    return np.maximum(small_t - small_b / rate, 0.0)


def records_share_at_slowest(ctx: Context, layer: str, op: int, files: np.ndarray,
                             part: np.ndarray, whole: np.ndarray) -> float:  # fmt: skip
    """Seconds the slowest rank spends in ``op`` records of ``layer`` on
    ``files``, each file's time scaled by ``part / whole`` of it."""
    times_ = io_time(ctx)
    r = ctx.trace.records
    if not len(r) or not len(files):
        return 0.0
    mine = (r.rank == times_.slowest_rank) & (r.layer == RECORD_LAYERS.index(layer)) & (r.op == op)
    order = np.argsort(files)
    files, part, whole = files[order], np.asarray(part)[order], np.asarray(whole)[order]
    k = np.searchsorted(files, r.file_id[mine])
    k = np.minimum(k, len(files) - 1)
    hit = files[k] == r.file_id[mine]
    dur = np.maximum(r.end[mine] - r.start[mine], 0.0)
    frac = share_of(np.ones(len(files)), part, whole)
    return float((dur[hit] * frac[k[hit]]).sum())
