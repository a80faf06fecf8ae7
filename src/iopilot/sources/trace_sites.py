"""The call sites of an iopilot trace (format 3): each process summary's
``modules`` and ``sites``, checked, and merged over processes into one
:class:`~iopilot.model.Sites` table.

Site ids are the process's own; a :class:`SiteMap` per process turns a
column of them into rows of the trace's table in one NumPy operation, so
no Python object is ever made per record.  The same line called from two
ranks is one row (native: module path and offset; Python: file, line and
function), its counts summed.  Native sites get their file, line and
function from the binaries (:mod:`.symbols`) once, here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

from ..model import Sites
from .checked import Fields, is_int64, is_number
from .symbols import Symbolizer

NO_ROW = np.uint32(0xFFFFFFFF)  # an id the summary does not list
_MAX_ID = 2**32 - 1


def check_modules(f: Fields, modules: list[Any]) -> list[tuple[str, str]]:
    """The summary's "modules": [(path, build-id hex)], checked."""
    out = []
    for i, m in enumerate(modules):
        if not (isinstance(m, dict) and isinstance(m.get("path"), str)
                and isinstance(m.get("build_id", ""), str)
                and _is_address(m.get("base", 0))):  # fmt: skip
            raise f.bad(f"'modules' entry {i} should be "
                        '{"path": text, "base": address, "build_id": hex}')  # fmt: skip
        out.append((m["path"], m.get("build_id", "").lower()))
    return out


def check_sites(f: Fields, sites: list[Any], modules: int) -> list[dict[str, Any]]:
    """The summary's "sites", checked: each has a unique id (1 .. 2^32-1),
    native ``frames`` ([module index, offset] ...) or ``python`` frames
    ([file, line, function] ...), and its count, bytes and time."""
    out: list[dict[str, Any]] = []
    seen: set[int] = set()
    for i, s in enumerate(sites):
        if not isinstance(s, dict):
            raise f.bad(f"'sites' entry {i} should be an object")
        sid = s.get("id")
        if not (is_int64(sid) and 1 <= sid <= _MAX_ID) or sid in seen:
            why = "is listed twice" if sid in seen else "is not an id (1 to 2^32-1)"
            raise f.bad(f"'sites' entry {i}: id {sid!r} {why}")
        seen.add(sid)
        frames, python = s.get("frames"), s.get("python")
        if isinstance(python, list) and frames is None:
            if not all(isinstance(x, list) and len(x) == 3 and isinstance(x[0], str)
                       and is_int64(x[1]) and 0 <= x[1] < 2**31 and isinstance(x[2], str)
                       for x in python):  # fmt: skip
                raise f.bad(f"'sites' entry {i}: python frames should be [file, line, function]")
            site = {"lang": "python", "frames": [tuple(x) for x in python]}
        elif isinstance(frames, list) and python is None:
            for x in frames:
                if not (isinstance(x, list) and len(x) == 2 and is_int64(x[0])
                        and _is_address(x[1])):  # fmt: skip
                    raise f.bad(f"'sites' entry {i}: frames should be [module index, offset]")
                if not -1 <= x[0] < modules:  # -1: an address in no module the runtime knew
                    raise f.bad(f"'sites' entry {i}: module index {x[0]} is out of range "
                                f"({modules} modules)")  # fmt: skip
            site = {"lang": "native", "frames": [tuple(x) for x in frames]}
        else:
            raise f.bad(f"'sites' entry {i} should have either native 'frames' or 'python' "
                        "frames")  # fmt: skip
        library = s.get("library", False)
        count, nbytes, time = s.get("count", 0), s.get("bytes", 0), s.get("time", 0.0)
        if not (isinstance(library, bool) and is_int64(count) and count >= 0
                and is_int64(nbytes) and nbytes >= 0
                and is_number(time) and time >= 0):  # fmt: skip
            raise f.bad(f"'sites' entry {i}: library should be true or false, count and bytes "
                        "non-negative integers, time a non-negative number")  # fmt: skip
        site.update(id=sid, library=library, count=count, bytes=nbytes, time=float(time))
        out.append(site)
    return out


def _is_address(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**64


class SiteMap:
    """One process's site ids -> rows of the trace's :class:`Sites`, a whole
    column at a time.  Id 0 is row 0 (unknown); an id the summary does not
    list becomes :data:`NO_ROW`.  Dense ids (the runtime numbers them from 1)
    go through a lookup array, others through a sorted search."""

    def __init__(self, ids: Iterable[int], rows: Iterable[int]) -> None:
        i = np.fromiter(ids, np.int64)
        r = np.fromiter(rows, np.uint32, len(i))
        order = np.argsort(i)
        self.ids, self.rows = i[order], r[order]
        self.top = top = int(self.ids[-1]) if len(i) else 0  # the largest id listed
        self.table: np.ndarray | None = None
        if top <= 4 * len(i) + 4096:
            self.table = np.full(top + 1, NO_ROW, np.uint32)
            self.table[0] = 0
            self.table[self.ids] = self.rows

    def renumber(self, into: np.ndarray) -> None:
        """Rows ``r`` become ``into[r]`` (rows of the table merged)."""
        self.rows = into[self.rows]
        if self.table is not None:
            listed = self.table != NO_ROW
            self.table[listed] = into[self.table[listed]]

    def __call__(self, site: np.ndarray) -> np.ndarray:
        if self.table is not None:
            t = self.table
            return np.where(site < len(t), t[np.minimum(site, len(t) - 1)], NO_ROW)
        pos = np.minimum(np.searchsorted(self.ids, site), max(len(self.ids) - 1, 0))
        found = self.ids[pos] == site if len(self.ids) else np.zeros(len(site), bool)
        return np.where(found, self.rows[pos] if len(self.ids) else 0,
                        np.where(site == 0, 0, NO_ROW)).astype(np.uint32)  # fmt: skip


def build_sites(procs: list[Any]) -> Sites | None:
    """The trace's call sites over its rank processes, each process's
    :class:`SiteMap` set on it (``p.site_map``); None when no summary has
    call sites (a trace before format 3).  A site without frames counts
    as unknown (row 0)."""
    if not any(p.summary and p.summary.get("sites") is not None for p in procs):
        return None
    keys: dict[tuple, int] = {}
    raw: list[dict[str, Any]] = [_raw("", False, [])]  # row 0: unknown
    for p in procs:
        s = p.summary
        if p.rank is None or not s or s.get("sites") is None:
            continue
        modules = s.get("modules") or []
        ids, rows = [], []
        for site in s["sites"]:
            if site["lang"] == "python":
                frames = site["frames"]
            else:  # module index -1: an address in no module the runtime knew
                frames = [(*(modules[m] if m >= 0 else ("", "")), offset)
                          for m, offset in site["frames"]]  # fmt: skip
            key = (site["lang"], *frames[0][:3]) if frames else None
            row = keys.get(key, 0) if key else 0
            if key and not row:
                row = keys[key] = len(raw)
                raw.append(_raw(site["lang"], site["library"], frames))
            r = raw[row]
            r["count"] += site["count"]
            r["bytes"] += site["bytes"]
            r["time"] += site["time"]
            ids.append(site["id"])
            rows.append(row)
        p.site_map = SiteMap(ids, rows)
    rows, into = _same_lines(_rows(raw))
    for p in procs:
        if p.site_map is not None:
            p.site_map.renumber(into)
    return Sites.of(rows)


def _same_lines(rows: list[Row]) -> tuple[list[Row], np.ndarray]:
    """Rows that name the same line of the same module (two calls on one
    line, ``fwrite(...); fflush(...)``) made one, their counts summed: a
    reader thinks in lines, and a finding's first line must be the one
    with the most time.  Returns the rows and where each old row went."""
    into = np.arange(len(rows), dtype=np.uint32)
    kept: dict[tuple, int] = {}
    out: list[Row] = []
    for i, r in enumerate(rows):
        key = (r.lang, r.module, r.file, r.line, r.function, r.library)
        j = kept.get(key) if i and r.file and r.line else None
        if j is None:
            kept.setdefault(key, len(out))
            into[i] = len(out)
            out.append(r)
            continue
        into[i] = j
        o = out[j]
        out[j] = o._replace(count=_int64(o.count + r.count), bytes=_int64(o.bytes + r.bytes),
                            time=o.time + r.time)  # fmt: skip
    return out, into


def _raw(lang: str, library: bool, frames: list[tuple]) -> dict[str, Any]:
    return {"lang": lang, "library": library, "frames": frames, "count": 0, "bytes": 0,
            "time": 0.0}  # fmt: skip


class Row(NamedTuple):
    """A row of :class:`Sites` (the order of ``Sites.of``)."""

    file: str
    line: int
    function: str
    module: str
    offset: int
    lang: str
    note: str
    count: int
    bytes: int
    time: float
    library: bool
    caller: str


def _rows(raw: list[dict[str, Any]]) -> list[Row]:
    """Sites.of rows: Python sites as written, native ones looked up in
    their binaries (all offsets of a binary in one pass)."""
    sym = Symbolizer()
    for r in raw[1:]:
        if r["lang"] == "native":
            for path, build_id, offset in r["frames"]:
                sym.want(path, build_id, offset)
    sym.resolve()
    u = raw[0]
    out = [Row("", 0, "", "", -1, "", "", _int64(u["count"]), _int64(u["bytes"]), u["time"],
               False, "")]  # fmt: skip
    for r in raw[1:]:
        if r["lang"] == "python":
            (file, line, function), outer = r["frames"][0], r["frames"][1:]
            module, offset, note = "", -1, ""
            callers = [f"{_base(fi)}:{li} {fu}".rstrip() for fi, li, fu in outer]
        else:
            (module, build_id, offset), outer = r["frames"][0], r["frames"][1:]
            file, line, function, note = sym.get(module, build_id, offset)
            if r["library"]:
                note = "no frame of the program: the innermost library function" + (
                    f"; {note}" if note else "")  # fmt: skip
            callers = [sym.label(*f) for f in outer]
        offset -= 2**64 if offset >= 2**63 else 0  # kept in an int64 column
        out.append(Row(file, line, function, module, offset, r["lang"], note,
                       _int64(r["count"]), _int64(r["bytes"]), r["time"], r["library"],
                       "; ".join(callers)))  # fmt: skip
    return out


def _int64(v: int) -> int:
    """A sum over processes, within its int64 column (a damaged trace's
    counts could pass it)."""
    return min(v, 2**63 - 1)


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]
