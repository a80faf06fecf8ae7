"""Sums per group, one helper per concept: per file, per rank, per phase (or any
dense group index).  Whole-column NumPy; nothing loops over rows.

Results keep the type of what is summed, so a per-file sum gives the same
bits whichever check asks: integers sum exactly into int64, floats into
float64 in row order (as ``np.bincount`` and ``np.add.at`` both do).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

# float64 holds every integer below this exactly, so a float sum of integers
# whose absolute values add up to less is exact too.
_EXACT = 2**53


def group_sum(group: np.ndarray, values: np.ndarray | None, n: int, *,
              as_float: bool | None = None) -> np.ndarray:  # fmt: skip
    """Sum of ``values`` per group ``0 .. n-1`` (``group`` per row); the row
    count per group when ``values`` is None.  Integers (and booleans) give
    int64, exactly; floats, or any values with ``as_float``, float64."""
    if values is None:
        return np.bincount(group, minlength=n)
    values = np.asarray(values)
    floats = values.dtype.kind == "f" if as_float is None else as_float
    if floats:  # (bincount gives int64 zeros when there are no rows at all)
        return np.bincount(group, weights=values, minlength=n).astype(np.float64, copy=False)
    # bincount sums in float64 (fast); exact as long as no partial sum can round.
    if len(values) and float(np.abs(values).sum(dtype=np.float64)) >= _EXACT:
        out = np.zeros(n, np.int64)
        np.add.at(out, group, values)
        return out
    return np.bincount(group, weights=values, minlength=n).astype(np.int64)


def per_file(file_id: np.ndarray, columns: Mapping[str, np.ndarray | None], *,
             as_float: bool | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:  # fmt: skip
    """(sorted unique file ids, each column summed per file)."""
    ids, inv = np.unique(file_id, return_inverse=True)
    return ids, {k: group_sum(inv, v, len(ids), as_float=as_float) for k, v in columns.items()}


def per_rank(rank: np.ndarray, values: np.ndarray | None, n: int) -> np.ndarray:
    """Float sums per rank ``0 .. n-1`` of the rows whose rank is in that range;
    rows of reduced records (rank -1) are left to the caller, which knows how
    to share them out."""
    weights = None if values is None else np.asarray(values)
    if len(rank) and (rank.min() < 0 or rank.max() >= n):  # copies only when needed
        own = (rank >= 0) & (rank < n)
        rank = rank[own]
        weights = None if weights is None else weights[own]
    return np.bincount(rank, weights=weights, minlength=n).astype(np.float64, copy=False)


def unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an integer (or NaN-free) array, flattened.

    ``np.unique`` without index outputs imports ``numpy.ma`` on its first call
    (NumPy >= 2.3), about 7 % of a one-log report; a sort and
    one comparison give the same answer without it.
    """
    s = np.sort(np.asarray(values).ravel())
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def unique_columns(table: np.ndarray) -> np.ndarray:
    """Distinct columns of a 2-D array, in lexicographic order of its rows
    (first row first): ``np.unique(table, axis=1)`` without ``numpy.ma``."""
    table = np.asarray(table)
    if table.shape[1] < 2:
        return table.copy()
    s = table[:, np.lexsort(table[::-1])]
    keep = np.empty(s.shape[1], dtype=bool)
    keep[0] = True
    np.any(s[:, 1:] != s[:, :-1], axis=0, out=keep[1:])
    return s[:, keep]


def median(values: np.ndarray) -> float:
    """Median of all the values (NaN if any is NaN or there are none), as
    ``np.median`` gives it, without the ``numpy.ma`` import that costs."""
    a = np.asarray(values, dtype=np.float64).ravel()
    n = len(a)
    if n == 0 or np.isnan(a).any():
        return float("nan")
    lo, hi = (n - 1) // 2, n // 2
    s = np.partition(a, [lo, hi])
    return float((s[lo] + s[hi]) / 2)


def isin(values: np.ndarray, among: np.ndarray) -> np.ndarray:
    """``np.isin(values, among)`` for integers (or NaN-free floats), without
    ``numpy.ma``; exact for mixed signed and unsigned 64-bit integers too,
    where NumPy would compare them as floats."""
    v, s = np.asarray(values), unique(np.asarray(among))
    if not len(s):
        return np.zeros(v.shape, dtype=bool)
    out_of_reach = None
    if v.dtype != s.dtype:
        if v.dtype.kind in "iu" and s.dtype.kind in "iu" and not (
                np.can_cast(v.dtype, s.dtype) or np.can_cast(s.dtype, v.dtype)):  # fmt: skip
            # One signed, one unsigned, no common integer type: compare as
            # uint64; a negative value matches nothing on the unsigned side.
            if v.dtype.kind == "i":
                out_of_reach = v < 0
            else:
                s = s[s >= 0]
            common = np.dtype(np.uint64)
        else:
            common = np.result_type(v.dtype, s.dtype)
        v, s = v.astype(common, copy=False), s.astype(common, copy=False)
        if not len(s):
            return np.zeros(v.shape, dtype=bool)
    i = np.minimum(np.searchsorted(s, v), len(s) - 1)
    hit = np.asarray(s[i] == v)
    if out_of_reach is not None:
        hit &= ~out_of_reach
    return hit
