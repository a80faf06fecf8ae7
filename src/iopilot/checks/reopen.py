"""Files opened, stat'ed and seeked again and again by the same rank: a
loop that reopens its output for every append (pandas ``to_csv(mode="a")``,
``open(path, "a")`` per line) or its input for every read."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..model.aggregate import isin, unique
from ..vocabulary import OP_NAMES
from . import advice
from .base import Check, Context, FileEvidence, Finding, check, pct
from .iotime import io_time, price
from .rankcost import fs_rows, in_language, is_python, metadata_cost, per_rank
from .recordtools import _dense


def waiting_for(ctx: Context, ranks: np.ndarray) -> tuple[int, float]:
    """(rank, seconds): of the ``ranks`` that re-read inputs, the one the
    others wait for longest in MPI-IO calls (collective calls and what they
    wait at end together): the slowest rank's MPI-IO seconds minus that
    rank's.  (-1, 0) without MPI-IO or re-reading ranks."""
    mpiio = io_time(ctx).per_rank.get("MPIIO")
    ranks = unique(ranks[(ranks >= 0) & (ranks < (len(mpiio) if mpiio is not None else 0))])
    if mpiio is None or not len(ranks):
        return -1, 0.0
    late = int(ranks[np.argmin(mpiio[ranks])])
    slow = io_time(ctx).slowest_rank
    return late, max(float(mpiio[slow] - mpiio[late]), 0.0)


_FEW_READS = 64  # reads per open of an input read whole by a parser
# An input this big read whole at every open is data, not a configuration:
# its repeated bytes, when they cost more than the opens, are the mistake.
_DATA_INPUT = 1 << 20


def open_spans(ctx: Context, rows: dict[str, np.ndarray], on: np.ndarray) -> np.ndarray:
    """Per :func:`fs_rows` row (``on`` only, else 0): seconds from each open
    to its close, summed, from the trace's open and close records (a
    reduced row of a shared file sums all ranks').  0 without them, and for
    a (file, rank) whose opens and closes pair up in no layer."""
    out = np.zeros(len(rows["file"]))
    m = ctx.trace.meta_records
    if not len(m) or not on.any():
        return out
    m = m.select(isin(m.file_id, unique(rows["file"][on])))
    o_op, c_op = OP_NAMES.index("open"), OP_NAMES.index("close")
    opens, closes = m.select(m.op == o_op), m.select(m.op == c_op)
    if not len(opens) or not len(closes):
        return out
    files, _ = _dense(np.concatenate([opens.file_id, closes.file_id]))
    width = int(max(opens.rank.max(), closes.rank.max())) + 1
    nl = int(max(opens.layer.max(), closes.layer.max())) + 1
    ko = ((np.searchsorted(files, opens.file_id).astype(np.int64) * width + opens.rank) * nl
          + opens.layer)  # fmt: skip
    kc = ((np.searchsorted(files, closes.file_id).astype(np.int64) * width + closes.rank) * nl
          + closes.layer)  # fmt: skip
    # Each (file, rank, layer)'s opens and closes in time order pair up one to
    # one (a stream's fileno is an open with no close of its layer: unpaired).
    oo, oc = np.lexsort((opens.start, ko)), np.lexsort((closes.end, kc))
    ko, kc = ko[oo], kc[oc]
    keys_o, n_o = np.unique(ko, return_counts=True)
    keys_c, n_c = np.unique(kc, return_counts=True)
    both = np.intersect1d(keys_o, keys_c)
    same = both[n_o[np.searchsorted(keys_o, both)] == n_c[np.searchsorted(keys_c, both)]]
    so, sc = isin(ko, same), isin(kc, same)
    span = np.maximum(closes.end[oc][sc] - opens.start[oo][so], 0.0)
    per_key = np.bincount(np.searchsorted(same, ko[so]), span, minlength=len(same))
    # Layers see the same opens (fopen and its open, H5Fopen and the POSIX
    # open inside it): a (file, rank) is open as long as its longest layer says.
    same, inv = np.unique(same // nl, return_inverse=True)
    longest = np.zeros(len(same))
    np.maximum.at(longest, inv, per_key)
    per_key = longest
    per_file = np.bincount(same // width, per_key, minlength=len(files))
    # Back to the rows: a rank's row takes its key, a reduced row all ranks'.
    fi = np.minimum(np.searchsorted(files, rows["file"]), len(files) - 1)
    known = on & (files[fi] == rows["file"])
    key = fi.astype(np.int64) * width + np.maximum(rows["rank"], 0)
    pos = np.minimum(np.searchsorted(same, key), max(len(same) - 1, 0))
    own = known & (rows["rank"] >= 0) & (len(same) > 0)
    hit = own & (same[pos] == key) if len(same) else own
    out[hit] = per_key[pos[hit]]
    reduced = known & (rows["rank"] < 0)
    out[reduced] = per_file[fi[reduced]]
    return out


def read_again(rows: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per :func:`fs_rows` row: bytes read beyond one pass over the file, and
    their share of the row's bytes read."""
    again = np.maximum(rows["bytes_read"] - rows["extent"], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return again, np.where(rows["bytes_read"] > 0, again / rows["bytes_read"], 0.0)


def rereads(ctx: Context, rows: dict[str, np.ndarray]) -> np.ndarray:
    """Per :func:`fs_rows` row: a file opened ``reread_opens`` times or more
    by its rank (by each rank, for a shared file's row of all ranks), read
    whole at least as many times over and written at most once (it may have
    been created by the program): an input such as a configuration file
    read again at every step."""
    n = float(ctx.thresholds["reread_opens"])
    # A shared input's reduced row (rank -1) holds all ranks' opens and reads.
    ranks = np.where(rows["rank"] < 0, max(1, ctx.trace.job.nprocs), 1)
    return ((rows["opens"] >= n * ranks) & (rows["extent"] > 1)
            & (rows["bytes_read"] >= n * ranks * rows["extent"])
            & (rows["bytes_written"] <= rows["extent"]))  # fmt: skip


@check
class ReopenedFiles(Check):
    """The same file is opened, stat'ed or seeked over and over by one rank.

    Seeks and stats count beyond one per read or write (a seek before each
    access is an access pattern, which the random-access checks judge).

    A file read whole again at each of ``reread_opens`` opens or more (a
    configuration file re-read every step) counts too, whatever the count.

    ``cost_seconds``: the slowest rank's metadata seconds (open, stat, seek,
    close) on the files it reopens, plus the time of its reads beyond the
    first pass over each file (its read time times the share of repeated
    bytes); opening and reading each once would save nearly all.  Where
    those repeated reads are most of the cost of a data input (1 MiB or
    more, read whole at every open), they are posix-redundant-reads' cost,
    not counted here.  An input
    read whole by a parser at every step (few reads per open) costs, if
    more, the time it stays open at every open but the first (parsing
    included).  The message says how long the other ranks of an MPI program
    wait for the re-reading rank in MPI-IO calls: the same seconds, seen
    from them.
    """

    id = "reopened-files"
    layer = "POSIX"
    site_ops, site_layers = tuple("open close stat seek".split()), ("POSIX", "STDIO")
    finds = ("one rank opening, stat'ing or seeking the same file over and over (pandas "
             '`to_csv(mode="a")` per row), or reading an input whole at every step (a '
             "configuration file: read it once, in an MPI program on one rank, and broadcast "
             "it); seeks and stats count beyond one per read or write")
    cost = ("the slowest rank's metadata seconds and repeated reads on those files; for an "
             "input a parser reads whole at every open (pandas, `np.loadtxt`), the time it "
             "stays open at every open but the first, if more (within the job's I/O time)")
    uses = ("reopen_count", "seek_stat_count", "reread_opens", "metadata_time_share")

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
        again, again_share = read_again(rows)
        input_ = rereads(ctx, rows)
        bad = ((opens > float(t["reopen_count"])) | (seek_stat > float(t["seek_stat_count"]))
               | input_)  # fmt: skip
        if not bad.any():
            return
        # Reads beyond the first pass cost their share of the row's read time.
        read_t = np.maximum(rows["io"] - rows["meta"], 0.0) * again_share
        spent = rows["meta"] + read_t
        # An input parsed as it is read (pd.read_csv, np.loadtxt: a few reads
        # per open, parsing between them) costs all the time it stays open,
        # every time but the first; with many calls per open (fscanf per
        # value) the span is mostly those calls, already counted.
        # The same holds for a file appended a row per open (to_csv(mode="a"):
        # the row is formatted while the file is open).
        per_open = np.maximum(rows["opens"], 1)
        few = ((input_ & (rows["reads"] <= _FEW_READS * per_open))
               | (bad & (rows["writes"] > 0) & (rows["writes"] <= _FEW_READS * per_open)))
        spans = np.zeros(len(spent))
        in_calls = spent
        if few.any():
            spans = open_spans(ctx, rows, few)
            spent = np.where(few, np.maximum(spent, spans * (1 - 1 / per_open)), spent)
        # A data file read whole again at every open (an ifstream per step):
        # the repeated bytes, not the opens, are most of its cost, and they
        # are posix-redundant-reads' (the two findings are one, the costlier
        # kept); the opens cost their metadata and any time open beyond it.
        bytes_bound = input_ & (rows["extent"] >= _DATA_INPUT) & (read_t > spent - read_t)
        spent = np.where(bytes_bound, spent - read_t, spent)
        in_calls = np.where(bytes_bound, in_calls - read_t, in_calls)
        read_t = np.where(bytes_bound, 0.0, read_t)
        who, cost, io, level = metadata_cost(ctx, {**rows, "meta": spent}, bad)
        # What the calls took is I/O time; the rest of the open spans (parsing,
        # formatting) is the program's own work, priced beyond the I/O time.
        calls = float(per_rank(ctx, rows["rank"][bad], in_calls[bad])[who])
        outside = max(cost - calls, 0.0)
        waits = waiting_for(ctx, rows["rank"][input_])
        wait_text = ""
        if waits[1] > 0:  # the same seconds seen from the ranks that wait
            wait_text = (f"; the other ranks wait for rank {waits[0]} in their MPI-IO calls, "
                         f"the slowest {waits[1]:.3g} s longer than it")
        # A file written once and read at every step is an input re-read.
        written = bad & (rows["writes"] > 0) & ~input_
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
            + (f" for {int(rows['writes'][top]):,} writes" if written[top] else
               f" for {int(rows['reads'][top]):,} reads" if rows["reads"][top] else "")
            + f"; rank {who} spends {cost:.3g} s in their metadata calls"
            + (" and repeated reads" if (read_t[bad] > 0).any() else "")
            + f" ({pct(cost, io):.1f} % of its I/O time){wait_text}."
        )  # fmt: skip
        py = is_python(ctx)
        if kind == "written":
            rec = ("Open the file once and write once: collect the rows in memory and write "
                   "them with one call, or keep one file object open for the whole loop "
                   "instead of reopening it for every append"
                   + (" (pandas' to_csv(mode=\"a\") reopens, stats and seeks the file at "
                      "every call)" if py else ""))  # fmt: skip
            snippet, lang = in_language(ctx, advice.PY_WRITE_ONCE, advice.C_WRITE_ONCE,
                                        fortran=advice.FORTRAN_WRITE_ONCE)
        elif kind == "read" and ctx.trace.job.nprocs > 1:
            rec = ("Read the file once, not at every step (and in an MPI program, read it on "
                   "one rank and MPI_Bcast it to the others), then keep its contents in memory")
            snippet, lang = in_language(ctx, advice.PY_READ_ONCE_BCAST, advice.C_READ_ONCE_BCAST,
                                        fortran=advice.FORTRAN_READ_ONCE_BCAST)
        elif kind == "read":
            rec = ("Read the file once and keep its contents in memory (or keep it open) "
                   "instead of opening it again for every access")
            snippet, lang = in_language(ctx, advice.PY_READ_ONCE, advice.C_READ_ONCE,
                                        fortran=advice.FORTRAN_READ_ONCE)
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
                "bytes_read_again": int(again[bad].sum()),
                "others_wait_seconds": round(waits[1], 6),
                "open_seconds": round(float(spans[bad].sum()), 6),
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
        ), min(cost, calls), outside=outside)  # fmt: skip
