"""iopilot traces (a directory written by ``libiopilot.so``) -> :class:`~iopilot.model.Trace`.

The directory holds, per traced process, ``p<host>-<pid>.json`` (metadata,
names and counters) and ``p<host>-<pid>.rec`` (fixed-size binary records),
plus ``job.json`` written by ``iopilot run``.  See ``docs/trace-format.md``.

Counters are renamed to Darshan's vocabulary (``READS`` of the MPI-IO layer
becomes ``MPIIO_...``), and files that every rank touched are reduced to one
rank ``-1`` row as Darshan does, so every check reads both sources alike.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..model import RECORD_LAYERS, Counters, Job, ModuleInfo, Records, Trace
from .darshan_log import _counter_names

FORMAT_VERSION = 1
MAGIC = 0x31505249504F4921
HEADER = np.dtype(
    [("magic", "<u8"), ("version", "<u4"), ("record_size", "<u4"), ("rank", "<i8"),
     ("pid", "<i8"), ("t0", "<f8"), ("reserved", "<u8", (3,))]
)  # fmt: skip
RECORD = np.dtype(
    [("start", "<f8"), ("end", "<f8"), ("offset", "<i8"), ("length", "<i8"),
     ("file_id", "<u8"), ("thread", "<u4"), ("layer", "u1"), ("op", "u1"), ("flags", "<u2")]
)  # fmt: skip
# Runtime layer names -> model layers with counters (H5F keeps its name).
LAYER_PREFIX = {"POSIX": "POSIX", "STDIO": "STDIO", "MPIIO": "MPIIO", "H5F": "H5F", "H5D": "H5D"}
_DARSHAN_PREFIX = {"MPIIO": "mpiio", "H5F": "h5f", "H5D": "h5d"}
# Counters combined with max (not sum) when rows of one (file, rank) merge.
_MAX_SUFFIXES = ("MAX_BYTE_READ", "MAX_BYTE_WRITTEN", "ALIGNMENT", "MODE", "USE_MPIIO",
                 "USE_MPIIO_COLLECTIVE", "DATASPACE_NDIMS", "DATASPACE_NPOINTS",
                 "DATATYPE_SIZE", "CHUNK_SIZE_D1", "CHUNK_SIZE_D2", "CHUNK_SIZE_D3",
                 "CHUNK_SIZE_D4", "CHUNK_SIZE_D5", "F_MAX_READ_TIME", "F_MAX_WRITE_TIME",
                 "END_TIMESTAMP")  # fmt: skip


def is_trace_dir(path: str | Path) -> bool:
    p = Path(path)
    return p.is_dir() and (
        (p / "job.json").exists() or any(p.glob("p*.json")) or any(p.glob("p*.rec"))
    )


def read_trace(path: str) -> Trace:
    """Load a trace directory; raise InputError with the reason if it is not one."""
    root = Path(path)
    if not root.is_dir():
        raise InputError(path, "not a trace directory")
    procs = sorted(root.glob("p*.json"))
    job_meta = _read_json(root / "job.json") if (root / "job.json").exists() else {}
    if not procs:
        orphans = list(root.glob("p*.rec"))
        why = (
            f"holds {len(orphans)} record file(s) but no process summary: the traced "
            "processes did not exit normally"
            if orphans
            else "holds no iopilot trace (no p*.json files)"
        )
        raise InputError(path, why)
    warnings: list[str] = []
    metas = []
    for p in procs:
        m = _read_json(p)
        if m.get("format") != "iopilot-process":
            raise InputError(str(p), "not an iopilot process summary")
        if int(m.get("version", 0)) > FORMAT_VERSION:
            raise InputError(
                str(p), f"written by a newer iopilot (format {m['version']}); upgrade iopilot"
            )
        m["_path"] = p
        metas.append(m)
    seen_recs = {m["_path"].with_suffix(".rec") for m in metas}
    lost = [p for p in root.glob("p*.rec") if p not in seen_recs]
    if lost:
        warnings.append(
            f"{len(lost)} process(es) left records but no summary (killed or crashed): "
            "their counters are missing"
        )
    job_start = min(float(m["t0"]) for m in metas)
    names: dict[int, str] = {}
    for m in metas:
        names.update({int(k): v for k, v in m.get("names", {}).items()})
    counters = _counters(metas, job_start)
    records = _records(metas, job_start, warnings)
    for m in metas:
        if m.get("records_dropped"):
            warnings.append(
                f"rank {m['rank']} (pid {m['pid']}) kept {m['records']:,} operation records "
                f"and dropped {m['records_dropped']:,} beyond its limit of "
                f"{m['max_records']:,}: per-operation views see part of the run "
                "(counters are exact)"
            )
        if m.get("stats_missing"):
            warnings.append(
                f"rank {m['rank']} (pid {m['pid']}) ran out of table memory for "
                f"{m['stats_missing']} file(s): their counters are missing"
            )
    ranks = {int(m["rank"]) for m in metas}
    nprocs = max([int(m.get("nprocs", 1)) for m in metas] + [len(ranks)])
    first = min(metas, key=lambda m: (int(m["rank"]), float(m["t0"])))
    end = max(float(m["t0"]) + float(m["t_end"]) for m in metas)
    hints: dict[str, str] = {}
    for m in metas:
        for _fid, text in m.get("notes", []):
            kind, key, value = [*text.split("\t"), "", ""][:3]
            if kind == "mpiio_hint":
                hints[key] = value
    job = Job(
        nprocs=nprocs,
        start=float(job_meta.get("start", job_start)),
        end=float(job_meta.get("end", end)),
        runtime=float(job_meta.get("end", end)) - float(job_meta.get("start", job_start)),
        executable=" ".join(job_meta.get("command") or first.get("cmdline") or [first["exe"]]),
        metadata={k: str(v) for k, v in first.get("env", {}).items()},
        hints=hints or None,
        mounts=[tuple(x) for x in job_meta.get("mounts", [])],
        hosts={int(m["rank"]): str(m["host"]) for m in metas},
        format=f"iopilot {FORMAT_VERSION}",
        writer=f"libiopilot ({len(metas)} process(es))",
    )
    modules = [ModuleInfo(layer, rows=len(c)) for layer, c in counters.items()]
    if len(records):
        modules.append(ModuleInfo("RECORDS", rows=len(records)))
    return Trace(
        source=path,
        job=job,
        names=names,
        counters=counters,
        records=records,
        modules=modules,
        warnings=warnings,
    )


def _read_json(p: Path) -> dict[str, Any]:
    try:
        return json.loads(p.read_text())
    except OSError as e:
        raise InputError(str(p), f"cannot read: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(str(p), f"damaged process summary ({e})") from None


def _counters(metas: list[dict[str, Any]], job_start: float) -> dict[str, Counters]:
    """One Counters table per layer, in Darshan's names, Darshan's reduction."""
    rows: dict[str, dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]] = {}
    spec: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for m in metas:
        layers = m["layers"]
        cnames, fnames = m["counter_names"], m["fcounter_names"]
        rank = int(m["rank"])
        shift = float(m["t0"]) - job_start
        for layer_idx, fid, ints, floats in m.get("counters", []):
            layer = LAYER_PREFIX.get(layers[layer_idx])
            if layer is None:
                continue
            if layer not in spec:
                prefix = _DARSHAN_PREFIX.get(layer, layer.lower())
                spec[layer] = (_counter_names(prefix), _counter_names(prefix + "_f"))
            inames, fnames_d = spec[layer]
            iv = np.zeros(len(inames), np.int64)
            fv = np.zeros(len(fnames_d), np.float64)
            for k, v in ints.items():
                raw = cnames[int(k)]
                if layer == "H5F" and raw == "CREATES":
                    raw = "OPENS"  # Darshan counts H5Fcreate among the opens
                name = _darshan_name(layer, raw)
                if name in inames:
                    iv[inames.index(name)] += v
            for k, v in floats.items():
                raw = fnames[int(k)]
                name = f"{layer}_{raw}"
                if name in fnames_d:
                    fv[fnames_d.index(name)] = v + shift if raw.endswith("TIMESTAMP") else v
            key = (int(fid), rank)
            table = rows.setdefault(layer, {})
            if key in table:
                table[key] = _merge(layer, inames, fnames_d, table[key], (iv, fv))
            else:
                table[key] = (iv, fv)
    nranks = len({int(m["rank"]) for m in metas})
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
            np.zeros(len(keys), np.uint64) if layer in ("H5D", "PNETCDF_VAR") else None,
        )
        out[layer] = _reduce_shared(c, nranks) if nranks > 1 else c
    return out


def _darshan_name(layer: str, raw: str) -> str:
    if layer in ("MPIIO", "H5D") and raw.startswith("SIZE_"):
        raw = raw.replace("SIZE_READ_", "SIZE_READ_AGG_").replace("SIZE_WRITE_", "SIZE_WRITE_AGG_")
    return f"{layer}_{raw}"


def _merge(layer, inames, fnames, a, b):
    """Two processes with one rank (a forked child) on one file: combine."""
    iv = a[0] + b[0]
    fv = a[1] + b[1]
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


def _records(metas: list[dict[str, Any]], job_start: float, warnings: list[str]) -> Records:
    """Data operations of all processes, times on the job's clock."""
    parts = []
    for m in metas:
        rec = m["_path"].with_suffix(".rec")
        if not rec.exists():
            continue
        raw = rec.read_bytes()
        if len(raw) < HEADER.itemsize:
            warnings.append(f"{rec.name}: record file ends inside its header")
            continue
        head = np.frombuffer(raw, HEADER, count=1)[0]
        if int(head["magic"]) != MAGIC or int(head["record_size"]) != RECORD.itemsize:
            raise InputError(str(rec), "not an iopilot record file (bad magic or record size)")
        body = raw[HEADER.itemsize :]
        whole = len(body) // RECORD.itemsize
        if whole * RECORD.itemsize != len(body):
            warnings.append(f"{rec.name}: the last record is cut short and was dropped")
        r = np.frombuffer(body, RECORD, count=whole)
        layer_names = m["layers"]
        model_layer = np.full(len(layer_names), 255, np.uint8)
        for i, name in enumerate(layer_names):
            if name in RECORD_LAYERS:
                model_layer[i] = RECORD_LAYERS.index(name)
        keep = (r["op"] <= 1) & (model_layer[r["layer"]] != 255)
        r = r[keep]
        shift = float(m["t0"]) - job_start
        parts.append(
            Records(
                rank=np.full(len(r), int(m["rank"]), np.int32),
                layer=model_layer[r["layer"]],
                op=r["op"].astype(np.uint8),
                file_id=r["file_id"].copy(),
                offset=r["offset"].copy(),
                length=r["length"].copy(),
                start=r["start"] + shift,
                end=r["end"] + shift,
            )
        )
    return Records.concat(parts)
