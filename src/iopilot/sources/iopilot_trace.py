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
"""

from __future__ import annotations

import errno
import math
import mmap
import os
import re
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._record import field, record
from ..errors import InputError
from ..model import RECORD_LAYERS, BackgroundOps, Counters, Job, ModuleInfo, Records, Trace
from ..model.aggregate import unique
from ..model.command import is_launcher, is_python
from ..model.trace import safe_name
from ..units import human_size
from ..vocabulary import (
    COUNTERS,
    FCOUNTERS,
    FS_LAYERS,
    MAX_COUNTERS,
    MODULE,
    OP_NAMES,
    RECORD_FLAGS,
    RUNTIME_LAYERS,
)
from .checked import (
    REQUIRED,
    Fields,
    is_int64,
    is_number,
    json_type,
    load_json,
    open_regular,
    parse_file_id,
    read_bytes,
    where,
)
from .darshan_log import _counter_names
from .program import elf_language, static_layers
from .registry import Source, register

FORMAT_VERSION = 2  # the newest format this reader knows; 1 is read too
MAGIC = 0x31505249504F4921
HEADER = np.dtype(
    [("magic", "<u8"), ("version", "<u4"), ("record_size", "<u4"), ("rank", "<i8"),
     ("pid", "<i8"), ("t0", "<f8"), ("ppid", "<i8"), ("image", "<i8"), ("reserved", "<u8")]
)  # fmt: skip
RECORD = np.dtype(
    [("start", "<f8"), ("end", "<f8"), ("offset", "<i8"), ("length", "<i8"),
     ("file_id", "<u8"), ("thread", "<u4"), ("layer", "u1"), ("op", "u1"), ("flags", "<u2")]
)  # fmt: skip
# The runtime's layer codes when no summary lists them, and its operations.
LAYER_CODES = RUNTIME_LAYERS
N_OPS = len(OP_NAMES)
OP_MMAP = OP_NAMES.index("mmap")
QUEUED, BACKGROUND = RECORD_FLAGS["QUEUED"], RECORD_FLAGS["BACKGROUND"]
ERROR = RECORD_FLAGS["ERROR"]
# Runtime layer names -> model layers with counters (the runtime uses the model's names).
LAYER_PREFIX = {n: n for n in RUNTIME_LAYERS}
_FS_LAYERS = FS_LAYERS  # what the file system saw (MPI-IO and HDF5 sit above)
# Counters combined with max (not sum) when rows of one (file, rank) merge.
_MAX_SUFFIXES = MAX_COUNTERS

# Size limits of the files read whole.  A record file has no fixed limit: it
# may hold at most the process's record limit, and is read in chunks.
JSON_LIMIT = 1 << 30
JOB_LIMIT = 64 << 20
NAMES_LIMIT = 1 << 30
DEFAULT_MAX_RECORDS = 50_000_000
CHUNK = 1 << 16  # records per read: one 3 MiB buffer, used again for every read
_NORMAL_ENDS = ("exit", "_exit", "exec", "flush")
_OVERFLOWS = {"aio": "asynchronous I/O operations (aio)",
              "split": "split-collective MPI-IO operations",
              "fapl": "HDF5 file access property lists",
              "handles": "file handles",
              "notes": "settings (MPI-IO hints, HDF5 properties) to note"}  # fmt: skip
_STEM2 = re.compile(r"p([A-Za-z0-9._]*)-(\d+)-(\d+)")
_STEM1 = re.compile(r"p(.*)-(\d+)")
_NAME_ENTRY = struct.Struct("<QII")
# S.error-NAME: the runtime could not write all of S's files (NAME: ENOSPC ...)
_WRITE_ERROR = re.compile(r"(p.*)\.error-(E[A-Z0-9]+)")
_MOVED = ("ESTALE", "ENOENT", "ENOTDIR", "ELOOP", "ENXIO")


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
    job_meta = _job_meta(root / "job.json")
    stems = sorted({p.name[: -len(p.suffix)] for p in (*root.glob("p*.json"),
                                                       *root.glob("p*.rec"))})  # fmt: skip
    if not stems:
        raise InputError(path, "holds no iopilot trace (no p*.json or p*.rec files)")
    summaries = {s: _summary(root / f"{s}.json") for s in stems if _exists(root / f"{s}.json")}
    # No record file holds more than its process's record limit.
    limit = max([s["max_records"] or 0 for s in summaries.values()] + [_max_records()])
    failed = _write_errors(root)
    procs = [_process(root, s, summaries.get(s), limit, failed.get(s)) for s in stems]
    procs.sort(key=lambda p: (p.pid, p.image, p.stem))
    layers_of = {p.version: p.summary["layers"] for p in procs if p.summary}
    for p in procs:
        p.layers = p.summary["layers"] if p.summary else layers_of.get(p.version, LAYER_CODES)
    _assign_ranks(procs)
    times = [p.t0 for p in procs if math.isfinite(p.t0)]
    job_start = min(times) if times else float(job_meta.get("start", 0.0))
    on_disk = sum(max(p.rec_size - HEADER.itemsize, 0) // RECORD.itemsize for p in procs)
    # both bounded by the records on disk; untouched pages cost no memory
    sink, meta_sink = _RecordSink(on_disk), _RecordSink(on_disk)
    for p in procs:
        _read_records(p, job_start, limit, sink, meta_sink)
    records = sink.records()
    background = _background(procs, job_start)
    for p in procs:
        _summary_totals(p)
    names: dict[int, str] = {}
    for p in procs:
        names.update(p.file_names)
        if p.summary:
            names.update(p.summary["names"])
    for i in set().union(*(p.unnamed for p in procs)) - names.keys():
        names[i] = f"<file {i:#x}>"
    counters = _counters([p for p in procs if p.rank is not None], job_start)
    modules = [ModuleInfo(layer, rows=len(c)) for layer, c in counters.items()]
    if len(records):
        modules.append(ModuleInfo("RECORDS", rows=len(records)))
    return Trace(
        source=path,
        job=_job(job_meta, procs, job_start),
        names=names,
        counters=counters,
        records=records,
        meta_records=meta_sink.records(),
        modules=modules,
        warnings=_warnings(procs),
        processes=_accounting(procs),
        settings=_settings(procs, names),
        write_behind=_write_behind(procs),
        background=background,
    )


def _job(job_meta: dict[str, Any], procs: list[_Proc], job_start: float) -> Job:
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
    status, sig = _exit_status(job_meta, procs)
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
        mounts=job_meta.get("mounts", []),
        hosts={p.rank: p.host for p in reversed(ranked) if p.rank is not None},
        format=f"iopilot {max(p.version for p in procs)}",
        writer=f"libiopilot ({len(procs)} process image(s))",
        exit_status=status,
        signal=sig,
        language=_language(job_meta, procs),
        static_layers=_static_layers(job_meta, procs),
    )


def _program_procs(procs: list[_Proc]) -> list[_Proc]:
    """The images that are the program itself: the last image of each rank
    process (or of the main process of a serial run), not its children (the
    ``uname -p`` Python's platform module runs) nor launchers (``env``,
    ``sh`` ... that exec the program)."""
    children = _children(procs)
    last: dict[int, _Proc] = {}
    for p in procs:
        if p.rank is not None and p.stem not in children and p.summary and (
                p.pid not in last or p.image > last[p.pid].image):  # fmt: skip
            last[p.pid] = p
    own = [p for p in last.values() if not is_launcher(p.exe)]
    return sorted(own or last.values(), key=lambda p: (p.rank or 0, p.pid))


def _children(procs: list[_Proc]) -> set[str]:
    """Stems of the images started by a rank process (or, in a serial run,
    by the program): a fork of a traced process that counts as a rank.  An
    ``exec`` keeps the pid, so later images of a rank are not children."""
    ranked = {p.pid for p in procs if p.rank is not None}
    return {p.stem for p in procs
            if p.rank is not None and p.ppid in ranked and p.ppid != p.pid}  # fmt: skip


def _language(job_meta: dict[str, Any], procs: list[_Proc]) -> str:
    """"python" when a rank runs a Python interpreter, "fortran" when the
    trace has Fortran I/O or the program needs the Fortran runtime, "c++"
    when it needs libstdc++, else "c"; "" when nothing can tell."""
    own = _program_procs(procs)
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


def _static_layers(job_meta: dict[str, Any], procs: list[_Proc]) -> dict[str, str]:
    """{layer: file} of the layers the program carries inside itself:
    job.json's (recorded where the program ran), else the executables' own
    symbol tables when they are still here."""
    if "static_layers" in job_meta:
        return dict(job_meta["static_layers"])
    return static_layers(dict.fromkeys(p.exe for p in _program_procs(procs)
                                       if p.exe and not is_python(p.exe)))  # fmt: skip


# ---------------------------------------------------------------------------
# job.json and the per-process files
# ---------------------------------------------------------------------------


def _job_meta(p: Path) -> dict[str, Any]:
    """The fields of job.json this reader uses, checked; {} when there is none."""
    try:
        os.lstat(p)
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise InputError(where(p), f"cannot read: {e.strerror}") from None
    f = Fields(load_json(p, JOB_LIMIT, "job description"), p, "job description")
    out: dict[str, Any] = {}
    fields = (("command", "strs"), ("start", "number"), ("end", "number"),
              ("exit_status", "int?"), ("signal", "int?"), ("mounts", "mounts"),
              ("static_layers", "strmap"), ("exe_languages", "strmap"))  # fmt: skip
    for key, kind in fields:
        v = f.get(key, kind, None)
        if v is not None:
            out[key] = v
    if "mounts" in out:
        out["mounts"] = [(a, b) for a, b in out["mounts"]]
    return out


@record
class _Proc:
    """One process image: what its files say, and what the reader made of it."""

    stem: str
    root: Path
    version: int
    pid: int
    ppid: int | None
    image: int
    host: str
    t0: float
    t_end: float
    written_rank: int  # -1: not known
    known: bool  # the rank came from MPI or a launcher variable
    summary: dict[str, Any] | None  # the checked .json; None: ended without one
    rec_size: int | None  # bytes of the .rec, None when there is none
    file_names: dict[int, str] = field(default_factory=dict)
    layers: tuple[str, ...] | list[str] = LAYER_CODES
    rank: int | None = None  # rank in the analysis; None: a launcher, left out
    on_disk: int = 0  # whole records in the .rec
    kept: int = 0  # of which reads and writes kept for the analysis
    cut: bool = False  # the .rec ends inside a record
    fs_bytes: int = 0  # bytes read and written at POSIX and STDIO
    mmaps: int = 0
    unnamed: set[int] = field(default_factory=set)
    # a background thread's records (QUEUED, BACKGROUND), as read
    background: list[np.ndarray] = field(default_factory=list)
    unpaired: int = 0  # background records without their pair (a cut file)
    write_error: str | None = None  # why the runtime could not write all its files (ENOSPC ...)

    def path(self, suffix: str) -> Path:
        return self.root / (self.stem + suffix)

    @property
    def exe(self) -> str:
        return self.summary["exe"] if self.summary else ""

    def who(self) -> str:
        if self.rank is None:
            return f"{os.path.basename(self.exe) or 'a process'} (pid {self.pid})"
        return f"rank {self.rank} (pid {self.pid})"


def _process(root: Path, stem: str, summary: dict[str, Any] | None, limit: int,
             write_error: str | None = None) -> _Proc:  # fmt: skip
    rpath, npath = root / f"{stem}.rec", root / f"{stem}.names"
    cap = max(limit, summary["records"] if summary else 0)
    head = _header(rpath, _rec_limit(cap)) if _exists(rpath) else None
    m = _STEM2.fullmatch(stem) or _STEM1.fullmatch(stem)
    host, pid, image = (m.group(1), int(m.group(2)), int(m.group(3)) if m.lastindex == 3 else 0
                        ) if m else ("", 0, 0)  # fmt: skip
    if summary:
        s = summary
        version, pid, ppid, t0 = s["version"], s["pid"], s["ppid"], s["t0"]
        image = image if s["image"] is None else s["image"]  # else the stem's
        host = host if s["host"] is None else s["host"]
        rank, t_end = s["rank"], s["t_end"]
        known = rank >= 0 and s["rank_source"] != "none"
    elif head:
        version, t0, rank = head["version"], head["t0"], head["rank"]
        pid = head["pid"]
        ppid = head["ppid"] if version >= 2 else None
        image = head["image"] if version >= 2 else image
        known, t_end = rank >= 0, 0.0
    else:  # an empty record file and no summary: died at start-up
        version, t0, rank, ppid, known, t_end = FORMAT_VERSION, math.inf, -1, None, False, 0.0
    p = _Proc(stem, root, version, pid, ppid, image, host, t0, t_end, rank, known, summary,
              head["size"] if head else (0 if _exists(rpath) else None))  # fmt: skip
    p.write_error = (summary or {}).get("write_error") or write_error
    if _exists(npath):
        p.file_names = _names_file(npath, cut_short=p.write_error is not None)
    return p


def _write_errors(root: Path) -> dict[str, str]:
    """stem -> the error the runtime met writing that image's files, from the
    empty S.error-NAME files it leaves when even its summary may not fit."""
    try:
        listed = os.listdir(root)
    except OSError as e:
        raise InputError(where(root), f"cannot read: {e.strerror}") from None
    return {m.group(1): m.group(2) for m in map(_WRITE_ERROR.fullmatch, sorted(listed)) if m}


def _exists(p: Path) -> bool:
    try:
        os.lstat(p)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise InputError(where(p), f"cannot read: {e.strerror}") from None
    return True


def _summary(p: Path) -> dict[str, Any]:
    """The checked fields of a process summary (S.json)."""
    what = "process summary"
    m = load_json(p, JSON_LIMIT, what)
    if m.get("format") != "iopilot-process":
        raise InputError(where(p), "not an iopilot process summary")
    f = Fields(m, p, what)
    version = f.get("version", "int")
    if version > FORMAT_VERSION:
        raise InputError(where(p), f"written by a newer iopilot (format {version}); "
                                    "upgrade iopilot")  # fmt: skip
    if version < 1:
        raise f.bad(f"'version' {version} is not a format version")
    s: dict[str, Any] = {"version": version}
    for key, kind, default in (
        ("rank", "int", REQUIRED), ("nprocs", "count", 1), ("rank_source", "str", ""),
        ("pid", "int", REQUIRED), ("ppid", "int", None), ("image", "count", None),
        ("host", "str", None), ("t0", "number", REQUIRED), ("t_end", "number", REQUIRED),
        ("ended_by", "str", "exit"), ("exit_code", "int?", None), ("exe", "str", ""),
        ("cmdline", "strs", []), ("records", "count", 0), ("records_dropped", "count", 0),
        ("max_records", "count", None), ("stats_missing", "count", 0),
        ("nested_calls", "count", 0), ("overflows", "counts", {}), ("warnings", "strs", []),
        ("env", "dict", {}), ("layers", "strs", REQUIRED), ("counter_names", "strs", REQUIRED),
        ("fcounter_names", "strs", REQUIRED), ("counters", "list", REQUIRED),
        ("names", "dict", {}), ("notes", "list", []), ("settings", "dict", {}),
        ("write_behind", "dict", {}), ("write_error", "str", None),
    ):  # fmt: skip
        s[key] = f.get(key, kind, default)
    if not -1 <= s["rank"] < 2**31 - 1:
        raise f.bad(f"'rank' {s['rank']} is out of range")
    if s["write_error"] is not None and not re.fullmatch(r"E[A-Z0-9]+", s["write_error"]):
        raise f.bad(f"'write_error' {safe_name(s['write_error'])!r} is not an error name")
    names = {}
    for k, v in s["names"].items():
        i = parse_file_id(k)
        if i is None or not isinstance(v, str):
            raise f.bad(f"'names': entry {k!r} should be \"file id\": \"path\"")
        names[i] = v
    s["names"] = names
    for i, note in enumerate(s["notes"]):
        if not (isinstance(note, list) and len(note) == 2 and parse_file_id(note[0]) is not None
                and isinstance(note[1], str)):  # fmt: skip
            raise f.bad(f"'notes' entry {i} should be [file id, text]")
    s["counters"] = [_counter_row(f, s, i, row) for i, row in enumerate(s["counters"])]
    s["settings"] = _settings_part(f, s["settings"])
    return s


_OUTCOME_FIELDS = ("setting", "value", "file", "object", "outcome", "detail", "count")


def _settings_part(f: Fields, part: dict[str, Any]) -> dict[str, Any] | None:
    """The checked "settings" part of a summary: None when no file was named."""
    if not part:
        return None
    file, error = part.get("file"), part.get("error")
    rows = part.get("outcomes", [])
    if not isinstance(file, str) or not (error is None or isinstance(error, str)):
        raise f.bad("'settings' should name its file and hold an error or null")
    if not isinstance(rows, list):
        raise f.bad("'settings' outcomes should be a list")
    out = []
    for i, row in enumerate(rows):
        if not (isinstance(row, list) and len(row) == 7 and all(isinstance(x, str) for x in row[:6])
                and parse_file_id(row[2]) is not None and isinstance(row[6], int)):  # fmt: skip
            raise f.bad(f"'settings' outcome {i} should be {list(_OUTCOME_FIELDS)}")
        out.append(row)
    dropped = part.get("dropped", 0)
    return {"file": file, "error": error, "outcomes": out,
            "dropped": dropped if isinstance(dropped, int) else 0}  # fmt: skip


def _settings(procs: list[_Proc], names: dict[int, str]) -> dict[str, Any] | None:
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


def _write_behind(procs: list[_Proc]) -> dict[str, Any] | None:
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


def _counter_row(f: Fields, s: dict[str, Any], i: int, row: Any) -> tuple:
    """(layer code, file id, {counter index: int}, {fcounter index: float}), checked."""
    if not (isinstance(row, list) and len(row) == 4):
        raise f.bad(f"'counters' row {i} should be [layer, file id, {{...}}, {{...}}]")
    layer, fid, ints, floats = row
    if not is_int64(layer) or not 0 <= layer < len(s["layers"]):
        raise f.bad(f"'counters' row {i}: layer code {layer!r} is out of range "
                    f"({len(s['layers'])} layers)")  # fmt: skip
    file_id = parse_file_id(fid)
    if file_id is None:
        raise f.bad(f"'counters' row {i}: file id {fid!r} is not a number")
    out = []
    kinds = ((ints, s["counter_names"], is_int64, "an integer"),
             (floats, s["fcounter_names"], is_number, "a finite number"))  # fmt: skip
    for values, names, test, what in kinds:
        if not isinstance(values, dict):
            raise f.bad(f"'counters' row {i}: counters should be an object")
        checked = {}
        for k, v in values.items():
            j = int(k) if isinstance(k, str) and k.isascii() and k.isdigit() else -1
            if not 0 <= j < len(names):
                raise f.bad(f"'counters' row {i}: counter index {k!r} is out of range "
                            f"({len(names)} counters)")  # fmt: skip
            if not test(v):
                got = "out of range" if json_type(v) == "an integer" else json_type(v)
                raise f.bad(f"'counters' row {i}: counter {names[j]} should be {what}, "
                            f"not {got}")  # fmt: skip
            checked[j] = v
        out.append(checked)
    return layer, file_id, out[0], out[1]


def _max_records() -> int:
    """The record limit of processes without a summary: the runtime's default,
    or IOPILOT_MAX_RECORDS when the reader is given a larger one."""
    env = os.environ.get("IOPILOT_MAX_RECORDS", "")
    return max(DEFAULT_MAX_RECORDS, int(env) if env.isascii() and env.isdigit() else 0)


def _rec_limit(records: int) -> int:
    """The largest record file of a process with this record limit (and a cut record)."""
    return HEADER.itemsize + RECORD.itemsize * (records + 1)


def _header(p: Path, limit: int) -> dict[str, Any] | None:
    """The checked header of a record file, with the file's size."""
    fd, size = open_regular(p, limit)
    try:
        raw = os.pread(fd, HEADER.itemsize, 0)
    except OSError as e:
        raise InputError(where(p), f"cannot read: {e.strerror}") from None
    finally:
        os.close(fd)
    if size == 0:
        return None  # created, then nothing written: the image died at start-up
    if len(raw) < HEADER.itemsize:
        raise InputError(where(p), f"truncated: the file ends inside its {HEADER.itemsize}-byte "
                                    f"header ({len(raw)} bytes)")  # fmt: skip
    h = np.frombuffer(raw, HEADER, count=1)[0]
    if int(h["magic"]) != MAGIC:
        raise InputError(where(p), "not an iopilot record file (bad magic number)")
    version = int(h["version"])
    if version > FORMAT_VERSION:
        raise InputError(where(p), f"written by a newer iopilot (format {version}); "
                                    "upgrade iopilot")  # fmt: skip
    if version < 1:
        raise InputError(where(p), f"damaged record file: version {version} in its header")
    size_of = int(h["record_size"])
    if size_of != RECORD.itemsize:
        raise InputError(where(p), f"not an iopilot record file (record size {size_of}, "
                                    f"expected {RECORD.itemsize})")  # fmt: skip
    t0 = float(h["t0"])
    rank = int(h["rank"])
    if not math.isfinite(t0) or not -1 <= rank < 2**31 - 1:
        raise InputError(where(p), "damaged record file: its header's time or rank is invalid")
    return {"version": version, "t0": t0, "rank": rank, "pid": int(h["pid"]),
            "ppid": int(h["ppid"]), "image": int(h["image"]), "size": size}  # fmt: skip


def _names_file(p: Path, cut_short: bool = False) -> dict[int, str]:
    """S.names: ``u64 id, u32 length, u32 0``, the name, zeros up to 8 bytes.
    ``cut_short``: the runtime said it could not write it all; the whole
    entries are kept, the last one, cut, is not."""
    data = read_bytes(p, NAMES_LIMIT)
    out: dict[int, str] = {}
    pos, n = 0, len(data)
    while pos < n:
        if pos + _NAME_ENTRY.size > n:
            if cut_short:
                break
            raise InputError(where(p), f"damaged names file: the entry at byte {pos:,} is "
                                        "cut short")  # fmt: skip
        i, length, _ = _NAME_ENTRY.unpack_from(data, pos)
        end = pos + _NAME_ENTRY.size + length
        if end > n and cut_short:
            break
        if end > n:
            raise InputError(where(p), f"damaged names file: the entry at byte {pos:,} has a "
                                        f"{length:,}-byte name, past the end of the file "
                                        f"({n:,} bytes)")  # fmt: skip
        out[i] = data[pos + _NAME_ENTRY.size : end].decode("utf-8", "surrogateescape")
        pos = end + (-length % 8)
    return out


# ---------------------------------------------------------------------------
# Ranks, records, counters
# ---------------------------------------------------------------------------


def _assign_ranks(procs: list[_Proc]) -> None:
    """Known ranks stay; without any, every process is rank 0 (a serial program
    and its children); with some, the others are launchers, left out."""
    any_known = any(p.known for p in procs)
    for p in procs:
        p.rank = p.written_rank if p.known else (None if any_known else 0)


class _RecordSink:
    """The columns of every kept record, allocated once for all processes
    (the records on disk bound their number) and filled chunk by chunk:
    no list of parts, no second copy when they are joined.

    Columns live in anonymous maps whose pages are brought in one call per
    chunk just before it is written (``MADV_POPULATE_WRITE``), not one page
    fault at a time: for 240 MB, 0.15 s of CPU instead of 0.4-0.65 s here.
    Pages past the last chunk are never touched and cost no memory."""

    def __init__(self, capacity: int) -> None:
        self.n = 0
        empty = Records.empty()
        self.cols: dict[str, np.ndarray] = {}
        self.maps: dict[str, mmap.mmap] = {}
        for f in _FIELDS:
            dtype = getattr(empty, f).dtype
            if capacity:
                m = mmap.mmap(-1, capacity * dtype.itemsize,
                              flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # fmt: skip
                self.maps[f] = m
                self.cols[f] = np.frombuffer(m, dtype)
            else:
                self.cols[f] = np.empty(0, dtype)

    def _populate(self, k: int) -> None:
        """Bring in the pages of rows n .. n+k of every column at once."""
        global _populate_works
        if not _populate_works:
            return
        for f, m in self.maps.items():
            size = self.cols[f].itemsize
            lo = self.n * size // mmap.PAGESIZE * mmap.PAGESIZE
            try:
                m.madvise(_MADV_POPULATE_WRITE, lo, (self.n + k) * size - lo)
            except OSError:  # kernels before 5.14: pages come one fault at a time
                _populate_works = False
                return

    def add(self, r: np.ndarray, keep: np.ndarray, rank: int, layer: np.ndarray,
            shift: float) -> None:  # fmt: skip
        """Append the records of ``r`` (on-disk rows) where ``keep`` is true,
        field by field straight into the columns: no copy of the rows."""
        k = int(np.count_nonzero(keep))
        if not k:
            return
        sl = slice(self.n, self.n + k)
        c = self.cols
        self._populate(k)
        if k == len(r):
            for f in ("op", "file_id", "offset", "length", "start", "end"):
                c[f][sl] = r[f]
            c["layer"][sl] = layer
        else:
            idx = np.flatnonzero(keep)
            for f in ("op", "file_id", "offset", "length", "start", "end"):
                np.take(r[f], idx, out=c[f][sl])
            np.take(layer, idx, out=c["layer"][sl])
        c["rank"][sl] = rank
        if shift:
            c["start"][sl] += shift
            c["end"][sl] += shift
        self.n += k

    def records(self) -> Records:
        cap = len(self.cols["file_id"])
        # views when nearly full; a compact copy when metadata records left room
        take = (lambda a: a[: self.n]) if self.n >= cap * 3 // 4 else (lambda a: a[: self.n].copy())
        return Records(**{f: take(self.cols[f]) for f in _FIELDS})


_FIELDS = ("rank", "layer", "op", "file_id", "offset", "length", "start", "end")
_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)  # Linux 5.14
_populate_works = True


def _read_records(p: _Proc, job_start: float, limit: int, sink: _RecordSink,
                  meta_sink: _RecordSink) -> None:  # fmt: skip
    """The data operations of one image, in chunks: memory holds what is kept.
    Counts what the file holds, and the file-system bytes of launchers."""
    if not p.rec_size:
        return
    path = p.path(".rec")
    fd, size = open_regular(path, _rec_limit(max(limit, p.summary["records"] if p.summary else 0)))
    layers = p.layers
    model_layer = np.full(256, 255, np.uint8)
    fs_layer = np.zeros(256, bool)
    for i, name in enumerate(layers[:256]):
        if name in RECORD_LAYERS:
            model_layer[i] = RECORD_LAYERS.index(name)
        fs_layer[i] = name in _FS_LAYERS
    shift = p.t0 - job_start
    last = 0.0
    with os.fdopen(fd, "rb") as f:
        f.seek(HEADER.itemsize)
        whole = (size - HEADER.itemsize) // RECORD.itemsize
        p.cut = (size - HEADER.itemsize) % RECORD.itemsize != 0
        done = 0
        buf = np.empty(min(CHUNK, whole), RECORD)
        while done < whole:
            want = min(CHUNK, whole - done)
            got = (f.readinto(buf[:want].view(np.uint8)) or 0) // RECORD.itemsize
            r = buf[:got]
            if got < want:
                p.cut = True  # the file shrank while it was read
            if not got:
                break
            _check_records(path, r, done, len(layers))
            behind = (r["flags"] & (QUEUED | BACKGROUND)) != 0
            data = (r["op"] <= 1) & ~behind
            done += len(r)
            if not p.summary or p.rank is None:  # what its counters would have said
                p.fs_bytes += int(r["length"][data & fs_layer[r["layer"]]].sum())
                p.mmaps += int((r["op"] == OP_MMAP).sum())
                last = max(last, float(r["end"].max()))
            if p.rank is None:
                continue
            layer = model_layer[r["layer"]]
            known = layer != 255
            keep = data & known
            p.kept += int(np.count_nonzero(keep))
            if not p.summary:
                p.unnamed.update(unique(r["file_id"][known]).tolist())
            sink.add(r, keep, p.rank, layer, shift)
            meta_sink.add(r, ~data & ~behind & known, p.rank, layer, shift)
            if behind.any():
                p.background.append(r[behind & known])
    p.on_disk = done
    if not p.summary:
        p.t_end = last


def _background(procs: list[_Proc], job_start: float) -> BackgroundOps | None:
    """The background thread's operations: each QUEUED record followed, in its
    thread's order, by the BACKGROUND record of the same operation makes one
    row.  A record without its pair (a file cut by a kill) is counted and left
    out.  None when no process had any."""
    parts = []
    for p in procs:
        if not p.background or p.rank is None:
            continue
        r = np.concatenate(p.background)
        p.background = []
        r = r[np.argsort(r["thread"], kind="stable")]  # each thread's records in file order
        q = (r["flags"] & QUEUED) != 0
        a, b = r[:-1], r[1:]
        pair = (q[:-1] & ~q[1:] & (a["thread"] == b["thread"]) & (a["file_id"] == b["file_id"])
                & (a["op"] == b["op"]) & (a["offset"] == b["offset"])
                & (a["length"] == b["length"]) & (a["end"] == b["start"]))  # fmt: skip
        i = np.flatnonzero(pair)
        p.unpaired = len(r) - 2 * len(i)
        first, second = r[i], r[i + 1]
        shift = p.t0 - job_start
        parts.append(BackgroundOps(
            rank=np.full(len(i), p.rank, np.int32),
            file_id=first["file_id"].astype(np.uint64),
            op=first["op"].astype(np.uint8),
            offset=first["offset"].astype(np.int64),
            length=first["length"].astype(np.int64),
            queued=first["start"] + shift,
            issued=second["start"] + shift,
            completed=second["end"] + shift,
            failed=(second["flags"] & ERROR) != 0,
        ))  # fmt: skip
    if not parts:
        return None
    return BackgroundOps(*(np.concatenate([getattr(x, f) for x in parts])
                           for f in ("rank", "file_id", "op", "offset", "length", "queued",
                                     "issued", "completed", "failed")))  # fmt: skip


def _check_records(path: Path, r: np.ndarray, first: int, nlayers: int) -> None:
    bad = np.flatnonzero(r["layer"] >= nlayers)
    if len(bad):
        code = r["layer"][bad[0]]
        raise InputError(where(path), f"damaged record file: record {first + bad[0]:,} has "
                                       f"layer code {code} ({nlayers} layers)")  # fmt: skip
    bad = np.flatnonzero(r["op"] >= N_OPS)
    if len(bad):
        raise InputError(where(path), f"damaged record file: record {first + bad[0]:,} has "
                                       f"operation code {r['op'][bad[0]]}")  # fmt: skip
    bad = np.flatnonzero(~(np.isfinite(r["start"]) & np.isfinite(r["end"])))
    if len(bad):
        raise InputError(where(path), f"damaged record file: record {first + bad[0]:,} has a "
                                       "start or end time that is not a number")  # fmt: skip


def _layer_spec(procs: list[_Proc]) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
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
        inames, fnames = ((_counter_names(prefix), _counter_names(prefix + "_f")) if prefix
                          else (tuple(f"{layer}_{n}" for n in COUNTERS),
                                tuple(f"{layer}_{n}" for n in FCOUNTERS)))  # fmt: skip
        spec[layer] = (tuple(inames) + tuple(n for n in ei if n not in inames),
                       tuple(fnames) + tuple(n for n in ef if n not in fnames))  # fmt: skip
    return spec


def _h5f_name(layer: str, raw: str) -> str:
    return "OPENS" if layer == "H5F" and raw == "CREATES" else raw  # Darshan counts creates


def _counters(procs: list[_Proc], job_start: float) -> dict[str, Counters]:
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


def _summary_totals(p: _Proc) -> None:
    """File-system bytes and mmap calls from the counters of a summary."""
    s = p.summary
    if not s:
        return
    idx = {n: i for i, n in enumerate(s["counter_names"])}
    moved = [idx[n] for n in ("BYTES_READ", "BYTES_WRITTEN") if n in idx]
    mm = idx.get("MMAPS")
    p.fs_bytes = p.mmaps = 0
    for layer, _fid, ints, _floats in s["counters"]:
        if s["layers"][layer] in _FS_LAYERS:
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


# ---------------------------------------------------------------------------
# How the processes ended, and what the runtime could not record
# ---------------------------------------------------------------------------


def _exit_status(job_meta: dict[str, Any], procs: list[_Proc]) -> tuple[int | None, int | None]:
    """The program's status: job.json's, else the exit code of the first
    process's last image (the first non-zero one when several started alone)."""
    if "exit_status" in job_meta:
        status, sig = job_meta["exit_status"], job_meta.get("signal")
        if status < 0:  # a Python return code: killed by signal -status
            sig, status = -status, 128 - status
        return status, sig
    pids = {p.pid for p in procs}
    last: dict[int, _Proc] = {}
    for p in procs:
        if p.ppid not in pids and (p.pid not in last or p.image > last[p.pid].image):
            last[p.pid] = p
    codes = [p.summary["exit_code"] for p in sorted(last.values(), key=lambda p: (p.rank or 0,
                                                                                 p.pid))
             if p.summary and p.summary["ended_by"] in ("exit", "_exit")
             and p.summary["exit_code"] is not None]  # fmt: skip
    if not codes:
        return None, None
    return next((c for c in codes if c), 0), None


def _who_list(procs: list[_Proc], limit: int = 3) -> str:
    if len(procs) <= limit:
        return ", ".join(p.who() for p in procs)
    shown = ", ".join(p.who() for p in procs[:limit])
    return f"{len(procs):,} processes ({shown}, ...)"


def _grouped(items: list[tuple[str, _Proc]], fmt) -> list[str]:
    """One line per distinct text, naming every process it concerns."""
    groups: dict[str, list[_Proc]] = {}
    for text, p in items:
        groups.setdefault(text, []).append(p)
    return [fmt(_who_list(ps), text) for text, ps in groups.items()]


def _write_error_text(name: str, root: Path) -> str:
    """Why the runtime could not write its files in ``root``, from the error's name."""
    if name == "ENOSPC":
        return f"the file system of {where(root)} was full (no space left on device)"
    if name == "EDQUOT":
        return f"the disk quota on the file system of {where(root)} was exceeded"
    if name in _MOVED:
        return f"{where(root)} or files in it were moved, replaced or removed while it was written"
    code = getattr(errno, name, None) if not name[1:].isdigit() else int(name[1:])
    reason = os.strerror(code) if isinstance(code, int) else name
    return f"writing in {where(root)} failed ({reason[:1].lower()}{reason[1:]})"


def _warnings(procs: list[_Proc]) -> list[str]:
    out: list[str] = []
    out += _grouped([(_write_error_text(p.write_error, p.root), p) for p in procs if p.write_error],
                    lambda who, why: f"the trace is incomplete: {why}: trace files of {who} are "
                                     "missing or cut short")  # fmt: skip
    killed = [p for p in procs if not p.summary and not p.write_error]
    if killed:
        n = sum(p.on_disk for p in killed)
        data = sum(p.kept for p in killed)
        shown = "; ".join(f"pid {p.pid}, {safe_name(p.stem)}" for p in killed[:5])
        more = f"; and {len(killed) - 5:,} more" if len(killed) > 5 else ""
        one = len(killed) == 1
        kept = (f"{'its' if one else 'their'} {n:,} flushed operation records are kept"
                if n else f"{'it' if one else 'they'} flushed no operation records")  # fmt: skip
        if data != n:
            kept += f" ({data:,} reads and writes analysed)"
        out.append(
            f"{len(killed):,} process{'' if one else 'es'} ({shown}{more}) ended without a "
            f"summary (killed or crashed): {kept}, {'its' if one else 'their'} counters are "
            "missing"
        )
    busy = [p for p in procs if p.rank is None and p.fs_bytes]
    if busy:
        listed = ", ".join(f"{p.who()}: {human_size(p.fs_bytes)}" for p in busy[:5])
        if len(busy) > 5:
            rest = sum(p.fs_bytes for p in busy[5:])
            listed += f", and {len(busy) - 5:,} more: {human_size(rest)}"
        out.append(f"launcher processes, not ranks: {listed} of I/O not analysed")
    for p in procs:
        if p.unpaired:
            out.append(f"{p.who()}: {p.unpaired:,} background I/O records without their pair "
                       "(queued/issued, issued/completed) were left out")  # fmt: skip
        s = p.summary
        if not s:
            if p.cut:
                out.append(f"{safe_name(p.stem)}.rec: the last record is cut short and was dropped")
            continue
        said = (f" (its summary says {s['records']:,})"
                if p.on_disk != s["records"] and p.rec_size is not None else "")  # fmt: skip
        tail = ": per-operation views see part of the run (counters are exact)"
        dropped, limit = s["records_dropped"], s["max_records"]
        kept = f"{p.who()} kept {p.on_disk:,} operation records{said} and"
        if dropped and limit is not None and s["records"] + dropped >= limit:
            out.append(f"{kept} dropped {dropped:,} beyond its limit of {limit:,}{tail}")
        elif dropped:
            why = "; ".join(f'runtime warning: "{w}"' for w in s["warnings"]) or (
                "the runtime left no warning")  # fmt: skip
            out.append(f"{kept} lost {dropped:,} because tracing stopped ({why}){tail}")
        elif p.rec_size is not None and p.on_disk < s["records"]:
            out.append(f"{p.who()}: its record file holds {p.on_disk:,} operation records, its "
                       f"summary says {s['records']:,}: the file was cut short{tail}")  # fmt: skip
        if p.cut:
            out.append(f"{safe_name(p.stem)}.rec: the last record is cut short and was dropped")
        if s["stats_missing"]:
            out.append(f"{p.who()} ran out of table memory for {s['stats_missing']} file(s): "
                       "their counters are missing")  # fmt: skip
    withs = [p for p in procs if p.summary]
    out += _grouped([(w, p) for p in withs for w in p.summary["warnings"]],
                    lambda who, w: f"{who}: runtime warning: {w}")  # fmt: skip
    for kind, what in {**_OVERFLOWS, **{k: k for p in withs for k in p.summary["overflows"]
                                        if k not in _OVERFLOWS}}.items():  # fmt: skip
        ps = [p for p in withs if p.summary["overflows"].get(kind)]
        if ps:
            n = sum(p.summary["overflows"][kind] for p in ps)
            out.append(f"{_who_list(ps)}: a runtime table was full: {n:,} {what} could not be "
                       "followed, their I/O is missing or incomplete")  # fmt: skip
    ps = [p for p in withs if p.summary["nested_calls"]]
    if ps:
        n = sum(p.summary["nested_calls"] for p in ps)
        out.append(f"{_who_list(ps)}: {n:,} calls made by signal handlers while the runtime "
                   "was busy were passed through, not counted")  # fmt: skip
    return out


def _accounting(procs: list[_Proc]) -> dict[str, Any]:
    """How many images ran, how they ended, launchers, what the runtime cannot see."""
    ended: dict[str, int] = {}
    codes: dict[str, int] = {}
    # The program's own children (Python's platform module runs `uname -p`)
    # are not the program: their exits are counted apart.
    children = _children(procs)
    helpers: dict[str, int] = {}
    for p in procs:
        how = p.summary["ended_by"] if p.summary else "none"
        ended[how] = ended.get(how, 0) + 1
        if how in ("exit", "_exit") and p.stem in children:
            exe = safe_name(os.path.basename(p.exe) or "unknown")
            helpers[exe] = helpers.get(exe, 0) + 1
        elif how in ("exit", "_exit"):
            code = p.summary["exit_code"]
            key = "unknown" if code is None else str(code)
            codes[key] = codes.get(key, 0) + 1
    abnormal = [p for p in procs if not p.summary]
    launchers = [p for p in procs if p.rank is None]
    normal = len(procs) - len(abnormal)
    details = [f"exit {k}: {v}" if k != "unknown" else f"exit: {v}"
               for k, v in sorted(codes.items(), key=lambda kv: (kv[0] == "unknown", kv[0]))]
    details += [f"{label}: {ended[k]}" for k, label in (("exec", "exec"),
                                                        ("flush", "after MPI_Finalize"))
                if ended.get(k)]  # fmt: skip
    details += [f"{safe_name(k)}: {v}" for k, v in ended.items()
                if k not in (*_NORMAL_ENDS, "none")]  # fmt: skip
    if helpers:
        k = sum(helpers.values())
        listed = ", ".join(f"{e} ×{v}" if v > 1 else e for e, v in list(helpers.items())[:5])
        details.append(f"{k:,} child process{'' if k == 1 else 'es'} the program ran: {listed}"
                       + (", ..." if len(helpers) > 5 else ""))  # fmt: skip
    n = len(procs)
    text = f"{n:,} process image{'' if n == 1 else 's'}: {normal:,} ended normally"
    text += f" ({', '.join(details)})" if details else ""
    if abnormal:
        unwritten = sum(1 for p in abnormal if p.write_error)
        why = ("killed or crashed" if not unwritten else "it could not be written"
               if unwritten == len(abnormal) else
               f"{unwritten:,} could not write it, the others were killed or crashed")  # fmt: skip
        text += f", {len(abnormal):,} ended without a summary ({why})"
    if launchers:
        exes: dict[str, int] = {}
        for p in launchers:
            exe = safe_name(os.path.basename(p.exe) or "unknown")
            exes[exe] = exes.get(exe, 0) + 1
        listed = ", ".join(f"{e} ×{k}" if k > 1 else e for e, k in list(exes.items())[:5])
        more = ", ..." if len(exes) > 5 else ""
        text += (f"; {len(launchers):,} launcher image{'' if len(launchers) == 1 else 's'} "
                 f"({listed}{more}) not counted as ranks")  # fmt: skip
    mmaps = sum(p.mmaps for p in procs)
    unseen = "data moved by sendfile, copy_file_range, splice or io_uring"
    if mmaps:
        unseen = (f"reads and writes through memory mapped with mmap ({mmaps:,} mmap "
                  f"call{'' if mmaps == 1 else 's'} on traced files), and {unseen}")  # fmt: skip
    return {
        "images": n,
        "ranks": len({p.rank for p in procs if p.rank is not None}),
        "ended_normally": normal,
        "ended_abnormally": len(abnormal),
        "ended_by": ended,
        "exit_codes": codes,
        "children": helpers,
        "abnormal": [{"stem": p.stem, "pid": p.pid, "host": p.host, "rank": p.rank,
                      "records": p.on_disk} for p in abnormal],
        "launchers": [{"stem": p.stem, "pid": p.pid, "exe": p.exe, "bytes": p.fs_bytes}
                      for p in launchers],
        "summary": text,
        "not_seen": f"not seen by the runtime: {unseen}",
    }


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
