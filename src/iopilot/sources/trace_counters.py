"""The counters of an iopilot trace's summaries -> one Counters table per layer,
in Darshan's names and with Darshan's reduction: rows of one (file, rank)
merged, files every rank touched reduced to one rank ``-1`` row, the most
common access sizes and strides combined as Darshan combines them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..model import Counters
from ..vocabulary import COUNTERS, FCOUNTERS, FS_LAYERS, MAX_COUNTERS, MODULE, RUNTIME_LAYERS
from .darshan_library import counter_names
from .trace_procs import Proc

# Runtime layer names -> model layers with counters (the runtime uses the model's names).
LAYER_PREFIX = {n: n for n in RUNTIME_LAYERS}
# Counters combined with max (not sum) when rows of one (file, rank) merge.
_MAX_SUFFIXES = MAX_COUNTERS


def _layer_spec(procs: list[Proc]) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Per layer: Darshan's counter names, then those the runtime keeps and
    Darshan has not (e.g. MPIIO_SEQ_WRITES, STDIO_CONSEC_READS), so loading
    drops nothing the trace holds."""
    extra: dict[str, tuple[dict[str, None], dict[str, None]]] = {}
    for p in procs:
        m = p.summary
        if not m:
            continue
        for layer_idx, _fid, ints, floats in m["counters"]:
            layer = LAYER_PREFIX.get(m["layers"][layer_idx])
            if layer is None:
                continue
            ei, ef = extra.setdefault(layer, ({}, {}))
            for k in ints:
                ei[_darshan_name(layer, _h5f_name(layer, m["counter_names"][k]))] = None
            for k in floats:
                ef[f"{layer}_{m['fcounter_names'][k]}"] = None
    spec = {}
    for layer, (ei, ef) in extra.items():
        prefix = MODULE[layer].darshan_table
        # a layer Darshan has no module for (FORTRAN): every runtime counter, so
        # each of its columns exists whatever the trace holds
        inames, fnames = ((counter_names(prefix), counter_names(prefix + "_f")) if prefix
                          else (tuple(f"{layer}_{n}" for n in COUNTERS),
                                tuple(f"{layer}_{n}" for n in FCOUNTERS)))  # fmt: skip
        spec[layer] = (tuple(inames) + tuple(n for n in ei if n not in inames),
                       tuple(fnames) + tuple(n for n in ef if n not in fnames))  # fmt: skip
    return spec


def _h5f_name(layer: str, raw: str) -> str:
    return "OPENS" if layer == "H5F" and raw == "CREATES" else raw  # Darshan counts creates


def layer_counters(procs: list[Proc], job_start: float) -> dict[str, Counters]:
    """One Counters table per layer, in Darshan's names, Darshan's reduction."""
    rows: dict[str, dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]] = {}
    spec = _layer_spec(procs)
    for p in procs:
        m = p.summary
        if not m:
            continue
        layers = m["layers"]
        cnames, fnames = m["counter_names"], m["fcounter_names"]
        shift = p.t0 - job_start
        for layer_idx, fid, ints, floats in m["counters"]:
            layer = LAYER_PREFIX.get(layers[layer_idx])
            if layer is None:
                continue
            inames, fnames_d = spec[layer]
            iv = np.zeros(len(inames), np.int64)
            fv = np.zeros(len(fnames_d), np.float64)
            for k, v in ints.items():
                name = _darshan_name(layer, _h5f_name(layer, cnames[k]))
                if name in inames:
                    iv[inames.index(name)] += v
            for k, v in floats.items():
                raw = fnames[k]
                name = f"{layer}_{raw}"
                if name in fnames_d:
                    fv[fnames_d.index(name)] = v + shift if raw.endswith("TIMESTAMP") else v
            key = (fid, p.rank)
            table = rows.setdefault(layer, {})
            if key in table:
                table[key] = _merge(layer, inames, fnames_d, table[key], (iv, fv))
            else:
                table[key] = (iv, fv)
    nranks = len({p.rank for p in procs})
    out = {}
    for layer, table in rows.items():
        inames, fnames_d = spec[layer]
        keys = list(table)
        c = Counters(
            layer,
            np.array([k[0] for k in keys], np.uint64),
            np.array([k[1] for k in keys], np.int64),
            np.stack([table[k][0] for k in keys]),
            np.stack([table[k][1] for k in keys]),
            inames,
            fnames_d,
            np.zeros(len(keys), np.uint64) if MODULE[layer].parent else None,
        )
        out[layer] = _reduce_shared(c, nranks) if nranks > 1 else c
    return out


def summary_totals(p: Proc) -> None:
    """File-system bytes and mmap calls from the counters of a summary."""
    s = p.summary
    if not s:
        return
    idx = {n: i for i, n in enumerate(s["counter_names"])}
    moved = [idx[n] for n in ("BYTES_READ", "BYTES_WRITTEN") if n in idx]
    mm = idx.get("MMAPS")
    p.fs_bytes = p.mmaps = 0
    for layer, _fid, ints, _floats in s["counters"]:
        if s["layers"][layer] in FS_LAYERS:
            p.fs_bytes += sum(ints.get(i, 0) for i in moved)
            p.mmaps += ints.get(mm, 0) if mm is not None else 0


def _darshan_name(layer: str, raw: str) -> str:
    return MODULE[layer].darshan_name(raw)


def _common_values(names: Sequence[str], rows: np.ndarray, out: np.ndarray) -> None:
    """Darshan's four most common access sizes and strides of several rows
    combined as Darshan combines ranks: counts of equal values add up, then
    the four highest counts (the larger value first on a tie) are kept.
    HDF5 datasets' accesses are tuples (size and shape): see _access_tuples."""
    kinds = ("STRIDE",) if _access_tuples(names, rows, out) else ("ACCESS", "STRIDE")
    for kind in kinds:
        vcols = [i for i, n in enumerate(names) for k in range(1, 5)
                 if n.endswith(f"_{kind}{k}_{kind}")]  # fmt: skip
        ccols = [i for i, n in enumerate(names) for k in range(1, 5)
                 if n.endswith(f"_{kind}{k}_COUNT")]  # fmt: skip
        if len(vcols) != 4 or len(ccols) != 4:
            continue
        totals: dict[int, int] = {}
        for v, n in zip(rows[:, vcols].ravel(), rows[:, ccols].ravel(), strict=True):
            if v and n:
                totals[int(v)] = totals.get(int(v), 0) + int(n)
        top = sorted(totals.items(), key=lambda vn: (-vn[1], -vn[0]))[:4]
        top += [(0, 0)] * (4 - len(top))
        out[vcols] = [v for v, _ in top]
        out[ccols] = [n for _, n in top]


_TUPLE_PARTS = ("ACCESS", *(f"{kind}_D{d}" for kind in ("LENGTH", "STRIDE") for d in range(1, 6)))
_Entry = tuple[tuple[int, ...], int]  # (size, lengths D1..D5, strides D1..D5), count


def _tuple_update(top: list[_Entry], t: tuple[int, ...], count: int) -> list[_Entry]:
    """Darshan's DARSHAN_UPDATE_COMMON_VAL_COUNTERS: ``t`` goes below the
    entries with a higher count, or the same count and a larger size, and
    above the rest; a tuple of size 0 is never listed."""
    if t[0] == 0:
        return top
    i = 0
    while i < 4 and (top[i][1] > count or (top[i][1] == count and top[i][0][0] > t[0])):
        i += 1
    if i == 4:
        return top
    return (top[:i] + [(t, count)] + [e for e in top[i:] if e[0] != t])[:4]


def _access_tuples(names: Sequence[str], rows: np.ndarray, out: np.ndarray) -> bool:
    """HDF5 datasets (H5D_ACCESSk_LENGTH_Dd present): the four most common
    access tuples of ``rows`` (in rank order) combined as Darshan's reduction
    does, folding rank by rank from the last: equal tuples add their counts
    into the lower rank's entry, then that rank's four tuples and the
    other's are merged in turn.  False when ``names`` has no tuples."""
    where = {n: i for i, n in enumerate(names)}
    prefix = next((n[: -len("_ACCESS1_LENGTH_D1")] for n in names
                   if n.endswith("_ACCESS1_LENGTH_D1")), None)  # fmt: skip
    if prefix is None:
        return False
    vcols = [[where[f"{prefix}_ACCESS{k}_{part}"] for part in _TUPLE_PARTS] for k in range(1, 5)]
    ccols = [where[f"{prefix}_ACCESS{k}_COUNT"] for k in range(1, 5)]

    def entries(row: np.ndarray) -> list[_Entry]:
        return [(tuple(int(x) for x in row[v]), int(row[c]))
                for v, c in zip(vcols, ccols, strict=True)]  # fmt: skip

    empty: _Entry = ((0,) * len(_TUPLE_PARTS), 0)
    acc = entries(rows[-1])
    for row in rows[-2::-1]:
        mine = entries(row)
        for j, (t, n) in enumerate(mine):  # equal tuples: one entry, counts added
            for k, (u, m) in enumerate(acc):
                if u == t:
                    mine[j] = (t, n + m)
                    acc[k] = empty
                    n += m
        top = [empty] * 4
        for t, n in mine + acc:
            top = _tuple_update(top, t, n)
        acc = top
    for (t, n), v, c in zip(acc, vcols, ccols, strict=True):
        out[v] = t
        out[c] = n
    return True


def _slowest_sizes(inames: Sequence[str], fnames: Sequence[str], ints: np.ndarray,
                   floats: np.ndarray, out: np.ndarray) -> None:
    """MAX_{READ,WRITE}_TIME_SIZE of combined rows: the size of the slowest
    operation, i.e. that of the row holding the largest F_MAX_*_TIME."""
    for rw in ("READ", "WRITE"):
        size = [i for i, n in enumerate(inames) if n.endswith(f"_MAX_{rw}_TIME_SIZE")]
        time = [i for i, n in enumerate(fnames) if n.endswith(f"_F_MAX_{rw}_TIME")]
        if size and time:
            out[size[0]] = ints[int(np.argmax(floats[:, time[0]])), size[0]]


def _merge(layer, inames, fnames, a, b):
    """Two processes with one rank (a forked child) on one file: combine."""
    iv = a[0] + b[0]
    fv = a[1] + b[1]
    _common_values(inames, np.stack([a[0], b[0]]), iv)
    _slowest_sizes(inames, fnames, np.stack([a[0], b[0]]), np.stack([a[1], b[1]]), iv)
    for i, n in enumerate(inames):
        if n.endswith(_MAX_SUFFIXES):
            iv[i] = max(a[0][i], b[0][i])
    for i, n in enumerate(fnames):
        if n.endswith(_MAX_SUFFIXES):
            fv[i] = max(a[1][i], b[1][i])
        elif n.endswith("START_TIMESTAMP"):
            nz = [x for x in (a[1][i], b[1][i]) if x > 0]
            fv[i] = min(nz) if nz else 0.0
    return iv, fv


def _reduce_shared(c: Counters, nranks: int) -> Counters:
    """Files every rank touched become one rank -1 row with fastest/slowest rank, as in Darshan."""
    ids, inv, counts = np.unique(c.file_id, return_inverse=True, return_counts=True)
    shared = counts >= nranks
    if not shared.any():
        return c
    keep = ~shared[inv]
    red_ids = ids[shared]
    red_rows = []
    p = c.layer
    for fid in red_ids:
        m = c.file_id == fid
        sub = c.select(m)
        iv = sub.ints.sum(axis=0)
        fv = sub.floats.sum(axis=0)
        _common_values(sub.int_names, sub.ints[np.argsort(sub.rank, kind="stable")], iv)
        _slowest_sizes(sub.int_names, sub.float_names, sub.ints, sub.floats, iv)
        for i, n in enumerate(sub.int_names):
            if n.endswith(_MAX_SUFFIXES):
                iv[i] = sub.ints[:, i].max()
        for i, n in enumerate(sub.float_names):
            if n.endswith(_MAX_SUFFIXES):
                fv[i] = sub.floats[:, i].max()
            elif n.endswith("START_TIMESTAMP"):
                col = sub.floats[:, i]
                fv[i] = col[col > 0].min() if (col > 0).any() else 0.0
        moved = np.zeros(len(sub), np.int64)
        for n in (f"{p}_BYTES_READ", f"{p}_BYTES_WRITTEN"):
            if sub.has(n):
                moved += sub[n]
        busy = np.zeros(len(sub), np.float64)
        for n in (f"{p}_F_READ_TIME", f"{p}_F_WRITE_TIME", f"{p}_F_META_TIME"):
            if sub.has(n):
                busy += sub[n]
        fast, slow = int(np.argmin(busy)), int(np.argmax(busy))
        for name, val in ((f"{p}_FASTEST_RANK", sub.rank[fast]),
                          (f"{p}_SLOWEST_RANK", sub.rank[slow]),
                          (f"{p}_FASTEST_RANK_BYTES", moved[fast]),
                          (f"{p}_SLOWEST_RANK_BYTES", moved[slow])):  # fmt: skip
            if sub.has(name):
                iv[sub.int_names.index(name)] = val
        for name, val in ((f"{p}_F_FASTEST_RANK_TIME", busy[fast]),
                          (f"{p}_F_SLOWEST_RANK_TIME", busy[slow]),
                          (f"{p}_F_VARIANCE_RANK_TIME", busy.var()),
                          (f"{p}_F_VARIANCE_RANK_BYTES", moved.var())):  # fmt: skip
            if sub.has(name):
                fv[sub.float_names.index(name)] = val
        red_rows.append((fid, iv, fv))
    kept = c.select(keep)
    return Counters(
        c.layer,
        np.concatenate([kept.file_id, np.array([r[0] for r in red_rows], np.uint64)]),
        np.concatenate([kept.rank, np.full(len(red_rows), -1, np.int64)]),
        np.vstack([kept.ints, np.stack([r[1] for r in red_rows])]),
        np.vstack([kept.floats, np.stack([r[2] for r in red_rows])]),
        c.int_names,
        c.float_names,
        None if c.parent_id is None else np.zeros(len(kept) + len(red_rows), np.uint64),
    )
