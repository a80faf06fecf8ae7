"""HDF5 layer: dataset request sizes, collective transfers, metadata reads, alignment, chunks.

Datasets (H5D rows) point at their file through ``parent_id``; logs written
before Darshan stored it have 0 there, and the file is then found by name
(a dataset is named ``<file path>:<dataset path>``).  The same path has the
same record id in every module, so an HDF5 file's POSIX rows share its id.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from ..model import OP_READ, OP_WRITE, Counters
from ..model.aggregate import group_sum, isin, median, per_file, unique, unique_columns
from ..units import human_size
from ..vocabulary import DIRECTIONS, MPIIO_COLLECTIVE, RECORD_LAYERS, mpiio_counters
from . import advice
from .base import Check, Context, Finding, Level, check, pct
from .iotime import direction_time, io_time, price, share_of, small_request_seconds, times
from .language import in_language
from .lustre import common_access, gather, index_of
from .misalign import misaligned_seconds
from .recordtools import _layer_records

KiB = 1024
# Names that mark a file as HDF5 when the log has no H5F record for it
# (e.g. Darshan ran without its HDF5 module).
_H5_SUFFIXES = (".h5", ".hdf5", ".he5", ".hdf")


def _file_of(name: str, by_path: dict[str, int]) -> int:
    """The record id of the file part of a dataset name, 0 if not found."""
    i = name.find(":")
    while i > 0:
        fid = by_path.get(name[:i])
        if fid is not None:
            return fid
        i = name.find(":", i + 1)
    return 0


def dataset_files(ctx: Context, d: Counters) -> np.ndarray:
    """For each H5D row, the record id of its file (0 when unknown)."""
    parent = (
        d.parent_id.astype(np.uint64)
        if d.parent_id is not None
        else np.zeros(len(d), np.uint64)
    )
    missing = parent == 0
    if missing.any():
        by_path = {n: i for i, n in ctx.trace.names.items()}
        ids, inv = np.unique(d.file_id[missing], return_inverse=True)
        # One name lookup per dataset, not per row.
        found = np.array([_file_of(ctx.trace.name(int(i)), by_path) for i in ids], np.uint64)
        parent = parent.copy()
        parent[missing] = found[inv]
    return parent


def hdf5_file_ids(ctx: Context, by_name: bool = True) -> np.ndarray:
    """Sorted record ids of the files known (or, with ``by_name``, named) to be HDF5."""
    parts = []
    f = ctx.layer("H5F")
    if f is not None:
        parts.append(f.file_id)
    d = ctx.layer("H5D")
    if d is not None:
        par = dataset_files(ctx, d)
        parts.append(par[par != 0])
    p = ctx.layer("POSIX")
    if p is not None and by_name:
        ids = unique(p.file_id)
        named = np.array(
            [ctx.trace.name(int(i)).lower().endswith(_H5_SUFFIXES) for i in ids], bool
        )
        parts.append(ids[named])
    if not parts:
        return np.zeros(0, np.uint64)
    return unique(np.concatenate(parts).astype(np.uint64))


@check
class Hdf5SmallDatasetAccess(Check):
    """HDF5 dataset reads and writes that move only a few bytes each.

    Cost: the HDF5 calls' own time (the library's work included, not only
    the POSIX requests beneath), minus the same bytes at the rate of the
    job's large accesses (or ``default_bandwidth``): what one call per block
    would take.  With per-operation records, the small calls' time plus the
    gaps between consecutive calls on the same dataset up to
    ``call_overhead_gap`` (a tight loop: h5py's indexing, a resize per row),
    which the fix removes as well; from the counters otherwise, per
    direction, as for small POSIX requests."""

    id = "hdf5-small-dataset-access"
    layer = "H5D"
    site_small = True
    drishti = None
    uses = ("small_request_size", "small_requests_ratio", "hdf5_small_count", "hdf5_tiny_access",
            "default_bandwidth", "call_overhead_gap")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        d = ctx.layer("H5D")
        if d is None:
            return
        ops = np.maximum(d["H5D_READS"], 0) + np.maximum(d["H5D_WRITES"], 0)
        total = int(ops.sum())
        if not total:
            return
        small = ctx.small_ops(d, "H5D_SIZE", "READ_AGG") + ctx.small_ops(d, "H5D_SIZE", "WRITE_AGG")
        moved = np.maximum(d["H5D_BYTES_READ"], 0) + np.maximum(d["H5D_BYTES_WRITTEN"], 0)
        n_small, nbytes = int(small.sum()), int(moved.sum())
        mean = nbytes / total
        t = ctx.thresholds
        many = n_small / total > t["small_requests_ratio"] and n_small > t["hdf5_small_count"]
        tiny = mean < t["hdf5_tiny_access"]
        if not (many or tiny):
            return
        ids, per = ctx.per_file(d, {"small": small, "ops": ops, "bytes": moved})
        f_small, f_ops, f_bytes = per["small"], per["ops"], per["bytes"]
        f_mean = np.where(f_ops > 0, f_bytes / np.maximum(f_ops, 1), 0.0)
        files, n = ctx.top_files(
            ids, f_small if many else f_ops,
            {"small accesses": f_small, "accesses": f_ops, "mean bytes": np.round(f_mean, 1)},
            (f_small > 0) if many else (f_ops > 0) & (f_mean < t["hdf5_tiny_access"]),
        )  # fmt: skip
        limit = human_size(t["small_request_size"])
        if many:
            level = Level.HIGH
            msg = (
                f"{n_small:,} of {total:,} HDF5 dataset reads/writes ({pct(n_small, total):.1f} %)"
                f" move less than {limit} each; the mean is {human_size(mean)}."
            )
        else:
            level = Level.WARN
            msg = (
                f"HDF5 dataset accesses are tiny: {total:,} H5Dread/H5Dwrite calls move "
                f"{human_size(nbytes)} in all, {human_size(mean)} per call on "
                "average."
            )
        # Elements per call that reach the small-request size with the usual datatype.
        tsize = int(median(np.maximum(d["H5D_DATATYPE_SIZE"][ops > 0], 1)))
        nelems = max(1, math.ceil(t["small_request_size"] / tsize))
        rec = (
            "Make each H5Dread/H5Dwrite move a large hyperslab: gather what a rank owns in "
            "memory (or buffer several steps) and write it with one call, so that HDF5 and the "
            "file system see few large requests instead of many tiny ones"
        )
        hit = (small > 0) if many else (ops > 0)
        # Calls on a dataset whose chunk cache cannot hold what they touch are
        # slow because of the cache (hdf5-chunk-cache prices that), not because
        # they are small: only the work between them is this finding's.
        thrashed = cache_thrash(ctx, d)[0]
        lost = np.zeros(len(d))
        for rw, moved in (("READ", d["H5D_BYTES_READ"]), ("WRITE", d["H5D_BYTES_WRITTEN"])):
            n_rw = np.maximum(d[f"H5D_{rw}S"], 0)
            small_rw = ctx.small_ops(d, "H5D_SIZE", f"{rw}_AGG") if many else n_rw
            lost += small_request_seconds(ctx, d, "H5D_SIZE", f"{rw}_AGG", small_rw, n_rw,
                                          moved)  # fmt: skip
        lost = np.where(thrashed, 0.0, lost)
        shared = np.fromiter(ctx.shared_ids, np.uint64, len(ctx.shared_ids))
        parents = dataset_files(ctx, d)[hit]
        on_shared = isin(parents, shared) & isin(parents, _mpiio_files(ctx))
        if ctx.trace.job.nprocs > 1 and on_shared.any():
            rec += "; on shared files, make the transfers collective as well"
        evidence: dict[str, float | int | str] = {
            "small_accesses": n_small, "accesses": total, "bytes": nbytes,
            "mean_bytes": round(mean, 1)}  # fmt: skip
        in_calls, outside = io_time(ctx).rows_at_slowest(d, lost), 0.0
        calls = _small_calls(ctx, t["small_request_size"] if many else None,
                             d.file_id[thrashed])  # fmt: skip
        if calls is not None:
            in_calls, outside, n_calls = calls
            if outside > 0:
                evidence["between_calls_seconds"] = round(outside, 6)
                msg += (
                    f" The calls come in a tight loop: {outside:.3g} s pass between "
                    f"{n_calls:,} consecutive calls on the same dataset, per-call work (selection, "
                    "resize, the caller's own indexing) that one call per block does once."
                )
        snippet, lang = in_language(ctx, advice.PY_H5PY_WHOLE_BLOCK,
                                    advice.hdf5_large_selection(nelems),
                                    fortran=advice.FORTRAN_HDF5_WHOLE_BLOCK)  # fmt: skip
        yield price(ctx, self.finding(
            ctx,
            level,
            msg,
            evidence=evidence,
            files=files,
            files_total=n,
            recommendation=rec + ".",
            snippet=snippet,
            snippet_lang=lang,
        ), in_calls, outside=outside)  # fmt: skip


def _small_calls(ctx: Context, limit: float | None,
                 cache_bound: np.ndarray) -> tuple[float, float, int] | None:  # fmt: skip
    """From H5D records, for the slowest rank: seconds in the small calls
    (all calls when ``limit`` is None) less the same bytes at the rate of the
    large calls (or ``default_bandwidth``), seconds in the tight gaps before
    them, and how many such gaps; None without H5D records.  Calls on the
    ``cache_bound`` datasets count only by their gaps.  A gap in which
    the rank did other traced work on the same file (a flush's writes, the
    file or dataset reopened) is not the calls' own: other checks price it."""
    r = _layer_records(ctx, "H5D")
    r = r.select((r.op == OP_READ) | (r.op == OP_WRITE))
    if not len(r):
        return None
    order = np.lexsort((r.start, r.file_id, r.rank))
    rank, fid, start = r.rank[order], r.file_id[order], r.start[order]
    end, length = r.end[order], np.maximum(r.length[order], 0)
    dur = np.maximum(end - start, 0.0)
    small = np.ones(len(r), bool) if limit is None else length < limit
    # The time from the previous call on the same dataset by the same rank.
    gap = np.full(len(r), np.inf)
    same = (rank[1:] == rank[:-1]) & (fid[1:] == fid[:-1])
    gap[1:] = np.where(same, start[1:] - end[:-1], np.inf)
    tight = small & (gap >= 0) & (gap <= ctx.thresholds["call_overhead_gap"])
    if tight.any():
        tight[tight] = ~_busy_between(ctx, rank[tight], fid[tight], start[tight] - gap[tight],
                                      start[tight])  # fmt: skip
    big_t, big_b = float(dur[~small].sum()), float(length[~small].sum())
    rate = big_b / big_t if big_t > 0 and big_b > 0 else float(ctx.thresholds["default_bandwidth"])
    times_ = io_time(ctx)
    at = rank == times_.slowest_rank
    own = small & at & ~isin(fid.astype(np.uint64), cache_bound.astype(np.uint64))
    in_calls = float(dur[own].sum()) - float(length[own].sum()) / rate
    return max(in_calls, 0.0), float(gap[tight & at].sum()), int((tight & at).sum())


def _busy_between(ctx: Context, rank: np.ndarray, dataset: np.ndarray, t0: np.ndarray,
                  t1: np.ndarray) -> np.ndarray:  # fmt: skip
    """Whether ``rank`` started another traced operation on the file of
    ``dataset`` (POSIX on the file, or the dataset opened or closed) between
    ``t0`` and ``t1``: one binary search per interval over the events keyed
    by (rank, file) and time."""
    d = ctx.layer("H5D")
    ids = np.zeros(0, np.uint64)
    parents = ids
    if d is not None:
        ids, first = np.unique(d.file_id, return_index=True)
        parents = dataset_files(ctx, d)[first]

    def file_of(x: np.ndarray) -> np.ndarray:
        k = index_of(ids, x)
        found = gather(parents, k)
        return np.where((k >= 0) & (found != 0), found, x).astype(np.uint64)

    recs, metas = ctx.trace.records, ctx.trace.meta_records
    posix, h5d = RECORD_LAYERS.index("POSIX"), RECORD_LAYERS.index("H5D")
    ev_rank = np.concatenate([recs.rank[recs.layer == posix], metas.rank[metas.layer == posix],
                              metas.rank[metas.layer == h5d]])  # fmt: skip
    ev_file = np.concatenate([recs.file_id[recs.layer == posix],
                              metas.file_id[metas.layer == posix],
                              file_of(metas.file_id[metas.layer == h5d])])  # fmt: skip
    ev_time = np.concatenate([recs.start[recs.layer == posix], metas.start[metas.layer == posix],
                              metas.start[metas.layer == h5d]])  # fmt: skip
    if not len(ev_time):
        return np.zeros(len(t0), bool)
    files = file_of(dataset)
    _, inv = np.unique(np.concatenate([files, ev_file]).astype(np.uint64), return_inverse=True)
    nranks = int(max(rank.max(), ev_rank.max())) + 1
    group = inv * nranks + np.concatenate([rank, ev_rank]).astype(np.int64)
    span = float(max(t1.max(), ev_time.max())) + 1.0
    key = group * span
    n = len(files)
    events = np.sort(key[n:] + ev_time)
    lo = np.searchsorted(events, key[:n] + t0, side="right")
    hi = np.searchsorted(events, key[:n] + t1, side="left")
    return hi > lo


def _mpiio_files(ctx: Context) -> np.ndarray:
    """Files opened through HDF5's MPI-IO driver (H5F_USE_MPIIO, else MPI-IO rows)."""
    f, m = ctx.layer("H5F"), ctx.layer("MPIIO")
    parts = []
    h5f_ids = np.zeros(0, np.uint64)
    if f is not None:
        parts.append(f.file_id[f["H5F_USE_MPIIO"] > 0])
        h5f_ids = unique(f.file_id)
    if m is not None:
        # Without an H5F record, an MPI-IO record of the same file says the same.
        mids = unique(m.file_id)
        parts.append(mids[~isin(mids, h5f_ids)])
    if not parts:
        return np.zeros(0, np.uint64)
    return unique(np.concatenate(parts).astype(np.uint64))


def hdf5_parallel(ctx: Context) -> bool:
    """HDF5 files were opened through the MPI-IO driver, or MPI-IO is in the
    trace at all: only then do MPI-IO transfer and metadata properties apply
    (serial HDF5: H5F_USE_MPIIO 0 and no MPI-IO layer)."""
    return ctx.layer("MPIIO") is not None or len(_mpiio_files(ctx)) > 0


def serial_small_advice(ctx: Context) -> tuple[str, str, str] | None:
    """Advice on small POSIX requests beneath serial HDF5, which has no MPI-IO
    properties to offer: (recommendation tail, snippet, language), or None
    when HDF5 runs over MPI-IO."""
    if hdf5_parallel(ctx):
        return None
    d = ctx.layer("H5D")
    limit = ctx.thresholds["small_request_size"]
    tsize = 8  # doubles, when no dataset says
    if d is not None:
        ops = np.maximum(d["H5D_READS"], 0) + np.maximum(d["H5D_WRITES"], 0)
        moved = np.maximum(d["H5D_BYTES_READ"], 0) + np.maximum(d["H5D_BYTES_WRITTEN"], 0)
        w = int(np.argmax(ops))
        tsize = max(int(d["H5D_DATATYPE_SIZE"][w]), 1)
    if d is not None and ops[w] and moved[w] / ops[w] >= limit:
        # Large dataset accesses cut into small requests: the chunks do it.
        nd = int(d["H5D_DATASPACE_NDIMS"][w])
        dims = _dims(d, w, "H5D_ACCESS1_LENGTH_D", nd, reverse_right=True)
        if not all(x > 0 for x in dims):
            dims = [int(limit // tsize)]
        snippet, lang = in_language(ctx, advice.py_hdf5_chunk(dims, False), advice.hdf5_chunk(dims),
                                    fortran=advice.fortran_hdf5_chunk(dims))  # fmt: skip
        return ("; with serial HDF5 the dataset accesses are large, so the small requests come "
                "from small chunks: give the datasets chunks that hold whole accesses", snippet,
                lang)  # fmt: skip
    snippet, lang = in_language(ctx, advice.PY_H5PY_WHOLE_BLOCK,
                                advice.hdf5_large_selection(max(1, math.ceil(limit / tsize))),
                                fortran=advice.FORTRAN_HDF5_WHOLE_BLOCK)  # fmt: skip
    return ("; with serial HDF5, move whole blocks per H5Dwrite/H5Dread and give the datasets "
            "chunks that hold them", snippet, lang)  # fmt: skip


@check
class Hdf5IndependentTransfers(Check):
    """Parallel HDF5 datasets read or written only with independent transfers.

    Cost: the slowest rank's read and write time on those datasets, the most
    collective transfers could save (an upper bound)."""

    id = "hdf5-independent-transfers"
    layer = "H5D"
    drishti = None
    uses = ("collective_ops",)

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        d = ctx.layer("H5D")
        nprocs = ctx.trace.job.nprocs
        if d is None or nprocs < 2:
            return
        ops = np.maximum(d["H5D_READS"], 0) + np.maximum(d["H5D_WRITES"], 0)
        files = dataset_files(ctx, d)
        shared = np.fromiter(ctx.shared_ids, np.uint64, len(ctx.shared_ids))
        indep = (
            (ops > 0)
            & (d["H5D_USE_MPIIO_COLLECTIVE"] == 0)
            & isin(files, _mpiio_files(ctx))
            & (isin(files, shared) | isin(d.file_id, shared))
        )
        if not indep.any():
            return
        n_ops = int(ops[indep].sum())
        reads, writes = int(d["H5D_READS"][indep].sum()), int(d["H5D_WRITES"][indep].sum())
        ids, sums = per_file(d.file_id[indep], {"ops": ops[indep]})
        per = sums["ops"]
        listed, n_ds = ctx.top_files(ids, per, {"independent reads/writes": per})
        h5_files = unique(files[indep])
        level = Level.HIGH if n_ops > ctx.thresholds["collective_ops"] else Level.WARN
        evidence: dict[str, float | int | str] = {
            "datasets": n_ds, "files": len(h5_files), "reads": reads, "writes": writes,
        }  # fmt: skip
        note = ""
        m = ctx.layer("MPIIO")
        if m is not None:
            on = isin(m.file_id, h5_files)
            coll = sum(int(m[n][on].sum()) for d in DIRECTIONS
                       for n in mpiio_counters(d, MPIIO_COLLECTIVE))  # fmt: skip
            ind = int(m["MPIIO_INDEP_READS"][on].sum() + m["MPIIO_INDEP_WRITES"][on].sum())
            evidence.update(mpiio_independent=ind, mpiio_collective=coll)
            if coll:
                # Collective MPI-IO traffic on the same files contradicts the H5D flag:
                # metadata writes, or a Darshan built without HDF5's parallel API.
                level = Level.INFO
                note = (
                    f" MPI-IO did see {coll:,} collective operations on these files, so some "
                    "transfers may be collective after all (Darshan only sets the flag when it "
                    "can query the transfer property)."
                )
            elif on.any():
                note = f" MPI-IO agrees: {ind:,} independent and no collective operations."
        spent = np.where(indep, times(d, "F_READ_TIME", "F_WRITE_TIME"), 0.0)
        snippet, lang = in_language(ctx, advice.PY_HDF5_COLLECTIVE, advice.HDF5_COLLECTIVE)
        yield price(ctx, self.finding(
            ctx,
            level,
            f"{n_ds} dataset(s) in {len(h5_files)} file(s) opened with the MPI-IO driver by "
            f"{nprocs} ranks are accessed with independent transfers only ({reads:,} reads, "
            f"{writes:,} writes)." + note,
            evidence=evidence,
            files=listed,
            files_total=n_ds,
            recommendation="Pass a dataset-transfer property list set to collective to "
            "H5Dread/H5Dwrite, so that MPI-IO can merge the ranks' pieces into large requests "
            "issued by a few aggregators.",
            snippet=snippet,
            snippet_lang=lang,
        ), io_time(ctx).rows_at_slowest(d, spent))


@check
class Hdf5MetadataReads(Check):
    """Every rank reads the metadata of a shared HDF5 file on its own.

    Cost: the slowest rank's POSIX read time on those files times the share of
    the reads that are small (each read taken to cost the same)."""

    id = "hdf5-metadata-reads"
    layer = "H5F"
    site_ops, site_layers, site_small = ("read",), ("POSIX",), True
    drishti = None
    uses = ("hdf5_meta_read_share",)

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        nprocs = ctx.trace.job.nprocs
        p = ctx.layer("POSIX")
        if p is None or nprocs < 2:
            return
        p = p.select(isin(p.file_id, hdf5_file_ids(ctx)))
        if not len(p):
            return
        small = np.maximum(p["POSIX_SIZE_READ_0_100"], 0) + np.maximum(
            p["POSIX_SIZE_READ_100_1K"], 0
        )
        ids, inv = ctx.file_index(p)
        reduced = group_sum(inv, p.rank == -1, len(ids)) > 0
        openers = np.where(reduced, nprocs, group_sum(inv, p.rank >= 0, len(ids)))
        f_small = group_sum(inv, small, len(ids))
        # Ranks with small reads: exact from per-rank rows or DXT, unknown for
        # reduced rows (Darshan summed them).
        readers = group_sum(inv, (p.rank >= 0) & (small > 0), len(ids))
        exact = ~reduced
        offsets = np.zeros(len(ids), np.int64)  # distinct small-read offsets (DXT only)
        recs = ctx.trace.records
        if len(recs):
            r = _layer_records(ctx, "POSIX")
            k = index_of(ids, r.file_id)
            traced = np.zeros(len(ids), bool)
            traced[k[k >= 0]] = True
            m = (k >= 0) & (r.op == OP_READ) & (r.length < KiB)
            pairs = unique_columns(np.stack([k[m], r.rank[m].astype(np.int64)]))
            readers[traced] = 0
            readers += group_sum(pairs[0], None, len(ids))
            spots = unique_columns(np.stack([k[m], r.offset[m]]))
            offsets += group_sum(spots[0], None, len(ids))
            exact |= traced
        share = readers / np.maximum(openers, 1)
        firm = exact & (readers > 1) & (share >= ctx.thresholds["hdf5_meta_read_share"])
        # A reduced record cannot say which ranks read; at least one small read
        # per rank is consistent with every rank reading the metadata.
        likely = ~exact & (openers > 1) & (f_small >= openers)
        bad = firm | likely
        if not bad.any():
            return
        files, n = ctx.top_files(
            ids, f_small.astype(np.float64),
            {"small reads": f_small, "ranks reading small pieces": np.where(exact, readers, -1),
             "ranks opening": openers},
            bad,
        )  # fmt: skip
        n_small = int(f_small[bad].sum())
        on_bad = bad[inv]
        spent = share_of(direction_time(p, "READ"), np.where(on_bad, small, 0),
                         np.maximum(p["POSIX_READS"], 0))  # fmt: skip
        evidence: dict[str, float | int | str] = {"files": n, "small_reads": n_small}
        if firm.any():
            level = Level.WARN
            w = int(np.argmax(np.where(firm, f_small, -1)))
            evidence.update(ranks_reading=int(readers[w]), ranks_opening=int(openers[w]))
            msg = (
                f"{int(readers[w])} of {int(openers[w])} ranks read small pieces (< 1 KiB) of "
                f"the shared HDF5 file(s) themselves, {n_small:,} small reads in all: each rank "
                "reads the file's metadata independently."
            )
            if offsets[w]:
                evidence["distinct_offsets"] = int(offsets[w])
                msg += f" DXT shows they read only {int(offsets[w])} distinct offsets."
        else:
            level = Level.INFO
            w = int(np.argmax(np.where(likely, f_small, -1)))
            msg = (
                f"HDF5 file(s) opened by all {int(openers[w])} ranks saw {n_small:,} small "
                "reads (< 1 KiB), at least one per rank: probably every rank reads the "
                "metadata itself (the counters are summed over ranks, so this is not certain)."
            )
        rec = ("Let one rank read the metadata and share it: enable collective metadata "
               "operations on the file-access property list (HDF5 1.10 or later).")
        snippet, lang = advice.HDF5_COLLECTIVE_METADATA, "c"
        if not hdf5_parallel(ctx):
            # Serial HDF5 has no collective metadata: share it through MPI.
            rec = ("Let one rank read the metadata and share it: the files are opened with "
                   "serial HDF5, so read it on rank 0 and broadcast it.")
            snippet, lang = in_language(ctx, advice.PY_H5PY_SERIAL_METADATA,
                                        advice.C_HDF5_SERIAL_METADATA)  # fmt: skip
        yield price(ctx, self.finding(
            ctx,
            level,
            msg,
            evidence=evidence,
            files=files,
            files_total=n,
            recommendation=rec,
            snippet=snippet,
            snippet_lang=lang,
        ), io_time(ctx).rows_at_slowest(p, spent))


@check
class Hdf5Alignment(Check):
    """Large requests to HDF5 files start off block or stripe boundaries.

    Cost: the slowest rank's POSIX time in the misaligned requests on those
    files (each request taken to cost the same; an upper bound), on a local
    file system only the extra block each misaligned read fetches
    (see checks/misalign.py)."""

    id = "hdf5-alignment"
    layer = "H5F"
    site_layers = ("POSIX",)
    drishti = None
    uses = ("misaligned_ratio",)

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        p = ctx.layer("POSIX")
        if p is None:
            return
        p = p.select(isin(p.file_id, hdf5_file_ids(ctx)))
        if not len(p):
            return
        ids, inv = ctx.file_index(p)
        rw = np.maximum(p["POSIX_READS"], 0) + np.maximum(p["POSIX_WRITES"], 0)
        ops = group_sum(inv, rw, len(ids))
        bad_n = group_sum(inv, np.maximum(p["POSIX_FILE_NOT_ALIGNED"], 0), len(ids))
        measured = np.zeros(len(ids), np.int64)  # the unit Darshan checked against
        np.maximum.at(measured, inv, p["POSIX_FILE_ALIGNMENT"])
        acc_ids, acc_size, _ = common_access(p)
        size = gather(acc_size, index_of(acc_ids, ids))
        # Align to the Lustre stripe when known: that is the unit that matters.
        stripe = np.zeros(len(ids), np.int64)
        table = ctx.trace.lustre
        if table is not None and len(table):
            lids, first = np.unique(table.file_id, return_index=True)
            stripe = gather(table.stripe_size[first], index_of(lids, ids))
        align = np.where(stripe > 0, stripe, measured)
        share = bad_n / np.maximum(ops, 1)
        bad = (
            (ops > 0)
            & (share > ctx.thresholds["misaligned_ratio"])
            & (size >= 64 * KiB)
            & (align > 0)
        )
        if not bad.any():
            return
        files, n = ctx.top_files(
            ids, bad_n.astype(np.float64),
            {"misaligned": bad_n, "requests": ops, "common request bytes": size,
             "alignment": align},
            bad,
        )  # fmt: skip
        w = int(np.argmax(np.where(bad, bad_n, -1)))
        alignment, req = int(align[w]), int(size[w])
        threshold = max(64 * KiB, req // 2)
        unit = "Lustre stripe" if stripe[w] > 0 else "file-system block"
        named = "" if isin(ids[w], hdf5_file_ids(ctx, by_name=False)) else (
            " (HDF5 by its name: the log has no HDF5 record of it)"
        )
        row_bad = np.where(bad[inv], np.maximum(p["POSIX_FILE_NOT_ALIGNED"], 0), 0)
        spent = misaligned_seconds(ctx, p, row_bad, rw, align[inv])
        snippet, lang = in_language(ctx, advice.py_hdf5_alignment(threshold, alignment),
                                    advice.hdf5_alignment(threshold, alignment),
                                    fortran=advice.fortran_hdf5_alignment(threshold, alignment))
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"{pct(bad_n[w], ops[w]):.1f} % of the POSIX requests to HDF5 file "
            f"{ctx.trace.name(int(ids[w]))}{named} ({int(bad_n[w]):,} of {int(ops[w]):,}) start "
            f"off the {human_size(measured[w])} boundary Darshan checks, while its common "
            f"request is {human_size(req)}: HDF5 packs datasets right after its metadata, "
            f"so large transfers straddle {unit}s"
            + (f" ({n} HDF5 files affected)." if n > 1 else "."),
            evidence={"misaligned": int(bad_n[w]), "requests": int(ops[w]),
                      "common_request": req, "alignment": alignment, "threshold": threshold},
            files=files,
            files_total=n,
            recommendation=f"Ask HDF5 to start every object of {human_size(threshold)} "
            f"or more on a {human_size(alignment)} boundary (the {unit} size), so that "
            "dataset data begins on a boundary and large requests map onto whole blocks.",
            snippet=snippet,
            snippet_lang=lang,
        ), io_time(ctx).rows_at_slowest(p, spent))  # fmt: skip


def _dims(d: Counters, row: int, prefix: str, ndims: int, reverse_right: bool) -> list[int]:
    """Dimensions of one row in C order.

    Darshan stores chunk sizes fastest dimension first from D1, and access
    lengths right-aligned with the slowest dimension in D5.
    """
    vals = [int(d[f"{prefix}{i}"][row]) for i in range(1, 6)]
    n = min(max(ndims, 1), 5)
    if reverse_right:
        return vals[5 - n :][::-1]
    return vals[:n][::-1]


def _c_order(d: Counters, prefix: str, ndims: np.ndarray, right: bool) -> np.ndarray:
    """Per row, the five dimensions in C order (slowest first, 0 past ``ndims``);
    ``right``: the right-aligned layout of access lengths (see :func:`_dims`)."""
    n = np.clip(ndims, 1, 5)
    full = np.stack([d[f"{prefix}{i}"] for i in range(1, 6)], axis=1)
    out = np.zeros((len(d), 5), np.int64)
    rows = np.arange(len(d))
    for k in range(5):
        col = np.full(len(d), 4 - k) if right else np.maximum(n - k - 1, 0)
        out[:, k] = np.where(k < n, full[rows, col], 0)
    return out


def written_extent(ctx: Context, d: Counters) -> np.ndarray:
    """Per H5D row, the elements its dataset holds as far as the trace tells:
    the extent at open, or more when the dataset grew as it was written (a
    dataset created empty and extended each step has 0 at open).

    The bytes moved count a rewrite as often as it happens, so they stand for
    the extent only when the file's extent on POSIX bounds them and still
    exceeds the extent at open by more than ``chunk_min_bytes`` (the file
    also holds HDF5's metadata and the other datasets); without POSIX, only
    for datasets that were empty at open."""
    tsize = np.maximum(d["H5D_DATATYPE_SIZE"], 1)
    ids, inv = ctx.file_index(d)
    moved = np.maximum(
        group_sum(inv, np.maximum(d["H5D_BYTES_WRITTEN"], 0), len(ids)),
        group_sum(inv, np.maximum(d["H5D_BYTES_READ"], 0), len(ids)))[inv]
    at_open = np.zeros(len(ids), np.int64)
    np.maximum.at(at_open, inv, np.maximum(d["H5D_DATASPACE_NPOINTS"], 0))
    at_open = at_open[inv]
    grew = at_open == 0
    p = ctx.layer("POSIX")
    if p is not None:
        fids, finv = ctx.file_index(p)
        size = np.zeros(len(fids), np.int64)
        np.maximum.at(size, finv, np.maximum(p["POSIX_MAX_BYTE_WRITTEN"],
                                             p["POSIX_MAX_BYTE_READ"]) + 1)
        cap = gather(size, index_of(fids, dataset_files(ctx, d)), default=-1)
        known = cap > 0
        moved = np.where(known, np.minimum(moved, cap), moved)
        grew = np.where(known, moved - at_open * tsize > ctx.thresholds["chunk_min_bytes"], grew)
    return np.where(grew, np.maximum(at_open, moved // tsize), at_open)


def _worst_dataset(ctx: Context, d: Counters, bad: np.ndarray, score: np.ndarray,
                   numbers: dict[str, np.ndarray]) -> tuple[list, int, int]:  # fmt: skip
    """The datasets of the ``bad`` rows (one row each) ranked by ``score``,
    with ``numbers`` per dataset; their number; the row of the worst."""
    ids, first = np.unique(d.file_id[bad], return_index=True)
    rows = np.flatnonzero(bad)[first]  # one row per dataset
    files, n = ctx.top_files(ids, score[rows].astype(np.float64),
                             {k: v[rows] for k, v in numbers.items()})  # fmt: skip
    return files, n, int(rows[np.argmax(score[rows])])


def _chunks_per_access(chunk: np.ndarray, access: np.ndarray, cbytes: np.ndarray,
                       abytes: np.ndarray) -> np.ndarray:  # fmt: skip
    """Chunks one typical access touches (at least 1): from the shapes when
    both are known, else from the bytes."""
    shaped = (chunk[:, 0] > 0) & np.all((chunk == 0) | (access > 0), axis=1)
    per_dim = np.where(chunk > 0, -(-np.maximum(access, 1) // np.maximum(chunk, 1)), 1)
    by_shape = np.prod(per_dim, axis=1).astype(np.float64)
    by_bytes = abytes / np.maximum(cbytes, 1)
    return np.maximum(np.where(shaped, by_shape, by_bytes), 1.0)


def suggest_chunk(cdims: list[int], adims: list[int], tsize: int, target: int,
                  extent: int) -> tuple[list[int], str]:  # fmt: skip
    """Chunk dimensions (C order) that hold whole accesses, grown along the
    slowest dimension to ``target`` bytes (rows appended one at a time: many
    rows of the full row), within the ``extent`` elements written and 64 MiB."""
    if adims and all(x > 0 for x in adims):
        dims, why = list(adims), "whole accesses"
    else:
        dims, why = list(cdims), "the old chunk"
    nbytes = int(np.prod(dims)) * tsize
    if nbytes < target:
        grown = dims[0] * math.ceil(target / max(nbytes, 1))
        rest = int(np.prod(dims[1:])) if len(dims) > 1 else 1
        if extent > 0:
            grown = min(grown, max(extent // max(rest, 1), dims[0]))
        if grown > dims[0]:
            why += " grown along the slowest dimension"
        dims[0] = grown
    # Chunks above 64 MiB strain HDF5's chunk cache; halve the slowest dimension.
    while int(np.prod(dims)) * tsize > 64 * 1024 * 1024 and dims[0] > 1:
        dims[0] = (dims[0] + 1) // 2
    return dims, why


@check
class Hdf5Chunking(Check):
    """Chunked HDF5 datasets whose chunks are too small for their accesses.

    The dataset's size is what was written or read, not only its extent at
    open (datasets created empty and extended each step have none then).
    Cost: the slowest rank's HDF5 read and write time on those datasets (the
    library's chunk lookups, index updates and small writes included) times
    the share of chunks beyond one per access: a typical access touching k
    chunks would touch one."""

    id = "hdf5-chunking"
    layer = "H5D"
    drishti = None
    uses = ("chunk_min_bytes", "chunk_access_ratio")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        d = ctx.layer("H5D")
        if d is None:
            return
        t = ctx.thresholds
        chunk = np.stack([d[f"H5D_CHUNK_SIZE_D{i}"] for i in range(1, 6)], axis=1)
        ops = np.maximum(d["H5D_READS"], 0) + np.maximum(d["H5D_WRITES"], 0)
        tsize = np.maximum(d["H5D_DATATYPE_SIZE"], 1)
        points = np.prod(np.where(chunk > 0, chunk, 1), axis=1)
        cbytes = points * tsize
        access = np.maximum(d["H5D_ACCESS1_ACCESS"], 0)  # bytes of the most common access
        extent = written_extent(ctx, d)
        # A chunk that holds the whole dataset is as large as it can usefully be.
        whole = points >= np.maximum(extent, 1)
        small = cbytes < t["chunk_min_bytes"]
        outsized = access > cbytes * t["chunk_access_ratio"]
        bad = (chunk[:, 0] > 0) & (ops > 0) & ~whole & (small | outsized)
        if not bad.any():
            return
        ndims = np.maximum(d["H5D_DATASPACE_NDIMS"], 0)
        cpa = _chunks_per_access(_c_order(d, "H5D_CHUNK_SIZE_D", ndims, right=False),
                                 _c_order(d, "H5D_ACCESS1_LENGTH_D", ndims, right=True),
                                 cbytes, access)  # fmt: skip
        numbers = {"chunk bytes": cbytes, "common access bytes": access, "accesses": ops,
                   "elements written or read": extent}  # fmt: skip
        files, n, w = _worst_dataset(ctx, d, bad, access / cbytes, numbers)
        nd = int(ndims[w])
        cdims = _dims(d, w, "H5D_CHUNK_SIZE_D", nd, reverse_right=False)
        adims = _dims(d, w, "H5D_ACCESS1_LENGTH_D", nd, reverse_right=True)
        target = max(int(access[w]), int(t["chunk_min_bytes"]))
        dims, why = suggest_chunk(cdims, adims, int(tsize[w]), target, int(extent[w]))
        ratio = access[w] / cbytes[w]
        detail = (
            f"a typical access moves {human_size(access[w])}, {ratio:.0f}x a chunk"
            if outsized[w]
            else f"below {human_size(t['chunk_min_bytes'])}"
        )
        at_open = int(d["H5D_DATASPACE_NPOINTS"][w])
        grew = at_open < int(extent[w])
        if grew:
            detail += (f"; the dataset held {at_open:,} elements at open and {int(extent[w]):,} "
                       "were written or read: it grew as it was written")
        if cpa[w] > 1:
            detail += f"; a typical access touches {cpa[w]:,.0f} chunks"
        spent = np.where(bad, times(d, "F_READ_TIME", "F_WRITE_TIME") * (1.0 - 1.0 / cpa), 0.0)
        snippet, lang = in_language(ctx, advice.py_hdf5_chunk(dims, grew), advice.hdf5_chunk(dims),
                                    fortran=advice.fortran_hdf5_chunk(dims))  # fmt: skip
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"{n} chunked dataset(s) use chunks that are too small: "
            f"{ctx.trace.name(int(d.file_id[w]))} has chunks of {cdims} elements "
            f"({human_size(cbytes[w])}), {detail}.",
            evidence={"datasets": n, "chunk_bytes": int(cbytes[w]),
                      "access_bytes": int(access[w]), "chunk_dims": str(cdims),
                      "suggested_dims": str(dims), "elements": int(extent[w]),
                      "chunks_per_access": round(float(cpa[w]), 1)},
            files=files,
            files_total=n,
            recommendation=f"Create the dataset with larger chunks, e.g. {dims} ({why}), so "
            "that one access reads or writes a few whole chunks instead of many small ones; "
            "chunks of a few MiB suit parallel file systems.",
            snippet=snippet,
            snippet_lang=lang,
        ), io_time(ctx).rows_at_slowest(d, spent))  # fmt: skip


# HDF5's chunk cache of a dataset when the program sets none (rdcc_nbytes).
HDF5_DEFAULT_CHUNK_CACHE = 1024 * 1024


def partial_chunks(chunk: np.ndarray, access: np.ndarray, cbytes: np.ndarray,
                   abytes: np.ndarray) -> np.ndarray:  # fmt: skip
    """Per row, whether a typical access covers chunks in part: an access
    length that is no multiple of the chunk's along some dimension (from the
    bytes when the shapes are unknown)."""
    shaped = (chunk[:, 0] > 0) & np.all((chunk == 0) | (access > 0), axis=1)
    by_shape = np.any((chunk > 0) & (access % np.maximum(chunk, 1) != 0), axis=1)
    by_bytes = abytes % np.maximum(cbytes, 1) != 0
    return np.where(shaped, by_shape, by_bytes)


def cache_thrash(ctx: Context, d: Counters) -> tuple[np.ndarray, ...]:
    """Per H5D row: whether its accesses cover chunks in part and touch more
    chunk bytes than the dataset's chunk cache (the noted one, else HDF5's
    1 MiB); with the chunk bytes one access touches, the cache, the chunk
    bytes, the common access bytes and the chunks per access."""
    ndims = np.maximum(d["H5D_DATASPACE_NDIMS"], 0)
    chunk = _c_order(d, "H5D_CHUNK_SIZE_D", ndims, right=False)
    shape = _c_order(d, "H5D_ACCESS1_LENGTH_D", ndims, right=True)
    ops = np.maximum(d["H5D_READS"], 0) + np.maximum(d["H5D_WRITES"], 0)
    tsize = np.maximum(d["H5D_DATATYPE_SIZE"], 1)
    cbytes = np.prod(np.where(chunk > 0, chunk, 1), axis=1) * tsize
    access = np.maximum(d["H5D_ACCESS1_ACCESS"], 0)  # bytes of the most common access
    cpa = _chunks_per_access(chunk, shape, cbytes, access)
    touched = (cpa * cbytes).astype(np.int64)  # chunk bytes one typical access touches
    noted = ctx.trace.job.hdf5_chunk_cache
    cache = np.array([noted.get(int(i), HDF5_DEFAULT_CHUNK_CACHE) for i in d.file_id],
                     np.int64).reshape(len(d))  # fmt: skip
    bad = ((chunk[:, 0] > 0) & (ops > 0) & (access > 0) & (touched > cache)
           & partial_chunks(chunk, shape, cbytes, access))  # fmt: skip
    return bad, touched, cache, cbytes, access, cpa


@check
class Hdf5ChunkCache(Check):
    """Chunked HDF5 datasets whose accesses touch more chunk bytes than the
    chunk cache holds.

    A read or write that covers chunks in part leaves each of them to be
    finished by later accesses; when the chunks one access touches exceed
    the dataset's chunk cache (HDF5's default 1 MiB, unless the trace noted
    another), HDF5 evicts them or bypasses the cache, and every access reads
    and writes pieces of chunks again.  Cost: the slowest rank's HDF5 read
    and write time on those datasets times the share of the touched chunk
    bytes the cache cannot hold."""

    id = "hdf5-chunk-cache"
    layer = "H5D"
    drishti = None
    finds = (
        "HDF5 reads and writes that cover chunks in part and touch more chunk bytes than "
        "the dataset's chunk cache (1 MiB by default); advises a cache that holds them"
    )
    cost = (
        "the slowest rank's HDF5 read and write time on those datasets times the share of "
        "the touched chunk bytes beyond the cache"
    )

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        d = ctx.layer("H5D")
        if d is None:
            return
        ndims = np.maximum(d["H5D_DATASPACE_NDIMS"], 0)
        bad, touched, cache, cbytes, access, cpa = cache_thrash(ctx, d)
        noted = ctx.trace.job.hdf5_chunk_cache
        if not bad.any():
            return
        files, n, w = _worst_dataset(ctx, d, bad, touched / cache,
                                     {"chunk bytes": cbytes, "common access bytes": access,
                                      "chunk bytes per access": touched,
                                      "chunk cache bytes": cache})  # fmt: skip
        nd = int(ndims[w])
        cdims = _dims(d, w, "H5D_CHUNK_SIZE_D", nd, reverse_right=False)
        whose = ("as the trace noted it" if int(d.file_id[w]) in noted
                 else "HDF5's default; the trace noted none")  # fmt: skip
        spent = np.where(bad, times(d, "F_READ_TIME", "F_WRITE_TIME")
                         * (1.0 - cache / np.maximum(touched, 1)), 0.0)  # fmt: skip
        need = 1 << max(int(touched[w]) - 1, 1).bit_length()  # a power of two that holds them
        snippet, lang = in_language(ctx, advice.py_hdf5_chunk_cache(need),
                                    advice.hdf5_chunk_cache(need))  # fmt: skip
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"{n} chunked dataset(s) have a chunk cache too small for their accesses: "
            f"{ctx.trace.name(int(d.file_id[w]))} has chunks of {cdims} elements "
            f"({human_size(cbytes[w])}); a typical access covers {cpa[w]:,.0f} of them in "
            f"part, {human_size(touched[w])} of chunks, more than its chunk cache of "
            f"{human_size(cache[w])} ({whose}), so chunks are evicted or bypass the cache "
            "and each access reads and writes pieces of them again.",
            evidence={"datasets": n, "chunk_bytes": int(cbytes[w]),
                      "access_bytes": int(access[w]), "chunk_dims": str(cdims),
                      "chunks_per_access": round(float(cpa[w]), 1),
                      "chunk_bytes_per_access": int(touched[w]),
                      "chunk_cache_bytes": int(cache[w])},
            files=files,
            files_total=n,
            recommendation=f"Give the dataset a chunk cache that holds every chunk one access "
            f"touches, e.g. {human_size(need)} (H5Pset_chunk_cache on its access list, or "
            "H5Pset_cache on the file's; h5py's rdcc_nbytes), or chunks that accesses cover "
            "whole.",
            snippet=snippet,
            snippet_lang=lang,
        ), io_time(ctx).rows_at_slowest(d, spent))  # fmt: skip
