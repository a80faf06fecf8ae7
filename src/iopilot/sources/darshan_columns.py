"""An open Darshan log read through the library into the model: the job,
the names, one Counters table per module (one ``np.frombuffer`` per
module, each record copied as raw bytes), DXT segments as records, Lustre
layouts."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model import (
    OP_READ,
    OP_WRITE,
    RECORD_LAYERS,
    Counters,
    Job,
    ModuleInfo,
    Records,
    Striping,
    Trace,
    display,
)
from ..model.command import command_language
from ..vocabulary import DIRECTIONS, MODULE
from .darshan_header import COUNTER_MODULES, DXT_MODULES, left_out
from .darshan_library import counter_names
from .darshan_profiles import RegionError


def read_open_log(ffi: Any, lib: Any, handle: Any, path: str, version: str,
                   with_records: bool, skip: dict[str, str]) -> Trace:  # fmt: skip
    job = _read_job(ffi, lib, handle, version)
    names = _read_names(ffi, lib, handle)
    modules: list[ModuleInfo] = []
    counters: dict[str, Counters] = {}
    records: list[Records] = []
    warnings: list[str] = []
    lustre: Striping | None = None

    mods = ffi.new("struct darshan_mod_info **")
    cnt = ffi.new("int *")
    lib.darshan_log_get_modules(handle, mods, cnt)
    listed = [
        (_text(ffi, mods[0][i].name) or f"module {int(mods[0][i].idx)}", int(mods[0][i].idx),
         bool(mods[0][i].partial_flag))
        for i in range(cnt[0])
    ]  # fmt: skip
    lib.darshan_free(mods[0])

    for name, idx, partial in listed:
        info = ModuleInfo(name, partial=partial)
        modules.append(info)
        if name in skip:
            info.read, info.partial = False, True
            warnings.append(left_out(name, skip[name]))
            continue
        try:
            if name in COUNTER_MODULES:
                layer, struct_name = COUNTER_MODULES[name]
                table = _read_counters(ffi, lib, handle, idx, layer, struct_name)
                warnings.extend(_clean_counters(table, names, job.nprocs))
                counters[layer] = table
                info.rows = len(table)
            elif name in DXT_MODULES and with_records:
                recs, hosts = _read_dxt(ffi, lib, handle, idx, DXT_MODULES[name])
                records.append(recs)
                job.hosts.update(hosts)
                info.rows = len(recs)
            elif name == "LUSTRE":
                lustre = _read_lustre(ffi, lib, handle, idx)
                info.rows = len(lustre)
            else:
                # not used by any analysis yet, or read from the bytes (_add_profiles)
                info.read = False
        except RegionError as e:
            info.partial = True
            warnings.append(f"{name} data is damaged and was read only in part ({e})")
            continue
        if info.partial and name not in ("HEATMAP",):
            warnings.append(
                f"{name} is partial: the Darshan runtime ran out of memory for its records, "
                "so figures that depend on it are lower bounds"
            )
    trace = Trace(
        source=path,
        job=job,
        names=names,
        counters=counters,
        records=Records.concat(records),
        lustre=lustre,
        modules=modules,
        warnings=warnings,
    )
    _cross_check_dxt(trace)
    return trace


def _read_job(ffi: Any, lib: Any, handle: Any, version: str) -> Job:
    jobrec = ffi.new("struct darshan_job *")
    lib.darshan_log_get_job(handle, jobrec)
    runtime = ffi.new("double *")
    lib.darshan_log_get_job_runtime(handle, jobrec[0], runtime)
    meta: dict[str, str] = {}
    for line in _text(ffi, jobrec[0].metadata).split("\n"):
        if "=" in line:
            k, v = line.split("=", 1)
            meta[k] = v
    exe = ffi.new("char[]", 4096)
    lib.darshan_log_get_exe(handle, exe)
    mnts = ffi.new("struct darshan_mnt_info **")
    n = ffi.new("int *")
    lib.darshan_log_get_mounts(handle, mnts, n)
    mounts = [(_text(ffi, mnts[0][i].mnt_path), _text(ffi, mnts[0][i].mnt_type))
              for i in range(n[0])]  # fmt: skip
    if n[0]:
        lib.darshan_free(mnts[0])
    j = jobrec[0]
    return Job(
        nprocs=int(j.nprocs),
        jobid=int(j.jobid),
        uid=int(j.uid),
        start=j.start_time_sec + j.start_time_nsec * 1e-9,
        end=j.end_time_sec + j.end_time_nsec * 1e-9,
        runtime=float(runtime[0]),
        executable=_text(ffi, exe),
        # the log names the command line only: Python or unknown
        language=command_language(_text(ffi, exe)),
        metadata=meta,
        # ``h=`` holds the hints Darshan used to write this log file
        # (DARSHAN_LOGHINTS), not the application's: it stays in metadata only.
        hints=None,
        mounts=mounts,
        format=f"darshan {version}",
        writer=f"darshan-runtime {meta['lib_ver']}" if "lib_ver" in meta else "",
    )


def _text(ffi: Any, ptr: Any) -> str:
    """A C string from the log; damaged bytes become U+FFFD, NULL becomes ""."""
    if ptr == ffi.NULL:
        return ""
    return ffi.string(ptr).decode("utf-8", "replace")


def parse_hints(raw: str | None) -> dict[str, str] | None:
    """MPI-IO hints written as ``k=v;k=v`` (Darshan's ``h=`` field).

    Logs written without hints say ``no`` or nothing at all: that is
    "unknown", never an error.
    """
    if not raw or raw.strip().lower() in ("no", "none"):
        return None
    hints: dict[str, str] = {}
    for item in raw.split(";"):
        if "=" in item:
            k, v = item.split("=", 1)
            hints[k.strip()] = v.strip()
    return hints or None


def _read_names(ffi: Any, lib: Any, handle: Any) -> dict[int, str]:
    nrecs = ffi.new("struct darshan_name_record **")
    cnt = ffi.new("int *")
    lib.darshan_log_get_name_records(handle, nrecs, cnt)
    names = {}
    for i in range(cnt[0]):
        names[int(nrecs[0][i].id)] = _text(ffi, nrecs[0][i].name)
        lib.darshan_free(nrecs[0][i].name)
    if cnt[0]:
        lib.darshan_free(nrecs[0])
    return names


def _records(ffi: Any, lib: Any, handle: Any, idx: int):
    """Yield the raw record buffers of one module, freeing each after use."""
    buf = ffi.new("void **")
    while True:
        r = lib.darshan_log_get_record(handle, idx, buf)
        if r == 0:
            return
        if r < 0:
            raise RegionError("the library could not decode a record")
        try:
            yield buf[0]
        finally:
            # The library fills *buf only when it is NULL: never hand it a freed pointer.
            lib.darshan_free(buf[0])
            buf[0] = ffi.NULL


def _read_counters(ffi: Any, lib: Any, handle: Any, idx: int, layer: str,
                   struct_name: str) -> Counters:  # fmt: skip
    prefix = MODULE[layer].darshan_table
    int_names, float_names = counter_names(prefix), counter_names(prefix + "_f")
    ctype = f"struct {struct_name} *"
    size = ffi.sizeof(f"struct {struct_name}")
    has_parent = MODULE[layer].parent
    dtype = np.dtype(
        [("id", "<u8"), ("rank", "<i8")]
        + ([("parent", "<u8")] if has_parent else [])
        + [("ints", "<i8", (len(int_names),)), ("floats", "<f8", (len(float_names),))]
    )
    # Check our view of the C layout once, so a library upgrade fails loudly.
    probe = ffi.new(ctype)
    if ffi.offsetof(f"struct {struct_name}", "fcounters") != dtype.fields["floats"][1]:
        raise RuntimeError(f"unexpected layout of struct {struct_name}")
    del probe
    raw = bytearray()
    for rec in _records(ffi, lib, handle, idx):
        raw += ffi.buffer(rec, size)[: dtype.itemsize]
    arr = np.frombuffer(bytes(raw), dtype=dtype) if raw else np.zeros(0, dtype)
    return Counters(
        layer=layer,
        file_id=arr["id"].copy(),
        rank=arr["rank"].copy(),
        ints=arr["ints"].reshape(len(arr), len(int_names)).copy(),
        floats=arr["floats"].reshape(len(arr), len(float_names)).copy(),
        int_names=int_names,
        float_names=float_names,
        parent_id=arr["parent"].copy() if has_parent else None,
    )


# Integer counters that hold record ids (hashes), where any sign is valid.
_ID_COUNTERS = ("_RENAMED_FROM",)
_TINY = np.finfo(np.float64).tiny


def _clean_counters(table: Counters, names: dict[int, str], nprocs: int) -> list[str]:
    """Bad counter values -> one warning per counter; the values become 0.

    Darshan writes -1 where a counter is not monitored or did not exist in
    the log's format (MMAPS, DUPS, FDOPENS ... and -N in records reduced over
    N ranks; timestamps of old formats): those stay as they are, "unknown",
    never an error.  Other negative integers, and negative, infinite, NaN or
    denormal times (seen in real logs: clock steps, uninitialised memory) are
    set to 0 so checks sum only what was measured.
    """
    out: list[str] = []
    n = len(table)
    if not n:
        return out
    ints_ok = [not name.endswith(_ID_COUNTERS) for name in table.int_names]
    ints = table.ints[:, ints_ok]
    # -1 per rank the record covers: down to -nprocs in a record shared by
    # all ranks (rank -1), which sums the ranks' -1.
    floor = np.where(table.rank < 0, -max(nprocs, 1), -1)[:, None]
    bad_i = ints < floor
    f = table.floats
    with np.errstate(invalid="ignore"):
        bad_f = ~np.isfinite(f) | ((f < 0) & (f != -1)) | ((f != 0) & (np.abs(f) < _TINY))
    cols = np.flatnonzero(ints_ok)
    for kind, bad, values, col_names in (
        ("int", bad_i, ints, [table.int_names[c] for c in cols]),
        ("float", bad_f, f, table.float_names),
    ):
        if not bad.any():
            continue
        for j in np.flatnonzero(bad.any(axis=0)):
            rows = np.flatnonzero(bad[:, j])
            r = rows[0]
            what = f"{values[r, j]:.6g}" if kind == "float" else str(int(values[r, j]))
            path = names.get(int(table.file_id[r]), f"<file {int(table.file_id[r]):#x}>")
            more = f" and {len(rows) - 1} more record(s)" if len(rows) > 1 else ""
            out.append(f"{col_names[j]} has an impossible value ({what} in the record of "
                       f"{path}, rank {int(table.rank[r])}{more}): set to 0, the checks "
                       "ignore it")  # fmt: skip
            if kind == "int":
                table.ints[rows, cols[j]] = 0
            else:
                table.floats[rows, j] = 0.0
    return out


_SEGMENT = np.dtype([("offset", "<i8"), ("length", "<i8"), ("start", "<f8"), ("end", "<f8")])


def _read_dxt(ffi: Any, lib: Any, handle: Any, idx: int,
              layer: str) -> tuple[Records, dict[int, str]]:  # fmt: skip
    head_size = ffi.sizeof("struct dxt_file_record")
    seg_bytes = bytearray()
    ids: list[int] = []
    ranks: list[int] = []
    writes: list[int] = []
    reads: list[int] = []
    hosts: dict[int, str] = {}
    for rec in _records(ffi, lib, handle, idx):
        head = ffi.cast("struct dxt_file_record *", rec)
        w, r = int(head.write_count), int(head.read_count)
        rank = int(head.base_rec.rank)
        if w < 0 or r < 0 or not -1 <= rank < 2**31:
            # the rest of the region is no better: keep the counters, drop DXT
            raise RegionError(f"a record has rank {rank}, {w} writes and {r} reads")
        ids.append(int(head.base_rec.id))
        ranks.append(rank)
        writes.append(w)
        reads.append(r)
        if rank not in hosts:
            hosts[rank] = ffi.string(head.hostname).decode("utf-8", "replace")
        if w + r:
            seg_bytes += ffi.buffer(ffi.cast("char *", rec) + head_size, 32 * (w + r))
    seg = np.frombuffer(bytes(seg_bytes), dtype=_SEGMENT)
    per_block = np.asarray(writes, np.int64) + np.asarray(reads, np.int64)
    # Within a block the writes come first, then the reads.
    op = np.full(len(seg), OP_READ, np.uint8)
    starts = np.concatenate([[0], np.cumsum(per_block)[:-1]]) if len(per_block) else per_block
    if len(seg):
        is_write = np.zeros(len(seg) + 1, np.int64)
        np.add.at(is_write, starts, 1)
        np.add.at(is_write, starts + np.asarray(writes, np.int64), -1)
        op[np.cumsum(is_write[:-1]) > 0] = OP_WRITE
    recs = Records(
        rank=np.repeat(np.asarray(ranks, np.int32), per_block),
        layer=np.full(len(seg), RECORD_LAYERS.index(layer), np.uint8),
        op=op,
        file_id=np.repeat(np.asarray(ids, np.uint64), per_block),
        offset=seg["offset"].copy(),
        length=seg["length"].copy(),
        start=seg["start"].copy(),
        end=seg["end"].copy(),
    )
    return recs, hosts


def _read_lustre(ffi: Any, lib: Any, handle: Any, idx: int) -> Striping:
    comp_names = counter_names("lustre_comp")
    i_size, i_count = comp_names.index("LUSTRE_COMP_STRIPE_SIZE"), comp_names.index(
        "LUSTRE_COMP_STRIPE_COUNT"
    )
    ids, sizes, counts, starts, osts = [], [], [], [], []
    seen: set[int] = set()
    for rec in _records(ffi, lib, handle, idx):
        lr = ffi.cast("struct darshan_lustre_record *", rec)
        # Each rank that opened a file writes its own record of the file's one
        # layout: keep one row per file, so files are counted once.
        if lr.num_comps < 1 or int(lr.base_rec.id) in seen:
            continue
        seen.add(int(lr.base_rec.id))
        # The first component describes the start of the file, where HPC
        # applications' layouts (single-component) live.
        comp = lr.comps[0]
        count = int(comp.counters[i_count])
        ids.append(int(lr.base_rec.id))
        sizes.append(int(comp.counters[i_size]))
        counts.append(count)
        starts.append(len(osts))
        osts.extend(int(lr.ost_ids[k]) for k in range(min(count, int(lr.num_stripes))))
    return Striping(
        file_id=np.asarray(ids, np.uint64),
        stripe_size=np.asarray(sizes, np.int64),
        stripe_count=np.asarray(counts, np.int64),
        ost_start=np.asarray(starts, np.int64),
        ost_ids=np.asarray(osts, np.int64),
    )


def _cross_check_dxt(trace: Trace) -> None:
    """Warn when the trace holds fewer operations than the counters say happened."""
    for log_name, layer in DXT_MODULES.items():
        mod = next((m for m in trace.modules if m.name == log_name), None)
        counters = trace.counters.get(layer)
        if mod is None or counters is None or not mod.read:
            continue
        m = MODULE[layer]
        expected = sum(counters.total(n) for d in DIRECTIONS for n in m.op_counters(d))
        got = int(np.count_nonzero(trace.records.layer == RECORD_LAYERS.index(layer)))
        if got < expected:
            trace.warnings.append(
                f"{log_name} holds {got:,} of the {expected:,} {display(layer)} operations"
                f" the counters report ({100 * got / expected:.1f} %): "
                "per-operation views and checks see only part of the run"
            )
