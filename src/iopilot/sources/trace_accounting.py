"""How the process images of an iopilot trace ended, and what the runtime
could not record: the trace's ``processes`` summary and its warnings."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Any

from ..model.trace import safe_name
from ..units import human_size
from .checked import where
from .trace_procs import Proc, child_images

_NORMAL_ENDS = ("exit", "_exit", "exec", "flush")
_OVERFLOWS = {"aio": "asynchronous I/O operations (aio)",
              "split": "split-collective MPI-IO operations",
              "fapl": "HDF5 file access property lists",
              "handles": "file handles",
              "notes": "settings (MPI-IO hints, HDF5 properties) to note"}  # fmt: skip
_MOVED = ("ESTALE", "ENOENT", "ENOTDIR", "ELOOP", "ENXIO")


def exit_status(job_meta: dict[str, Any], procs: list[Proc]) -> tuple[int | None, int | None]:
    """The program's status: job.json's, else the exit code of the first
    process's last image (the first non-zero one when several started alone)."""
    if "exit_status" in job_meta:
        status, sig = job_meta["exit_status"], job_meta.get("signal")
        if status < 0:  # a Python return code: killed by signal -status
            sig, status = -status, 128 - status
        return status, sig
    pids = {p.pid for p in procs}
    last: dict[int, Proc] = {}
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


def _who_list(procs: list[Proc], limit: int = 3) -> str:
    if len(procs) <= limit:
        return ", ".join(p.who() for p in procs)
    shown = ", ".join(p.who() for p in procs[:limit])
    return f"{len(procs):,} processes ({shown}, ...)"


def _grouped(items: list[tuple[str, Proc]], fmt) -> list[str]:
    """One line per distinct text, naming every process it concerns."""
    groups: dict[str, list[Proc]] = {}
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


def trace_warnings(procs: list[Proc]) -> list[str]:
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
        if p.unlisted_sites:
            out.append(f"{p.who()}: {p.unlisted_sites:,} operation records name a call site its "
                       "summary does not list: shown as unknown")  # fmt: skip
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


_MP_HELPER = re.compile(r"from multiprocessing\.(\w+) import main\b")


def _helper_name(p: Proc) -> str:
    """A child's executable name; Python's multiprocessing helpers by what
    they are (``python3.11 (multiprocessing.resource_tracker)``)."""
    exe = safe_name(os.path.basename(p.exe) or "unknown")
    cmd = p.summary["cmdline"] if p.summary and "cmdline" in p.summary else []
    m = next((m for w in cmd[1:] if (m := _MP_HELPER.match(w))), None)
    return f"{exe} (multiprocessing.{m.group(1)})" if m else exe


def accounting(procs: list[Proc]) -> dict[str, Any]:
    """How many images ran, how they ended, launchers, what the runtime cannot see."""
    ended: dict[str, int] = {}
    codes: dict[str, int] = {}
    # The program's own children (Python's platform module runs `uname -p`)
    # are not the program: their exits are counted apart.
    children = child_images(procs)
    helpers: dict[str, int] = {}
    for p in procs:
        how = p.summary["ended_by"] if p.summary else "none"
        ended[how] = ended.get(how, 0) + 1
        if how in ("exit", "_exit") and p.stem in children:
            exe = _helper_name(p)
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
    workers = {p.pid: p for p in sorted(procs, key=lambda p: -p.image) if p.worker}
    if workers:  # ranks 1 to N
        k = len(workers)
        text += ("; no launcher gave ranks: " + ("rank 1 is a Python worker process" if k == 1
                 else f"ranks 1–{k} are Python worker processes, in the order they started"))
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
        # Python worker processes that are ranks of their own (no launcher gave ranks)
        "workers": [{"rank": p.rank, "pid": p.pid, "start": p.worker}
                    for p in sorted(workers.values(), key=lambda p: p.rank or 0)],
        "summary": text,
        "not_seen": f"not seen by the runtime: {unseen}",
    }
