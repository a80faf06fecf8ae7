"""PnetCDF layer: independent data mode, blocking calls per variable, small requests.

These checks read the per-variable counters (PNETCDF_VAR); logs that only
hold PNETCDF_FILE records (Darshan before 3.4.5) say too little for them.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..model import Counters
from ..model.aggregate import group_sum, isin, per_file, unique_columns
from ..units import human_size
from . import advice
from .base import Check, Context, Finding, Level, check, pct
from .iotime import direction_time, io_time, price, share_of, small_request_seconds, times

_KINDS = ("VAR", "VAR1", "VARA", "VARS", "VARM", "VARN")


def _col(v: Counters, *names: str) -> np.ndarray:
    """Per-row sum of the named counters (negative values, Darshan's 'unknown', as 0)."""
    out = np.zeros(len(v), np.int64)
    for n in names:
        if v.has(n):
            out += np.maximum(v[n], 0)
    return out


def _by_id(ids: np.ndarray, col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uniq, sums = per_file(ids, {"col": col})
    return uniq, sums["col"]


@check
class PnetcdfIndependent(Check):
    """PnetCDF variables read or written in independent data mode.

    Cost: the slowest rank's variable read and write time times the share of
    its accesses that are independent (each access taken to cost the same)."""

    id = "pnetcdf-independent"
    layer = "PNETCDF_VAR"
    site_layers = ("MPIIO",)  # the MPI-IO calls PnetCDF makes for the program's
    drishti = None
    uses = ("collective_share_low",)

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        v = ctx.layer("PNETCDF_VAR")
        nprocs = ctx.trace.job.nprocs
        if v is None or nprocs < 2:
            return
        # Only variables of files several ranks share: a file per process has
        # no partner to be collective with.
        shared = np.fromiter(ctx.shared_ids, np.uint64, len(ctx.shared_ids))
        parent = v.parent_id if v.parent_id is not None else np.zeros(len(v), np.uint64)
        v = v.select(isin(v.file_id, shared) | isin(parent, shared))
        if not len(v):
            return
        ir, iw = _col(v, "PNETCDF_VAR_INDEP_READS"), _col(v, "PNETCDF_VAR_INDEP_WRITES")
        cr, cw = _col(v, "PNETCDF_VAR_COLL_READS"), _col(v, "PNETCDF_VAR_COLL_WRITES")
        indep, coll = int((ir + iw).sum()), int((cr + cw).sum())
        if not indep:
            return
        share = coll / (indep + coll)
        if coll and share >= ctx.thresholds["collective_share_low"]:
            return
        ids, per = _by_id(v.file_id, ir + iw)
        _, per_coll = _by_id(v.file_id, cr + cw)
        files, n = ctx.top_files(
            ids, per, {"independent calls": per, "collective calls": per_coll}, per > 0
        )
        what = (
            "none is collective"
            if not coll
            else f"only {pct(coll, indep + coll):.1f} % are collective ({coll:,})"
        )
        spent = times(v, "F_READ_TIME", "F_WRITE_TIME")
        cost = io_time(ctx).rows_at_slowest(v, share_of(spent, ir + iw, ir + iw + cr + cw))
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"{indep:,} PnetCDF variable accesses on files shared by {nprocs} ranks are "
            f"independent ({int(ir.sum()):,} reads, {int(iw.sum()):,} writes, on {n} "
            f"variable(s)); {what}.",
            evidence={"independent_reads": int(ir.sum()), "independent_writes": int(iw.sum()),
                      "collective": coll, "variables": n},
            files=files,
            files_total=n,
            recommendation="Use the collective API (the *_all calls, e.g. "
            "ncmpi_put_vara_all) in collective data mode, so that PnetCDF hands MPI-IO one "
            "collective request that aggregators turn into large contiguous writes.",
            snippet=advice.PNETCDF_COLLECTIVE,
            snippet_lang="c",
        ), cost)


@check
class PnetcdfBlockingManyVars(Check):
    """Several PnetCDF variables written one blocking call at a time.

    Cost: the slowest rank's variable write time, the most that merging the
    writes into one request per file could save (an upper bound)."""

    id = "pnetcdf-blocking-many-vars"
    layer = "PNETCDF_VAR"
    site_layers = ("MPIIO",)  # the MPI-IO calls PnetCDF makes for the program's
    drishti = None

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        v = ctx.layer("PNETCDF_VAR")
        if v is None:
            return
        writes = _col(v, "PNETCDF_VAR_INDEP_WRITES", "PNETCDF_VAR_COLL_WRITES")
        nonblocking = _col(
            v, "PNETCDF_VAR_NB_WRITES",
            *(f"PNETCDF_VAR_IPUT_{k}" for k in _KINDS),
            *(f"PNETCDF_VAR_BPUT_{k}" for k in _KINDS),
        )  # fmt: skip
        if int(nonblocking.sum()) or not int(writes.sum()):
            return
        _, per_var = _by_id(v.file_id, writes)
        written = per_var > 0
        n_vars = int(written.sum())
        if n_vars < 2:
            return
        calls = int(writes.sum())
        # Group by file: aggregation happens across the variables of one file.
        parent = v.parent_id if v.parent_id is not None else v.file_id
        parent = np.where(parent != 0, parent, v.file_id)
        fids, f_calls = _by_id(parent, writes)
        pairs = unique_columns(np.stack([parent[writes > 0], v.file_id[writes > 0]]))
        f_vars = group_sum(np.searchsorted(fids, pairs[0]), None, len(fids))
        files, n = ctx.top_files(
            fids, f_calls, {"variables written": f_vars, "blocking writes": f_calls},
            f_calls > 0,
        )  # fmt: skip
        yield price(ctx, self.finding(
            ctx,
            Level.INFO,
            f"{n_vars} variables are written with {calls:,} blocking calls and no "
            "non-blocking ones: each call is a separate MPI-IO request.",
            evidence={"variables": n_vars, "blocking_writes": calls, "files": n},
            files=files,
            files_total=n,
            recommendation="Post the writes of all variables with the non-blocking API "
            "(ncmpi_iput_vara_*) and complete them with one ncmpi_wait_all, so that PnetCDF "
            "merges them into a single collective request per file.",
            snippet=advice.PNETCDF_NONBLOCKING,
            snippet_lang="c",
        ), io_time(ctx).rows_at_slowest(v, direction_time(v, "WRITE")))


@check
class PnetcdfSmallRequests(Check):
    """Many small PnetCDF variable reads and writes.

    Cost: as for small POSIX requests, per direction: the small accesses'
    time minus the same bytes at the rate of the job's large accesses."""

    id = "pnetcdf-small-requests"
    layer = "PNETCDF_VAR"
    site_layers, site_small = ("MPIIO",), True
    drishti = None
    uses = ("small_request_size", "small_requests_ratio", "hdf5_small_count", "default_bandwidth")

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        v = ctx.layer("PNETCDF_VAR")
        if v is None:
            return
        prefix = "PNETCDF_VAR_SIZE"
        small_r = ctx.small_ops(v, prefix, "READ_AGG")
        small_w = ctx.small_ops(v, prefix, "WRITE_AGG")
        # All accesses: every histogram bin, so the share is counted like for like.
        bins = [n for n in v.int_names if n.startswith(f"{prefix}_")]
        total = int(_col(v, *bins).sum())
        small = small_r + small_w
        n_small = int(small.sum())
        t = ctx.thresholds
        if not total or n_small / total <= t["small_requests_ratio"]:
            return
        if n_small <= t["hdf5_small_count"]:
            return
        ids, per = _by_id(v.file_id, small)
        _, all_per = _by_id(v.file_id, _col(v, *bins))
        files, n = ctx.top_files(
            ids, per, {"small accesses": per, "accesses": all_per}, per > 0
        )
        limit = human_size(t["small_request_size"])
        lost = np.zeros(len(v))
        for rw, small_d in (("READ", small_r), ("WRITE", small_w)):
            ops = _col(v, *(n for n in bins if n.startswith(f"{prefix}_{rw}_AGG_")))
            moved = _col(v, f"PNETCDF_VAR_BYTES_{'READ' if rw == 'READ' else 'WRITTEN'}")
            lost += small_request_seconds(ctx, v, prefix, f"{rw}_AGG", small_d, ops, moved)
        yield price(ctx, self.finding(
            ctx,
            Level.WARN,
            f"{n_small:,} of {total:,} PnetCDF variable accesses ({pct(n_small, total):.1f} %) "
            f"move less than {limit} ({int(small_r.sum()):,} reads, {int(small_w.sum()):,} "
            "writes).",
            evidence={"small_reads": int(small_r.sum()), "small_writes": int(small_w.sum()),
                      "accesses": total},
            files=files,
            files_total=n,
            recommendation="Access larger subarrays per call, or queue many small requests "
            "with the non-blocking API and complete them together, so that PnetCDF and MPI-IO "
            "issue few large requests.",
            snippet=advice.PNETCDF_NONBLOCKING,
            snippet_lang="c",
        ), io_time(ctx).rows_at_slowest(v, lost))
