"""POSIX layer: request sizes, alignment, access order, traffic, balance, metadata."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..model import OP_READ, OP_WRITE, RECORD_LAYERS, Counters, Records
from ..model.aggregate import group_sum, isin
from ..units import human_size
from ..vocabulary import MPIIO_COLLECTIVE, mpiio_counters
from . import advice
from .base import META_OPS, Check, Context, Finding, Level, Operations, check, pct
from .collbuf import aggregated_files
from .hdf5 import hdf5_parallel, serial_small_advice
from .iotime import direction_time, io_time, price, share_of, small_request_seconds, times
from .misalign import misaligned_seconds
from .rankcost import in_language
from .recordtools import chunks
from .stdio import console_ids

RW = {"READ": ("reads", "read"), "WRITE": ("writes", "written")}


def _uses(ctx: Context) -> str:
    """Which interface sits above POSIX, so advice speaks the user's language."""
    if ctx.layer("H5F") is not None or ctx.layer("H5D") is not None:
        return "hdf5"
    if ctx.layer("PNETCDF_FILE") is not None or ctx.layer("PNETCDF_VAR") is not None:
        return "pnetcdf"
    if ctx.layer("MPIIO") is not None:
        return "mpiio"
    return "posix"


def _collective_share(ctx: Context, direction: str) -> float:
    """Share of MPI-IO reads or writes that are collective (0 without MPI-IO)."""
    c = ctx.layer("MPIIO")
    if c is None:
        return 0.0
    coll = sum(c.total(n) for n in mpiio_counters(direction, MPIIO_COLLECTIVE))
    total = sum(c.total(n) for n in mpiio_counters(direction))
    return coll / total if total else 0.0


class _Intensity(Check):
    """Describes the workload; nothing to fix, so nothing at stake (cost 0)."""

    layer = "POSIX"
    uses = ("intensity",)
    kind = "count"
    direction = "WRITE"

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        c = ctx.layer("POSIX")
        if c is None:
            return
        if self.kind == "count":
            r, w = c.total("POSIX_READS"), c.total("POSIX_WRITES")
            unit = "operations"
        else:
            r, w = c.total("POSIX_BYTES_READ"), c.total("POSIX_BYTES_WRITTEN")
            unit = "bytes"
        total = r + w
        mine, other = (w, r) if self.direction == "WRITE" else (r, w)
        if total and mine > other and abs(w - r) / total > ctx.thresholds["intensity"]:
            verb = "write" if self.direction == "WRITE" else "read"
            yield price(ctx, self.finding(
                ctx,
                Level.INFO,
                f"The job is {verb}-intensive by {unit}: {pct(mine, total):.1f} % of POSIX "
                f"{unit} are {verb}s ({mine:,} of {total:,}).",
                evidence={"reads": r, "writes": w},
            ), 0.0)  # fmt: skip


@check
class PosixWriteCountIntensive(_Intensity):
    """Most POSIX operations are writes."""

    id = "posix-write-count-intensive"
    drishti = "P01"
    kind, direction = "count", "WRITE"


@check
class PosixReadCountIntensive(_Intensity):
    """Most POSIX operations are reads."""

    id = "posix-read-count-intensive"
    drishti = "P02"
    kind, direction = "count", "READ"


@check
class PosixWriteSizeIntensive(_Intensity):
    """Most POSIX bytes are written."""

    id = "posix-write-size-intensive"
    drishti = "P03"
    kind, direction = "size", "WRITE"


@check
class PosixReadSizeIntensive(_Intensity):
    """Most POSIX bytes are read."""

    id = "posix-read-size-intensive"
    drishti = "P04"
    kind, direction = "size", "READ"


class _SmallRequests(Check):
    """Cost: the slowest rank's time in small requests minus what the same bytes
    would take at the rate of the job's large POSIX requests of the same
    direction (``default_bandwidth`` without any); see
    :func:`~iopilot.checks.iotime.small_request_seconds`."""

    layer = "POSIX"
    site_small = True  # its call sites: the small requests only
    uses = ("small_request_size", "small_requests_ratio", "small_requests_count",
            "default_bandwidth")
    direction = "READ"
    shared_only = False

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        c = ctx.layer("POSIX")
        if c is None:
            return
        ops_name, _ = RW[self.direction]
        if self.shared_only:
            shared = isin(c.file_id, np.fromiter(ctx.shared_ids, np.uint64))
            if not shared.any():
                return
            c = c.select(shared)
        ops = c[f"POSIX_{ops_name.upper()}"]
        small = ctx.small_ops(c, "POSIX_SIZE", self.direction)
        total, n_small = int(ops.sum()), int(small.sum())
        t = ctx.thresholds
        if not total or n_small / total <= t["small_requests_ratio"]:
            return
        if n_small <= t["small_requests_count"]:
            return
        moved = c["POSIX_BYTES_READ" if self.direction == "READ" else "POSIX_BYTES_WRITTEN"]
        lost = small_request_seconds(ctx, c, "POSIX_SIZE", self.direction, small, ops, moved)
        ids, per = ctx.per_file(c, {"small": small, "ops": ops})
        files, n_files = ctx.top_files(
            ids,
            per["small"],
            {f"small {ops_name}": per["small"], f"all {ops_name}": per["ops"]},
            mask=per["small"] > 0,
        )
        limit = human_size(t["small_request_size"])
        where = "shared files" if self.shared_only else "files"
        style = _uses(ctx)
        if self.direction == "WRITE":
            rec = "Aggregate small writes into large contiguous requests"
        else:
            rec = "Read in large contiguous blocks and serve small pieces from memory"
        reading = self.direction != "WRITE"
        # A read finding gets read code, a Python program Python code.
        snippet, lang = in_language(
            ctx, advice.PY_AGGREGATE_READ if reading else advice.PY_AGGREGATE,
            advice.POSIX_AGGREGATE_READ if reading else advice.POSIX_AGGREGATE,
            fortran=advice.FORTRAN_AGGREGATE_READ if reading else advice.FORTRAN_AGGREGATE,
            cpp=None if reading else advice.CPP_AGGREGATE)
        serial = serial_small_advice(ctx) if style == "hdf5" else None
        if serial is not None:  # serial HDF5 has no MPI-IO transfer properties
            rec += serial[0]
            snippet, lang = serial[1], serial[2]
        elif style == "hdf5":
            rec += (
                "; with HDF5, use collective transfers so MPI-IO merges the pieces, "
                "and set chunk sizes to match the access pattern"
            )
            snippet, lang = in_language(ctx, advice.PY_HDF5_COLLECTIVE, advice.HDF5_COLLECTIVE)
        elif _collective_share(ctx, self.direction) >= 0.5:
            # Collective I/O is already in use, so the small requests come from
            # the aggregators: give them bigger, stripe-aligned buffers.
            rec = (
                "Collective I/O is already in use, yet the aggregators still issue small "
                "requests: enlarge the collective buffer and align file domains to the "
                "file system's stripes"
            )
            snippet, lang = advice.MPIIO_HINTS_CB, "c"
        elif style in ("mpiio", "pnetcdf") or self.shared_only:
            rec += "; with MPI-IO, collective calls let aggregators merge the pieces"
            snippet, lang = _collective_mpiio(ctx, reading)
        yield price(ctx, self.finding(
            ctx,
            Level.HIGH,
            f"{n_small:,} of {total:,} POSIX {ops_name} ({pct(n_small, total):.1f} %) on "
            f"{where} are smaller than {limit}.",
            evidence={f"small_{ops_name}": n_small, ops_name: total},
            files=files,
            files_total=n_files,
            recommendation=rec + ".",
            snippet=snippet,
            snippet_lang=lang,
        ), io_time(ctx).rows_at_slowest(c, lost))


@check
class PosixSmallReads(_SmallRequests):
    """Many small POSIX reads."""

    id = "posix-small-reads"
    drishti = "P05"
    direction = "READ"


@check
class PosixSmallWrites(_SmallRequests):
    """Many small POSIX writes."""

    id = "posix-small-writes"
    drishti = "P06"
    direction = "WRITE"


@check
class PosixSharedSmallReads(_SmallRequests):
    """Many small reads on files shared by ranks."""

    id = "posix-shared-small-reads"
    drishti = "P15"
    direction = "READ"
    shared_only = True


@check
class PosixSharedSmallWrites(_SmallRequests):
    """Many small writes on files shared by ranks."""

    id = "posix-shared-small-writes"
    drishti = "P16"
    direction = "WRITE"
    shared_only = True


class _Misaligned(Check):
    """Cost (file offsets): the slowest rank's time in the misaligned requests,
    each request taken to cost the same; an upper bound, aligning saves part
    of it.  Memory buffers: unknown, the counters do not separate the copies
    a misaligned buffer causes from the rest of the call."""

    layer = "POSIX"
    uses = ("misaligned_ratio",)
    counter = "POSIX_FILE_NOT_ALIGNED"

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        c = ctx.layer("POSIX")
        if c is None:
            return
        ops = c["POSIX_READS"] + c["POSIX_WRITES"]
        bad = c[self.counter]
        total, n_bad = int(ops.sum()), int(bad.sum())
        if not total or n_bad / total <= ctx.thresholds["misaligned_ratio"]:
            return
        ids, per = ctx.per_file(c, {"bad": bad, "ops": ops})
        files, n_files = ctx.top_files(
            ids, per["bad"], {"misaligned": per["bad"], "requests": per["ops"]}, per["bad"] > 0
        )
        memory = self.counter == "POSIX_MEM_NOT_ALIGNED"
        align_col = "POSIX_MEM_ALIGNMENT" if memory else "POSIX_FILE_ALIGNMENT"
        align = int(c[align_col].max()) if len(c) else 0
        evidence = {"misaligned": n_bad, "requests": total, "alignment": align}
        if memory:
            yield price(ctx, self.finding(
                ctx,
                Level.HIGH,
                f"{pct(n_bad, total):.1f} % of POSIX requests ({n_bad:,} of {total:,}) use "
                f"memory buffers not aligned to {align} bytes.",
                evidence=evidence,
                files=files,
                files_total=n_files,
                recommendation="Allocate I/O buffers aligned to the memory page or file-system "
                "block size.",
                snippet="void *buf;\nposix_memalign(&buf, 4096, nbytes);",
                snippet_lang="c",
            ), None, "counters do not separate the cost of misaligned buffers from the calls")
            return
        style = _uses(ctx)
        lustre = ctx.trace.lustre is not None and len(ctx.trace.lustre) > 0
        rec = f"Start requests on {align}-byte boundaries (the file system's alignment unit)"
        snippet, lang = in_language(ctx, advice.PY_ALIGN_OFFSETS, advice.C_ALIGN_OFFSETS,
                                    fortran=advice.FORTRAN_ALIGN_OFFSETS)
        if style == "hdf5":
            rec += "; HDF5 can align its objects for you"
            snippet, lang = advice.hdf5_alignment(max(align, 1), max(align, 1)), "c"
        elif lustre:
            rec += "; on Lustre, make the stripe size a multiple of the request size"
            snippet = advice.lfs_setstripe(4, advice.lfs_size(max(align, 1 << 20)), "DIR")
            lang = "sh"
        elif style in ("mpiio", "pnetcdf"):
            rec += "; collective MPI-IO aligns the aggregators' requests to file domains"
            snippet, lang = advice.MPIIO_HINTS_CB, "c"
        # Honest on local disks: the page cache absorbs misaligned writes there.
        cost = io_time(ctx).rows_at_slowest(c, misaligned_seconds(ctx, c, bad, ops))
        yield price(ctx, self.finding(
            ctx,
            Level.HIGH,
            f"{pct(n_bad, total):.1f} % of POSIX requests ({n_bad:,} of {total:,}) are not "
            f"aligned to the file system's {align}-byte boundary.",
            evidence=evidence,
            files=files,
            files_total=n_files,
            recommendation=rec + ".",
            snippet=snippet,
            snippet_lang=lang,
        ), cost)


@check
class PosixMisalignedMemory(_Misaligned):
    """Requests from misaligned memory buffers."""

    id = "posix-misaligned-memory"
    drishti = "P07"
    counter = "POSIX_MEM_NOT_ALIGNED"


@check
class PosixMisalignedFile(_Misaligned):
    """Requests at misaligned file offsets."""

    id = "posix-misaligned-file"
    drishti = "P08"
    counter = "POSIX_FILE_NOT_ALIGNED"

    def concerns(self, ctx: Context, finding: Finding) -> Operations | None:
        """The POSIX reads and writes at offsets off the alignment (Darshan's
        FILE_NOT_ALIGNED), not those on it."""
        ops = super().concerns(ctx, finding)
        align = int(finding.evidence.get("alignment", 0))
        if ops is None or align <= 0:
            return ops
        r = ctx.trace.records
        posix = RECORD_LAYERS.index("POSIX")
        ops.data = np.empty(len(r), bool)
        for cut in chunks(len(r)):  # no whole column of remainders
            ops.data[cut] = (r.layer[cut] == posix) & (r.offset[cut] % align != 0)
        return ops


class _Redundant(Check):
    """Bytes moved beyond a file's extent must have been moved more than once
    (through POSIX or STDIO).

    Cost: the slowest rank's time in that direction on those files, times the
    share of the file's bytes that were repeats, summed over the layers."""

    layer = "POSIX"
    direction = "READ"
    site_layers = ("POSIX", "STDIO")  # np.fromfile and fread read through STDIO

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        _ops_name, past = RW[self.direction]
        # Through STDIO too (fread, np.fromfile): the same bytes read again
        # that way are the same mistake.
        parts = [self._repeats(ctx, c) for c in (ctx.layer("POSIX"), ctx.layer("STDIO"))
                 if c is not None]  # fmt: skip
        if not parts:
            return
        ids, moved, extent, extra = (np.concatenate([p[k] for p in parts]) for k in range(4))
        cost = sum(p[4] for p in parts)
        mask = extra > 0
        if not mask.any():
            return
        total_extra = int(extra[mask].sum())
        files, n_files = ctx.top_files(
            ids,
            extra,
            {f"bytes {past}": moved, "file extent": extent, "repeated bytes": extra},
            mask,
        )
        verb = "read" if self.direction == "READ" else "written"
        rec = (
            "Read each byte once and share it (e.g. read on one rank and MPI_Bcast, or cache "
            "it in memory)"
            if self.direction == "READ"
            else "Write each byte once: overwriting the same ranges repeatedly costs bandwidth "
            "and, on shared files, lock traffic"
        )
        snippet, lang = "", ""
        if self.direction == "READ":
            parallel = ctx.trace.job.nprocs > 1
            snippet, lang = in_language(
                ctx, advice.PY_READ_ONCE_BCAST if parallel else advice.PY_READ_ONCE,
                advice.C_READ_ONCE_BCAST if parallel else advice.C_READ_ONCE,
                fortran=advice.FORTRAN_READ_ONCE_BCAST if parallel else advice.FORTRAN_READ_ONCE)
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"{human_size(total_extra)} more were {verb} than the files' extents hold, "
            f"on {n_files} file(s): the same bytes were {verb} more than once.",
            drishti_note="Drishti's test for this compares the other way round and misses it",
            evidence={"repeated_bytes": total_extra},
            files=files,
            files_total=n_files,
            recommendation=rec + ".",
            snippet=snippet,
            snippet_lang=lang,
        ), cost)

    def _repeats(self, ctx: Context, c: Counters) -> tuple[np.ndarray, ...]:
        """(file ids, bytes moved, extent, bytes beyond the extent, per file;
        the slowest rank's seconds in them) of one layer's counters."""
        p = c.layer
        d = self.direction
        moved_col = f"{p}_BYTES_READ" if d == "READ" else f"{p}_BYTES_WRITTEN"
        max_col = f"{p}_MAX_BYTE_READ" if d == "READ" else f"{p}_MAX_BYTE_WRITTEN"
        ids, per = ctx.per_file(c, {"moved": c[moved_col]})
        extent = np.zeros(len(ids), np.int64)
        _, inv = ctx.file_index(c)
        np.maximum.at(extent, inv, c[max_col] + 1)
        extra = np.where(per["moved"] > 0, per["moved"] - extent, 0)
        # Console streams have no extent to compare with.
        extra = np.where(isin(ids, console_ids(ctx)), 0, extra)
        row_extra = np.maximum(extra[inv], 0).astype(np.float64)
        cost = io_time(ctx).rows_at_slowest(
            c, share_of(direction_time(c, d), row_extra, per["moved"][inv]))
        return ids, per["moved"], extent, extra, cost


@check
class PosixRedundantReads(_Redundant):
    """The same bytes are read more than once."""

    id = "posix-redundant-reads"
    drishti = "P09"
    direction = "READ"


@check
class PosixRedundantWrites(_Redundant):
    """The same bytes are written more than once."""

    id = "posix-redundant-writes"
    drishti = "P10"
    direction = "WRITE"


def backwards(r: Records, layer: int, op: int) -> np.ndarray:
    """Which records of ``layer`` and ``op`` start before the end of the
    rank's previous one on the same file, in time order: Darshan's requests
    that are not sequential, without each rank's first access to a file."""
    idx = np.flatnonzero((r.layer == layer) & (r.op == op))
    order = idx[np.lexsort((r.start[idx], r.file_id[idx], r.rank[idx]))]
    rank, fid, off = r.rank[order], r.file_id[order], r.offset[order]
    end = off + np.maximum(r.length[order], 0)
    back = (rank[1:] == rank[:-1]) & (fid[1:] == fid[:-1]) & (off[1:] < end[:-1])
    out = np.zeros(len(r), bool)
    out[order[1:][back]] = True
    return out


class _Random(Check):
    """Cost: the slowest rank's time in the random requests, each request of the
    direction taken to cost the same (an upper bound); 0 when they are few."""

    layer = "POSIX"
    uses = ("random_ratio", "random_count")
    direction = "READ"
    ok_code = "P12"

    def concerns(self, ctx: Context, finding: Finding) -> Operations | None:
        """The requests that go backwards, not those in order (their lines
        may take more seconds)."""
        ops = super().concerns(ctx, finding)
        if ops is not None:
            op = OP_READ if self.direction == "READ" else OP_WRITE
            ops.data = backwards(ctx.trace.records, RECORD_LAYERS.index("POSIX"), op)
        return ops

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        c = ctx.layer("POSIX")
        if c is None:
            return
        ops_name, _ = RW[self.direction]
        total = c.total(f"POSIX_{ops_name.upper()}")
        if not total:
            return
        consec = c.total(f"POSIX_CONSEC_{ops_name.upper()}")
        seq = c.total(f"POSIX_SEQ_{ops_name.upper()}") - consec
        # A rank's first access to a file has no previous one to follow: at
        # offset 0 the counters call it neither sequential nor consecutive,
        # yet it goes nowhere backwards (a file written once is not random).
        # (A first access at a later offset counts as sequential already.)
        ops = c[f"POSIX_{ops_name.upper()}"]
        not_seq = np.maximum(ops - c[f"POSIX_SEQ_{ops_name.upper()}"], 0)
        first = np.minimum(not_seq, np.where(c.rank >= 0, 1, max(1, ctx.trace.job.nprocs)))
        random = max(total - consec - seq - int(first.sum()), 0)
        t = ctx.thresholds
        evidence = {"random": random, "sequential": seq, "consecutive": consec,
                    "first_accesses": int(first.sum()), ops_name: total}
        if random / total > t["random_ratio"] and random > t["random_count"]:
            rnd = not_seq - first
            ids, per = ctx.per_file(c, {"random": rnd, "ops": ops})
            files, n = ctx.top_files(
                ids, per["random"], {f"random {ops_name}": per["random"], ops_name: per["ops"]},
                per["random"] > 0,
            )  # fmt: skip
            cost = io_time(ctx).rows_at_slowest(
                c, share_of(direction_time(c, self.direction), np.maximum(rnd, 0), ops))
            yield price(ctx, self.finding(
                ctx,
                Level.HIGH,
                f"{random:,} of {total:,} POSIX {ops_name} ({pct(random, total):.1f} %) go "
                "backwards in the file (random access).",
                evidence=evidence,
                files=files,
                files_total=n,
                recommendation="Sort or batch requests by offset; for reads, prefetch large "
                "blocks; with MPI-IO, collective I/O reorders requests across ranks.",
                **_random_snippet(ctx, self.direction),
            ), cost)
        elif random / total > t["random_ratio"]:
            # Drishti calls this "mostly sequential"; it is random, just too little to matter.
            yield price(ctx, self.finding(
                ctx,
                Level.OK,
                f"{random:,} of {total:,} POSIX {ops_name} are random, too few to matter "
                f"(at most {t['random_count']:,}).",
                drishti=self.ok_code,
                evidence=evidence,
            ), 0.0)
        else:
            yield price(ctx, self.finding(
                ctx,
                Level.OK,
                f"POSIX {ops_name} are mostly in order: {pct(consec, total):.1f} % consecutive "
                f"and {pct(seq, total):.1f} % sequential.",
                drishti=self.ok_code,
                evidence=evidence,
            ), 0.0)


@check
class PosixRandomReads(_Random):
    """POSIX reads in random order."""

    id = "posix-random-reads"
    drishti = "P11"
    direction = "READ"
    ok_code = "P12"


@check
class PosixRandomWrites(_Random):
    """POSIX writes in random order."""

    id = "posix-random-writes"
    drishti = "P13"
    direction = "WRITE"
    ok_code = "P14"


@check
class PosixMetadataTime(Check):
    """Ranks that spend very long in metadata operations.

    A shared-file row (rank -1) sums all ranks: it is divided by the ranks
    before it is compared with the per-rank limit.  Cost: the slowest rank's
    metadata seconds on the files over the limit."""

    id = "posix-metadata-time"
    layer = "POSIX"
    site_ops = META_OPS
    drishti = "P17"
    uses = ("metadata_time_rank",)

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        c = ctx.layer("POSIX")
        if c is None:
            return
        times_ = io_time(ctx)
        meta = times(c, "F_META_TIME")
        per_rank = np.where(c.rank == -1, meta / times_.nprocs, meta)
        slow = per_rank > ctx.thresholds["metadata_time_rank"]
        if not slow.any():
            return
        files, n = ctx.top_files(
            c.file_id, per_rank, {"metadata seconds per rank": per_rank, "rank": c.rank}, slow
        )
        yield price(ctx, self.finding(
            ctx,
            Level.HIGH,
            f"{int(slow.sum())} (file, rank) record(s) spend more than "
            f"{ctx.thresholds['metadata_time_rank']:g} s per rank in metadata operations "
            f"(open, stat, seek, sync), up to {float(per_rank.max()):.1f} s.",
            evidence={"records": int(slow.sum()), "max_seconds": round(float(per_rank.max()), 3)},
            ranks=[int(f.numbers["rank"]) for f in files if int(f.numbers["rank"]) >= 0],
            files=files,
            files_total=n,
            recommendation="Open, stat and close files less often (keep files open, stat once "
            "and share the result); with parallel HDF5, make metadata operations collective.",
            snippet=advice.HDF5_COLLECTIVE_METADATA
            if _uses(ctx) == "hdf5" and hdf5_parallel(ctx) else "",
            snippet_lang="c",
        ), times_.rows_at_slowest(c, np.where(slow, meta, 0.0)))  # fmt: skip


@check
class PosixMetadataShare(Check):
    """Metadata operations take most of the I/O time.

    Judged on the slowest rank: its POSIX metadata seconds (shared-file rows
    spread over the ranks) against its I/O seconds in all layers; at least
    ``metadata_min_time`` seconds, so tiny jobs do not fire.  Cost: those
    metadata seconds."""

    id = "posix-metadata-share"
    layer = "POSIX"
    site_ops = META_OPS
    uses = ("metadata_time_share", "metadata_min_time")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        c = ctx.layer("POSIX")
        if c is None:
            return
        times_ = io_time(ctx)
        meta = times_.rows_at_slowest(c, times(c, "F_META_TIME"))
        io = times_.slowest_seconds
        t = ctx.thresholds
        if meta < t["metadata_min_time"] or not io or meta / io <= t["metadata_time_share"]:
            return
        opens = c.total("POSIX_OPENS")
        stats = c.total("POSIX_STATS")
        files, n = ctx.top_files(
            c.file_id, c["POSIX_F_META_TIME"],
            {"metadata seconds": c["POSIX_F_META_TIME"], "opens": c["POSIX_OPENS"],
             "stats": c["POSIX_STATS"]},
        )  # fmt: skip
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"Metadata operations take {pct(meta, io):.1f} % of the slowest rank's I/O time "
            f"(rank {times_.slowest_rank}: {meta:.2f} of {io:.2f} s; {opens:,} opens, "
            f"{stats:,} stats in all).",
            drishti_note="Drishti only flags single records above 30 s",
            evidence={"metadata_seconds": round(meta, 3), "io_seconds": round(io, 3),
                      "rank": times_.slowest_rank, "opens": opens, "stats": stats},
            ranks=[times_.slowest_rank],
            files=files,
            files_total=n,
            recommendation="Reduce the number of files opened and stat'ed (fewer, larger "
            "files; open once per run, not per step); avoid per-rank stat of shared files.",
        ), meta)  # fmt: skip


class _SharedImbalance(Check):
    """Cost: on each flagged file, the slowest rank's seconds minus the mean
    rank's (the file's time over the ranks), summed over the files."""

    layer = "POSIX"
    uses = ("shared_imbalance",)
    kind = "bytes"

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        c = ctx.layer("POSIX")
        if c is None:
            return
        c = c.select(c.rank == -1)
        if not len(c):
            return
        if self.kind == "bytes":
            slow, fast = c["POSIX_SLOWEST_RANK_BYTES"], c["POSIX_FASTEST_RANK_BYTES"]
            total = (c["POSIX_BYTES_READ"] + c["POSIX_BYTES_WRITTEN"]).astype(np.float64)
        else:
            slow, fast = c["POSIX_F_SLOWEST_RANK_TIME"], c["POSIX_F_FASTEST_RANK_TIME"]
            total = c["POSIX_F_READ_TIME"] + c["POSIX_F_WRITE_TIME"] + c["POSIX_F_META_TIME"]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(total > 0, np.abs(slow - fast) / total, 0.0)
        bad = ratio > ctx.thresholds["shared_imbalance"]
        if not bad.any():
            return
        aggregated = bad & isin(c.file_id, aggregated_files(ctx))
        if (aggregated == bad).all():
            yield _aggregators_note(self, ctx, c.file_id[bad], f"{self.kind} imbalance")
            return
        bad &= ~aggregated
        label = "bytes" if self.kind == "bytes" else "seconds"
        files, n = ctx.top_files(
            c.file_id, ratio,
            {f"slowest rank {label}": slow, f"fastest rank {label}": fast,
             "imbalance %": np.round(100 * ratio, 1)},
            bad,
        )  # fmt: skip
        what = "data" if self.kind == "bytes" else "time"
        spent = times(c, "F_READ_TIME", "F_WRITE_TIME", "F_META_TIME")
        excess = c["POSIX_F_SLOWEST_RANK_TIME"] - spent / io_time(ctx).nprocs
        cost = float(np.maximum(excess[bad], 0.0).sum())
        yield price(ctx, self.finding(
            ctx,
            Level.HIGH,
            f"{n} shared file(s) show a {what} imbalance between the slowest and the fastest "
            f"rank of up to {100 * float(ratio.max()):.1f} % of the file's total: stragglers.",
            evidence={"files": n, "max_imbalance": round(float(ratio.max()), 4)},
            files=files,
            files_total=n,
            recommendation="Give every rank the same amount of data per file, or let collective "
            "I/O balance it through aggregators; on Lustre, check that the stripe count spreads "
            "the file over enough OSTs.",
            snippet=advice.MPIIO_COLLECTIVE_WRITE,
            snippet_lang="c",
        ), cost)


@check
class PosixSharedDataImbalance(_SharedImbalance):
    """Slowest and fastest rank move very different amounts of a shared file."""

    id = "posix-shared-data-imbalance"
    drishti = "P18"
    kind = "bytes"


@check
class PosixSharedTimeImbalance(_SharedImbalance):
    """Slowest and fastest rank spend very different time on a shared file."""

    id = "posix-shared-time-imbalance"
    drishti = "P19"
    kind = "time"


class _RankSizeImbalance(Check):
    """Cost: on each flagged file, the seconds of its busiest rank minus the
    mean of the file's ranks, summed over the files."""

    layer = "POSIX"
    uses = ("rank_size_imbalance",)
    direction = "WRITE"

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        c = ctx.layer("POSIX")
        if c is None:
            return
        c = c.select(c.rank >= 0)
        if not len(c):
            return
        col = c["POSIX_BYTES_WRITTEN" if self.direction == "WRITE" else "POSIX_BYTES_READ"]
        ids, inv, counts = np.unique(c.file_id, return_inverse=True, return_counts=True)
        hi = np.zeros(len(ids), np.int64)
        lo = np.full(len(ids), np.iinfo(np.int64).max, np.int64)
        np.maximum.at(hi, inv, col)
        np.minimum.at(lo, inv, col)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(hi > 0, (hi - lo) / np.maximum(hi, 1), 0.0)
        bad = (counts > 1) & (ratio > ctx.thresholds["rank_size_imbalance"])
        if not bad.any():
            return
        aggregated = bad & isin(ids, aggregated_files(ctx))
        if (aggregated == bad).all():
            yield _aggregators_note(self, ctx, ids[bad], "imbalance of bytes per rank")
            return
        bad &= ~aggregated
        verb = "written" if self.direction == "WRITE" else "read"
        spent = times(c, "F_READ_TIME", "F_WRITE_TIME", "F_META_TIME")
        most = np.zeros(len(ids))
        np.maximum.at(most, inv, spent)
        mean = group_sum(inv, spent, len(ids)) / counts
        cost = float((most - mean)[bad].sum())
        files, n = ctx.top_files(
            ids, ratio,
            {f"max bytes {verb} by a rank": hi, f"min bytes {verb} by a rank": lo,
             "ranks": counts},
            bad,
        )  # fmt: skip
        yield price(ctx, self.finding(
            ctx,
            Level.HIGH,
            f"On {n} file(s) accessed by several ranks, the bytes {verb} per rank differ by up "
            f"to {100 * float(ratio[bad].max()):.1f} % (max - min over max).",
            evidence={"files": n, "max_imbalance": round(float(ratio[bad].max()), 4)},
            files=files,
            files_total=n,
            recommendation="Distribute the data evenly across ranks, or use collective I/O so "
            "aggregators even out the load.",
        ), cost)


@check
class PosixRankWriteImbalance(_RankSizeImbalance):
    """Ranks write very different amounts to the same file."""

    id = "posix-rank-write-imbalance"
    drishti = "P21"
    direction = "WRITE"


@check
class PosixRankReadImbalance(_RankSizeImbalance):
    """Ranks read very different amounts from the same file."""

    id = "posix-rank-read-imbalance"
    drishti = "P22"
    direction = "READ"


def _aggregators_note(chk: Check, ctx: Context, ids: np.ndarray, what: str) -> Finding:
    """The INFO finding of an imbalance that collective buffering explains: the
    files' MPI-IO calls are collective and balanced over the ranks, so the
    aggregator ranks issue all POSIX calls by design (nothing to fix, cost 0)."""
    names = [ctx.trace.name(int(i)) for i in ids[: ctx.max_files]]
    return price(ctx, chk.finding(
        ctx,
        Level.INFO,
        f"The POSIX {what} on {len(ids)} shared file(s) ({', '.join(names[:3])}"
        f"{' ...' if len(ids) > 3 else ''}) is the expected effect of collective buffering: "
        "the ranks' MPI-IO calls are collective and balanced, and the aggregator ranks "
        "issue the file-system calls for all of them.",
        drishti_note="Drishti warns about this imbalance; with collective buffering it is "
        "the aggregators at work, not an unbalanced program",
        evidence={"files": len(ids), "collective_buffering": 1,
                  "drishti_warns": chk.drishti or ""},
    ), 0.0)


def _random_snippet(ctx: Context, direction: str) -> dict[str, str]:
    """Snippet of the random-access advice in the program's language: MPI-IO
    collectives when the program uses MPI-IO, reading in order otherwise."""
    if _uses(ctx) == "mpiio":
        snippet, lang = _collective_mpiio(ctx, direction == "READ")
    elif direction == "READ":
        snippet, lang = in_language(ctx, advice.PY_SORTED_READS, advice.C_SORTED_READS,
                                    fortran=advice.FORTRAN_SORTED_READS)
    else:
        snippet, lang = in_language(ctx, advice.PY_AGGREGATE, advice.POSIX_AGGREGATE,
                                    fortran=advice.FORTRAN_AGGREGATE)
    return {"snippet": snippet, "snippet_lang": lang}


def _collective_mpiio(ctx: Context, reading: bool) -> tuple[str, str]:
    """(snippet, language) of collective MPI-IO reads or writes."""
    if reading:
        return in_language(ctx, advice.PY_MPIIO_COLLECTIVE_READ, advice.MPIIO_COLLECTIVE_READ,
                           fortran=advice.FORTRAN_MPIIO_COLLECTIVE_READ)
    return in_language(ctx, advice.PY_MPIIO_COLLECTIVE_WRITE, advice.MPIIO_COLLECTIVE_WRITE,
                       fortran=advice.FORTRAN_MPIIO_COLLECTIVE_WRITE)
