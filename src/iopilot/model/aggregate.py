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
