"""The shared context every view's data function receives: :class:`PageContext`.

It makes the passes over the records that several views use, once: file ids
and extents, per (file, layer, operation) sums, the files the page names, the
embedded sample of operations, the (rank × time) bins, exact per-rank sums,
request-size histograms and the per-OST accumulation.  The passes work in
chunks of :data:`CHUNK` records: a chunk's temporaries, some 30 MB, whatever the trace.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..._record import record
from ...checks import Diagnosis
from ...model import RECORD_LAYERS
from ...model.aggregate import isin, unique
from .common import (
    FS_CODES,
    NB,
    NL,
    TABLE_LAYERS,
    UPPER,
    Lookup,
    Stripes,
    Top,
    col,
    mount_of,
    pack,
    waterfill,
)

# Budgets that keep the page bounded whatever the size of the trace.
SAMPLE_CAP = 50_000  # operations embedded one by one, over all views
# Of the sample, the largest and the slowest operations are always kept: the
# ones a user zooms in on are never the ones a random sample drops.
SAMPLE_EXTREMES = 1_000
BIN_CELLS = 120_000  # (rank row, time bin) cells over all binned layers
MAX_ROWS = 512  # rank rows of a binned timeline; more ranks share a row
MAX_COLS = 2000
# The finer level of a binned timeline (drawn when zoomed in): FINE_ROWS times
# fewer rank rows, so that the same cells hold up to FINE_COLS times more time bins.
FINE_ROWS = 8
FINE_COLS = 16
FILES_LISTED = 5000  # files named in the page (selectors, hover); the rest are "other"
TABLE_FILES = 200  # rows of the per-file table
SITES_NAMED = 500  # call sites the page names (the filter's list); the others are "other sites"
# (with the findings' own, always named, fewer than 2**15: the sample's site column is int16)
RANK_BARS = 4096  # bars of the per-rank charts; more ranks are grouped
CHUNK = 1 << 18  # records per step of the chunked passes


def chunks(n: int) -> list[slice]:
    """Slices of at most CHUNK records covering n."""
    return [slice(i, min(i + CHUNK, n)) for i in range(0, n, CHUNK)]



def _extremes() -> int:
    """How many of the largest (and of the slowest) operations the sample keeps."""
    return min(SAMPLE_EXTREMES, SAMPLE_CAP // 10)



@record
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



class PageContext:
    """What several views need, computed once per page (see the module doc)."""

    def __init__(self, d: Diagnosis, phase_gap: float | None) -> None:
        self.d = d
        self.t = d.trace
        self.phase_gap = phase_gap
        self.notes: list[str] = []  # page-level statements about what is drawn
        # Filled by the pass over the records (absent for counter-only sources).
        self.hist_rec: np.ndarray | None = None
        self.rank_rec: dict[str, np.ndarray] | None = None
        self.stripes: Stripes | None = None
        self.ost_acc: dict[str, np.ndarray] | None = None
        self.ost_rec_rows: np.ndarray | None = None
        self.phase_busy: dict[str, Any] = {}
        self._once: dict[str, Any] = {}
        self.site_key: dict[tuple[str, int, str, str, int], int] = {}  # a site's row by its fields

        self.nranks = max(1, int(d.trace.job.nprocs))
        r = self.t.records
        if len(r):
            self.nranks = max(self.nranks, int(r.rank.max()) + 1)
        self._scan_records()
        self._list_files()
        self.sites_doc, self.site_of = self._sites_section()
        self.records = self._records_section() if len(r) else None
        self.files_doc = self._files_section()

    def once(self, key: str, make: Callable[[PageContext], Any]) -> Any:
        """``make(self)``, computed the first time ``key`` is asked for: a pass
        several views share (the phases: their view and the summary's busy time)."""
        if key not in self._once:
            self._once[key] = make(self)
        return self._once[key]


    def _scan_records(self) -> None:
        r = self.t.records
        n = len(r)
        self.layer_n = np.zeros(NL, np.int64)
        self.rec_files = np.zeros(0, np.uint64)
        self.t_lo, self.t_hi = 0.0, 0.0
        if not n:
            self.fl_ops = self.fl_bytes = self.fl_busy = np.zeros((0, NL, 2))
            return
        parts = []
        lo, hi = math.inf, -math.inf
        for sl in chunks(n):
            f = r.file_id[sl]
            # Records come in runs of one file: unique over the run heads is cheap.
            heads = np.flatnonzero(f[1:] != f[:-1]) + 1
            parts.append(unique(np.concatenate([f[:1], f[heads]])))
            self.layer_n += np.bincount(r.layer[sl], minlength=NL)[:NL]
            lo = min(lo, float(r.start[sl].min()))
            hi = max(hi, float(r.end[sl].max()), float(r.start[sl].max()))
        self.rec_files = unique(np.concatenate(parts))
        self.t_lo, self.t_hi = lo, hi
        nf = len(self.rec_files)
        size = nf * NL * 2
        ops = np.zeros(size, np.int64)
        byt = np.zeros(size, np.float64)
        busy = np.zeros(size, np.float64)
        for sl in chunks(n):
            fd = np.searchsorted(self.rec_files, r.file_id[sl])
            key = (fd * NL + r.layer[sl]) * 2 + r.op[sl]
            ops += np.bincount(key, minlength=size)
            byt += np.bincount(key, weights=np.clip(r.length[sl], 0, None), minlength=size)
            busy += np.bincount(key, weights=np.clip(r.end[sl] - r.start[sl], 0, None),
                                minlength=size)  # fmt: skip
        self.fl_ops = ops.reshape(nf, NL, 2)
        self.fl_bytes = byt.reshape(nf, NL, 2)
        self.fl_busy = busy.reshape(nf, NL, 2)

    # -- the files the page names --------------------------------------------

    def _list_files(self) -> None:
        """Files in order of importance (bytes moved), capped at FILES_LISTED."""
        t = self.t
        ids, weight = [self.rec_files], [self.fl_bytes.sum(axis=(1, 2))]
        for layer in TABLE_LAYERS:
            c = t.layer(layer)
            if c is None or not len(c):
                continue
            u, inv = np.unique(c.file_id, return_inverse=True)
            b = np.bincount(inv, weights=col(c, f"{layer}_BYTES_READ")
                            + col(c, f"{layer}_BYTES_WRITTEN"), minlength=len(u))  # fmt: skip
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
        self.file_index = Lookup(self.files)
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
        fs = [mount_of(n, mounts) for n in names]
        lustre: list[Any] = [None] * len(names)
        if t.lustre is not None and len(t.lustre):
            st = t.lustre
            row = Lookup(st.file_id)(self.files)
            for i in np.flatnonzero(row >= 0):
                k = int(row[i])
                osts = st.osts(k)
                lustre[int(i)] = [int(st.stripe_size[k]), [int(x) for x in osts]]
        return {"names": names, "mount": [m for m, _ in fs], "fstype": [k for _, k in fs],
                "lustre": lustre, "unlisted": self.files_unlisted}  # fmt: skip

    # -- call sites ------------------------------------------------------------

    def _sites_section(self) -> tuple[list[dict[str, Any]], np.ndarray]:
        """The call sites the page names, most seconds first (those the
        findings list always among them), and each trace site's place among
        them (-1: unknown or not named); ([], empty) without call sites."""
        sites = self.t.sites
        tables = [x for x in (self.t.records, self.t.meta_records)
                  if len(x) and x.site is not None]  # fmt: skip
        if sites is None or len(sites) <= 1 or not tables:
            return [], np.zeros(0, np.int32)
        size = len(sites)
        calls = np.zeros(size, np.int64)
        seconds = np.zeros(size, np.float64)
        for x in tables:
            for sl in chunks(len(x)):
                ids = np.where(x.site[sl] < size, x.site[sl], 0).astype(np.int64)
                calls += np.bincount(ids, minlength=size)
                seconds += np.bincount(ids, weights=np.clip(x.end[sl] - x.start[sl], 0, None),
                                       minlength=size)  # fmt: skip
        calls[0] = 0
        known = np.flatnonzero(calls > 0)
        order = known[np.lexsort((known, -calls[known], -np.round(seconds[known], 6)))]
        key = {(str(sites.file[i]), int(sites.line[i]), str(sites.function[i]),
                str(sites.module[i]), int(sites.offset[i])): int(i) for i in order}  # fmt: skip
        named = [int(i) for i in order[:SITES_NAMED]]
        for f in self.d.findings:  # a finding's lines are always named
            for loc in f.locations:
                if loc.kind == "source":
                    i = key.get((loc.file, loc.line, loc.function, loc.module, loc.offset))
                    if i is not None and i not in named:
                        named.append(i)
        site_of = np.full(size, -1, np.int32)
        site_of[named] = np.arange(len(named), dtype=np.int32)
        self.site_key = key
        if len(order) > len(named):
            self.notes.append(f"{len(order):,} call sites: the {len(named):,} with the most "
                              "seconds can be chosen in the filter.")  # fmt: skip
        doc = [{"label": str(sites.label(i)), "file": str(sites.file[i]),
                "line": int(sites.line[i]), "function": str(sites.function[i]),
                "note": str(sites.note[i]), "calls": int(calls[i]),
                "seconds": round(float(seconds[i]), 6)} for i in named]  # fmt: skip
        return doc, site_of

    def finding_sites(self) -> list[list[int]]:
        """Per finding, the page's index of each call site it lists."""
        out = []
        for f in self.d.findings:
            idx = [self.site_key.get((loc.file, loc.line, loc.function, loc.module, loc.offset), -1)
                   for loc in f.locations if loc.kind == "source"]  # fmt: skip
            out.append([int(self.site_of[i]) if i >= 0 else -1 for i in idx])
        return out

    # -- records: sample, bins, per-file counts ------------------------------

    def _sample_probability(self) -> np.ndarray | None:
        """Keep-probability per (record file, layer), or None to keep everything."""
        n = int(self.layer_n.sum())
        if n <= SAMPLE_CAP:
            return None
        # Bernoulli sampling overshoots a little (trimmed after); the extremes come on top.
        budget = 0.98 * (SAMPLE_CAP - 2 * _extremes())
        per_layer = waterfill(self.layer_n, budget)
        counts = self.fl_ops.sum(axis=2)  # [file, layer]
        prob = np.ones_like(counts, dtype=np.float64)
        for lay in range(NL):
            nl = float(self.layer_n[lay])
            if nl <= per_layer[lay] or not nl:
                continue
            q = per_layer[lay]
            # Half the quota uniform over the layer (the timeline), half shared by
            # files (so each file's spatiality view has points).
            cnt = counts[:, lay].astype(np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                pf = np.where(cnt > 0, waterfill(cnt, 0.5 * q) / cnt, 0.0)
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
        self.hist_rec = np.zeros(NL * 2 * NB, np.int64)
        nr = self.nranks
        rk_size = NL * 2 * nr
        self.rank_rec = {k: np.zeros(rk_size) for k in ("ops", "bytes", "busy")}
        stripes = Stripes(t) if t.lustre is not None and len(t.lustre) else None
        self.stripes = stripes
        ost_acc = stripes.new() if stripes is not None else None
        self.ost_rec_rows = np.zeros(0 if stripes is None else len(stripes.count), bool)
        keep_parts: list[np.ndarray] = []
        top = {"length": Top(_extremes()), "dur": Top(_extremes())}
        for sl in chunks(n):
            lay = r.layer[sl].astype(np.int64)
            op = r.op[sl].astype(np.int64)
            rank = np.clip(r.rank[sl].astype(np.int64), 0, None)
            s = r.start[sl]
            e = np.maximum(r.end[sl], s)
            ln = np.clip(r.length[sl], 0, None)
            lo = lay * 2 + op
            # Exact request-size histograms in Darshan's bins (counters may be absent).
            b = np.searchsorted(UPPER, ln, side="left")
            self.hist_rec += np.bincount(lo * NB + b, minlength=NL * 2 * NB)
            key = lo * nr + rank
            self.rank_rec["ops"] += np.bincount(key, minlength=rk_size)
            self.rank_rec["bytes"] += np.bincount(key, weights=ln, minlength=rk_size)
            self.rank_rec["busy"] += np.bincount(key, weights=e - s, minlength=rk_size)
            for lay_grids in grids.values():
                m = lay == lay_grids[0].layer
                if m.any():
                    for g in lay_grids:
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
            forced = unique(np.concatenate([top["length"].index, top["dur"].index]))
            keep = np.concatenate(keep_parts)
            keep = keep[~isin(keep, forced)]
            room = SAMPLE_CAP - len(forced)
            if len(keep) > room:
                keep = rng.choice(keep, room, replace=False)
            keep = unique(np.concatenate([keep, forced]))
        self.ost_acc = ost_acc
        sampled = len(keep) < n
        fd = np.searchsorted(self.rec_files, r.file_id[keep])
        sample = {
            "n": len(keep),
            "rank": pack(r.rank[keep], "i4"),
            "layer": pack(r.layer[keep], "u1"),
            "op": pack(r.op[keep], "u1"),
            "file": pack(self.rec_file_listed[fd], "i4"),
            "offset": pack(r.offset[keep], "f8"),
            "length": pack(r.length[keep], "f8"),
            "start": pack(r.start[keep], "f8"),
            "dur": pack(np.clip(r.end[keep] - r.start[keep], 0, None), "f4"),
        }
        if len(self.site_of):  # the call site of each: its place in the page's list, -1 none
            ids = r.site[keep].astype(np.int64)
            sample["site"] = pack(np.where(ids < len(self.site_of),
                                           self.site_of[np.minimum(ids, len(self.site_of) - 1)],
                                           -1), "i2")  # fmt: skip
        in_sample = np.bincount(fd * NL + r.layer[keep], minlength=len(self.rec_files) * NL)
        counts = self.fl_ops.sum(axis=2).ravel()
        nz = np.flatnonzero(counts)
        file_counts = {
            "file": pack(self.rec_file_listed[nz // NL], "i4"),
            "layer": pack(nz % NL, "u1"),
            "n": pack(counts[nz], "f8"),
            "drawn": pack(in_sample[nz], "f8"),
        }
        drawn_layer = np.bincount(r.layer[keep], minlength=NL)
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
            "bins": {RECORD_LAYERS[lay]: {**self._bins_out(base), "finer": self._bins_out(fine)}
                     for lay, (base, fine) in grids.items()},
        }

    def _bin_grids(self, prob: np.ndarray | None) -> dict[int, tuple[_BinGrid, _BinGrid]]:
        """Bin the layers that are not drawn whole, at two levels.

        Each layer's share of BIN_CELLS holds a base level (one rank row per
        rank up to MAX_ROWS, at most MAX_COLS time bins, half the share) and a
        finer one (FINE_ROWS times fewer rank rows, the rest of the share in
        time bins, at most FINE_COLS times the base's) that the page draws
        when zoomed into a window.  Both are exact sums over every record.
        """
        if prob is None:
            return {}
        layers = [lay for lay in range(NL) if self.layer_n[lay] and (prob[:, lay] < 1).any()]
        if not layers:
            return {}
        cells = BIN_CELLS // len(layers)
        per_row = -(-self.nranks // MAX_ROWS)
        rows = -(-self.nranks // per_row)
        cols = int(np.clip(cells // 2 // rows, 50, MAX_COLS))
        f_per_row = per_row * FINE_ROWS
        f_rows = -(-self.nranks // f_per_row)
        f_cols = int(np.clip((cells - rows * cols) // f_rows, cols, cols * FINE_COLS))
        span = max(self.t_hi - self.t_lo, 1e-9)
        return {lay: (_BinGrid(lay, rows, cols, per_row, self.t_lo, span / cols),
                      _BinGrid(lay, f_rows, f_cols, f_per_row, self.t_lo, span / f_cols))
                for lay in layers}  # fmt: skip

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
            "idx": pack(nz, "u4"),
            "rb": pack(byt[0, nz], "f8"), "wb": pack(byt[1, nz], "f8"),
            "rn": pack(ops[0, nz], "u4"), "wn": pack(ops[1, nz], "u4"),
            "rt": pack(busy[0, nz], "f4"), "wt": pack(busy[1, nz], "f4"),
        }  # fmt: skip

    def _ost_records(self, stripes: Stripes, acc: dict[str, np.ndarray], sl: slice,
                     lay: np.ndarray, op: np.ndarray, ln: np.ndarray) -> None:  # fmt: skip
        r = self.t.records
        off = r.offset[sl]
        fs = isin(lay, FS_CODES)
        row = stripes.lookup(r.file_id[sl])
        on = fs & (row >= 0)
        if not on.any():
            return
        self.ost_rec_rows[unique(row[on])] = True
        on &= (ln > 0) & (off >= 0) & (stripes.count[np.maximum(row, 0)] > 0)
        dur = np.clip(r.end[sl] - r.start[sl], 0, None)
        for o in (0, 1):
            m = on & (op == o)
            if m.any():
                stripes.add(acc, o, row[m], off[m].astype(np.int64), ln[m].astype(np.int64),
                            dur[m])  # fmt: skip

    # -- request sizes ---------------------------------------------------------
