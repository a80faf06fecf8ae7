"""The process images of an iopilot trace: their files, checked, and who is a rank.

Per image ``S`` (``p<host>-<pid>-<n>``): ``S.json`` (the summary it wrote when
it ended normally), the header of ``S.rec`` and ``S.names``; per trace,
``job.json``.  Every file is opened as a regular file only, with a size
limit, and every field is checked before use (see ``docs/trace-format.md``).
"""

from __future__ import annotations

import math
import os
import re
import struct
from pathlib import Path
from typing import Any

import numpy as np

from .._record import field, record
from ..errors import InputError
from ..model.command import is_launcher, is_python
from ..model.trace import safe_name
from ..vocabulary import RUNTIME_LAYERS
from .checked import (
    REQUIRED,
    Fields,
    clock_samples,
    is_int64,
    is_number,
    json_type,
    load_json,
    open_regular,
    parse_file_id,
    read_bytes,
    where,
)
from .trace_cpu import THREAD_PARTS, check_cpu, check_thread
from .trace_sites import SiteMap, check_modules, check_sites

FORMAT_VERSION = 3  # the newest format this reader knows; 1 and 2 are read too
MAGIC = 0x31505249504F4921
HEADER = np.dtype(
    [("magic", "<u8"), ("version", "<u4"), ("record_size", "<u4"), ("rank", "<i8"),
     ("pid", "<i8"), ("t0", "<f8"), ("ppid", "<i8"), ("image", "<i8"), ("reserved", "<u8")]
)  # fmt: skip
RECORD_V2 = np.dtype(
    [("start", "<f8"), ("end", "<f8"), ("offset", "<i8"), ("length", "<i8"),
     ("file_id", "<u8"), ("thread", "<u4"), ("layer", "u1"), ("op", "u1"), ("flags", "<u2")]
)  # fmt: skip
# Format 3 adds the call site (an id of the process's summary's "sites").
RECORD = np.dtype([*RECORD_V2.descr, ("site", "<u4"), ("reserved", "<u4")])


def record_dtype(version: int) -> np.dtype:
    """The records of a record file of this format version."""
    return RECORD if version >= 3 else RECORD_V2

# The runtime's layer codes when no summary lists them.
LAYER_CODES = RUNTIME_LAYERS

# Size limits of the files read whole.  A record file has no fixed limit: it
# may hold at most the process's record limit, and is read in chunks.
JSON_LIMIT = 1 << 30
JOB_LIMIT = 64 << 20
NAMES_LIMIT = 1 << 30
DEFAULT_MAX_RECORDS = 50_000_000
_STEM2 = re.compile(r"p([A-Za-z0-9._]*)-(\d+)-(\d+)")
_STEM1 = re.compile(r"p(.*)-(\d+)")
_NAME_ENTRY = struct.Struct("<QII")
# S.error-NAME: the runtime could not write all of S's files (NAME: ENOSPC ...)
_WRITE_ERROR = re.compile(r"(p.*)\.error-(E[A-Z0-9]+)")


def read_job_meta(p: Path) -> dict[str, Any]:
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
class Proc:
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
    worker: str = ""  # "spawn" or "fork": an image of a Python worker process given its own rank
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
    record: np.dtype = RECORD  # the .rec's records (by its header's format version)
    site_map: SiteMap | None = None  # its call-site ids -> rows of the trace's sites
    unlisted_sites: int = 0  # records naming a site id its summary does not list

    def path(self, suffix: str) -> Path:
        return self.root / (self.stem + suffix)

    @property
    def exe(self) -> str:
        return self.summary["exe"] if self.summary else ""

    def who(self) -> str:
        if self.rank is None:
            return f"{os.path.basename(self.exe) or 'a process'} (pid {self.pid})"
        return f"rank {self.rank} (pid {self.pid})"


def read_process(root: Path, stem: str, summary: dict[str, Any] | None, limit: int,
             write_error: str | None = None) -> Proc:  # fmt: skip
    rpath, npath = root / f"{stem}.rec", root / f"{stem}.names"
    cap = max(limit, summary["records"] if summary else 0)
    head = read_header(rpath, rec_limit(cap)) if exists(rpath) else None
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
    p = Proc(stem, root, version, pid, ppid, image, host, t0, t_end, rank, known, summary,
              head["size"] if head else (0 if exists(rpath) else None))  # fmt: skip
    p.write_error = (summary or {}).get("write_error") or write_error
    if head:
        p.record = record_dtype(head["version"])
    if exists(npath):
        # Cut short by the runtime's word (a full disk), or by the end of a
        # process that left no summary: killed while it wrote, as a .rec can be.
        p.file_names = read_names(npath, cut_short=p.write_error is not None or not summary)
    return p


def write_errors(root: Path) -> dict[str, str]:
    """stem -> the error the runtime met writing that image's files, from the
    empty S.error-NAME files it leaves when even its summary may not fit."""
    try:
        listed = os.listdir(root)
    except OSError as e:
        raise InputError(where(root), f"cannot read: {e.strerror}") from None
    return {m.group(1): m.group(2) for m in map(_WRITE_ERROR.fullmatch, sorted(listed)) if m}


def exists(p: Path) -> bool:
    try:
        os.lstat(p)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise InputError(where(p), f"cannot read: {e.strerror}") from None
    return True


def read_summary(p: Path) -> dict[str, Any]:
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
        ("execs", "count", 0),
        ("cmdline", "strs", []), ("records", "count", 0), ("records_dropped", "count", 0),
        ("max_records", "count", None), ("stats_missing", "count", 0),
        ("nested_calls", "count", 0), ("overflows", "counts", {}), ("warnings", "strs", []),
        ("env", "dict", {}), ("layers", "strs", REQUIRED), ("counter_names", "strs", REQUIRED),
        ("fcounter_names", "strs", REQUIRED), ("counters", "list", REQUIRED),
        ("names", "dict", {}), ("notes", "list", []), ("settings", "dict", {}),
        ("write_behind", "dict", {}), ("write_error", "str", None),
        ("modules", "list", []), ("sites", "list", None), ("cpu", "dict", None),
        ("async_engine", "dict", {}), ("clock", "list", []),
    ):  # fmt: skip
        s[key] = f.get(key, kind, default)
    if not -1 <= s["rank"] < 2**31 - 1:
        raise f.bad(f"'rank' {s['rank']} is out of range")
    clock = clock_samples(s["clock"])
    if clock is None:
        raise f.bad("'clock' should be a list of [time, offset, uncertainty] "
                    "(finite numbers, uncertainty >= 0)")
    s["clock"] = clock
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
    s["cpu"] = check_cpu(f, s["cpu"])
    s["threads"] = [t for key in THREAD_PARTS if (t := check_thread(f, key, s[key]))]
    s["modules"] = check_modules(f, s["modules"])
    if s["sites"] is not None:
        s["sites"] = check_sites(f, s["sites"], len(s["modules"]))
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


def max_records() -> int:
    """The record limit of processes without a summary: the runtime's default,
    or IOPILOT_MAX_RECORDS when the reader is given a larger one."""
    env = os.environ.get("IOPILOT_MAX_RECORDS", "")
    return max(DEFAULT_MAX_RECORDS, int(env) if env.isascii() and env.isdigit() else 0)


def rec_limit(records: int) -> int:
    """The largest record file of a process with this record limit (and a cut record)."""
    return HEADER.itemsize + RECORD.itemsize * (records + 1)


def read_header(p: Path, limit: int) -> dict[str, Any] | None:
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
    size_of, expected = int(h["record_size"]), record_dtype(version).itemsize
    if size_of != expected:
        raise InputError(where(p), f"not an iopilot record file (record size {size_of}, "
                                    f"expected {expected} in format {version})")  # fmt: skip
    t0 = float(h["t0"])
    rank = int(h["rank"])
    if not math.isfinite(t0) or not -1 <= rank < 2**31 - 1:
        raise InputError(where(p), "damaged record file: its header's time or rank is invalid")
    return {"version": version, "t0": t0, "rank": rank, "pid": int(h["pid"]),
            "ppid": int(h["ppid"]), "image": int(h["image"]), "size": size}  # fmt: skip


def read_names(p: Path, cut_short: bool = False) -> dict[int, str]:
    """S.names: ``u64 id, u32 length, u32 0``, the name, zeros up to 8 bytes.
    ``cut_short``: the runtime said it could not write it all, or its process
    ended before its summary; the whole entries are kept, the last one, cut,
    is not."""
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


def real_hosts(procs: list[Proc]) -> None:
    """A process that left no summary knows its host only from its stem,
    where characters other than letters, digits, '.' and '_' became '_': it
    takes the real name a summary of the same host gives."""
    real = {re.sub(r"[^A-Za-z0-9._]", "_", p.host): p.host for p in procs if p.summary}
    for p in procs:
        if not p.summary:
            p.host = real.get(p.host, p.host)


def assign_ranks(procs: list[Proc]) -> None:
    """Known ranks stay, and the others are launchers, left out.  Without
    any, the program's main process and its helpers are rank 0, and each
    Python worker process (see :func:`python_workers`) is a rank of its own,
    1, 2 ... in the order the workers started, with the helpers it runs."""
    if any(p.known for p in procs):
        for p in procs:
            p.rank = p.written_rank if p.known else None
        return
    workers = python_workers(procs)
    order = sorted(workers, key=lambda pid: (workers[pid][0].t0, pid))
    rank_of = {pid: i + 1 for i, pid in enumerate(order)}
    parent = {p.pid: p.ppid for p in sorted(procs, key=lambda p: -p.image)}  # its first image's
    for p in procs:
        pid, seen = p.pid, set()
        while pid is not None and pid not in rank_of and pid not in seen:
            seen.add(pid)
            pid = parent.get(pid)
        p.rank = rank_of.get(pid, 0)  # its nearest worker's, else the main process's
        p.worker = workers[p.pid][1] if p.pid in workers else ""


def python_workers(procs: list[Proc]) -> dict[int, tuple[Proc, str]]:
    """pid -> (first image, "spawn" or "fork") of each Python worker process:
    a process ``multiprocessing`` spawned (its command line carries
    ``--multiprocessing-fork``: spawn pools, ``Process``, Dask's workers), or
    a fork of a Python process that never ran another program (fork pools,
    and the forkserver's children, which are forks of that server).  A fork
    is told by its clock: a forked image keeps its parent's time zero, an
    ``exec`` starts its own.  Helpers are not workers: the resource tracker
    and the forkserver (started with ``exec``, without that flag), programs
    run with ``exec`` (``uname -p``), shells and launchers."""
    images: dict[int, list[Proc]] = {}
    for p in sorted(procs, key=lambda p: p.image):
        images.setdefault(p.pid, []).append(p)
    out: dict[int, tuple[Proc, str]] = {}
    for pid, imgs in images.items():
        first, said = imgs[0], imgs[0].summary or {}
        if any("--multiprocessing-fork" in (p.summary or {}).get("cmdline", [])[1:]
               for p in imgs):  # fmt: skip
            out[pid] = (first, "spawn")
        elif len(imgs) == 1 and said.get("ended_by") != "exec" and not said.get("execs") and any(
                q.t0 == first.t0 and is_python(q.exe or first.exe)
                for q in images.get(first.ppid, ()) if q.pid != pid):  # fmt: skip
            out[pid] = (first, "fork")  # forked, and ran no other program
    return out


def child_images(procs: list[Proc]) -> set[str]:
    """Stems of the images started by a rank process (or, in a serial run,
    by the program): a fork of a traced process that counts under its rank,
    not a worker with a rank of its own.  An ``exec`` keeps the pid, so later
    images of a rank are not children."""
    ranked = {p.pid for p in procs if p.rank is not None}
    return {p.stem for p in procs if p.rank is not None and not p.worker
            and p.ppid in ranked and p.ppid != p.pid}  # fmt: skip


def program_procs(procs: list[Proc]) -> list[Proc]:
    """The images that are the program itself: the last image of each rank
    process (or of the main process of a serial run, and of each Python
    worker process with a rank of its own), not its children (the
    ``uname -p`` Python's platform module runs) nor launchers (``env``,
    ``sh`` ... that exec the program)."""
    children = child_images(procs)
    last: dict[int, Proc] = {}
    for p in procs:
        if p.rank is not None and p.stem not in children and p.summary and (
                p.pid not in last or p.image > last[p.pid].image):  # fmt: skip
            last[p.pid] = p
    own = [p for p in last.values() if not is_launcher(p.exe)]
    return sorted(own or last.values(), key=lambda p: (p.rank or 0, p.pid))
