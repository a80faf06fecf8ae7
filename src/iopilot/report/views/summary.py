"""Summary view: the job, its findings, file systems and file categories."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...model import Trace, display
from ...vocabulary import FS_LAYERS
from .common import FS_CODES, TABLE_LAYERS, col, mount_of
from .context import PageContext


def data(ctx: PageContext) -> dict[str, Any]:
    """Always shown: what the summary adds to the report's own numbers."""
    return {"overview": _overview(ctx)}


def file_categories(t: Trace) -> list[dict[str, Any]]:
    """Per interface with counters: its files by how they were used (read only,
    written only, both, neither) and by who used them (shared: a reduced row
    or more than one rank; unique: one rank), with the bytes of each kind."""
    out = []
    for name in TABLE_LAYERS:
        c = t.layer(name)
        if c is None or not len(c) or not c.has(f"{name}_BYTES_READ"):
            continue
        ids, inv = np.unique(c.file_id, return_inverse=True)
        n = len(ids)
        rb = np.bincount(inv, weights=c[f"{name}_BYTES_READ"].astype(np.float64), minlength=n)
        wb = np.bincount(inv, weights=c[f"{name}_BYTES_WRITTEN"].astype(np.float64), minlength=n)
        rows = np.bincount(inv, minlength=n)
        reduced = np.bincount(inv, weights=c.rank < 0, minlength=n) > 0
        shared = reduced | (rows > 1)
        kinds = {"read_only": (rb > 0) & (wb == 0), "write_only": (rb == 0) & (wb > 0),
                 "read_write": (rb > 0) & (wb > 0), "no_data": (rb == 0) & (wb == 0)}
        row: dict[str, Any] = {"layer": display(name), "files": n}
        for k, m in kinds.items():
            row[k] = int(m.sum())
            row[k + "_bytes"] = float((rb + wb)[m].sum())
        row["shared"], row["unique"] = int(shared.sum()), int((~shared).sum())
        row["shared_bytes"] = float((rb + wb)[shared].sum())
        row["unique_bytes"] = float((rb + wb)[~shared].sum())
        out.append(row)
    return out



def _overview(ctx: PageContext) -> dict[str, Any]:
    t = ctx.t
    # Per listed file: bytes the file system saw (POSIX + STDIO counters, else records).
    fs_bytes = np.zeros(len(ctx.files))
    has_counters = False
    for layer in FS_LAYERS:
        c = t.layer(layer)
        if c is None or not len(c):
            continue
        has_counters = True
        idx = ctx.file_index(c.file_id)
        ok = idx >= 0
        b = col(c, f"{layer}_BYTES_READ") + col(c, f"{layer}_BYTES_WRITTEN")
        fs_bytes += np.bincount(idx[ok], weights=b[ok], minlength=len(ctx.files))
    if not has_counters and len(ctx.rec_files):
        b = ctx.fl_bytes[:, list(FS_CODES), :].sum(axis=(1, 2))
        ok = ctx.rec_file_listed >= 0
        fs_bytes += np.bincount(ctx.rec_file_listed[ok], weights=b[ok],
                                minlength=len(ctx.files))  # fmt: skip
    mounts: dict[tuple[str, str], list[float]] = {}
    for i in range(len(ctx.files)):
        key = mount_of(t.name(int(ctx.files[i])), t.job.mounts)
        acc = mounts.setdefault(key, [0, 0.0])
        acc[0] += 1
        acc[1] += float(fs_bytes[i])
    fs = [{"mount": m or None, "type": k or None, "files": int(v[0]), "bytes": v[1]}
          for (m, k), v in sorted(mounts.items(), key=lambda kv: -kv[1][1])]  # fmt: skip
    # The run's I/O time is the report's io_time (all layers, each
    # operation once, the slowest rank): the page reads it from there.
    out: dict[str, Any] = {"filesystems": fs, "categories": file_categories(t)}
    if ctx.phases is not None:  # the phases' busy time (computed once, on first use)
        out.update(ctx.phase_busy)
    return out
