"""Fortran READ/WRITE statements (the runtime's FORTRAN layer, iopilot traces
only): element-by-element statements and big arrays through formatted I/O.

The file system sees only the Fortran library's buffered 8-64 KiB writes,
so what costs is the statements themselves: gfortran spends 50-200 ns per
unformatted statement and about 1 µs per formatted line before a byte
reaches ``write()``.  Each check prices what the fixed form would not spend:
the statements' time minus the time of moving the same bytes in one
statement, at the bandwidth the file system gave this file (POSIX bytes /
POSIX time on it), else the bandwidth of the job's own large Fortran
statements, else ``default_bandwidth``.

Rows are per (unit's file, rank).  A row is formatted when most of its
statements in that direction are (a unit is opened one way or the other).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..model import Counters
from . import advice
from .base import Check, Context, Finding, check, pct
from .iotime import price
from .lustre import gather, index_of
from .rankcost import level_by_share, per_rank, slowest

_DIRS = {"WRITE": ("WRITES", "BYTES_WRITTEN", "F_WRITE_TIME", "WRITE"),
         "READ": ("READS", "BYTES_READ", "F_READ_TIME", "READ")}  # fmt: skip
# (direction, rows that qualify, seconds saved, seconds of the fixed form) per row
_Part = tuple[str, np.ndarray, np.ndarray, np.ndarray]
_LARGE_STATEMENT = 1 << 20  # bytes per statement whose bandwidth stands for the fixed form


def _col(c: Counters, name: str) -> np.ndarray:
    full = f"FORTRAN_{name}"
    return c[full].astype(np.float64) if c.has(full) else np.zeros(len(c))


def _bandwidth(ctx: Context, c: Counters, direction: str) -> np.ndarray:
    """Per row: bytes per second the fixed form is taken to reach (see the
    module's docstring)."""
    ops, nbytes, secs, _ = _DIRS[direction]
    fallback = float(ctx.thresholds["default_bandwidth"])
    n, b, t = _col(c, ops), _col(c, nbytes), _col(c, secs)
    big = (n > 0) & (b >= _LARGE_STATEMENT * np.maximum(n, 1)) & (t > 0)
    if big.any():
        fallback = float(b[big].sum() / t[big].sum())
    out = np.full(len(c), fallback)
    posix = ctx.layer("POSIX")
    if posix is None:
        return out
    p_ids, p_bytes = posix.by_file(f"POSIX_{nbytes}")
    _, p_time = posix.by_file(f"POSIX_F_{secs[2:]}")
    ok = (p_bytes > 0) & (p_time > 0)
    at = index_of(p_ids[ok], c.file_id)
    return np.where(at >= 0, gather(p_bytes[ok] / p_time[ok], at), out)


def _site(ctx: Context, c: Counters, row: int) -> str:
    """"line L of SRC" of the costliest statement site of ``row``, or ""."""
    line = int(_col(c, "SITE_LINE")[row])
    if line <= 0:
        return ""
    src_id = int(np.int64(c["FORTRAN_SITE_SOURCE"][row]).view(np.uint64))
    src = ctx.trace.names.get(src_id, "")
    return f"line {line} of {src}" if src else f"line {line}"


class _FortranCheck(Check):
    """What both checks share: rows that qualify, their saving, the finding."""

    layer = "FORTRAN"
    site_layers = ("POSIX",)  # the Fortran library's writes, from the statements' lines
    formatted: bool

    def rows(self, ctx: Context, c: Counters, direction: str) -> np.ndarray:
        raise NotImplementedError

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        c = ctx.layer("FORTRAN")
        if c is None:
            return
        # Both directions of a file are one root cause (the same statements'
        # form): their savings add up, the larger one is described.
        parts: list[_Part] = []
        for d, (_, nbytes, secs, _) in _DIRS.items():
            sel = self.rows(ctx, c, d)
            if sel.any():
                fixed = _col(c, nbytes) / _bandwidth(ctx, c, d)
                saving = np.where(sel, np.maximum(_col(c, secs) - fixed, 0.0), 0.0)
                parts.append((d, sel, saving, fixed))
        if not parts:
            return
        total = sum(p[2] for p in parts)
        who, sec = slowest(per_rank(ctx, c.rank, total))
        if sec < float(ctx.thresholds["fortran_min_time"]):
            return
        mine = (c.rank == who) | (c.rank < 0)
        parts.sort(key=lambda p: -float(p[2][mine].sum()))
        yield self.report(ctx, c, parts, who, sec)

    def report(self, ctx: Context, c: Counters, parts: list[_Part], who: int,
               sec: float) -> Finding:  # fmt: skip
        d, sel, saving, fixed = parts[0]
        ops, nbytes, secs, word = _DIRS[d]
        mine = sel & ((c.rank == who) | (c.rank < 0))
        n, b, t = _col(c, ops), _col(c, nbytes), _col(c, secs)
        files, total = ctx.top_files(c.file_id, saving, {
            "statements": n, "bytes": b, "seconds": t, "ns per statement":
            np.round(np.where(n > 0, t / np.maximum(n, 1) * 1e9, 0.0), 1)}, mine)
        worst = int(np.flatnonzero(mine)[np.argmax(saving[mine])])
        statements, moved, spent = int(n[mine].sum()), int(b[mine].sum()), float(t[mine].sum())
        site = _site(ctx, c, worst)
        name = ctx.trace.name(int(c.file_id[worst]))
        per = spent / max(statements, 1)
        kind = "formatted" if self.formatted else "unformatted"
        runtime = float(ctx.trace.job.runtime)
        other = ""
        if len(parts) > 1:
            d2, sel2, _, _ = parts[1]
            ops2, _, secs2, word2 = _DIRS[d2]
            m2 = sel2 & ((c.rank == who) | (c.rank < 0))
            other = (f" The same file(s) also take {int(_col(c, ops2)[m2].sum()):,} {kind} "
                     f"{word2} statements, {float(_col(c, secs2)[m2].sum()):.3g} s.")
        message = (
            f"{statements:,} {kind} {word} statements"
            + (f" on rank {who}" if ctx.trace.job.nprocs > 1 else "")
            + f" moved {moved:,} bytes of values ({moved / max(statements, 1):.3g} bytes per "
            f"statement) in {spent:.3g} s, {per * 1e9:,.0f} ns per statement"
            + (f", {pct(spent, runtime):.1f} % of the run" if runtime > 0 else "")
            + f"; the fixed form would take about {float(fixed[mine].sum()):.3g} s. "
            f"Most of it is {site or 'one statement'} on {name}"
            + (f" ({int(_col(c, 'SITE_STATEMENTS')[worst]):,} statements there)." if site else ".")
            + other
        )
        return price(ctx, self.finding(
            ctx,
            level_by_share(sec, spent, 0.5),
            message,
            evidence={
                "direction": word.lower(),
                "rank": who,
                "statements": statements,
                "bytes": moved,
                "statement_seconds": round(spent, 6),
                "fixed_seconds": round(float(fixed[mine].sum()), 6),
                "ns_per_statement": round(per * 1e9, 1),
                "source_line": int(_col(c, "SITE_LINE")[worst]),
                "source_site": site,
            },
            ranks=[who] if ctx.trace.job.nprocs > 1 else [],
            files=files,
            files_total=total,
            recommendation=self.recommendation(word, site),
            snippet=self.snippet(ctx),
            snippet_lang="fortran",
        ), sec)  # fmt: skip

    # the serial snippet (parallel jobs get MPI-IO and HDF5 forms too), and the
    # recommendation with {word} (READ/WRITE) and {at} (" at line L of SRC")
    serial_snippet: str
    advice_text: str

    def snippet(self, ctx: Context) -> str:
        return _parallel(ctx, self.serial_snippet)

    def recommendation(self, word: str, site: str) -> str:
        return self.advice_text.format(word=word, at=f" at {site}" if site else "")


def _parallel(ctx: Context, serial: str) -> str:
    """The serial snippet, with MPI-IO and HDF5 forms for a parallel job."""
    if ctx.trace.job.nprocs <= 1:
        return serial
    return f"{serial}\n\n{advice.FORTRAN_WRITE_AT_ALL}\n\n{advice.FORTRAN_H5DWRITE}"


@check
class FortranElementIo(_FortranCheck):
    """Many unformatted Fortran statements each moving an element or a few bytes
    (a loop of ``write(u) a(i)``).

    ``cost_seconds``: the slowest rank's time in those statements minus the
    time of the same bytes in one statement (see the module's docstring).
    """

    id = "fortran-element-io"
    finds = ("at least 10,000 unformatted Fortran READ/WRITE statements on one file moving "
             "512 bytes or less each (an element-by-element loop), with the source line of "
             "the costliest statement")
    cost = "the statements' seconds less moving the same bytes in one statement"
    formatted = False
    uses = ("fortran_statements", "fortran_statement_bytes", "fortran_min_time",
            "default_bandwidth")  # fmt: skip

    def rows(self, ctx: Context, c: Counters, direction: str) -> np.ndarray:
        ops, nbytes, _, word = _DIRS[direction]
        n, b = _col(c, ops), _col(c, nbytes)
        unformatted = _col(c, f"UNFORMATTED_{word}S") * 2 > n
        t = ctx.thresholds
        return (unformatted & (n >= float(t["fortran_statements"]))
                & (b <= float(t["fortran_statement_bytes"]) * n))  # fmt: skip

    serial_snippet = advice.FORTRAN_WHOLE_ARRAY
    advice_text = ("Move the array with one {word} statement{at} (the whole array or a "
                   "section, a(1:n), not one statement per element inside a loop); a stream "
                   "file (access='stream', form='unformatted') holds just the values.")


@check
class FortranFormattedIo(_FortranCheck):
    """Big arrays read or written through formatted (or list-directed) Fortran
    statements: each value is converted to or from text, one at a time.

    ``cost_seconds``: the slowest rank's time in those statements minus the
    time of the same values' bytes in one unformatted statement (see the
    module's docstring).
    """

    id = "fortran-formatted-io"
    finds = ("1 MiB or more of values through formatted or list-directed Fortran statements "
             "on one file")
    cost = "as above"
    formatted = True
    uses = ("fortran_formatted_bytes", "fortran_min_time", "default_bandwidth")

    def rows(self, ctx: Context, c: Counters, direction: str) -> np.ndarray:
        ops, nbytes, _, word = _DIRS[direction]
        formatted = _col(c, f"FORMATTED_{word}S") * 2 > _col(c, ops)
        return formatted & (_col(c, nbytes) >= float(ctx.thresholds["fortran_formatted_bytes"]))

    serial_snippet = advice.FORTRAN_STREAM_UNFORMATTED
    advice_text = ("Keep formatted {word} statements for what people read: move big "
                   "arrays{at} unformatted (access='stream', form='unformatted') in one "
                   "statement, and convert them to text afterwards if a text file is needed.")
