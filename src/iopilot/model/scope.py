"""Which files the diagnosis is about: the program's own files, not the
interpreter's and libraries' (``.pyc``, site-packages, ``*.so``, ``/etc`` ...).

A traced ``python3 -c pass`` opens dozens of bytecode files and a pandas job
reads megabytes of modules: checks that see them blame the user for I/O the
user never wrote.  :class:`FileScope` decides, once per file, whether a file
is the program's; :func:`FileScope.apply` returns the trace without the
others (vectorised: file ids -> names -> a verdict per id -> ``np.isin``
over counter rows and records) and a summary of what it set aside, which
reports show as "runtime and library files".
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

import numpy as np

from .._record import record, replace
from ..vocabulary import FS_LAYERS
from .aggregate import isin, unique
from .command import command_language
from .trace import Counters, Records, Striping, Trace

ENV = "IOPILOT_EXCLUDE"  # more patterns, added to the defaults
LISTED = 50  # set-aside files listed by name in reports

# (reason, the patterns as documented, regular expression on the full path).
# The expressions are anchored so that a user's directory that merely looks
# alike ("packages", "lib") stays the user's.
DEFAULT_RULES: tuple[tuple[str, str, str], ...] = (
    ("Python bytecode", "*.pyc, *.pyo", r"\.py[co]$"),
    # What the interpreter probes while it finds its prefix and path.
    ("Python start-up files",
     "*.pth, pyvenv.cfg, pythonXY.zip, Modules/Setup*, */bin/pythonX.Y, */lib",
     r"\.pth$|/pyvenv\.cfg$|/python\d+\.zip$|/Modules/Setup(\.local)?$|/pybuilddir\.txt$"
     r"|/bin/python[\d.]*$|/lib(64)?$"),
    ("Python packages and standard library",
     "*/site-packages/*, */dist-packages/*, */lib/pythonX.Y/*",
     r"/(site|dist)-packages(/|$)|/lib(64)?/python[23](\.\d+)?(/|$)"),
    ("shared libraries", "*.so, *.so.N, /lib*, /usr/lib*, /usr/local/lib*",
     r"\.so(\.\d+)*$|^/(usr/(local/)?)?lib(32|64|x32)?/"),
    ("system configuration", "/etc/*", r"^/etc/"),
    ("system data", "/usr/share/*", r"^/usr/share/"),
    ("Open MPI session files", "/tmp/ompi*", r"^/tmp/ompi"),
    # What Open MPI, PRRTE and PMIx read and write for themselves: component
    # caches (~/.pmix/components), session directories under any TMPDIR.
    ("MPI runtime files",
     "*/.pmix/*, */.openmpi/*, */ompi.HOST.UID/*, */prte.HOST.UID/*, */pmix.HOST.UID/*",
     r"/\.(pmix|openmpi|prte)(/|$)|/(ompi|prte|pmix)\.[^/]+\.\d+(/|$)"
     r"|/openmpi-sessions-[^/]*(/|$)|^/tmp/(prte|pmix)[.-]"),
    ("kernel and device files", "/proc/*, /sys/*, /dev/*", r"^/(proc|sys|dev)(/|$)"),
)  # fmt: skip
_DEFAULT = tuple((why, re.compile(rx)) for why, _, rx in DEFAULT_RULES)
# A Python job's own source, read to run it, is not its I/O.
PROGRAM_SOURCE = "the program's Python source"
_SOURCE = re.compile(r"\.pyw?$")


def split_patterns(text: str) -> list[str]:
    """Patterns of ``IOPILOT_EXCLUDE``: separated by colons or commas."""
    return [p.strip() for p in re.split("[:,]", text) if p.strip()]


def matches(path: str, pattern: str) -> bool:
    """Shell-style ``pattern`` against ``path``: a pattern with a ``/`` matches
    the whole path or a directory above it (``/scratch/tmp`` covers its
    files); one without matches any component (``*.log``, ``.cache``)."""
    if "/" in pattern:
        p = pattern.rstrip("/") or "/"
        return fnmatchcase(path, p) or fnmatchcase(path, p.rstrip("/") + "/*")
    return any(fnmatchcase(part, pattern) for part in path.split("/") if part)


@record(frozen=True)
class FileScope:
    """The files to analyse: not a default runtime file (unless ``defaults`` is
    off), not matching ``exclude``, and matching ``include_only`` if given."""

    exclude: tuple[str, ...] = ()
    include_only: tuple[str, ...] = ()
    defaults: bool = True
    from_env: tuple[str, ...] = ()  # the part of ``exclude`` that came from IOPILOT_EXCLUDE

    @staticmethod
    def build(exclude: Sequence[str] = (), include_only: Sequence[str] = (),
              defaults: bool = True,
              env: Mapping[str, str] | None = None) -> FileScope:  # fmt: skip
        """A scope from command-line options plus ``IOPILOT_EXCLUDE`` in ``env``
        (``os.environ`` by default), which adds to the defaults."""
        env_pats = tuple(split_patterns((os.environ if env is None else env).get(ENV, "")))
        return FileScope(tuple(exclude) + env_pats, tuple(include_only), defaults, env_pats)

    @property
    def everything(self) -> bool:
        return not (self.exclude or self.include_only or self.defaults)

    def reason(self, path: str) -> str | None:
        """Why ``path`` is set aside, or None when it is analysed."""
        if self.include_only and not any(matches(path, p) for p in self.include_only):
            return "outside --include-only"
        for p in self.exclude:
            if matches(path, p):
                return f"{ENV} {p}" if p in self.from_env else f"--exclude {p}"
        if self.defaults:
            # In order: a .pyc inside site-packages is "Python bytecode".
            return next((why for why, rx in _DEFAULT if rx.search(path)), None)
        return None

    def set_aside_ids(self, names: Mapping[int, str]) -> dict[int, str]:
        """File id -> reason, for the named files this scope leaves out.  Files
        without a name (``<file 0x...>``) are kept: nothing says they are noise."""
        if self.everything:
            return {}
        out = {}
        for fid, name in names.items():
            why = self.reason(name)
            if why is not None:
                out[int(fid)] = why
        return out

    def program_source_ids(self, trace: Trace) -> dict[int, str]:
        """File id -> reason for the Python program's own source: in a Python
        job, the ``.py`` files it only read (the script, its local modules
        compiled at import); a ``.py`` file the job wrote is its output."""
        if not self.defaults or (trace.job.language or command_language(
                trace.job.executable)) != "python":  # fmt: skip
            return {}
        py = {int(fid) for fid, name in trace.names.items() if _SOURCE.search(name)}
        if not py:
            return {}
        written: set[int] = set()
        for c in trace.counters.values():
            if c.layer in FS_LAYERS and c.has(f"{c.layer}_BYTES_WRITTEN"):
                written.update(int(i) for i in unique(c.file_id[c[f"{c.layer}_BYTES_WRITTEN"] > 0]))
        return dict.fromkeys(py - written, PROGRAM_SOURCE)

    def apply(self, trace: Trace) -> Trace:
        """``trace`` without the set-aside files; ``trace.set_aside`` says what went."""
        why = {**self.program_source_ids(trace), **self.set_aside_ids(trace.names)}
        summary = _empty_summary(self)
        if not why:
            return replace(trace, set_aside=summary)
        ids = np.fromiter(why, np.uint64, len(why))
        counters = {}
        for layer, c in trace.counters.items():
            gone = isin(c.file_id, ids)
            if c.parent_id is not None:  # datasets go with their file
                gone |= isin(c.parent_id, ids)
            counters[layer] = c.select(~gone) if gone.any() else c
        summary.update(_summary(trace.counters, ids, why, trace.names, self))
        lustre = trace.lustre
        if lustre is not None and len(lustre):
            keep = ~isin(lustre.file_id, ids)
            if not keep.all():
                lustre = None if not keep.any() else _select_striping(lustre, keep)
        return replace(
            trace,
            counters=counters,
            records=_drop(trace.records, ids),
            meta_records=_drop(trace.meta_records, ids),
            lustre=lustre,
            set_aside=summary,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "defaults": self.defaults,
            "exclude": [p for p in self.exclude if p not in self.from_env],
            "env_exclude": list(self.from_env),
            "include_only": list(self.include_only),
        }


def _drop(r: Records, ids: np.ndarray) -> Records:
    if not len(r):
        return r
    gone = _isin_runs(r.file_id, ids)
    return r.select(~gone) if gone.any() else r


def _isin_runs(file_id: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``np.isin(file_id, ids)``, asked once per run of one file: traces hold
    long runs of operations on one file, and isin sorts what it is given."""
    n = len(file_id)
    heads = np.flatnonzero(file_id[1:] != file_id[:-1]) + 1
    if not n or len(heads) * 4 > n:
        return isin(file_id, ids)
    starts = np.concatenate([[0], heads])
    hit = isin(file_id[starts], ids)
    return np.repeat(hit, np.diff(np.concatenate([starts, [n]])))


def _select_striping(st: Any, keep: np.ndarray) -> Any:

    osts = [st.osts(i) for i in np.flatnonzero(keep)]
    starts = np.cumsum([0] + [len(o) for o in osts[:-1]]).astype(np.int64)
    flat = np.concatenate(osts) if osts else np.zeros(0, np.int64)
    return Striping(st.file_id[keep], st.stripe_size[keep], st.stripe_count[keep], starts,
                    flat.astype(np.int64))  # fmt: skip


def _empty_summary(scope: FileScope) -> dict[str, Any]:
    return {"files": 0, "bytes_read": 0, "bytes_written": 0, "operations": 0,
            "seconds": 0.0, "reasons": [], "listed": [], "scope": scope.describe()}  # fmt: skip


def _summary(counters: Mapping[str, Counters], ids: np.ndarray, why: Mapping[int, str],
             names: Mapping[int, str], scope: FileScope) -> dict[str, Any]:  # fmt: skip
    """Files, bytes, operations and seconds set aside, as the file system saw
    them (POSIX and STDIO: MPI-IO and HDF5 would count the same bytes again)."""
    uniq = unique(ids)
    n = len(uniq)
    cols = {k: np.zeros(n) for k in ("bytes_read", "bytes_written", "operations", "seconds")}
    seen = np.zeros(n, bool)
    for c in counters.values():
        hit = isin(c.file_id, uniq)
        if not hit.any():
            continue
        at = np.searchsorted(uniq, c.file_id[hit])
        seen[at] = True
        if c.layer not in FS_LAYERS:
            continue
        p = c.layer
        for key, names_ in (("bytes_read", (f"{p}_BYTES_READ",)),
                            ("bytes_written", (f"{p}_BYTES_WRITTEN",)),
                            ("operations", (f"{p}_READS", f"{p}_WRITES", f"{p}_OPENS")),
                            ("seconds", (f"{p}_F_READ_TIME", f"{p}_F_WRITE_TIME",
                                         f"{p}_F_META_TIME"))):  # fmt: skip
            for name in names_:
                if c.has(name):
                    np.add.at(cols[key], at, c[name][hit])
    # Only files the source has data for count (names of others may be listed).
    rows = np.flatnonzero(seen)
    reasons: dict[str, list[float]] = {}
    for i in rows:
        acc = reasons.setdefault(why[int(uniq[i])], [0, 0.0, 0.0])
        acc[0] += 1
        acc[1] += cols["bytes_read"][i] + cols["bytes_written"][i]
        acc[2] += cols["seconds"][i]
    moved = cols["bytes_read"] + cols["bytes_written"]
    top = rows[np.lexsort((-cols["seconds"][rows], -moved[rows]))][:LISTED]
    return {
        "files": len(rows),
        "bytes_read": int(cols["bytes_read"][rows].sum()),
        "bytes_written": int(cols["bytes_written"][rows].sum()),
        "operations": int(cols["operations"][rows].sum()),
        "seconds": round(float(cols["seconds"][rows].sum()), 6),
        "reasons": [{"reason": k, "files": int(v[0]), "bytes": int(v[1]),
                     "seconds": round(float(v[2]), 6)}
                    for k, v in sorted(reasons.items(), key=lambda kv: -kv[1][0])],
        "listed": [{"path": names.get(int(uniq[i]), f"<file {int(uniq[i]):#x}>"),
                    "reason": why[int(uniq[i])],
                    "bytes_read": int(cols["bytes_read"][i]),
                    "bytes_written": int(cols["bytes_written"][i]),
                    "operations": int(cols["operations"][i]),
                    "seconds": round(float(cols["seconds"][i]), 6)} for i in top],
        "scope": scope.describe(),
    }  # fmt: skip


def scope_args(exclude: Iterable[str] | None, include_only: Iterable[str] | None,
               no_defaults: bool) -> FileScope:  # fmt: skip
    """The scope command-line options ask for (``IOPILOT_EXCLUDE`` added)."""
    return FileScope.build(list(exclude or ()), list(include_only or ()), not no_defaults)
