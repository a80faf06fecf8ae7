"""Run the registered checks over a trace and collect a :class:`Diagnosis`."""

from __future__ import annotations

from typing import Any

from .._record import field, record
from ..model import COUNTER_LAYERS, Trace, display
from ..model.aggregate import unique
from ..vocabulary import MODULES, SIZE_BIN_UPPER, SIZE_BINS
from . import thresholds as th
from .base import AnalysisCache, Context, Finding, Level, iter_registered
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
             cache: AnalysisCache | None = None) -> Diagnosis:  # fmt: skip
    """Run every registered check (or those in ``only``) on ``trace``.

    The checks share one :class:`AnalysisCache` of derived tables; it ends
    with the diagnosis (so the report renders without it in memory) unless
    the caller passes one in."""
    values = thresholds if thresholds is not None else th.defaults()
    ctx = Context(trace, values, cache)
    findings: list[Finding] = []
    warnings = list(trace.warnings)
    for chk in iter_registered(lambda c: only is None or c.id in only):
        if chk.needs_records and not len(trace.records):
            continue
        try:
            findings.extend(chk.evaluate(ctx))
        except Exception as e:  # a broken check must not hide the others
            warnings.append(f"check {chk.id} failed: {type(e).__name__}: {e}")
    times = io_time(ctx)
    cap_severity(findings, times, values)
    findings.sort(key=cost_order)
    return Diagnosis(trace, findings, summarize(trace), values, warnings, times)


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
