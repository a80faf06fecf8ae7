"""STDIO layer: bulk data through buffered C streams."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..model.aggregate import isin
from ..units import human_size
from . import advice
from .base import Check, Context, Finding, Level, check, pct
from .iotime import io_time, price, times
from .language import snippet_fields

# Streams every program has; their traffic is console output, not data.
CONSOLE = ("<STDOUT>", "<STDERR>", "<STDIN>")


def console_ids(ctx: Context) -> np.ndarray:
    """Ids of the trace's console streams (:data:`CONSOLE`)."""
    return np.array([i for i, n in ctx.trace.names.items() if n in CONSOLE], np.uint64)


@check
class StdioShare(Check):
    """A large share of the data moves through STDIO.

    Cost: the slowest rank's STDIO read and write time outside the console
    streams (moving the data to a parallel interface saves part of it)."""

    id = "stdio-share"
    layer = "STDIO"
    drishti = "S01"
    uses = ("stdio_share",)

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        s = ctx.layer("STDIO")
        if s is None:
            return
        stdio = s.total("STDIO_BYTES_READ") + s.total("STDIO_BYTES_WRITTEN")
        posix = _moved(ctx, "POSIX")
        mpiio = _moved(ctx, "MPIIO")
        # MPI-IO traffic reaches the file system through POSIX: count it once.
        total = stdio + mpiio + (posix - mpiio if posix >= mpiio else posix)
        # DAOS object storage: DFS calls reach it as DAOS array calls, count them once.
        total += max(_moved(ctx, "DFS"), _moved(ctx, "DAOS"))
        if not total or stdio / total <= ctx.thresholds["stdio_share"]:
            return
        per_row = s["STDIO_BYTES_READ"] + s["STDIO_BYTES_WRITTEN"]
        ids, sums = ctx.per_file(s, {"bytes": per_row})
        per = sums["bytes"]
        files, n = ctx.top_files(ids, per, {"bytes": per}, per > 0)
        console = sum(f.numbers["bytes"] for f in files if f.path in CONSOLE)
        note = (
            f" ({human_size(console)} of it is console output)" if console else ""
        )
        data = ~isin(s.file_id, console_ids(ctx))
        spent = np.where(data, times(s, "F_READ_TIME", "F_WRITE_TIME"), 0.0)
        yield price(ctx, self.finding(
            ctx,
            Level.HIGH,
            f"{pct(stdio, total):.1f} % of the bytes ({human_size(stdio)} of "
            f"{human_size(total)}) move through STDIO{note}.",
            evidence={"stdio_bytes": stdio, "total_bytes": total},
            files=files,
            files_total=n,
            recommendation="Move bulk data to a parallel interface (MPI-IO, HDF5, PnetCDF) or "
            "at least give the streams large buffers; keep STDIO for small text output.",
            **snippet_fields(ctx, advice.PY_STDIO_BINARY, advice.STDIO_BUFFER,
                             fortran=advice.FORTRAN_STDIO_BINARY),
        ), io_time(ctx).rows_at_slowest(s, spent))


def _moved(ctx: Context, layer: str) -> int:
    c = ctx.layer(layer)
    if c is None:
        return 0
    return c.total(f"{layer}_BYTES_READ") + c.total(f"{layer}_BYTES_WRITTEN")
