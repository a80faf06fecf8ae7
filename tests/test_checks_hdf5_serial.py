"""Serial HDF5 (H5F_USE_MPIIO 0, no MPI-IO layer) is never advised MPI-IO
properties (H5Pset_dxpl_mpio, H5Pset_fapl_mpio, collective metadata): every
HDF5 snippet, on hand-made models of a serial and a parallel job."""

from __future__ import annotations

import pytest

from iopilot.checks import Level, advice
from iopilot.checks.base import Context
from iopilot.checks.hdf5 import hdf5_parallel
from iopilot.checks.thresholds import defaults
from kit import counters, findings, only, trace

KiB, MiB = 1024, 1024**2
MPI_PROPERTIES = ("H5Pset_dxpl_mpio", "H5Pset_fapl_mpio", "coll_metadata", "driver=\"mpio\"",
                  "collective")  # fmt: skip


def _h5f(mpiio: int, rank: int = 0):
    return counters("H5F", [{"file": 1, "rank": rank, "H5F_OPENS": 1, "H5F_USE_MPIIO": mpiio}])


def _small_posix(rank: int = 0):
    return counters("POSIX", [{"file": 1, "rank": rank, "POSIX_WRITES": 5000,
                               "POSIX_SIZE_WRITE_1K_10K": 5000, "POSIX_BYTES_WRITTEN": 5000 * 4096,
                               "POSIX_F_META_TIME": 31.0}])  # fmt: skip


def _ds(access: int, n: int = 60):
    """A 3-D dataset of doubles accessed ``n`` times, ``access`` bytes each (64^3 when 2 MiB)."""
    return counters("H5D", [{"file": 11, "parent": 1, "H5D_WRITES": n, "H5D_DATATYPE_SIZE": 8,
                             "H5D_DATASPACE_NDIMS": 3, "H5D_BYTES_WRITTEN": n * access,
                             "H5D_ACCESS1_ACCESS": access, "H5D_ACCESS1_LENGTH_D5": 64,
                             "H5D_ACCESS1_LENGTH_D4": 64,
                             "H5D_ACCESS1_LENGTH_D3": access // (64 * 64 * 8)}])  # fmt: skip


def test_serial_or_parallel():
    def par(*tables):
        return hdf5_parallel(Context(trace(*tables), defaults()))

    assert not par(_h5f(0), _ds(2 * MiB))
    assert par(_h5f(1), _ds(2 * MiB))
    assert par(_h5f(0), counters("MPIIO", [{"file": 1}]))  # MPI-IO in the trace at all
    assert par(_ds(2 * MiB), counters("MPIIO", [{"file": 1}]))  # no H5F record to say


def test_small_writes_under_serial_hdf5_with_large_accesses_get_chunks():
    f = only(findings(trace(_small_posix(), _h5f(0), _ds(2 * MiB)), "posix-small-writes"))
    assert "small chunks" in f.recommendation
    assert f.snippet == advice.hdf5_chunk([64, 64, 64]) and f.snippet_lang == "c"
    assert not any(p in f.snippet for p in MPI_PROPERTIES)


@pytest.mark.parametrize(("exe", "lang", "text"), [
    ("./sim", "c", "H5Dwrite(dset, memtype, memspace, filespace, dxpl, buf);"),
    ("python3 sim.py", "python", "dset[start:start + n] = rows"),
])  # fmt: skip
def test_small_writes_under_serial_hdf5_with_small_accesses_get_whole_blocks(exe, lang, text):
    tr = trace(_small_posix(), _h5f(0), _ds(64 * 64 * 8, n=5000))
    tr.job.executable = exe
    f = only(findings(tr, "posix-small-writes"))
    assert "move whole blocks" in f.recommendation and f.snippet_lang == lang
    assert text in f.snippet and not any(p in f.snippet for p in MPI_PROPERTIES)


def test_small_writes_under_parallel_hdf5_keep_collective_advice():
    f = only(findings(trace(_small_posix(), _h5f(1), _ds(2 * MiB)), "posix-small-writes"))
    assert f.snippet == advice.HDF5_COLLECTIVE


def test_metadata_time_under_serial_hdf5_has_no_mpi_snippet():
    f = only(findings(trace(_small_posix(), _h5f(0)), "posix-metadata-time"), Level.HIGH)
    assert f.snippet == "" and "with parallel HDF5" in f.recommendation
    f = only(findings(trace(_small_posix(), _h5f(1)), "posix-metadata-time"), Level.HIGH)
    assert f.snippet == advice.HDF5_COLLECTIVE_METADATA


def _meta_reads(mpiio: int):
    rows = [{"file": 1, "rank": r, "POSIX_READS": 10, "POSIX_SIZE_READ_0_100": 10}
            for r in range(4)]  # fmt: skip
    h5 = counters("H5F", [{"file": 1, "rank": r, "H5F_USE_MPIIO": mpiio} for r in range(4)])
    return trace(counters("POSIX", rows), h5, nprocs=4)


@pytest.mark.parametrize(("exe", "lang", "text"), [
    ("./sim", "c", "MPI_Bcast(meta"),
    ("python3 sim.py", "python", "comm.bcast(meta, root=0)"),
])  # fmt: skip
def test_metadata_reads_under_serial_hdf5_read_once_and_broadcast(exe, lang, text):
    tr = _meta_reads(0)
    tr.job.executable = exe
    f = only(findings(tr, "hdf5-metadata-reads"))
    assert "serial HDF5" in f.recommendation and f.snippet_lang == lang and text in f.snippet
    assert not any(p in f.snippet for p in MPI_PROPERTIES)
    f = only(findings(_meta_reads(1), "hdf5-metadata-reads"))
    assert f.snippet == advice.HDF5_COLLECTIVE_METADATA


def test_small_dataset_accesses_of_serial_hdf5_are_not_told_to_go_collective():
    d = counters("H5D", [{"file": 11, "parent": 1, "rank": -1, "H5D_WRITES": 500,
                          "H5D_SIZE_WRITE_AGG_0_100": 400, "H5D_SIZE_WRITE_AGG_1M_4M": 100,
                          "H5D_BYTES_WRITTEN": 400 * 50 + 100 * 2 * MiB,
                          "H5D_DATATYPE_SIZE": 8}])  # fmt: skip
    p = counters("POSIX", [{"file": 1, "rank": -1, "POSIX_WRITES": 1}])
    f = only(findings(trace(_h5f(0, rank=-1), d, p, nprocs=4), "hdf5-small-dataset-access"))
    assert "collective" not in f.recommendation
    f = only(findings(trace(_h5f(1, rank=-1), d, p, nprocs=4), "hdf5-small-dataset-access"))
    assert f.recommendation.endswith("; on shared files, make the transfers collective as well.")
