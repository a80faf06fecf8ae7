"""Run the registered checks over a trace and collect a :class:`Diagnosis`."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .._record import field, record
from ..model import COUNTER_LAYERS, Trace, display
from ..model.aggregate import unique
from ..vocabulary import MODULES, SIZE_BIN_UPPER, SIZE_BINS
from . import thresholds as th
from .base import AnalysisCache, Check, Context, Finding, Level, iter_registered
from .callsites import add_call_sites
from .iotime import IoTime, compute, io_time


@record
class LayerSummary:
    layer: str
    files: int
    reads: int
    writes: int
    bytes_read: int
    bytes_written: int
    read_time: float
    write_time: float
    meta_time: float
    # Metadata operations, summed over the layer's counters of that kind.
    opens: int = 0
    stats: int = 0
    seeks: int = 0
    syncs: int = 0  # fsync, fdatasync, MPI_File_sync, flushes
    # Reads and writes above 100 KiB (the size bins from 100K_1M up), and
    # those at offsets off the file system's alignment: whether direct I/O
    # is worth trying (the tuner's generated space).  0 where not counted.
    large_requests: int = 0
    misaligned: int = 0


@record
class Diagnosis:
    """What ``iopilot report`` shows: the job, per-layer totals, findings, warnings."""

    trace: Trace
    findings: list[Finding]
    layers: list[LayerSummary]
    thresholds: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    io_time: IoTime = None  # type: ignore[assignment]  # filled in from the trace

    def __post_init__(self) -> None:
        if self.io_time is None:
            self.io_time = compute(self.trace)

    def count(self, level: Level) -> int:
        return sum(1 for f in self.findings if f.level == level)

    @property
    def fired_thresholds(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in self.findings:
            if f.level >= Level.WARN:
                out.update(f.thresholds)
        return dict(sorted(out.items()))


# (reads, writes, bytes read, bytes written, read time, write time, meta time) per layer
_TOTALS = {m.name: (m.op_counters("READ"), m.op_counters("WRITE"),
                    *(f"{m.name}_{k}" for k in ("BYTES_READ", "BYTES_WRITTEN", "F_READ_TIME",
                                                "F_WRITE_TIME", "F_META_TIME")))
           for m in MODULES if m.op_classes}  # fmt: skip


# Counter-name endings of each kind of metadata operation, in every layer
# (POSIX_OPENS, MPIIO_COLL_OPENS, H5F_FLUSHES ...; STDIO_FDOPENS is no open).
_META_OPS = (("_OPENS",), ("_STATS",), ("_SEEKS",), ("_FSYNCS", "_FDSYNCS", "_SYNCS", "_FLUSHES"))
# Size bins above 100 KiB: a bin's lower edge is the previous bin's upper edge.
_LARGE_BINS = tuple(b for b, below in zip(SIZE_BINS[1:], SIZE_BIN_UPPER, strict=False)
                    if below >= 100 * 1024)  # fmt: skip


def summarize(trace: Trace) -> list[LayerSummary]:
    """Per-layer totals for the report header."""
    out = []
    for layer in COUNTER_LAYERS:
        c = trace.counters.get(layer)
        if c is None or not len(c) or layer not in _TOTALS:
            continue
        vals = []
        for name in _TOTALS[layer]:
            names = name if isinstance(name, tuple) else (name,)
            vals.append(sum(c.total(n) for n in names if c.has(n)))
        meta = [sum(c.total(n) for n in c.int_names if n.endswith(ends)) for ends in _META_OPS]
        large = sum(c.total(n) for d in ("READ", "WRITE") for b in _LARGE_BINS
                    if c.has(n := f"{layer}_SIZE_{d}_{b}"))  # fmt: skip
        off = f"{layer}_FILE_NOT_ALIGNED"
        misaligned = c.total(off) if c.has(off) else 0
        files = int(unique(c.file_id).shape[0])
        out.append(LayerSummary(display(layer), files, *vals, *meta, large_requests=int(large),
                                misaligned=int(misaligned)))
    return out


def diagnose(trace: Trace, thresholds: dict[str, Any] | None = None,
             only: set[str] | None = None,
             cache: AnalysisCache | None = None, *, merge: bool = True) -> Diagnosis:  # fmt: skip
    """Run every registered check (or those in ``only``) on ``trace``;
    ``merge`` makes findings of the same root cause one (see
    :func:`merge_same_cause`), and costs are capped (see :func:`cap_costs`).

    The checks share one :class:`AnalysisCache` of derived tables; it ends
    with the diagnosis (so the report renders without it in memory) unless
    the caller passes one in."""
    values = thresholds if thresholds is not None else th.defaults()
    ctx = Context(trace, values, cache)
    findings: list[Finding] = []
    warnings = list(trace.warnings)
    ran: dict[str, Check] = {}
    for chk in iter_registered(lambda c: only is None or c.id in only):
        if chk.needs_records and not len(trace.records):
            continue
        ran[chk.id] = chk
        try:
            findings.extend(chk.evaluate(ctx))
        except Exception as e:  # a broken check must not hide the others
            warnings.append(f"check {chk.id} failed: {type(e).__name__}: {e}")
    times = io_time(ctx)
    if merge:
        findings = merge_same_cause(findings, ctx)
    for f in findings:  # after merging: no lines looked up for a finding merged away
        try:
            add_call_sites(ctx, ran[f.check], [f])
        except Exception as e:  # nor a failure to name the lines, its finding
            warnings.append(f"call sites of check {f.check} failed: {type(e).__name__}: {e}")
    cap_severity(findings, times, values)
    findings.sort(key=cost_order)
    cap_costs(findings, times)
    return Diagnosis(trace, findings, summarize(trace), values, warnings, times)


def _hdf5_traced(ctx: Context, _keep: Finding, _merged: Finding) -> bool:
    """The trace has HDF5 records: the file's layout is HDF5's."""
    return ctx.layer("H5F") is not None or ctx.layer("H5D") is not None


def _rereads(_ctx: Context, _keep: Finding, merged: Finding) -> bool:
    """``merged`` says its cause is re-reads."""
    return merged.evidence.get("cause") == "re-reads"


def _beneath(ctx: Context, keep: Finding, merged: Finding) -> bool:
    """``keep`` warns of MPI-IO calls that reach POSIX unmerged (independent,
    or collective without buffering) and every file ``merged`` lists is an
    MPI-IO file: its requests are those calls' pieces."""
    if keep.level < Level.WARN or not merged.files:
        return False
    c = ctx.layer("MPIIO")
    if c is None:
        return False
    names = {ctx.trace.name(int(i)) for i in unique(c.file_id)}
    return all(f.path in names for f in merged.files)


def _same_files(_ctx: Context, keep: Finding, merged: Finding) -> bool:
    """``merged`` lists files, and ``keep`` lists each of them."""
    mine = {f.path for f in keep.files}
    return bool(merged.files) and all(f.path in mine for f in merged.files)


def _explains(_ctx: Context, keep: Finding, merged: Finding) -> bool:
    """``keep`` accounts for at least half of ``merged``'s seconds."""
    return (keep.cost_seconds or 0.0) >= 0.5 * (merged.cost_seconds or 0.0)


def _same_rank(_ctx: Context, keep: Finding, merged: Finding) -> bool:
    """``merged`` (a straggler) names the rank ``keep`` blames, or ``keep``
    found the other ranks waiting for that rank (the straggler waits)."""
    rank = keep.evidence.get("slowest_rank")
    waited = float(keep.evidence.get("others_wait_seconds", 0) or 0) > 0
    return rank is not None and (merged.evidence.get("worst_rank") == rank or waited)


def _cheaper(_ctx: Context, keep: Finding, merged: Finding) -> bool:
    """``merged`` costs no more than ``keep``."""
    return (merged.cost_seconds or 0.0) <= (keep.cost_seconds or 0.0)


def _mostly_rereads(_ctx: Context, keep: Finding, merged: Finding) -> bool:
    """At least half of the STDIO bytes of ``merged`` (stdio-share) are
    bytes ``keep`` says were read again."""
    repeated = float(keep.evidence.get("repeated_bytes", 0) or 0)
    return repeated >= 0.5 * float(merged.evidence.get("stdio_bytes", 0) or 0)


def _warns(_ctx: Context, keep: Finding, _merged: Finding) -> bool:
    """``keep`` is a problem (WARN or above), not a note."""
    return keep.level >= Level.WARN


# (kept, merged into it, when): pairs of checks that describe the same
# operations.  The one kept is the one at the layer where the mistake lives.
# ``when`` (ctx, kept, merged) tells whether this pair merges; None: always.
_When = Callable[[Context, Finding, Finding], bool]
SAME_CAUSE: tuple[tuple[str, str, _When | None], ...] = (
    # The small requests on shared files are among all small requests.
    ("posix-small-writes", "posix-shared-small-writes", None),
    ("posix-small-reads", "posix-shared-small-reads", None),
    # Small POSIX requests beneath independent MPI-IO calls: the calls are
    # where the mistake lives (collective ones would merge the pieces).
    ("mpiio-collective-writes", "posix-small-writes", _beneath),
    ("mpiio-collective-reads", "posix-small-reads", _beneath),
    # Ranks taking unequal time on a file they write with independent calls:
    # collective calls with aggregators are the fix of both.
    ("mpiio-collective-writes", "posix-shared-time-imbalance", _beneath),
    # ...or beneath collective calls whose buffering the hints switched off.
    ("mpiio-cb-disabled", "posix-small-writes", _beneath),
    ("mpiio-cb-disabled", "posix-small-reads", _beneath),
    # Misaligned offsets of an HDF5 file are HDF5's object placement.
    ("hdf5-alignment", "posix-misaligned-file", _hdf5_traced),
    # Bytes read again, seen from the counters and from the records.
    ("posix-redundant-reads", "overlapping-reads", None),
    # Small reads that jump around the file: the random order is the mistake.
    ("posix-random-reads", "posix-small-reads", _warns),
    # The same bytes read again through STDIO (fread, np.fromfile): the re-read
    # is the mistake, STDIO only its path.
    ("posix-redundant-reads", "stdio-share", _mostly_rereads),
    # The STDIO time is the re-reading of the inputs (fscanf, fread each step).
    ("reopened-files", "stdio-time", _same_files),
    ("posix-redundant-reads", "stdio-time", _same_files),
    # Text through STDIO: its time on one rank and its share of the bytes
    # are the same calls; the time says where the run's seconds went.
    ("stdio-time", "stdio-share", None),
    # A file re-read at every step: bytes (redundant reads) or opens (reopened
    # files), whichever costs more, is where the mistake lives.
    ("posix-redundant-reads", "reopened-files", _cheaper),
    ("reopened-files", "posix-redundant-reads", _cheaper),
    # Rank 0 (or some ranks) heavy because they re-read their inputs.
    ("reopened-files", "rank-zero-heavy", _rereads),
    ("reopened-files", "unbalanced-ranks", _rereads),
    # Metadata taking most of the I/O time: the storm's opens, or the reopens.
    ("tiny-files", "posix-metadata-share", _explains),
    ("reopened-files", "posix-metadata-share", _explains),
    # Or the syncs issued at every step.
    ("flush-per-step", "posix-metadata-share", _explains),
    ("flush-per-step", "posix-metadata-time", _explains),
    # The straggler is the rank that re-reads its inputs.
    ("reopened-files", "phase-stragglers", _same_rank),
)


# Checks whose cost measures a consequence (ranks waiting for a late one),
# not what the cause's fix saves: merged, their cost does not carry over.
_CONSEQUENCES = {"phase-stragglers"}


def merge_same_cause(findings: list[Finding], ctx: Context) -> list[Finding]:
    """One finding per root cause: of each :data:`SAME_CAUSE` pair that both
    fired, the second becomes evidence of the first ("also seen as ..."),
    which keeps the higher level and cost of the two; the merged finding's
    Drishti code stays in ``evidence["drishti_also"]`` (see
    :func:`drishti_codes`)."""
    by_id: dict[str, Finding] = {}
    for f in findings:
        by_id.setdefault(f.check, f)
    gone: set[int] = set()
    for keep_id, merged_id, when in SAME_CAUSE:
        keep, merged = by_id.get(keep_id), by_id.get(merged_id)
        if keep is None or merged is None or id(merged) in gone or id(keep) in gone:
            continue
        if keep.level < Level.INFO or merged.level < Level.INFO:
            continue  # an OK note is nothing to merge
        if when is not None and not when(ctx, keep, merged):
            continue
        code = f" (Drishti {merged.drishti})" if merged.drishti else ""
        seen = f"{merged.check}{code}: {merged.message}"
        old = str(keep.evidence.get("also_seen_as", ""))
        keep.evidence["also_seen_as"] = f"{old}; {seen}" if old else seen
        note = f"also seen as {merged.check}{code}"
        keep.drishti_note = f"{keep.drishti_note}; {note}" if keep.drishti_note else note
        for k, v in merged.thresholds.items():
            keep.thresholds.setdefault(k, v)
        codes = [*str(keep.evidence.get("drishti_also", "")).split(),
                 *str(merged.evidence.get("drishti_also", "")).split(),
                 *([merged.drishti] if merged.drishti and merged.level >= Level.WARN else [])]
        if codes:
            keep.evidence["drishti_also"] = " ".join(dict.fromkeys(codes))
        if merged.level > keep.level:
            keep.level = merged.level
        if merged.check not in _CONSEQUENCES and merged.cost_seconds is not None and (
                keep.cost_seconds is None or merged.cost_seconds > keep.cost_seconds):
            keep.cost_seconds = merged.cost_seconds
            keep.message = _restate_cost(keep.message, merged.message)
        gone.add(id(merged))
    return [f for f in findings if id(f) not in gone]


def drishti_codes(findings: list[Finding], level: Level = Level.WARN) -> set[str]:
    """The Drishti warnings (codes) the findings account for at ``level`` or
    above: their own codes and those of the findings merged into them
    (``evidence["drishti_also"]``), and, whatever the level, the code of a
    finding that deliberately says less than Drishti's warning
    (``evidence["drishti_warns"]``: blocking calls with nothing to overlap,
    an imbalance that collective buffering makes), its note saying why."""
    out: set[str] = set()
    for f in findings:
        if f.level >= level:
            out.update([f.drishti] if f.drishti else [])
            out.update(str(f.evidence.get("drishti_also", "")).split())
        out.update(str(f.evidence.get("drishti_warns", "")).split())
    return out


_STAKE = re.compile(r" At stake: [^()]*\(slowest rank\)\.")


def _restate_cost(message: str, source: str) -> str:
    """``message`` with its "At stake" sentence taken from ``source``."""
    found = _STAKE.search(source)
    return message if found is None else _with_stake(message, found.group(0))


def _with_stake(message: str, stake: str) -> str:
    """``message`` with ``stake`` as its "At stake" sentence."""
    if _STAKE.search(message):
        return _STAKE.sub(lambda _m: stake, message, count=1)
    return message + stake


def cap_costs(findings: list[Finding], times: IoTime) -> None:
    """Costs never add up to more than the slowest rank's I/O time: findings
    often explain the same seconds twice (small and misaligned requests are
    the same calls), so, most costly first, each keeps at most what the ones
    before it left of that time; a cut one keeps its estimate in
    ``evidence["cost_before_cap"]`` and says the capped figure."""
    left = times.slowest_seconds
    for f in findings:
        if f.cost_seconds is None:
            continue
        # Per-call work between the calls (price's ``outside``) is not I/O time.
        outside = float(f.evidence.get("outside_io_seconds", 0.0))
        capped = round(max(min(f.cost_seconds, left + outside), 0.0), 6)
        if capped < f.cost_seconds:
            f.evidence["cost_before_cap"] = f.cost_seconds
            f.cost_seconds = capped
            f.message = _with_stake(
                f.message, f" At stake: {times.share_text(capped)} (slowest rank).")
        left -= max(capped - outside, 0.0)


def cost_order(f: Finding) -> tuple[Any, ...]:
    """Most costly first; findings without an estimate after all others, by level."""
    known = f.cost_seconds is not None
    return (not known, -(f.cost_seconds or 0.0), -f.level, f.layer, f.check)


def cap_severity(findings: list[Finding], times: IoTime, values: dict[str, Any]) -> None:
    """No finding is HIGH when I/O is too small a part of the job to matter:
    the slowest rank's I/O below ``high_min_io_seconds`` or, when the run time
    is known, below ``high_min_io_share`` of the run."""
    seconds, share = times.slowest_seconds, times.share
    small = seconds < values["high_min_io_seconds"] or (
        share is not None and share < values["high_min_io_share"])
    if not small:
        return
    why = (f"I/O is {times.share_text(seconds)} (slowest rank): at most a warning "
           f"below {values['high_min_io_seconds']:g} s or "
           f"{100 * values['high_min_io_share']:g} % of the run")
    for f in findings:
        if f.level == Level.HIGH:
            f.level = Level.WARN
            f.evidence["downgraded"] = why
            f.thresholds.update({k: values[k] for k in ("high_min_io_seconds",
                                                         "high_min_io_share")})
