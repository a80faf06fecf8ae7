"""The interactive HTML report: one self-contained page per diagnosis.

Python computes every number the page shows, with whole-column NumPy
arithmetic over the records in chunks of :data:`CHUNK` (so the passes over a
10 M-operation trace add tens of MB, not a copy of it; only the phase
detection of :func:`iopilot.checks.ranks.phases` sorts a layer's times whole,
as the checks do); the page's script (``html_page.js``) only decodes and
draws.  Large numeric arrays travel as base64 of little-endian typed arrays,
and plotly.js is embedded inline, so the page opens from ``file://`` with no
network and no server.

What the page holds, whatever the size of the trace:

* every operation when there are at most :data:`SAMPLE_CAP`, else a sample
  of that many (said on the page), plus per-layer (rank × time) bins whose
  sums are exact;
* exact totals: size histograms, per-rank, per-file and per-OST tables.
"""

from __future__ import annotations

import base64
import html
import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from ..checks import Diagnosis
from ..checks.phases import phases
from ..model import RECORD_LAYERS, SIZE_BIN_UPPER, SIZE_BINS, Counters, Records, Trace, display
from ..model.trace import safe_name
from ..vocabulary import FS_LAYERS, MODULE, MODULES, OP_NAMES, SIZE_BIN_LABELS
from .json_report import diagnosis_dict

SAMPLE_CAP = 50_000  # operations embedded one by one, over all views
# Of the sample, the largest and the slowest operations are always kept: the
# ones a user zooms in on are never the ones a random sample drops.
SAMPLE_EXTREMES = 1_000
BIN_CELLS = 120_000  # (rank row, time bin) cells over all binned layers
MAX_ROWS = 512  # rank rows of a binned timeline; more ranks share a row
MAX_COLS = 2000
FILES_LISTED = 5000  # files named in the page (selectors, hover); the rest are "other"
TABLE_FILES = 200  # rows of the per-file table
PHASE_ROWS = 1000  # phases listed per (layer, gap)
RANK_BARS = 4096  # bars of the per-rank charts; more ranks are grouped
GAP_CHOICES = (0.001, 0.01, 0.1, 1.0, 10.0, 60.0)  # extra phase gaps offered (s)
CHUNK = 1 << 20  # records per step of the chunked passes

# Layers with byte counters, in report order, and the interface each one is.
_TABLE_LAYERS = tuple(m.name for m in MODULES if m.op_classes)
LABELS = {name: MODULE[name].interface for name in _TABLE_LAYERS}
_NL = len(RECORD_LAYERS)
_FS_LAYERS = tuple(RECORD_LAYERS.index(n) for n in FS_LAYERS)  # what the FS sees
_UPPER = np.array(SIZE_BIN_UPPER, np.int64)
_NB = len(SIZE_BINS)

# Their read and write operation counters.
_OPS = {name: (MODULE[name].op_counters("READ"), MODULE[name].op_counters("WRITE"))
        for name in _TABLE_LAYERS}  # fmt: skip

_DTYPES = {"f8": "<f8", "f4": "<f4", "i4": "<i4", "u4": "<u4", "u1": "u1"}


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def render_html(diagnosis: Diagnosis, *, phase_gap: float | None = None) -> str:
    """The whole page as one string."""
    return _render(diagnosis, phase_gap)[0]


def write_html(diagnosis: Diagnosis, path: str | Path, *, phase_gap: float | None = None) -> dict:
    """Write the page to ``path``; return where, its size and how records were drawn."""
    page, doc = _render(diagnosis, phase_gap)
    data = page.encode("utf-8")
    Path(path).write_bytes(data)
    rec = doc["records"] or {}
    return {
        "path": str(path),
        "bytes": len(data),
        "records": int(rec.get("total", 0)),
        "records_drawn": int(rec.get("drawn", 0)),
        "sampled": bool(rec.get("sampled", False)),
    }


def page_data(diagnosis: Diagnosis, *, phase_gap: float | None = None) -> dict[str, Any]:
    """The document the page embeds (arrays already base64-packed)."""
    return _Builder(diagnosis, phase_gap).build()


# ---------------------------------------------------------------------------
# Page assembly
# ---------------------------------------------------------------------------


def _render(d: Diagnosis, phase_gap: float | None) -> tuple[str, dict[str, Any]]:
    doc = page_data(d, phase_gap=phase_gap)
    title = html.escape(safe_name(f"iopilot — {Path(d.trace.source).name or d.trace.source}"))
    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
        f"<meta name=\"generator\" content=\"iopilot {html.escape(__version__)}\">\n",
        f"<title>{title}</title>\n<style>\n",
        _asset("html_page.css"),
        "</style>\n<script>\n",
        _plotly_js(),
        "\n</script>\n</head>\n<body>\n",
        "<div id=\"app\"><noscript>This report needs JavaScript.</noscript></div>\n",
        "<script id=\"iopilot-data\" type=\"application/json\">",
        _json(doc),
        "</script>\n<script>\n",
        _asset("html_page.js"),
        "</script>\n</body>\n</html>\n",
    ]
    return "".join(parts), doc


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


_PLOTLY: list[str] = []


def _plotly_js() -> str:
    if not _PLOTLY:  # 4.8 MB: read once per process
        from plotly.offline import get_plotlyjs

        js = get_plotlyjs()
        # The bundle sits inside a <script> element: it must not close it.
        _PLOTLY.append(js.replace("</script", "<\\/script"))
    return _PLOTLY[0]


def _json(doc: dict[str, Any]) -> str:
    text = json.dumps(_finite(doc), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    # Inside <script>: no "<" may start a tag; these escapes are valid JSON.
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _finite(o: Any, key: str = "") -> Any:
    """Plain JSON data: NumPy scalars to Python, NaN/inf to null (JSON has neither)."""
    if isinstance(o, dict):
        return {_finite(str(k)): _finite(v, str(k)) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_finite(v) for v in o]
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, float | np.floating):
        f = float(o)
        return f if math.isfinite(f) else None
    if isinstance(o, np.ndarray):
        return _finite(o.tolist())
    if isinstance(o, str):  # names from a trace may hold any byte: shown escaped
        return safe_name(o, multiline=key == "snippet")
    return o


def _pack(a: Any, code: str) -> dict[str, str]:
    """A numeric array as base64 of little-endian values, decoded by the page."""
    buf = np.ascontiguousarray(a, dtype=_DTYPES[code]).tobytes()
    return {"$b64": base64.b64encode(buf).decode("ascii"), "dtype": code}


# ---------------------------------------------------------------------------
# Small vectorised helpers
# ---------------------------------------------------------------------------


def _chunks(n: int) -> list[slice]:
    return [slice(i, min(i + CHUNK, n)) for i in range(0, n, CHUNK)]


class _Lookup:
    """Position of each query id in ``ids`` (-1 if absent), by binary search."""

    def __init__(self, ids: np.ndarray) -> None:
        self.perm = np.argsort(ids, kind="stable")
        self.sorted = ids[self.perm]

    def __call__(self, q: np.ndarray) -> np.ndarray:
        if not len(self.sorted):
            return np.full(len(q), -1, np.int64)
        pos = np.searchsorted(self.sorted, q)
        pos = np.minimum(pos, len(self.sorted) - 1)
        found = self.sorted[pos] == q
        return np.where(found, self.perm[pos], -1).astype(np.int64)


def _waterfill(counts: np.ndarray, budget: float) -> np.ndarray:
    """Per-group quotas summing to ``budget``: small groups whole, large ones equal."""
    counts = counts.astype(np.float64)
    if counts.sum() <= budget:
        return counts
    s = np.sort(counts)
    k = len(s)
    before = np.concatenate([[0.0], np.cumsum(s)[:-1]])
    # Total if the cap were each sorted count: monotone, so binary-search the budget.
    total = before + s * (k - np.arange(k))
    i = int(np.searchsorted(total, budget))
    q = (budget - before[i]) / (k - i)
    return np.minimum(counts, q)


def _group(values: np.ndarray, k: int) -> np.ndarray:
    """Sums of consecutive groups of ``k`` values (the last group may be short)."""
    if k <= 1:
        return values
    n = len(values)
    pad = (-n) % k
    return np.concatenate([values, np.zeros(pad, values.dtype)]).reshape(-1, k).sum(axis=1)


def _extremes() -> int:
    """How many of the largest (and of the slowest) operations the sample keeps."""
    return min(SAMPLE_EXTREMES, SAMPLE_CAP // 10)


# The view that shows what a finding is about (the page links each finding to it).
_VIEW_OF_CHECK = {"overlapping-writes": "spatiality", "overlapping-reads": "spatiality",
                  "posix-random-reads": "spatiality", "posix-random-writes": "spatiality"}
_VIEW_OF_LAYER = {"PHASES": "phases", "RANKS": "fs", "LUSTRE": "fs"}


def _finding_view(check: str, layer: str, records: bool, phases: bool) -> str:
    """The page view of a finding: its own, else where the layer's numbers are."""
    view = _VIEW_OF_CHECK.get(check) or _VIEW_OF_LAYER.get(layer, "sizes")
    if view == "spatiality" and not records:
        return "fs"
    if view == "phases" and not phases:
        return "fs"
    return view


def _file_categories(t: Trace) -> list[dict[str, Any]]:
    """Per interface with counters: its files by how they were used (read only,
    written only, both, neither) and by who used them (shared: a reduced row
    or more than one rank; unique: one rank), with the bytes of each kind."""
    out = []
    for name in _TABLE_LAYERS:
        c = t.layer(name)
        if c is None or not len(c) or not c.has(f"{name}_BYTES_READ"):
            continue
        ids, inv = np.unique(c.file_id, return_inverse=True)
        n = len(ids)
        rb = np.bincount(inv, weights=c[f"{name}_BYTES_READ"].astype(np.float64), minlength=n)
        wb = np.bincount(inv, weights=c[f"{name}_BYTES_WRITTEN"].astype(np.float64), minlength=n)
        rows = np.bincount(inv, minlength=n)
        reduced = np.bincount(inv, weights=c.rank < 0, minlength=n) > 0
        shared = reduced | (rows > 1)
        kinds = {"read_only": (rb > 0) & (wb == 0), "write_only": (rb == 0) & (wb > 0),
                 "read_write": (rb > 0) & (wb > 0), "no_data": (rb == 0) & (wb == 0)}
        row: dict[str, Any] = {"layer": display(name), "files": n}
        for k, m in kinds.items():
            row[k] = int(m.sum())
            row[k + "_bytes"] = float((rb + wb)[m].sum())
        row["shared"], row["unique"] = int(shared.sum()), int((~shared).sum())
        row["shared_bytes"] = float((rb + wb)[shared].sum())
        row["unique_bytes"] = float((rb + wb)[~shared].sum())
        out.append(row)
    return out


class _Top:
    """Positions of the ``k`` largest values seen so far, fed chunk by chunk."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.value = np.zeros(0)
        self.index = np.zeros(0, np.int64)

    def add(self, values: np.ndarray, first: int) -> None:
        if len(values) > self.k:  # the chunk's own top k, then the running top k
            part = np.argpartition(values, len(values) - self.k)[-self.k :]
        else:
            part = np.arange(len(values))
        value = np.concatenate([self.value, values[part].astype(np.float64)])
        index = np.concatenate([self.index, part + first])
        if len(value) > self.k:
            best = np.argpartition(value, len(value) - self.k)[-self.k :]
            value, index = value[best], index[best]
        self.value, self.index = value, index


def _col(c: Counters, names: tuple[str, ...] | str) -> np.ndarray:
    """Sum of the counters in ``names`` that the table has (zeros if none)."""
    names = (names,) if isinstance(names, str) else names
    out = np.zeros(len(c), np.float64)
    for n in names:
        if c.has(n):
            out += c[n]
    return out


def _timing_view(r: Records, layer: int) -> Records:
    """One layer's records with only what phase detection reads (rank, length, times).

    The other columns are zero-stride views of one value: no memory per record.
    """
    m = r.layer == layer
    n = int(m.sum())

    def const(dtype: type, value: int = 0) -> np.ndarray:
        return np.broadcast_to(np.full(1, value, dtype), (n,))

    return Records(r.rank[m], const(np.uint8, layer), const(np.uint8), const(np.uint64),
                   const(np.int64), r.length[m], r.start[m], r.end[m])  # fmt: skip


def _mount_of(path: str, mounts: list[tuple[str, str]]) -> tuple[str, str]:
    """(mount point, type) of ``path`` by longest prefix, ("", "") if none."""
    best = ("", "")
    for mnt, kind in mounts:
        if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best[0]):
            best = (mnt, kind)
    return best


# ---------------------------------------------------------------------------
# Lustre: bytes and requests per OST
# ---------------------------------------------------------------------------


class _Stripes:
    """The Lustre layout laid out flat: one position per (file, stripe slot)."""

    def __init__(self, trace: Trace) -> None:
        st = trace.lustre
        assert st is not None
        n = len(st)
        # A layout may list fewer OSTs than its stripe count: use the OSTs listed.
        order = np.argsort(st.ost_start, kind="stable")
        nxt = np.empty(n, np.int64)
        nxt[order] = np.append(st.ost_start[order][1:], len(st.ost_ids))
        self.count = np.clip(np.minimum(st.stripe_count, nxt - st.ost_start), 0, None)
        self.count[st.stripe_size <= 0] = 0
        self.size = np.maximum(st.stripe_size, 1)
        self.file_id = st.file_id
        self.base = np.concatenate([[0], np.cumsum(self.count)[:-1]]).astype(np.int64)
        self.m = int(self.count.sum())
        self.flat_row = np.repeat(np.arange(n), self.count)
        slot = np.arange(self.m) - np.repeat(self.base, self.count)
        self.flat_ost = st.ost_ids[np.repeat(st.ost_start, self.count) + slot]
        self.lookup = _Lookup(st.file_id)

    def new(self) -> dict[str, np.ndarray]:
        m, rows = self.m, len(self.count)
        acc = {}
        # Bytes and requests are integers (exact); seconds are spread by byte share.
        for pre, dt in (("", np.int64), ("t_", np.float64)):
            acc[pre + "direct"] = np.zeros((2, m), dt)
            acc[pre + "diff"] = np.zeros((2, m + 1), dt)
            acc[pre + "full"] = np.zeros((2, rows), dt)
        acc["req"] = np.zeros((2, m + 1), np.int64)
        return acc

    def add(self, acc: dict[str, np.ndarray], op: int, row: np.ndarray, off: np.ndarray,
            ln: np.ndarray, seconds: np.ndarray | None = None) -> None:  # fmt: skip
        """Spread requests (offset, length > 0) exactly over their stripes' OSTs.

        Bytes go to the stripe holding them; ``seconds`` of each request are
        shared out in proportion to its bytes on each OST.
        """
        if not len(row):
            return
        ss, sc, base = self.size[row], self.count[row], self.base[row]
        k0 = off // ss
        k1 = (off + ln - 1) // ss
        nst = k1 - k0 + 1
        geo = (row, off, ln, ss, sc, base, k0, k1, nst)
        self._spread(acc, "", op, geo, None)
        if seconds is not None:
            self._spread(acc, "t_", op, geo, seconds / ln)
        # One request per OST a request touches.
        self._cyclic(acc["req"][op], base, sc, k0 % sc, np.minimum(nst, sc), np.ones(len(row)))

    def _spread(self, acc: dict[str, np.ndarray], pre: str, op: int, geo: tuple,
                scale: np.ndarray | None) -> None:  # fmt: skip
        row, off, ln, ss, sc, base, k0, k1, nst = geo
        m = self.m
        one = np.ones(len(row)) if scale is None else scale
        direct, diff, full = acc[pre + "direct"][op], acc[pre + "diff"][op], acc[pre + "full"][op]

        def add_to(target: np.ndarray, idx: np.ndarray, w: np.ndarray, n: int) -> None:
            v = np.bincount(idx, weights=w, minlength=n)
            target += v.astype(np.int64) if target.dtype.kind == "i" else v

        # The first stripe (partial, or the whole request), then the last one.
        first = np.where(nst == 1, ln, (k0 + 1) * ss - off)
        add_to(direct, base + k0 % sc, first * one, m)
        many = nst > 1
        if not many.any():
            return
        last = (off + ln - k1 * ss)[many]
        add_to(direct, (base + k1 % sc)[many], last * one[many], m)
        # Whole stripes in between: full turns over all the file's OSTs, then a remainder.
        mid = np.maximum(nst - 2, 0)
        cycles, rem = mid // sc, mid % sc
        add_to(full, row, cycles * ss * one, len(self.count))
        self._cyclic(diff, base, sc, (k0 + 1) % sc, rem, ss * one)

    def _cyclic(self, diff: np.ndarray, base: np.ndarray, sc: np.ndarray, start: np.ndarray,
                length: np.ndarray, w: np.ndarray) -> None:  # fmt: skip
        """Add ``w`` to ``length`` consecutive slots from ``start``, wrapping at ``sc``."""
        keep = length > 0
        if not keep.any():
            return
        base, sc, start, length = base[keep], sc[keep], start[keep], length[keep]
        w = np.broadcast_to(w, keep.shape)[keep].astype(np.float64)
        n = self.m + 1
        end = start + length
        wrap = end > sc
        d = np.bincount(base + start, weights=w, minlength=n)
        d -= np.bincount(base + np.minimum(end, sc), weights=w, minlength=n)
        if wrap.any():
            d += np.bincount(base[wrap], weights=w[wrap], minlength=n)
            d -= np.bincount(base[wrap] + end[wrap] - sc[wrap], weights=w[wrap], minlength=n)
        diff += np.rint(d).astype(np.int64) if diff.dtype.kind == "i" else d

    def finish(self, acc: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(bytes, requests, seconds), each shaped (2 ops, flat slots)."""
        out = []
        for pre in ("", "t_"):
            v = acc[pre + "direct"] + np.cumsum(acc[pre + "diff"], axis=1)[:, : self.m]
            out.append(v + acc[pre + "full"][:, self.flat_row])
        req = np.cumsum(acc["req"], axis=1)[:, : self.m]
        return out[0], req, out[1]


# ---------------------------------------------------------------------------
# The builder
# ---------------------------------------------------------------------------


@dataclass
class _BinGrid:
    layer: int
    rows: int
    cols: int
    per_row: int  # ranks per row
    t0: float
    width: float

    def __post_init__(self) -> None:
        cells = self.rows * self.cols
        self.ops = np.zeros(2 * cells, np.int64)
        self.bytes = np.zeros(2 * cells, np.int64)
        self.busy = np.zeros(2 * cells, np.float64)
        self.full = np.zeros(2 * (cells + 1), np.int64)


class _Builder:
    def __init__(self, d: Diagnosis, phase_gap: float | None) -> None:
        self.d = d
        self.t = d.trace
        self.phase_gap = phase_gap
        self.notes: list[str] = []  # page-level statements about what is drawn
        # Filled by the pass over the records (absent for counter-only sources).
        self.hist_rec: np.ndarray | None = None
        self.rank_rec: dict[str, np.ndarray] | None = None
        self.stripes: _Stripes | None = None
        self.ost_acc: dict[str, np.ndarray] | None = None
        self.ost_rec_rows: np.ndarray | None = None
        self.phase_busy: dict[str, Any] = {}

    # -- top level ----------------------------------------------------------

    def build(self) -> dict[str, Any]:
        t = self.t
        self.nranks = max(1, int(t.job.nprocs))
        r = t.records
        if len(r):
            self.nranks = max(self.nranks, int(r.rank.max()) + 1)
        self._scan_records()
        self._list_files()
        records = self._records_section() if len(r) else None
        phase_doc = self._phases_section() if len(r) else None
        doc = {
            "schema": "iopilot-html",
            "version": 1,
            "generator": f"iopilot {__version__}",
            "report": diagnosis_dict(self.d),
            "labels": LABELS,
            "record_layers": list(RECORD_LAYERS),
            "size_bins": list(SIZE_BINS),
            "size_upper": list(SIZE_BIN_UPPER),  # inclusive upper edges, one list for all
            "size_labels": list(SIZE_BIN_LABELS),
            "op_names": list(OP_NAMES),  # by operation code
            # what the file system sees (layer names, and as report.layers names them)
            "fs_layers": list(FS_LAYERS),
            "fs_display": [display(n) for n in FS_LAYERS],
            # layers drawn above the file-system calls they make
            "stacks": [[n, FS_LAYERS[0]] for n in RECORD_LAYERS if MODULE[n].level > 1],
            "nranks": self.nranks,
            "runtime": float(t.job.runtime),
            "files": self._files_section(),
            "records": records,
            "sizes": self._sizes_section(),
            "phases": phase_doc,
            "ost": self._ost_section() if t.lustre is not None and len(t.lustre) else None,
            "file_table": self._file_table(),
            "ranks": self._ranks_section(),
            "overview": self._overview(),
            "caps": {"sample": SAMPLE_CAP, "bin_cells": BIN_CELLS, "files": FILES_LISTED,
                     "table_files": TABLE_FILES, "phase_rows": PHASE_ROWS},
            "thresholds": {
                "straggler_ratio": float(self.d.thresholds.get("straggler_ratio", 1.5)),
                "straggler_min_time": float(self.d.thresholds.get("straggler_min_time", 0.0)),
            },
            "notes": self.notes,
        }
        doc["finding_views"] = [_finding_view(f.check, f.layer, records is not None,
                                              phase_doc is not None)
                                for f in self.d.findings]  # fmt: skip
        return doc

    # -- pass over the records: ids, extents, per (file, layer, op) sums ------

    def _scan_records(self) -> None:
        r = self.t.records
        n = len(r)
        self.layer_n = np.zeros(_NL, np.int64)
        self.rec_files = np.zeros(0, np.uint64)
        self.t_lo, self.t_hi = 0.0, 0.0
        if not n:
            self.fl_ops = self.fl_bytes = self.fl_busy = np.zeros((0, _NL, 2))
            return
        parts = []
        lo, hi = math.inf, -math.inf
        for sl in _chunks(n):
            f = r.file_id[sl]
            # Records come in runs of one file: unique over the run heads is cheap.
            heads = np.flatnonzero(f[1:] != f[:-1]) + 1
            parts.append(np.unique(np.concatenate([f[:1], f[heads]])))
            self.layer_n += np.bincount(r.layer[sl], minlength=_NL)[:_NL]
            lo = min(lo, float(r.start[sl].min()))
            hi = max(hi, float(r.end[sl].max()), float(r.start[sl].max()))
        self.rec_files = np.unique(np.concatenate(parts))
        self.t_lo, self.t_hi = lo, hi
        nf = len(self.rec_files)
        size = nf * _NL * 2
        ops = np.zeros(size, np.int64)
        byt = np.zeros(size, np.float64)
        busy = np.zeros(size, np.float64)
        for sl in _chunks(n):
            fd = np.searchsorted(self.rec_files, r.file_id[sl])
            key = (fd * _NL + r.layer[sl]) * 2 + r.op[sl]
            ops += np.bincount(key, minlength=size)
            byt += np.bincount(key, weights=np.clip(r.length[sl], 0, None), minlength=size)
            busy += np.bincount(key, weights=np.clip(r.end[sl] - r.start[sl], 0, None),
                                minlength=size)  # fmt: skip
        self.fl_ops = ops.reshape(nf, _NL, 2)
        self.fl_bytes = byt.reshape(nf, _NL, 2)
        self.fl_busy = busy.reshape(nf, _NL, 2)

    # -- the files the page names --------------------------------------------

    def _list_files(self) -> None:
        """Files in order of importance (bytes moved), capped at FILES_LISTED."""
        t = self.t
        ids, weight = [self.rec_files], [self.fl_bytes.sum(axis=(1, 2))]
        for layer in _TABLE_LAYERS:
            c = t.layer(layer)
            if c is None or not len(c):
                continue
            u, inv = np.unique(c.file_id, return_inverse=True)
            b = np.bincount(inv, weights=_col(c, f"{layer}_BYTES_READ")
                            + _col(c, f"{layer}_BYTES_WRITTEN"), minlength=len(u))  # fmt: skip
            ids.append(u)
            weight.append(b)
        if t.lustre is not None and len(t.lustre):
            ids.append(t.lustre.file_id)
            weight.append(np.zeros(len(t.lustre)))
        all_ids = np.concatenate(ids).astype(np.uint64)
        all_w = np.concatenate(weight)
        uniq, inv = np.unique(all_ids, return_inverse=True)
        w = np.zeros(len(uniq))
        np.maximum.at(w, inv, all_w)  # one layer's bytes; MPI-IO and POSIX would double
        order = np.lexsort((uniq, -w))[:FILES_LISTED]
        self.files = uniq[order]
        self.files_unlisted = max(0, len(uniq) - FILES_LISTED)
        self.file_index = _Lookup(self.files)
        self.rec_file_listed = self.file_index(self.rec_files)
        if self.files_unlisted:
            self.notes.append(
                f"{len(uniq):,} files: the {FILES_LISTED:,} that moved the most bytes are named; "
                f"the other {self.files_unlisted:,} appear as \u201cother files\u201d."
            )

    def _files_section(self) -> dict[str, Any]:
        t = self.t
        names = [t.name(int(i)) for i in self.files]
        mounts = [(m, k) for m, k in t.job.mounts]
        fs = [_mount_of(n, mounts) for n in names]
        lustre: list[Any] = [None] * len(names)
        if t.lustre is not None and len(t.lustre):
            st = t.lustre
            row = _Lookup(st.file_id)(self.files)
            for i in np.flatnonzero(row >= 0):
                k = int(row[i])
                osts = st.osts(k)
                lustre[int(i)] = [int(st.stripe_size[k]), [int(x) for x in osts]]
        return {"names": names, "mount": [m for m, _ in fs], "fstype": [k for _, k in fs],
                "lustre": lustre, "unlisted": self.files_unlisted}  # fmt: skip

    # -- records: sample, bins, per-file counts ------------------------------

    def _sample_probability(self) -> np.ndarray | None:
        """Keep-probability per (record file, layer), or None to keep everything."""
        n = int(self.layer_n.sum())
        if n <= SAMPLE_CAP:
            return None
        # Bernoulli sampling overshoots a little (trimmed after); the extremes come on top.
        budget = 0.98 * (SAMPLE_CAP - 2 * _extremes())
        per_layer = _waterfill(self.layer_n, budget)
        counts = self.fl_ops.sum(axis=2)  # [file, layer]
        prob = np.ones_like(counts, dtype=np.float64)
        for lay in range(_NL):
            nl = float(self.layer_n[lay])
            if nl <= per_layer[lay] or not nl:
                continue
            q = per_layer[lay]
            # Half the quota uniform over the layer (the timeline), half shared by
            # files (so each file's spatiality view has points).
            cnt = counts[:, lay].astype(np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                pf = np.where(cnt > 0, _waterfill(cnt, 0.5 * q) / cnt, 0.0)
            p = np.maximum(0.5 * q / nl, pf)
            for _ in range(4):  # rescale to spend the layer's quota
                expect = float((p * cnt).sum())
                if expect <= 0 or abs(expect - q) < 1:
                    break
                p = np.minimum(1.0, p * q / expect)
            prob[:, lay] = p
        return prob

    def _records_section(self) -> dict[str, Any]:
        t, r = self.t, self.t.records
        n = len(r)
        prob = self._sample_probability()
        rng = np.random.default_rng(0)  # the same input gives the same page
        grids = self._bin_grids(prob)
        self.hist_rec = np.zeros(_NL * 2 * _NB, np.int64)
        nr = self.nranks
        rk_size = _NL * 2 * nr
        self.rank_rec = {k: np.zeros(rk_size) for k in ("ops", "bytes", "busy")}
        stripes = _Stripes(t) if t.lustre is not None and len(t.lustre) else None
        self.stripes = stripes
        ost_acc = stripes.new() if stripes is not None else None
        self.ost_rec_rows = np.zeros(0 if stripes is None else len(stripes.count), bool)
        keep_parts: list[np.ndarray] = []
        top = {"length": _Top(_extremes()), "dur": _Top(_extremes())}
        for sl in _chunks(n):
            lay = r.layer[sl].astype(np.int64)
            op = r.op[sl].astype(np.int64)
            rank = np.clip(r.rank[sl].astype(np.int64), 0, None)
            s = r.start[sl]
            e = np.maximum(r.end[sl], s)
            ln = np.clip(r.length[sl], 0, None)
            lo = lay * 2 + op
            # Exact request-size histograms in Darshan's bins (counters may be absent).
            b = np.searchsorted(_UPPER, ln, side="left")
            self.hist_rec += np.bincount(lo * _NB + b, minlength=_NL * 2 * _NB)
            key = lo * nr + rank
            self.rank_rec["ops"] += np.bincount(key, minlength=rk_size)
            self.rank_rec["bytes"] += np.bincount(key, weights=ln, minlength=rk_size)
            self.rank_rec["busy"] += np.bincount(key, weights=e - s, minlength=rk_size)
            for g in grids.values():
                m = lay == g.layer
                if m.any():
                    self._bin(g, rank[m], op[m], s[m], e[m], ln[m])
            if stripes is not None and ost_acc is not None:
                self._ost_records(stripes, ost_acc, sl, lay, op, ln)
            if prob is None:
                continue
            top["length"].add(ln, sl.start)
            top["dur"].add(e - s, sl.start)
            fd = np.searchsorted(self.rec_files, r.file_id[sl])
            u = rng.random(len(lay), dtype=np.float32)
            keep_parts.append(np.flatnonzero(u < prob[fd, lay]) + sl.start)
        if prob is None:
            keep = np.arange(n)
        else:
            forced = np.union1d(top["length"].index, top["dur"].index)
            keep = np.setdiff1d(np.concatenate(keep_parts), forced, assume_unique=True)
            room = SAMPLE_CAP - len(forced)
            if len(keep) > room:
                keep = rng.choice(keep, room, replace=False)
            keep = np.union1d(keep, forced)
        self.ost_acc = ost_acc
        sampled = len(keep) < n
        fd = np.searchsorted(self.rec_files, r.file_id[keep])
        sample = {
            "n": len(keep),
            "rank": _pack(r.rank[keep], "i4"),
            "layer": _pack(r.layer[keep], "u1"),
            "op": _pack(r.op[keep], "u1"),
            "file": _pack(self.rec_file_listed[fd], "i4"),
            "offset": _pack(r.offset[keep], "f8"),
            "length": _pack(r.length[keep], "f8"),
            "start": _pack(r.start[keep], "f8"),
            "dur": _pack(np.clip(r.end[keep] - r.start[keep], 0, None), "f4"),
        }
        in_sample = np.bincount(fd * _NL + r.layer[keep], minlength=len(self.rec_files) * _NL)
        counts = self.fl_ops.sum(axis=2).ravel()
        nz = np.flatnonzero(counts)
        file_counts = {
            "file": _pack(self.rec_file_listed[nz // _NL], "i4"),
            "layer": _pack(nz % _NL, "u1"),
            "n": _pack(counts[nz], "f8"),
            "drawn": _pack(in_sample[nz], "f8"),
        }
        drawn_layer = np.bincount(r.layer[keep], minlength=_NL)
        if sampled:
            self.notes.append(
                f"The trace holds {n:,} operations; views that draw operations one by one show "
                f"a sample of {len(keep):,}: the {_extremes():,} largest and the "
                f"{_extremes():,} slowest operations, and a random draw in which every "
                "layer and file is represented (files with few operations kept whole). "
                "Timelines default to bins whose sums are exact; "
                "histograms and per-rank, per-file and per-OST totals use every operation."
            )
        return {
            "total": n,
            "drawn": len(keep),
            "sampled": sampled,
            "per_layer": [int(x) for x in self.layer_n],
            "drawn_per_layer": [int(x) for x in drawn_layer],
            "span": [self.t_lo, self.t_hi],
            "sample": sample,
            "file_counts": file_counts,
            "bins": {RECORD_LAYERS[g.layer]: self._bins_out(g) for g in grids.values()},
        }

    def _bin_grids(self, prob: np.ndarray | None) -> dict[int, _BinGrid]:
        """Bin the layers that are not drawn whole."""
        if prob is None:
            return {}
        layers = [lay for lay in range(_NL) if self.layer_n[lay] and (prob[:, lay] < 1).any()]
        if not layers:
            return {}
        cells = BIN_CELLS // len(layers)
        per_row = -(-self.nranks // MAX_ROWS)
        rows = -(-self.nranks // per_row)
        cols = int(np.clip(cells // rows, 50, MAX_COLS))
        span = max(self.t_hi - self.t_lo, 1e-9)
        return {lay: _BinGrid(lay, rows, cols, per_row, self.t_lo, span / cols) for lay in layers}

    @staticmethod
    def _bin(g: _BinGrid, rank: np.ndarray, op: np.ndarray, s: np.ndarray, e: np.ndarray,
             ln: np.ndarray) -> None:  # fmt: skip
        """Add operations to (rank row, time bin) cells, per operation kind.

        Operations and bytes count in the bin where an operation starts; busy
        time is the exact overlap of each operation with each bin it spans.
        """
        cells = g.rows * g.cols
        row = rank // g.per_row
        c0 = np.clip(((s - g.t0) / g.width).astype(np.int64), 0, g.cols - 1)
        c1 = np.clip(((e - g.t0) / g.width).astype(np.int64), 0, g.cols - 1)
        cell = row * g.cols + c0
        key = op * cells + cell
        g.ops += np.bincount(key, minlength=2 * cells)
        g.bytes += np.bincount(key, weights=ln, minlength=2 * cells).astype(np.int64)
        one = c0 == c1
        first = np.where(one, e - s, np.clip(g.t0 + (c0 + 1) * g.width - s, 0, None))
        g.busy += np.bincount(key, weights=first, minlength=2 * cells)
        many = ~one
        if not many.any():
            return
        rm, om, c0m, c1m = row[many], op[many], c0[many], c1[many]
        last = np.clip(e[many] - (g.t0 + c1m * g.width), 0, None)
        g.busy += np.bincount(om * cells + rm * g.cols + c1m, weights=last, minlength=2 * cells)
        inner = c1m - c0m > 1
        if inner.any():  # whole bins in between: a difference array along each row
            base = om[inner] * (cells + 1) + rm[inner] * g.cols
            g.full += np.bincount(base + c0m[inner] + 1, minlength=2 * (cells + 1))
            g.full -= np.bincount(base + c1m[inner], minlength=2 * (cells + 1))

    @staticmethod
    def _bins_out(g: _BinGrid) -> dict[str, Any]:
        cells = g.rows * g.cols
        full = np.cumsum(g.full.reshape(2, cells + 1), axis=1)[:, :cells]
        busy = g.busy.reshape(2, cells) + full * g.width
        ops = g.ops.reshape(2, cells)
        byt = g.bytes.reshape(2, cells)
        nz = np.flatnonzero((ops.sum(axis=0) > 0) | (busy.sum(axis=0) > 0))
        return {
            "rows": g.rows, "cols": g.cols, "per_row": g.per_row, "t0": g.t0,
            "width": g.width, "records": int(ops.sum()), "cells": len(nz),
            "idx": _pack(nz, "u4"),
            "rb": _pack(byt[0, nz], "f8"), "wb": _pack(byt[1, nz], "f8"),
            "rn": _pack(ops[0, nz], "u4"), "wn": _pack(ops[1, nz], "u4"),
            "rt": _pack(busy[0, nz], "f4"), "wt": _pack(busy[1, nz], "f4"),
        }  # fmt: skip

    def _ost_records(self, stripes: _Stripes, acc: dict[str, np.ndarray], sl: slice,
                     lay: np.ndarray, op: np.ndarray, ln: np.ndarray) -> None:  # fmt: skip
        r = self.t.records
        off = r.offset[sl]
        fs = np.isin(lay, _FS_LAYERS)
        row = stripes.lookup(r.file_id[sl])
        on = fs & (row >= 0)
        if not on.any():
            return
        self.ost_rec_rows[np.unique(row[on])] = True
        on &= (ln > 0) & (off >= 0) & (stripes.count[np.maximum(row, 0)] > 0)
        dur = np.clip(r.end[sl] - r.start[sl], 0, None)
        for o in (0, 1):
            m = on & (op == o)
            if m.any():
                stripes.add(acc, o, row[m], off[m].astype(np.int64), ln[m].astype(np.int64),
                            dur[m])  # fmt: skip

    # -- request sizes ---------------------------------------------------------

    def _sizes_section(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        hist_rec = self.hist_rec
        for layer in _TABLE_LAYERS:
            c = self.t.layer(layer)
            m = MODULE[layer]
            if (c is not None and len(c) and m.histogram
                    and c.has(m.size_counter("READ", SIZE_BINS[0]))):  # fmt: skip
                out[layer] = {
                    "source": "counters",
                    "aggregate": m.agg_sizes,
                    "read": [int(c[m.size_counter("READ", b)].sum()) for b in SIZE_BINS],
                    "write": [int(c[m.size_counter("WRITE", b)].sum()) for b in SIZE_BINS],
                }
            elif hist_rec is not None and layer in RECORD_LAYERS:
                lay = RECORD_LAYERS.index(layer)
                h = hist_rec.reshape(_NL, 2, _NB)[lay]
                if h.sum():
                    out[layer] = {"source": "records", "read": h[0].tolist(),
                                  "write": h[1].tolist()}  # fmt: skip
        return out

    # -- phases ---------------------------------------------------------------

    def _phases_section(self) -> dict[str, Any]:
        r = self.t.records
        th = self.d.thresholds
        default = self.phase_gap
        if default is None:
            default = float(th.get("phase_gap", 0.0)) or None
        share = float(th.get("phase_min_gap_share", 0.01))
        ratio_lim = float(th.get("straggler_ratio", 1.5))
        min_time = float(th.get("straggler_min_time", 0.0))
        present = [lay for lay in range(_NL) if self.layer_n[lay]]
        # The layer the application called: MPI-IO when traced, as the checks do.
        primary = next((RECORD_LAYERS.index(n) for n in ("MPIIO", "POSIX")
                        if self.layer_n[RECORD_LAYERS.index(n)]), present[0])  # fmt: skip
        # What the file system saw, for the summary's "operations in flight".
        busy_layer = next((x for x in _FS_LAYERS if self.layer_n[x]), primary)
        span = self.t_hi - self.t_lo
        out: dict[str, Any] = {}
        for lay in present:
            recs = r if self.layer_n[lay] == len(r) else _timing_view(r, lay)
            gaps: list[float | None] = [default]
            if lay == primary:  # more thresholds only where the checks look
                gaps += [g for g in GAP_CHOICES if g < span and g != default]
            options = []
            for g in gaps:
                tab = phases(recs, g, share)
                label = (f"{g:g} s" if g else "automatic (mean gap)") + (
                    " (default)" if g == default else "")  # fmt: skip
                options.append(self._phase_option(tab, g, label, ratio_lim, min_time))
            del recs
            out[RECORD_LAYERS[lay]] = {"options": options, "default": 0}
            if lay == busy_layer:
                runtime = max(float(self.t.job.runtime), self.t_hi)
                busy = options[0]["busy"]
                self.phase_busy = {
                    "busy_layer": LABELS[RECORD_LAYERS[lay]],
                    "busy_seconds": busy,
                    "busy_share": busy / runtime if runtime > 0 else None,
                }
        return {"primary": RECORD_LAYERS[primary], "layers": out,
                "min_gap_share": share}  # fmt: skip

    @staticmethod
    def _phase_option(tab: dict[str, np.ndarray], gap: float | None, label: str,
                      ratio_lim: float, min_time: float) -> dict[str, Any]:  # fmt: skip
        n = len(tab["start"])
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(tab["median_time"] > 0, tab["slowest_time"] / tab["median_time"],
                             np.where(tab["slowest_time"] > 0, np.inf, 1.0))  # fmt: skip
        strag = (tab["ranks"] >= 2) & (ratio > ratio_lim) & (tab["slowest_time"] > min_time)
        rows = np.arange(n)
        if n > PHASE_ROWS:  # the longest ones, in time order
            rows = np.sort(np.argsort(-tab["duration"], kind="stable")[:PHASE_ROWS])
        cols = {k: _pack(v[rows], "f8") for k, v in tab.items()}
        return {
            "label": label,
            "gap": gap,
            "total": n,
            "shown": len(rows),
            "index": _pack(rows, "u4"),
            "cols": cols,
            "ratio": _pack(np.nan_to_num(ratio[rows], posinf=1e300), "f8"),
            "straggler": _pack(strag[rows], "u1"),
            "stragglers": int(strag.sum()),
            "busy": float(tab["busy"].sum()),
            "in_phases": float(tab["duration"].sum()),
        }

    # -- Lustre ---------------------------------------------------------------

    def _ost_section(self) -> dict[str, Any] | None:
        t = self.t
        stripes = self.stripes or _Stripes(t)
        if not stripes.m:
            return None
        m = stripes.m
        by, req, sec = np.zeros((2, m)), np.zeros((2, m)), np.zeros((2, m))
        rec_rows = self.ost_rec_rows
        if rec_rows is None:
            rec_rows = np.zeros(len(stripes.count), bool)
        acc = self.ost_acc
        if acc is not None:
            b_i, r_i, s_i = stripes.finish(acc)
            by += b_i
            req += r_i
            sec += s_i
        # Files without FS-level records: spread their POSIX/STDIO counters over
        # the OSTs holding their byte range [0, largest offset touched].
        est_rows = np.flatnonzero(~rec_rows & (stripes.count > 0))
        est_files = mpiio_only = 0
        if len(est_rows):
            rb, wb, rn, wn, rt, wt, extent = (np.zeros(len(stripes.count)) for _ in range(7))
            fs_rows = np.zeros(len(stripes.count), bool)
            # The file system's layers first; then MPI-IO for files whose
            # POSIX record is missing (module off or out of records).
            for layer in (*FS_LAYERS, "MPIIO"):
                c = t.layer(layer)
                if c is None or not len(c):
                    continue
                row = stripes.lookup(c.file_id)
                ok = row >= 0
                if layer == "MPIIO":
                    ok &= ~fs_rows[np.maximum(row, 0)]
                else:
                    fs_rows[row[ok]] = True
                rr = row[ok]
                rb += np.bincount(rr, _col(c, f"{layer}_BYTES_READ")[ok], len(rb))
                wb += np.bincount(rr, _col(c, f"{layer}_BYTES_WRITTEN")[ok], len(rb))
                rn += np.bincount(rr, _col(c, _OPS[layer][0])[ok], len(rb))
                wn += np.bincount(rr, _col(c, _OPS[layer][1])[ok], len(rb))
                rt += np.bincount(rr, _col(c, f"{layer}_F_READ_TIME")[ok], len(rb))
                wt += np.bincount(rr, _col(c, f"{layer}_F_WRITE_TIME")[ok], len(rb))
                mx = np.maximum(_col(c, f"{layer}_MAX_BYTE_READ"),
                                _col(c, f"{layer}_MAX_BYTE_WRITTEN"))[ok] + 1  # fmt: skip
                np.maximum.at(extent, rr, mx)
            extent = np.where(extent > 1, extent, np.maximum(rb, wb))
            use = est_rows[(rb + wb)[est_rows] > 0]
            est_files = len(use)
            mpiio_only = int(np.count_nonzero(~fs_rows[use]))
            if est_files:
                share_acc = stripes.new()
                ext = np.maximum(extent[use], 1).astype(np.int64)
                stripes.add(share_acc, 0, use, np.zeros(len(use), np.int64), ext)
                share_b, _, _ = stripes.finish(share_acc)
                frac = share_b[0] / np.maximum(extent, 1)[stripes.flat_row]
                on = np.isin(stripes.flat_row, use)
                fr = np.where(on, frac, 0.0)
                row = stripes.flat_row
                by[0] += fr * rb[row]
                by[1] += fr * wb[row]
                req[0] += fr * rn[row]
                req[1] += fr * wn[row]
                sec[0] += fr * rt[row]
                sec[1] += fr * wt[row]
        exact = rec_rows[stripes.flat_row]
        nz = np.flatnonzero((by.sum(axis=0) > 0) | (req.sum(axis=0) > 0))
        file_idx = self.file_index(stripes.file_id)[stripes.flat_row]
        n_rec = int(rec_rows.sum())
        est_note = (f" ({mpiio_only:,} of them from MPI-IO counters: no POSIX record)"
                    if mpiio_only else "")  # fmt: skip
        if n_rec and est_files:
            how = (f"{n_rec:,} file(s) from traced POSIX/STDIO operations, mapped exactly to "
                   f"stripes; {est_files:,} file(s) without a trace estimated from counters"
                   f"{est_note} "
                   "(bytes spread over the OSTs holding the file's byte range)")
        elif n_rec:
            how = ("from traced POSIX/STDIO operations, each byte mapped to its stripe's OST "
                   "((offset / stripe size) mod stripe count over the file's OST list)")
        else:
            how = ("estimated from counters: no per-operation trace, so each file's bytes, "
                   "requests and read/write time are spread over the OSTs holding its byte range"
                   + est_note)
        how += ("; time per OST shares each request's duration out by its bytes on each OST, "
                "so a slow OST stands out even when bytes are even")
        return {
            "how": how,
            "files_exact": n_rec,
            "files_estimated": est_files,
            "lustre_files": len(stripes.count),
            "file": _pack(file_idx[nz], "i4"),
            "ost": _pack(stripes.flat_ost[nz], "i4"),
            "rb": _pack(by[0, nz], "f8"),
            "wb": _pack(by[1, nz], "f8"),
            "rr": _pack(req[0, nz], "f8"),
            "wr": _pack(req[1, nz], "f8"),
            "rt": _pack(sec[0, nz], "f8"),
            "wt": _pack(sec[1, nz], "f8"),
            "exact": _pack(exact[nz], "u1"),
        }

    # -- per-file table --------------------------------------------------------

    def _file_table(self) -> dict[str, Any]:
        t = self.t
        cols = ("reads", "writes", "bytes_read", "bytes_written", "read_time", "write_time",
                "meta_time")  # fmt: skip
        ids_p, lay_p, ranks_p, shared_p = [], [], [], []
        vals_p: dict[str, list[np.ndarray]] = {k: [] for k in cols}
        counted: set[str] = set()
        for layer in _TABLE_LAYERS:
            c = t.layer(layer)
            if c is None or not len(c):
                continue
            counted.add(layer)
            u, inv = np.unique(c.file_id, return_inverse=True)
            n = len(u)
            src = {
                "reads": _col(c, _OPS[layer][0]),
                "writes": _col(c, _OPS[layer][1]),
                "bytes_read": _col(c, f"{layer}_BYTES_READ"),
                "bytes_written": _col(c, f"{layer}_BYTES_WRITTEN"),
                "read_time": _col(c, f"{layer}_F_READ_TIME"),
                "write_time": _col(c, f"{layer}_F_WRITE_TIME"),
                "meta_time": _col(c, f"{layer}_F_META_TIME"),
            }
            for k in cols:
                vals_p[k].append(np.bincount(inv, weights=src[k], minlength=n))
            ids_p.append(u)
            lay_p.append(np.full(n, _TABLE_LAYERS.index(layer)))
            ranks_p.append(np.bincount(inv, weights=c.rank >= 0, minlength=n))
            shared_p.append(np.bincount(inv, weights=c.rank < 0, minlength=n) > 0)
        # Layers traced but without counters: their table rows come from the records.
        for lay in range(_NL):
            name = RECORD_LAYERS[lay]
            if not self.layer_n[lay] or name in counted:
                continue
            ops, byt, busy = (a[:, lay] for a in (self.fl_ops, self.fl_bytes, self.fl_busy))
            keep = ops.sum(axis=1) > 0
            n = int(keep.sum())
            vals_p["reads"].append(ops[keep, 0])
            vals_p["writes"].append(ops[keep, 1])
            vals_p["bytes_read"].append(byt[keep, 0])
            vals_p["bytes_written"].append(byt[keep, 1])
            vals_p["read_time"].append(busy[keep, 0])
            vals_p["write_time"].append(busy[keep, 1])
            vals_p["meta_time"].append(np.full(n, np.nan))
            ids_p.append(self.rec_files[keep])
            lay_p.append(np.full(n, _TABLE_LAYERS.index(name)))
            ranks_p.append(np.full(n, np.nan))
            shared_p.append(np.zeros(n, bool))
        if not ids_p:
            return {"columns": list(cols), "rows": [], "totals": [], "others": None}
        ids = np.concatenate(ids_p)
        lay = np.concatenate(lay_p)
        vals = {k: np.concatenate(v).astype(np.float64) for k, v in vals_p.items()}
        ranks = np.concatenate(ranks_p)
        shared = np.concatenate(shared_p)
        total_b = vals["bytes_read"] + vals["bytes_written"]
        order = np.lexsort((lay, -(vals["reads"] + vals["writes"]), -total_b))
        top = order[:TABLE_FILES]
        rest = order[TABLE_FILES:]
        fidx = self.file_index(ids)
        rows = [
            {
                "file": int(fidx[i]),
                "name": t.name(int(ids[i])),
                "layer": _TABLE_LAYERS[int(lay[i])],
                "ranks": None if np.isnan(ranks[i]) else int(ranks[i]),
                "shared": bool(shared[i]),
                **{k: _num(vals[k][i]) for k in cols},
            }
            for i in top
        ]
        totals = []
        for li, layer in enumerate(_TABLE_LAYERS):
            m = lay == li
            if m.any():
                totals.append({"layer": layer, "files": int(m.sum()),
                               **{k: _num(np.nansum(vals[k][m])) for k in cols}})  # fmt: skip
        others = None
        if len(rest):
            others = {"rows": len(rest), **{k: _num(np.nansum(vals[k][rest])) for k in cols}}
        return {"columns": list(cols), "rows": rows, "totals": totals, "others": others,
                "source": "counters" if counted else "records"}  # fmt: skip

    # -- per rank ------------------------------------------------------------

    def _ranks_section(self) -> dict[str, Any]:
        t = self.t
        nr = self.nranks
        k = -(-nr // RANK_BARS)
        out: dict[str, Any] = {"n": nr, "per_bar": k, "counters": {}, "records": {}}
        for layer in _TABLE_LAYERS:
            c = t.layer(layer)
            if c is None or not len(c):
                continue
            own = c.rank >= 0
            rk = np.clip(c.rank[own], 0, nr - 1)

            def per(v: np.ndarray, own: np.ndarray = own, rk: np.ndarray = rk) -> dict:
                return _pack(_group(np.bincount(rk, weights=v[own], minlength=nr), k), "f8")

            rb, wb = _col(c, f"{layer}_BYTES_READ"), _col(c, f"{layer}_BYTES_WRITTEN")
            rt, wt = _col(c, f"{layer}_F_READ_TIME"), _col(c, f"{layer}_F_WRITE_TIME")
            mt = _col(c, f"{layer}_F_META_TIME")
            ops = _col(c, _OPS[layer][0]) + _col(c, _OPS[layer][1])
            out["counters"][layer] = {
                "rb": per(rb), "wb": per(wb), "rt": per(rt), "wt": per(wt), "mt": per(mt),
                "ops": per(ops),
                "shared_files": int(np.unique(c.file_id[~own]).shape[0]),
                "shared_bytes": float((rb + wb)[~own].sum()),
                "shared_ops": float(ops[~own].sum()),
                "shared_time": float((rt + wt + mt)[~own].sum()),
                "owned_bytes": float((rb + wb)[own].sum()),
            }  # fmt: skip
        rr = self.rank_rec
        if rr is not None:
            shape = (_NL, 2, nr)
            ops, byt, busy = (rr[x].reshape(shape) for x in ("ops", "bytes", "busy"))
            for lay in range(_NL):
                if not self.layer_n[lay]:
                    continue
                out["records"][RECORD_LAYERS[lay]] = {
                    "rb": _pack(_group(byt[lay, 0], k), "f8"),
                    "wb": _pack(_group(byt[lay, 1], k), "f8"),
                    "rt": _pack(_group(busy[lay, 0], k), "f8"),
                    "wt": _pack(_group(busy[lay, 1], k), "f8"),
                    "rn": _pack(_group(ops[lay, 0], k), "f8"),
                    "wn": _pack(_group(ops[lay, 1], k), "f8"),
                }
        return out

    # -- summary extras ------------------------------------------------------

    def _overview(self) -> dict[str, Any]:
        t = self.t
        # Per listed file: bytes the file system saw (POSIX + STDIO counters, else records).
        fs_bytes = np.zeros(len(self.files))
        has_counters = False
        for layer in FS_LAYERS:
            c = t.layer(layer)
            if c is None or not len(c):
                continue
            has_counters = True
            idx = self.file_index(c.file_id)
            ok = idx >= 0
            b = _col(c, f"{layer}_BYTES_READ") + _col(c, f"{layer}_BYTES_WRITTEN")
            fs_bytes += np.bincount(idx[ok], weights=b[ok], minlength=len(self.files))
        if not has_counters and len(self.rec_files):
            b = self.fl_bytes[:, list(_FS_LAYERS), :].sum(axis=(1, 2))
            ok = self.rec_file_listed >= 0
            fs_bytes += np.bincount(self.rec_file_listed[ok], weights=b[ok],
                                    minlength=len(self.files))  # fmt: skip
        mounts: dict[tuple[str, str], list[float]] = {}
        for i in range(len(self.files)):
            key = _mount_of(t.name(int(self.files[i])), t.job.mounts)
            acc = mounts.setdefault(key, [0, 0.0])
            acc[0] += 1
            acc[1] += float(fs_bytes[i])
        fs = [{"mount": m or None, "type": k or None, "files": int(v[0]), "bytes": v[1]}
              for (m, k), v in sorted(mounts.items(), key=lambda kv: -kv[1][1])]  # fmt: skip
        # The run's I/O time is the report's io_time (all layers, each
        # operation once, the slowest rank): the page reads it from there.
        out: dict[str, Any] = {"filesystems": fs, "categories": _file_categories(t)}
        out.update(self.phase_busy)
        return out


def _num(v: Any) -> float | int | None:
    f = float(v)
    if not math.isfinite(f):
        return None
    return int(f) if f.is_integer() and abs(f) < 2**53 else f
