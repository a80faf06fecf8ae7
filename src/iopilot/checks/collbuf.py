"""Collective buffering: which files' POSIX traffic is shaped by it.

With collective MPI-IO, a few aggregator ranks issue all the POSIX calls of
a shared file; their POSIX bytes and time are then concentrated by design,
not by an unbalanced program.  The imbalance checks ask here whether that
explains what they see."""

from __future__ import annotations

import numpy as np

from ..model import Counters
from ..model.aggregate import group_sum, unique
from ..vocabulary import MPIIO_COLLECTIVE, mpiio_counters
from .base import Context
from .recordtools import _cached

_HINT = {"WRITE": "romio_cb_write", "READ": "romio_cb_read"}


def cb_disabled(ctx: Context, direction: str) -> bool:
    """The job's hints switched collective buffering off in ``direction``."""
    hints = ctx.trace.job.hints or {}
    return str(hints.get(_HINT[direction], "")).strip().lower() == "disable"


def collective_ops(c: Counters, direction: str) -> np.ndarray:
    """Per MPI-IO row, its collective calls in ``direction``."""
    return sum((c[n] for n in mpiio_counters(direction, MPIIO_COLLECTIVE) if c.has(n)),
               np.zeros(len(c), np.int64))  # fmt: skip


def collective_files(ctx: Context, direction: str) -> np.ndarray:
    """Sorted ids of the MPI-IO files with collective calls in ``direction``."""
    c = ctx.layer("MPIIO")
    if c is None:
        return np.zeros(0, np.uint64)
    return unique(c.file_id[collective_ops(c, direction) > 0])


def aggregated_files(ctx: Context) -> np.ndarray:
    """Sorted ids of the files whose POSIX I/O goes through collective
    buffering: collective MPI-IO calls (reads or writes) with buffering not
    switched off, and MPI-IO bytes balanced over the ranks (max - min over
    max within ``rank_size_imbalance``), so that any POSIX imbalance on them
    is the aggregators' doing.  Computed once per diagnosis (four imbalance
    checks ask)."""
    return _cached(ctx, "aggregated_files", lambda: _aggregated_files(ctx))


def _aggregated_files(ctx: Context) -> np.ndarray:
    c = ctx.layer("MPIIO")
    if c is None:
        return np.zeros(0, np.uint64)
    ids = [collective_files(ctx, d) for d in ("WRITE", "READ") if not cb_disabled(ctx, d)]
    if not ids:
        return np.zeros(0, np.uint64)
    coll = unique(np.concatenate(ids))
    moved = (c["MPIIO_BYTES_READ"] + c["MPIIO_BYTES_WRITTEN"]).astype(np.float64)
    ids_all, inv = np.unique(c.file_id, return_inverse=True)
    # Per-rank rows: spread over the file's ranks; reduced rows: Darshan's
    # slowest and fastest rank bytes (iopilot fills them the same way).
    hi = np.zeros(len(ids_all))
    lo = np.full(len(ids_all), np.inf)
    own = c.rank >= 0
    np.maximum.at(hi, inv[own], moved[own])
    np.minimum.at(lo, inv[own], moved[own])
    if c.has("MPIIO_SLOWEST_RANK_BYTES"):
        red = ~own
        slow = c["MPIIO_SLOWEST_RANK_BYTES"].astype(np.float64)
        fast = c["MPIIO_FASTEST_RANK_BYTES"].astype(np.float64)
        np.maximum.at(hi, inv[red], np.maximum(slow, fast)[red])
        np.minimum.at(lo, inv[red], np.minimum(slow, fast)[red])
    ranks = group_sum(inv, np.where(own, 1, max(2, ctx.trace.job.nprocs)), len(ids_all))
    lo = np.where(np.isfinite(lo), lo, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.where(hi > 0, (hi - lo) / hi, 0.0)
    balanced = (ranks > 1) & (spread <= float(ctx.thresholds["rank_size_imbalance"]))
    keep = balanced & np.isin(ids_all, coll)
    out = ids_all[keep]
    out.setflags(write=False)  # shared by the checks
    return out
