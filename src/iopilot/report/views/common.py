"""Pieces the page's views share: packing, lookups, per-OST striping, small sums.

Whole-column NumPy helpers only; nothing here holds per-record Python objects.
"""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np

from ...model import RECORD_LAYERS, SIZE_BIN_UPPER, SIZE_BINS, Counters, Trace
from ...vocabulary import FS_LAYERS, MODULE, MODULES

# Layers with byte counters, in report order, and the interface each one is.
TABLE_LAYERS = tuple(m.name for m in MODULES if m.op_classes)
LABELS = {name: MODULE[name].interface for name in TABLE_LAYERS}
NL = len(RECORD_LAYERS)
FS_CODES = tuple(RECORD_LAYERS.index(n) for n in FS_LAYERS)  # what the FS sees
UPPER = np.array(SIZE_BIN_UPPER, np.int64)
NB = len(SIZE_BINS)

# Their read and write operation counters.
OPS = {name: (MODULE[name].op_counters("READ"), MODULE[name].op_counters("WRITE"))
       for name in TABLE_LAYERS}  # fmt: skip

# The phases view's limits.
PHASE_ROWS = 1000  # phases listed per (layer, gap)
GAP_CHOICES = (0.001, 0.01, 0.1, 1.0, 10.0, 60.0)  # extra phase gaps offered (s)

_DTYPES = {"f8": "<f8", "f4": "<f4", "i4": "<i4", "i2": "<i2", "u4": "<u4", "u1": "u1"}


def pack(a: Any, code: str) -> dict[str, str]:
    """A numeric array as base64 of little-endian values, decoded by the page."""
    buf = np.ascontiguousarray(a, dtype=_DTYPES[code]).tobytes()
    return {"$b64": base64.b64encode(buf).decode("ascii"), "dtype": code}



class Lookup:
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


def waterfill(counts: np.ndarray, budget: float) -> np.ndarray:
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


def group(values: np.ndarray, k: int) -> np.ndarray:
    """Sums of consecutive groups of ``k`` values (the last group may be short)."""
    if k <= 1:
        return values
    n = len(values)
    pad = (-n) % k
    return np.concatenate([values, np.zeros(pad, values.dtype)]).reshape(-1, k).sum(axis=1)



class Top:
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


def col(c: Counters, names: tuple[str, ...] | str) -> np.ndarray:
    """Sum of the counters in ``names`` that the table has (zeros if none)."""
    names = (names,) if isinstance(names, str) else names
    out = np.zeros(len(c), np.float64)
    for n in names:
        if c.has(n):
            out += c[n]
    return out



def mount_of(path: str, mounts: list[tuple[str, str]]) -> tuple[str, str]:
    """(mount point, type) of ``path`` by longest prefix, ("", "") if none."""
    best = ("", "")
    for mnt, kind in mounts:
        if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best[0]):
            best = (mnt, kind)
    return best


# ---------------------------------------------------------------------------
# Lustre: bytes and requests per OST
# ---------------------------------------------------------------------------


class Stripes:
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
        self.lookup = Lookup(st.file_id)

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



def num(v: Any) -> float | int | None:
    """A JSON number: an int when exact, None when not finite."""
    f = float(v)
    if not math.isfinite(f):
        return None
    return int(f) if f.is_integer() and abs(f) < 2**53 else f
