"""Vectorised building blocks shared by the record-based checks (ranks,
phases, overlaps): sorts, running maxima, per-diagnosis caching.

Nothing here loops over records: traces may hold tens of millions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..model import RECORD_LAYERS, Records
from ..model.aggregate import unique
from ..vocabulary import MODULE
from .base import Context

_MPIIO = RECORD_LAYERS.index("MPIIO")
# Per file, only the highest layer that traced it counts for rank loads, so
# the bytes an application asked MPI-IO (or HDF5) for are not counted twice,
# and MPI-IO's aggregators do not make rank 0 look like a funnel.
_LEVEL = {name: MODULE[name].level for name in RECORD_LAYERS}
_INT63 = 2**62  # products of sort keys must stay below this to fit int64

PHASES_LISTED = 50
STEP = 1 << 18  # records per step of a pass over sorted records: bounds its temporaries

# ---------------------------------------------------------------------------
# Shared vectorised helpers
# ---------------------------------------------------------------------------

def _cached(ctx: Context, key: str, compute: Callable[[], Any]) -> Any:
    """Compute a derived table once per diagnosis: several checks share it."""
    return ctx.cache.get(key, compute)


def _layer_records(ctx: Context, layer: str) -> Records:
    """One layer's records, selected once per diagnosis (a copy of every column)."""
    r = ctx.trace.records
    code = RECORD_LAYERS.index(layer)
    return _cached(ctx, f"records:{layer}",
                   lambda: r if np.all(r.layer == code) else r.of_layer(layer))  # fmt: skip


def chunks(n: int, seam: int = 0) -> Iterator[slice]:
    """The slices of a pass over ``n`` records in steps of ``STEP``, each
    reaching ``seam`` records into the next step (to compare across it)."""
    step = STEP
    for a in range(0, n, step):
        yield slice(a, a + step + seam)


def small_type(top: int) -> type[np.integer]:
    """The smallest unsigned type that holds 0 .. ``top`` (int64 past 16 bits)."""
    return np.uint8 if top < 1 << 8 else np.uint16 if top < 1 << 16 else np.int64


def distinct(values: np.ndarray,
             where: Callable[[slice], np.ndarray] | None = None) -> np.ndarray:  # fmt: skip
    """Sorted distinct values of a column (of the rows where ``where(step)``
    is true, a mask per step), found step by step: no sorted copy of the
    whole column."""
    parts = [unique(values[cut] if where is None else values[cut][where(cut)])
             for cut in chunks(len(values))]  # fmt: skip
    return unique(np.concatenate(parts)) if len(parts) > 1 else (parts[0] if parts
                                                                  else values[:0])  # fmt: skip


def key_order(key: np.ndarray) -> np.ndarray | None:
    """``np.argsort(key, kind="stable")`` for small non-negative keys, as a
    counting sort in steps: the order in 4 bytes per element (8 past 2**32
    elements), and only a step's worth of temporaries besides.  None when
    the keys are in order already (one file, or files one after another)."""
    n = len(key)
    top = int(key.max()) + 1 if n else 0
    counts = np.zeros(top, np.int64)
    ascending = True
    for cut in chunks(n, seam=1):
        k = key[cut]
        ascending = ascending and bool(np.all(k[1:] >= k[:-1]))
        counts += np.bincount(k[: STEP], minlength=top)  # the seam is the next step's
    if ascending:
        return None
    free = np.cumsum(counts) - counts  # the next place of each key
    order = np.empty(n, np.uint32 if n <= 1 << 32 else np.int64)
    for cut in chunks(n):
        k = key[cut]
        local = np.argsort(k, kind="stable")
        here = np.bincount(k, minlength=top)
        k = k[local]
        # a place past the key's places so far: its rank among this step's equal keys
        place = np.arange(len(k)) - (np.cumsum(here) - here)[k] + free[k]
        order[place] = local + cut.start
        free += here
    return order


def _dense(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique values, index of each value in the smallest type that holds it),
    in steps: np.unique's own inverse is slower and takes 8 bytes per value."""
    uniq = distinct(ids)
    out = np.empty(len(ids), small_type(len(uniq) - 1))
    for cut in chunks(len(ids)):
        out[cut] = np.searchsorted(uniq, ids[cut])
    return uniq, out


def _sort2(major: np.ndarray, minor: np.ndarray,
           runs: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Sort by (major, minor), both non-negative int64: (order, major, minor) sorted.

    When both fit in one int64 key the sorted columns are decoded from the
    sorted key, which saves two random gathers over the arrays.  ``runs``:
    the input is made of long sorted runs, which a merge sort exploits.
    """
    if not len(major):
        return np.zeros(0, np.int64), major, minor
    bits = int(minor.max()).bit_length()  # a power-of-two span: shifts, not divisions
    if (int(major.max()) + 1) << bits < _INT63:
        key = (major << bits) | minor
        order = np.argsort(key, kind="stable" if runs else None)
        key = key[order]
        hi = key >> bits
        key &= (1 << bits) - 1
        return order, hi, key
    order = np.lexsort((minor, major))
    return order, major[order], minor[order]


def _prev_max(group: np.ndarray, end: np.ndarray,
              holders: bool = False) -> tuple[np.ndarray, np.ndarray | None]:  # fmt: skip
    """For arrays sorted by ``group`` (non-negative): the max ``end`` over the
    earlier elements of each element's group (-1 for a group's first) and, if
    asked, the position of the element holding that max (-1 likewise).
    """
    n = len(end)
    if not n:
        return np.zeros(0, np.int64), (np.zeros(0, np.int64) if holders else None)
    # Shift each group above all earlier ones so one running max restarts per group.
    width = int(end.max()) + 1
    base = group
    if (int(group[-1]) + 1) * width >= _INT63:  # sparse group numbers: renumber densely
        first = np.ones(n, bool)
        first[1:] = group[1:] != group[:-1]
        base = np.cumsum(first) - 1
    ranked = None
    if (int(base[-1]) + 1) * width >= _INT63:  # still too wide: rank the ends
        ranked = unique(end)
        width = len(ranked)
    offset = base * width
    shifted = offset + (end if ranked is None else np.searchsorted(ranked, end))
    run = np.maximum.accumulate(shifted)
    if not holders:
        del shifted
    prev = np.empty(n, np.int64)
    prev[0] = -1
    # At a group's first element the previous run value lies below the group's
    # shifted range, so this difference is negative there.
    np.subtract(run[:-1], offset[1:], out=prev[1:])
    del offset
    np.maximum(prev, -1, out=prev)
    if ranked is not None:
        known = prev >= 0
        prev[known] = ranked[prev[known]]
    who = None
    if holders:
        who = np.empty(n, np.int64)
        who[0] = -1
        who[1:] = np.maximum.accumulate(np.where(shifted == run, np.arange(n), 0))[:-1]
        who[prev < 0] = -1
    return prev, who


def _busy(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Seconds each operation ran (0 when its end precedes its start)."""
    dur = end - start
    np.maximum(dur, 0.0, out=dur)
    return dur


def _app_mask(records: Records) -> np.ndarray:
    """Records of the highest traced layer of their file (see ``_LEVEL``)."""
    level_of = np.array([_LEVEL.get(name, 1) for name in RECORD_LAYERS], np.int8)
    level = level_of[records.layer]
    if np.all(level == level[0]):
        return np.ones(len(records), bool)
    _, fidx = _dense(records.file_id)
    top = np.zeros(int(fidx.max()) + 1, np.int8)
    np.maximum.at(top, fidx, level)
    return level == top[fidx]


def _rank_list(ranks: np.ndarray, limit: int = 10) -> str:
    shown = ", ".join(str(int(x)) for x in ranks[:limit])
    return shown + (f" and {len(ranks) - limit} more" if len(ranks) > limit else "")
