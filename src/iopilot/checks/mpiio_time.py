"""MPI-IO calls that take far longer than the POSIX calls they make: ranks
waiting for aggregators or for each other, or many tiny collective calls
whose fixed cost dwarfs the data."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..model.aggregate import isin, unique
from ..units import human_size
from ..vocabulary import MPIIO_COLLECTIVE, mpiio_counters
from . import advice
from .base import Check, Context, Finding, Level, check
from .iotime import price
from .rankcost import fs_rows, per_rank, slowest
from .reopen import rereads, waiting_for

_WORD = {"READ": ("reads", "read", "BYTES_READ"), "WRITE": ("writes", "write", "BYTES_WRITTEN")}


@check
class MpiioTimeAbovePosix(Check):
    """MPI-IO reads or writes take far longer than the POSIX calls beneath them.

    ``cost_seconds``: the slowest rank's MPI-IO seconds in that direction
    above its POSIX seconds on the same files (time spent waiting and
    exchanging data, not moving it to the file system), less what it waits
    for a rank that re-reads its inputs at every step (that wait is the
    cost of reopened-files).
    """

    id = "mpiio-time-above-posix"
    layer = "MPIIO"
    finds = ("MPI-IO reads or writes taking over 2× the POSIX time beneath them: many small "
             "collective calls, or ranks waiting for aggregators")
    cost = "the slowest rank's MPI-IO seconds above its POSIX seconds"
    uses = ("mpiio_overhead_ratio", "mpiio_overhead_min_time", "small_request_size")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        m = ctx.layer("MPIIO")
        if m is None:
            return
        p = ctx.layer("POSIX")
        for d in ("WRITE", "READ"):
            yield from self._direction(ctx, m, p, d)

    def _direction(self, ctx: Context, m, p, d: str) -> Iterable[Finding]:
        t = ctx.thresholds
        plural, verb, bytes_col = _WORD[d]
        mpi_t = m[f"MPIIO_F_{d}_TIME"]
        total_m = float(mpi_t.sum())
        files = unique(m.file_id)
        if p is not None:
            on = isin(p.file_id, files)
            posix_t = p[f"POSIX_F_{d}_TIME"]
            total_p = float(posix_t[on].sum())
            posix_r = per_rank(ctx, p.rank[on], posix_t[on])
        else:
            total_p, posix_r = 0.0, np.zeros(1)
        over = total_m - total_p
        if total_m <= float(t["mpiio_overhead_ratio"]) * total_p:
            return
        if over <= float(t["mpiio_overhead_min_time"]):
            return
        mpi_r = per_rank(ctx, m.rank, mpi_t)
        n = max(len(mpi_r), len(posix_r))
        gap = np.pad(mpi_r, (0, n - len(mpi_r))) - np.pad(posix_r, (0, n - len(posix_r)))
        who, cost = slowest(np.maximum(gap, 0.0))
        # Ranks waiting for one that re-reads its inputs at every step: that
        # wait is the re-reads' cost (reopened-files), not MPI-IO's.
        rows = fs_rows(ctx)
        late, waited = waiting_for(ctx, rows["rank"][rereads(ctx, rows)]) if rows else (-1, 0.0)
        if waited > 0:
            cost = max(cost - waited, 0.0)
        coll = sum(m.total(k) for k in mpiio_counters(d, MPIIO_COLLECTIVE) if m.has(k))
        ops = sum(m.total(k) for k in mpiio_counters(d) if m.has(k))
        moved = m.total(f"MPIIO_{bytes_col}")
        # The counters do not split bytes by kind of call: beside independent
        # calls, a collective call moved at most all the bytes over their number.
        mixed = 0 < coll < ops
        per_call = moved / (coll if mixed else ops) if ops else 0.0
        small = coll > 0 and per_call < float(t["small_request_size"])
        if small:
            size = (f"at most {human_size(per_call)} per call ({ops - coll:,} independent "
                    f"{plural} beside them)" if mixed else
                    f"{human_size(per_call)} per call on average")  # fmt: skip
            why = (f"{coll:,} collective {plural} move {size}: each one synchronises the "
                   "ranks and the aggregators for little data")  # fmt: skip
            rec = ("Make fewer, larger collective calls: describe all a rank writes in a "
                   "step with one file view and move it with one collective call"
                   if d == "WRITE" else
                   "Make fewer, larger collective calls: read all a rank needs in a step "
                   "through one file view with one collective call")  # fmt: skip
            snippet = advice.MPIIO_ONE_CALL_PER_STEP
        else:
            why = ("the ranks spend it waiting: for the aggregators that do the file-system "
                   "calls, or for the slowest rank to join the collective")
            rec = ("Give the ranks equal shares of each collective call, use one aggregator "
                   "per node (cb_nodes) with buffers of whole stripes (cb_buffer_size), and "
                   "overlap the waiting with computation through non-blocking collectives "
                   f"(MPI_File_i{verb}_all)")  # fmt: skip
            snippet = advice.MPIIO_HINTS_CB
        ratio = f"{total_m / total_p:.1f}×" if total_p else "none beneath them"
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"MPI-IO {plural} take {total_m:.3g} s summed over ranks, their POSIX {plural} "
            f"{total_p:.3g} s ({ratio}): {why}; rank {who} spends {cost:.3g} s in MPI-IO "
            f"{plural} beyond its POSIX {plural}"
            + (f", of which {waited:.3g} s waiting for rank {late}, which re-reads its inputs "
               "at every step (see reopened-files)" if waited > 0 else "") + ".",
            evidence={
                "direction": verb,
                "mpiio_seconds": round(total_m, 6),
                "posix_seconds": round(total_p, 6),
                "collective_ops": int(coll),
                "ops": int(ops),
                "bytes_per_call": round(per_call, 1),
                "slowest_rank": who,
                "slowest_rank_excess_seconds": round(cost, 6),
            },
            ranks=[who],
            recommendation=rec + ".",
            snippet=snippet,
            snippet_lang="c",
        ), cost)  # fmt: skip
