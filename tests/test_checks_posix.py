"""POSIX checks: metadata time per rank, per-rank size imbalance, and the
advice that follows the interface above POSIX (HDF5, PnetCDF, MPI-IO with or
without collective calls), with numbers worked out by hand."""

from __future__ import annotations

import pytest

from iopilot.checks import Level, advice
from kit import counters, findings, only, trace

MiB = 1024**2


# ------------------------------------------------------------ metadata time


def _meta(rows, nprocs=4, *extra):
    return trace(counters("POSIX", rows), *extra, nprocs=nprocs)


def test_metadata_time_per_rank_both_sides_and_shared_rows_divided():
    rows = [{"file": 1, "rank": 0, "POSIX_F_META_TIME": 30.0},  # at the limit: fine
            {"file": 2, "rank": 1, "POSIX_F_META_TIME": 30.5},
            {"file": 3, "rank": -1, "POSIX_F_META_TIME": 124.0},  # 31 s per rank of 4
            {"file": 4, "rank": -1, "POSIX_F_META_TIME": 120.0}]  # 30 s per rank
    f = only(findings(_meta(rows), "posix-metadata-time"), Level.HIGH)
    assert f.evidence == {"records": 2, "max_seconds": 31.0}
    assert f.message.startswith(
        "2 (file, rank) record(s) spend more than 30 s per rank in metadata operations "
        "(open, stat, seek, sync), up to 31.0 s.")
    assert [(e.path, e.numbers) for e in f.files] == [
        ("/data/file3", {"metadata seconds per rank": 31.0, "rank": -1}),
        ("/data/file2", {"metadata seconds per rank": 30.5, "rank": 1})]
    assert f.files_total == 2
    assert f.recommendation.startswith("Open, stat and close files less often")
    assert f.snippet == "" and f.snippet_lang == ""  # no snippet, no language
    # The slowest rank (rank 1: 30.5 s + 31 s of the shared file) loses both.
    assert f.cost_seconds == pytest.approx(61.5)
    assert findings(_meta(rows[:1] + rows[3:]), "posix-metadata-time") == []


def test_metadata_time_rounds_to_milliseconds_and_speaks_hdf5():
    rows = [{"file": 1, "rank": 0, "POSIX_F_META_TIME": 30.12345}]
    h5 = counters("H5F", [{"file": 1, "rank": 0, "H5F_USE_MPIIO": 1}])  # parallel HDF5
    f = only(findings(_meta(rows, 1, h5), "posix-metadata-time"))
    assert f.evidence["max_seconds"] == 30.123
    assert f.snippet == advice.HDF5_COLLECTIVE_METADATA


# --------------------------------------------------------- size imbalance


def test_rank_size_imbalance_of_a_single_byte():
    # Rank 0 wrote 1 byte, rank 1 none: all the difference there is.
    rows = [{"file": 1, "rank": 0, "POSIX_BYTES_WRITTEN": 1},
            {"file": 1, "rank": 1, "POSIX_BYTES_WRITTEN": 0}]
    f = only(findings(trace(counters("POSIX", rows), nprocs=2), "posix-rank-write-imbalance"))
    assert f.evidence == {"files": 1, "max_imbalance": 1.0}
    assert f.recommendation == ("Distribute the data evenly across ranks, or use collective "
                                "I/O so aggregators even out the load.")  # fmt: skip


def test_rank_size_imbalance_cost_counts_metadata_time_and_rounds():
    rows = [{"file": 1, "rank": 0, "POSIX_BYTES_READ": 3, "POSIX_F_READ_TIME": 2.0,
             "POSIX_F_META_TIME": 4.0},
            {"file": 1, "rank": 1, "POSIX_BYTES_READ": 1, "POSIX_F_READ_TIME": 1.0,
             "POSIX_F_META_TIME": 1.0}]  # fmt: skip
    f = only(findings(trace(counters("POSIX", rows), nprocs=2), "posix-rank-read-imbalance"))
    assert f.evidence["max_imbalance"] == 0.6667  # (3 - 1) / 3
    # The busiest rank's 6 s minus the mean of 6 s and 2 s.
    assert f.cost_seconds == pytest.approx(2.0)


# ----------------------------------------------- advice by interface above


def _small_writes(*extra, nprocs=4):
    row = {"file": 1, "rank": -1, "POSIX_WRITES": 2000, "POSIX_SIZE_WRITE_0_100": 2000,
           "POSIX_BYTES_WRITTEN": 2000 * 50}  # fmt: skip
    return only(findings(trace(counters("POSIX", [row]), *extra, nprocs=nprocs),
                         "posix-small-writes"))  # fmt: skip


@pytest.mark.parametrize("layer", ["H5F", "H5D"])
def test_advice_under_hdf5(layer):
    # Parallel HDF5: its files reach MPI-IO (serial: tests/test_checks_hdf5_serial.py).
    f = _small_writes(counters(layer, [{"file": 9, "rank": -1}]),
                      counters("MPIIO", [{"file": 9, "rank": -1}]))
    assert "with HDF5, use collective transfers" in f.recommendation


@pytest.mark.parametrize("layer", ["PNETCDF_FILE", "PNETCDF_VAR"])
def test_advice_under_pnetcdf(layer):
    f = _small_writes(counters(layer, [{"file": 9, "rank": -1}]))
    assert f.recommendation.endswith(
        "; with MPI-IO, collective calls let aggregators merge the pieces.")
    assert f.snippet == advice.MPIIO_COLLECTIVE_WRITE


def test_advice_on_plain_posix():
    f = _small_writes()
    assert f.recommendation == "Aggregate small writes into large contiguous requests."
    assert f.snippet == advice.POSIX_AGGREGATE


@pytest.mark.parametrize(("coll", "indep", "already"), [(50, 50, True), (49, 51, False),
                                                         (0, 0, False)])
def test_advice_when_collective_io_is_already_used(coll, indep, already):
    # Half the MPI-IO writes collective (or more): the aggregators issue the
    # small requests.  The reads, all collective, must not count.
    m = counters("MPIIO", [{"file": 9, "rank": -1, "MPIIO_COLL_WRITES": coll,
                            "MPIIO_INDEP_WRITES": indep, "MPIIO_COLL_READS": 500}])
    f = _small_writes(m)
    if already:
        assert f.recommendation.startswith("Collective I/O is already in use")
        assert f.snippet == advice.MPIIO_HINTS_CB
    else:
        assert "with MPI-IO, collective calls let aggregators merge" in f.recommendation


# ----------------------------------------------------------- metadata share


def _share(meta: float, write: float, **extra):
    row = {"file": 1, "rank": 0, "POSIX_F_META_TIME": meta, "POSIX_F_WRITE_TIME": write,
           "POSIX_OPENS": 5, "POSIX_STATS": 2} | extra  # fmt: skip
    return findings(trace(counters("POSIX", [row]), nprocs=1), "posix-metadata-share")


def test_metadata_share_by_hand():
    f = only(_share(3.12345, 1.0), Level.WARN)
    assert f.evidence == {"metadata_seconds": 3.123, "io_seconds": 4.123, "rank": 0,
                          "opens": 5, "stats": 2}  # fmt: skip
    assert f.message.startswith(
        "Metadata operations take 75.7 % of the slowest rank's I/O time (rank 0: 3.12 of "
        "4.12 s; 5 opens, 2 stats in all).")
    assert f.drishti_note == "Drishti only flags single records above 30 s"
    assert [(e.path, e.numbers) for e in f.files] == [
        ("/data/file1", {"metadata seconds": 3.12345, "opens": 5, "stats": 2})]
    assert f.files_total == 1
    assert f.recommendation == (
        "Reduce the number of files opened and stat'ed (fewer, larger files; open once per "
        "run, not per step); avoid per-rank stat of shared files.")
    assert f.cost_seconds == pytest.approx(3.12345)


def test_metadata_share_both_sides():
    assert _share(2.0, 2.0) == []  # exactly half
    assert only(_share(2.01, 1.99))
    assert only(_share(1.0, 0.5))  # exactly the minimum time counts
    assert _share(0.99, 0.1) == []


def test_redundant_writes_note_drishti():
    row = {"file": 1, "rank": 0, "POSIX_BYTES_WRITTEN": 300, "POSIX_MAX_BYTE_WRITTEN": 99}
    f = only(findings(trace(counters("POSIX", [row])), "posix-redundant-writes"), Level.WARN)
    assert f.evidence == {"repeated_bytes": 200}
    assert f.drishti_note == "Drishti's test for this compares the other way round and misses it"


def test_diagnosis_counts_findings_per_level_and_the_thresholds_that_fired():
    from iopilot.checks import diagnose

    rows = [{"file": 1, "rank": 0, "POSIX_F_META_TIME": 45.0, "POSIX_F_WRITE_TIME": 1.0,
             "POSIX_WRITES": 10, "POSIX_BYTES_WRITTEN": 100}]  # fmt: skip
    d = diagnose(trace(counters("POSIX", rows)),
                 only={"posix-metadata-time", "posix-metadata-share",
                       "posix-write-count-intensive"})  # fmt: skip
    levels = sorted(f.level for f in d.findings)
    assert levels == [Level.INFO, Level.WARN, Level.HIGH]
    assert [d.count(x) for x in (Level.INFO, Level.WARN, Level.HIGH, Level.OK)] == [1, 1, 1, 0]
    # Only WARN and above name their thresholds; the INFO's "intensity" does not.
    assert d.fired_thresholds == {"metadata_min_time": 1.0, "metadata_time_rank": 30.0,
                                  "metadata_time_share": 0.5}  # fmt: skip
