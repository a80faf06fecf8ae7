"""MPI-IO layer: whether it is used, collective and non-blocking I/O, aggregators."""

from __future__ import annotations

from collections.abc import Iterable

from ..vocabulary import MPIIO_COLLECTIVE, mpiio_counters
from . import advice
from .base import Check, Context, Finding, Level, check, pct
from .iotime import direction_time, io_time, price, share_of


@check
class NoMpiio(Check):
    """A parallel job does its I/O without MPI-IO.

    Cost: unknown; what MPI-IO would save depends on how the ranks' requests
    would merge, which POSIX counters cannot tell."""

    id = "mpiio-not-used"
    layer = "MPIIO"
    drishti = "M01"

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        if ctx.layer("MPIIO") is not None:
            return
        posix = ctx.layer("POSIX")
        if posix is None or ctx.trace.job.nprocs < 2:
            # A serial program has no use for MPI-IO: Drishti warns anyway, we do not.
            return
        moved = posix.total("POSIX_BYTES_READ") + posix.total("POSIX_BYTES_WRITTEN")
        if not moved:
            return
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"{ctx.trace.job.nprocs} ranks move {advice.human_size(moved)} through POSIX "
            "without MPI-IO.",
            evidence={"ranks": ctx.trace.job.nprocs, "posix_bytes": moved},
            recommendation="Use MPI-IO, or a library on top of it (HDF5, PnetCDF, ADIOS2), so "
            "that collective I/O can merge the ranks' requests.",
            snippet=advice.MPIIO_COLLECTIVE_WRITE,
            snippet_lang="c",
        ), None, "what collective MPI-IO would save depends on how requests would merge")


class _Collective(Check):
    """Cost: the slowest rank's MPI-IO time in that direction times the share
    of its calls that are independent (each call taken to cost the same);
    0 when nothing is wrong."""

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
        snippet = advice.MPIIO_COLLECTIVE_READ if word == "read" else advice.MPIIO_COLLECTIVE_WRITE
        share = coll / total
        ops = sum(c[n] for n in mpiio_counters(self.direction))
        cost = io_time(ctx).rows_at_slowest(
            c, share_of(direction_time(c, self.direction), c[f"MPIIO_INDEP_{rw}"], ops))
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
                snippet_lang="c",
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
                snippet_lang="c",
            ), cost)
        elif coll == 0:
            yield price(ctx, self.finding(
                ctx,
                Level.INFO,
                f"No MPI-IO {word} is collective: {indep:,} independent {word}s, averaging "
                f"{advice.human_size(_avg_bytes(c, word, total))} each; too few "
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
    """Cost: the slowest rank's blocking MPI-IO time in that direction, the most
    that overlapping it with computation could hide (an upper bound)."""

    layer = "MPIIO"
    direction = "READ"

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
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"All {total:,} MPI-IO {word}s are blocking: the application waits for each one.",
            evidence={f"{word}s": total, "nonblocking": 0},
            recommendation="If there is computation to overlap, issue the I/O asynchronously "
            + ("(HDF5 async VOL)" if h5 else "(non-blocking MPI-IO)")
            + " and wait for it later.",
            snippet=advice.HDF5_ASYNC if h5 else advice.mpiio_nonblocking(word),
            snippet_lang="c",
        ), io_time(ctx).rows_at_slowest(c, direction_time(c, self.direction)))


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
