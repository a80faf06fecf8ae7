"""One rank's STDIO (log lines, text output or input) taking a large share
of the run: buffered streams flushed line by line, from every step."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..model.aggregate import median
from . import advice
from .base import DATA_OPS, META_OPS, Check, Context, Finding, Level, check, pct
from .iotime import price
from .rankcost import in_language, per_rank, slowest

_DIRS = {"WRITE": ("writing", "STDIO_WRITES", "STDIO_BYTES_WRITTEN"),
         "READ": ("reading", "STDIO_READS", "STDIO_BYTES_READ")}  # fmt: skip


@check
class StdioTime(Check):
    """One rank spends a large share of the run in STDIO calls (logging, text I/O).

    More than ``stdio_time_share`` of the run and ``stdio_min_time`` seconds;
    bulk text (``stdio_bulk_bytes`` or more, arrays printed value by value)
    from ``stdio_bulk_min_time`` seconds, and its advice is binary output.

    ``cost_seconds``: that rank's STDIO seconds in the direction found
    (reads or writes, with the metadata time of the files it used that way).
    """

    id = "stdio-time"
    layer = "STDIO"
    site_ops = DATA_OPS + META_OPS
    finds = ("one rank spending over 10 % of the run in STDIO reads or writes (logging "
             "flushed per line)")
    cost = "that rank's STDIO seconds"
    uses = ("stdio_time_share", "stdio_min_time", "stdio_bulk_bytes", "stdio_bulk_min_time")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        s = ctx.layer("STDIO")
        runtime = float(ctx.trace.job.runtime)
        if s is None or runtime <= 0:
            return
        t = ctx.thresholds
        best = None
        for d, (_, ops_col, _) in _DIRS.items():
            # A stream's open, seek and flush time goes with what it was used for.
            used = s[ops_col] > 0
            secs = s[f"STDIO_F_{d}_TIME"] + np.where(used, s["STDIO_F_META_TIME"], 0.0)
            per = per_rank(ctx, s.rank, secs)
            who, sec = slowest(per)
            if best is None or sec > best[2]:
                best = (d, who, sec, per, secs, used)
        d, who, sec, per, secs, used = best  # type: ignore[misc]
        verb, ops_col, bytes_col = _DIRS[d]
        mine = (s.rank == who) | (s.rank < 0)
        moved = float(s[bytes_col][mine & used].sum())
        # Bulk text (arrays printed value by value) matters from a shorter time.
        least = (float(t["stdio_bulk_min_time"]) if moved >= float(t["stdio_bulk_bytes"])
                 else float(t["stdio_min_time"]))  # fmt: skip
        if sec <= least or sec <= float(t["stdio_time_share"]) * runtime:
            return
        files, n = ctx.top_files(s.file_id, secs, {"seconds": secs, "calls": s[ops_col],
                                                   "bytes": s[bytes_col]},
                                 mine & used)  # fmt: skip
        calls = int(s[ops_col][mine & used].sum())
        mid = median(per)
        if d == "WRITE" and moved >= float(t["stdio_bulk_bytes"]):
            # Megabytes of text: arrays printed value by value, not a log.
            rec = ("Write the arrays in binary with one call each (fwrite, numpy tofile, an "
                   "unformatted Fortran WRITE, or HDF5) instead of formatting them value by "
                   "value; keep formatted text for what people read")
            snippet, lang = in_language(ctx, advice.PY_STDIO_BINARY, advice.C_STDIO_BINARY,
                                        fortran=advice.FORTRAN_STDIO_BINARY)
        elif d == "WRITE":
            rec = ("Log less and in bigger pieces: every Nth step instead of every step, from "
                   "one rank (or a few), into a stream with a large buffer that is not flushed "
                   "after each line")
            snippet, lang = in_language(ctx, advice.PY_LOG_LESS, advice.C_LOG_LESS,
                                        fortran=advice.FORTRAN_WRITE_ONCE)
        else:
            rec = ("Read the input in large pieces (or once) instead of line by line or value "
                   "by value, and share it instead of having each rank parse it")
            snippet, lang = in_language(ctx, advice.PY_READ_ONCE, advice.STDIO_BUFFER,
                                        fortran=advice.FORTRAN_READ_ONCE)
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"Rank {who} spends {sec:.3g} s {verb} through STDIO, {pct(sec, runtime):.1f} % "
            f"of the {runtime:.3g} s run ({calls:,} calls"
            + (f"; the median rank spends {mid:.3g} s)" if len(per) > 1 else ")")
            + ".",
            evidence={
                "direction": verb,
                "rank": who,
                "rank_seconds": round(sec, 6),
                "median_rank_seconds": round(mid, 6),
                "runtime_seconds": round(runtime, 6),
                "calls": calls,
            },
            ranks=[who],
            files=files,
            files_total=n,
            recommendation=rec + ".",
            snippet=snippet,
            snippet_lang=lang,
        ), sec)  # fmt: skip
