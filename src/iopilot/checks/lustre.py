"""Lustre layer: stripe counts of shared files, request sizes against stripes, OST load.

The layout table (``trace.lustre``) says on which OSTs each file lives; the
POSIX counters (and DXT records, when present) say how much each file moved.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from ..model import Counters, Striping
from ..model.aggregate import group_sum, isin, median, unique
from ..units import human_size
from . import advice
from .base import Check, Context, Finding, Level, check, pct
from .iotime import io_time, price, times
from .recordtools import _layer_records

KiB, MiB = 1024, 1024 * 1024


def index_of(ids: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Position of each ``query`` id in the sorted array ``ids``, -1 if absent."""
    if not len(ids):
        return np.full(len(query), -1, np.int64)
    pos = np.minimum(np.searchsorted(ids, query), len(ids) - 1)
    return np.where(ids[pos] == query, pos, -1)


def gather(values: np.ndarray, at: np.ndarray, default: int = 0) -> np.ndarray:
    """``values[at]`` where ``at >= 0``, else ``default`` (safe on empty ``values``)."""
    out = np.full(len(at), default, values.dtype if len(values) else np.int64)
    ok = at >= 0
    out[ok] = values[at[ok]]
    return out


def access_sizes(c: Counters, prefix: str = "POSIX") -> tuple[np.ndarray, ...]:
    """The common-access slots of all rows, summed per (file, size).

    Returns (file ids, sizes, counts), sorted by file then size.  Darshan keeps
    the four most frequent sizes per row; rows of one file are merged here.
    """
    slots = range(1, 5)
    sizes = np.stack([c[f"{prefix}_ACCESS{k}_ACCESS"] for k in slots], axis=1).ravel()
    counts = np.stack([c[f"{prefix}_ACCESS{k}_COUNT"] for k in slots], axis=1).ravel()
    fids = np.repeat(c.file_id, 4)
    keep = (counts > 0) & (sizes >= 0)
    if not keep.any():
        empty = np.zeros(0, np.int64)
        return np.zeros(0, np.uint64), empty, empty
    pairs = np.stack([fids[keep], sizes[keep].astype(np.uint64)], axis=1)
    uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
    summed = group_sum(inv.reshape(-1), counts[keep], len(uniq))
    return uniq[:, 0], uniq[:, 1].astype(np.int64), summed


def common_access(c: Counters, prefix: str = "POSIX") -> tuple[np.ndarray, ...]:
    """Per file, the most frequent request size: (sorted file ids, size, count)."""
    fids, sizes, counts = access_sizes(c, prefix)
    if not len(fids):
        return fids, sizes, counts
    # Sort by file, then by count descending: the first row of each file wins.
    order = np.lexsort((-counts, fids))
    fids, sizes, counts = fids[order], sizes[order], counts[order]
    ids, first = np.unique(fids, return_index=True)
    return ids, sizes[first], counts[first]


def ranks_per_file(ctx: Context, c: Counters) -> tuple[np.ndarray, np.ndarray]:
    """(sorted file ids, ranks touching each): all ranks for a reduced record."""
    ids, per = ctx.per_file(c, {"reduced": c.rank == -1, "rows": c.rank >= 0})
    return ids, np.where(per["reduced"] > 0, max(ctx.trace.job.nprocs, 1), per["rows"])


def bytes_per_file(ctx: Context, c: Counters) -> tuple[np.ndarray, np.ndarray]:
    """(sorted file ids, bytes read + written), negative counters treated as 0."""
    moved = np.maximum(c["POSIX_BYTES_READ"], 0) + np.maximum(c["POSIX_BYTES_WRITTEN"], 0)
    ids, per = ctx.per_file(c, {"moved": moved})
    return ids, per["moved"]


class Layout:
    """The layout table with one row per file and its OST list expanded flat."""

    def __init__(self, table: Striping) -> None:
        ids, first = np.unique(table.file_id, return_index=True)  # per-rank duplicates
        # OSTs actually stored per row: the reader keeps fewer than the count
        # when Darshan recorded fewer, so never read past a row's own list.
        stored = np.diff(np.append(table.ost_start, len(table.ost_ids)))
        self.ids = ids
        self.stripe_size = np.maximum(table.stripe_size[first], 1)
        self.stripe_count = table.stripe_count[first]  # raw: 0 means unknown
        self.start = table.ost_start[first]
        self.n = np.clip(np.minimum(table.stripe_count[first], stored[first]), 0, None)
        # Flat (file row, OST) pairs.
        self.pair_row = np.repeat(np.arange(len(ids)), self.n)
        before = np.cumsum(self.n) - self.n
        within = np.arange(len(self.pair_row)) - np.repeat(before, self.n)
        self.pair_ost = table.ost_ids[np.repeat(self.start, self.n) + within]

    def rows(self, file_ids: np.ndarray) -> np.ndarray:
        return index_of(self.ids, file_ids)


def _layout(ctx: Context) -> Layout | None:
    table = ctx.trace.lustre
    if table is None or not len(table):
        return None
    return Layout(table)


def _striped_files(ctx: Context) -> tuple[Layout, Counters, np.ndarray, np.ndarray,
                                          np.ndarray, np.ndarray] | None:  # fmt: skip
    """(layout, POSIX counters, file ids, ranks per file, bytes per file, layout
    row of each file or -1), or None without Lustre layouts or POSIX counters."""
    lay, p = _layout(ctx), ctx.layer("POSIX")
    if lay is None or p is None:
        return None
    ids, ranks = ranks_per_file(ctx, p)
    _, moved = bytes_per_file(ctx, p)
    return lay, p, ids, ranks, moved, lay.rows(ids)


def stripe_for(size: int) -> int:
    """A stripe size (a multiple of 64 KiB, 1-64 MiB) that suits ``size``-byte requests."""
    if size < MiB:
        return MiB  # small requests: the usual 1 MiB, a multiple of power-of-two sizes
    if size % (64 * KiB) == 0 and size <= 64 * MiB:
        return int(size)
    return int(min(64 * MiB, 1 << int(np.ceil(np.log2(size)))))


def _more_stripes(suggested: int, current: int) -> int:
    """``suggested``, or more than ``current`` when that is not more (-1: every OST)."""
    if suggested > current:
        return suggested
    return min(2 * current, 64) if current < 64 else -1


def _dir(path: str) -> str:
    d = os.path.dirname(path)
    return d if d and not path.startswith("<") else "DIR"


@check
class LustreSingleStripeShared(Check):
    """A large file shared by many ranks lives on a single OST.

    Cost: unknown; what more stripes would gain depends on the bandwidth of
    OSTs the file does not use, which the log cannot measure."""

    id = "lustre-single-stripe-shared"
    layer = "LUSTRE"
    site_layers = ("POSIX",)
    drishti = None
    uses = ("lustre_shared_ranks", "lustre_min_bytes")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        files = _striped_files(ctx)
        if files is None:
            return
        lay, p, ids, ranks, moved, row = files
        count = np.where(row >= 0, lay.stripe_count[row], 0)
        t = ctx.thresholds
        bad = (
            (row >= 0)
            & (count == 1)
            & (ranks > t["lustre_shared_ranks"])
            & (moved > t["lustre_min_bytes"])
        )
        if not bad.any():
            return
        files, n = ctx.top_files(
            ids, moved.astype(np.float64),
            {"bytes": moved, "ranks": ranks, "stripe count": count}, bad,
        )  # fmt: skip
        worst = int(np.argmax(np.where(bad, moved, -1)))
        n_ranks = int(ranks[worst])
        # The log proves at least this many OSTs exist; with no such hint,
        # 16 is a safe default on any production Lustre.
        known = int(unique(lay.pair_ost).shape[0])
        stripes = int(min(n_ranks, max(16, known), 64))
        acc_ids, acc_size, _ = common_access(p)
        k = index_of(acc_ids, ids[worst : worst + 1])[0]
        req = int(acc_size[k]) if k >= 0 else 0
        stripe = stripe_for(req)
        total = int(moved[bad].sum())
        size_note = f" and the {human_size(req)} requests" if req else ""
        yield price(ctx, self.finding(
            ctx,
            Level.HIGH,
            f"{n} shared file(s) moving {human_size(total)} sit on a single OST "
            f"(stripe count 1) although up to {int(ranks[bad].max())} ranks access them: "
            "every request queues on one storage server.",
            evidence={"files": n, "bytes": total, "max_ranks": int(ranks[bad].max()),
                      "suggested_stripe_count": stripes, "suggested_stripe_size": stripe},
            files=files,
            files_total=n,
            recommendation=f"Stripe such files over many OSTs before they are created: "
            f"{stripes} stripes of {advice.lfs_size(stripe)} suit the {n_ranks} ranks"
            f"{size_note}. Set it on the output directory (new files inherit it) or pass the "
            "MPI-IO striping hints when creating the file; `lfs setstripe -c -1` uses every "
            "OST, for the largest files.",
            snippet=advice.lfs_setstripe(stripes, advice.lfs_size(stripe), _dir(files[0].path)),
            snippet_lang="sh",
        ), None, "the bandwidth of OSTs the file does not use cannot be measured")  # fmt: skip


@check
class LustreStripeRequestMismatch(Check):
    """Requests to striped shared files cross stripe boundaries.

    Cost: unknown; the lock contention a crossing request causes cannot be
    told apart from the rest of its time in the counters."""

    id = "lustre-stripe-request-mismatch"
    layer = "LUSTRE"
    site_layers = ("POSIX",)
    drishti = None
    uses = ("misaligned_ratio", "lustre_min_bytes")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        files = _striped_files(ctx)
        if files is None:
            return
        lay, p, ids, ranks, moved, row = files
        cand = (row >= 0) & (ranks > 1) & (moved > ctx.thresholds["lustre_min_bytes"])
        cand &= np.where(row >= 0, lay.stripe_count[row], 0) > 1
        if not cand.any():
            return
        stripe = np.where(row >= 0, lay.stripe_size[row], 1)
        crossing = np.zeros(len(ids), np.float64)
        requests = np.zeros(len(ids), np.float64)
        exact = np.zeros(len(ids), bool)

        # Estimate from the common request sizes.  A size above the stripe that is
        # not a multiple of it always ends inside a stripe of another OST.  A
        # smaller size that does not divide the stripe crosses a boundary only
        # when it starts late in a stripe: for back-to-back requests that is
        # size / stripe of them, so only the consecutive share of requests is
        # counted (strided requests may sit inside stripe-aligned domains, as
        # ROMIO's Lustre driver arranges).
        ops = np.maximum(p["POSIX_READS"], 0) + np.maximum(p["POSIX_WRITES"], 0)
        consec = np.maximum(p["POSIX_CONSEC_READS"], 0) + np.maximum(p["POSIX_CONSEC_WRITES"], 0)
        _, per = ctx.per_file(p, {"ops": ops, "consec": consec}, as_float=True)
        f_ops, f_consec = per["ops"], per["consec"]
        back_to_back = np.where(f_ops > 0, np.minimum(f_consec / np.maximum(f_ops, 1), 1.0), 0.0)
        fids, sizes, counts = access_sizes(p)
        at = index_of(ids, fids)
        ok = (at >= 0) & (sizes > 0)
        fids, sizes, counts, at = fids[ok], sizes[ok], counts[ok], at[ok]
        ss = stripe[at]
        odd = (sizes % ss != 0) & (ss % sizes != 0)
        frac = np.where(sizes > ss, 1.0, sizes / ss * back_to_back[at])
        np.add.at(requests, at, counts)
        np.add.at(crossing, at, np.where(odd, counts * frac, 0.0))

        # With DXT the offsets are known: count requests that start or end inside
        # a stripe and span more than one.
        recs = ctx.trace.records
        if len(recs):
            r = _layer_records(ctx, "POSIX")
            k = index_of(ids, r.file_id)
            use = (k >= 0) & (r.length > 0)
            use &= cand[np.maximum(k, 0)]
            if use.any():
                k, off, ln = k[use], r.offset[use], r.length[use]
                s = stripe[k]
                spans = off // s != (off + ln - 1) // s
                partial = (off % s != 0) | ((off + ln) % s != 0)
                has = np.zeros(len(ids), bool)
                has[k] = True
                requests[has] = 0
                crossing[has] = 0
                np.add.at(requests, k, 1.0)
                np.add.at(crossing, k, (spans & partial).astype(np.float64))
                exact |= has
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(requests > 0, crossing / requests, 0.0)
        bad = cand & (share > ctx.thresholds["misaligned_ratio"])
        if not bad.any():
            return
        files, n = ctx.top_files(
            ids, crossing,
            {"crossing requests": np.round(crossing).astype(np.int64),
             "requests": requests.astype(np.int64), "stripe size": stripe,
             "crossing %": np.round(100 * share, 1)},
            bad,
        )  # fmt: skip
        worst = int(np.argmax(np.where(bad, crossing, -1)))
        w_id, w_stripe = ids[worst], int(stripe[worst])
        mine = fids == w_id
        top = np.argsort(-counts[mine], kind="stable")[:4]
        shown = ", ".join(human_size(int(x)) for x in sizes[mine][top])
        n_cross, n_req = round(float(crossing[bad].sum())), int(requests[bad].sum())
        how = (
            "per the DXT trace"
            if exact[bad].all()
            else "a lower bound estimated from the common request sizes and the share of "
            "back-to-back requests"
        )
        req = int(sizes[mine][top][0]) if mine.any() else 0
        want = stripe_for(req) if req else w_stripe
        rec = (
            "Make requests a multiple or a divisor of the stripe size (pad records, or size "
            "blocks in whole stripes), or make the stripe size match the request size"
        )
        if want != w_stripe:
            rec += f" ({advice.lfs_size(want)} here)"
        rec += (
            "; with collective MPI-IO, give the aggregators buffers of whole stripes "
            "(cb_buffer_size) so the pieces they write start and end on stripe boundaries."
        )
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"{pct(n_cross, n_req):.1f} % of the requests to {n} striped shared file(s) "
            f"({n_cross:,} of {n_req:,}) cross a stripe boundary ({how}): the common sizes "
            f"({shown}) do not fit the {human_size(w_stripe)} stripes, so one request "
            "touches two OSTs and neighbouring ranks contend for the same stripe locks.",
            evidence={"crossing": n_cross, "requests": n_req, "stripe_size": w_stripe,
                      "exact": bool(exact[bad].all())},
            files=files,
            files_total=n,
            recommendation=rec,
            snippet=advice.lustre_stripe_hints(
                int(lay.stripe_count[row[worst]]), want, _dir(files[0].path),
                layout=want != w_stripe,  # never a command that sets what is there
            ),
            snippet_lang="sh",
        ), None, "counters do not separate stripe-lock contention from request time")  # fmt: skip


def _ost_load(ctx: Context, lay: Layout, p: Counters) -> tuple[np.ndarray, ...]:
    """Bytes per OST.

    Returns (OST ids, bytes per OST, pairs of files that moved data, bytes per
    (file, OST) pair, layout rows measured with DXT, bytes per layout row).
    """
    ids, moved = bytes_per_file(ctx, p)
    frow = lay.rows(ids)  # layout row of each POSIX file
    # Bytes of each layout row; files without POSIX traffic move nothing.
    row_bytes = np.zeros(len(lay.ids), np.float64)
    keep = frow >= 0
    row_bytes[frow[keep]] = moved[keep]
    # Default: each file's bytes spread evenly over its OSTs.
    pair_bytes = row_bytes[lay.pair_row] / np.maximum(lay.n[lay.pair_row], 1)
    dxt = np.zeros(len(lay.ids), bool)
    recs = ctx.trace.records
    if len(recs):
        r = _layer_records(ctx, "POSIX")
        k = lay.rows(r.file_id)
        use = (k >= 0) & (r.length > 0)
        use &= np.where(k >= 0, lay.n[np.maximum(k, 0)], 0) > 0
        if use.any():
            k, off, ln = k[use], r.offset[use], r.length[use]
            # A request is charged to the OST of its first byte; requests that
            # straddle a stripe boundary are rare enough not to matter here.
            within = (off // lay.stripe_size[k]) % lay.n[k]
            rec_sum = group_sum(k, ln, len(lay.ids), as_float=True)
            dxt[k] = True
            # Scale to the counters' total, in case DXT kept only part of the run.
            with np.errstate(divide="ignore", invalid="ignore"):  # rows DXT did not see
                scale = np.where(rec_sum > 0, np.maximum(row_bytes, rec_sum) / rec_sum, 0.0)
            before = np.cumsum(lay.n) - lay.n
            pair_idx = before[k] + within
            from_dxt = group_sum(pair_idx, ln * scale[k], len(lay.pair_row))
            pair_bytes = np.where(dxt[lay.pair_row], from_dxt, pair_bytes)
    active = row_bytes[lay.pair_row] > 0
    osts, inv = np.unique(lay.pair_ost[active], return_inverse=True)
    load = group_sum(inv, pair_bytes[active], len(osts), as_float=True)
    return osts, load, active, pair_bytes, dxt, row_bytes


@check
class LustreOstImbalance(Check):
    """A few OSTs carry much more of the job's data than the others.

    Cost, from the bandwidth ratio: the slowest rank's POSIX read and write
    time on the files of the busiest OST times ``1 - mean / busiest`` (the
    part a balanced spread would take off)."""

    id = "lustre-ost-imbalance"
    layer = "LUSTRE"
    drishti = None
    uses = ("ost_imbalance", "lustre_min_bytes")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        lay, p = _layout(ctx), ctx.layer("POSIX")
        if lay is None or p is None:
            return
        osts, load, active, pair_bytes, dxt, row_bytes = _ost_load(ctx, lay, p)
        total = float(load.sum())
        if len(osts) < 2 or total <= ctx.thresholds["lustre_min_bytes"]:
            return
        mean = total / len(osts)
        ratio = float(load.max()) / mean
        if ratio <= ctx.thresholds["ost_imbalance"]:
            return
        order = np.argsort(-load, kind="stable")
        busiest = int(osts[order[0]])
        top = ", ".join(
            f"OST {int(osts[i])}: {human_size(load[i])}" for i in order[:5]
        )
        # Files that put data on the busiest OST.
        on = active & (lay.pair_ost == busiest) & (pair_bytes > 0)
        rows = lay.pair_row[on]
        files, n = ctx.top_files(
            lay.ids[rows], pair_bytes[on],
            {"bytes on this OST": np.round(pair_bytes[on]).astype(np.int64),
             "file bytes": row_bytes[rows].astype(np.int64),
             "stripe count": lay.stripe_count[rows]},
        )  # fmt: skip
        how = (
            "from the DXT offsets"
            if dxt[row_bytes > 0].all()
            else "assuming each file's bytes spread evenly over its stripes"
            if not dxt.any()
            else "from DXT offsets where traced, else spread evenly over each file's stripes"
        )
        big = rows[np.argmax(pair_bytes[on])] if len(rows) else 0
        stripes = _more_stripes(int(min(64, max(4, len(osts)))), int(lay.stripe_count[big]))
        cost = _time_on(ctx, p, lay.ids[rows]) * (1.0 - 1.0 / ratio)
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"OST {busiest} carries {human_size(load[order[0]])}, {ratio:.1f}x the "
            f"mean of the {len(osts)} OSTs the job's files use "
            f"({pct(load[order[0]], total):.1f} % of {human_size(total)}; bytes per "
            f"OST {how}). Busiest: {top}.",
            evidence={"busiest_ost": busiest, "busiest_bytes": int(load[order[0]]),
                      "mean_bytes": int(mean), "ratio": round(ratio, 3), "osts": len(osts),
                      "bytes": int(total)},
            files=files,
            files_total=n,
            recommendation="Spread the data over more OSTs: give large files a stripe count "
            "above 1 (a few stripes for files written by one process, `-c -1` for very "
            "large shared files), and let Lustre pick each file's first OST (do not pin it "
            "with `-i`), so that files land on different servers.",
            snippet=advice.lfs_setstripe(
                stripes, advice.lfs_size(int(lay.stripe_size[big])),
                _dir(ctx.trace.name(int(lay.ids[big]))),
            ),
            snippet_lang="sh",
        ), cost)  # fmt: skip


@check
class LustreSlowOst(Check):
    """Files on one OST are much slower than files elsewhere.

    Cost, from the bandwidth ratio: the slowest rank's POSIX read and write
    time on the slow OSTs' files times ``1 - 1 / slowdown`` (the least
    slowdown among the slow OSTs): what the typical OST's rate would save."""

    id = "lustre-slow-ost"
    layer = "LUSTRE"
    drishti = None
    uses = ("slow_ost_ratio", "slow_ost_min_time", "small_request_size")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        lay, p = _layout(ctx), ctx.layer("POSIX")
        if lay is None or p is None:
            return
        t = ctx.thresholds
        spent = np.maximum(p["POSIX_F_READ_TIME"], 0) + np.maximum(p["POSIX_F_WRITE_TIME"], 0)
        ids, per = ctx.per_file(p, {"secs": spent}, as_float=True)
        secs = per["secs"]
        _, moved = bytes_per_file(ctx, p)
        frow = lay.rows(ids)
        # Only files large enough for their time to reflect bandwidth, not latency.
        ok = (frow >= 0) & (secs > 0) & (moved >= t["small_request_size"])
        if not ok.any():
            return
        rate = np.zeros(len(lay.ids), np.float64)  # bytes per second of each file
        rate[frow[ok]] = moved[ok] / secs[ok]
        row_secs = np.zeros(len(lay.ids), np.float64)
        row_secs[frow[ok]] = secs[ok]
        has = rate[lay.pair_row] > 0
        pr, po = lay.pair_row[has], lay.pair_ost[has]
        order = np.argsort(po, kind="stable")
        pr, po = pr[order], po[order]
        osts, first, nfiles = np.unique(po, return_index=True, return_counts=True)
        if len(osts) < 3:
            return  # nothing to compare against
        groups = np.split(pr, first[1:])
        # One median per OST: a loop over OSTs (hundreds at most), not over rows.
        med = np.array([median(rate[g]) for g in groups])
        spent = np.array([row_secs[g].sum() for g in groups])
        typical = float(median(med))
        with np.errstate(divide="ignore"):
            slowdown = np.where(med > 0, typical / med, 0.0)
        slow = (slowdown > t["slow_ost_ratio"]) & (nfiles >= 2) & (spent > t["slow_ost_min_time"])
        if not slow.any():
            return
        worst = int(np.argmax(np.where(slow, slowdown, -1)))
        names = [int(o) for o in osts[slow]]
        on = isin(lay.pair_ost, osts[slow]) & (rate[lay.pair_row] > 0)
        rows = lay.pair_row[on]
        files, n = ctx.top_files(
            lay.ids[rows], row_secs[rows],
            {"seconds": np.round(row_secs[rows], 3), "MiB/s": np.round(rate[rows] / MiB, 2),
             "OST": lay.pair_ost[on]},
        )  # fmt: skip
        fast = [int(o) for o in osts[np.argsort(-med)] if int(o) not in names]
        mib = MiB
        cost = _time_on(ctx, p, lay.ids[rows]) * (1.0 - 1.0 / float(slowdown[slow].min()))
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"{len(names)} OST(s) are slow: files on OST {int(osts[worst])} move data at a "
            f"median {med[worst] / mib:.2f} MiB/s against {typical / mib:.2f} MiB/s on the "
            f"typical OST ({slowdown[worst]:.1f}x slower, {int(nfiles[worst])} files, "
            f"{spent[worst]:.1f} s of I/O).",
            evidence={"slow_osts": ",".join(str(o) for o in names),
                      "median_mib_s": round(float(med[worst]) / mib, 3),
                      "typical_mib_s": round(typical / mib, 3),
                      "slowdown": round(float(slowdown[worst]), 2)},
            files=files,
            files_total=n,
            recommendation="The data is spread evenly but one server is slow (a degraded or "
            "overloaded OST): report the OST index to the system administrators; until it is "
            "fixed, new files can be placed on other OSTs.",
            snippet=advice.lustre_check_ost(names, fast, _dir(files[0].path)),
            snippet_lang="sh",
        ), cost)  # fmt: skip


def _time_on(ctx: Context, p: Counters, ids: np.ndarray) -> float:
    """The slowest rank's POSIX read and write seconds on the files ``ids``."""
    spent = np.where(isin(p.file_id, ids), times(p, "F_READ_TIME", "F_WRITE_TIME"), 0.0)
    return io_time(ctx).rows_at_slowest(p, spent)
