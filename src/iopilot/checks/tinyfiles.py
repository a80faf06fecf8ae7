"""Many tiny files: each costs an open, a close and a metadata-server round
trip, whatever the few bytes it holds."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..model.aggregate import group_sum, isin
from ..units import human_size
from . import advice
from .base import Check, Context, Finding, check, pct
from .iotime import price
from .rankcost import fs_rows, in_language, metadata_cost
from .stdio import console_ids


@check
class TinyFiles(Check):
    """Many files each hold only a few bytes (read, or written).

    A storm is judged by its share of the time, not by a count: more than
    ``tiny_files_min`` tiny files whose opens, closes, stats and seeks take
    ``tiny_files_share`` of the slowest such rank's I/O time or more (or,
    whatever their share, more than ``tiny_files_count`` files).

    ``cost_seconds``: the slowest rank's metadata seconds (open, stat, seek,
    close) on the tiny files; packing them into one file saves most of it.
    """

    id = "tiny-files"
    layer = "POSIX"
    site_ops, site_layers = tuple("open close stat".split()), ("POSIX", "STDIO")  # what it costs
    finds = ("more than 100 files read, or written, that each end below 64 KiB and whose "
             "opens, closes and stats take at least 20 % of the slowest such rank's I/O time "
             "(or more than 1,000 such files, whatever their share)")
    cost = "the slowest rank's metadata seconds on them"
    uses = ("tiny_file_size", "tiny_files_count", "tiny_files_min", "tiny_files_share",
            "metadata_time_share")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        rows = fs_rows(ctx)
        if rows is None:
            return
        t = ctx.thresholds
        # Per file: its extent, and whether it was written or only read.
        ids, inv = np.unique(rows["file"], return_inverse=True)
        extent = np.zeros(len(ids))
        np.maximum.at(extent, inv, rows["extent"])
        writes = group_sum(inv, rows["writes"], len(ids), as_float=True)
        reads = group_sum(inv, rows["reads"], len(ids), as_float=True)
        named = ~isin(ids, console_ids(ctx))
        tiny = named & (extent < float(t["tiny_file_size"]))
        # A small input the program writes once and then reads again and
        # again is a re-read (reopened-files), not one file of a storm.
        bytes_w = group_sum(inv, rows["bytes_written"], len(ids), as_float=True)
        bytes_r = group_sum(inv, rows["bytes_read"], len(ids), as_float=True)
        written = tiny & (writes > 0) & (bytes_r <= bytes_w)
        read = tiny & (reads > 0) & (writes == 0)
        limit, floor = int(t["tiny_files_count"]), int(t["tiny_files_min"])
        storm = {}
        for kind, mask in (("w", written), ("r", read)):
            n = int(mask.sum())
            if n <= floor:
                storm[kind] = False
                continue
            _, meta_s, io_s, _ = metadata_cost(ctx, rows, mask[inv])
            storm[kind] = n > limit or (io_s > 0 and meta_s >= float(t["tiny_files_share"]) * io_s)
        many_w, many_r = storm["w"], storm["r"]
        if not (many_w or many_r):
            return
        flagged = (written if many_w else False) | (read if many_r else False)
        who, cost, io, level = metadata_cost(ctx, rows, flagged[inv])
        moved = group_sum(inv, rows["bytes_read"] + rows["bytes_written"], len(ids),
                          as_float=True)  # fmt: skip
        opens = group_sum(inv, rows["opens"], len(ids), as_float=True)
        meta = group_sum(inv, rows["meta"], len(ids), as_float=True)
        files, n = ctx.top_files(ids, meta, {"bytes": moved, "opens": opens,
                                             "metadata seconds": meta}, flagged)  # fmt: skip
        parts = []
        if many_w:
            parts.append(f"{int(written.sum()):,} tiny files written")
        if many_r:
            parts.append(f"{int(read.sum()):,} tiny files read")
        mean = float(moved[flagged].mean())
        if many_w and ctx.trace.job.nprocs > 1:
            rec = ("Write the pieces into one file instead of one file each: one file per rank "
                   "opened once for the whole run, or one shared file written with MPI-IO "
                   "(MPI_File_write_at_all) or parallel HDF5 (h5py with driver=\"mpio\")")
            snippet, lang = in_language(ctx, advice.PY_ONE_CONTAINER, advice.C_ONE_FILE_PER_RANK,
                                        fortran=advice.FORTRAN_ONE_CONTAINER)
        elif many_w:
            rec = ("Write the pieces into one file instead of one file each: datasets of one "
                   "HDF5 file, records at known offsets of one binary file with an index, or "
                   "one file per rank")
            snippet, lang = in_language(ctx, advice.PY_ONE_CONTAINER, advice.C_ONE_CONTAINER,
                                        fortran=advice.FORTRAN_ONE_CONTAINER)
        else:
            rec = ("Pack the small inputs into one file (an archive, an HDF5 file) and read "
                   "that, or copy them to node-local storage once at the start")
            snippet, lang = advice.TAR_INPUTS, "sh"
        yield price(ctx, self.finding(
            ctx,
            level,
            f"{' and '.join(parts)} (each under {human_size(t['tiny_file_size'])}, "
            f"{human_size(mean)} moved per file on average); rank {who} spends "
            f"{cost:.3g} s opening and closing them ({pct(cost, io):.1f} % of its "
            "I/O time).",
            evidence={
                "tiny_files_written": int(written.sum()),
                "tiny_files_read": int(read.sum()),
                "mean_bytes_per_file": round(mean, 1),
                "opens": int(opens[flagged].sum()),
                "slowest_rank": who,
                "slowest_rank_metadata_seconds": round(cost, 6),
                "slowest_rank_io_seconds": round(float(io), 6),
            },
            ranks=[who],
            files=files,
            files_total=n,
            recommendation=rec + ".",
            snippet=snippet,
            snippet_lang=lang,
        ), cost)  # fmt: skip
