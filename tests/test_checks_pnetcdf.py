"""PnetCDF checks: both sides of each threshold, reads kept apart from
writes, and the rows, messages and costs worked out by hand."""

from __future__ import annotations

import pytest

from iopilot.checks import Level
from kit import counters, findings, only, trace


def _file(rank=-1):
    return counters("PNETCDF_FILE", [{"file": 1, "rank": rank, "PNETCDF_FILE_OPENS": 4}])


def _var(file, rank=-1, parent=1, **c):
    return {"file": file, "parent": parent, "rank": rank} | {f"PNETCDF_VAR_{k}": v
                                                             for k, v in c.items()}


def test_independent_share_at_the_threshold_passes():
    # 50 collective of 100: exactly collective_share_low, which is enough.
    half = counters("PNETCDF_VAR", [_var(11, INDEP_WRITES=25, INDEP_READS=25, COLL_WRITES=50)])
    assert findings(trace(_file(), half, nprocs=4), "pnetcdf-independent") == []
    less = counters("PNETCDF_VAR", [_var(11, INDEP_WRITES=26, INDEP_READS=25, COLL_WRITES=49)])
    f = only(findings(trace(_file(), less, nprocs=4), "pnetcdf-independent"), Level.WARN)
    assert f.evidence == {"independent_reads": 25, "independent_writes": 26, "collective": 49,
                          "variables": 1}  # fmt: skip
    assert f.message.startswith(
        "51 PnetCDF variable accesses on files shared by 4 ranks are independent (25 reads, "
        "26 writes, on 1 variable(s)); only 49.0 % are collective (49).")
    assert [(e.path, e.numbers) for e in f.files] == [
        ("/data/file11", {"independent calls": 51, "collective calls": 49})]


def test_independent_collective_reads_count_as_collective():
    v = counters("PNETCDF_VAR", [_var(11, INDEP_WRITES=10, COLL_READS=10)])
    assert findings(trace(_file(), v, nprocs=4), "pnetcdf-independent") == []


def test_independent_cost_is_the_independent_share_of_the_time():
    # Per rank (rows of ranks 0 and 1): 3 independent and 1 collective call, 2 s.
    rows = [_var(11, rank=r, INDEP_WRITES=3, COLL_WRITES=1, F_WRITE_TIME=2.0) for r in (0, 1)]
    f = only(findings(trace(_file(), counters("PNETCDF_VAR", rows), nprocs=2),
                      "pnetcdf-independent"))  # fmt: skip
    assert f.cost_seconds == pytest.approx(1.5)
    assert f.evidence["independent_writes"] == 6 and f.evidence["collective"] == 2


def test_independent_only_on_shared_files():
    # Rank 0's own variable of its own file: nobody to be collective with.
    own = counters("PNETCDF_VAR", [_var(11, rank=0, INDEP_WRITES=16)])
    assert findings(trace(_file(rank=0), own, nprocs=4), "pnetcdf-independent") == []
    # The variable's own record is shared although its file's is not.
    shared_var = counters("PNETCDF_VAR", [_var(11, rank=-1, INDEP_WRITES=16)])
    assert only(findings(trace(_file(rank=0), shared_var, nprocs=4), "pnetcdf-independent"))
    # Two processes at least.
    assert findings(trace(_file(), shared_var, nprocs=1), "pnetcdf-independent") == []
    assert only(findings(trace(_file(), shared_var, nprocs=2), "pnetcdf-independent"))


def test_independent_counts_negative_counters_as_zero():
    v = counters("PNETCDF_VAR", [_var(11, INDEP_WRITES=-1, INDEP_READS=4)])
    f = only(findings(trace(_file(), v, nprocs=4), "pnetcdf-independent"))
    assert f.evidence["independent_writes"] == 0 and f.evidence["independent_reads"] == 4


def test_blocking_needs_two_variables_and_no_nonblocking_call():
    one = counters("PNETCDF_VAR", [_var(11, COLL_WRITES=5), _var(12, COLL_READS=5)])
    assert findings(trace(_file(), one, nprocs=4), "pnetcdf-blocking-many-vars") == []
    two = counters("PNETCDF_VAR", [_var(11, COLL_WRITES=5), _var(12, INDEP_WRITES=2)])
    f = only(findings(trace(_file(), two, nprocs=4), "pnetcdf-blocking-many-vars"), Level.INFO)
    assert f.evidence == {"variables": 2, "blocking_writes": 7, "files": 1}
    assert f.message.startswith(
        "2 variables are written with 7 blocking calls and no non-blocking ones")
    for nb in ("NB_WRITES", "IPUT_VAR1", "BPUT_VARN"):
        with_nb = counters("PNETCDF_VAR", [_var(11, COLL_WRITES=5),
                                           _var(12, INDEP_WRITES=2, **{nb: 1})])  # fmt: skip
        assert findings(trace(_file(), with_nb, nprocs=4), "pnetcdf-blocking-many-vars") == []


def test_blocking_groups_variables_by_file_and_costs_the_write_time():
    rows = [_var(11, parent=1, rank=0, COLL_WRITES=5, F_WRITE_TIME=1.5),
            _var(12, parent=1, rank=0, COLL_WRITES=5, F_WRITE_TIME=0.5),
            _var(21, parent=2, rank=0, COLL_WRITES=1),
            _var(22, parent=0, rank=0, COLL_WRITES=2, F_READ_TIME=9.0)]  # fmt: skip
    tr = trace(counters("PNETCDF_VAR", rows), nprocs=1, names={1: "/data/file1",
                                                                2: "/data/file2"})
    f = only(findings(tr, "pnetcdf-blocking-many-vars"))
    assert f.evidence == {"variables": 4, "blocking_writes": 13, "files": 3}
    # A variable without a parent stands for its own file.
    assert [(e.path, e.numbers) for e in f.files] == [
        ("/data/file1", {"variables written": 2, "blocking writes": 10}),
        ("/data/file22", {"variables written": 1, "blocking writes": 2}),
        ("/data/file2", {"variables written": 1, "blocking writes": 1})]
    assert f.cost_seconds == pytest.approx(2.0)  # the write time only


def _sizes(file=11, **bins):
    return _var(file, **{f"SIZE_{k}": v for k, v in bins.items()})


@pytest.mark.parametrize(("small", "large", "flagged"), [
    (101, 909, False),  # 10 %: not above
    (101, 908, True),
    (100, 0, False),    # all small, but not more than 100
    (101, 0, True),
])  # fmt: skip
def test_small_requests_share_and_count_both_sides(small, large, flagged):
    v = counters("PNETCDF_VAR", [_sizes(WRITE_AGG_0_100=small, WRITE_AGG_1M_4M=large)])
    fs = findings(trace(_file(), v, nprocs=4), "pnetcdf-small-requests")
    assert len(fs) == int(flagged)


def test_small_requests_reads_and_writes_apart():
    v = counters("PNETCDF_VAR", [_sizes(file=11, READ_AGG_100_1K=150, WRITE_AGG_1M_4M=50),
                                 _sizes(file=12, WRITE_AGG_10K_100K=60,
                                        READ_AGG_4M_10M=40)])  # fmt: skip
    f = only(findings(trace(_file(), v, nprocs=4), "pnetcdf-small-requests"), Level.WARN)
    assert f.evidence == {"small_reads": 150, "small_writes": 60, "accesses": 300}
    assert f.message.startswith(
        "210 of 300 PnetCDF variable accesses (70.0 %) move less than 1.0 MiB (150 reads, "
        "60 writes).")
    assert [(e.path, e.numbers) for e in f.files] == [
        ("/data/file11", {"small accesses": 150, "accesses": 200}),
        ("/data/file12", {"small accesses": 60, "accesses": 100})]
