"""The per-operation records of an iopilot trace (``S.rec``): read in chunks
into columns allocated once, checked, and the background thread's records
paired into operations."""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..model import RECORD_LAYERS, BackgroundOps, Records
from ..model.aggregate import unique
from ..vocabulary import FS_LAYERS, OP_NAMES, RECORD_FLAGS
from .checked import open_regular, where
from .trace_procs import HEADER, Proc, rec_limit
from .trace_sites import NO_ROW

N_OPS = len(OP_NAMES)
OP_MMAP = OP_NAMES.index("mmap")
QUEUED, BACKGROUND = RECORD_FLAGS["QUEUED"], RECORD_FLAGS["BACKGROUND"]
ERROR = RECORD_FLAGS["ERROR"]
CHUNK = 1 << 16  # records per read: one 3 MiB buffer, used again for every read


class RecordSink:
    """The columns of every kept record, allocated once for all processes
    (the records on disk bound their number) and filled chunk by chunk:
    no list of parts, no second copy when they are joined.

    Columns live in anonymous maps whose pages are brought in one call per
    chunk just before it is written (``MADV_POPULATE_WRITE``), not one page
    fault at a time: for 240 MB, 0.15 s of CPU instead of 0.4-0.65 s here.
    Pages past the last chunk are never touched and cost no memory, nor
    do pages only ever read: zeros are not written (see :meth:`add`).

    ``sites``: the rows of the trace's call-site table; their column takes
    two bytes per record instead of four when they fit."""

    def __init__(self, capacity: int, sites: int = 0) -> None:
        self.n = 0
        empty = Records.empty()
        self.cols: dict[str, np.ndarray] = {}
        self.maps: dict[str, mmap.mmap] = {}
        for f in _FIELDS:
            dtype = getattr(empty, f).dtype
            if f == "site" and sites <= 1 << 16:
                dtype = np.dtype(np.uint16)
            if capacity:
                m = mmap.mmap(-1, capacity * dtype.itemsize,
                              flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # fmt: skip
                self.maps[f] = m
                self.cols[f] = np.frombuffer(m, dtype)
            else:
                self.cols[f] = np.empty(0, dtype)

    def _populate(self, k: int, fields: Iterable[str]) -> None:
        """Bring in the pages of rows n .. n+k of these columns at once."""
        global _populate_works
        if not _populate_works:
            return
        for f in fields:
            size = self.cols[f].itemsize
            lo = self.n * size // mmap.PAGESIZE * mmap.PAGESIZE
            try:
                self.maps[f].madvise(_MADV_POPULATE_WRITE, lo, (self.n + k) * size - lo)
            except OSError:  # kernels before 5.14: pages come one fault at a time
                _populate_works = False
                return

    def add(self, r: np.ndarray, keep: np.ndarray, rank: int, layer: np.ndarray,
            shift: float, site: np.ndarray | None) -> None:  # fmt: skip
        """Append the records of ``r`` (on-disk rows) where ``keep`` is true,
        field by field straight into the columns: no copy of the rows.
        ``site``: the rows' call sites (rows of the trace's sites), None
        when all are unknown.  The columns start as zeros, and a chunk's
        zero threads or sites are not written: a program with one thread
        costs no memory for its thread column, nor rank 0 for its rank column."""
        k = int(np.count_nonzero(keep))
        if not k:
            return
        cols = {f: r[f] for f in _ON_DISK}
        cols["layer"] = layer
        if r["thread"].any():  # indexes beyond 16 bits (never seen) share the last value
            cols["thread"] = np.minimum(r["thread"], 0xFFFF).astype(np.uint16)
        if site is not None and site.any():
            cols["site"] = site.astype(self.cols["site"].dtype, copy=False)
        sl = slice(self.n, self.n + k)
        c = self.cols
        if self.maps:
            self._populate(k, (*cols, "rank") if rank else cols)
        if k == len(r):
            for f, v in cols.items():
                c[f][sl] = v
        else:
            idx = np.flatnonzero(keep)
            for f, v in cols.items():
                np.take(v, idx, out=c[f][sl])
        if rank:
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


_FIELDS = ("rank", "layer", "op", "file_id", "offset", "length", "start", "end", "site",
           "thread")  # fmt: skip
_ON_DISK = ("op", "file_id", "offset", "length", "start", "end")  # copied as they are
_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)  # Linux 5.14
_populate_works = True


def read_records(p: Proc, job_start: float, limit: int, sink: RecordSink,
                  meta_sink: RecordSink) -> None:  # fmt: skip
    """The data operations of one image, in chunks: memory holds what is kept.
    Counts what the file holds, and the file-system bytes of launchers."""
    if not p.rec_size:
        return
    path = p.path(".rec")
    fd, size = open_regular(path, rec_limit(max(limit, p.summary["records"] if p.summary else 0)))
    layers = p.layers
    model_layer = np.full(256, 255, np.uint8)
    fs_layer = np.zeros(256, bool)
    for i, name in enumerate(layers[:256]):
        if name in RECORD_LAYERS:
            model_layer[i] = RECORD_LAYERS.index(name)
        fs_layer[i] = name in FS_LAYERS
    shift = p.t0 - job_start
    last = 0.0
    with os.fdopen(fd, "rb") as f:
        f.seek(HEADER.itemsize)
        dtype = p.record
        whole = (size - HEADER.itemsize) // dtype.itemsize
        p.cut = (size - HEADER.itemsize) % dtype.itemsize != 0
        done = 0
        buf = np.empty(min(CHUNK, whole), dtype)
        # a complete summary lists every site its records name
        strict = p.site_map is not None and p.summary["ended_by"] != "flush"
        while done < whole:
            want = min(CHUNK, whole - done)
            got = (f.readinto(buf[:want].view(np.uint8)) or 0) // dtype.itemsize
            r = buf[:got]
            if got < want:
                p.cut = True  # the file shrank while it was read
            if not got:
                break
            _check_records(path, r, done, len(layers))
            site = _sites(path, r, done, p, strict)
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
            sink.add(r, keep, p.rank, layer, shift, site)
            meta_sink.add(r, ~data & ~behind & known, p.rank, layer, shift, site)
            if behind.any():
                p.background.append(r[behind & known])
    p.on_disk = done
    if not p.summary:
        p.t_end = last


def background_ops(procs: list[Proc], job_start: float) -> BackgroundOps | None:
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


def _sites(path: Path, r: np.ndarray, first: int, p: Proc, strict: bool) -> np.ndarray | None:
    """The rows of the trace's sites that records ``r`` name; None when
    they are all unknown (format 2, or a process without its summary).
    ``strict``: an id beyond the largest the summary lists means a damaged
    file; other ids it does not list (or any, when the summary was written
    before the process ended) are unknown, and counted."""
    site_map = p.site_map
    if site_map is None or "site" not in r.dtype.names:
        return None
    rows = site_map(r["site"])
    bad = np.flatnonzero(rows == NO_ROW)
    if not len(bad):
        return rows
    if strict:
        beyond = bad[r["site"][bad] > site_map.top]
        if len(beyond):
            raise InputError(where(path), f"damaged record file: record {first + beyond[0]:,} "
                                           f"has call-site id {r['site'][beyond[0]]}, beyond "
                                           f"those its process summary lists "
                                           f"({site_map.top})")  # fmt: skip
    p.unlisted_sites += len(bad)
    rows[bad] = 0
    return rows


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
