"""The program's lines behind each finding: its top call sites.

Traces with call sites (:attr:`Trace.sites <iopilot.model.Trace>`, a
``site`` per record) let every finding about operations name where the
program issued them.  For each finding of level INFO or above, the records
its check says it is about (:meth:`Check.concerns
<iopilot.checks.base.Check.concerns>`: layers, operations, small requests)
narrowed to the entries the finding lists (its files, all those responsible
when the check listed them with ``ctx.top_files``; else its ranks, else its
phases) are summed per call site: calls, and seconds (end - start).  The
:data:`SITES_LISTED` sites with the most seconds join the finding's
``locations`` as :class:`~iopilot.checks.base.SourceLocation`, most seconds
first; ties (to the microsecond) go to more calls, then to the lower site id
(the same trace gives the same order).  Site 0 (unknown) is never listed.

When no record of the listed files matches (a finding that lists an HDF5
file whose records name datasets), the files do not narrow the records: the
layers and operations still do.  Sources without call sites (Darshan logs,
traces of version 2) get no source locations.

Whole-column work only: ``np.bincount`` over the site ids of a finding's
records, weighted by their durations, in steps of :data:`STEP` records
(0.1 s per finding for 5 M records on the 2-core test machine), for the
findings left once those of one cause are merged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import numpy as np

from ..model import OP_NAMES, RECORD_LAYERS, Records, Sites
from ..model.aggregate import isin, unique
from ..vocabulary import MODULE
from .base import (
    Check,
    Context,
    FileList,
    FileLocation,
    Finding,
    Level,
    Operations,
    PhaseLocation,
    RankLocation,
    SourceLocation,
)

SITES_LISTED = 3  # call sites a finding names
STEP = 1 << 18  # records per step of a pass: its temporaries stay a few MiB
# Where each record layer sits in the stack (POSIX and STDIO 1, MPI-IO 2, HDF5 3).
_LEVEL = {name: MODULE[name].level for name in RECORD_LAYERS}
_LEVELS = np.zeros(256, np.int8)  # by layer code
_LEVELS[: len(RECORD_LAYERS)] = [_LEVEL[x] for x in RECORD_LAYERS]

_UNNAMED = re.compile(r"<file (0x[0-9a-f]+)>")


def add_call_sites(ctx: Context, chk: Check, findings: Iterable[Finding]) -> None:
    """Append to each finding of ``chk`` (INFO and above) its top call sites."""
    sites = ctx.trace.sites
    if sites is None or len(sites) <= 1:
        return
    for f in findings:
        if f.level < Level.INFO:
            continue
        ops = chk.concerns(ctx, f)
        if ops is not None:
            f.locations.extend(top_sites(ctx, ops, f))


def top_sites(ctx: Context, ops: Operations, f: Finding,
              n: int = SITES_LISTED) -> list[SourceLocation]:  # fmt: skip
    """The ``n`` call sites with the most seconds among the operations ``ops``
    of finding ``f`` (see the module's docstring)."""
    sites = ctx.trace.sites
    if sites is None:
        return []
    size = len(sites)
    listed = _Listed(ctx, f)
    calls, seconds = _sums(ctx, ops, listed, size)
    if listed.files is not None and not calls[1:].any():  # none on the listed files
        listed.files = None
        calls, seconds = _sums(ctx, ops, listed, size)
    calls[0] = 0  # unknown is no place in the program
    known = np.flatnonzero(calls > 0)
    if not len(known):
        return []
    # Seconds as reports show them (µs): sums in another order are no tie-break.
    shown = np.round(seconds[known], 6)
    order = known[np.lexsort((known, -calls[known], -shown))][:n]
    return [_location(sites, int(i), int(calls[i]), float(seconds[i])) for i in order]


class _Listed:
    """What a finding lists, to narrow its records by: the ids of its files,
    else its ranks, else its phases (None each when it lists none)."""

    def __init__(self, ctx: Context, f: Finding) -> None:
        where = [e.where() for e in f.files]
        paths = [loc.path for loc in where if isinstance(loc, FileLocation)]
        self.files = _file_ids(ctx, paths) if paths else None
        if paths and isinstance(f.files, FileList) and len(paths) == len(where):
            self.files = unique(f.files.ids)  # every file responsible, not only those listed
        if self.files is not None and not len(self.files):
            self.files = None  # names the trace does not know: no narrowing
        ranks = [loc.rank for loc in where if isinstance(loc, RankLocation)]
        self.ranks = np.array(ranks, np.int64) if ranks and not paths else None
        phases = [(loc.start_s, loc.end_s) for loc in where if isinstance(loc, PhaseLocation)]
        self.phases = phases if phases and not paths and not ranks else None

    def mask(self, table: Records, sl: slice) -> np.ndarray | None:
        """Which records of ``table[sl]`` the listed entries hold (None: all)."""
        if self.files is not None:
            return isin(table.file_id[sl], self.files)
        if self.ranks is not None:
            return isin(table.rank[sl], self.ranks)
        if self.phases is not None:
            start, end = table.start[sl], table.end[sl]
            inside = np.zeros(len(start), bool)
            for a, b in self.phases:
                inside |= (start <= b) & (end >= a)
            return inside
        return None


def _sums(ctx: Context, ops: Operations, listed: _Listed,
          size: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Per call site: the calls and seconds of the records ``ops`` and
    ``listed`` select, over the data and the metadata records, in steps of
    :data:`STEP` records (temporaries stay small whatever the trace).

    Layers stack (an ``H5Dwrite`` is also the POSIX writes beneath it, made
    from the same line), so when ``ops`` spans layers of different levels
    each file counts at the highest of them that has selected records on it,
    as the I/O time does: a call counts once."""
    calls = np.zeros(size, np.int64)
    seconds = np.zeros(size, np.float64)
    t = ctx.trace
    stacked = len({_LEVEL[x] for x in ops.layers if x in _LEVEL}) > 1
    masked = ops.data is not None or ops.meta is not None
    for table, own in ((t.records, ops.data), (t.meta_records, ops.meta)):
        if table.site is None or not len(table) or (masked and own is None):
            continue
        steps = list(_selected(ctx, table, own, ops, listed))
        if stacked and own is None and steps:
            steps = _highest_per_file(table, steps)
        for sl, m in steps:
            ids = table.site[sl][m].astype(np.int64)
            ids[(ids < 0) | (ids >= size)] = 0  # a site the table does not know: unknown
            dur = np.clip(table.end[sl][m] - table.start[sl][m], 0.0, None)
            calls += np.bincount(ids, minlength=size)
            seconds += np.bincount(ids, weights=dur, minlength=size)
    return calls, seconds


def _selected(ctx: Context, table: Records, own: np.ndarray | None, ops: Operations,
              listed: _Listed) -> Iterator[tuple[slice, np.ndarray]]:  # fmt: skip
    """(step, mask) of the records of ``table`` that ``ops`` (or ``own``,
    the check's own mask) and ``listed`` select, steps with none left out."""
    for a in range(0, len(table), STEP):
        sl = slice(a, a + STEP)
        m = own[sl].copy() if own is not None else _base(ctx, table, sl, ops)
        if m.any():
            narrow = listed.mask(table, sl)
            if narrow is not None:
                m &= narrow
        if m.any():
            yield sl, m


_Steps = list[tuple[slice, np.ndarray]]


def _highest_per_file(table: Records, steps: _Steps) -> _Steps:
    """``steps`` keeping, per file, only the records of the highest layer
    (:data:`_LEVEL`) among the selected ones."""
    files, tops = [], []
    for sl, m in steps:
        f, inv = np.unique(table.file_id[sl][m], return_inverse=True)
        top = np.zeros(len(f), np.int8)
        np.maximum.at(top, inv, _LEVELS[table.layer[sl][m]])
        files.append(f)
        tops.append(top)
    f_all, inv = np.unique(np.concatenate(files), return_inverse=True)
    top_all = np.zeros(len(f_all), np.int8)
    np.maximum.at(top_all, inv, np.concatenate(tops))
    out = []
    for sl, m in steps:
        level = _LEVELS[table.layer[sl]]
        at = np.searchsorted(f_all, table.file_id[sl])
        keep = m & (level == top_all[np.minimum(at, len(f_all) - 1)])
        if keep.any():
            out.append((sl, keep))
    return out


def _location(s: Sites, i: int, calls: int, seconds: float) -> SourceLocation:
    return SourceLocation(str(s.file[i]), int(s.line[i]), str(s.function[i]), calls=calls,
                          seconds=round(seconds, 6), label=s.label(i), module=str(s.module[i]),
                          offset=int(s.offset[i]), note=str(s.note[i]),
                          caller=str(s.caller[i]) if s.caller is not None else "")  # fmt: skip


def _base(ctx: Context, table: Records, sl: slice, ops: Operations) -> np.ndarray:
    """Which records of ``table[sl]`` are in ``ops``' layers and operations
    (small ones and those of its ranks, if asked)."""
    layer_on = np.zeros(256, bool)
    layer_on[[RECORD_LAYERS.index(x) for x in ops.layers if x in RECORD_LAYERS]] = True
    op_on = np.zeros(256, bool)
    op_on[[OP_NAMES.index(x) for x in ops.ops if x in OP_NAMES]] = True
    mask = layer_on[table.layer[sl]] & op_on[table.op[sl]]
    if ops.small:
        mask &= table.length[sl] < int(ctx.thresholds["small_request_size"])
    if ops.ranks is not None:
        mask &= isin(table.rank[sl], np.array(ops.ranks, np.int64))
    return mask


def _file_ids(ctx: Context, paths: list[str]) -> np.ndarray:
    """Sorted record ids of the files named ``paths`` (as ``Trace.name`` spells them)."""
    by_name = ctx.cache.get("file_ids_by_name",
                            lambda: {v: k for k, v in ctx.trace.names.items()})  # fmt: skip
    out = []
    for p in paths:
        if p in by_name:
            out.append(by_name[p])
        elif m := _UNNAMED.fullmatch(p):
            out.append(int(m.group(1), 16))
    return unique(np.array(out, np.uint64))
