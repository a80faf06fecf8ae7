"""Files opened and closed without a byte read or written: an existence test
done by opening, a file opened "in case", an empty marker file per step.
Each costs an open, a close and a metadata-server round trip for nothing."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..model.aggregate import group_sum, isin
from .base import Check, Context, Finding, check, pct
from .iotime import price
from .language import in_language
from .rankcost import fs_rows, metadata_cost
from .stdio import console_ids

_C_STAT = """\
#include <sys/stat.h>
struct stat st;
if (stat(path, &st) == 0) { /* it exists: open it when it is read or written */ }"""
_PY_STAT = """\
import os
if os.path.exists(path):   # a stat, not an open and a close
    ..."""


@check
class UnusedOpens(Check):
    """Many files opened and closed with nothing read or written.

    Judged by share of the time: more than ``unused_opens_min`` such files
    (no rank reads or writes them) whose opens, closes and stats take
    ``unused_opens_share`` of the slowest such rank's I/O time or more.

    ``cost_seconds``: the slowest rank's metadata seconds on those files; a
    stat (or nothing) instead of an open saves most of it.
    """

    id = "unused-opens"
    layer = "POSIX"
    site_ops, site_layers = tuple("open close stat".split()), ("POSIX", "STDIO")
    finds = ("more than 20 files opened and closed that no rank reads or writes (existence "
             "tests made by opening, empty marker files), whose opens, closes and stats take at "
             "least 10 % of the slowest such rank's I/O time; says to stat instead")
    cost = "the slowest rank's metadata seconds on those files"
    uses = ("metadata_time_share",)
    defaults = (("unused_opens_min", 20, "files opened without a read or write below which "
                 "they are never a problem"),
                ("unused_opens_share", 0.1, "share of a rank's I/O time in opening files it "
                 "never reads or writes that is a problem"))  # fmt: skip

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        rows = fs_rows(ctx)
        if rows is None:
            return
        t = ctx.thresholds
        ids, inv = np.unique(rows["file"], return_inverse=True)
        opens = group_sum(inv, rows["opens"], len(ids), as_float=True)
        data_ops = group_sum(inv, rows["reads"] + rows["writes"], len(ids), as_float=True)
        unused = (opens > 0) & (data_ops == 0) & ~isin(ids, console_ids(ctx))
        n = int(unused.sum())
        if n <= int(t["unused_opens_min"]):
            return
        who, seconds, io, level = metadata_cost(ctx, rows, unused[inv])
        if not (io > 0 and seconds >= float(t["unused_opens_share"]) * io):
            return
        meta = group_sum(inv, rows["meta"], len(ids), as_float=True)
        files, listed = ctx.top_files(ids, meta, {"opens": opens, "metadata seconds": meta},
                                      unused)  # fmt: skip
        snippet, lang = in_language(ctx, _PY_STAT, _C_STAT)
        yield price(ctx, self.finding(
            ctx,
            level,
            f"{n:,} files opened and closed without a byte read or written "
            f"({int(opens[unused].sum()):,} opens); rank {who} spends {seconds:.3g} s on them "
            f"({pct(seconds, io):.1f} % of its I/O time).",
            evidence={
                "files": n,
                "opens": int(opens[unused].sum()),
                "slowest_rank": who,
                "slowest_rank_metadata_seconds": round(seconds, 6),
                "slowest_rank_io_seconds": round(float(io), 6),
            },
            ranks=[who],
            files=files,
            files_total=listed,
            recommendation="Test whether a file exists with stat (os.path.exists, access) "
            "instead of opening it, open a file only when it is read or written, and keep "
            "per-step markers as lines of one status file.",
            snippet=snippet,
            snippet_lang=lang,
        ), seconds)  # fmt: skip
