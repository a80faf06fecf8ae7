"""MPI-IO layer: whether it is used, collective and non-blocking I/O, aggregators."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..model import OP_READ, OP_WRITE, Counters
from ..model.aggregate import isin, unique
from ..units import human_size
from ..vocabulary import MPIIO_COLLECTIVE, mpiio_counters
from . import advice
from .base import Check, Context, Finding, Level, check, pct
from .collbuf import cb_disabled, collective_files, collective_ops
from .iotime import direction_time, io_time, price, share_of
from .language import in_language
from .recordtools import _busy, _layer_records


def collective_snippet(ctx: Context, word: str) -> tuple[str, str]:
    """(snippet, language) of collective MPI-IO for ``word`` "read" or "write"."""
    if word == "read":
        return in_language(ctx, advice.PY_MPIIO_COLLECTIVE_READ, advice.MPIIO_COLLECTIVE_READ,
                           fortran=advice.FORTRAN_MPIIO_COLLECTIVE_READ)
    return in_language(ctx, advice.PY_MPIIO_COLLECTIVE_WRITE, advice.C_MPIIO_COLLECTIVE_STEP,
                       fortran=advice.FORTRAN_MPIIO_COLLECTIVE_WRITE)


def above_ideal(ctx: Context, c: Counters, seconds: np.ndarray, moved: np.ndarray,
                direction: str) -> float:  # fmt: skip
    """The slowest rank's ``seconds`` (per MPI-IO row) minus what a
    collective call with buffering would take for the same bytes, so the
    rest is what the fix saves: the aggregators (one per node) move all
    ranks' ``moved`` bytes in few large requests, each at the rate the
    file system showed for these files' POSIX calls in ``direction``, or
    ``default_bandwidth`` if that is faster (small requests show less than
    large ones reach), and every rank waits for them."""
    moved = np.asarray(moved, np.float64)
    rate = float(ctx.thresholds["default_bandwidth"])
    p = ctx.layer("POSIX")
    if p is not None:
        on = isin(p.file_id, unique(c.file_id[moved > 0]))
        col = "POSIX_BYTES_READ" if direction == "READ" else "POSIX_BYTES_WRITTEN"
        t = float(direction_time(p, direction)[on].sum())
        if t > 0:
            rate = max(rate, float(p[col][on].sum()) / t)
    nodes = max(1, len(set(ctx.trace.job.hosts.values())))
    ideal = float(moved.sum()) / (nodes * rate)
    return max(io_time(ctx).rows_at_slowest(c, seconds) - ideal, 0.0)


@check
class NoMpiio(Check):
    """A parallel job does its I/O without MPI-IO.

    Cost: unknown; what MPI-IO would save depends on how the ranks' requests
    would merge, which POSIX counters cannot tell."""

    id = "mpiio-not-used"
    layer = "MPIIO"
    site_layers = ("POSIX",)  # the POSIX calls MPI-IO would make collective
    drishti = "M01"

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        if ctx.layer("MPIIO") is not None:
            return
        posix = ctx.layer("POSIX")
        if posix is None or ctx.trace.job.nprocs < 2 or ctx.trace.job.rank_source == "workers":
            # A serial program has no use for MPI-IO: Drishti warns anyway, we do not;
            # nor do a program's Python workers (a pool, Dask), which share no communicator.
            return
        moved = posix.total("POSIX_BYTES_READ") + posix.total("POSIX_BYTES_WRITTEN")
        if not moved:
            return
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"{ctx.trace.job.nprocs} ranks move {human_size(moved)} through POSIX "
            "without MPI-IO.",
            evidence={"ranks": ctx.trace.job.nprocs, "posix_bytes": moved},
            recommendation="Use MPI-IO, or a library on top of it (HDF5, PnetCDF, ADIOS2), so "
            "that collective I/O can merge the ranks' requests.",
            snippet=advice.MPIIO_COLLECTIVE_WRITE,
            snippet_lang="c",
        ), None, "what collective MPI-IO would save depends on how requests would merge")


class _Collective(Check):
    """Cost: the slowest rank's MPI-IO time in its independent calls of that
    direction (the direction's time times their share of its calls, each
    call taken to cost the same) minus what a collective call with
    buffering would take for the same bytes: the aggregators, one per node,
    moving all ranks' bytes at ``default_bandwidth`` (see
    :func:`above_ideal`); 0 when nothing is wrong.  The MPI-IO time counts,
    not the POSIX time beneath it: the independent calls also lock, sieve
    and wait above POSIX."""

    layer = "MPIIO"
    uses = ("collective_ops", "collective_share_low")
    direction = "READ"
    ok_code = "M04"

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        c = ctx.layer("MPIIO")
        if c is None:
            return
        rw = "READS" if self.direction == "READ" else "WRITES"
        word = "read" if self.direction == "READ" else "write"
        coll = sum(c.total(n) for n in mpiio_counters(self.direction, MPIIO_COLLECTIVE))
        indep = c.total(f"MPIIO_INDEP_{rw}")
        nb = c.total(f"MPIIO_NB_{rw}")
        total = coll + indep + nb
        if not total:
            return
        t = ctx.thresholds
        evidence = {"collective": coll, "independent": indep, "nonblocking": nb}
        snippet, lang = collective_snippet(ctx, word)
        share = coll / total
        ops = sum(c[n] for n in mpiio_counters(self.direction))
        indep_rows = c[f"MPIIO_INDEP_{rw}"]
        moved = c["MPIIO_BYTES_READ" if word == "read" else "MPIIO_BYTES_WRITTEN"]
        cost = above_ideal(ctx, c, share_of(direction_time(c, self.direction), indep_rows, ops),
                           share_of(moved, indep_rows, ops), self.direction)
        if coll == 0 and total > t["collective_ops"]:
            ids, sums = ctx.per_file(c, {"indep": c[f"MPIIO_INDEP_{rw}"]})
            per = sums["indep"]
            files, n = ctx.top_files(ids, per, {f"independent {word}s": per}, per > 0)
            yield price(ctx, self.finding(
                ctx,
                Level.HIGH,
                f"MPI-IO is used but no {word} is collective: {indep:,} independent {word} "
                f"calls ({pct(indep, total):.1f} %).",
                evidence=evidence,
                files=files,
                files_total=n,
                recommendation=f"Use collective {word}s (the _all variants) so MPI-IO can merge "
                "the ranks' requests into few large ones.",
                snippet=snippet,
                snippet_lang=lang,
            ), cost)
        elif coll and share < t["collective_share_low"] and indep > t["collective_ops"]:
            yield price(ctx, self.finding(
                ctx,
                Level.WARN,
                f"Only {pct(coll, total):.1f} % of MPI-IO {word}s are collective "
                f"({coll:,} of {total:,}); {indep:,} are independent.",
                drishti=self.ok_code,
                drishti_note="Drishti reports any collective use as OK",
                evidence=evidence,
                recommendation=f"Make the independent {word}s collective too; with HDF5 set the "
                "transfer property to collective for every dataset.",
                snippet=snippet,
                snippet_lang=lang,
            ), cost)
        elif coll == 0:
            yield price(ctx, self.finding(
                ctx,
                Level.INFO,
                f"No MPI-IO {word} is collective: {indep:,} independent {word}s, averaging "
                f"{human_size(_avg_bytes(c, word, total))} each; too few "
                f"(at most {t['collective_ops']:,}) to make it a problem.",
                drishti=None,
                drishti_note="Drishti says nothing below its operation threshold",
                evidence=evidence,
            ), 0.0)
        else:
            yield price(ctx, self.finding(
                ctx,
                Level.OK,
                f"MPI-IO {word}s are collective: {coll:,} of {total:,} ({pct(coll, total):.1f} %).",
                drishti=self.ok_code,
                evidence=evidence,
            ), 0.0)


def _avg_bytes(c, word: str, ops: int) -> float:
    moved = c.total("MPIIO_BYTES_READ" if word == "read" else "MPIIO_BYTES_WRITTEN")
    return moved / ops if ops else 0.0


@check
class MpiioCollectiveReads(_Collective):
    """MPI-IO reads that are not collective."""

    id = "mpiio-collective-reads"
    drishti = "M02"
    direction = "READ"
    ok_code = "M04"


@check
class MpiioCollectiveWrites(_Collective):
    """MPI-IO writes that are not collective."""

    id = "mpiio-collective-writes"
    drishti = "M03"
    direction = "WRITE"
    ok_code = "M05"


class _NonBlocking(Check):
    """Cost: what overlapping the blocking calls with computation could hide.
    With MPI-IO records: per rank, the smaller of its blocking time in that
    direction and its computation between those calls (gaps of at least
    ``compute_gap_min`` seconds, counted on ranks that have at least five:
    one or two are the rank descheduled, not a loop that computes), at the
    slowest rank; a program with no such gaps has nothing to overlap, and
    the finding is a note (INFO).
    Without records: unknown (the slowest rank's blocking time is only an
    upper bound, reached when it computes as long as it waits)."""

    layer = "MPIIO"
    direction = "READ"
    uses = ("compute_gap_min",)

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        c = ctx.layer("MPIIO")
        if c is None:
            return
        rw = "READS" if self.direction == "READ" else "WRITES"
        word = "read" if self.direction == "READ" else "write"
        total = sum(c.total(n) for n in mpiio_counters(self.direction))
        nb = c.total(f"MPIIO_NB_{rw}")
        if nb or not total:
            # Drishti also warns when there are no such operations at all.
            return
        h5 = ctx.layer("H5F") is not None or ctx.layer("H5D") is not None
        blocking = io_time(ctx).rows_at_slowest(c, direction_time(c, self.direction))
        gaps = _compute_between_calls(ctx, self.direction)
        evidence: dict[str, float | int | str] = {f"{word}s": total, "nonblocking": 0}
        if gaps is not None and gaps[1] <= 0.0:
            yield price(ctx, self.finding(
                ctx,
                Level.INFO,
                f"All {total:,} MPI-IO {word}s are blocking, but the program computes "
                f"nothing between them (no gap of {ctx.thresholds['compute_gap_min']:g} s "
                "or more on any rank): there is nothing to overlap them with.",
                drishti_note="Drishti warns whenever no call is non-blocking",
                evidence={**evidence, "compute_seconds": 0.0, "drishti_warns": self.drishti or ""},
            ), 0.0)
            return
        if h5:
            snippet, lang = advice.HDF5_ASYNC, "c"
        elif word == "read":
            snippet, lang = in_language(ctx, advice.PY_MPIIO_NONBLOCKING_READ,
                                        advice.mpiio_nonblocking(word),
                                        fortran=advice.FORTRAN_MPIIO_NONBLOCKING_READ)
        else:
            snippet, lang = in_language(ctx, advice.PY_MPIIO_NONBLOCKING_WRITE,
                                        advice.mpiio_nonblocking(word),
                                        fortran=advice.FORTRAN_MPIIO_NONBLOCKING_WRITE)
        cost: float | None = None  # without records: is there computation at all?
        if gaps is not None:
            evidence["compute_seconds"] = round(gaps[1], 6)
            cost = gaps[0]
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"All {total:,} MPI-IO {word}s are blocking: the application waits for each one"
            + (f", with {gaps[1]:.3g} s of computation between them (slowest rank) to "
               "overlap." if gaps is not None else "."),
            evidence=evidence,
            recommendation="If there is computation to overlap, issue the I/O asynchronously "
            + ("(HDF5 async VOL)" if h5 else "(non-blocking MPI-IO)")
            + " and wait for it later.",
            snippet=snippet,
            snippet_lang=lang,
        ), cost, f"without records, whether the program computes between the calls is unknown "
           f"(at most the {blocking:.3g} s they block)")


_RECURRING = 5  # gaps of computation a rank needs between its calls


def _covered(start: np.ndarray, end: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per interval [lo, hi]: the seconds of it that some [start, end] covers."""
    order = np.argsort(start, kind="stable")
    s, e = start[order], np.maximum(end[order], start[order])
    # The union of the intervals: a new piece wherever one starts after all
    # before it ended.
    reach = np.maximum.accumulate(e)
    head = np.concatenate([[True], s[1:] > reach[:-1]])
    seg_s = s[head]
    seg_e = np.maximum.reduceat(e, np.flatnonzero(head))
    before = np.concatenate([[0.0], np.cumsum(seg_e - seg_s)])

    def upto(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(seg_s, t, side="right") - 1
        kk = np.maximum(k, 0)
        part = np.clip(t - seg_s[kk], 0.0, seg_e[kk] - seg_s[kk])
        return np.where(k >= 0, before[kk] + part, 0.0)

    return np.maximum(upto(hi) - upto(lo), 0.0)


def _compute_between_calls(ctx: Context, direction: str) -> tuple[float, float] | None:
    """(seconds overlapping could hide, seconds of computation) at the slowest
    rank, from the MPI-IO records of ``direction``: the computation is the
    sum of the gaps of at least ``compute_gap_min`` seconds between a rank's
    consecutive calls, less the other I/O any rank does meanwhile (its own
    inputs and logs, or another rank's that it waits for), and the hideable
    part the smaller of it and the rank's time in those calls.  None
    without MPI-IO records."""
    r = ctx.trace.records
    if not len(r):
        return None
    m = _layer_records(ctx, "MPIIO")
    m = m.select(m.op == (OP_READ if direction == "READ" else OP_WRITE))
    if not len(m) or m.rank.min() < 0:
        return None
    order = np.lexsort((m.start, m.rank))
    rank, start, end = m.rank[order], m.start[order], m.end[order]
    n = max(io_time(ctx).nprocs, int(rank.max()) + 1)
    # Each rank's calls on their own time line (a call may end after the
    # next one starts): shift the ranks apart before the running maximum.
    width = float(max(end.max(), r.end.max()) - min(start.min(), r.start.min())) + 1.0
    shift = rank * width
    reach = np.maximum.accumulate(end + shift)
    gap = (start + shift)[1:] - reach[:-1]
    same = rank[1:] == rank[:-1]
    least = float(ctx.thresholds["compute_gap_min"])
    long = same & (gap >= least)
    gaps, owner = gap[long], rank[1:][long]
    # Other I/O inside those gaps is no computation to overlap with: the
    # rank's own (reading inputs, writing logs), and any other rank's, which
    # it waits for in an untraced collective (a broadcast of what rank 0
    # reads).  What is left of each gap counts.
    other = r.select((r.layer != m.layer[0]) & (r.rank >= 0))
    meta = ctx.trace.meta_records  # opens, closes, stats: I/O too
    meta = meta.select((meta.layer != m.layer[0]) & (meta.rank >= 0)) if len(meta) else meta
    if (len(other) or len(meta)) and len(gaps):
        lo = reach[:-1][long] - owner * width
        hi = (start + shift)[1:][long] - owner * width
        gaps = gaps - _covered(np.concatenate([other.start, meta.start]),
                               np.concatenate([other.end, meta.end]), lo, hi)
    keep = gaps >= least
    # Computation recurs (a loop computes, then writes): a rank with fewer
    # than _RECURRING such gaps was only descheduled now and then.
    recurring = np.bincount(owner[keep], minlength=n) >= _RECURRING
    compute = np.where(recurring, np.bincount(owner[keep], gaps[keep], minlength=n), 0.0)
    busy = np.bincount(rank, _busy(start, end), minlength=n)
    who = io_time(ctx).slowest_rank
    if who >= n:
        return 0.0, 0.0
    return float(min(busy[who], compute[who])), float(compute[who])


@check
class MpiioBlockingReads(_NonBlocking):
    """MPI-IO reads are all blocking."""

    id = "mpiio-blocking-reads"
    drishti = "M06"
    direction = "READ"


@check
class MpiioBlockingWrites(_NonBlocking):
    """MPI-IO writes are all blocking."""

    id = "mpiio-blocking-writes"
    drishti = "M07"
    direction = "WRITE"


@check
class MpiioAggregators(Check):
    """Collective-buffering aggregators versus compute nodes.

    Cost: unknown; one run with one aggregator count cannot say how long
    another count would take."""

    id = "mpiio-aggregators"
    layer = "MPIIO"
    site_layers = ()  # a setting, not the program's calls
    drishti = "M09"

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        # Needs the hints the application used and the node count.  Darshan's
        # ``h=`` metadata holds the hints Darshan used to write its own log,
        # not the application's, so it is never used here.
        hints = ctx.trace.job.hints
        c = ctx.layer("MPIIO")
        if c is None or not hints or "cb_nodes" not in hints:
            return
        nodes = len(set(ctx.trace.job.hosts.values()))
        if nodes < 1:
            return
        try:
            cb = int(hints["cb_nodes"])
        except ValueError:
            return
        if cb > nodes:
            yield price(ctx, self.finding(
                ctx,
                Level.WARN,
                f"{cb} collective-buffering aggregators on {nodes} node(s): several aggregators "
                "per node compete for its network link.",
                evidence={"cb_nodes": cb, "nodes": nodes},
                recommendation="Set cb_nodes to the number of nodes (or a divisor of it).",
                snippet=f'MPI_Info_set(info, "cb_nodes", "{nodes}");',
                snippet_lang="c",
            ), None, _NO_AGG_COST)
        elif cb < nodes:
            yield price(ctx, self.finding(
                ctx,
                Level.INFO,
                f"{cb} aggregator(s) for {nodes} nodes: only {cb} node(s) write to the file "
                "system during collective I/O.",
                drishti="M08",
                evidence={"cb_nodes": cb, "nodes": nodes},
                recommendation="Raise cb_nodes to the number of nodes if collective I/O is slow.",
                snippet=f'MPI_Info_set(info, "cb_nodes", "{nodes}");',
                snippet_lang="c",
            ), None, _NO_AGG_COST)
        else:
            yield price(ctx, self.finding(
                ctx,
                Level.OK,
                f"One collective-buffering aggregator per node ({cb} on {nodes} nodes).",
                drishti="M10",
                evidence={"cb_nodes": cb, "nodes": nodes},
            ), 0.0)


_NO_AGG_COST = "one run with one aggregator count cannot say how long another would take"


@check
class MpiioCbDisabled(Check):
    """Collective MPI-IO whose collective buffering the hints switched off.

    With ``romio_cb_write`` (``romio_cb_read``) set to ``disable``, a
    collective call makes every rank issue its own pieces: the POSIX
    requests stay as small as the MPI-IO ones, and the collective call only
    adds synchronisation.  Fires when such files' POSIX requests average no
    more than twice the MPI-IO calls' size and less than
    ``small_request_size`` (otherwise the hint was ignored or the requests
    are large anyway).  Cost: the slowest rank's collective
    MPI-IO time in that direction on those files minus what collective
    buffering would take for the same bytes (see :func:`above_ideal`)."""

    id = "mpiio-cb-disabled"
    layer = "MPIIO"
    finds = ("collective MPI-IO whose collective buffering the hints switched off "
             "(`romio_cb_write`/`romio_cb_read` = `disable`), so the POSIX requests stay as "
             "small as the ranks' pieces")
    cost = ("the slowest rank's collective MPI-IO seconds minus what collective buffering "
             "would take for the same bytes (one aggregator per node moving all ranks' bytes "
             "at the rate the file's POSIX calls showed, or `default_bandwidth` if faster)")
    uses = ("default_bandwidth", "small_request_size")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        c = ctx.layer("MPIIO")
        if c is None:
            return
        p = ctx.layer("POSIX")
        for d in ("WRITE", "READ"):
            if not cb_disabled(ctx, d):
                continue
            files = collective_files(ctx, d)
            if not len(files):
                continue
            yield from self._direction(ctx, c, p, d, files)

    def _direction(self, ctx: Context, c: Counters, p: Counters | None, d: str,
                   files: np.ndarray) -> Iterable[Finding]:  # fmt: skip
        word, plural = ("write", "writes") if d == "WRITE" else ("read", "reads")
        moved_col = "MPIIO_BYTES_WRITTEN" if d == "WRITE" else "MPIIO_BYTES_READ"
        on = np.isin(c.file_id, files)
        coll_rows = collective_ops(c, d)
        ops = sum(c[n] for n in mpiio_counters(d))
        coll = int(coll_rows[on].sum())
        moved = float(c[moved_col][on].sum())
        piece = moved / coll if coll else 0.0
        posix_ops, posix_b = 0, 0.0
        if p is not None:
            pon = np.isin(p.file_id, files)
            posix_ops = int(p[f"POSIX_{plural.upper()}"][pon].sum())
            posix_b = float(p["POSIX_BYTES_WRITTEN" if d == "WRITE" else "POSIX_BYTES_READ"][pon]
                            .sum())  # fmt: skip
        request = posix_b / posix_ops if posix_ops else 0.0
        if (not coll or not posix_ops or request > 2 * piece
                or request >= float(ctx.thresholds["small_request_size"])):
            return  # merged anyway (the hint ignored), or large already
        t = share_of(direction_time(c, d), coll_rows, ops)
        cost = above_ideal(ctx, c, np.where(on, t, 0.0),
                           np.where(on, share_of(c[moved_col], coll_rows, ops), 0.0), d)
        hint = f"romio_cb_{word}"
        ids, sums = ctx.per_file(c, {"coll": np.where(on, coll_rows, 0)})
        listed, n = ctx.top_files(ids, sums["coll"], {f"collective {plural}": sums["coll"]},
                                  sums["coll"] > 0)  # fmt: skip
        snippet, lang = in_language(ctx, advice.PY_CB_ENABLE, advice.C_CB_ENABLE,
                                    fortran=advice.FORTRAN_CB_ENABLE)
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"Collective buffering is switched off ({hint} = disable): {coll:,} collective "
            f"MPI-IO {plural} of {human_size(piece)} each reach the file system as "
            f"{posix_ops:,} POSIX {plural} of {human_size(request)} on average: every "
            "rank issues its own pieces unmerged, and the collective calls only add "
            "synchronisation.",
            evidence={"hint": f"{hint}=disable", "collective_ops": coll,
                      "mpiio_bytes_per_call": round(piece, 1), "posix_ops": posix_ops,
                      "posix_bytes_per_request": round(request, 1)},
            files=listed,
            files_total=n,
            recommendation=f"Enable collective buffering (remove the {hint} disable hint, or "
            "set it to enable or automatic with MPI_Info_set or in the ROMIO_HINTS file) so "
            "that aggregators merge the ranks' pieces into large requests.",
            snippet=snippet,
            snippet_lang=lang,
        ), cost)
