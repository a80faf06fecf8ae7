"""File system, files and ranks view: per-OST, per-file and per-rank totals."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...model import RECORD_LAYERS
from ...model.aggregate import isin, unique
from ...vocabulary import FS_LAYERS
from .common import NL, OPS, TABLE_LAYERS, Stripes, col, group, num, pack
from .context import RANK_BARS, TABLE_FILES, PageContext


def data(ctx: PageContext) -> dict[str, Any]:
    """Always shown: per-OST (Lustre only), per-file and per-rank tables."""
    t = ctx.t
    return {
        "ost": _ost(ctx) if t.lustre is not None and len(t.lustre) else None,
        "file_table": _file_table(ctx),
        "ranks": _ranks(ctx),
    }


def _ost(ctx: PageContext) -> dict[str, Any] | None:
    t = ctx.t
    stripes = ctx.stripes or Stripes(t)
    if not stripes.m:
        return None
    m = stripes.m
    by, req, sec = np.zeros((2, m)), np.zeros((2, m)), np.zeros((2, m))
    rec_rows = ctx.ost_rec_rows
    if rec_rows is None:
        rec_rows = np.zeros(len(stripes.count), bool)
    acc = ctx.ost_acc
    if acc is not None:
        b_i, r_i, s_i = stripes.finish(acc)
        by += b_i
        req += r_i
        sec += s_i
    # Files without FS-level records: spread their POSIX/STDIO counters over
    # the OSTs holding their byte range [0, largest offset touched].
    est_rows = np.flatnonzero(~rec_rows & (stripes.count > 0))
    est_files = mpiio_only = 0
    if len(est_rows):
        rb, wb, rn, wn, rt, wt, extent = (np.zeros(len(stripes.count)) for _ in range(7))
        fs_rows = np.zeros(len(stripes.count), bool)
        # The file system's layers first; then MPI-IO for files whose
        # POSIX record is missing (module off or out of records).
        for layer in (*FS_LAYERS, "MPIIO"):
            c = t.layer(layer)
            if c is None or not len(c):
                continue
            row = stripes.lookup(c.file_id)
            ok = row >= 0
            if layer == "MPIIO":
                ok &= ~fs_rows[np.maximum(row, 0)]
            else:
                fs_rows[row[ok]] = True
            rr = row[ok]
            rb += np.bincount(rr, col(c, f"{layer}_BYTES_READ")[ok], len(rb))
            wb += np.bincount(rr, col(c, f"{layer}_BYTES_WRITTEN")[ok], len(rb))
            rn += np.bincount(rr, col(c, OPS[layer][0])[ok], len(rb))
            wn += np.bincount(rr, col(c, OPS[layer][1])[ok], len(rb))
            rt += np.bincount(rr, col(c, f"{layer}_F_READ_TIME")[ok], len(rb))
            wt += np.bincount(rr, col(c, f"{layer}_F_WRITE_TIME")[ok], len(rb))
            mx = np.maximum(col(c, f"{layer}_MAX_BYTE_READ"),
                            col(c, f"{layer}_MAX_BYTE_WRITTEN"))[ok] + 1  # fmt: skip
            np.maximum.at(extent, rr, mx)
        extent = np.where(extent > 1, extent, np.maximum(rb, wb))
        use = est_rows[(rb + wb)[est_rows] > 0]
        est_files = len(use)
        mpiio_only = int(np.count_nonzero(~fs_rows[use]))
        if est_files:
            share_acc = stripes.new()
            ext = np.maximum(extent[use], 1).astype(np.int64)
            stripes.add(share_acc, 0, use, np.zeros(len(use), np.int64), ext)
            share_b, _, _ = stripes.finish(share_acc)
            frac = share_b[0] / np.maximum(extent, 1)[stripes.flat_row]
            on = isin(stripes.flat_row, use)
            fr = np.where(on, frac, 0.0)
            row = stripes.flat_row
            by[0] += fr * rb[row]
            by[1] += fr * wb[row]
            req[0] += fr * rn[row]
            req[1] += fr * wn[row]
            sec[0] += fr * rt[row]
            sec[1] += fr * wt[row]
    exact = rec_rows[stripes.flat_row]
    nz = np.flatnonzero((by.sum(axis=0) > 0) | (req.sum(axis=0) > 0))
    file_idx = ctx.file_index(stripes.file_id)[stripes.flat_row]
    n_rec = int(rec_rows.sum())
    est_note = (f" ({mpiio_only:,} of them from MPI-IO counters: no POSIX record)"
                if mpiio_only else "")  # fmt: skip
    if n_rec and est_files:
        how = (f"{n_rec:,} file(s) from traced POSIX/STDIO operations, mapped exactly to "
               f"stripes; {est_files:,} file(s) without a trace estimated from counters"
               f"{est_note} "
               "(bytes spread over the OSTs holding the file's byte range)")
    elif n_rec:
        how = ("from traced POSIX/STDIO operations, each byte mapped to its stripe's OST "
               "((offset / stripe size) mod stripe count over the file's OST list)")
    else:
        how = ("estimated from counters: no per-operation trace, so each file's bytes, "
               "requests and read/write time are spread over the OSTs holding its byte range"
               + est_note)
    how += ("; time per OST shares each request's duration out by its bytes on each OST, "
            "so a slow OST stands out even when bytes are even")
    return {
        "how": how,
        "files_exact": n_rec,
        "files_estimated": est_files,
        "lustre_files": len(stripes.count),
        "file": pack(file_idx[nz], "i4"),
        "ost": pack(stripes.flat_ost[nz], "i4"),
        "rb": pack(by[0, nz], "f8"),
        "wb": pack(by[1, nz], "f8"),
        "rr": pack(req[0, nz], "f8"),
        "wr": pack(req[1, nz], "f8"),
        "rt": pack(sec[0, nz], "f8"),
        "wt": pack(sec[1, nz], "f8"),
        "exact": pack(exact[nz], "u1"),
    }

# -- per-file table --------------------------------------------------------


def _file_table(ctx: PageContext) -> dict[str, Any]:
    t = ctx.t
    cols = ("reads", "writes", "bytes_read", "bytes_written", "read_time", "write_time",
            "meta_time")  # fmt: skip
    ids_p, lay_p, ranks_p, shared_p = [], [], [], []
    vals_p: dict[str, list[np.ndarray]] = {k: [] for k in cols}
    counted: set[str] = set()
    for layer in TABLE_LAYERS:
        c = t.layer(layer)
        if c is None or not len(c):
            continue
        counted.add(layer)
        u, inv = np.unique(c.file_id, return_inverse=True)
        n = len(u)
        src = {
            "reads": col(c, OPS[layer][0]),
            "writes": col(c, OPS[layer][1]),
            "bytes_read": col(c, f"{layer}_BYTES_READ"),
            "bytes_written": col(c, f"{layer}_BYTES_WRITTEN"),
            "read_time": col(c, f"{layer}_F_READ_TIME"),
            "write_time": col(c, f"{layer}_F_WRITE_TIME"),
            "meta_time": col(c, f"{layer}_F_META_TIME"),
        }
        for k in cols:
            vals_p[k].append(np.bincount(inv, weights=src[k], minlength=n))
        ids_p.append(u)
        lay_p.append(np.full(n, TABLE_LAYERS.index(layer)))
        ranks_p.append(np.bincount(inv, weights=c.rank >= 0, minlength=n))
        shared_p.append(np.bincount(inv, weights=c.rank < 0, minlength=n) > 0)
    # Layers traced but without counters: their table rows come from the records.
    for lay in range(NL):
        name = RECORD_LAYERS[lay]
        if not ctx.layer_n[lay] or name in counted:
            continue
        ops, byt, busy = (a[:, lay] for a in (ctx.fl_ops, ctx.fl_bytes, ctx.fl_busy))
        keep = ops.sum(axis=1) > 0
        n = int(keep.sum())
        vals_p["reads"].append(ops[keep, 0])
        vals_p["writes"].append(ops[keep, 1])
        vals_p["bytes_read"].append(byt[keep, 0])
        vals_p["bytes_written"].append(byt[keep, 1])
        vals_p["read_time"].append(busy[keep, 0])
        vals_p["write_time"].append(busy[keep, 1])
        vals_p["meta_time"].append(np.full(n, np.nan))
        ids_p.append(ctx.rec_files[keep])
        lay_p.append(np.full(n, TABLE_LAYERS.index(name)))
        ranks_p.append(np.full(n, np.nan))
        shared_p.append(np.zeros(n, bool))
    if not ids_p:
        return {"rows": [], "totals": [], "others": None}
    ids = np.concatenate(ids_p)
    lay = np.concatenate(lay_p)
    vals = {k: np.concatenate(v).astype(np.float64) for k, v in vals_p.items()}
    ranks = np.concatenate(ranks_p)
    shared = np.concatenate(shared_p)
    total_b = vals["bytes_read"] + vals["bytes_written"]
    order = np.lexsort((lay, -(vals["reads"] + vals["writes"]), -total_b))
    top = order[:TABLE_FILES]
    rest = order[TABLE_FILES:]
    fidx = ctx.file_index(ids)
    rows = [
        {
            "file": int(fidx[i]),
            "name": t.name(int(ids[i])),
            "layer": TABLE_LAYERS[int(lay[i])],
            "ranks": None if np.isnan(ranks[i]) else int(ranks[i]),
            "shared": bool(shared[i]),
            **{k: num(vals[k][i]) for k in cols},
        }
        for i in top
    ]
    totals = []
    for li, layer in enumerate(TABLE_LAYERS):
        m = lay == li
        if m.any():
            totals.append({"layer": layer, "files": int(m.sum()),
                           **{k: num(np.nansum(vals[k][m])) for k in cols}})  # fmt: skip
    others = None
    if len(rest):
        others = {"rows": len(rest), **{k: num(np.nansum(vals[k][rest])) for k in cols}}
    return {"rows": rows, "totals": totals, "others": others,
            "source": "counters" if counted else "records"}  # fmt: skip

# -- per rank ------------------------------------------------------------


def _ranks(ctx: PageContext) -> dict[str, Any]:
    t = ctx.t
    nr = ctx.nranks
    k = -(-nr // RANK_BARS)
    out: dict[str, Any] = {"n": nr, "per_bar": k, "counters": {}, "records": {}}
    for layer in TABLE_LAYERS:
        c = t.layer(layer)
        if c is None or not len(c):
            continue
        own = c.rank >= 0
        rk = np.clip(c.rank[own], 0, nr - 1)

        def per(v: np.ndarray, own: np.ndarray = own, rk: np.ndarray = rk) -> dict:
            return pack(group(np.bincount(rk, weights=v[own], minlength=nr), k), "f8")

        rb, wb = col(c, f"{layer}_BYTES_READ"), col(c, f"{layer}_BYTES_WRITTEN")
        rt, wt = col(c, f"{layer}_F_READ_TIME"), col(c, f"{layer}_F_WRITE_TIME")
        mt = col(c, f"{layer}_F_META_TIME")
        ops = col(c, OPS[layer][0]) + col(c, OPS[layer][1])
        out["counters"][layer] = {
            "rb": per(rb), "wb": per(wb), "rt": per(rt), "wt": per(wt), "mt": per(mt),
            "ops": per(ops),
            "shared_files": int(unique(c.file_id[~own]).shape[0]),
            "shared_bytes": float((rb + wb)[~own].sum()),
            "shared_ops": float(ops[~own].sum()),
            "shared_time": float((rt + wt + mt)[~own].sum()),
            "owned_bytes": float((rb + wb)[own].sum()),
        }  # fmt: skip
    rr = ctx.rank_rec
    if rr is not None:
        shape = (NL, 2, nr)
        ops, byt, busy = (rr[x].reshape(shape) for x in ("ops", "bytes", "busy"))
        for lay in range(NL):
            if not ctx.layer_n[lay]:
                continue
            out["records"][RECORD_LAYERS[lay]] = {
                "rb": pack(group(byt[lay, 0], k), "f8"),
                "wb": pack(group(byt[lay, 1], k), "f8"),
                "rt": pack(group(busy[lay, 0], k), "f8"),
                "wt": pack(group(busy[lay, 1], k), "f8"),
                "rn": pack(group(ops[lay, 0], k), "f8"),
                "wn": pack(group(ops[lay, 1], k), "f8"),
            }
    return out

# -- summary extras ------------------------------------------------------
