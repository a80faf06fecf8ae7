"""The one data model every source fills and every analysis reads.

A :class:`Trace` holds what is known about one run of one application:

* ``job``       -- job metadata (ranks, times, executable, hints, mounts);
* ``counters``  -- per layer, one :class:`Counters` table with a row per
  (file, rank) and one column per counter (Darshan's counter names are the
  vocabulary, so a Darshan log and an iopilot trace read the same);
* ``records``   -- optional per-operation records (:class:`Records`), one
  NumPy column per field, never one Python object per operation;
* ``lustre``    -- striping of files on Lustre, when known;
* ``heatmaps``  -- bytes per rank and time bin, per layer (:class:`Heatmap`,
  Darshan's HEATMAP module), when the source has them;
* ``mpi``       -- time in MPI per rank and operation (:class:`MpiProfile`,
  AutoPerf's APMPI module in Darshan logs), when the source has it;
* ``sites``     -- the call sites of the records (:class:`Sites`), when known;
* ``modules``   -- what the source contained, with partial-data flags;
* ``warnings``  -- everything the user must know about missing data.

Rank ``-1`` in a counters row means "shared file, reduced over all ranks",
as in Darshan.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from .._record import field, record

# Layers, operation codes and size bins are the shared vocabulary's
# (:mod:`iopilot.vocabulary`).  Data operations (read, write) are in
# ``Trace.records``, the others in ``Trace.meta_records``.
from ..vocabulary import MODULE, RECORD_LAYERS
from .aggregate import per_file
from .cpu import ProcessCpu
from .sites import Sites


def display(layer: str) -> str:
    """Human name of a layer (``MPIIO`` -> ``MPI-IO``)."""
    m = MODULE.get(layer)
    return m.display if m else layer


@record
class Counters:
    """Counters of one layer: a row per (file, rank), a column per counter."""

    layer: str
    file_id: np.ndarray  # uint64 record id (hash of the name)
    rank: np.ndarray  # int64; -1 = shared file reduced over all ranks
    ints: np.ndarray  # int64 [rows, len(int_names)]
    floats: np.ndarray  # float64 [rows, len(float_names)]
    int_names: tuple[str, ...]
    float_names: tuple[str, ...]
    # H5D datasets and PnetCDF variables point at their file's record id.
    parent_id: np.ndarray | None = None

    def __post_init__(self) -> None:
        self._index = {n: (0, i) for i, n in enumerate(self.int_names)}
        self._index.update({n: (1, i) for i, n in enumerate(self.float_names)})

    def __len__(self) -> int:
        return int(self.file_id.shape[0])

    def has(self, name: str) -> bool:
        return name in self._index

    def __getitem__(self, name: str) -> np.ndarray:
        """The column of counter ``name`` (a view, not a copy)."""
        try:
            kind, i = self._index[name]
        except KeyError:
            raise KeyError(f"{self.layer} has no counter {name}") from None
        return self.floats[:, i] if kind else self.ints[:, i]

    def total(self, name: str) -> float:
        """Sum of a counter over all rows (int for integer counters)."""
        col = self[name]
        return int(col.sum()) if col.dtype.kind == "i" else float(col.sum())

    def select(self, mask: np.ndarray) -> Counters:
        """Rows where ``mask`` is true, as a new table."""
        return Counters(
            self.layer,
            self.file_id[mask],
            self.rank[mask],
            self.ints[mask],
            self.floats[mask],
            self.int_names,
            self.float_names,
            None if self.parent_id is None else self.parent_id[mask],
        )

    def by_file(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Per-file sum of a counter: (unique file ids, sums)."""

        ids, sums = per_file(self.file_id, {name: self[name]})
        return ids, sums[name]

    @staticmethod
    def empty(
        layer: str, int_names: Iterable[str] = (), float_names: Iterable[str] = ()
    ) -> Counters:
        ints, floats = tuple(int_names), tuple(float_names)
        return Counters(
            layer,
            np.zeros(0, np.uint64),
            np.zeros(0, np.int64),
            np.zeros((0, len(ints)), np.int64),
            np.zeros((0, len(floats)), np.float64),
            ints,
            floats,
        )


@record
class Records:
    """Per-operation records, one NumPy column per field.

    Times are seconds since the job start.  ``layer`` indexes
    :data:`RECORD_LAYERS`, ``op`` is :data:`OP_READ` or :data:`OP_WRITE`.
    ``site`` is the call site's row in :attr:`Trace.sites` (0: unknown, and
    always 0 when the source has no call sites); ``thread`` the thread's
    index within its process (0: the first thread that did I/O).
    """

    rank: np.ndarray  # int32
    layer: np.ndarray  # uint8
    op: np.ndarray  # uint8
    file_id: np.ndarray  # uint64
    offset: np.ndarray  # int64
    length: np.ndarray  # int64
    start: np.ndarray  # float64
    end: np.ndarray  # float64
    site: np.ndarray | None = None  # uint32, or uint16 (zeros when not given)
    thread: np.ndarray | None = None  # uint16 (zeros when not given)

    def __post_init__(self) -> None:
        # np.zeros takes pages from the system only when they are written
        if self.site is None:
            self.site = np.zeros(len(self.rank), np.uint32)
        if self.thread is None:
            self.thread = np.zeros(len(self.rank), np.uint16)

    def __len__(self) -> int:
        return int(self.rank.shape[0])

    @staticmethod
    def empty() -> Records:
        return Records(
            np.zeros(0, np.int32),
            np.zeros(0, np.uint8),
            np.zeros(0, np.uint8),
            np.zeros(0, np.uint64),
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros(0, np.float64),
            np.zeros(0, np.float64),
        )

    def select(self, mask: np.ndarray) -> Records:
        return Records(*(getattr(self, f)[mask] for f in _RECORD_FIELDS))

    def of_layer(self, layer: str) -> Records:
        return self.select(self.layer == RECORD_LAYERS.index(layer))

    @staticmethod
    def concat(parts: list[Records]) -> Records:
        if not parts:
            return Records.empty()
        return Records(*(np.concatenate([getattr(p, f) for p in parts]) for f in _RECORD_FIELDS))


_RECORD_FIELDS = ("rank", "layer", "op", "file_id", "offset", "length", "start", "end", "site",
                  "thread")  # fmt: skip


@record
class BackgroundOps:
    """Operations a background I/O thread made for the program (write-behind,
    the event-set engine), one row each: when the program's call queued it, when the thread issued
    it and when it completed (seconds since the job start).  The program's
    own calls are in :attr:`Trace.records`: these rows never count twice."""

    rank: np.ndarray  # int32
    file_id: np.ndarray  # uint64
    op: np.ndarray  # uint8, an OP_NAMES code (write or sync)
    offset: np.ndarray  # int64, -1 for syncs
    length: np.ndarray  # int64 bytes asked, 0 for syncs
    queued: np.ndarray  # float64
    issued: np.ndarray  # float64
    completed: np.ndarray  # float64
    failed: np.ndarray  # bool

    def __len__(self) -> int:
        return int(self.rank.shape[0])


@record
class Striping:
    """Lustre layout of files: a row per file, OST lists stored flat."""

    file_id: np.ndarray  # uint64
    stripe_size: np.ndarray  # int64 bytes
    stripe_count: np.ndarray  # int64
    ost_start: np.ndarray  # int64 index into ``ost_ids`` of each file's first OST
    ost_ids: np.ndarray  # int64, flat

    def __len__(self) -> int:
        return int(self.file_id.shape[0])

    def osts(self, row: int) -> np.ndarray:
        s = int(self.ost_start[row])
        return self.ost_ids[s : s + int(self.stripe_count[row])]


@record
class Heatmap:
    """Bytes one layer moved per rank and time bin (Darshan's HEATMAP module).

    Bin ``b`` covers ``[b * bin_width, (b + 1) * bin_width)`` seconds after the
    job start.  Darshan spreads each operation's bytes over the bins its
    duration covers, rounding per bin, so a row's sum can differ from the
    layer's byte counters by under one byte per bin an operation touched.
    """

    layer: str  # model layer: POSIX, MPIIO, STDIO, DFS, DAOS
    bin_width: float  # seconds
    rank: np.ndarray  # int64 [rows], ascending; ranks without a record are absent
    read: np.ndarray  # int64 [rows, bins]
    write: np.ndarray  # int64 [rows, bins]

    def __len__(self) -> int:
        return int(self.rank.shape[0])

    @property
    def bins(self) -> int:
        return int(self.read.shape[1]) if self.read.ndim == 2 else 0

    @property
    def seconds(self) -> float:
        """The time the bins span."""
        return self.bins * self.bin_width

    def total(self, direction: str) -> int:
        """Bytes over all ranks and bins, ``"read"`` or ``"write"``."""
        return int(getattr(self, direction).sum())


@record
class MpiProfile:
    """Time spent in MPI per rank (AutoPerf's APMPI module in Darshan logs).

    ``ops`` are Darshan's MPI operation names (``MPI_SEND``, ``MPI_BARRIER``
    ...); the columns of ``calls``, ``seconds``, ``max_seconds`` and
    ``bytes`` follow them.  Collectives can also be timed in a barrier just
    before the call (``sync_ops``, ``sync_seconds``): the time a rank waited
    for the others, measured only when the runtime was built for it
    (``sync_measured``).
    """

    rank: np.ndarray  # int64 [rows], ascending
    host: tuple[str, ...]  # per row: the node the rank ran on
    ops: tuple[str, ...]
    calls: np.ndarray  # int64 [rows, ops]
    seconds: np.ndarray  # float64 [rows, ops]: total time in the calls
    max_seconds: np.ndarray  # float64 [rows, ops]: the slowest single call
    bytes: np.ndarray  # int64 [rows, ops]: message bytes (0 where not counted)
    sync_ops: tuple[str, ...]
    sync_seconds: np.ndarray  # float64 [rows, sync_ops]
    comm_seconds: np.ndarray  # float64 [rows]: all MPI time, sync time included
    sync_measured: bool
    # Variance over ranks of comm_seconds and of the sync time, from the
    # module's header (computed by the runtime over all ranks).
    comm_variance: float = 0.0
    sync_variance: float = 0.0

    def __len__(self) -> int:
        return int(self.rank.shape[0])

    @property
    def rank_sync_seconds(self) -> np.ndarray:
        """Per rank: seconds waiting for other ranks before collectives."""
        return self.sync_seconds.sum(axis=1)

    @property
    def job_sync_seconds(self) -> float:
        """The job's sync time: summed over ranks (rank-seconds)."""
        return float(self.sync_seconds.sum())

    @property
    def job_comm_seconds(self) -> float:
        """All MPI time summed over ranks (rank-seconds)."""
        return float(self.comm_seconds.sum())


@record
class ModuleInfo:
    """One module (layer) the source contained."""

    name: str  # as the source names it, e.g. "MPI-IO", "DXT_POSIX", "HEATMAP"
    partial: bool = False  # the writer ran out of memory: data is incomplete
    rows: int = 0  # records read (counter rows or per-file trace blocks)
    read: bool = True  # False: listed as present, contents not used


@record
class ClockAlignment:
    """How the hosts' clocks were put on world rank 0's (iopilot traces of
    MPI jobs; sources/trace_clock.py)."""

    hosts: int  # hosts with processes in the trace
    aligned: int  # of those, hosts whose clock was measured against rank 0's
    largest_shift: float  # seconds: the largest move of a process's timeline
    uncertainty: float | None  # seconds an aligned timeline may still be off; None: none aligned


@record
class Job:
    """What is known about the job as a whole."""

    nprocs: int = 1
    jobid: int = 0
    uid: int = 0
    start: float = 0.0  # seconds since the epoch
    end: float = 0.0
    runtime: float = 0.0  # seconds
    executable: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    hints: dict[str, str] | None = None  # MPI-IO hints in effect, None if unknown
    # HDF5 chunked datasets' chunk cache (bytes) as the runtime noted it at
    # open, by the dataset's file id; empty when unknown (Darshan logs).
    hdf5_chunk_cache: dict[int, int] = field(default_factory=dict)
    mounts: list[tuple[str, str]] = field(default_factory=list)  # (path, fs type)
    hosts: dict[int, str] = field(default_factory=dict)  # rank -> host, when known
    # Where the ranks come from, when the source knows: "mpi" (MPI_Init),
    # "launcher" (its variables), "workers" (none: rank 0 is the main
    # process, the others its Python worker processes), "" (unknown, or one
    # process and its helpers).
    rank_source: str = ""
    format: str = ""  # e.g. "darshan 3.41"
    writer: str = ""  # e.g. "darshan-runtime 3.4.6"
    # How the program ended, when the source knows (Darshan logs do not):
    # shell-style status (128+N after signal N) and the signal, if any.
    exit_status: int | None = None
    signal: int | None = None
    # The program's language as far as the source can tell: "python",
    # "fortran", "c++" or "c"; "" when unknown (Darshan logs name only the
    # executable).  Advice snippets follow it (checks/language.py).
    language: str = ""
    # Layers the program carries inside itself (HDF5, MPI-IO or NetCDF linked
    # statically into the executable or a library of its own), which an
    # ``LD_PRELOAD`` runtime cannot see: {layer: the file that defines it}.
    static_layers: dict[str, str] = field(default_factory=dict)
    clock: ClockAlignment | None = None  # None: one host, or not measured


@record
class Trace:
    """Everything one source says about one run."""

    source: str
    job: Job
    names: dict[int, str]
    counters: dict[str, Counters]
    records: Records
    lustre: Striping | None = None
    modules: list[ModuleInfo] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # How the traced processes ran and ended (plain data, see
    # docs/json-report.md); None when the source does not say (Darshan).
    processes: dict[str, Any] | None = None
    # Metadata operations (open, close, seek, stat ...) when the source has
    # them one by one (iopilot traces); their ``length`` is 0.
    meta_records: Records = field(default_factory=lambda: Records.empty())
    # Runtime and library files left out of the analysis (plain data, see
    # docs/json-report.md and :mod:`.scope`); None when no scope was applied.
    set_aside: dict[str, Any] | None = None
    # Per layer (POSIX, MPIIO, STDIO ...): bytes per rank and time bin;
    # None when the source has no heatmap.
    heatmaps: dict[str, Heatmap] | None = None
    # Time in MPI per rank and operation; None when the source has none.
    mpi: MpiProfile | None = None
    # Settings applied at run time (IOPILOT_SETTINGS): the file, its errors
    # and one entry per (setting, value, file, object, outcome, detail) with
    # counts (plain data, see docs/json-report.md); None when none was given.
    settings: dict[str, Any] | None = None
    # What write-behind (IOPILOT_ASYNC) deferred and what it cost, summed over
    # the processes (writes, bytes, errors, busy/queued/wait seconds); None
    # when it was off.
    write_behind: dict[str, Any] | None = None
    # Each operation a background thread made (write-behind, the event-set
    # engine), with its queued, issued and completed times; None when the
    # source has none.
    background: BackgroundOps | None = None
    # The call sites of the records (``Records.site`` rows); None when the
    # source has none (Darshan logs, iopilot traces before format 3).
    sites: Sites | None = None
    # Where each program process could run and what its processors did
    # (:mod:`.cpu`), rank by rank; None when the source does not say (Darshan
    # logs), empty when no process's summary had it.
    cpus: list[ProcessCpu] | None = None

    def layer(self, name: str) -> Counters | None:
        """The counters of a layer, or None if the source had none."""
        return self.counters.get(name)

    def has(self, name: str) -> bool:
        c = self.counters.get(name)
        return c is not None and len(c) > 0

    def name(self, file_id: int) -> str:
        return self.names.get(int(file_id), f"<file {int(file_id):#x}>")

    @property
    def partial(self) -> bool:
        return any(m.partial for m in self.modules) or bool(self.warnings)


# Characters never shown raw: C0 controls, DEL, C1 controls, line and
# paragraph separators, bidirectional overrides, and lone surrogates (bytes
# that were not UTF-8, decoded with "surrogateescape").
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e"
                     "\u2066-\u2069\ud800-\udfff]")  # fmt: skip
_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    o = ord(c)
    if c in _SHORT:
        return _SHORT[c]
    if o < 0x80 or 0xDC80 <= o <= 0xDCFF:  # a control byte, or a byte that was not UTF-8
        return f"\\x{o & 0xFF:02x}"
    return f"\\u{o:04x}"


def safe_name(text: str, *, multiline: bool = False) -> str:
    """``text`` (a file name, a command line, a message) fit for a terminal, a
    spreadsheet or a web page: bytes that were not UTF-8 become ``\\xNN``,
    control characters ``\\n``, ``\\t``, ``\\xNN`` or ``\\uNNNN``, so no escape
    sequence from a trace ever reaches a terminal.  ``multiline`` keeps line
    breaks (for code snippets)."""
    if text.isprintable() or not _UNSAFE.search(text):
        return text
    if multiline:
        return "\n".join(_UNSAFE.sub(_escape, line) for line in text.split("\n"))
    return _UNSAFE.sub(_escape, text)
