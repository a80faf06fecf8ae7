"""iopilot traces (a directory written by ``libiopilot.so``) -> :class:`~iopilot.model.Trace`.

The directory holds, per traced process image, ``S.rec`` (fixed-size binary
records), ``S.names`` (names of the files those records refer to) and, when the
image ended normally, ``S.json`` (metadata, names and counters), plus
``job.json`` written by ``iopilot run``; ``S`` is ``p<host>-<pid>-<n>``
(``p<host>-<pid>`` in format 1).  See ``docs/trace-format.md``.

Counters are renamed to Darshan's vocabulary (``READS`` of the MPI-IO layer
becomes ``MPIIO_...``), and files that every rank touched are reduced to one
rank ``-1`` row as Darshan does, so every check reads both sources alike.

Every file is opened as a regular file only (never a FIFO, device or link),
with a size limit, and every field is checked before use: a damaged or hostile
trace is an :class:`InputError` naming the file and the reason.  How each
process ended, and everything the runtime could not record, becomes the
trace's ``processes`` summary and warnings.

This module assembles the trace and registers the format; ``trace_procs``
reads and checks each image's files, ``trace_records`` its operation
records, ``trace_counters`` its counters, ``trace_accounting`` how it ended.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..model import ClockAlignment, Job, ModuleInfo, ProcessCpu, Trace
from ..model.command import is_python
from .checked import parse_file_id
from .program import elf_language, static_layers
from .registry import Source, register
from .trace_accounting import accounting, exit_status, trace_warnings
from .trace_clock import align_clocks
from .trace_counters import layer_counters, summary_totals
from .trace_cpu import process_cpu
from .trace_procs import (
    HEADER,
    LAYER_CODES,
    Proc,
    assign_ranks,
    exists,
    max_records,
    program_procs,
    read_job_meta,
    read_process,
    read_summary,
    real_hosts,
    write_errors,
)
from .trace_records import RecordSink, background_ops, read_records
from .trace_sites import build_sites


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
    job_meta = read_job_meta(root / "job.json")
    stems = sorted({p.name[: -len(p.suffix)] for p in (*root.glob("p*.json"),
                                                       *root.glob("p*.rec"))})  # fmt: skip
    if not stems:
        raise InputError(path, "holds no iopilot trace (no p*.json or p*.rec files)")
    summaries = {s: read_summary(root / f"{s}.json") for s in stems if exists(root / f"{s}.json")}
    # No record file holds more than its process's record limit.
    limit = max([s["max_records"] or 0 for s in summaries.values()] + [max_records()])
    failed = write_errors(root)
    procs = [read_process(root, s, summaries.get(s), limit, failed.get(s)) for s in stems]
    procs.sort(key=lambda p: (p.pid, p.image, p.stem))
    layers_of = {p.version: p.summary["layers"] for p in procs if p.summary}
    for p in procs:
        p.layers = p.summary["layers"] if p.summary else layers_of.get(p.version, LAYER_CODES)
    real_hosts(procs)
    assign_ranks(procs)
    clock = align_clocks(procs)  # before anything reads a time zero
    times = [p.t0 for p in procs if math.isfinite(p.t0)]
    job_start = min(times) if times else float(job_meta.get("start", 0.0))
    sites = build_sites(procs)
    on_disk = sum(max((p.rec_size or 0) - HEADER.itemsize, 0) // p.record.itemsize for p in procs)
    # both bounded by the records on disk; untouched pages cost no memory
    rows = len(sites) if sites is not None else 0
    sink, meta_sink = RecordSink(on_disk, rows), RecordSink(on_disk, rows)
    for p in procs:
        read_records(p, job_start, limit, sink, meta_sink)
    records = sink.records()
    background = background_ops(procs, job_start)
    for p in procs:
        summary_totals(p)
    names: dict[int, str] = {}
    for p in procs:
        names.update(p.file_names)
        if p.summary:
            names.update(p.summary["names"])
    for i in set().union(*(p.unnamed for p in procs)) - names.keys():
        names[i] = f"<file {i:#x}>"
    counters = layer_counters([p for p in procs if p.rank is not None], job_start)
    modules = [ModuleInfo(layer, rows=len(c)) for layer, c in counters.items()]
    if len(records):
        modules.append(ModuleInfo("RECORDS", rows=len(records)))
    return Trace(
        source=path,
        job=_job(job_meta, procs, job_start, clock),
        names=names,
        counters=counters,
        records=records,
        meta_records=meta_sink.records(),
        modules=modules,
        warnings=trace_warnings(procs),
        processes=accounting(procs),
        settings=_settings(procs, names),
        write_behind=_write_behind(procs),
        background=background,
        sites=sites,
        cpus=_cpus(procs),
    )


def _cpus(procs: list[Proc]) -> list[ProcessCpu]:
    """Where each program process could run and what its processors did."""
    found = (process_cpu(p.summary, p.rank) for p in program_procs(procs) if p.summary)
    return [c for c in found if c is not None]


def _job(job_meta: dict[str, Any], procs: list[Proc], job_start: float,
         clock: ClockAlignment | None = None) -> Job:
    """The job: job.json where it says, else what the ranks' summaries say."""
    ranked = [p for p in procs if p.rank is not None]
    described = [p for p in ranked if p.summary] or [p for p in procs if p.summary]
    first = min(described, key=lambda p: (p.rank or 0, p.t0)) if described else None
    nprocs = max([p.summary["nprocs"] for p in ranked if p.summary]
                 + [max((p.rank or 0) + 1 for p in ranked) if ranked else 1])  # fmt: skip
    end = max([p.t0 + p.t_end for p in procs if math.isfinite(p.t0)] + [job_start])
    hints: dict[str, str] = {}
    for p in ranked:
        for _fid, text in p.summary["notes"] if p.summary else ():
            kind, key, value = [*text.split("\t"), "", ""][:3]
            if kind == "mpiio_hint":
                hints[key] = value
    start = float(job_meta.get("start", job_start))
    stop = float(job_meta.get("end", end))
    status, sig = exit_status(job_meta, procs)
    command = job_meta.get("command") or (
        (first.summary["cmdline"] or [first.summary["exe"]]) if first else [])  # fmt: skip
    return Job(
        nprocs=nprocs,
        start=start,
        end=stop,
        runtime=stop - start,
        executable=" ".join(command),
        metadata={k: str(v) for k, v in (first.summary["env"] if first else {}).items()},
        hints=hints or None,
        hdf5_chunk_cache=_chunk_cache(procs),
        mounts=job_meta.get("mounts", []),
        hosts={p.rank: p.host for p in reversed(ranked) if p.rank is not None},
        rank_source=_rank_source(procs),
        format=f"iopilot {max(p.version for p in procs)}",
        writer=f"libiopilot ({len(procs)} process image(s))",
        exit_status=status,
        signal=sig,
        language=_language(job_meta, procs),
        static_layers=_static_layers(job_meta, procs),
        clock=clock,
    )


def _rank_source(procs: list[Proc]) -> str:
    """"mpi", "launcher", "workers" or "" (see :class:`~iopilot.model.Job`)."""
    if any(p.worker for p in procs):
        return "workers"
    known = [p for p in procs if p.known and p.rank is not None]
    if any(p.summary and p.summary.get("rank_source") == "mpi" for p in known):
        return "mpi"
    return "launcher" if known else ""


def _chunk_cache(procs: list[Proc]) -> dict[int, int]:
    """The chunk cache bytes of each chunked HDF5 dataset, from the runtime's
    ``chunk_cache`` notes (the largest any process opened it with)."""
    out: dict[int, int] = {}
    for p in procs:
        for fid, text in p.summary["notes"] if p.summary else ():
            kind, key, value = [*text.split("\t"), "", ""][:3]
            cache = re.search(r"\bnbytes=(\d+)", value)
            if kind == "hdf5_property" and key == "chunk_cache" and cache:
                i = parse_file_id(fid)
                if i is not None:
                    out[i] = max(out.get(i, 0), int(cache.group(1)))
    return out


def _language(job_meta: dict[str, Any], procs: list[Proc]) -> str:
    """"python" when a rank runs a Python interpreter, "fortran" when the
    trace has Fortran I/O or the program needs the Fortran runtime, "c++"
    when it needs libstdc++, else "c"; "" when nothing can tell."""
    own = program_procs(procs)
    if any(is_python(p.exe) for p in own):
        return "python"
    if any("FORTRAN" in p.layers
           and any(c[0] < len(p.layers) and p.layers[c[0]] == "FORTRAN"
                   for c in p.summary.get("counters", ()))
           for p in own if p.summary):  # fmt: skip
        return "fortran"
    known = job_meta.get("exe_languages", {})
    langs = {known.get(p.exe) or elf_language(p.exe) for p in own if p.exe}
    for lang in ("fortran", "c++", "c"):
        if lang in langs:
            return lang
    return ""


def _static_layers(job_meta: dict[str, Any], procs: list[Proc]) -> dict[str, str]:
    """{layer: file} of the layers the program carries inside itself:
    job.json's (recorded where the program ran), else the executables' own
    symbol tables when they are still here."""
    if "static_layers" in job_meta:
        return dict(job_meta["static_layers"])
    return static_layers(dict.fromkeys(p.exe for p in program_procs(procs)
                                       if p.exe and not is_python(p.exe)))  # fmt: skip


def _settings(procs: list[Proc], names: dict[int, str]) -> dict[str, Any] | None:
    """What became of the run-time settings, over all processes: one entry per
    (setting, value, file, object, outcome, detail) with the calls and the
    processes it covers."""
    parts = [p.summary["settings"] for p in procs if p.summary and p.summary["settings"]]
    if not parts:
        return None
    merged: dict[tuple, dict[str, Any]] = {}
    errors: list[str] = []
    for part in parts:
        if part["error"] and part["error"] not in errors:
            errors.append(part["error"])
        for setting, value, fid, obj, outcome, detail, count in part["outcomes"]:
            file_id = parse_file_id(fid) or 0
            path = names.get(file_id, "") if file_id else ""
            key = (setting, value, path, obj, outcome, detail)
            e = merged.setdefault(key, {"setting": setting, "value": value, "file": path or None,
                                        "object": obj or None, "outcome": outcome,
                                        "detail": detail or None, "count": 0,
                                        "processes": 0})  # fmt: skip
            e["count"] += count
            e["processes"] += 1
    return {
        "file": parts[0]["file"],
        "errors": errors,
        "dropped": sum(part["dropped"] for part in parts),
        "outcomes": sorted(merged.values(), key=lambda e: (e["setting"], e["file"] or "",
                                                           e["object"] or "", e["outcome"])),
    }  # fmt: skip


_BEHIND_FIELDS = ("writes", "bytes", "bytes_written", "synchronous", "waits", "errors",
                  "busy_seconds", "queued_seconds", "wait_seconds")  # fmt: skip


def _write_behind(procs: list[Proc]) -> dict[str, Any] | None:
    """Write-behind's figures summed over the processes that had it on (the
    largest buffer use of any one process); None when none had."""
    parts = [p.summary["write_behind"] for p in procs if p.summary and p.summary["write_behind"]]
    if not parts:
        return None
    out: dict[str, Any] = {k: 0 for k in _BEHIND_FIELDS}
    out["max_bytes"] = 0
    out["relaxed"] = False
    for part in parts:
        for k in _BEHIND_FIELDS:
            v = part.get(k, 0)
            if isinstance(v, int | float) and not isinstance(v, bool) and v >= 0:
                out[k] += v
        m = part.get("max_bytes", 0)
        out["max_bytes"] = max(out["max_bytes"], m if isinstance(m, int) else 0)
        out["relaxed"] = out["relaxed"] or bool(part.get("relaxed"))
    out["processes"] = len(parts)
    return out


def _refuse_trace_file(path: str) -> Trace:
    """One of a trace's own files, given instead of a trace: what to pass."""
    p = Path(path)
    if is_trace_dir(p.parent):
        raise InputError(path, "a file inside an iopilot trace, not a trace",
                         f"pass the trace directory: iopilot report {p.parent}")  # fmt: skip
    what = "a JSON file" if p.suffix == ".json" else "an iopilot record file"
    raise InputError(path, f"{what}, not a trace or a Darshan log",
                     "pass an iopilot trace directory or a Darshan log")  # fmt: skip


register(Source("iopilot trace", is_trace_dir, read_trace))
register(Source("a file of an iopilot trace",
                lambda p: p.suffix in (".json", ".rec") and not p.is_dir(), _refuse_trace_file))
