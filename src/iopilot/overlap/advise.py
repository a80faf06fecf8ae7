"""Would asynchronous I/O pay for this program?  A prediction from its trace.

The model follows the program's own timeline, rank by rank:

* **Interface.**  The program would use the asynchronous form of the
  highest interface it calls: HDF5's (every HDF5 call of a phase moves to
  the background thread), MPI-IO's non-blocking reads and writes
  (MPI_File_sync has no such form and stays), or POSIX's (iopilot's engine:
  reads, writes and syncs).
* **Phases.**  Each rank's calls are grouped into its I/O phases (bursts
  separated by idle time, as the report's phase view finds them).
  For each rank and phase: the I/O seconds (the calls' durations), the
  rank's other time inside the phase (filling buffers, opens, closes: its
  own thread's work), the bytes written and the operations.  What lies
  between one phase and the next is computation.
* **Without async** the rank's time is what the trace measured.
* **With async** the rank's thread computes, then at each phase does its
  own part of the phase plus the engine's overhead (one submission per
  operation and one wake-up of the thread per phase), while the background
  thread does the I/O.  One phase is in flight at a time, from one of two
  buffers taking turns (a double-buffered checkpoint, as MPI-IO's
  non-blocking calls and HDF5's async connector require and the engine
  allows): nothing is copied; a phase first waits for the previous one's
  I/O, and the end of the run waits for the last.  When a
  node's ranks and their I/O threads outnumber its cores, the write calls'
  CPU time (copies into the page cache) is taken from the computation
  they overlap.  So it is when the trace says each rank could run on one
  core only (a launcher's binding, which the I/O thread inherits): then
  all of it, the thread and the computation taking turns on that core, and
  what the turns themselves cost (switches, caches refilled: measured on
  this machine, a factor of at least 1).
  The write calls' CPU time is their measured CPU time per byte, where the
  trace has it, else their duration; a sync's is its measured CPU time (the
  write-back it starts), where the trace has it, else none (its wait).  A
  job bound so is also predicted as it would run with a core for each I/O
  thread, and the launcher change that gives it is named.
* The prediction for the run is the slowest rank's; the recommendation is
  on when it saves at least ``min_gain`` of the run and nothing in the
  trace makes reordering unsafe.
* **Write-behind** (``iopilot run --async``, no change to the program) is
  predicted too, with the same model, except that a phase in which the
  rank syncs or closes a file waits there for its writes: nothing of that
  phase is hidden, and every write is copied (at the measured copy rate).
  Relaxed (``--async-relaxed``), only a close waits.

**Safety.**  Async moves a write later in time.  When bytes one rank (or
process) wrote are read or written by another rank afterwards with no
sync or close of that file by the writer in between, the second access
could see the old bytes (or land first): the advisor lists such pairs and
says async is unsafe there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._record import asdict, field, record
from ..checks.binding import Binding, binding_of, launcher_fix
from ..checks.phases import phases
from ..checks.recordtools import _prev_max
from ..model import OP_WRITE, Records, Trace
from ..model.aggregate import unique
from ..vocabulary import MODULE, OP_NAMES, RECORD_LAYERS
from .calibrate import Calibration

OP_SYNC = OP_NAMES.index("sync")
OP_CLOSE = OP_NAMES.index("close")
OP_FLUSH = OP_NAMES.index("flush")
MIN_GAIN = 0.05  # share of the run async must save to be recommended
MAX_CONFLICTS = 10  # listed; all are counted


@record
class Phase:
    index: int
    start: float
    end: float
    rank: int  # the rank that decides the run
    compute_before_seconds: float
    io_seconds: float
    own_seconds: float  # the rank's other time inside the phase
    bytes_written: int
    operations: int
    overhead_seconds: float
    stall_seconds: float  # waiting for the previous phase's I/O, with async
    hidden_seconds: float  # I/O seconds async takes off the run


@record
class Conflict:
    file: str
    first_rank: int
    second_rank: int
    first_op: str
    second_op: str
    offset: int
    bytes: int
    first_end: float
    second_start: float


@record
class Advice:
    source: str
    ranks: int
    phases: list[Phase]
    sync_seconds: float
    async_seconds: float
    slowest_rank: int
    calibration: Calibration
    conflicts: list[Conflict]
    conflicts_total: int
    recommendation: str  # "on" or "off"
    reason: str
    # Write-behind's predicted run, strict and relaxed, and in how many of
    # the slowest rank's phases the program waits for its writes.
    write_behind: dict[str, Any] = field(default_factory=dict)
    # The slowest rank's two timelines: (lane, kind, phase, start, end) with
    # lane "sync" (as traced), "async" (its thread) or "thread" (the I/O
    # thread) and kind compute, io, own (its part of a phase, with the
    # engine's overhead) or wait.
    lanes: list[tuple[str, str, int, float, float]] = field(default_factory=list)
    # Where the ranks could run (None: the trace does not say); when each
    # rank's I/O thread would share its core, the run predicted with a core
    # for it and the launcher change that gives one.
    binding: Binding | None = None
    own_core_seconds: float | None = None
    launcher_fix: str = ""
    # The interface whose asynchronous form is predicted (see interface_of).
    interface: str = "POSIX"

    @property
    def saved_seconds(self) -> float:
        return self.sync_seconds - self.async_seconds

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "ranks": self.ranks,
            "interface": self.interface,
            "predicted": {"sync_seconds": self.sync_seconds,
                          "async_seconds": self.async_seconds,
                          "saved_seconds": self.saved_seconds,
                          "saved_share": (self.saved_seconds / self.sync_seconds
                                          if self.sync_seconds > 0 else 0.0),
                          "slowest_rank": self.slowest_rank,
                          "write_behind_seconds": self.write_behind.get("strict_seconds"),
                          "write_behind_relaxed_seconds":
                              self.write_behind.get("relaxed_seconds")},
            "write_behind": self.write_behind,
            "binding": None if self.binding is None else {
                **asdict(self.binding), "shares_core": self.binding.shares_core,
                "own_core_seconds": self.own_core_seconds, "launcher_fix": self.launcher_fix},
            "recommendation": self.recommendation,
            "reason": self.reason,
            "safe": not self.conflicts_total,
            "conflicts_total": self.conflicts_total,
            "conflicts": [asdict(c) for c in self.conflicts],
            "calibration": self.calibration.as_dict(),
            "phases": [asdict(p) for p in self.phases],
            "timelines": [{"lane": a, "kind": b, "phase": k, "start": s, "end": e}
                          for a, b, k, s, e in self.lanes],
        }  # fmt: skip


# ---------------------------------------------------------------------------
# The timeline


def interface_of(trace: Trace) -> str:
    """The interface whose asynchronous form the program would use: the
    highest in the I/O stack among its reads and writes (HDF5 above MPI-IO
    above the file system's calls, which the engine takes as POSIX)."""
    layers = [RECORD_LAYERS[int(c)] for c in unique(trace.records.layer)]
    levels = [MODULE[n].level for n in layers if MODULE[n].level > 1]
    if not levels:
        return MODULE["POSIX"].interface
    return MODULE[next(n for n in layers if MODULE[n].level == max(levels))].interface


def _io_records(trace: Trace, interface: str) -> tuple[Records, np.ndarray]:
    """The interface's calls in I/O phases, and which of them asynchronous
    I/O at ``interface`` takes off the program's thread.  The file system's
    (POSIX, iopilot's engine): reads, writes and syncs, all moved.  MPI-IO's
    non-blocking forms: reads and writes; MPI_File_sync has none and stays
    on the program's thread, in its phase.  HDF5's asynchronous connector:
    every HDF5 call, the file and dataset opens, flushes and closes too.
    The calls below them are inside these, never counted twice; what the
    thread does not take stays the program's own time in the phase."""
    level = max(MODULE[n].level for n in RECORD_LAYERS if MODULE[n].interface == interface)
    codes = [k for k, n in enumerate(RECORD_LAYERS) if MODULE[n].interface == interface]
    data = trace.records.select(np.isin(trace.records.layer, codes))
    meta = trace.meta_records
    mine = np.isin(meta.layer, codes) & ((meta.op == OP_SYNC) | (level > 2))
    recs = Records.concat([data, meta.select(mine)])
    moves = np.ones(len(recs), bool)
    if level == 2:
        moves[len(data):] = False
    return recs, moves


def _phase_bounds(recs: Records) -> np.ndarray:
    """Start time of each I/O phase (all ranks together), in order."""
    return np.asarray(phases(recs)["start"], float)


def _contention(trace: Trace, cal: Calibration, bind: Binding | None = None,
                own_core: bool = False) -> float:  # fmt: skip
    """Share of the write calls' CPU time taken from computation they overlap:
    all of it and what taking turns adds (measured) when each rank's I/O
    thread shares the rank's one core (unless
    ``own_core``: as if the launcher gave it one), up to 1 when the node's
    ranks already fill its cores, and at least what the calibration measured
    beside a free core."""
    if bind is not None and bind.shares_core and not own_core:
        return cal.shared_core
    hosts = len(set(trace.job.hosts.values())) or 1
    per_node = max(1, -(-max(trace.job.nprocs, 1) // hosts))
    cores = bind.online if bind is not None and bind.online > 0 else cal.cores
    crowded = min(1.0, max(0.0, (2 * per_node - cores) / per_node))
    return float(max(crowded, cal.interference))


def _measured_cpu(trace: Trace) -> dict[int, tuple[float | None, float | None]]:
    """Measured CPU seconds per byte of large reads and writes, and per
    fsync, by rank (None: not measured)."""
    return {c.rank if c.rank is not None else 0: (c.io_cpu_per_byte, c.sync_cpu_seconds)
            for c in trace.cpus or ()}  # fmt: skip


def _simulate(c: np.ndarray, io: np.ndarray, own: np.ndarray, over: np.ndarray,
              cpu_io: np.ndarray, tail: float, steal: float,
              lanes: list[tuple[str, str, int, float, float]] | None = None,
              ) -> tuple[float, np.ndarray]:  # fmt: skip
    """One rank's run with async: its end time and the stall at each phase;
    with ``lanes``, the segments of both threads' timelines are appended
    (lane, kind, phase, start, end)."""
    t = 0.0
    bg_free = 0.0
    prev_cpu = 0.0
    n = len(c)
    stall = np.zeros(n)
    for k in range(n):
        ck = c[k] + steal * min(c[k], prev_cpu)
        if lanes is not None:
            lanes.append(("async", "compute", k, t, t + ck))
        t += ck
        stall[k] = max(0.0, bg_free - t)
        if lanes is not None and stall[k] > 0:
            lanes.append(("async", "wait", k, t, t + stall[k]))
        t += stall[k]
        if lanes is not None:
            lanes.append(("async", "own", k, t, t + own[k] + over[k]))
        t += own[k] + over[k]
        # The write calls slow down too while the next computation runs.
        io_k = io[k] + (steal * min(cpu_io[k], c[k + 1]) if k + 1 < n else 0.0)
        if lanes is not None:
            lanes.append(("thread", "io", k, t, t + io_k))
        bg_free = t + io_k
        prev_cpu = cpu_io[k]
    # The last phase's I/O is never hidden: the run's end waits for it.
    if lanes is not None and bg_free > t:
        lanes.append(("async", "wait", n, t, bg_free))
    t = max(t, bg_free)
    if lanes is not None and tail > 0:
        lanes.append(("async", "compute", n, t, t + tail))
    return t + tail, stall


def _waits(trace: Trace, rank: int, starts: np.ndarray, ph: np.ndarray, op: np.ndarray,
           fid: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per phase, whether write-behind makes the rank wait for its writes
    there: strict, at a sync or a close of a file it wrote in the phase, made
    after the phase's first operation; relaxed, at such a close only."""
    n = len(starts)
    meta = trace.meta_records
    posix = RECORD_LAYERS.index("POSIX")
    cl = meta.select((meta.rank == rank) & (meta.layer == posix) & (meta.op == OP_CLOSE))
    k = np.searchsorted(starts, cl.start, side="right") - 1
    ok = (k >= 0) & (cl.start >= first[np.maximum(k, 0)])
    k, cfid = k[ok], cl.file_id[ok]
    w, sy = op == OP_WRITE, op == OP_SYNC
    files, idx = np.unique(np.concatenate([fid, cfid]), return_inverse=True)
    nf = np.int64(len(files))
    key_io = ph.astype(np.int64) * nf + idx[: len(fid)]  # one key per (phase, file)
    key_cl = k.astype(np.int64) * nf + idx[len(fid):]
    written = key_io[w]
    closed = np.isin(key_cl, written)
    synced = np.isin(key_io[sy], written)
    strict = np.bincount(np.concatenate([k[closed], ph[sy][synced]]), None, n) > 0
    return strict, np.bincount(k[closed], None, n) > 0


def _timeline(trace: Trace, cal: Calibration, steal: float,
              calls: tuple[Records, np.ndarray]) -> tuple[
        list[Phase], float, float, int, list, dict[str, Any]]:  # fmt: skip
    io_recs, moves = calls
    run = float(trace.job.runtime)
    if not len(io_recs):
        return [], run, run, 0, [], {}
    ranks = unique(io_recs.rank)
    measured = _measured_cpu(trace)
    dur = np.maximum(io_recs.end - io_recs.start, 0.0)
    best: tuple[float, int, list[Phase]] | None = None
    run_end = max(run, float(io_recs.end.max()))
    wb_strict = wb_relaxed = 0.0
    for r in ranks:
        m = io_recs.rank == r
        # The rank's own phases: its bursts between its own computations (the
        # ranks' bursts together, skewed, would close the gaps between them).
        starts = _phase_bounds(io_recs.select(m))
        n_ph = len(starts)
        ph = np.searchsorted(starts, io_recs.start[m], side="right") - 1
        d, s, e = dur[m], io_recs.start[m], io_recs.end[m]
        op, length = io_recs.op[m], io_recs.length[m]
        io_sync = np.bincount(ph, np.where(moves[m], d, 0.0), n_ph)
        wbytes = np.bincount(ph, np.where(op == OP_WRITE, np.maximum(length, 0), 0), n_ph)
        cpu_io = np.bincount(ph, np.where(op == OP_WRITE, d, 0.0), n_ph)
        byte_cpu, sync_cpu = measured.get(int(r), (None, None))
        if byte_cpu is not None:  # measured: never more than the calls lasted
            cpu_io = np.minimum(cpu_io, wbytes * byte_cpu)
        if sync_cpu is not None:  # the write-back a sync starts, on the thread too
            sy = moves[m] & np.isin(op, (OP_SYNC, OP_FLUSH))
            cpu_io = cpu_io + np.minimum(np.bincount(ph, np.where(sy, d, 0.0), n_ph),
                                         np.bincount(ph, sy, n_ph) * sync_cpu)  # fmt: skip
        ops = np.bincount(ph, moves[m], n_ph).astype(np.int64)
        first = np.full(n_ph, np.inf)
        last = np.full(n_ph, -np.inf)
        np.minimum.at(first, ph, s)
        np.maximum.at(last, ph, e)
        active = np.bincount(ph, None, n_ph) > 0  # the rank has calls in the phase
        # A rank without I/O in a phase: its time there is computation.
        first = np.where(active, first, 0.0)
        last = np.where(active, last, 0.0)
        own = np.where(active, np.maximum(last - first - io_sync, 0.0), 0.0)
        ends = np.maximum.accumulate(np.where(active, last, 0.0))
        prev_end = np.concatenate([[0.0], ends[:-1]])
        c = np.where(active, np.maximum(first - prev_end, 0.0), 0.0)
        tail = max(run_end - float(ends[-1]), 0.0)
        # Async keeps two buffers taking turns, as MPI-IO's non-blocking
        # calls and HDF5's connector require and the engine allows
        # (IOPILOT_ES_NOCOPY): nothing is copied.  Write-behind copies.
        over = ops * cal.handoff_seconds + np.where(ops > 0, cal.wakeup_seconds, 0.0)
        copies = wbytes / cal.copy_bytes_per_second
        io = io_sync + ops * cal.thread_seconds  # the thread's own cost per operation
        lanes: list[tuple[str, str, int, float, float]] = []
        end, stall = _simulate(c, io, own, over, cpu_io, tail, steal, lanes)
        # write-behind: where the program waits, the phase's I/O is its own time
        strict, relaxed = _waits(trace, int(r), starts, ph, op, io_recs.file_id[m], first)
        for waits, name in ((strict, "strict"), (relaxed, "relaxed")):
            e_wb, _ = _simulate(c, np.where(waits, 0.0, io), own + np.where(waits, io, 0.0),
                                over + copies, cpu_io, tail, steal)  # fmt: skip
            if name == "strict":
                wb_strict = max(wb_strict, e_wb)
            else:
                wb_relaxed = max(wb_relaxed, e_wb)
        if best is None or end > best[0]:
            for k in np.flatnonzero(active):
                lanes.append(("sync", "compute", int(k), float(prev_end[k]), float(first[k])))
                lanes.append(("sync", "io", int(k), float(first[k]), float(last[k])))
            if float(ends[-1]) < run_end:
                lanes.append(("sync", "compute", n_ph, float(ends[-1]), run_end))
            timeline = lanes
            nxt = np.concatenate([stall[1:], [0.0]])
            last_phase = np.arange(n_ph) == n_ph - 1
            hidden = np.where(last_phase, 0.0, np.maximum(io - nxt, 0.0)) - over
            phases = [Phase(k, float(starts[k]), float(last[k]) if active[k] else float(starts[k]),
                            int(r), float(c[k]), float(io[k]), float(own[k]), int(wbytes[k]),
                            int(ops[k]), float(over[k]), float(stall[k]), float(hidden[k]))
                      for k in range(n_ph)]  # fmt: skip
            best = (end, int(r), phases, timeline, (int(strict.sum()), int(relaxed.sum())))
    assert best is not None
    end, slowest, phases, timeline, (n_strict, n_relaxed) = best
    wb = {"strict_seconds": wb_strict, "relaxed_seconds": wb_relaxed,
          "phases_waiting_strict": n_strict, "phases_waiting_relaxed": n_relaxed}  # fmt: skip
    return phases, run_end, end, slowest, timeline, wb


# ---------------------------------------------------------------------------
# Safety: accesses async could reorder


def _conflicts(trace: Trace) -> tuple[list[Conflict], int]:
    """Pairs of overlapping accesses by different ranks, at least one a write,
    the first of them a write with no sync or close of the file by its rank
    before the second began.  Each access is paired with the earlier one (in
    offset order, within its file) that reaches furthest: the one it overlaps
    if it overlaps any."""
    posix = RECORD_LAYERS.index("POSIX")
    recs = trace.records.select(trace.records.layer == posix)
    if len(recs) < 2 or len(unique(recs.rank)) < 2:
        return [], 0
    order = np.lexsort((recs.start, recs.offset, recs.file_id))
    f, off = recs.file_id[order], recs.offset[order]
    end = off + np.maximum(recs.length[order], 0)
    rank, op = recs.rank[order], recs.op[order]
    t0, t1 = recs.start[order], recs.end[order]
    group = np.cumsum(np.concatenate([[0], f[1:] != f[:-1]]))
    reach, holder = _prev_max(group, end, holders=True)
    assert holder is not None
    j = np.maximum(holder, 0)
    # an access of no byte (a write or read of length 0) overlaps nothing
    cand = (holder >= 0) & (off < reach) & (end > off) & (rank != rank[j]) & (
        (op == OP_WRITE) | (op[j] == OP_WRITE))
    i = np.flatnonzero(cand)
    j = j[i]
    first_is_j = t0[j] <= t0[i]
    a = np.where(first_is_j, j, i)
    b = np.where(first_is_j, i, j)
    keep = op[a] == OP_WRITE  # a read, then a write: the read already had its bytes
    a, b = a[keep], b[keep]
    open_ = ~_fenced(trace, f[a], rank[a], t1[a], t0[b])
    a, b = a[open_], b[open_]
    out = []
    for x, y in zip(a[:MAX_CONFLICTS].tolist(), b[:MAX_CONFLICTS].tolist(), strict=True):
        lo, hi = max(off[x], off[y]), min(end[x], end[y])
        out.append(Conflict(trace.names.get(int(f[x]), str(int(f[x]))), int(rank[x]),
                            int(rank[y]), OP_NAMES[int(op[x])], OP_NAMES[int(op[y])],
                            int(lo), int(hi - lo), float(t1[x]), float(t0[y])))  # fmt: skip
    return out, len(a)


def _fenced(trace: Trace, file_id: np.ndarray, rank: np.ndarray, after: np.ndarray,
            before: np.ndarray) -> np.ndarray:
    """Whether the rank synced or closed the file between ``after`` and
    ``before`` (one answer per element)."""
    meta = trace.meta_records
    posix = RECORD_LAYERS.index("POSIX")
    fences = meta.select((meta.layer == posix) & np.isin(meta.op, (OP_SYNC, OP_CLOSE)))
    if not len(file_id) or not len(fences):
        return np.zeros(len(file_id), bool)
    # One key per (file, rank): files numbered densely, times the ranks.
    files = unique(np.concatenate([fences.file_id, file_id]))
    width = int(max(fences.rank.max(), rank.max())) + 1
    fkey = np.searchsorted(files, fences.file_id).astype(np.int64) * width + fences.rank
    want = np.searchsorted(files, file_id).astype(np.int64) * width + rank
    # All fences on one time line, each (file, rank) group after the previous.
    keys, gid = np.unique(fkey, return_inverse=True)
    span = float(max(fences.end.max(), before.max())) + 1.0
    line = fences.start + gid.ravel() * span
    order = np.argsort(line, kind="stable")
    line, fend, fgid = line[order], fences.end[order], gid.ravel()[order]
    k = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
    pid = np.where(keys[k] == want, k, -1)
    # The first fence of the group at or after ``after``: it must end by ``before``.
    pos = np.minimum(np.searchsorted(line, after + np.maximum(pid, 0) * span), len(line) - 1)
    found = (pid >= 0) & (fgid[pos] == pid) & (line[pos] >= after + pid * span)
    return found & (fend[pos] <= before)


# ---------------------------------------------------------------------------


def advise(trace: Trace, cal: Calibration, *, min_gain: float = MIN_GAIN) -> Advice:
    """The prediction and recommendation for ``trace`` on a machine like ``cal``."""
    bind = binding_of(trace)
    interface = interface_of(trace)
    recs = _io_records(trace, interface)
    steal = _contention(trace, cal, bind)
    phases, sync_s, async_s, slowest, lanes, wb = _timeline(trace, cal, steal, recs)
    if interface != MODULE["POSIX"].interface:
        # Write-behind works below every library, on the file system's calls.
        wb = _timeline(trace, cal, steal, _io_records(trace, MODULE["POSIX"].interface))[5]
    own_s, fix = None, ""
    if bind is not None and bind.shares_core and phases:
        own_s = _timeline(trace, cal, _contention(trace, cal, bind, own_core=True), recs)[2]
        fix = launcher_fix(bind)
    conflicts, n_conf = _conflicts(trace)
    saved = sync_s - async_s
    ranks = len(unique(trace.records.rank)) or trace.job.nprocs
    if not phases:
        rec, why = "off", "the trace has no reads, writes or syncs to move to a thread"
    elif n_conf:
        rec, why = "off", (f"{n_conf} access(es) by one rank to bytes another rank wrote with "
                           "no sync or close in between: delaying those writes could change "
                           "what is read or which write lands last")  # fmt: skip
    elif saved >= min_gain * sync_s and saved > 0:
        rec, why = "on", (f"hides {saved:.3f} s of I/O behind computation "
                          f"({saved / sync_s:.0%} of the run)")  # fmt: skip
    elif saved > 0:
        rec, why = "off", (f"would save only {saved:.3f} s ({saved / sync_s:.1%} of the run, "
                           f"less than {min_gain:.0%}): not worth a second thread "
                           "and a second buffer")
    else:
        rec, why = "off", (f"would cost {-saved:.3f} s more: the computation between I/O "
                           "phases is too short to hide the I/O and the engine's overhead")
    if own_s is not None and not n_conf and own_s < async_s:
        # Bound to one core a rank: say what the binding costs and how to lift it.
        gain = sync_s - own_s
        why += (f"; each rank could run on one core only ({_launched(bind)}), which its I/O "
                f"thread would share: with a core for the thread ({fix}) async would take "
                f"{own_s:.3f} s, {gain:+.3f} s saved ({gain / sync_s:.0%} of the run)")  # fmt: skip
    return Advice(trace.source, ranks, phases, sync_s, async_s, slowest, cal, conflicts, n_conf,
                  rec, why, wb, lanes, bind, own_s, fix, interface)  # fmt: skip


# What each interface's asynchronous form takes off the program's thread.
_HOW = {"POSIX": "reads, writes and fsyncs on the thread of iopilot's engine (an event "
                 "set), written from two buffers that take turns, nothing copied (C: "
                 "IOPILOT_ES_NOCOPY; Python: es.write(..., copy=False))",
        "MPI-IO": "non-blocking reads and writes (MPI_File_iwrite_at_all ...); "
                  "MPI_File_sync stays blocking",
        "HDF5": "every HDF5 call of a phase on a background thread (the async "
                "connector: opens, writes, flushes, closes)"}  # fmt: skip


def _launched(b: Binding | None) -> str:
    names = {"openmpi": "Open MPI's mpirun binds each rank to a core",
             "slurm": "Slurm's srun bound each rank to a core",
             "mpich": "the MPICH launcher bound each rank to a core"}  # fmt: skip
    return names.get(b.launcher if b else "", "its CPU affinity allows one CPU")


def render_text(a: Advice) -> str:
    """The terminal report."""
    c = a.calibration
    lines = [f"iopilot advise async: {a.source}",
             f"  {len(a.phases)} I/O phase(s), {a.ranks} rank(s); slowest rank {a.slowest_rank}",
             f"  asynchronous {a.interface}: {_HOW.get(a.interface, _HOW['POSIX'])}",
             f"  predicted run without async {a.sync_seconds:.3f} s, with async "
             f"{a.async_seconds:.3f} s ({a.saved_seconds:+.3f} s saved)",
             f"  calibration: copies at {c.copy_bytes_per_second / 2**30:.1f} GiB/s, "
             f"{c.handoff_seconds * 1e6:.1f} us per operation handed to the I/O thread, "
             f"{c.cores} core(s)",
             f"  recommendation: {a.recommendation.upper()}: {a.reason}"]  # fmt: skip
    if a.binding is not None:
        b = a.binding
        lines.insert(-1, f"  binding: each rank could use {b.cpus_per_rank} CPU(s), "
                         f"{b.ranks_per_node} rank(s) on a node of {b.online}"
                         + (f", launched by {b.launcher}" if b.launcher else "")
                         + (f"; with a core for each I/O thread: {a.own_core_seconds:.3f} s"
                            if a.own_core_seconds is not None else ""))  # fmt: skip
    wb = a.write_behind
    if wb and a.phases:
        lines.append(f"  write-behind (iopilot run --async, no change to the program): "
                     f"{wb['strict_seconds']:.3f} s; it waits in {wb['phases_waiting_strict']} "
                     f"of {len(a.phases)} phase(s), where rank {a.slowest_rank} syncs or closes "
                     f"a file it wrote; with --async-relaxed {wb['relaxed_seconds']:.3f} s "
                     f"(waits at closes only: {wb['phases_waiting_relaxed']})")  # fmt: skip
    if a.phases:
        lines += ["", f"  {'phase':>5} {'start(s)':>9} {'compute before':>15} {'I/O(s)':>9} "
                      f"{'overhead(s)':>12} {'stall(s)':>9} {'hidden(s)':>10}"]  # fmt: skip
        shown = a.phases if len(a.phases) <= 20 else a.phases[:10] + a.phases[-10:]
        for p in shown:
            lines.append(f"  {p.index:>5} {p.start:>9.3f} {p.compute_before_seconds:>15.3f} "
                         f"{p.io_seconds:>9.3f} {p.overhead_seconds:>12.4f} "
                         f"{p.stall_seconds:>9.3f} {p.hidden_seconds:>10.3f}")  # fmt: skip
        if len(shown) < len(a.phases):
            lines.append(f"  ... {len(a.phases) - len(shown)} phase(s) not shown (--json has all)")
    if a.conflicts_total:
        lines += ["", f"  unsafe to reorder ({a.conflicts_total} pair(s)):"]
        for k in a.conflicts:
            lines.append(f"    {k.file}: rank {k.first_rank} {k.first_op} then rank "
                         f"{k.second_rank} {k.second_op} of {k.bytes} bytes at {k.offset}, "
                         f"{k.second_start - k.first_end:.3f} s apart, no sync or close "
                         "between")  # fmt: skip
    return "\n".join(lines)
