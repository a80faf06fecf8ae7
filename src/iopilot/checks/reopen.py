"""Files opened, stat'ed and seeked again and again by the same rank: a
loop that reopens its output for every append (pandas ``to_csv(mode="a")``,
``open(path, "a")`` per line) or its input for every read."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from . import advice
from .base import Check, Context, FileEvidence, Finding, check, pct
from .iotime import price
from .rankcost import fs_rows, in_language, is_python, metadata_cost


@check
class ReopenedFiles(Check):
    """The same file is opened, stat'ed or seeked over and over by one rank.

    Seeks and stats count beyond one per read or write (a seek before each
    access is an access pattern, which the random-access checks judge).

    ``cost_seconds``: the slowest rank's metadata seconds (open, stat, seek,
    close) on the files it reopens; opening each once would save nearly all.
    """

    id = "reopened-files"
    layer = "POSIX"
    uses = ("reopen_count", "seek_stat_count", "metadata_time_share")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        rows = fs_rows(ctx)
        if rows is None:
            return
        t = ctx.thresholds
        # Reduced rows of shared files hold all ranks' calls: judge the mean rank.
        share = np.where(rows["rank"] < 0, 1.0 / max(1, ctx.trace.job.nprocs), 1.0)
        opens = rows["opens"] * share
        # A seek before each read or write is an access pattern, not a lookup:
        # only the seeks and stats beyond one per data operation count.
        seek_stat = np.maximum(rows["seeks"] + rows["stats"] - rows["reads"] - rows["writes"],
                               0) * share  # fmt: skip
        bad = (opens > float(t["reopen_count"])) | (seek_stat > float(t["seek_stat_count"]))
        if not bad.any():
            return
        who, cost, io, level = metadata_cost(ctx, rows, bad)
        written = bad & (rows["writes"] > 0)
        read = bad & (rows["reads"] > 0) & ~written
        kind = "written" if written.any() else "read" if read.any() else "looked up"
        score = rows["opens"] + rows["seeks"] + rows["stats"]
        order = np.flatnonzero(bad)[np.argsort(-score[bad], kind="stable")]
        files = [
            FileEvidence(ctx.trace.name(int(rows["file"][i])), {
                "rank": int(rows["rank"][i]), "opens": int(rows["opens"][i]),
                "seeks": int(rows["seeks"][i]), "stats": int(rows["stats"][i]),
                "reads": int(rows["reads"][i]), "writes": int(rows["writes"][i]),
                "metadata seconds": round(float(rows["meta"][i]), 6)})
            for i in order[: ctx.max_files]
        ]  # fmt: skip
        top = order[0]
        what = (f"{int(rows['opens'][top]):,} opens, {int(rows['seeks'][top]):,} seeks and "
                f"{int(rows['stats'][top]):,} stats")  # fmt: skip
        message = (
            f"{len(order)} file(s) are opened, stat'ed or seeked over and over by the same "
            f"rank: {files[0].path} had {what}"
            + (f" for {int(rows['writes'][top]):,} writes" if rows["writes"][top] else
               f" for {int(rows['reads'][top]):,} reads" if rows["reads"][top] else "")
            + f"; rank {who} spends {cost:.3g} s in their metadata calls "
            f"({pct(cost, io):.1f} % of its I/O time)."
        )  # fmt: skip
        py = is_python(ctx)
        if kind == "written":
            rec = ("Open the file once and write once: collect the rows in memory and write "
                   "them with one call, or keep one file object open for the whole loop "
                   "instead of reopening it for every append"
                   + (" (pandas' to_csv(mode=\"a\") reopens, stats and seeks the file at "
                      "every call)" if py else ""))  # fmt: skip
            snippet, lang = in_language(ctx, advice.PY_WRITE_ONCE, advice.C_WRITE_ONCE)
        elif kind == "read":
            rec = ("Read the file once and keep its contents in memory (or keep it open) "
                   "instead of opening it again for every access")
            snippet, lang = in_language(ctx, advice.PY_READ_ONCE, advice.C_READ_ONCE)
        else:
            rec = ("Remember what a stat or an existence test said instead of asking the file "
                   "system again at every step")
            snippet, lang = "", ""
        yield price(ctx, self.finding(
            ctx,
            level,
            message,
            evidence={
                "files": len(order),
                "files_written": int(written.sum()),
                "files_read": int(read.sum()),
                "opens": int(rows["opens"][bad].sum()),
                "seeks": int(rows["seeks"][bad].sum()),
                "stats": int(rows["stats"][bad].sum()),
                "slowest_rank": who,
                "slowest_rank_metadata_seconds": round(cost, 6),
                "slowest_rank_io_seconds": round(float(io), 6),
            },
            ranks=[who],
            files=files,
            files_total=len(order),
            recommendation=rec + ".",
            snippet=snippet,
            snippet_lang=lang,
        ), cost)  # fmt: skip
