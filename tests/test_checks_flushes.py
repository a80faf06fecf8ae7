"""flush-per-step: flushes and syncs issued over and over, on hand-made models
(both sides of each threshold, time from counters or records, one layer per
file); real programs are in tests/test_hdf5_programs.py."""

from __future__ import annotations

import numpy as np
import pytest

from iopilot.checks import Level, advice
from iopilot.model import RECORD_LAYERS, Records
from iopilot.vocabulary import OP_NAMES
from kit import counters, findings, only, trace

CHECK = "flush-per-step"


def _posix(syncs: int, meta: float, write: float, rank: int = 0, **extra):
    return counters("POSIX", [{"file": 1, "rank": rank, "POSIX_WRITES": syncs,
                               "POSIX_FSYNCS": syncs, "POSIX_F_META_TIME": meta,
                               "POSIX_F_WRITE_TIME": write, **extra}])  # fmt: skip


@pytest.mark.parametrize(("syncs", "flagged"), [(9, False), (10, True)])
def test_count_both_sides(syncs, flagged):
    fs = findings(trace(_posix(syncs, 5.0, 5.0)), CHECK)
    assert len(fs) == int(flagged)


@pytest.mark.parametrize(("write", "flagged"), [(9.0, True), (9.5, False)])
def test_share_of_io_time_both_sides(write, flagged):
    # 1 s of syncs: 10 % of 10 s of I/O is enough, of 10.5 s it is not.
    fs = findings(trace(_posix(20, 1.0, write)), CHECK)
    assert len(fs) == int(flagged)


def test_thresholds_can_be_set():
    assert findings(trace(_posix(9, 5.0, 5.0)), CHECK, flush_count=9)
    assert not findings(trace(_posix(20, 1.0, 9.0)), CHECK, flush_time_share=0.2)


def test_counters_message_evidence_and_cost():
    f = only(findings(trace(_posix(20, 2.0, 8.0)), CHECK), Level.WARN)
    assert f.message.startswith("20 fsync/fdatasync calls on /data/file1, 1 per write: 2 s = "
                                "20 % of the I/O time is spent waiting for flushes")
    assert f.evidence == {"calls": 20, "files": 1, "writes": 20, "flush_seconds": 2.0,
                          "io_share": 0.2, "time_from": "counters"}  # fmt: skip
    # All the syncs but the one a file would keep at its end.
    assert f.cost_seconds == pytest.approx(2.0 - 2.0 / 20)
    assert f.layer == "POSIX" and "fsync(fd);" in f.snippet and f.snippet_lang == "c"


def test_fdatasync_counts_too_and_steps_are_named():
    c = _posix(0, 2.0, 8.0, POSIX_FDSYNCS=10)
    c["POSIX_WRITES"][:] = 40
    f = only(findings(trace(c), CHECK))
    assert f.evidence["calls"] == 10 and "1 every 4.0 writes" in f.message


def test_reduced_rows_count_per_process():
    # 40 syncs summed over 4 ranks: 10 each, enough; 36: 9 each, not.
    assert findings(trace(_posix(40, 2.0, 8.0, rank=-1), nprocs=4), CHECK)
    assert not findings(trace(_posix(36, 2.0, 8.0, rank=-1), nprocs=4), CHECK)


def _meta_records(rows: list[tuple[int, str, str, int, float, float]]) -> Records:
    """(rank, layer, op name, file, start, end) metadata records."""
    col = list(zip(*rows, strict=True))
    n = len(rows)
    return Records(
        rank=np.array(col[0], np.int32),
        layer=np.array([RECORD_LAYERS.index(x) for x in col[1]], np.uint8),
        op=np.array([OP_NAMES.index(x) for x in col[2]], np.uint8),
        file_id=np.array(col[3], np.uint64),
        offset=np.zeros(n, np.int64),
        length=np.zeros(n, np.int64),
        start=np.array(col[4], np.float64),
        end=np.array(col[5], np.float64),
    )


def test_time_from_records_when_present():
    # Counters say 5 s of metadata (opens and seeks too); the 10 syncs took 0.2 s each.
    tr = trace(_posix(10, 5.0, 5.0))
    tr.meta_records = _meta_records([(0, "POSIX", "sync", 1, i, i + 0.2) for i in range(10)])
    f = only(findings(tr, CHECK))
    assert f.evidence["time_from"] == "records" and f.evidence["flush_seconds"] == 2.0
    assert f.cost_seconds == pytest.approx(1.8)


def _h5f(flushes: int, meta: float, open_s: float = 0.0, close_s: float = 0.0, mpiio: int = 0):
    return counters("H5F", [{"file": 1, "rank": 0, "H5F_OPENS": 1, "H5F_FLUSHES": flushes,
                             "H5F_USE_MPIIO": mpiio, "H5F_F_META_TIME": meta,
                             "H5F_F_OPEN_START_TIMESTAMP": 1.0,
                             "H5F_F_OPEN_END_TIMESTAMP": 1.0 + open_s,
                             "H5F_F_CLOSE_START_TIMESTAMP": 9.0,
                             "H5F_F_CLOSE_END_TIMESTAMP": 9.0 + close_s}])  # fmt: skip


def _h5d(writes: int, write_time: float):
    return counters("H5D", [{"file": 11, "parent": 1, "rank": 0, "H5D_WRITES": writes,
                             "H5D_F_WRITE_TIME": write_time}])  # fmt: skip


def test_h5fflush_time_is_the_file_metadata_time_less_open_and_close():
    tr = trace(_h5f(60, 3.0, open_s=0.5, close_s=0.5), _h5d(60, 8.0))
    f = only(findings(tr, CHECK))
    assert f.layer == "H5F" and f.evidence["flush_seconds"] == 2.0
    assert f.message.startswith("60 H5Fflush calls on /data/file1, 1 per write: 2 s = 18 %")
    assert "H5Fflush(file, H5F_SCOPE_LOCAL);" in f.snippet
    # 2 s of the 11 s of I/O are flushes, below 20 %; all 3 s would be above.
    assert not findings(tr, CHECK, flush_time_share=0.2)
    assert findings(trace(_h5f(60, 3.0), _h5d(60, 8.0)), CHECK, flush_time_share=0.2)


def test_one_call_counted_once_at_the_layer_the_program_called():
    # H5Fflush through the MPI-IO driver is also an MPI_File_sync and an fsync.
    mp = counters("MPIIO", [{"file": 1, "rank": 0, "MPIIO_SYNCS": 60, "MPIIO_F_META_TIME": 2.0}])
    tr = trace(_h5f(60, 2.0, mpiio=1), _h5d(60, 8.0), mp, _posix(60, 2.0, 0.0))
    f = only(findings(tr, CHECK))
    assert f.layer == "H5F"
    # MPI_File_sync alone, with fsync beneath it.
    f = only(findings(trace(mp, _posix(60, 2.0, 8.0)), CHECK))
    assert f.layer == "MPIIO" and "MPI_File_sync(fh);" in f.snippet


@pytest.mark.parametrize(("exe", "lang", "text"), [
    ("python3 step.py", "python", "os.fsync(f.fileno())"),
    ("./a.out", "c", "fsync(fd);"),
])  # fmt: skip
def test_advice_in_the_program_language(exe, lang, text):
    tr = trace(_posix(20, 2.0, 8.0))
    tr.job.executable = exe
    f = only(findings(tr, CHECK))
    assert f.snippet_lang == lang and text in f.snippet


def test_fortran_advice():
    tr = trace(_h5f(60, 3.0), _h5d(60, 8.0))
    tr.job.language = "fortran"
    f = only(findings(tr, CHECK))
    assert f.snippet_lang == "fortran" and "h5fflush_f" in f.snippet
    assert f.snippet == advice.flush_once("fortran", "hdf5")


def test_many_ranks_say_the_calls_per_rank():
    rows = [{"file": 1, "rank": r, "POSIX_WRITES": 30, "POSIX_FSYNCS": 30,
             "POSIX_F_META_TIME": 2.0, "POSIX_F_WRITE_TIME": 8.0} for r in range(4)]
    f = only(findings(trace(counters("POSIX", rows), nprocs=4), CHECK))
    assert f.message.startswith("120 fsync/fdatasync calls on /data/file1 (30 per rank), "
                                "1 per write: 2 s = 20 %")
    f = only(findings(trace(_posix(120, 8.0, 32.0, rank=-1), nprocs=4), CHECK))
    assert "(30 per rank)" in f.message
