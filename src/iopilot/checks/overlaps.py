"""Byte ranges accessed more than once: write conflicts between ranks,
rewrites, re-reads.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .._record import record
from ..model import OP_READ, OP_WRITE
from ..model.aggregate import group_sum, isin, per_file, unique
from ..units import human_size
from . import advice
from .base import Check, Context, Finding, Level, check, pct
from .iotime import price, records_share_at_slowest
from .recordtools import (
    _INT63,
    _MPIIO,
    _cached,
    _dense,
    _layer_records,
    _prev_max,
    _sort2,
    chunks,
    distinct,
    key_order,
    small_type,
)

# ---------------------------------------------------------------------------
# Overlapping byte ranges
# ---------------------------------------------------------------------------


@record
class Overlaps:
    """Bytes of one kind of access (reads or writes) accessed more than once.

    Per-file arrays follow ``files``; "same" counts re-accesses by the rank
    that had already accessed the bytes, "cross" by another rank.
    """

    ops: int
    bytes: int
    files: np.ndarray
    same_ops: np.ndarray  # operations overlapping earlier ones of the same rank
    same_bytes: np.ndarray
    cross_ops: np.ndarray  # per-rank extents overlapping another rank's
    cross_bytes: np.ndarray
    total_bytes: np.ndarray  # bytes accessed
    pair_a: np.ndarray  # per cross-rank overlap: the two ranks
    pair_b: np.ndarray


def _by_kind_file(kf: np.ndarray, rank: np.ndarray,
                  offset: np.ndarray) -> tuple[bool, np.ndarray | None]:  # fmt: skip
    """(whether grouping operations by their small (kind, file) key ``kf``
    also sorts each rank's operations by offset, the order that groups
    them: None when they are grouped already).

    Traces hold each process's operations in time order, one process after
    another, and most ranks move forward through a file.  A stable counting
    sort on the small key then keeps every rank's operations together and in
    offset order: O(n) instead of a comparison sort.
    """
    # Each rank must sit in one block (two processes with one rank may not).
    blocks = 1 + sum(int(np.count_nonzero(r[1:] != r[:-1]))
                     for r in (rank[cut] for cut in chunks(len(rank), seam=1)))  # fmt: skip
    if blocks != len(distinct(rank)):
        return False, None
    order = key_order(kf)
    for cut in chunks(len(kf), seam=1):  # one more element: the step's seam
        o = cut if order is None else order[cut]
        k, r, s = kf[o], rank[o], offset[o]
        same = (r[1:] == r[:-1]) & (k[1:] == k[:-1])
        if not np.all((s[1:] >= s[:-1]) | ~same):
            return False, None  # a rank went back in a file
    return True, order


@record
class _Pass1:
    """Pass 1's sums per (kind, file) and the per-rank extents it leaves."""

    same_bytes: np.ndarray
    same_ops: np.ndarray
    total: np.ndarray
    count: np.ndarray
    x_start: np.ndarray
    x_end: np.ndarray
    x_kf: np.ndarray
    x_rank: np.ndarray


def _pass1(order: np.ndarray | None, kf: np.ndarray, rank: np.ndarray, offset: np.ndarray,
           length: np.ndarray, n_kf: int, *, taken: bool = False) -> _Pass1:  # fmt: skip
    """Re-accessed bytes within each rank, step by step over ``order`` (sorted
    by kind, file, rank, offset; ``kf`` and ``rank`` in that order too, or,
    with ``taken``, as they are, taken through ``order`` step by step;
    ``order`` None: the operations are in that order as they are).

    A group (kind, file, rank) may run across steps: its running max end is
    carried over, and so is the extent still open at the seam.
    """
    sums = np.zeros((4, n_kf))
    parts: list[tuple[np.ndarray, ...]] = []
    carry: tuple[int, int] | None = None
    carry_max = -1
    for cut in chunks(len(kf)):
        o = cut if order is None else order[cut]
        s = offset[o]
        e = length[o] + s
        k = (kf[o] if taken else kf[cut]).astype(np.int64)
        r = rank[o] if taken else rank[cut]
        first = np.empty(len(s), bool)
        first[1:] = (k[1:] != k[:-1]) | (r[1:] != r[:-1])
        first[0] = carry != (int(k[0]), int(r[0]))
        prev, _ = _prev_max(np.cumsum(first), e)
        if not first[0]:  # the group goes on from the step before
            m = int(np.argmax(first)) if first.any() else len(s)
            np.maximum(prev[:m], carry_max, out=prev[:m])
        covered = np.minimum(e, prev)
        covered -= s
        np.maximum(covered, 0, out=covered)
        sums[0] += group_sum(k, covered, n_kf, as_float=True)
        sums[1] += group_sum(k[covered > 0], None, n_kf)
        del covered
        sums[2] += group_sum(k, e - s, n_kf, as_float=True)
        sums[3] += group_sum(k, None, n_kf)
        # Per-rank extents: runs of operations that overlap or touch their predecessor.
        heads = np.flatnonzero(prev < s)
        del prev
        h0 = int(heads[0]) if len(heads) else len(s)
        if h0:  # the extent open at the seam grows
            x_end = parts[-1][1]
            x_end[-1] = max(int(x_end[-1]), int(e[:h0].max()))
        if len(heads):
            parts.append((s[heads], np.maximum.reduceat(e, heads), k[heads],
                          r[heads].astype(np.int64)))  # fmt: skip
        last = np.flatnonzero(first)
        tail = int(e[last[-1] :].max()) if len(last) else int(e.max())
        carry_max = tail if len(last) else max(carry_max, tail)
        carry = (int(k[-1]), int(r[-1]))
    cols = [np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, np.int64)
            for i in range(4)]  # fmt: skip
    ints = sums.astype(np.int64)
    return _Pass1(ints[0], ints[1], sums[2], ints[3], *cols)


def _overlaps(op: np.ndarray, rank: np.ndarray, file_id: np.ndarray, offset: np.ndarray,
              length: np.ndarray) -> dict[int, Overlaps]:  # fmt: skip
    """Byte ranges accessed more than once, per operation kind, file and rank.

    Pass 1 groups operations by (kind, file, rank) in offset order: an
    operation starting below the running max end of its rank's earlier
    operations re-accesses bytes.  The per-rank extents left over are
    disjoint, so in pass 2, sorted by (kind, file, offset), any extent
    starting below the running max end overlaps bytes of another rank.
    """
    files, fidx = _dense(file_id)
    nf = len(files)
    n_kf = 2 * nf
    rlo = int(rank.min())
    rbits = (int(rank.max()) - rlo).bit_length()  # ranks packed in the low bits
    small = small_type(n_kf - 1)
    kf = op.astype(small)  # (kind, file) of each operation
    kf *= small(nf)
    kf += fidx
    del fidx
    grouped, order = _by_kind_file(kf, rank, offset) if small != np.int64 else (False, None)
    if grouped:  # no sorted copies: pass 1 takes each step's keys
        p1 = _pass1(order, kf, rank, offset, length, n_kf, taken=True)
    else:
        group = (kf.astype(np.int64) << rbits) | (rank - rlo)
        del kf
        order, g, _ = _sort2(group, offset)
        del group
        kf = g >> rbits  # (kind, file) of each operation
        rk = (g & ((1 << rbits) - 1)) + rlo
        del g
        p1 = _pass1(order, kf, rk, offset, length, n_kf)
        del rk
    del order, kf
    same_bytes, same_ops, total, count = p1.same_bytes, p1.same_ops, p1.total, p1.count
    ops = [int(count[:nf].sum()), int(count[nf:].sum())]
    x_start, x_end, x_kf = p1.x_start, p1.x_end, p1.x_kf
    x_rank = p1.x_rank - rlo
    del p1
    # Order by (kind, file, start); the rank rides in the low bits when it fits.
    if (int(x_start.max()) + 1) << rbits < _INT63 // n_kf:
        # Each rank's extents are already in order: merge-friendly runs.
        order, x_kf, packed = _sort2(x_kf, (x_start << rbits) | x_rank, runs=True)
        x_start = packed >> rbits
        x_rank = packed & ((1 << rbits) - 1)
        del packed
    else:
        order, x_kf, x_start = _sort2(x_kf, x_start)
        x_rank = x_rank[order]
    x_end = x_end[order]
    x_rank += rlo
    del order
    prev, who = _prev_max(x_kf, x_end, holders=True)
    assert who is not None
    covered = np.minimum(x_end, prev)
    covered -= x_start
    np.maximum(covered, 0, out=covered)
    clash = covered > 0
    cross_ops = group_sum(x_kf[clash], None, n_kf)
    cross_bytes = group_sum(x_kf, covered, n_kf, as_float=True)
    pair_a, pair_b, pair_kind = x_rank[who[clash]], x_rank[clash], x_kf[clash] // nf
    out = {}
    for k in (OP_READ, OP_WRITE):
        sl = slice(k * nf, (k + 1) * nf)
        out[k] = Overlaps(
            ops=int(ops[k]),
            bytes=int(total[sl].sum()),
            files=files,
            same_ops=same_ops[sl],
            same_bytes=same_bytes[sl].astype(np.int64),
            cross_ops=cross_ops[sl],
            cross_bytes=cross_bytes[sl].astype(np.int64),
            total_bytes=total[sl].astype(np.int64),
            pair_a=pair_a[pair_kind == k],
            pair_b=pair_b[pair_kind == k],
        )
    return out


def file_overlaps(ctx: Context, op: int) -> Overlaps | None:
    """Overlaps of the POSIX reads or writes (the byte ranges the file system saw)."""

    def compute() -> dict[int, Overlaps] | None:
        r = _layer_records(ctx, "POSIX")
        if not len(r):
            return None
        keep = (r.length > 0) & (r.offset >= 0)
        if keep.all():
            return _overlaps(r.op, r.rank, r.file_id, r.offset, r.length)
        if not keep.any():
            return None
        return _overlaps(r.op[keep], r.rank[keep], r.file_id[keep],
                         r.offset[keep], r.length[keep])  # fmt: skip

    both = _cached(ctx, "overlaps", compute)
    if both is None or not both[op].ops:
        return None
    return both[op]


def _top_pair(a: np.ndarray, b: np.ndarray) -> tuple[int, int, int]:
    """The most frequent unordered rank pair and how often it occurs."""
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    base = int(lo.min())
    width = int(hi.max()) - base + 1
    key = (lo - base) * width + (hi - base)
    if width * width <= 4 * len(key) + (1 << 20):
        counts = np.bincount(key)
        best = int(np.argmax(counts))
        n = int(counts[best])
    else:
        keys, counts = np.unique(key, return_counts=True)
        i = int(np.argmax(counts))
        best, n = int(keys[i]), int(counts[i])
    return best // width + base, best % width + base, n


@check
class OverlappingWrites(Check):
    """The same bytes of a file are written more than once.

    Cost: the slowest rank's POSIX write time on each file times the share of
    the file's written bytes that overlap (another rank's for conflicts, its
    own for rewrites): the time of the overlapping operations."""

    id = "overlapping-writes"
    layer = "POSIX"
    site_ops = ("write",)
    uses = ("overlap_count",)
    needs_records = True

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        ov = file_overlaps(ctx, OP_WRITE)
        if ov is None:
            return
        cross, cross_b = int(ov.cross_ops.sum()), int(ov.cross_bytes.sum())
        same, same_b = int(ov.same_ops.sum()), int(ov.same_bytes.sum())
        if cross and cross >= int(ctx.thresholds["overlap_count"]):
            a, b, n_ab = _top_pair(ov.pair_a, ov.pair_b)
            ranks = unique(np.concatenate([ov.pair_a, ov.pair_b]))
            files, n_files = ctx.top_files(
                ov.files, ov.cross_bytes.astype(np.float64),
                {"conflicting ranges": ov.cross_ops, "bytes rewritten by another rank":
                 ov.cross_bytes, "bytes written": ov.total_bytes},
                ov.cross_ops > 0,
            )  # fmt: skip
            rec = (
                "Make sure each byte has one writer, or order the writers: under MPI-IO's "
                "default (non-atomic) semantics, overlapping writes of different ranks give "
                "undefined file contents unless separated by sync-barrier-sync, or made with "
                "atomic mode on"
            )
            rec += _mpiio_cause(ctx, ov, ov.cross_ops > 0)
            cost = records_share_at_slowest(ctx, "POSIX", OP_WRITE, ov.files, ov.cross_bytes,
                                            ov.total_bytes)  # fmt: skip
            yield price(ctx, self.finding(
                ctx,
                Level.WARN,
                f"{cross:,} byte range(s) written by one rank were also written by another "
                f"({human_size(cross_b)} written again, {len(ranks)} ranks involved, "
                f"on {n_files} file(s)); most often ranks {a} and {b} ({n_ab:,}×).",
                evidence={
                    "conflicts": cross,
                    "conflict_bytes": cross_b,
                    "ranks_involved": len(ranks),
                    "files": n_files,
                    "top_pair": f"{a}-{b}",
                },
                ranks=[a, b],
                files=files,
                files_total=n_files,
                recommendation=rec + ".",
                snippet=advice.MPIIO_SYNC_BARRIER_SYNC,
                snippet_lang="c",
            ), cost)
        if same:
            files, n_files = ctx.top_files(
                ov.files, ov.same_bytes.astype(np.float64),
                {"rewrites": ov.same_ops, "bytes rewritten": ov.same_bytes,
                 "bytes written": ov.total_bytes},
                ov.same_ops > 0,
            )  # fmt: skip
            cost = records_share_at_slowest(ctx, "POSIX", OP_WRITE, ov.files, ov.same_bytes,
                                            ov.total_bytes)  # fmt: skip
            yield price(ctx, self.finding(
                ctx,
                Level.INFO,
                f"{same:,} POSIX write(s) rewrite bytes the same rank had already written "
                f"({human_size(same_b)} of {human_size(ov.bytes)} written, "
                f"{pct(same_b, ov.bytes):.1f} %, on {n_files} file(s)).",
                evidence={
                    "rewrites": same,
                    "rewritten_bytes": same_b,
                    "bytes_written": ov.bytes,
                    "files": n_files,
                },
                files=files,
                files_total=n_files,
                recommendation="Rewriting is harmless when rare (headers, metadata updates); "
                "if it is bulk data, write each block once from memory"
                + _mpiio_cause(ctx, ov, ov.same_ops > 0)
                + ".",
            ), cost)


def _mpiio_cause(ctx: Context, ov: Overlaps, mask: np.ndarray) -> str:
    """Where repeated POSIX writes on MPI-IO files come from, as far as the data tells."""
    ids = ov.files[mask]
    distinct = (ov.total_bytes - ov.same_bytes - ov.cross_bytes)[mask]
    c = ctx.layer("MPIIO")
    if c is not None:
        m_ids, per = ctx.per_file(c, {"asked": c["MPIIO_BYTES_WRITTEN"],
                                      "indep": c["MPIIO_INDEP_WRITES"]})  # fmt: skip
        asked, indep = per["asked"], per["indep"]
    else:  # records only
        r = ctx.trace.records
        w = (r.layer == _MPIIO) & (r.op == OP_WRITE)
        m_ids, per = per_file(r.file_id[w], {"asked": r.length[w].clip(0)}, as_float=True)
        asked = per["asked"]
        indep = None
    hit = isin(m_ids, ids)
    if not hit.any():
        return ""
    at = np.searchsorted(ids, m_ids[hit])  # ids come sorted from np.unique
    asked_b, distinct_b = float(asked[hit].sum()), float(distinct[at].sum())
    if asked_b > distinct_b:
        return (
            f"; the application itself asked MPI-IO to write {human_size(asked_b)} to "
            f"these file(s), which hold {human_size(distinct_b)} of distinct data: it "
            "writes the same ranges more than once, and MPI-IO passes the repeats on"
        )
    if indep is None or indep[hit].sum() > 0:
        return (
            "; if the application's MPI-IO requests do not overlap, these are ROMIO's "
            "data-sieving read-modify-write cycles, which lock the file: collective writes "
            "or romio_ds_write=disable avoid them"
        )
    return ""


def _mpiio_write_only(ctx: Context) -> np.ndarray:
    """Files the application opened through MPI-IO and never read through it."""
    c = ctx.layer("MPIIO")
    if c is not None:
        ids, read = c.by_file("MPIIO_BYTES_READ")
        return ids[read == 0]
    r = ctx.trace.records
    m = r.layer == _MPIIO
    ids = unique(r.file_id[m])
    return ids[~isin(ids, r.file_id[m & (r.op == OP_READ)])]


@check
class OverlappingReads(Check):
    """The same bytes of a file are read more than once.

    Cost: the slowest rank's POSIX read time on each file times the share of
    the file's bytes read that had been read before."""

    id = "overlapping-reads"
    layer = "POSIX"
    site_ops = ("read",)
    uses = ("reread_share", "reread_min_bytes")
    needs_records = True

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        ov = file_overlaps(ctx, OP_READ)
        if ov is None:
            return
        cross_b, same_b = int(ov.cross_bytes.sum()), int(ov.same_bytes.sum())
        again = cross_b + same_b
        if not again:
            return
        t = ctx.thresholds
        share = again / ov.bytes
        big = share > float(t["reread_share"]) and again >= float(t["reread_min_bytes"])
        per_file = ov.cross_bytes + ov.same_bytes
        # POSIX reads of a file the application only wrote through MPI-IO are
        # MPI-IO's own: read-modify-write around holes in the ranks' pieces.
        internal = isin(ov.files, _mpiio_write_only(ctx))
        internal_b = int(per_file[internal].sum())
        files, n_files = ctx.top_files(
            ov.files, per_file.astype(np.float64),
            {"bytes read again": per_file, "by the same rank": ov.same_bytes,
             "by other ranks": ov.cross_bytes, "bytes read": ov.total_bytes},
            per_file > 0,
        )  # fmt: skip
        unique = ov.bytes - again
        message = (
            f"{human_size(again)} of {human_size(ov.bytes)} read through POSIX "
            f"({100 * share:.1f} %) are bytes read before ({human_size(unique)} of "
            f"distinct data): {human_size(cross_b)} re-read by other ranks, "
            f"{human_size(same_b)} by the same rank, on {n_files} file(s)"
        )
        if internal_b:
            message += (
                f"; {human_size(internal_b)} of it on file(s) the application only "
                "wrote through MPI-IO, so MPI-IO read them itself"
            )
        if 2 * internal_b >= again:
            rec = (
                "These reads come from MPI-IO, not from the application: ROMIO reads a region "
                "back before writing it when the ranks' pieces leave holes in it. Make the "
                "pieces of one collective write tile the file contiguously, or for "
                "independent writes disable data sieving"
            )
            snippet = advice.ROMIO_READ_MODIFY_WRITE
        elif cross_b >= same_b:
            rec = (
                "Several ranks read the same bytes: read them once (one rank, or a few) and "
                "share them with MPI_Bcast or a collective read"
            )
            snippet = advice.READ_ONCE_BCAST
        else:
            rec = "Ranks re-read bytes they already read: keep them in memory instead"
            snippet = ""
        cost = records_share_at_slowest(ctx, "POSIX", OP_READ, ov.files, per_file, ov.total_bytes)
        yield price(ctx, self.finding(
            ctx,
            Level.WARN if big else Level.INFO,
            message + ".",
            evidence={
                "bytes_read": ov.bytes,
                "distinct_bytes": unique,
                "reread_bytes": again,
                "reread_by_other_ranks": cross_b,
                "reread_by_same_rank": same_b,
                "reread_by_mpiio_itself": internal_b,
                "files": n_files,
            },
            files=files,
            files_total=n_files,
            recommendation=rec + ".",
            snippet=snippet,
            snippet_lang="c",
        ), cost)
