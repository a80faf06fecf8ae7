"""A whole trace as a timeline: Perfetto's protobuf trace format, or Chrome's
JSON trace-event format (``iopilot export perfetto``).

Tracks: a process per rank (pid = rank + 1: Perfetto keeps pid 0 for the
idle process), named ``rank N``; a thread track per (rank, thread index)
with one slice per operation, data and metadata alike (named ``POSIX
write``, ``MPIIO open`` ...; arguments file, offset, bytes, layer, op and,
when the trace has call sites, site); a ``background I/O`` track per rank
for what write-behind and the event-set engine did (from issue to
completion); an ``I/O phases`` track for the job.

A track shows nested slices only: a slice that starts inside another and
ends after it (two threads a Darshan log does not tell apart, a
background operation overlapping the next) goes to an extra track beside
it, ``thread 0 (overlap 1)``, so no slice is lost or cut.

Both files are written a chunk of slices at a time from whole-column NumPy
operations (the protobuf varints too): besides the loaded trace, the export
keeps 8 bytes per operation (its place in the writing order and its track)
and the chunk's working arrays.  ``iopilot bench export`` measures time and
peak memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, BinaryIO

import numpy as np

from ..checks.phases import phases
from ..model import RECORD_LAYERS, BackgroundOps, Trace
from ..model.aggregate import unique
from ..vocabulary import OP_NAMES

CHUNK = 1 << 16  # slices encoded at once: ~10 MB of working arrays
SEQ = 1  # the one packet sequence every event is on


# ---------------------------------------------------------------------------
# The timeline: tracks and slices, format-free
# ---------------------------------------------------------------------------


class Track:
    """One track: a rank's process, a thread, an overlap lane, background
    I/O or the phases.  ``pid``/``tid`` are what both formats name it by."""

    __slots__ = ("kind", "name", "parent", "pid", "rank", "thread", "tid", "uuid")

    def __init__(self, uuid: int, name: str, kind: str, *, pid: int = 0, tid: int = 0,
                 parent: int = 0, rank: int = -1, thread: int = -1) -> None:  # fmt: skip
        self.uuid, self.name, self.kind = uuid, name, kind
        self.pid, self.tid, self.parent = pid, tid, parent
        self.rank, self.thread = rank, thread


class Chunk:
    """Slices ``sl`` of a :class:`Slices`, columns ready to encode."""

    __slots__ = ("args", "end", "name", "start", "track")

    def __init__(self, start: np.ndarray, end: np.ndarray, track: np.ndarray,
                 name: np.ndarray, args: list[tuple[str, str, Any]]) -> None:  # fmt: skip
        self.start, self.end = start, end  # int64 ns since the job start
        self.track = track  # track uuid of each slice
        self.name = name  # int64 index into Slices.names
        # (argument name, kind, column): kind "str" (codes into the strings
        # of Slices.strings[name], -1 = absent), "int", "uint" or "float".
        self.args = args


class Slices:
    """Slices of one kind (operations, background operations, phases), in
    the order they are written: per track, by start, the longer first on a
    tie (a parent before its child: the trace processor orders events by
    time and keeps the file's order on ties)."""

    def __init__(self, n: int, names: list[str], arg_kinds: list[tuple[str, str]],
                 strings: dict[str, list[str]], chunk: Any) -> None:  # fmt: skip
        self.n = n
        self.names = names
        self.arg_kinds = arg_kinds  # (argument name, kind) in order
        self.strings = strings  # per "str" argument: its values
        self.chunk: Any = chunk  # slice -> Chunk

    def __len__(self) -> int:
        return self.n


def _table(start: np.ndarray, end: np.ndarray, track: np.ndarray, name: np.ndarray,
           names: list[str], args: list[tuple[str, str, Any]]) -> Slices:  # fmt: skip
    """Slices held whole (background operations, phases: few)."""
    kinds = [(a, k) for a, k, _ in args]
    strings = {a: c[1] for a, k, c in args if k == "str"}
    cols = [(a, k, c[0] if k == "str" else c) for a, k, c in args]

    def chunk(sl: slice) -> Chunk:
        return Chunk(start[sl], end[sl], track[sl], name[sl], [(a, k, c[sl]) for a, k, c in cols])

    return Slices(len(start), names, kinds, strings, chunk)


def _ns(seconds: np.ndarray) -> np.ndarray:
    return np.rint(np.asarray(seconds, np.float64) * 1e9).astype(np.int64)


def lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Lane of each slice (sorted by start, longer first on a tie) such that
    the slices of a lane nest or follow each other, never half overlap.

    Operations of one thread nest (an MPI-IO call around its POSIX calls) or
    follow each other, so the common case takes one vectorised test; only a
    track with half-overlapping slices goes through the stack walk."""
    n = len(start)
    lane = np.zeros(n, np.int64)
    if n < 2:
        return lane
    reach = np.maximum.accumulate(end)
    if not np.any(start[1:] < reach[:-1]):  # no overlap at all
        return lane
    stacks: list[list[int]] = [[]]
    out = lane.tolist()
    for i, (s, e) in enumerate(zip(start.tolist(), end.tolist(), strict=True)):
        for k, st in enumerate(stacks):
            while st and st[-1] <= s:
                st.pop()
            if not st or e <= st[-1]:
                st.append(e)
                out[i] = k
                break
        else:
            stacks.append([e])
            out[i] = len(stacks) - 1
    return np.asarray(out, np.int64)


def _small(n: int) -> type:
    return np.int32 if n < 2**31 else np.int64


class Timeline:
    """The tracks and slices of a trace, for both writers.

    Operations are never copied whole: the timeline keeps their writing
    order and track (4 bytes each for up to 2**31 operations) and reads
    the columns chunk by chunk when writing."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.tracks: list[Track] = []
        self._data, self._meta = trace.records, trace.meta_records
        self.nd = len(self._data)
        self.n = self.nd + len(self._meta)
        self._uuid = 1
        bg = trace.background
        bg_ranks = bg.rank if bg is not None and len(bg) else np.zeros(0, np.int32)
        all_ranks = unique(np.concatenate([unique(self._data.rank),
                                              unique(self._meta.rank),
                                              unique(bg_ranks)]).astype(np.int64))  # fmt: skip
        self.process: dict[int, Track] = {}
        hosts = trace.job.hosts if len(set(trace.job.hosts.values())) > 1 else {}
        for r in all_ranks.tolist():
            name = f"rank {r}" + (f" ({hosts[r]})" if r in hosts else "")  # which node, on several
            self.process[r] = self._new_track(name, "process", pid=r + 1, rank=r)
        # The job's own "process" (the phases in JSON) after the ranks; the
        # tids of threads other than each rank's first after that.
        self.job_pid = int(all_ranks.max()) + 2 if len(all_ranks) else 1
        self.next_tid = self.job_pid + 1
        self.files, self.file_names = self._files()
        self._order_operations()
        self.ops = self._op_slices()
        self.background = self._background_slices(bg) if bg is not None and len(bg) else None
        self.phases = self._phase_slices()

    def _new_track(self, name: str, kind: str, **kw: Any) -> Track:
        t = Track(self._uuid, name, kind, **kw)
        self._uuid += 1
        self.tracks.append(t)
        return t

    def _order_operations(self) -> None:
        """Group operations by (rank, thread), sort each group by start (the
        longer first on a tie), and give each a track: its thread's, or an
        overlap lane beside it."""
        itype = _small(self.n)
        key = np.concatenate([self._data.rank, self._meta.rank]).astype(itype)
        threads = np.concatenate([self._data.thread, self._meta.thread])
        per_rank = int(threads.max()) + 1 if len(threads) else 1
        if per_rank > 1:
            key = key.astype(np.int64) * per_rank + threads
        del threads
        # Groups by counting when the keys are small (no sort of every
        # operation), else by np.unique.
        if len(key) and int(key.min()) >= 0 and int(key.max()) < 1 << 24:
            counts = np.bincount(key)
            pairs = np.flatnonzero(counts)
            lut = np.zeros(len(counts), np.int32)
            lut[pairs] = np.arange(len(pairs), dtype=np.int32)
            grp = lut[key]
            sizes = counts[pairs]
        else:
            pairs, grp, sizes = np.unique(key, return_inverse=True, return_counts=True)
        del key
        # A stable sort of 16-bit group numbers is a radix sort: linear time.
        grp = grp.astype(np.uint16 if len(pairs) < 1 << 16 else itype)
        order = np.argsort(grp, kind="stable").astype(itype)
        del grp
        heads = np.concatenate([[0], np.cumsum(sizes)]).tolist()
        self.track = np.empty(self.n, np.uint32)
        for g, p in enumerate(pairs.tolist()):
            r, t = divmod(p, per_rank)
            if t == 0:
                tid = r + 1  # thread 0 is the process's main thread
            else:
                tid, self.next_tid = self.next_tid, self.next_tid + 1
            base = self._new_track(f"thread {t}", "thread", pid=r + 1, tid=tid,
                                   parent=self.process[r].uuid, rank=r, thread=t)  # fmt: skip
            lo, hi = heads[g], heads[g + 1]
            idx = order[lo:hi]
            start = _ns(self._gather("start", idx))
            end = np.maximum(_ns(self._gather("end", idx)), start)
            local = np.lexsort((-end, start))
            order[lo:hi] = idx[local]
            ln = lanes(start[local], end[local])
            self.track[lo:hi] = self._lane_uuids(base, ln, f"thread {t}")
        self.order = order

    def _lane_uuids(self, base: Track, ln: np.ndarray, what: str) -> np.ndarray:
        """Track uuid of each slice: lane 0 is ``base``, lane k a new track beside it."""
        uu = [base.uuid]
        for k in range(1, int(ln.max()) + 1 if len(ln) else 1):
            t = self._new_track(f"{what} (overlap {k})", "lane", pid=base.pid,
                                tid=self.next_tid, parent=self.process[base.rank].uuid,
                                rank=base.rank, thread=base.thread)  # fmt: skip
            self.next_tid += 1
            uu.append(t.uuid)
        return np.asarray(uu, np.uint32)[ln]

    def _gather(self, name: str, idx: np.ndarray) -> np.ndarray:
        """Column ``name`` of operations ``idx`` (data records first, then meta)."""
        d = getattr(self._data, name)
        m = getattr(self._meta, name)
        if not len(m):
            return d[idx]
        if not len(d):
            return m[idx - self.nd]
        is_d = idx < self.nd
        out = np.empty(len(idx), np.result_type(d, m))
        out[is_d] = d[idx[is_d]]
        out[~is_d] = m[idx[~is_d] - self.nd]
        return out

    def _op_slices(self) -> Slices:
        sites = trace_sites(self.trace)
        names = [f"{layer} {op}" for layer in RECORD_LAYERS for op in OP_NAMES]
        kinds = [("file", "str"), ("offset", "int"), ("bytes", "uint"), ("layer", "str"),
                 ("op", "str")]  # fmt: skip
        strings = {"file": self.file_names, "layer": list(RECORD_LAYERS), "op": list(OP_NAMES)}
        if sites is not None:
            kinds.append(("site", "str"))
            strings["site"] = sites

        def chunk(sl: slice) -> Chunk:
            idx = self.order[sl]
            start = _ns(self._gather("start", idx))
            end = np.maximum(_ns(self._gather("end", idx)), start)
            layer = self._gather("layer", idx).astype(np.int64)
            op = self._gather("op", idx).astype(np.int64)
            args: list[tuple[str, str, Any]] = [
                ("file", "str", self.files(self._gather("file_id", idx))),
                ("offset", "int", self._gather("offset", idx)),
                ("bytes", "uint", self._gather("length", idx)),
                ("layer", "str", layer),
                ("op", "str", op),
            ]
            if sites is not None:  # site 0 is "unknown": no argument
                args.append(("site", "str", self._gather("site", idx).astype(np.int64) - 1))
            return Chunk(start, end, self.track[sl], layer * len(OP_NAMES) + op, args)

        return Slices(self.n, names, kinds, strings, chunk)

    def _files(self) -> tuple[Any, list[str]]:
        """(file ids -> codes, the file names) for the file argument."""
        bg = self.trace.background
        ids = unique(np.concatenate([
            unique(self._data.file_id), unique(self._meta.file_id),
            bg.file_id if bg is not None else np.zeros(0, np.uint64)]))  # fmt: skip
        names = [self.trace.name(int(f)) for f in ids.tolist()]

        def code(fid: np.ndarray) -> np.ndarray:
            return np.searchsorted(ids, fid).astype(np.int64)

        return code, names

    def _background_slices(self, bg: BackgroundOps) -> Slices:
        start = _ns(bg.issued)
        end = np.maximum(_ns(bg.completed), start)
        rank = bg.rank.astype(np.int64)
        order = np.lexsort((-end, start, rank))
        start, end, rank = start[order], end[order], rank[order]
        track = np.empty(len(order), np.uint32)
        heads = np.flatnonzero(np.r_[True, rank[1:] != rank[:-1]]).tolist()
        for lo, hi in zip(heads, [*heads[1:], len(order)], strict=True):
            r = int(rank[lo])
            base = self._new_track("background I/O", "background", pid=r + 1,
                                   tid=self.next_tid, parent=self.process[r].uuid,
                                   rank=r)  # fmt: skip
            self.next_tid += 1
            track[lo:hi] = self._lane_uuids(base, lanes(start[lo:hi], end[lo:hi]),
                                            "background I/O")  # fmt: skip
        op = bg.op[order].astype(np.int64)
        failed = bg.failed[order].astype(np.int64) - 1  # -1: absent
        return _table(start, end, track, op, [f"{o} (background)" for o in OP_NAMES], [
            ("file", "str", (self.files(bg.file_id[order]), self.file_names)),
            ("offset", "int", bg.offset[order].astype(np.int64)),
            ("bytes", "uint", bg.length[order].astype(np.int64)),
            ("op", "str", (op, list(OP_NAMES))),
            ("queued_s", "float", bg.queued[order].astype(np.float64)),
            ("failed", "str", (failed, ["yes"])),
        ])  # fmt: skip

    def _phase_slices(self) -> Slices | None:
        """The report's I/O phases: of MPI-IO if it was traced (what the
        program asked), else of POSIX, as the phase checks choose."""
        recs = self._data
        counts = np.bincount(recs.layer, minlength=len(RECORD_LAYERS))
        layer = next((n for n in ("MPIIO", "POSIX") if counts[RECORD_LAYERS.index(n)]), None)
        if layer is None:
            return None
        mask = recs.layer == RECORD_LAYERS.index(layer)
        ph = phases(recs if mask.all() else recs.select(mask))
        n = len(ph["start"])
        t = self._new_track("I/O phases", "phases", pid=self.job_pid, tid=self.job_pid)
        start = _ns(ph["start"])
        end = np.maximum(_ns(ph["end"]), start)
        return _table(start, end, np.full(n, t.uuid, np.uint32), np.arange(n),
                      [f"phase {i + 1}" for i in range(n)], [
            ("layer", "str", (np.zeros(n, np.int64), [layer])),
            ("ops", "uint", ph["ops"].astype(np.int64)),
            ("bytes", "uint", ph["bytes"].astype(np.int64)),
            ("ranks", "uint", ph["ranks"].astype(np.int64)),
            ("slowest_rank", "int", ph["slowest_rank"].astype(np.int64)),
            ("busy_s", "float", ph["busy"].astype(np.float64)),
        ])  # fmt: skip

    def all_slices(self) -> list[Slices]:
        return [s for s in (self.ops, self.background, self.phases) if s is not None]


def trace_sites(trace: Trace) -> list[str] | None:
    """Labels of the trace's call sites from row 1 on (row 0 is "unknown":
    no argument), or None when the trace has none."""
    if trace.sites is None or len(trace.sites) < 2:
        return None
    return [trace.sites.label(i) for i in range(1, len(trace.sites))]


def _chunks(n: int, size: int) -> Iterator[slice]:
    for lo in range(0, n, size):
        yield slice(lo, min(n, lo + size))


# ---------------------------------------------------------------------------
# Protobuf: a few scalar helpers for descriptors, whole columns for events
# ---------------------------------------------------------------------------


def _vi(x: int) -> bytes:
    """A varint; negative numbers as 64-bit two's complement (int64 fields)."""
    x &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = x & 0x7F
        x >>= 7
        if x:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _fv(field: int, x: int) -> bytes:
    return _vi(field << 3) + _vi(x)


def _fb(field: int, data: bytes | str) -> bytes:
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    return _vi(field << 3 | 2) + _vi(len(data)) + data


def _packet(body: bytes) -> bytes:
    return _fb(1, body)  # Trace.packet


def _track_packet(t: Track) -> bytes:
    d = _fv(1, t.uuid)
    if t.parent and t.kind != "thread":  # a thread's process is its pid
        d += _fv(5, t.parent)
    if t.kind == "process":
        d += _fb(3, _fv(1, t.pid) + _fb(6, t.name))
    elif t.kind == "thread":
        d += _fb(4, _fv(1, t.pid) + _fv(2, t.tid) + _fb(5, t.name))
    else:
        d += _fb(2, t.name)
    return _packet(_fb(60, d))


class _Cols:
    """A message built for N rows at once: parts of (N, width) bytes with
    the valid length of each row; the bytes of row i are the first
    ``len[i]`` bytes of each part, in order."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.parts: list[tuple[np.ndarray, np.ndarray]] = []

    def const(self, data: bytes, present: np.ndarray | None = None) -> None:
        row = np.frombuffer(data, np.uint8)
        m = np.broadcast_to(row, (self.n, len(row)))
        ln = np.full(self.n, len(row), np.int64)
        self.parts.append((m, ln if present is None else ln * present))

    def varint(self, v: np.ndarray, present: np.ndarray | None = None) -> None:
        m, ln = _varints(v)
        self.parts.append((m, ln if present is None else ln * present))

    def fixed64(self, v: np.ndarray, present: np.ndarray | None = None) -> None:
        m = np.ascontiguousarray(v, "<f8").view(np.uint8).reshape(self.n, 8)
        ln = np.full(self.n, 8, np.int64)
        self.parts.append((m, ln if present is None else ln * present))

    def field_varint(self, field: int, v: np.ndarray, present: np.ndarray | None = None) -> None:
        self.const(_vi(field << 3), present)
        self.varint(v, present)

    def field_msg(self, field: int, msg: _Cols, present: np.ndarray | None = None) -> None:
        self.const(_vi(field << 3 | 2), present)
        self.varint(msg.length(), present)
        if present is None:
            self.parts += msg.parts
        else:
            self.parts += [(m, ln * present) for m, ln in msg.parts]

    def length(self) -> np.ndarray:
        total = np.zeros(self.n, np.int64)
        for _, ln in self.parts:
            total += ln
        return total

    def tobytes(self) -> bytes:
        mats = np.concatenate([m for m, _ in self.parts], axis=1)
        keep = np.concatenate([np.arange(m.shape[1])[None, :] < ln[:, None]
                               for m, ln in self.parts], axis=1)  # fmt: skip
        return mats[keep].tobytes()


def _varints(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, width) bytes and (N,) lengths of the varints of ``v`` (two's
    complement for negative numbers)."""
    x = np.asarray(v).astype(np.int64, copy=False).view(np.uint64)
    groups = [(x & 0x7F).astype(np.uint8)]
    ln = np.ones(len(x), np.int64)
    x = x >> np.uint64(7)
    while x.any():
        ln += x != 0
        groups.append((x & 0x7F).astype(np.uint8))
        x = x >> np.uint64(7)
    m = np.stack(groups, axis=1)
    more = np.arange(m.shape[1])[None, :] < (ln - 1)[:, None]
    m |= more.astype(np.uint8) << 7
    return m, ln


def _interned(kind: int, entries: list[tuple[int, str]], name_field: int) -> list[bytes]:
    """InternedData packets of ``entries`` (iid, string), a few thousand a packet."""
    out = []
    for lo in range(0, len(entries), 4096):
        body = b"".join(_fb(kind, _fv(1, iid) + _fb(name_field, s))
                        for iid, s in entries[lo:lo + 4096])  # fmt: skip
        out.append(_packet(_fv(10, SEQ) + _fv(13, 2) + _fb(12, body)))
    return out


class _ProtoStrings:
    """Interning ids: event names, argument names and string values."""

    def __init__(self, tl: Timeline) -> None:
        self.packets: list[bytes] = []
        events: list[tuple[int, str]] = []
        arg_names: dict[str, int] = {}
        values: list[tuple[int, str]] = []
        self.name_base: list[int] = []
        self.value_base: list[list[int]] = []
        for s in tl.all_slices():
            self.name_base.append(len(events) + 1)
            events += [(self.name_base[-1] + i, n) for i, n in enumerate(s.names)]
            bases = []
            for name, kind in s.arg_kinds:
                arg_names.setdefault(name, len(arg_names) + 1)
                if kind == "str":
                    bases.append(len(values) + 1)
                    values += [(bases[-1] + i, v) for i, v in enumerate(s.strings[name])]
                else:
                    bases.append(0)
            self.value_base.append(bases)
        self.arg_names = arg_names
        self.packets += _interned(2, events, 2)  # EventName {iid, name}
        self.packets += _interned(3, list((i, n) for n, i in arg_names.items()), 2)
        self.packets += _interned(29, values, 2)  # InternedString {iid, str}


def _proto_events(s: Slices, k: int, strings: _ProtoStrings, sl: slice) -> bytes:
    """Begin and end packets of slices ``sl``, each begin followed by its end
    (the trace processor orders them by time, ties in file order)."""
    n = sl.stop - sl.start
    c: Chunk = s.chunk(sl)
    ev = _Cols(n)
    ev.const(_fv(9, 1))  # type: TYPE_SLICE_BEGIN
    ev.field_varint(11, c.track)  # track_uuid
    ev.field_varint(10, c.name + strings.name_base[k])  # name_iid
    for (aname, kind, col), base in zip(c.args, strings.value_base[k], strict=True):
        a = _Cols(n)
        a.const(_fv(1, strings.arg_names[aname]))  # name_iid
        present = None
        if kind == "str":
            codes = col
            present = (codes >= 0).astype(np.int64)
            a.field_varint(17, np.maximum(codes, 0) + base)  # string_value_iid
        elif kind == "int":
            a.field_varint(4, col)
        elif kind == "uint":
            a.field_varint(3, col)
        else:
            a.const(_vi(5 << 3 | 1))  # double_value, fixed64
            a.fixed64(col)
        ev.field_msg(4, a, present)  # debug_annotations
    begin = _Cols(n)
    begin.field_varint(8, c.start)  # timestamp
    begin.const(_fv(10, SEQ) + _fv(13, 2))  # sequence id, SEQ_NEEDS_INCREMENTAL_STATE
    begin.field_msg(11, ev)  # track_event
    end_ev = _Cols(n)
    end_ev.const(_fv(9, 2))  # TYPE_SLICE_END
    end_ev.field_varint(11, c.track)
    end = _Cols(n)
    end.field_varint(8, c.end)
    end.const(_fv(10, SEQ) + _fv(13, 2))
    end.field_msg(11, end_ev)
    out = _Cols(n)
    out.field_msg(1, begin)
    out.field_msg(1, end)
    return out.tobytes()


def write_proto(tl: Timeline, out: BinaryIO, chunk: int = CHUNK) -> None:
    """The timeline as a Perfetto protobuf trace (a ``Trace`` message)."""
    out.write(_packet(_fv(10, SEQ) + _fv(13, 1) + _fv(87, 1)))  # incremental state cleared
    for t in tl.tracks:
        out.write(_track_packet(t))
    strings = _ProtoStrings(tl)
    for p in strings.packets:
        out.write(p)
    for k, s in enumerate(tl.all_slices()):
        for sl in _chunks(len(s), chunk):
            out.write(_proto_events(s, k, strings, sl))


# ---------------------------------------------------------------------------
# Chrome JSON trace events
# ---------------------------------------------------------------------------


def _json_meta(tl: Timeline) -> list[dict[str, Any]]:
    meta: list[dict[str, Any]] = []
    for t in tl.tracks:
        if t.kind == "process":
            meta.append({"ph": "M", "pid": t.pid, "tid": 0, "name": "process_name",
                         "args": {"name": t.name}})  # fmt: skip
            meta.append({"ph": "M", "pid": t.pid, "tid": 0, "name": "process_sort_index",
                         "args": {"sort_index": t.rank}})  # fmt: skip
        else:
            meta.append({"ph": "M", "pid": t.pid, "tid": t.tid, "name": "thread_name",
                         "args": {"name": t.name}})  # fmt: skip
            meta.append({"ph": "M", "pid": t.pid, "tid": t.tid, "name": "thread_sort_index",
                         "args": {"sort_index": t.tid}})  # fmt: skip
            if t.kind == "phases":
                meta.append({"ph": "M", "pid": t.pid, "tid": 0, "name": "process_name",
                             "args": {"name": "job"}})  # fmt: skip
    return meta


def _json_events(tl: Timeline, s: Slices, sl: slice) -> str:
    c: Chunk = s.chunk(sl)
    by_uuid = {t.uuid: t for t in tl.tracks}
    uu, inv = np.unique(c.track, return_inverse=True)
    head = [f'{{"ph":"X","pid":{by_uuid[u].pid},"tid":{by_uuid[u].tid},"name":'
            for u in uu.tolist()]  # fmt: skip
    names = [json.dumps(x) for x in s.names]
    # Microseconds with three decimals, exactly: whole and thousandths apart.
    ts, ts_ns = np.divmod(c.start, 1000)
    dur, dur_ns = np.divmod(c.end - c.start, 1000)
    cols: list[list[str]] = [[
        f'{head[k]}{names[n]},"ts":{t}.{tn:03d},"dur":{d}.{dn:03d},"args":{{'
        for k, n, t, tn, d, dn in zip(inv.tolist(), c.name.tolist(), ts.tolist(), ts_ns.tolist(),
                                      dur.tolist(), dur_ns.tolist(), strict=True)]]  # fmt: skip
    for i, (aname, kind, col) in enumerate(c.args):
        # The first argument is always there (file, layer): no comma before it.
        key = ("," if i else "") + json.dumps(aname) + ":"
        if kind == "str":
            strs = [key + json.dumps(v) for v in s.strings[aname]]
            cols.append([strs[x] if x >= 0 else "" for x in col.tolist()])
        elif kind == "float":
            cols.append([key + repr(x) for x in col.tolist()])
        else:
            cols.append([key + str(x) for x in col.tolist()])
    cols.append(["}}"] * len(c.name))
    return ",\n".join("".join(parts) for parts in zip(*cols, strict=True))


def write_json(tl: Timeline, out: BinaryIO, chunk: int = CHUNK) -> None:
    """The timeline as Chrome's JSON trace-event format (an object with
    ``traceEvents``), complete ("X") events in microseconds."""
    out.write(b'{"displayTimeUnit":"ns","traceEvents":[\n')
    meta = _json_meta(tl)
    out.write(",\n".join(json.dumps(m, separators=(",", ":")) for m in meta).encode())
    first = not meta
    for s in tl.all_slices():
        for sl in _chunks(len(s), chunk):
            text = _json_events(tl, s, sl)
            if not text:
                continue
            out.write(("" if first else ",\n").encode() + text.encode("utf-8", "surrogateescape"))
            first = False
    out.write(b"\n]}\n")


def export(trace: Trace, out: BinaryIO, fmt: str = "proto", chunk: int = CHUNK) -> Timeline:
    """Write ``trace`` to ``out`` as ``fmt`` ("proto" or "json"); return its timeline."""
    tl = Timeline(trace)
    (write_json if fmt == "json" else write_proto)(tl, out, chunk)
    return tl
