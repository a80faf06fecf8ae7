"""Summary view: the job, its findings, file systems and file categories."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...model import RECORD_LAYERS, Trace, display
from ...model.aggregate import unique
from ...vocabulary import FS_LAYERS
from . import phases
from .common import FS_CODES, TABLE_LAYERS, col, mount_of
from .context import PageContext, chunks


def data(ctx: PageContext) -> dict[str, Any]:
    """Always shown: what the summary adds to the report's own numbers."""
    return {"overview": _overview(ctx), "access_sizes": access_sizes(ctx)}


COMMON = 4  # Darshan keeps the four most common access sizes


def _top_sizes(sizes: np.ndarray, counts: np.ndarray) -> list[list[int]]:
    """The COMMON sizes with the highest summed counts (the larger size first on
    a tie, as Darshan orders them); sizes and counts of 0 are not accesses."""
    ok = (sizes > 0) & (counts > 0)
    if not ok.any():
        return []
    u, inv = np.unique(sizes[ok], return_inverse=True)
    total = np.bincount(inv, weights=counts[ok], minlength=len(u))
    top = np.lexsort((-u, -total))[:COMMON]
    return [[int(u[i]), int(total[i])] for i in top]


def access_sizes(ctx: PageContext) -> list[dict[str, Any]]:
    """Per interface, its most common access sizes with their counts.

    From Darshan's ACCESS1..4_ACCESS / _COUNT counters when the source has
    them (summed over records, as PyDarshan's summary does), else from the
    traced operations' request sizes (reads and writes), chunk by chunk.
    """
    out = []
    done = set()
    for layer in TABLE_LAYERS:
        c = ctx.t.layer(layer)
        if c is None or not len(c):
            continue
        # A source may keep fewer than four slots (a trace's STDIO keeps one).
        slots = [k for k in range(1, COMMON + 1)
                 if c.has(f"{layer}_ACCESS{k}_ACCESS") and c.has(f"{layer}_ACCESS{k}_COUNT")]
        if not slots:
            continue
        sizes = np.concatenate([c[f"{layer}_ACCESS{k}_ACCESS"] for k in slots])
        counts = np.concatenate([c[f"{layer}_ACCESS{k}_COUNT"] for k in slots])
        top = _top_sizes(sizes.astype(np.int64), counts.astype(np.int64))
        if top:
            out.append({"layer": display(layer), "source": "counters", "sizes": top})
            done.add(layer)
    r = ctx.t.records
    if len(r):
        # Per chunk: its distinct (layer, size) pairs and their counts, merged after.
        keys, cnts = [], []
        for sl in chunks(len(r)):
            ln = r.length[sl].astype(np.int64)
            k = r.layer[sl].astype(np.int64) << 56 | np.clip(ln, 0, (1 << 56) - 1)
            u, n = np.unique(k[ln > 0], return_counts=True)
            keys.append(u)
            cnts.append(n)
        k = np.concatenate(keys)
        n = np.concatenate(cnts)
        lay = k >> 56
        for code in unique(lay):
            name = RECORD_LAYERS[int(code)]
            if name in done:
                continue
            m = lay == code
            top = _top_sizes(k[m] & ((1 << 56) - 1), n[m])
            if top:
                out.append({"layer": display(name), "source": "records", "sizes": top})
    return out


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
    if phases.of(ctx) is not None:  # sets the phases' busy time (computed once)
        out.update(ctx.phase_busy)
    return out
