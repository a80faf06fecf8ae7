"""Seconds per rank, for the ``cost_seconds`` of a finding: the slowest rank's
seconds that the problem explains."""

from __future__ import annotations

import numpy as np

from ..model.aggregate import group_sum
from ..model.aggregate import per_rank as sum_per_rank
from ..vocabulary import FS_LAYERS
from .base import Context, Level
from .language import in_language, is_python  # noqa: F401  (checks import them from here)
from .recordtools import _cached, _dense


def per_rank(ctx: Context, rank: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per-rank sums of ``values`` (one per counters row, ``rank`` its rank).

    Rows of shared files reduced over all ranks (rank -1) do not say which
    rank spent the time: they are spread evenly over the job's ranks, so the
    estimate never blames one rank for everybody's time."""
    v = np.asarray(values, np.float64)
    n = max(int(ctx.trace.job.nprocs), int(rank.max()) + 1 if len(rank) else 1, 1)
    out = sum_per_rank(rank, v, n)
    out += float(v[rank < 0].sum()) / n
    return out


def slowest(seconds: np.ndarray) -> tuple[int, float]:
    """(rank, seconds) of the rank with the most seconds."""
    if not len(seconds):
        return 0, 0.0
    r = int(np.argmax(seconds))
    return r, float(seconds[r])


def level_by_share(cost: float, io_seconds: float, share: float) -> Level:
    """HIGH when the problem explains at least ``share`` of the rank's I/O time."""
    return Level.HIGH if cost > 0 and cost >= share * io_seconds else Level.WARN


_SUMS = ("opens", "seeks", "stats", "reads", "writes", "bytes_read", "bytes_written", "meta",
         "io")  # fmt: skip


def fs_rows(ctx: Context) -> dict[str, np.ndarray] | None:
    """One row per (file, rank) over the file-system layers (POSIX and STDIO):
    ``file``, ``rank``, sums of opens (real ones: no fileno, dup or fdopen),
    seeks, stats, reads, writes, bytes, metadata seconds (``meta``) and all
    I/O seconds (``io``), and ``extent`` (the byte after the last one read or
    written).  Computed once per diagnosis (several checks read it), its
    arrays read-only."""
    return _cached(ctx, "fs_rows", lambda: _fs_rows(ctx))


def _fs_rows(ctx: Context) -> dict[str, np.ndarray] | None:
    parts = []
    for layer in FS_LAYERS:
        c = ctx.layer(layer)
        if c is None:
            continue

        def col(name: str, c=c, layer=layer) -> np.ndarray:
            full = f"{layer}_{name}"
            return c[full].astype(np.float64) if c.has(full) else np.zeros(len(c))

        meta = col("F_META_TIME")
        # Darshan's OPENS include filenos and dups (POSIX) and fdopens (STDIO):
        # none opens the file again (a C++ fstream calls fileno at every read
        # or write), so only the opens that reach the file system count.
        opens = np.maximum(col("OPENS") - col("FILENOS") - col("DUPS") - col("FDOPENS"), 0)
        parts.append({"file": c.file_id, "rank": c.rank, "opens": opens,
                      "seeks": col("SEEKS"), "stats": col("STATS"), "reads": col("READS"),
                      "writes": col("WRITES"), "bytes_read": col("BYTES_READ"),
                      "bytes_written": col("BYTES_WRITTEN"), "meta": meta,
                      "io": meta + col("F_READ_TIME") + col("F_WRITE_TIME"),
                      "extent": np.maximum(col("MAX_BYTE_READ"),
                                           col("MAX_BYTE_WRITTEN")) + 1})  # fmt: skip
    if not parts:
        return None
    rows = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    files, fidx = _dense(rows["file"])
    rank = rows["rank"].astype(np.int64)
    width = int(rank.max()) + 2  # ranks from -1
    keys, inv = np.unique(fidx.astype(np.int64) * width + (rank + 1), return_inverse=True)
    out = {k: group_sum(inv, rows[k], len(keys), as_float=True) for k in _SUMS}
    out["extent"] = np.zeros(len(keys))
    np.maximum.at(out["extent"], inv, rows["extent"])
    out["file"] = files[keys // width]
    out["rank"] = keys % width - 1
    for v in out.values():
        v.setflags(write=False)
    return out


def metadata_cost(ctx: Context, rows: dict[str, np.ndarray],
                  on: np.ndarray) -> tuple[int, float, float, Level]:  # fmt: skip
    """For :func:`fs_rows` rows ``on``: the rank with the most metadata seconds
    on them, those seconds, that rank's I/O seconds on all files, and the level
    (HIGH when the seconds are ``metadata_time_share`` of its I/O or more)."""
    who, cost = slowest(per_rank(ctx, rows["rank"][on], rows["meta"][on]))
    io = float(per_rank(ctx, rows["rank"], rows["io"])[who])
    return who, cost, io, level_by_share(cost, io, float(ctx.thresholds["metadata_time_share"]))
