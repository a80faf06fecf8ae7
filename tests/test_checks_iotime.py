"""Time first: the I/O time model, seconds at stake per finding, ordering by
cost, and severity that follows the job's I/O time."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import numpy as np
import pytest

from iopilot.checks import diagnose
from iopilot.checks.base import Finding, Level
from iopilot.checks.engine import cost_order
from iopilot.checks.iotime import SPREAD_MEAN, SPREAD_RANK_TIMES, compute
from iopilot.checks.thresholds import defaults
from iopilot.cli import main
from iopilot.model import Records
from kit import SHARED, counters, findings, records, striping, trace
from test_checks_layers import (
    GiB,
    chunked,
    h5f,
    meta_posix,
    misaligned_posix,
    pfile,
    shared_file,
    slow_posix,
    var,
)

MiB = 1 << 20
needs_shared = pytest.mark.skipif(not SHARED.exists(), reason="shared log corpus not present")


def one(found: list[Finding], check_id: str) -> Finding:
    (f,) = [f for f in found if f.check == check_id]
    return f


# ---------------------------------------------------------------------------
# The model


def _stack(spread: bool):
    """File 1 through MPI-IO (and the POSIX calls it issued), file 2 POSIX only
    on rank 0, file 3 STDIO on rank 3; 4 ranks, 100 s run."""
    mpiio = {"file": 1, "rank": -1, "MPIIO_F_WRITE_TIME": 10.0, "MPIIO_F_META_TIME": 2.0}
    if spread:
        mpiio.update(MPIIO_FASTEST_RANK=1, MPIIO_F_FASTEST_RANK_TIME=1.0,
                     MPIIO_SLOWEST_RANK=2, MPIIO_F_SLOWEST_RANK_TIME=5.0)  # fmt: skip
    tr = trace(
        counters("POSIX", [{"file": 1, "rank": -1, "POSIX_F_WRITE_TIME": 8.0},
                           {"file": 2, "rank": 0, "POSIX_F_READ_TIME": 4.0}]),
        counters("MPIIO", [mpiio]),
        counters("STDIO", [{"file": 3, "rank": 3, "STDIO_F_WRITE_TIME": 0.5}]),
        nprocs=4,
    )  # fmt: skip
    tr.job.runtime = 100.0
    return tr


def test_counters_count_mpiio_not_the_posix_under_it_and_spread_shared_rows():
    m = compute(_stack(spread=True))
    # MPI-IO's 12 s: 1 s on the fastest rank 1, 5 s on the slowest rank 2,
    # the other 6 s evenly on ranks 0 and 3; POSIX's 8 s on file 1 not at all.
    assert m.rank_seconds == pytest.approx([3 + 4, 1, 5, 3 + 0.5])
    d = m.as_dict()
    assert (d["slowest_rank"], d["slowest_rank_seconds"], d["share"]) == (0, 7.0, 0.07)
    assert d["by_layer"]["slowest_rank"] == {"POSIX": 4.0, "MPI-IO": 3.0, "STDIO": 0.0}
    assert d["by_layer"]["all_ranks"] == {"POSIX": 4.0, "MPI-IO": 12.0, "STDIO": 0.5}
    assert d["shared_rows"] == {SPREAD_RANK_TIMES: 1}
    assert d["source"]["MPI-IO"] == "counters"


def test_shared_rows_without_rank_times_are_spread_evenly():
    m = compute(_stack(spread=False))
    assert m.rank_seconds == pytest.approx([3 + 4, 3, 3, 3 + 0.5])
    assert m.as_dict()["shared_rows"] == {SPREAD_MEAN: 1}


def test_inconsistent_rank_times_fall_back_to_the_mean():
    tr = _stack(spread=True)
    tr.counters["MPIIO"]["MPIIO_F_SLOWEST_RANK_TIME"][:] = 20.0  # more than the row's 12 s
    assert compute(tr).rank_seconds == pytest.approx([7, 3, 3, 3.5])


def test_unrecorded_time_does_not_hide_the_layer_below():
    """PnetCDF rows with -1 times (not recorded) leave the file to MPI-IO."""
    tr = _stack(spread=False)
    tr.counters["PNETCDF_FILE"] = counters(
        "PNETCDF_FILE", [{"file": 1, "rank": -1, "PNETCDF_FILE_F_META_TIME": -1.0}])
    assert compute(tr).rank_seconds == pytest.approx([7, 3, 3, 3.5])
    tr.counters["PNETCDF_FILE"]["PNETCDF_FILE_F_META_TIME"][:] = 0.4  # recorded: it counts
    assert compute(tr).rank_seconds == pytest.approx([4 + 0.1, 0.1, 0.1, 0.6])


def _recs() -> Records:
    posix = records([(0, "w", 1, 0, 100, 0.0, 1.0),  # issued by the MPI-IO write below
                     (1, "w", 2, 0, 100, 0.0, 2.0)], "POSIX")  # fmt: skip
    mpiio = records([(0, "w", 1, 0, 100, 0.0, 1.5), (1, "w", 1, 100, 100, 0.0, 0.5)], "MPIIO")
    return Records.concat([posix, mpiio])


def test_records_count_each_operation_once_per_rank():
    m = compute(trace(recs=_recs(), nprocs=2))
    assert m.rank_seconds == pytest.approx([1.5, 0.5 + 2.0])
    assert m.slowest_rank == 1 and m.source == {"POSIX": "records", "MPIIO": "records"}


def test_records_and_counters_are_not_added_twice():
    """Counters of a file the records cover give only its metadata time."""
    posix = counters("POSIX", [{"file": 2, "rank": 1, "POSIX_F_WRITE_TIME": 2.0,
                                "POSIX_F_META_TIME": 0.25}])  # fmt: skip
    m = compute(trace(posix, recs=_recs(), nprocs=2))
    assert m.rank_seconds == pytest.approx([1.5, 0.5 + 2.0 + 0.25])
    assert m.source["POSIX"] == "records and counters"


# ---------------------------------------------------------------------------
# Seconds at stake, one hand-computed fixture per estimate


def _cost(tr, check_id: str, **kw) -> float | None:
    found = findings(tr, check_id, **kw)
    assert found, f"{check_id} did not fire"
    return found[0].cost_seconds


def test_small_writes_cost_their_time_minus_the_large_rate():
    row = {"POSIX_WRITES": 5000, "POSIX_SIZE_WRITE_0_100": 4000, "POSIX_SIZE_WRITE_1M_4M": 1000,
           "POSIX_BYTES_WRITTEN": 4000 * 50 + 1000 * 2 * MiB, "POSIX_F_WRITE_TIME": 5.0}
    # 4 s in small writes; the 1 s of large ones moved 2000 MiB; the small
    # writes' ~50 bytes each would take 200000 B / (2000 MiB/s).
    want = 4.0 - 200_000 / (1000 * 2 * MiB / 1.0)
    assert _cost(trace(counters("POSIX", [row])), "posix-small-writes") == pytest.approx(want)


def test_small_writes_without_large_ones_use_the_default_bandwidth():
    row = {"POSIX_WRITES": 4000, "POSIX_SIZE_WRITE_0_100": 4000, "POSIX_BYTES_WRITTEN": 200_000,
           "POSIX_F_WRITE_TIME": 2.0}  # fmt: skip
    tr = trace(counters("POSIX", [row]))
    assert _cost(tr, "posix-small-writes") == pytest.approx(2.0 - 200_000 / 1024**3)
    assert _cost(tr, "posix-small-writes", default_bandwidth=100_000) == pytest.approx(0.0)


def test_misaligned_file_requests_cost_their_share_and_memory_is_unknown():
    row = {"POSIX_READS": 100, "POSIX_FILE_NOT_ALIGNED": 50, "POSIX_MEM_NOT_ALIGNED": 50,
           "POSIX_F_READ_TIME": 2.0, "POSIX_FILE_ALIGNMENT": 4096}  # fmt: skip
    tr = trace(counters("POSIX", [row]))
    assert _cost(tr, "posix-misaligned-file") == pytest.approx(1.0)
    f = findings(tr, "posix-misaligned-memory")[0]
    assert f.cost_seconds is None and f.evidence["cost_unknown"]


def test_redundant_reads_cost_the_repeated_share():
    row = {"POSIX_BYTES_READ": 300, "POSIX_MAX_BYTE_READ": 99, "POSIX_F_READ_TIME": 3.0}
    assert _cost(trace(counters("POSIX", [row])), "posix-redundant-reads") == pytest.approx(2.0)


def test_random_reads_cost_their_share():
    row = {"POSIX_READS": 5000, "POSIX_SEQ_READS": 1000, "POSIX_CONSEC_READS": 500,
           "POSIX_F_READ_TIME": 10.0}  # fmt: skip
    # 3999 random reads: the first, at offset 0, is no jump
    assert _cost(trace(counters("POSIX", [row])), "posix-random-reads") == pytest.approx(
        10.0 * 3999 / 5000)


def test_metadata_time_is_per_rank_before_the_limit():
    """200 s summed over 4 ranks is 50 s per rank, over the 30 s limit; 100 s
    (25 s per rank) is not, although the sum is."""
    big = counters("POSIX", [{"rank": -1, "POSIX_F_META_TIME": 200.0}])
    assert _cost(trace(big, nprocs=4), "posix-metadata-time") == pytest.approx(50.0)
    small = counters("POSIX", [{"rank": -1, "POSIX_F_META_TIME": 100.0}])
    assert findings(trace(small, nprocs=4), "posix-metadata-time") == []


def test_metadata_share_is_judged_on_the_slowest_rank_with_a_floor():
    def share(meta: float, read: float, nprocs: int = 1, rank: int = 0):
        row = {"rank": rank, "POSIX_F_META_TIME": meta, "POSIX_F_READ_TIME": read}
        return findings(trace(counters("POSIX", [row]), nprocs=nprocs), "posix-metadata-share")

    (f,) = share(3.0, 1.0)
    assert f.cost_seconds == pytest.approx(3.0) and "75.0 %" in f.message
    assert share(3.0, 3.1) == []  # 49 % of the I/O time
    assert share(0.9, 0.1) == []  # 90 %, but under the 1 s floor
    assert share(1.1, 0.1) != []
    # 8 s over 4 ranks is 2 s per rank: the sum alone would mislead.
    (f,) = share(8.0, 1.0, nprocs=4, rank=-1)
    assert f.cost_seconds == pytest.approx(2.0)
    assert share(3.6, 0.0, nprocs=4, rank=-1) == []  # 0.9 s per rank


def test_shared_time_imbalance_costs_slowest_minus_mean():
    row = {"rank": -1, "POSIX_F_READ_TIME": 8.0, "POSIX_FASTEST_RANK": 1,
           "POSIX_F_FASTEST_RANK_TIME": 1.0, "POSIX_SLOWEST_RANK": 2,
           "POSIX_F_SLOWEST_RANK_TIME": 4.0}  # fmt: skip
    tr = trace(counters("POSIX", [row]), nprocs=4)
    assert _cost(tr, "posix-shared-time-imbalance") == pytest.approx(4.0 - 8.0 / 4)


def test_rank_write_imbalance_costs_busiest_minus_mean():
    rows = [{"rank": 0, "POSIX_BYTES_WRITTEN": 1000, "POSIX_F_WRITE_TIME": 3.0},
            {"rank": 1, "POSIX_BYTES_WRITTEN": 100, "POSIX_F_WRITE_TIME": 1.0}]  # fmt: skip
    tr = trace(counters("POSIX", rows), nprocs=2)
    assert _cost(tr, "posix-rank-write-imbalance") == pytest.approx(3.0 - 2.0)


def test_mpiio_independent_and_blocking_writes_cost_their_time():
    rows = [{"MPIIO_INDEP_WRITES": 1500, "MPIIO_COLL_WRITES": 500, "MPIIO_F_WRITE_TIME": 4.0}]
    tr = trace(counters("MPIIO", rows), nprocs=1)
    # 75 % of the calls are independent: 3 of the 4 s.
    assert _cost(tr, "mpiio-collective-writes", collective_ops=1000) == pytest.approx(3.0)
    # Blocking: without records, whether there is computation to overlap is unknown.
    assert _cost(tr, "mpiio-blocking-writes") is None


def test_stdio_share_costs_data_streams_not_the_console():
    rows = [{"file": 5, "STDIO_BYTES_WRITTEN": 1000, "STDIO_F_WRITE_TIME": 0.7},
            {"file": 6, "STDIO_BYTES_WRITTEN": 10, "STDIO_F_WRITE_TIME": 0.3}]  # fmt: skip
    tr = trace(counters("STDIO", rows), names={6: "<STDOUT>"})
    assert _cost(tr, "stdio-share") == pytest.approx(0.7)


def _uneven(times: list[float], nbytes: list[int]):
    rows = [{"file": 10 + r, "rank": r, "POSIX_WRITES": 1, "POSIX_BYTES_WRITTEN": b,
             "POSIX_F_WRITE_TIME": t} for r, (t, b) in enumerate(zip(times, nbytes, strict=True))]
    return trace(counters("POSIX", rows), nprocs=len(times))


def test_rank_zero_funnel_costs_rank0_minus_the_others_mean():
    tr = _uneven([4.0, 1.0, 1.0, 2.0], [1000, 100, 100, 100])
    assert _cost(tr, "rank-zero-heavy") == pytest.approx(4.0 - 4.0 / 3)


def test_unbalanced_ranks_and_stragglers_cost_slowest_minus_mean_or_median():
    tr = _uneven([1.0, 1.0, 1.0, 4.0], [100, 100, 100, 1000])
    assert _cost(tr, "unbalanced-ranks") == pytest.approx(4.0 - 1.75)
    assert _cost(tr, "phase-stragglers") == pytest.approx(4.0 - 1.0)


def test_overlapping_writes_cost_the_overlapping_share():
    # Rank 1 (2 s, the slowest) rewrites 50 of rank 0's 100 bytes; 200 bytes written.
    recs = records([(0, "w", 1, 0, 100, 0.0, 1.0), (1, "w", 1, 50, 100, 1.0, 3.0)])
    f = one(findings(trace(recs=recs, nprocs=2), "overlapping-writes"), "overlapping-writes")
    assert f.evidence["conflict_bytes"] == 50
    assert f.cost_seconds == pytest.approx(2.0 * 50 / 200)


def test_descriptive_findings_cost_nothing_and_no_mpiio_is_unknown():
    row = {"POSIX_WRITES": 10, "POSIX_BYTES_WRITTEN": 10, "POSIX_F_WRITE_TIME": 1.0}
    tr = trace(counters("POSIX", [row]), nprocs=2)
    assert _cost(tr, "posix-write-count-intensive") == 0.0
    f = findings(tr, "mpiio-not-used")[0]
    assert f.cost_seconds is None and "merge" in f.evidence["cost_unknown"]


def test_cost_never_exceeds_the_slowest_ranks_io_and_is_in_the_message():
    row = {"POSIX_READS": 100, "POSIX_FILE_NOT_ALIGNED": 100, "POSIX_F_READ_TIME": 2.0,
           "POSIX_FILE_ALIGNMENT": 4096}  # fmt: skip
    f = findings(trace(counters("POSIX", [row])), "posix-misaligned-file")[0]
    assert f.cost_seconds == pytest.approx(2.0)
    assert "At stake: 2 s, 20.0 % of the run" in f.message  # kit's runs last 10 s


def test_hdf5_costs():
    both = {"H5D_F_READ_TIME": 1.0, "H5D_F_WRITE_TIME": 3.0}
    # Independent transfers: all 4 s of the shared dataset, 1 s per rank.
    ds = counters("H5D", [{"file": 11, "parent": 1, "rank": -1, "H5D_READS": 10,
                           "H5D_WRITES": 10, **both}])  # fmt: skip
    assert _cost(trace(h5f(), ds, nprocs=4), "hdf5-independent-transfers") == pytest.approx(1.0)
    # Small accesses: 400 of 500 writes in 2 s; the 100 large ones moved 200 MiB in 0.4 s.
    ds = counters("H5D", [{"file": 11, "parent": 1, "H5D_WRITES": 500,
                           "H5D_SIZE_WRITE_AGG_0_100": 400, "H5D_SIZE_WRITE_AGG_1M_4M": 100,
                           "H5D_BYTES_WRITTEN": 400 * 50 + 100 * 2 * MiB,
                           "H5D_F_WRITE_TIME": 2.0}])  # fmt: skip
    want = 1.6 - 400 * 50 / (100 * 2 * MiB / 0.4)
    assert _cost(trace(h5f(), ds), "hdf5-small-dataset-access") == pytest.approx(want)
    # Too small chunks: the dataset's 2 s of writes, but for one chunk of the
    # 32 x 16 = 512 each access touches.
    ds = chunked([16, 16], [512, 256], 512 * 256 * 8)
    ds["H5D_F_WRITE_TIME"][:] = 2.0
    assert _cost(trace(h5f(), ds), "hdf5-chunking") == pytest.approx(2.0 * (1 - 1 / 512))


def test_hdf5_costs_on_the_posix_calls_under_hdf5():
    """POSIX time under an HDF5 file is not I/O time of its own (HDF5's is),
    but it is what the problem costs, within the slowest rank's HDF5 time."""
    opened = counters("H5F", [{"file": 1, "rank": -1, "H5F_USE_MPIIO": 1,
                               "H5F_F_META_TIME": 40.0}])  # 10 s per rank, rank 0 first
    posix = meta_posix([5, 5, 5, 5])
    posix["POSIX_F_READ_TIME"][:] = [1.8, 0.9, 0.9, 0.9]  # 5 of rank 0's 9 reads are small
    assert _cost(trace(opened, posix, nprocs=4), "hdf5-metadata-reads") == pytest.approx(1.0)
    p = misaligned_posix()  # 90 of 100 writes misaligned, 4 s
    p["POSIX_F_WRITE_TIME"][:] = 4.0
    f = one(findings(trace(opened, p, nprocs=1), "hdf5-alignment"), "hdf5-alignment")
    assert f.cost_seconds == pytest.approx(3.6)
    f = one(findings(trace(h5f(), p, nprocs=1), "hdf5-alignment"), "hdf5-alignment")
    assert f.cost_seconds == 0.0  # HDF5 recorded no time: nothing at stake


def test_pnetcdf_costs():
    t = {"PNETCDF_VAR_F_READ_TIME": 2.0, "PNETCDF_VAR_F_WRITE_TIME": 2.0}
    # 32 of 48 accesses independent: 2/3 of 4 s, spread over 4 ranks.
    v = counters("PNETCDF_VAR", [var(11, indep_w=16, indep_r=16, coll_w=16, **t)])
    assert _cost(trace(pfile(), v, nprocs=4), "pnetcdf-independent") == pytest.approx(2 / 3)
    # Three variables, 1 s of blocking writes each, over 4 ranks.
    v = counters("PNETCDF_VAR", [var(11 + k, coll_w=5, PNETCDF_VAR_F_WRITE_TIME=1.0)
                                 for k in range(3)])  # fmt: skip
    assert _cost(trace(pfile(), v, nprocs=4), "pnetcdf-blocking-many-vars") == pytest.approx(0.75)
    # 500 small of 600 writes in 6 s; the 100 large moved 200 MiB in 1 s.
    v = counters("PNETCDF_VAR", [var(11, coll_w=600, PNETCDF_VAR_SIZE_WRITE_AGG_0_100=500,
                                     PNETCDF_VAR_SIZE_WRITE_AGG_1M_4M=100,
                                     PNETCDF_VAR_BYTES_WRITTEN=500 * 50 + 100 * 2 * MiB,
                                     PNETCDF_VAR_F_WRITE_TIME=6.0)])  # fmt: skip
    want = (5.0 - 500 * 50 / (100 * 2 * MiB)) / 4
    assert _cost(trace(pfile(), v, nprocs=4), "pnetcdf-small-requests") == pytest.approx(want)


def test_lustre_costs_from_the_bandwidth_ratio():
    # OST 0 holds 2048 of 2148 MiB on 5 OSTs; file 1's 8 s are 1 s per rank.
    p = counters("POSIX", [shared_file(file=1, nbytes=2 * GiB, POSIX_F_WRITE_TIME=8.0),
                           shared_file(file=2, nbytes=100 * MiB, POSIX_F_WRITE_TIME=1.0)])
    lay = striping([(1, MiB, [0]), (2, MiB, [1, 2, 3, 4])])
    want = 1.0 * (1 - 2148 / (5 * 2048))
    assert _cost(trace(p, nprocs=8, lustre=lay), "lustre-ost-imbalance") == pytest.approx(want)
    # OST 4 is 50x slower: its 50 s would take 1 s at the typical rate.
    assert _cost(slow_posix(50.0), "lustre-slow-ost") == pytest.approx(49.0)
    # More stripes, or requests that fit them: the log cannot say.
    one_ost = trace(counters("POSIX", [shared_file()]), nprocs=32, lustre=striping([(1, MiB, [7])]))
    assert _cost(one_ost, "lustre-single-stripe-shared") is None
    odd = counters("POSIX", [shared_file(size=3 * MiB // 2, count=1000)])
    lay = striping([(1, MiB, [0, 1, 2, 3])])
    assert _cost(trace(odd, nprocs=8, lustre=lay), "lustre-stripe-request-mismatch") is None


def test_record_checks_cost_the_overlap_and_the_straggler():
    # Rank 1 (2 s) reads again the 100 bytes rank 0 read: half of the 200 read.
    recs = records([(0, "r", 1, 0, 100, 0.0, 1.0), (1, "r", 1, 0, 100, 1.0, 3.0)])
    f = one(findings(trace(recs=recs, nprocs=2), "overlapping-reads"), "overlapping-reads")
    assert f.evidence["reread_bytes"] == 100 and f.cost_seconds == pytest.approx(1.0)
    # One phase: ranks take 1, 1 and 4 s; the median rank 1 s.
    recs = records([(0, "w", 1, 0, 10, 0.0, 1.0), (1, "w", 2, 0, 10, 0.0, 1.0),
                    (2, "w", 3, 0, 10, 0.0, 4.0)])  # fmt: skip
    tr = trace(recs=recs, nprocs=3)
    assert _cost(tr, "phase-stragglers") == pytest.approx(3.0)
    assert _cost(tr, "io-phases") == 0.0


# ---------------------------------------------------------------------------
# Ordering and severity


def test_order_is_by_cost_then_unknown_costs_by_level():
    def f(check: str, level: Level, cost: float | None) -> Finding:
        return Finding(check, "POSIX", level, "", cost_seconds=cost)

    got = sorted([f("a", Level.HIGH, None), f("b", Level.INFO, 2.0), f("c", Level.WARN, 5.0),
                  f("d", Level.WARN, None), f("e", Level.HIGH, 2.0)], key=cost_order)  # fmt: skip
    assert [x.check for x in got] == ["c", "e", "b", "a", "d"]


def test_diagnose_orders_findings_by_cost():
    row = {"POSIX_READS": 5000, "POSIX_SEQ_READS": 1000, "POSIX_CONSEC_READS": 500,
           "POSIX_FILE_NOT_ALIGNED": 1000, "POSIX_MEM_NOT_ALIGNED": 5000,
           "POSIX_F_READ_TIME": 10.0, "POSIX_FILE_ALIGNMENT": 4096}  # fmt: skip
    d = diagnose(trace(counters("POSIX", [row])))
    costs = [(f.check, f.cost_seconds) for f in d.findings]
    assert costs[:2] == [("posix-random-reads", pytest.approx(10.0 * 3999 / 5000)),
                         ("posix-misaligned-file", pytest.approx(2.0))]  # fmt: skip
    assert costs[-1] == ("posix-misaligned-memory", None)


def _small_writes_job(io_seconds: float, run_seconds: float):
    row = {"POSIX_WRITES": 5000, "POSIX_SIZE_WRITE_0_100": 5000, "POSIX_BYTES_WRITTEN": 5000,
           "POSIX_F_WRITE_TIME": io_seconds}  # fmt: skip
    tr = trace(counters("POSIX", [row]))
    tr.job.runtime = run_seconds
    (f,) = diagnose(tr, defaults(), only={"posix-small-writes"}).findings
    return f


@pytest.mark.parametrize(("io", "run", "level"), [
    (0.99, 10.0, Level.WARN), (1.01, 10.0, Level.HIGH),  # the 1 s limit
    (2.0, 201.0, Level.WARN), (2.0, 199.0, Level.HIGH),  # the 1 % limit
])  # fmt: skip
def test_no_high_finding_when_io_is_small(io, run, level):
    f = _small_writes_job(io, run)
    assert f.level == level
    assert ("downgraded" in f.evidence) == (level == Level.WARN)


def test_io_limits_are_thresholds():
    values = defaults() | {"high_min_io_seconds": 0.5}
    tr = _small_writes_job(0.99, 10.0)  # WARN with the defaults
    assert tr.level == Level.WARN
    row = {"POSIX_WRITES": 5000, "POSIX_SIZE_WRITE_0_100": 5000, "POSIX_BYTES_WRITTEN": 5000,
           "POSIX_F_WRITE_TIME": 0.99}  # fmt: skip
    (f,) = diagnose(trace(counters("POSIX", [row])), values,
                    only={"posix-small-writes"}).findings  # fmt: skip
    assert f.level == Level.HIGH


# ---------------------------------------------------------------------------
# Real logs and a real traced program


@needs_shared
def test_every_corpus_log_has_io_time_and_findings_by_cost(capsys):
    logs = sorted(str(p) for p in SHARED.glob("*.darshan"))
    assert main(["report", *logs, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["reports"]) == len(logs) and doc["errors"] == []
    for r in doc["reports"]:
        it = r["io_time"]
        assert set(it) >= {"slowest_rank_seconds", "slowest_rank", "share", "run_seconds",
                           "by_layer"}, r["source"]  # fmt: skip
        assert it["slowest_rank_seconds"] >= 0
        assert it["share"] is None or 0 <= it["share"] <= 1
        costs = [f["cost_seconds"] for f in r["findings"]]
        known = [c for c in costs if c is not None]
        assert known == sorted(known, reverse=True), r["source"]
        assert costs == known + [None] * (len(costs) - len(known)), r["source"]
        assert all(c <= it["slowest_rank_seconds"] + 1e-6 for c in known), r["source"]


@needs_shared
def test_mpiio_time_counts_in_the_share_of_the_run():
    """treddy's 32-rank MPI-IO test: 9.4 of its 14 s are MPI-IO on rank 23,
    which counting POSIX and STDIO alone would miss."""
    from iopilot.sources import load

    log = next(SHARED.glob("treddy_mpi-io-test_*.darshan"))
    d = compute(load(str(log))).as_dict()
    assert d["slowest_rank"] == 23
    assert d["by_layer"]["slowest_rank"]["MPI-IO"] == pytest.approx(9.39, abs=0.01)
    assert d["share"] == pytest.approx(0.67, abs=0.01)


def test_traced_python_doing_nothing_has_no_high_finding(tmp_path):
    out = tmp_path / "trace"
    run = subprocess.run([sys.executable, "-m", "iopilot", "run", "--trace-dir", str(out),
                          "--trace-only", "--", sys.executable, "-c", "pass"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    doc = json.loads(subprocess.run([sys.executable, "-m", "iopilot", "report", str(out),
                                     "--json"], capture_output=True, text=True,
                                    timeout=120).stdout)  # fmt: skip
    (r,) = doc["reports"]
    assert r["io_time"]["slowest_rank_seconds"] < 1.0
    assert r["counts"]["HIGH"] == 0
    assert all(f["level"] != "HIGH" for f in r["findings"])


def test_terminal_and_csv_show_time_first(capsys):
    from iopilot.demo import example_dir

    log = str(example_dir() / "ior_hdf5_example.darshan")
    assert main(["report", log, "--color", "never"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("  I/O time  ") and "on the slowest rank (rank " in lines[1]
    assert lines[2].startswith("  job ")
    assert main(["report", log, "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    costs = [r["cost_seconds"] for r in rows if r["check"] != "incomplete-data"]
    known = [float(c) for c in costs if c]
    assert known and known == sorted(known, reverse=True)
    assert costs == costs[: len(known)] + [""] * (len(costs) - len(known))


def _spread(n: int, fr: int, sr: int, ft: float, st: float, total=(2.0, 1.0, 1.0)):
    from iopilot.checks.iotime import IoTime

    rd, wr, meta = total
    c = counters("POSIX", [{"file": 1, "rank": -1, "POSIX_F_READ_TIME": rd,
                            "POSIX_F_WRITE_TIME": wr, "POSIX_F_META_TIME": meta,
                            "POSIX_FASTEST_RANK": fr, "POSIX_SLOWEST_RANK": sr,
                            "POSIX_F_FASTEST_RANK_TIME": ft,
                            "POSIX_F_SLOWEST_RANK_TIME": st}])  # fmt: skip
    m = IoTime(nprocs=n, run_seconds=10.0, per_rank={}, source={}, spread={})
    return m.spread_rows(c, np.array([rd + wr + meta])).tolist()


def test_shared_rows_follow_the_fastest_and_slowest_rank_times_when_they_fit():
    # 4 s in all over 4 ranks: rank 2 fastest with 0.4 s, rank 3 slowest with
    # 2 s; the other 1.6 s evenly over ranks 0 and 1.
    assert _spread(4, 2, 3, 0.4, 2.0) == pytest.approx([0.8, 0.8, 0.4, 2.0])
    assert _spread(4, 0, 3, 1.0, 3.0) == pytest.approx([1.0, 0.0, 0.0, 3.0])  # sums to all
    assert _spread(3, 0, 2, 1.0, 2.0) == pytest.approx([1.0, 1.0, 2.0])  # rank n-1 is a rank


@pytest.mark.parametrize(("n", "fr", "sr", "ft", "st"), [
    (2, 0, 1, 1.0, 3.0),  # two ranks: nothing between fastest and slowest to spread
    (4, 3, 3, 1.0, 2.0),  # the same rank both
    (4, 0, 4, 1.0, 2.0),  # a slowest rank past the job's
    (4, 4, 0, 1.0, 2.0),  # a fastest rank past the job's
    (4, -1, 2, 1.0, 2.0),
    (4, 0, -1, 1.0, 2.0),
    (4, 0, 1, 2.0, 1.0),  # fastest slower than slowest
    (4, 0, 1, 1.0, 3.1),  # more than the total
    (4, 0, 1, -0.5, 2.0),
    (4, 0, 1, 0.0, 0.0),  # no slowest time
])  # fmt: skip
def test_shared_rows_that_do_not_fit_are_spread_evenly(n, fr, sr, ft, st):
    assert _spread(n, fr, sr, ft, st) == pytest.approx([4.0 / n] * n)


def test_shared_rows_without_time_are_spread_evenly():
    assert _spread(4, 0, 1, 0.0, 0.0, total=(0.0, 0.0, 0.0)) == [0.0] * 4
