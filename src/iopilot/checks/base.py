"""What a check is, what it returns, and how checks are registered.

A check is one small class: its metadata (id, Drishti alias, layer,
thresholds it reads) and ``evaluate(ctx) -> Iterable[Finding]``.  It reads the
model through :class:`Context` and never prints; reporters render findings.

Adding a check touches two files and its test:

1. the check's file in this package (a new file is found by itself: the
   package imports every module it holds): the class decorated with
   ``@check``, with ``id``, ``layer``, ``drishti`` (Drishti's code, or None),
   ``uses`` (the thresholds it reads), ``defaults`` (the thresholds it adds,
   ``(name, default, meaning)`` each, merged into ``thresholds.DEFAULTS``), its
   advice, and for a check no Drishti code covers ``finds`` and ``cost``
   (its row of README's table of checks);
2. README.md, its row written by ``python tools/gen_checks_table.py``
   (``tests/test_checks_table.py`` fails while the table is stale);
3. its test, in tests/.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from enum import IntEnum
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from .._record import asdict, field, record
from ..model import OP_NAMES, RECORD_LAYERS, SIZE_BIN_UPPER, SIZE_BINS, Counters, Trace
from ..model.aggregate import group_sum, unique
from . import thresholds


class Level(IntEnum):
    """Severity, ordered: reports list the highest first."""

    OK = 0
    INFO = 1
    WARN = 2
    HIGH = 3


@record(frozen=True)
class FileLocation:
    """A file the finding is about (its path, or ``<file 0x...>`` when unnamed)."""

    path: str
    kind: ClassVar[str] = "file"


@record(frozen=True)
class RankLocation:
    """An MPI rank (or process) the finding names."""

    rank: int
    kind: ClassVar[str] = "rank"


@record(frozen=True)
class PhaseLocation:
    """An I/O phase: seconds from the start of the job, as the records' times."""

    start_s: float
    end_s: float
    kind: ClassVar[str] = "phase"


@record(frozen=True)
class SourceLocation:
    """A call site in the program: the operations of a finding that came from
    it (``calls``) and the seconds they took.  Filled from traces with call
    sites (:attr:`Trace.sites <iopilot.model.Trace>`) by
    :func:`~iopilot.checks.callsites.add_call_sites`; Darshan logs have none.
    Without debug information ``file`` is "" and ``line`` 0, and ``label``
    (what reports show) names the function or the module and offset."""

    file: str
    line: int
    function: str = ""
    calls: int = 0
    seconds: float = 0.0
    label: str = ""  # "main.c:42 write_rows", "write_rows (prog+0x1234)", "prog+0x1234"
    module: str = ""  # the executable or library, "" for Python sites
    offset: int = -1  # in ``module``; -1 for Python sites
    note: str = ""  # why the site is degraded ("no debug information" ...), "" when fine
    caller: str = ""  # its callers, innermost first ("main.c:88 main; ..."), "" when unknown
    kind: ClassVar[str] = "source"


Location = FileLocation | RankLocation | PhaseLocation | SourceLocation


def location_dict(loc: Location) -> dict[str, Any]:
    """A location as plain data: ``{"kind": "rank", "rank": 3}`` and the like."""
    return {"kind": loc.kind, **asdict(loc)}


@record
class FileEvidence:
    """One file responsible for a finding, with the numbers that make it so.
    Checks that list ranks or phases this way say so in ``location``."""

    path: str
    numbers: dict[str, float | int | str]
    location: Location | None = None  # None: the file ``path``

    def where(self) -> Location:
        return self.location if self.location is not None else FileLocation(self.path)


class FileList(list[FileEvidence]):
    """The files a finding lists (the worst, at most ``max_files_listed``),
    knowing the record ids of every file responsible (``ids``, ``files_total``
    of them): a finding's call sites come from the operations on all of them,
    not only on those listed."""

    def __init__(self, listed: Iterable[FileEvidence], ids: np.ndarray) -> None:
        super().__init__(listed)
        self.ids = ids


@record
class Finding:
    """One diagnosis result: what was seen, the numbers, and what to change."""

    check: str  # iopilot id, e.g. "posix-small-writes"
    layer: str
    level: Level
    message: str  # one sentence with the measured numbers
    drishti: str | None = None  # Drishti's code for the same finding, if any
    drishti_note: str = ""  # how Drishti's verdict differs, if it does
    evidence: dict[str, float | int | str] = field(default_factory=dict)
    files: list[FileEvidence] = field(default_factory=list)
    files_total: int = 0  # files responsible, of which ``files`` lists the worst
    recommendation: str = ""
    snippet: str = ""  # code or configuration to apply
    snippet_lang: str = ""  # "c", "sh", "text", ...
    thresholds: dict[str, float | int] = field(default_factory=dict)
    # Seconds of the slowest rank's I/O that the problem explains (or that
    # fixing it would save), estimated from the trace; None when the source
    # cannot support an estimate.  Each check documents how it estimates.
    cost_seconds: float | None = None
    # Where the problem is: the entries of ``files`` (files, ranks or phases)
    # first, then what the check names besides (the slowest rank ...).
    locations: list[Location] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.snippet:  # a language names the snippet's; none, no language
            self.snippet_lang = ""
        listed = [e.where() for e in self.files]
        self.locations = list(dict.fromkeys([*listed, *self.locations]))


@record
class Operations:
    """The per-operation records a finding is about, as its check declares
    them (:meth:`Check.concerns`): record layers, operation names
    (names of :data:`~iopilot.vocabulary.OP_NAMES`, e.g. "write" or "sync"
    ...), whether only requests below ``small_request_size`` count, and
    which ranks' (None: every rank's).
    :mod:`.callsites` narrows them to the entries the finding lists (its
    files, ranks or phases).  A check that knows better passes its own masks
    over ``trace.records`` (``data``) and ``trace.meta_records`` (``meta``)
    in place of the layers, operations and sizes; a table without one gives
    no records when the other has one."""

    layers: tuple[str, ...]
    ops: tuple[str, ...]
    small: bool = False
    ranks: tuple[int, ...] | None = None
    data: np.ndarray | None = None
    meta: np.ndarray | None = None


DATA_OPS = ("read", "write")
META_OPS = tuple(op for op in OP_NAMES if op not in DATA_OPS)


class Check:
    """Base of all checks; subclasses set the metadata and ``evaluate``."""

    id: ClassVar[str]
    layer: ClassVar[str]
    drishti: ClassVar[str | None] = None
    # Names of the thresholds this check reads (see thresholds.DEFAULTS);
    # those of ``defaults`` are added when it registers.
    uses: ClassVar[tuple[str, ...]] = ()
    # Thresholds this check adds: (name, default, what it means) each.
    defaults: ClassVar[tuple[tuple[str, float | int, str], ...]] = ()
    needs_records: ClassVar[bool] = False
    # README's table of the checks no Drishti code covers: what it finds and
    # what its ``cost_seconds`` is (None: not in the table).
    finds: ClassVar[str | None] = None
    cost: ClassVar[str | None] = None
    # The operations a finding is about, whose call sites it lists (see
    # :meth:`concerns`): operation names (None: the reads or the writes of
    # the check's ``direction``, else both), record layers (None: the
    # check's layer when it has per-operation records; (): the check is
    # about no operations), and whether only small requests count.
    site_ops: ClassVar[tuple[str, ...] | None] = None
    site_layers: ClassVar[tuple[str, ...] | None] = None
    site_small: ClassVar[bool] = False

    @classmethod
    def summary(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else cls.id

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        raise NotImplementedError

    def concerns(self, _ctx: Context, _finding: Finding) -> Operations | None:
        """The operations ``finding`` is about (None: none), from ``site_ops``,
        ``site_layers`` and ``site_small``; a check whose findings differ in
        kind overrides it."""
        layers = self.site_layers
        if layers is None:
            layers = (self.layer,) if self.layer in RECORD_LAYERS else ()
        if not layers:
            return None
        ops = self.site_ops
        if ops is None:
            direction = str(getattr(self, "direction", "")).lower()
            ops = (direction,) if direction in DATA_OPS else DATA_OPS
        return Operations(tuple(layers), tuple(ops), self.site_small)

    def finding(self, ctx: Context, level: Level, message: str, *,
                ranks: Iterable[int] = (), **kw: Any) -> Finding:  # fmt: skip
        """A finding carrying this check's metadata and the thresholds it used;
        ``ranks`` are the ranks its message names (added to its locations)."""
        kw["locations"] = [*kw.get("locations", ()), *(RankLocation(int(r)) for r in ranks)]
        kw.setdefault("drishti", self.drishti)
        kw.setdefault("thresholds", {k: ctx.thresholds[k] for k in self.uses})
        return Finding(check=self.id, layer=self.layer, level=level, message=message, **kw)


REGISTRY: dict[str, type[Check]] = {}


def check(cls: type[Check]) -> type[Check]:
    """Class decorator that registers a check under its id, with the
    thresholds of its ``defaults``."""
    if cls.id in REGISTRY:
        raise ValueError(f"duplicate check id {cls.id}")
    added = {name: (value, meaning) for name, value, meaning in cls.defaults}
    for name, value in added.items():
        if thresholds.DEFAULTS.get(name, value) != value:
            raise ValueError(f"check {cls.id}: threshold {name} is already defined")
    thresholds.DEFAULTS.update(added)
    cls.uses = tuple(dict.fromkeys((*cls.uses, *added)))
    REGISTRY[cls.id] = cls
    return cls


class AnalysisCache:
    """Derived tables computed once per diagnosis and shared by the checks
    that need them (phases, rank loads, a layer's records, per-file indexes);
    ``computed`` and ``reused`` count, per kind of table, how often each happened."""

    def __init__(self) -> None:
        self._store: dict[Hashable, Any] = {}
        self.computed: dict[str, int] = {}
        self.reused: dict[str, int] = {}

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        kind = str(key[0] if isinstance(key, tuple) else key).split(":")[0]
        if key in self._store:
            self.reused[kind] = self.reused.get(kind, 0) + 1
            return self._store[key]
        self.computed[kind] = self.computed.get(kind, 0) + 1
        value = self._store[key] = compute()
        return value


class Context:
    """The model plus thresholds, with derived tables computed once and shared."""

    def __init__(self, trace: Trace, thresholds: dict[str, Any],
                 cache: AnalysisCache | None = None) -> None:  # fmt: skip
        self.trace = trace
        self.thresholds = thresholds
        self.max_files = int(thresholds.get("max_files_listed", 10))
        self.cache = cache if cache is not None else AnalysisCache()

    def layer(self, name: str) -> Counters | None:
        c = self.trace.counters.get(name)
        return c if c is not None and len(c) else None

    def file_index(self, c: Counters) -> tuple[np.ndarray, np.ndarray]:
        """(sorted unique file ids, each row's place among them) of a counter
        table; computed once per diagnosis for the trace's own tables."""
        if self.trace.counters.get(c.layer) is not c:  # a selection: not worth keeping
            return np.unique(c.file_id, return_inverse=True)
        return self.cache.get(("file_index", id(c)), lambda: _frozen_index(c))[1:]

    def per_file(self, c: Counters, columns: dict[str, np.ndarray | None], *,
                 as_float: bool | None = None,
                 ) -> tuple[np.ndarray, dict[str, np.ndarray]]:  # fmt: skip
        """(sorted unique file ids, each column, one value per row of ``c``,
        summed per file); see :func:`~iopilot.model.aggregate.group_sum`."""
        ids, inv = self.file_index(c)
        return ids, {k: group_sum(inv, v, len(ids), as_float=as_float)
                     for k, v in columns.items()}  # fmt: skip

    def small_bins(self, counters: Counters, prefix: str, rw: str) -> list[str]:
        """Histogram columns whose requests are all below the small-request size."""
        limit = int(self.thresholds["small_request_size"])
        names = []
        for b, upper in zip(SIZE_BINS, SIZE_BIN_UPPER, strict=True):
            col = f"{prefix}_{rw}_{b}"
            if upper <= limit and counters.has(col):
                names.append(col)
        return names

    def small_ops(self, counters: Counters, prefix: str, rw: str) -> np.ndarray:
        """Per-row count of requests below the small-request size."""
        cols = self.small_bins(counters, prefix, rw)
        out = np.zeros(len(counters), np.int64)
        for c in cols:
            out += counters[c]
        return out - self._large_in_small_bins(counters, prefix, rw, cols)

    def _large_in_small_bins(self, counters: Counters, prefix: str, rw: str,
                             cols: list[str]) -> np.ndarray:  # fmt: skip
        """Requests the bins call small that are not: a bin's upper edge is in
        the bin, so exactly 1 MiB counts among 100K_1M.  Darshan's four most
        common access sizes say how many were that large; they mix reads and
        writes, so only what the other direction's same bin cannot hold is
        taken away (never a real small request)."""
        layer = prefix.rsplit("_SIZE", 1)[0]
        limit = int(self.thresholds["small_request_size"])
        out = np.zeros(len(counters), np.int64)
        if not counters.has(f"{layer}_ACCESS1_ACCESS"):
            return out
        other = "WRITE" if rw.startswith("READ") else "READ"
        for k in range(1, 5):
            size = counters[f"{layer}_ACCESS{k}_ACCESS"]
            count = counters[f"{layer}_ACCESS{k}_COUNT"]
            b = np.searchsorted(np.array(SIZE_BIN_UPPER), size, side="left")  # size's bin
            for i, name in enumerate(SIZE_BINS):
                col = f"{prefix}_{rw}_{name}"
                if col not in cols:
                    continue
                hit = (b == i) & (size >= limit)
                if not hit.any():
                    continue
                twin = f"{prefix}_{rw.replace(rw.split('_')[0], other)}_{name}"
                theirs = counters[twin] if counters.has(twin) else 0
                mine = np.clip(count - theirs, 0, counters[col])
                out += np.where(hit, mine, 0)
        return out

    @cached_property
    def shared_ids(self) -> set[int]:
        """Files accessed by more than one rank (reduced records or several ranks)."""
        ids: set[int] = set()
        for c in self.trace.counters.values():
            if not len(c):
                continue
            ids.update(int(i) for i in unique(c.file_id[c.rank == -1]))
            per_file = c.file_id[c.rank >= 0]
            uniq, counts = np.unique(per_file, return_counts=True)
            # A file with several per-rank rows is shared too (Darshan keeps
            # per-rank rows when a shared file was not opened by all ranks).
            ids.update(int(i) for i in uniq[counts > 1])
        return ids

    def top_files(
        self,
        ids: np.ndarray,
        score: np.ndarray,
        numbers: dict[str, np.ndarray],
        mask: np.ndarray | None = None,
    ) -> tuple[FileList, int]:
        """The worst files by ``score`` (descending), with their numbers (and
        the ids of all the files, see :class:`FileList`)."""
        if mask is not None:
            ids, score = ids[mask], score[mask]
            numbers = {k: v[mask] for k, v in numbers.items()}
        order = np.argsort(-score, kind="stable")[: self.max_files]
        out = FileList((FileEvidence(self.trace.name(int(ids[i])),
                                     {k: _plain(v[i]) for k, v in numbers.items()})
                        for i in order), np.asarray(ids, np.uint64))  # fmt: skip
        return out, len(ids)


def _frozen_index(c: Counters) -> tuple[Counters, np.ndarray, np.ndarray]:
    """``c`` (it rides along in the cache so its id cannot be reused) and its
    file index, read-only since every check shares it."""
    ids, inv = np.unique(c.file_id, return_inverse=True)
    ids.flags.writeable = inv.flags.writeable = False
    return c, ids, inv


def _plain(v: Any) -> float | int | str:
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return round(float(v), 6)
    return v


def pct(part: float, whole: float) -> float:
    """Percentage, 0 when the whole is 0."""
    return 100.0 * part / whole if whole else 0.0


def iter_registered(selected: Callable[[type[Check]], bool] | None = None) -> Iterator[Check]:
    for cls in REGISTRY.values():
        if selected is None or selected(cls):
            yield cls()
