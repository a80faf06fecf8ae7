"""The checks that Drishti also has (STDIO, POSIX, MPI-IO), on tiny models.

Each case is a few counters in and the expected finding out, including the
cases where Drishti is known to be wrong.
"""

from __future__ import annotations

import pytest

from iopilot.checks import REGISTRY, Level
from kit import counters, findings, trace

MiB = 1024 * 1024


def only(fs, level=None):
    assert len(fs) == 1, fs
    if level is not None:
        assert fs[0].level == level, fs[0]
    return fs[0]


def test_every_check_is_described():
    for cls in REGISTRY.values():
        assert cls.id and cls.layer and cls.summary() != cls.id, cls
    codes = [c.drishti for c in REGISTRY.values() if c.drishti]
    assert len(codes) == len(set(codes)), "one primary check per Drishti code"


def test_stdio_share_counts_mpiio_traffic_once():
    posix = counters("POSIX", [{"POSIX_BYTES_WRITTEN": 100 * MiB}])
    mpiio = counters("MPIIO", [{"MPIIO_BYTES_WRITTEN": 100 * MiB}])
    stdio = counters("STDIO", [{"file": 2, "STDIO_BYTES_WRITTEN": 20 * MiB}])
    f = only(findings(trace(posix, mpiio, stdio), "stdio-share"), Level.HIGH)
    # 20 / (20 + 100): the MPI-IO bytes are the same bytes as the POSIX ones.
    assert f.evidence["total_bytes"] == 120 * MiB
    assert "16.7 %" in f.message
    assert f.drishti == "S01"
    low = counters("STDIO", [{"file": 2, "STDIO_BYTES_WRITTEN": 5 * MiB}])
    assert findings(trace(posix, mpiio, low), "stdio-share") == []


def test_small_writes_need_ratio_and_count():
    many = counters("POSIX", [{"POSIX_WRITES": 5000, "POSIX_SIZE_WRITE_0_100": 4000,
                               "POSIX_SIZE_WRITE_1M_4M": 1000}])  # fmt: skip
    f = only(findings(trace(many), "posix-small-writes"), Level.HIGH)
    assert (f.evidence["small_writes"], f.evidence["writes"]) == (4000, 5000)
    assert f.files[0].numbers["small writes"] == 4000
    assert f.drishti == "P06"
    few = counters("POSIX", [{"POSIX_WRITES": 900, "POSIX_SIZE_WRITE_0_100": 900}])
    assert findings(trace(few), "posix-small-writes") == []
    # The small-request size is a threshold: at 100 KiB, 100K-1M requests are large.
    mid = counters("POSIX", [{"POSIX_WRITES": 5000, "POSIX_SIZE_WRITE_100K_1M": 5000}])
    assert findings(trace(mid), "posix-small-writes")
    assert findings(trace(mid), "posix-small-writes", small_request_size=100 * 1024) == []


def test_small_reads_on_shared_files_only():
    rows = [{"file": 7, "rank": -1, "POSIX_READS": 3000, "POSIX_SIZE_READ_100_1K": 3000},
            {"file": 8, "rank": 0, "POSIX_READS": 3000, "POSIX_SIZE_READ_100_1K": 3000}]
    f = only(findings(trace(counters("POSIX", rows), nprocs=4), "posix-shared-small-reads"))
    assert f.evidence["small_reads"] == 3000
    assert [e.path for e in f.files] == ["/data/file7"]


def test_misaligned_file_requests():
    c = counters("POSIX", [{"POSIX_WRITES": 100, "POSIX_FILE_NOT_ALIGNED": 50,
                            "POSIX_FILE_ALIGNMENT": 4096}])  # fmt: skip
    f = only(findings(trace(c), "posix-misaligned-file"), Level.HIGH)
    assert "50.0 %" in f.message and "4096-byte" in f.message
    ok = counters("POSIX", [{"POSIX_WRITES": 100, "POSIX_FILE_NOT_ALIGNED": 10}])
    assert findings(trace(ok), "posix-misaligned-file") == []


def test_redundant_reads_compare_bytes_with_extent():
    # 3 ranks each read the whole 1 MiB file: 2 MiB were read again.
    rows = [{"file": 1, "rank": r, "POSIX_BYTES_READ": MiB, "POSIX_MAX_BYTE_READ": MiB - 1}
            for r in range(3)]  # fmt: skip
    f = only(findings(trace(counters("POSIX", rows), nprocs=3), "posix-redundant-reads"))
    assert f.evidence["repeated_bytes"] == 2 * MiB
    # Sparse access (extent larger than bytes read) is not redundant: the
    # inverted comparison Drishti makes would flag exactly this case.
    sparse = counters("POSIX", [{"POSIX_BYTES_READ": 10, "POSIX_MAX_BYTE_READ": 10 * MiB}])
    assert findings(trace(sparse), "posix-redundant-reads") == []


def test_random_writes_and_the_ok_verdicts():
    rnd = counters("POSIX", [{"POSIX_WRITES": 5000, "POSIX_SEQ_WRITES": 1000,
                              "POSIX_CONSEC_WRITES": 500}])  # fmt: skip
    f = only(findings(trace(rnd), "posix-random-writes"), Level.HIGH)
    assert f.evidence["random"] == 3999  # the first write, at offset 0, is no jump
    seq = counters("POSIX", [{"POSIX_WRITES": 5000, "POSIX_SEQ_WRITES": 4900,
                              "POSIX_CONSEC_WRITES": 4000}])  # fmt: skip
    f = only(findings(trace(seq), "posix-random-writes"), Level.OK)
    assert f.drishti == "P14" and "80.0 % consecutive" in f.message
    # Mostly random but few: OK, and the message must not claim "in order".
    few = counters("POSIX", [{"POSIX_WRITES": 10}])
    f = only(findings(trace(few), "posix-random-writes"), Level.OK)
    assert "random, too few to matter" in f.message


def test_metadata_time_per_record_and_share():
    c = counters("POSIX", [{"file": 1, "rank": 3, "POSIX_F_META_TIME": 45.0,
                            "POSIX_F_WRITE_TIME": 1.0}])  # fmt: skip
    f = only(findings(trace(c), "posix-metadata-time"), Level.HIGH)
    assert f.evidence["records"] == 1 and f.files[0].numbers["rank"] == 3
    f = only(findings(trace(c), "posix-metadata-share"), Level.WARN)
    assert f.evidence["metadata_seconds"] == 45.0
    quick = counters("POSIX", [{"POSIX_F_META_TIME": 0.5, "POSIX_F_WRITE_TIME": 0.1}])
    assert findings(trace(quick), "posix-metadata-share") == []


def test_shared_file_stragglers():
    c = counters("POSIX", [{"rank": -1, "POSIX_BYTES_WRITTEN": 1000,
                            "POSIX_SLOWEST_RANK_BYTES": 400, "POSIX_FASTEST_RANK_BYTES": 100,
                            "POSIX_F_SLOWEST_RANK_TIME": 2.0, "POSIX_F_FASTEST_RANK_TIME": 1.9,
                            "POSIX_F_WRITE_TIME": 10.0}])  # fmt: skip
    f = only(findings(trace(c, nprocs=4), "posix-shared-data-imbalance"), Level.HIGH)
    assert f.evidence["max_imbalance"] == pytest.approx(0.3)
    # Time: |2.0 - 1.9| / 10 = 1 %: balanced.
    assert findings(trace(c, nprocs=4), "posix-shared-time-imbalance") == []


def test_per_rank_write_imbalance():
    rows = [{"file": 5, "rank": r, "POSIX_BYTES_WRITTEN": b} for r, b in enumerate([100, 100, 20])]
    f = only(findings(trace(counters("POSIX", rows), nprocs=3), "posix-rank-write-imbalance"))
    assert f.evidence["max_imbalance"] == pytest.approx(0.8)
    # One rank alone on its file is not an imbalance.
    solo = counters("POSIX", [{"file": 5, "rank": 0, "POSIX_BYTES_WRITTEN": 100}])
    assert findings(trace(solo), "posix-rank-write-imbalance") == []


def test_mpiio_not_used_only_for_parallel_jobs():
    c = counters("POSIX", [{"POSIX_BYTES_WRITTEN": MiB}])
    assert findings(trace(c, nprocs=1), "mpiio-not-used") == []
    f = only(findings(trace(c, nprocs=8), "mpiio-not-used"), Level.WARN)
    assert f.drishti == "M01" and f.evidence["ranks"] == 8


def test_collective_writes_three_verdicts():
    none = counters("MPIIO", [{"MPIIO_INDEP_WRITES": 5000}])
    f = only(findings(trace(none, nprocs=4), "mpiio-collective-writes"), Level.HIGH)
    assert f.drishti == "M03"
    # 7.7 % collective: Drishti says OK; we warn and say so.
    low = counters("MPIIO", [{"MPIIO_COLL_WRITES": 77, "MPIIO_INDEP_WRITES": 923 + 1000}])
    f = only(findings(trace(low, nprocs=4), "mpiio-collective-writes"), Level.WARN)
    assert f.drishti == "M05" and "Drishti" in f.drishti_note
    good = counters("MPIIO", [{"MPIIO_COLL_WRITES": 900, "MPIIO_INDEP_WRITES": 100}])
    assert only(findings(trace(good, nprocs=4), "mpiio-collective-writes"), Level.OK)


def test_blocking_only_when_there_are_operations():
    reads = counters("MPIIO", [{"MPIIO_COLL_READS": 10}])
    f = only(findings(trace(reads), "mpiio-blocking-reads"), Level.WARN)
    assert "MPI_File_iread_at_all" in f.snippet
    assert findings(trace(reads), "mpiio-blocking-writes") == []
    nb = counters("MPIIO", [{"MPIIO_COLL_READS": 10, "MPIIO_NB_READS": 1}])
    assert findings(trace(nb), "mpiio-blocking-reads") == []


def test_aggregators_need_application_hints_and_hosts():
    c = counters("MPIIO", [{"MPIIO_COLL_WRITES": 10}])
    assert findings(trace(c, nprocs=8), "mpiio-aggregators") == []
    hosts = {r: f"n{r // 4}" for r in range(8)}  # 2 nodes
    f = only(findings(trace(c, nprocs=8, hints={"cb_nodes": "16"}, hosts=hosts),
                      "mpiio-aggregators"), Level.WARN)  # fmt: skip
    assert (f.evidence["cb_nodes"], f.evidence["nodes"]) == (16, 2)
    assert f.cost_seconds is None and "aggregator count" in f.evidence["cost_unknown"]
    assert f.drishti == "M09"
    f = only(findings(trace(c, nprocs=8, hints={"cb_nodes": "2"}, hosts=hosts),
                      "mpiio-aggregators"), Level.OK)  # fmt: skip
    assert f.drishti == "M10"


def test_requests_of_exactly_the_small_size_are_not_small():
    """1 MiB requests fall in Darshan's 100K_1M bin (its upper edge is inclusive):
    the most common access sizes tell them from the small ones."""
    exact = {"POSIX_WRITES": 5000, "POSIX_SIZE_WRITE_100K_1M": 5000,
             "POSIX_ACCESS1_ACCESS": MiB, "POSIX_ACCESS1_COUNT": 5000}  # fmt: skip
    assert findings(trace(counters("POSIX", [exact])), "posix-small-writes") == []
    # one byte less is small
    below = dict(exact, POSIX_ACCESS1_ACCESS=MiB - 1)
    assert findings(trace(counters("POSIX", [below])), "posix-small-writes")
    # the same 1 MiB size read as often as written: those can be the reads
    mixed = dict(exact, POSIX_ACCESS1_ACCESS=MiB, POSIX_ACCESS1_COUNT=5000,
                 POSIX_READS=5000, POSIX_SIZE_READ_100K_1M=5000)  # fmt: skip
    assert findings(trace(counters("POSIX", [mixed])), "posix-small-writes")


def test_layer_summary_counts_metadata_operations_of_each_kind():
    from iopilot.checks.engine import summarize

    posix = counters("POSIX", [{"file": 1, "rank": 0, "POSIX_OPENS": 3, "POSIX_STATS": 5,
                                "POSIX_SEEKS": 7, "POSIX_FSYNCS": 2, "POSIX_FDSYNCS": 1}])
    mpiio = counters("MPIIO", [{"file": 1, "rank": -1, "MPIIO_INDEP_OPENS": 4,
                                "MPIIO_COLL_OPENS": 6, "MPIIO_SYNCS": 9}])
    stdio = counters("STDIO", [{"file": 2, "rank": 0, "STDIO_OPENS": 1, "STDIO_FDOPENS": 8,
                                "STDIO_SEEKS": 2, "STDIO_FLUSHES": 3}])  # fmt: skip
    got = {s.layer: (s.opens, s.stats, s.seeks, s.syncs)
           for s in summarize(trace(posix, mpiio, stdio))}  # fmt: skip
    assert got == {"POSIX": (3, 5, 7, 3), "MPI-IO": (10, 0, 0, 9), "STDIO": (1, 0, 2, 3)}


def test_layer_summary_counts_large_and_misaligned_requests():
    """Above 100 KiB means the 100K_1M bin and up, reads and writes alike; the
    10K_100K bin (up to 100 KiB) is not large."""
    from iopilot.checks.engine import summarize

    posix = counters("POSIX", [
        {"file": 1, "rank": 0, "POSIX_SIZE_READ_10K_100K": 100, "POSIX_SIZE_WRITE_10K_100K": 50,
         "POSIX_SIZE_READ_100K_1M": 3, "POSIX_SIZE_WRITE_1M_4M": 5, "POSIX_FILE_NOT_ALIGNED": 7},
        {"file": 2, "rank": 0, "POSIX_SIZE_WRITE_1G_PLUS": 2, "POSIX_SIZE_READ_4M_10M": 1,
         "POSIX_FILE_NOT_ALIGNED": 4}])  # fmt: skip
    stdio = counters("STDIO", [{"file": 3, "rank": 0, "STDIO_WRITES": 9}])
    got = {s.layer: (s.large_requests, s.misaligned) for s in summarize(trace(posix, stdio))}
    assert got == {"POSIX": (11, 11), "STDIO": (0, 0)}


@pytest.mark.parametrize(("check", "direction"), [("posix-small-reads", "READ"),
                                                  ("posix-small-writes", "WRITE")])  # fmt: skip
@pytest.mark.parametrize("exe", ["./sim input.cfg", "/usr/bin/python3 analysis.py"])
def test_small_request_code_fits_the_direction_and_the_language(check, direction, exe):
    ops = "READS" if direction == "READ" else "WRITES"
    c = counters("POSIX", [{"file": 1, "rank": 0, f"POSIX_{ops}": 5000,
                            f"POSIX_SIZE_{direction}_100_1K": 5000}])  # fmt: skip
    tr = trace(c)
    tr.job.executable = exe
    f = only(findings(tr, check), Level.HIGH)
    python = exe.startswith("/usr/bin/python")
    assert f.snippet_lang == ("python" if python else "c")
    code = f.snippet
    if direction == "READ":  # read code for a read finding
        assert ("read(" in code) and "write" not in code
    else:
        assert "write" in code and "read(" not in code
    assert ("import" in code or "with open" in code) == python


def test_small_requests_under_hdf5_in_python_get_h5py_code():
    c = counters("POSIX", [{"file": 1, "rank": 0, "POSIX_WRITES": 5000,
                            "POSIX_SIZE_WRITE_100_1K": 5000}])  # fmt: skip
    # h5py over parallel HDF5 (serial: tests/test_checks_hdf5_serial.py)
    h5f = counters("H5F", [{"file": 1, "rank": 0, "H5F_OPENS": 1, "H5F_USE_MPIIO": 1}])
    tr = trace(c, h5f)
    tr.job.executable = "python3 write.py"
    f = only(findings(tr, "posix-small-writes"), Level.HIGH)
    assert "with dset.collective:" in f.snippet and 'driver="mpio"' in f.snippet
    assert "H5Dwrite_async" not in f.snippet and f.snippet_lang == "python"
