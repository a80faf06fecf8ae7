"""Background I/O the program waited for: write-behind's or the event-set
engine's thread was still writing when the program reached an fsync, a close
or a read of the file, so the I/O was not hidden behind computation."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..model import OP_NAMES, RECORD_LAYERS, Records
from ..model.aggregate import unique
from ..model.background import background_summary
from .base import DATA_OPS, META_OPS, Check, Context, Finding, Level, check, pct
from .binding import binding_of, launcher_fix
from .iotime import io_time, price

_ADVICE = {
    "sync": ("Each fsync waits for the writes queued before it. If every step must be durable, "
             "queue the sync too and wait for it only before the next checkpoint (the engine: "
             "es.fsync(fd), then es.wait() one step later); if losing the last steps in a crash "
             "is acceptable, iopilot run --async-relaxed queues fsync for you"),
    "close": ("Each close waits for the file's pending writes. Keep the file open across steps "
              "and close it once at the end, or write through the engine and close the file "
              "after the next step's wait"),
    "read": ("The program reads the file while its writes are still pending, so each read waits "
             "for them. Keep the data it reads back in memory, or read it before writing"),
}  # fmt: skip
_OTHER = ("The program waits for pending writes in the calls listed. Move those calls after "
          "the next computation, or keep what they look up in memory")
_SNIPPET = """from iopilot.overlap.engine import EventSet

with EventSet() as es:
    for step in range(steps):
        compute(step)
        es.wait()                      # the previous checkpoint is on disk now
        es.write(fd, checkpoint(step), 0)
        es.fsync(fd)                   # durable in the background
"""


@check
class BackgroundWaits(Check):
    """Background I/O ran while the program was inside an I/O call.

    With write-behind (``iopilot run --async``) or the event-set engine, a
    write the program made returns at once and a background thread does it.
    When the program then calls fsync, close or read on the file, it waits
    for that thread: the I/O is on its critical path again.  Judged on the
    rank whose background I/O was the least hidden.

    ``cost_seconds``: that rank's background seconds during its own I/O
    calls (what could be hidden with computation in between).
    """

    id = "background-waits"
    layer = "POSIX"
    site_ops = DATA_OPS + META_OPS  # the calls that waited
    finds = ("background I/O (write-behind, the event-set engine) that ran while the program "
             "was inside an I/O call, waiting for it (an fsync or close of a file with "
             "pending writes), on the rank where it was least hidden; says which calls "
             "waited")
    cost = "that rank's background seconds during its own I/O calls"
    uses = ("background_exposed_share", "background_min_time")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.trace
        s = background_summary(t)
        if s is None:
            return
        worst = s["least_hidden_rank"]
        busy, hidden = worst["busy_seconds"], worst["hidden_seconds"]
        exposed = busy - hidden
        th = ctx.thresholds
        if exposed < float(th["background_min_time"]) or \
                exposed <= float(th["background_exposed_share"]) * busy:  # fmt: skip
            return
        rank = worst["rank"]
        waits = _waited_in(t.background.rank == rank, ctx, rank)
        top = max(waits, key=lambda k: waits[k]) if waits else ""
        where = ", ".join(f"{op} {sec:.3g} s" for op, sec in
                          sorted(waits.items(), key=lambda kv: -kv[1]))  # fmt: skip
        message = (f"Rank {rank}'s background I/O ran for {busy:.3g} s, and for {exposed:.3g} s "
                   f"of it ({pct(exposed, busy):.0f} %) the program was inside an I/O call "
                   "waiting for it" + (f" (in {where})" if where else "") + ".")
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            message,
            evidence={"rank": rank, "background_seconds": round(busy, 6),
                      "exposed_seconds": round(exposed, 6),
                      "waited_in": {k: round(v, 6) for k, v in waits.items()},
                      "operations": s["operations"]},
            ranks=[rank],
            recommendation=_ADVICE.get(top, _OTHER) + ".",
            snippet=_SNIPPET,
            snippet_lang="python",
        ), exposed)  # fmt: skip


def _waited_in(mine: np.ndarray, ctx: Context, rank: int) -> dict[str, float]:
    """Seconds of the rank's background operations that ended inside one of
    its POSIX calls, by the call's operation (the call that waited)."""
    b = ctx.trace.background
    posix = RECORD_LAYERS.index("POSIX")
    calls = Records.concat([ctx.trace.records, ctx.trace.meta_records])
    calls = calls.select((calls.rank == rank) & (calls.layer == posix))
    if not len(calls):
        return {}
    order = np.argsort(calls.start, kind="stable")
    start, end, op = calls.start[order], calls.end[order], calls.op[order]
    # a call ending latest among those begun so far holds the instant if any does
    reach = np.maximum.accumulate(end)
    holder = np.maximum.accumulate(np.where(end == reach, np.arange(len(end)), 0))
    done, issued = b.completed[mine], b.issued[mine]
    k = np.searchsorted(start, done, side="right") - 1
    inside = (k >= 0) & (reach[np.maximum(k, 0)] >= done)
    j = holder[np.maximum(k, 0)][inside]
    seconds = done[inside] - np.maximum(issued[inside], start[j])
    names = op[j]
    return {OP_NAMES[int(o)]: float(seconds[names == o].sum()) for o in unique(names)}


@check
class BackgroundSharedCore(Check):
    """A background I/O thread that could run only on its rank's one core.

    Launchers bind each rank to a core by default, and the thread a rank
    starts for write-behind or the event-set engine inherits that binding:
    the two then take turns on one core, and every second the thread spends
    (copying, issuing writes and syncs) is a second the computation waits.
    From the process summaries: the CPUs each thread was given and its own
    CPU time.  WARN when that time is at least 1 % of the run.

    ``cost_seconds``: the most CPU time a sharing thread took on one rank
    (computation time lost, outside the I/O calls).
    """

    id = "background-shared-core"
    layer = "POSIX"
    drishti = None
    site_ops = DATA_OPS  # the writes whose background work took the core
    finds = ("a write-behind or event-set engine thread that had no CPU but its rank's own "
             "core (a launcher binding each rank to one core), from the affinity the trace "
             "recorded; says what to change in the launcher the job used")
    cost = "the most CPU time such a thread took on one rank, computation time lost"

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        sharing = [(c, t) for c in ctx.trace.cpus or () for t in c.threads if t.shares_core]
        if not sharing:
            return
        b = binding_of(ctx.trace)
        known = [(c, t) for c, t in sharing if t.cpu_s is not None]
        worst = max(known, key=lambda ct: ct[1].cpu_s or 0.0, default=None)
        lost = worst[1].cpu_s if worst is not None else None
        run = io_time(ctx).run_seconds
        level = Level.WARN if lost is not None and run > 0 and lost >= 0.01 * run else Level.INFO
        ranks = sorted({c.rank for c, _ in sharing if c.rank is not None})
        what = {"write_behind": "write-behind", "async_engine": "the event-set engine"}
        kinds = sorted({what.get(t.kind, t.kind) for _, t in sharing})
        where = (f"{len(ranks)} rank(s)" if ranks else f"{len(sharing)} process(es)")
        msg = (f"The background I/O thread of {' and '.join(kinds)} could run only on its "
               f"rank's one core on {where}: the thread and the computation took turns on it"
               + (f"; the thread used {lost:.3g} s of CPU on rank {worst[0].rank}"
                  if worst is not None and worst[0].rank is not None else
                  f"; the thread used {lost:.3g} s of CPU" if lost is not None else "")
               + ".")  # fmt: skip
        fix = launcher_fix(b) if b is not None else "give each rank a second CPU"
        f = self.finding(ctx, level, msg, ranks=ranks[:8],
                         evidence={"ranks": len(ranks), "thread_cpu_seconds": lost,
                                   "launcher": b.launcher if b else "",
                                   "cpus_per_rank": b.cpus_per_rank if b else 0},
                         recommendation=f"Give each rank a core for its I/O thread: {fix}.")
        yield price(ctx, f, 0.0 if lost is not None else None, "the thread's CPU time is unknown",
                    outside=lost or 0.0)  # fmt: skip
