"""HDF5 checks: both sides of each threshold and the evidence worked out by
hand (small/tiny dataset accesses, independent transfers, metadata reads,
alignment)."""

from __future__ import annotations

import numpy as np
import pytest

from iopilot.checks import Level, advice
from iopilot.checks.base import Context
from iopilot.checks.hdf5 import _file_of, dataset_files, hdf5_file_ids
from iopilot.checks.thresholds import defaults
from iopilot.model import RECORD_LAYERS, Records
from iopilot.vocabulary import OP_NAMES
from kit import counters, findings, only, records, trace

KiB, MiB = 1024, 1024**2



def _h5f(file=1, rank=-1, mpiio=1):
    return counters("H5F", [{"file": file, "rank": rank, "H5F_OPENS": 4, "H5F_USE_MPIIO": mpiio}])


def _ds(writes: int, small: int, nbytes: int, tsize: int = 8, rank: int = -1):
    """A dataset of file 1: ``small`` writes of 50 bytes, the rest of 2 MiB."""
    return counters("H5D", [{"file": 11, "parent": 1, "rank": rank, "H5D_WRITES": writes,
                             "H5D_SIZE_WRITE_AGG_0_100": small,
                             "H5D_SIZE_WRITE_AGG_1M_4M": writes - small,
                             "H5D_BYTES_WRITTEN": nbytes, "H5D_DATATYPE_SIZE": tsize}])


# ----------------------------------------------------- small dataset accesses


@pytest.mark.parametrize(("writes", "small", "flagged"), [
    (1000, 100, False),  # 10 %: not above the share
    (1000, 101, True),   # 10.1 % and 101 > 100
    (500, 100, False),   # 20 %, but not more than 100 of them
    (500, 101, True),
])  # fmt: skip
def test_many_small_accesses_both_sides(writes, small, flagged):
    d = _ds(writes, small, small * 50 + (writes - small) * 2 * MiB)
    fs = findings(trace(_h5f(), d, nprocs=4), "hdf5-small-dataset-access")
    assert len(fs) == int(flagged)
    if flagged:
        assert fs[0].level == Level.HIGH and fs[0].evidence["small_accesses"] == small


def test_many_small_accesses_evidence_by_hand():
    d = _ds(500, 400, 400 * 50 + 100 * 2 * MiB)
    f = only(findings(trace(_h5f(), d, nprocs=4), "hdf5-small-dataset-access"), Level.HIGH)
    nbytes = 400 * 50 + 100 * 2 * MiB
    assert f.evidence == {"small_accesses": 400, "accesses": 500, "bytes": nbytes,
                          "mean_bytes": round(nbytes / 500, 1)}  # fmt: skip
    assert f.message.startswith("400 of 500 HDF5 dataset reads/writes (80.0 %) move less "
                                "than 1.0 MiB each; the mean is 409.6 KiB. At stake:")
    assert [(e.path, e.numbers) for e in f.files] == [("/data/file11", {
        "small accesses": 400, "accesses": 500, "mean bytes": round(nbytes / 500, 1)})]
    # 1 MiB of 8-byte elements per call; the file is shared (rank -1) by 4 ranks.
    assert f.snippet == advice.hdf5_large_selection(131072)
    assert f.recommendation.endswith("; on shared files, make the transfers collective as well.")


def test_tiny_accesses_below_the_mean_only():
    tiny = _ds(10, 0, 10 * 1023, tsize=4)
    f = only(findings(trace(_h5f(), tiny, nprocs=1), "hdf5-small-dataset-access"), Level.WARN)
    assert f.evidence == {"small_accesses": 0, "accesses": 10, "bytes": 10230,
                          "mean_bytes": 1023.0}  # fmt: skip
    assert f.message.startswith("HDF5 dataset accesses are tiny: 10 H5Dread/H5Dwrite calls "
                                "move 10.0 KiB in all, 1023 B per call on average. At stake:")
    assert [e.numbers for e in f.files] == [
        {"small accesses": 0, "accesses": 10, "mean bytes": 1023.0}]
    assert f.snippet == advice.hdf5_large_selection(262144)  # 1 MiB of 4-byte elements
    # One process: nothing to make collective.
    assert "collective" not in f.recommendation
    assert findings(trace(_h5f(), _ds(10, 0, 10 * 1024), nprocs=1),
                    "hdf5-small-dataset-access") == []  # fmt: skip


def test_small_accesses_of_reads_count_too():
    d = counters("H5D", [{"file": 11, "parent": 1, "H5D_READS": 200,
                          "H5D_SIZE_READ_AGG_0_100": 200, "H5D_BYTES_READ": 200 * 2048}])
    f = only(findings(trace(_h5f(), d), "hdf5-small-dataset-access"), Level.HIGH)
    assert f.evidence["small_accesses"] == 200 and f.evidence["accesses"] == 200


# ------------------------------------------------------ independent transfers


def _indep(ops: int):
    return counters("H5D", [{"file": 11, "parent": 1, "rank": -1, "H5D_READS": ops // 2,
                             "H5D_WRITES": ops - ops // 2, "H5D_F_WRITE_TIME": 2.0}])


def test_independent_transfers_level_at_the_collective_count():
    tr = trace(_h5f(), _indep(1000), nprocs=4)
    f = only(findings(tr, "hdf5-independent-transfers"), Level.WARN)
    assert f.evidence == {"datasets": 1, "files": 1, "reads": 500, "writes": 500}
    assert f.message == ("1 dataset(s) in 1 file(s) opened with the MPI-IO driver by 4 ranks "
                         "are accessed with independent transfers only (500 reads, 500 "
                         "writes). At stake: 0.5 s, 5.0 % of the run (slowest rank).")
    assert [(e.path, e.numbers) for e in f.files] == [
        ("/data/file11", {"independent reads/writes": 1000})]
    # The shared row's 2 s spread evenly over the 4 ranks.
    assert f.cost_seconds == pytest.approx(0.5)
    only(findings(trace(_h5f(), _indep(1001), nprocs=4), "hdf5-independent-transfers"),
         Level.HIGH)  # fmt: skip


def test_independent_transfers_mpiio_rows_stand_in_for_h5f():
    # No H5F record: an MPI-IO record of the file says it uses the MPI-IO driver.
    m = counters("MPIIO", [{"file": 1, "rank": -1, "MPIIO_INDEP_WRITES": 7}])
    f = only(findings(trace(m, _indep(20), nprocs=4), "hdf5-independent-transfers"))
    assert f.evidence["mpiio_independent"] == 7 and f.evidence["mpiio_collective"] == 0
    assert f.message.endswith("MPI-IO agrees: 7 independent and no collective operations."
                              " At stake: 0.5 s, 5.0 % of the run (slowest rank).")
    # MPI-IO rows of other files only: nothing to agree with.
    other = counters("MPIIO", [{"file": 3, "rank": -1, "MPIIO_INDEP_WRITES": 7}])
    f = only(findings(trace(_h5f(), other, _indep(20), nprocs=4),
                      "hdf5-independent-transfers"))  # fmt: skip
    assert "MPI-IO" not in f.message.split(").")[-1]
    assert f.evidence["mpiio_independent"] == 0


def test_independent_transfers_need_a_shared_file():
    own = counters("H5D", [{"file": 11, "parent": 1, "rank": 0, "H5D_WRITES": 20}])
    assert findings(trace(_h5f(rank=0), own, nprocs=4), "hdf5-independent-transfers") == []


# ------------------------------------------------------------ metadata reads


def _meta(small_per_rank):
    rows = [{"file": 1, "rank": r, "POSIX_READS": s + 4, "POSIX_SIZE_READ_0_100": s,
             "POSIX_SIZE_READ_1M_4M": 4, "POSIX_F_READ_TIME": 1.0}
            for r, s in enumerate(small_per_rank)]  # fmt: skip
    return counters("POSIX", rows)


def test_metadata_reads_share_of_ranks_both_sides():
    # 2 of 4 ranks: exactly the share (0.5), which counts.
    f = only(findings(trace(_h5f(), _meta([6, 6, 0, 0]), nprocs=4), "hdf5-metadata-reads"),
             Level.WARN)  # fmt: skip
    assert f.evidence == {"files": 1, "small_reads": 12, "ranks_reading": 2,
                          "ranks_opening": 4}  # fmt: skip
    assert f.message.startswith(
        "2 of 4 ranks read small pieces (< 1 KiB) of the shared HDF5 file(s) themselves, "
        "12 small reads in all: each rank reads the file's metadata independently.")
    assert [e.numbers for e in f.files] == [
        {"small reads": 12, "ranks reading small pieces": 2, "ranks opening": 4}]
    # Known as HDF5 by its name only (no H5F time on top of POSIX): each
    # reading rank spent 1 s on 10 reads, 6 of them small: 0.6 s at stake.
    named = trace(_meta([6, 6, 0, 0]), nprocs=4, names={1: "/r/f.h5"})
    assert only(findings(named, "hdf5-metadata-reads")).cost_seconds == pytest.approx(0.6)
    assert findings(trace(_h5f(), _meta([6, 0, 0, 0, 0]), nprocs=5),
                    "hdf5-metadata-reads") == []  # fmt: skip
    assert findings(trace(_h5f(), _meta([6, 6, 0, 0, 0]), nprocs=5),
                    "hdf5-metadata-reads") == []  # 2 of 5  # fmt: skip
    assert only(findings(trace(_h5f(), _meta([6, 6, 6, 0, 0]), nprocs=5),
                         "hdf5-metadata-reads"))  # fmt: skip


def test_metadata_reads_likely_needs_a_read_per_rank():
    row = {"file": 1, "rank": -1, "POSIX_READS": 8, "POSIX_SIZE_READ_100_1K": 4}
    f = only(findings(trace(_h5f(), counters("POSIX", [row]), nprocs=4), "hdf5-metadata-reads"),
             Level.INFO)  # fmt: skip
    assert f.evidence == {"files": 1, "small_reads": 4}
    assert f.message.startswith("HDF5 file(s) opened by all 4 ranks saw 4 small reads (< 1 KiB)")
    assert [e.numbers for e in f.files] == [
        {"small reads": 4, "ranks reading small pieces": -1, "ranks opening": 4}]
    row["POSIX_SIZE_READ_100_1K"] = 3
    assert findings(trace(_h5f(), counters("POSIX", [row]), nprocs=4),
                    "hdf5-metadata-reads") == []  # fmt: skip


# ----------------------------------------------------------------- alignment


def _mis(bad: int, size: int = MiB):
    return counters("POSIX", [{"file": 1, "rank": -1, "POSIX_WRITES": 100,
                               "POSIX_FILE_NOT_ALIGNED": bad, "POSIX_FILE_ALIGNMENT": 4096,
                               "POSIX_ACCESS1_ACCESS": size, "POSIX_ACCESS1_COUNT": 100,
                               "POSIX_F_WRITE_TIME": 4.0}])  # fmt: skip


def test_alignment_share_and_request_size_both_sides():
    assert findings(trace(_h5f(), _mis(10)), "hdf5-alignment") == []  # 10 %: not above
    f = only(findings(trace(_h5f(), _mis(11)), "hdf5-alignment"), Level.WARN)
    assert f.evidence == {"misaligned": 11, "requests": 100, "common_request": MiB,
                          "alignment": 4096, "threshold": 512 * KiB}  # fmt: skip
    assert f.message.startswith(
        "11.0 % of the POSIX requests to HDF5 file /data/file1 (11 of 100) start off the "
        "4.0 KiB boundary Darshan checks, while its common request is 1.0 MiB: HDF5 packs "
        "datasets right after its metadata, so large transfers straddle file-system blocks.")
    assert [e.numbers for e in f.files] == [
        {"misaligned": 11, "requests": 100, "common request bytes": MiB, "alignment": 4096}]
    named = trace(_mis(11), names={1: "/r/f.h5"})  # POSIX time counts without H5F
    assert only(findings(named, "hdf5-alignment")).cost_seconds == pytest.approx(0.44)
    assert only(findings(trace(_h5f(), _mis(50, size=64 * KiB)), "hdf5-alignment"))
    assert findings(trace(_h5f(), _mis(50, size=64 * KiB - 1)), "hdf5-alignment") == []


def test_alignment_counts_the_files_affected():
    p = counters("POSIX", [{"file": k, "rank": -1, "POSIX_WRITES": 100,
                            "POSIX_FILE_NOT_ALIGNED": 20 * k, "POSIX_FILE_ALIGNMENT": 4096,
                            "POSIX_ACCESS1_ACCESS": MiB, "POSIX_ACCESS1_COUNT": 100}
                           for k in (1, 2)])  # fmt: skip
    h5 = counters("H5F", [{"file": k, "rank": -1} for k in (1, 2)])
    f = only(findings(trace(h5, p), "hdf5-alignment"))
    assert "straddle file-system blocks (2 HDF5 files affected)." in f.message
    assert f.evidence["misaligned"] == 40 and [e.path for e in f.files] == [
        "/data/file2", "/data/file1"]


# ------------------------------------------------------------- file lookups


def test_file_of_a_dataset_name_tries_every_colon():
    by_path = {"/a:b.h5": 7, "/x.h5": 3}
    assert _file_of("/x.h5:/grp/data", by_path) == 3
    assert _file_of("/a:b.h5:/grp", by_path) == 7
    assert _file_of("/none.h5:/grp", by_path) == 0
    assert _file_of("nocolon", by_path) == 0
    assert _file_of(":/x.h5", by_path) == 0


def test_hdf5_file_ids_from_every_source():
    names = {1: "/r/a.h5", 2: "/r/b.HDF5", 3: "/r/c.bin", 4: "/r/d.dat", 11: "/r/d.dat:/x"}
    p = counters("POSIX", [{"file": k} for k in (1, 2, 3, 4)])
    d = counters("H5D", [{"file": 11, "parent": 0}])
    tr = trace(p, d, names=names)
    ctx = Context(tr, defaults())
    assert hdf5_file_ids(ctx).tolist() == [1, 2, 4]
    assert hdf5_file_ids(ctx, by_name=False).tolist() == [4]
    assert dataset_files(ctx, d).tolist() == [4]
    assert hdf5_file_ids(Context(trace(counters("STDIO", [{"file": 1}])), defaults())
                         ).tolist() == []  # fmt: skip


def test_file_of_edges():
    assert _file_of("a:/d", {"a": 3}) == 3  # a one-letter file name
    assert _file_of("/a::/d", {"/a:": 5}) == 5  # the next colon right after
    assert _file_of("/r:x.h5:/d", {"/r": 1, "/r:x.h5": 2}) == 1  # the shortest known prefix


def test_dims_in_c_order():
    from iopilot.checks.hdf5 import _dims

    d = counters("H5D", [{"file": 1, "H5D_CHUNK_SIZE_D1": 4, "H5D_CHUNK_SIZE_D2": 8,
                          "H5D_CHUNK_SIZE_D3": 16, "H5D_ACCESS1_LENGTH_D5": 3,
                          "H5D_ACCESS1_LENGTH_D4": 5}])  # fmt: skip
    # Chunks: D1 is the fastest dimension, so C order reverses them.
    assert _dims(d, 0, "H5D_CHUNK_SIZE_D", 3, reverse_right=False) == [16, 8, 4]
    assert _dims(d, 0, "H5D_CHUNK_SIZE_D", 1, reverse_right=False) == [4]
    assert _dims(d, 0, "H5D_CHUNK_SIZE_D", 0, reverse_right=False) == [4]
    # Access lengths are right-aligned: D5 is the slowest.
    assert _dims(d, 0, "H5D_ACCESS1_LENGTH_D", 2, reverse_right=True) == [3, 5]
    assert _dims(d, 0, "H5D_ACCESS1_LENGTH_D", 1, reverse_right=True) == [3]


def test_c_order_of_every_row_matches_dims():
    from iopilot.checks.hdf5 import _c_order, _dims

    d = counters("H5D", [
        {"file": 1, "H5D_CHUNK_SIZE_D1": 4, "H5D_CHUNK_SIZE_D2": 8, "H5D_CHUNK_SIZE_D3": 16,
         "H5D_ACCESS1_LENGTH_D5": 3, "H5D_ACCESS1_LENGTH_D4": 5, "H5D_ACCESS1_LENGTH_D3": 7,
         "H5D_DATASPACE_NDIMS": 3},
        {"file": 2, "H5D_CHUNK_SIZE_D1": 9, "H5D_ACCESS1_LENGTH_D5": 2, "H5D_DATASPACE_NDIMS": 1},
    ])  # fmt: skip
    nd = d["H5D_DATASPACE_NDIMS"]
    chunk, acc = _c_order(d, "H5D_CHUNK_SIZE_D", nd, False), _c_order(
        d, "H5D_ACCESS1_LENGTH_D", nd, True)
    for row, n in ((0, 3), (1, 1)):
        assert chunk[row, :n].tolist() == _dims(d, row, "H5D_CHUNK_SIZE_D", n, False)
        assert acc[row, :n].tolist() == _dims(d, row, "H5D_ACCESS1_LENGTH_D", n, True)
        assert not chunk[row, n:].any() and not acc[row, n:].any()


# ------------------------------------------ chunks judged on what was written

SLAB = 64**3 * 8  # one 64^3 slab of doubles


def _field(npoints: int, steps: int = 60, chunk: int = 8, write_time: float = 2.0):
    """A 3-D dataset of doubles written one 64^3 slab per step with chunk^3 chunks."""
    row = {"file": 11, "parent": 1, "H5D_WRITES": steps, "H5D_DATATYPE_SIZE": 8,
           "H5D_DATASPACE_NDIMS": 3, "H5D_DATASPACE_NPOINTS": npoints,
           "H5D_BYTES_WRITTEN": steps * SLAB, "H5D_ACCESS1_ACCESS": SLAB,
           "H5D_ACCESS1_COUNT": steps, "H5D_F_WRITE_TIME": write_time}  # fmt: skip
    for i in (1, 2, 3):
        row[f"H5D_CHUNK_SIZE_D{i}"] = chunk
        row[f"H5D_ACCESS1_LENGTH_D{6 - i}"] = 64
    return counters("H5D", [row])


def _file(nbytes: int):
    return counters("POSIX", [{"file": 1, "POSIX_WRITES": 10,
                               "POSIX_MAX_BYTE_WRITTEN": nbytes - 1}])  # fmt: skip


@pytest.mark.parametrize("npoints", [0, 60 * 64**3])  # created empty and grown; at full size
def test_chunks_of_a_grown_dataset_are_judged_on_what_was_written(npoints):
    tr = trace(_h5f(mpiio=0), _field(npoints), _file(60 * SLAB + 4096))
    f = only(findings(tr, "hdf5-chunking"), Level.WARN)
    assert f.evidence["elements"] == 60 * 64**3 and f.evidence["chunks_per_access"] == 512
    assert f.evidence["suggested_dims"] == "[64, 64, 64]"
    assert "hsize_t chunk[3] = {64, 64, 64};" in f.snippet and f.snippet_lang == "c"
    assert ("it grew as it was written" in f.message) == (npoints == 0)
    # The library's time on all but one chunk of each access's 512.
    assert f.cost_seconds == pytest.approx(2.0 * (1 - 1 / 512))


def test_grown_dataset_without_posix_counts_its_bytes():
    f = only(findings(trace(_h5f(), _field(0)), "hdf5-chunking"))
    assert f.evidence["elements"] == 60 * 64**3


def test_dataset_rewritten_in_one_chunk_is_not_grown():
    # 100 doubles in one chunk, rewritten 1,000 times: 800 KB moved, but the
    # file holds 3 KiB, within chunk_min_bytes of the dataset's 800 B.
    d = counters("H5D", [{"file": 11, "parent": 1, "H5D_WRITES": 1000, "H5D_DATATYPE_SIZE": 8,
                          "H5D_DATASPACE_NDIMS": 1, "H5D_DATASPACE_NPOINTS": 100,
                          "H5D_BYTES_WRITTEN": 800_000, "H5D_CHUNK_SIZE_D1": 100,
                          "H5D_ACCESS1_ACCESS": 800, "H5D_ACCESS1_LENGTH_D5": 100}])  # fmt: skip
    assert findings(trace(_h5f(), d, _file(3 * KiB)), "hdf5-chunking") == []
    # A file 64 KiB + 1 beyond the dataset: it grew.
    assert findings(trace(_h5f(), d, _file(800 + 64 * KiB + 1)), "hdf5-chunking")
    assert findings(trace(_h5f(), d, _file(800 + 64 * KiB)), "hdf5-chunking") == []


def _rows(chunk_rows: int, chunk_cols: int, width: int = 100, n: int = 5000, **extra):
    """A table of doubles appended one row per call (``n`` rows of ``width``)."""
    return counters("H5D", [{"file": 11, "parent": 1, "H5D_WRITES": n, "H5D_DATATYPE_SIZE": 8,
                             "H5D_DATASPACE_NDIMS": 2, "H5D_DATASPACE_NPOINTS": 0,
                             "H5D_BYTES_WRITTEN": n * width * 8, "H5D_CHUNK_SIZE_D1": chunk_cols,
                             "H5D_CHUNK_SIZE_D2": chunk_rows, "H5D_ACCESS1_ACCESS": width * 8,
                             "H5D_ACCESS1_LENGTH_D5": 1, "H5D_ACCESS1_LENGTH_D4": width,
                             "H5D_F_WRITE_TIME": 1.0, **extra}])  # fmt: skip


def test_row_appends_get_chunks_of_many_whole_rows():
    f = only(findings(trace(_h5f(), _rows(1, 100)), "hdf5-chunking"))
    # 64 KiB of 800-byte rows: 82 rows of the full row.
    assert f.evidence["suggested_dims"] == "[82, 100]"
    # One chunk per access already: the calls, not the chunks, cost the time.
    assert f.cost_seconds == 0.0
    # A chunk that splits each row (h5py's guess for a growing table) costs its share.
    f = only(findings(trace(_h5f(), _rows(256, 4, width=16)), "hdf5-chunking"))
    assert f.evidence["suggested_dims"] == "[512, 16]"
    assert f.evidence["chunks_per_access"] == 4 and f.cost_seconds == pytest.approx(0.75)


def test_suggested_chunk_stays_within_the_rows_written():
    from iopilot.checks.hdf5 import suggest_chunk

    assert suggest_chunk([1, 100], [1, 100], 8, 64 * KiB, 50 * 100) == ([50, 100],
        "whole accesses grown along the slowest dimension")  # fmt: skip
    assert suggest_chunk([4, 4], [0, 0], 8, 64 * KiB, 0)[0] == [2048, 4]
    assert suggest_chunk([8], [8], 8, 64, 0) == ([8], "whole accesses")


@pytest.mark.parametrize(("exe", "lang", "text"), [
    ("python3 rows.py", "python", "maxshape=(None, 100),\n"),
    ("./rows", "c", "H5Pset_chunk(dcpl, 2, chunk);"),
])  # fmt: skip
def test_chunk_advice_in_the_program_language(exe, lang, text):
    tr = trace(_h5f(), _rows(1, 100))
    tr.job.executable = exe
    f = only(findings(tr, "hdf5-chunking"))
    assert f.snippet_lang == lang and text in f.snippet
    assert "chunks=(82, 100)" in f.snippet or "{82, 100}" in f.snippet
    tr.job.language = "fortran"
    f = only(findings(tr, "hdf5-chunking"))
    assert f.snippet_lang == "fortran" and "[100_hsize_t, 82_hsize_t]" in f.snippet


# ------------------------------ small accesses priced from the calls' records


def _row_calls(n: int, length: int, dur: float, gap: float, file: int = 11):
    """``n`` one-row writes of ``length`` bytes, ``dur`` s each, ``gap`` s apart."""
    step = dur + gap
    return records([(0, "w", file, -1, length, i * step, i * step + dur) for i in range(n)],
                   layer="H5D")  # fmt: skip


def test_small_access_cost_counts_the_tight_gaps_between_calls():
    d = _rows(1, 100, n=1000, H5D_SIZE_WRITE_AGG_100_1K=1000, H5D_F_WRITE_TIME=0.1)
    tr = trace(_h5f(), d, recs=_row_calls(1000, 800, 1e-4, 5e-4))
    tr.job.runtime = 10.0
    f = only(findings(tr, "hdf5-small-dataset-access"))
    moved = 1000 * 800 / (1024**3)  # one call per block at default_bandwidth
    # 0.1 s in the calls and 999 gaps of 0.5 ms (the first call has none).
    assert f.cost_seconds == pytest.approx(0.1 - moved + 999 * 5e-4, rel=1e-4)
    assert f.evidence["between_calls_seconds"] == pytest.approx(999 * 5e-4, rel=1e-4)
    assert "tight loop" in f.message


@pytest.mark.parametrize(("gap", "counted"), [(1e-3, True), (1.1e-3, False)])
def test_gaps_above_call_overhead_gap_are_not_the_calls(gap, counted):
    d = _rows(1, 100, n=200, H5D_SIZE_WRITE_AGG_100_1K=200, H5D_F_WRITE_TIME=0.02)
    tr = trace(_h5f(), d, recs=_row_calls(200, 800, 1e-4, gap))
    f = only(findings(tr, "hdf5-small-dataset-access"))
    assert ("between_calls_seconds" in f.evidence) == counted


def test_small_access_gaps_are_per_dataset():
    # Two datasets written in turn: the gaps on each are 2 calls apart.
    r = Records.concat([_row_calls(200, 800, 1e-4, 6e-4, file=11),
                        _row_calls(200, 800, 1e-4, 6e-4, file=12)])  # fmt: skip
    r.start[200:] += 3.5e-4
    r.end[200:] += 3.5e-4
    d = counters("H5D", [{**{"file": f, "parent": 1, "H5D_WRITES": 200,
                             "H5D_SIZE_WRITE_AGG_100_1K": 200, "H5D_BYTES_WRITTEN": 160000,
                             "H5D_F_WRITE_TIME": 0.02}} for f in (11, 12)])  # fmt: skip
    f = only(findings(trace(_h5f(), d, recs=r), "hdf5-small-dataset-access"))
    assert f.evidence["between_calls_seconds"] == pytest.approx(2 * 199 * 6e-4, rel=1e-4)


@pytest.mark.parametrize(("exe", "lang", "text"), [
    ("python3 rows.py", "python", "dset.resize(start + n, axis=0)"),
    ("./rows", "c", "H5Sselect_hyperslab(filespace, H5S_SELECT_SET"),
])  # fmt: skip
def test_small_access_advice_in_the_program_language(exe, lang, text):
    tr = trace(_h5f(), _rows(1, 100, H5D_SIZE_WRITE_AGG_100_1K=5000))
    tr.job.executable = exe
    f = only(findings(tr, "hdf5-small-dataset-access"))
    assert f.snippet_lang == lang and text in f.snippet


def test_gaps_with_other_work_on_the_file_are_not_the_calls():
    # 200 row writes 0.6 ms apart; after every other one the rank writes to
    # the file itself (a flush) or reopens the dataset: those gaps belong to
    # the flush or the reopening, the rest to the calls.
    d = _rows(1, 100, n=200, H5D_SIZE_WRITE_AGG_100_1K=200, H5D_F_WRITE_TIME=0.02)
    calls = _row_calls(200, 800, 1e-4, 6e-4)
    after = calls.end[0:200:2] + 1e-4
    flush = records([(0, "w", 1, 0, 512, t, t + 1e-5) for t in after])  # file 1: the parent
    f = only(findings(trace(_h5f(), d, recs=Records.concat([calls, flush])),
                      "hdf5-small-dataset-access"))  # fmt: skip
    assert f.evidence["between_calls_seconds"] == pytest.approx(99 * 6e-4, rel=1e-4)
    # The same writes on another file leave every gap to the calls.
    other = records([(0, "w", 2, 0, 512, t, t + 1e-5) for t in after])
    f = only(findings(trace(_h5f(), d, recs=Records.concat([calls, other])),
                      "hdf5-small-dataset-access"))  # fmt: skip
    assert f.evidence["between_calls_seconds"] == pytest.approx(199 * 6e-4, rel=1e-4)
    # The dataset closed and opened again between two calls (h5py reopening the file).
    tr = trace(_h5f(), d, recs=calls)
    n = len(after)
    tr.meta_records = Records(
        rank=np.zeros(n, np.int32), layer=np.full(n, RECORD_LAYERS.index("H5D"), np.uint8),
        op=np.full(n, OP_NAMES.index("open"), np.uint8), file_id=np.full(n, 11, np.uint64),
        offset=np.zeros(n, np.int64), length=np.zeros(n, np.int64), start=after,
        end=after + 1e-5)  # fmt: skip
    f = only(findings(tr, "hdf5-small-dataset-access"))
    assert f.evidence["between_calls_seconds"] == pytest.approx(99 * 6e-4, rel=1e-4)


@pytest.mark.parametrize(("exe", "language", "lang", "text"), [
    ("python3 sim.py", "", "python", "alignment_threshold=1048576,\n"),
    ("./sim", "fortran", "fortran", "h5pset_alignment_f(fapl, 1048576_hsize_t, 4096_hsize_t"),
    ("./sim", "", "c", "H5Pset_alignment(fapl, 1048576, 4096);"),
])  # fmt: skip
def test_alignment_advice_in_the_program_language(exe, language, lang, text):
    tr = trace(_h5f(), _mis(50, size=2 * MiB))
    tr.job.executable, tr.job.language = exe, language
    f = only(findings(tr, "hdf5-alignment"))
    assert f.snippet_lang == lang and text in f.snippet


# ------------------------------------------------------------- chunk cache


def _strips(chunk: tuple[int, int], access: tuple[int, int], tsize: int = 4, n: int = 128):
    """A 2-D dataset read and written ``n`` times each by ``access``-shaped
    blocks with ``chunk``-shaped chunks, 1 s of each direction."""
    nbytes = access[0] * access[1] * tsize
    return counters("H5D", [{"file": 11, "parent": 1, "H5D_WRITES": n, "H5D_READS": n,
                             "H5D_DATATYPE_SIZE": tsize, "H5D_DATASPACE_NDIMS": 2,
                             "H5D_DATASPACE_NPOINTS": 2048 * 2048,
                             "H5D_BYTES_WRITTEN": n * nbytes, "H5D_BYTES_READ": n * nbytes,
                             "H5D_CHUNK_SIZE_D2": chunk[0], "H5D_CHUNK_SIZE_D1": chunk[1],
                             "H5D_ACCESS1_ACCESS": nbytes, "H5D_ACCESS1_LENGTH_D5": access[0],
                             "H5D_ACCESS1_LENGTH_D4": access[1],
                             "H5D_F_WRITE_TIME": 1.0, "H5D_F_READ_TIME": 1.0}])  # fmt: skip


def test_column_strips_over_4mib_chunks_need_a_larger_chunk_cache():
    """Strips 16 columns wide over 1024x1024 chunks of floats (4 MiB): each
    access covers 2 chunks in part, 8 MiB, eight times HDF5's 1 MiB cache."""
    f = only(findings(trace(_h5f(mpiio=0), _strips((1024, 1024), (2048, 16))),
                      "hdf5-chunk-cache"), Level.WARN)  # fmt: skip
    assert f.evidence == {"datasets": 1, "chunk_bytes": 4 * MiB, "access_bytes": 2048 * 16 * 4,
                          "chunk_dims": "[1024, 1024]", "chunks_per_access": 2.0,
                          "chunk_bytes_per_access": 8 * MiB, "chunk_cache_bytes": MiB}  # fmt: skip
    assert f.cost_seconds == pytest.approx(2.0 * (1 - 1 / 8))
    assert "HDF5's default" in f.message and "8.0 MiB" in f.recommendation
    assert "H5Pset_chunk_cache(dapl, 12421, (size_t)8 * 1024 * 1024" in f.snippet


@pytest.mark.parametrize(("chunk", "access", "tsize", "flagged"), [
    ((1, MiB), (1, 1000), 1, False),      # one chunk of 1 MiB touched: fits the default
    ((1, MiB + 1), (1, 1000), 1, True),   # one byte more
    ((1024, 1024), (2048, 1024), 4, False),  # whole chunks: nothing left to finish later
    ((1024, 1024), (2048, 1023), 4, True),   # one column short of whole chunks
])  # fmt: skip
def test_chunk_cache_both_sides(chunk, access, tsize, flagged):
    fs = findings(trace(_h5f(mpiio=0), _strips(chunk, access, tsize)), "hdf5-chunk-cache")
    assert len(fs) == int(flagged), fs


@pytest.mark.parametrize(("noted", "flagged"), [(8 * MiB, False), (8 * MiB - 1, True)])
def test_chunk_cache_the_trace_noted_is_the_one_judged(noted, flagged):
    """The runtime notes each dataset's chunk cache at open (a settings file or
    the program may have set one): the check compares with that."""
    tr = trace(_h5f(mpiio=0), _strips((1024, 1024), (2048, 16)))
    tr.job.hdf5_chunk_cache = {11: noted}
    fs = findings(tr, "hdf5-chunk-cache")
    assert len(fs) == int(flagged)
    if flagged:
        assert fs[0].evidence["chunk_cache_bytes"] == noted and "noted" in fs[0].message


@pytest.mark.parametrize(("noted", "thrashed"), [(8 * MiB, False), (MiB, True)])
def test_small_accesses_whose_time_the_chunk_cache_explains_leave_it_to_that_finding(
        noted, thrashed):
    """128 KiB strips are small accesses; while the chunk cache cannot hold
    the chunks they touch, their time is the cache's (its own finding), and
    the small-access finding prices none of it: the first finding names the
    cause the fix removes."""
    d = _strips((1024, 1024), (2048, 16))
    d["H5D_SIZE_WRITE_AGG_100K_1M"][:] = d["H5D_WRITES"]  # 128 KiB each
    d["H5D_SIZE_READ_AGG_100K_1M"][:] = d["H5D_READS"]
    tr = trace(_h5f(mpiio=0), d)
    tr.job.hdf5_chunk_cache = {11: noted}
    small = only(findings(tr, "hdf5-small-dataset-access"))
    cache = findings(tr, "hdf5-chunk-cache")
    if thrashed:
        assert small.cost_seconds == 0.0
        assert only(cache).cost_seconds > 1.0
    else:
        assert small.cost_seconds > 1.0 and cache == []
