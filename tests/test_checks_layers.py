"""HDF5, PnetCDF and Lustre checks: tiny models in, known findings out, plus real logs.

The real logs are PyDarshan's examples (always installed) and, when the
shared collection is present, the logs in ../shared/darshan-logs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iopilot.checks import REGISTRY, Level, diagnose
from iopilot.demo import example_dir
from iopilot.sources import load
from kit import SHARED, counters, findings, records, shared_logs, striping, trace

KiB, MiB, GiB = 1024, 1024 * 1024, 1024**3
needs_shared = pytest.mark.skipif(not SHARED.exists(), reason="shared Darshan logs not present")
MINE = {k for k in REGISTRY if k.startswith(("hdf5-", "pnetcdf-", "lustre-"))}


def only(fs, level=None):
    assert len(fs) == 1, fs
    if level is not None:
        assert fs[0].level == level, fs[0]
    return fs[0]


def test_checks_are_registered_and_described():
    expected = {
        "hdf5-small-dataset-access", "hdf5-independent-transfers", "hdf5-metadata-reads",
        "hdf5-alignment", "hdf5-chunking", "pnetcdf-independent",
        "pnetcdf-blocking-many-vars", "pnetcdf-small-requests", "lustre-single-stripe-shared",
        "lustre-stripe-request-mismatch", "lustre-ost-imbalance", "lustre-slow-ost",
    }  # fmt: skip
    assert expected <= MINE
    for k in expected:
        cls = REGISTRY[k]
        assert cls.drishti is None and cls.summary() != k
        assert cls.layer in ("H5D", "H5F", "PNETCDF_VAR", "LUSTRE")


# --------------------------------------------------------------------- HDF5


def h5f(file=1, rank=-1, mpiio=1):
    return counters("H5F", [{"file": file, "rank": rank, "H5F_OPENS": 4, "H5F_USE_MPIIO": mpiio}])


def test_hdf5_small_accesses_many_is_high():
    d = counters("H5D", [{"file": 11, "parent": 1, "rank": -1, "H5D_WRITES": 500,
                          "H5D_SIZE_WRITE_AGG_0_100": 400, "H5D_SIZE_WRITE_AGG_1M_4M": 100,
                          "H5D_BYTES_WRITTEN": 400 * 50 + 100 * 2 * MiB,
                          "H5D_DATATYPE_SIZE": 8}])  # fmt: skip
    f = only(findings(trace(h5f(), d, nprocs=4), "hdf5-small-dataset-access"), Level.HIGH)
    assert f.evidence["small_accesses"] == 400 and f.evidence["accesses"] == 500
    assert "400 of 500" in f.message and "80.0 %" in f.message
    assert f.files[0].path == "/data/file11"
    # 1 MiB / 8-byte elements per call in the snippet.
    assert "count[1] = {131072}" in f.snippet and "H5Dwrite" in f.snippet
    assert "collective" in f.recommendation  # the file is shared (rank -1)


def test_hdf5_tiny_accesses_warn_even_if_few():
    # One byte per rank and file, as in hdf5_diagonal_write_1_byte_dxt.
    rows = [{"file": 10 + r, "parent": r + 1, "rank": r, "H5D_WRITES": 1,
             "H5D_BYTES_WRITTEN": 1, "H5D_SIZE_WRITE_AGG_0_100": 1} for r in range(10)]  # fmt: skip
    tr = trace(counters("H5D", rows), nprocs=10)
    f = only(findings(tr, "hdf5-small-dataset-access"), Level.WARN)
    assert f.evidence["mean_bytes"] == 1.0 and f.evidence["accesses"] == 10
    assert f.files_total == 10
    assert "collective" not in f.recommendation  # each rank has its own file
    assert findings(tr, "hdf5-small-dataset-access", hdf5_tiny_access=0) == []


def test_hdf5_large_or_few_medium_accesses_pass():
    big = counters("H5D", [{"H5D_WRITES": 10, "H5D_BYTES_WRITTEN": 40 * MiB,
                            "H5D_SIZE_WRITE_AGG_4M_10M": 10}])  # fmt: skip
    assert findings(trace(big), "hdf5-small-dataset-access") == []
    # 50 accesses of 64 KiB: small, but too few to matter and not tiny.
    mid = counters("H5D", [{"H5D_READS": 50, "H5D_BYTES_READ": 50 * 64 * KiB,
                            "H5D_SIZE_READ_AGG_10K_100K": 50}])  # fmt: skip
    assert findings(trace(mid), "hdf5-small-dataset-access") == []


def indep_dataset(ops=20, coll=0, parent=1):
    return counters("H5D", [{"file": 11, "parent": parent, "rank": -1,
                             "H5D_READS": ops // 2, "H5D_WRITES": ops - ops // 2,
                             "H5D_USE_MPIIO_COLLECTIVE": coll}])  # fmt: skip


def test_hdf5_independent_transfers_warn_and_high():
    f = only(findings(trace(h5f(), indep_dataset(), nprocs=4), "hdf5-independent-transfers"),
             Level.WARN)  # fmt: skip
    assert f.evidence["reads"] == 10 and f.evidence["writes"] == 10
    assert "4 ranks" in f.message and "H5FD_MPIO_COLLECTIVE" in f.snippet
    many = trace(h5f(), indep_dataset(ops=3000), nprocs=4)
    assert only(findings(many, "hdf5-independent-transfers"), Level.HIGH)


def test_hdf5_independent_transfers_cross_checks_mpiio():
    agree = counters("MPIIO", [{"rank": -1, "MPIIO_INDEP_WRITES": 30}])
    f = only(findings(trace(h5f(), indep_dataset(), agree, nprocs=4),
                      "hdf5-independent-transfers"), Level.WARN)  # fmt: skip
    assert f.evidence["mpiio_independent"] == 30 and "MPI-IO agrees" in f.message
    # Collective MPI-IO traffic on the file: the H5D flag may be wrong, so only INFO.
    coll = counters("MPIIO", [{"rank": -1, "MPIIO_COLL_WRITES": 8}])
    f = only(findings(trace(h5f(), indep_dataset(), coll, nprocs=4),
                      "hdf5-independent-transfers"), Level.INFO)  # fmt: skip
    assert f.evidence["mpiio_collective"] == 8


def test_hdf5_independent_transfers_pass():
    assert findings(trace(h5f(), indep_dataset(coll=1), nprocs=4),
                    "hdf5-independent-transfers") == []  # fmt: skip
    assert findings(trace(h5f(), indep_dataset(), nprocs=1), "hdf5-independent-transfers") == []
    # File opened with another driver (sec2): collective transfers do not apply.
    assert findings(trace(h5f(mpiio=0), indep_dataset(), nprocs=4),
                    "hdf5-independent-transfers") == []  # fmt: skip


def test_hdf5_dataset_parent_found_by_name_in_old_logs():
    # Darshan before 3.4 left parent_id at 0: the file is found from "<file>:<dataset>".
    names = {1: "/run/out.h5", 11: "/run/out.h5:/group/data"}
    tr = trace(h5f(), indep_dataset(parent=0), nprocs=4, names=names)
    f = only(findings(tr, "hdf5-independent-transfers"))
    assert f.files[0].path == "/run/out.h5:/group/data"
    assert f.evidence["files"] == 1


def meta_posix(small_per_rank, ranks=4):
    rows = [{"file": 1, "rank": r, "POSIX_READS": s + 4, "POSIX_SIZE_READ_100_1K": s,
             "POSIX_SIZE_READ_1M_4M": 4}
            for r, s in zip(range(ranks), small_per_rank, strict=True)]  # fmt: skip
    return counters("POSIX", rows)


def test_hdf5_metadata_reads_every_rank():
    tr = trace(h5f(), meta_posix([5, 5, 5, 5]), nprocs=4)
    f = only(findings(tr, "hdf5-metadata-reads"), Level.WARN)
    assert f.evidence["ranks_reading"] == 4 and f.evidence["ranks_opening"] == 4
    assert f.evidence["small_reads"] == 20
    assert "H5Pset_all_coll_metadata_ops" in f.snippet


def test_hdf5_metadata_reads_pass():
    # Collective metadata: only rank 0 reads the small pieces.
    assert findings(trace(h5f(), meta_posix([9, 0, 0, 0]), nprocs=4), "hdf5-metadata-reads") == []
    # Serial job, or a file that is not HDF5.
    assert findings(trace(h5f(), meta_posix([5], ranks=1), nprocs=1),
                    "hdf5-metadata-reads") == []  # fmt: skip
    plain = trace(meta_posix([5, 5, 5, 5]), nprocs=4, names={1: "/run/data.bin"})
    assert findings(plain, "hdf5-metadata-reads") == []


def test_hdf5_metadata_reads_reduced_record_is_only_likely():
    row = {"file": 1, "rank": -1, "POSIX_READS": 24, "POSIX_SIZE_READ_0_100": 20,
           "POSIX_SIZE_READ_1M_4M": 4}  # fmt: skip
    reduced = counters("POSIX", [row])
    f = only(findings(trace(h5f(), reduced, nprocs=4), "hdf5-metadata-reads"), Level.INFO)
    assert f.evidence["small_reads"] == 20
    # Fewer small reads than ranks cannot mean every rank read.
    few = counters("POSIX", [{"file": 1, "rank": -1, "POSIX_READS": 3, "POSIX_SIZE_READ_0_100": 3}])
    assert findings(trace(h5f(), few, nprocs=16), "hdf5-metadata-reads") == []


def test_hdf5_metadata_reads_from_dxt_are_exact():
    reduced = counters("POSIX", [{"file": 1, "rank": -1, "POSIX_READS": 12,
                                  "POSIX_SIZE_READ_100_1K": 12}])  # fmt: skip
    # Four ranks read the same three metadata blocks.
    recs = records([(r, "r", 1, off, 512, 0.1, 0.2) for r in range(4) for off in (0, 800, 2048)])
    f = only(findings(trace(h5f(), reduced, recs=recs, nprocs=4), "hdf5-metadata-reads"),
             Level.WARN)  # fmt: skip
    assert f.evidence["ranks_reading"] == 4 and f.evidence["distinct_offsets"] == 3
    # DXT shows only rank 0 reading: no finding although the counters are reduced.
    one = records([(0, "r", 1, off, 512, 0.1, 0.2) for off in range(0, 12 * 512, 512)])
    assert findings(trace(h5f(), reduced, recs=one, nprocs=4), "hdf5-metadata-reads") == []


def misaligned_posix(bad=90, size=MiB, align=4096, file=1):
    row = {"file": file, "rank": -1, "POSIX_WRITES": 100, "POSIX_FILE_NOT_ALIGNED": bad,
           "POSIX_FILE_ALIGNMENT": align, "POSIX_ACCESS1_ACCESS": size,
           "POSIX_ACCESS1_COUNT": 90, "POSIX_ACCESS2_ACCESS": 512,
           "POSIX_ACCESS2_COUNT": 10}  # fmt: skip
    return counters("POSIX", [row])


def test_hdf5_alignment_uses_the_stripe_size():
    tr = trace(h5f(), misaligned_posix(), lustre=striping([(1, 4 * MiB, [0, 1, 2, 3])]))
    f = only(findings(tr, "hdf5-alignment"), Level.WARN)
    # Threshold: half the 1 MiB common request; alignment: the 4 MiB stripe.
    assert "H5Pset_alignment(fapl, 524288, 4194304)" in f.snippet
    assert f.evidence == {"misaligned": 90, "requests": 100, "common_request": MiB,
                          "alignment": 4 * MiB, "threshold": 512 * KiB}  # fmt: skip
    assert "90.0 %" in f.message and "Lustre stripe" in f.message


def test_hdf5_alignment_without_lustre_and_by_name():
    f = only(findings(trace(h5f(), misaligned_posix(size=128 * KiB)), "hdf5-alignment"))
    assert "H5Pset_alignment(fapl, 65536, 4096)" in f.snippet  # at least 64 KiB
    # No HDF5 module in the log, but the file is named like one.
    f = only(findings(trace(misaligned_posix(), names={1: "/run/field.h5"}), "hdf5-alignment"))
    assert "HDF5 by its name" in f.message


def test_hdf5_alignment_pass():
    assert findings(trace(h5f(), misaligned_posix(bad=5)), "hdf5-alignment") == []
    # Small common requests: alignment is not what limits them.
    assert findings(trace(h5f(), misaligned_posix(size=4 * KiB)), "hdf5-alignment") == []
    assert findings(trace(misaligned_posix(), names={1: "/run/a.bin"}), "hdf5-alignment") == []


def chunked(chunk, access_len, access, npoints=10**9, tsize=8, ndims=2):
    row = {"file": 11, "parent": 1, "H5D_WRITES": 10, "H5D_DATATYPE_SIZE": tsize,
           "H5D_DATASPACE_NDIMS": ndims, "H5D_DATASPACE_NPOINTS": npoints,
           "H5D_ACCESS1_ACCESS": access, "H5D_ACCESS1_COUNT": 10}  # fmt: skip
    for i, c in enumerate(chunk, start=1):  # Darshan: D1 is the fastest dimension
        row[f"H5D_CHUNK_SIZE_D{i}"] = c
    for i, n in zip(range(5, 5 - len(access_len), -1), access_len, strict=True):
        row[f"H5D_ACCESS1_LENGTH_D{i}"] = n  # D5 is the slowest dimension
    return counters("H5D", [row])


def test_hdf5_chunks_below_minimum_use_access_shape():
    # 16 x 16 doubles = 2 KiB chunks; writes of 512 x 256 doubles = 1 MiB.
    d = chunked([16, 16], [512, 256], 512 * 256 * 8)
    f = only(findings(trace(h5f(), d), "hdf5-chunking"), Level.WARN)
    assert "hsize_t chunk[2] = {512, 256};" in f.snippet
    assert f.evidence["chunk_bytes"] == 2 * KiB and f.evidence["access_bytes"] == MiB
    assert "[16, 16]" in f.message and "512x a chunk" in f.message


def test_hdf5_chunks_much_smaller_than_access_are_capped():
    # 1 MiB chunks (C order 1024 x 128), 128 MiB accesses (4096 x 4096 doubles).
    d = chunked([128, 1024], [4096, 4096], 128 * MiB)
    f = only(findings(trace(h5f(), d), "hdf5-chunking"))
    assert "128x a chunk" in f.message
    # The access shape would make 128 MiB chunks: halved to stay at 64 MiB.
    assert "hsize_t chunk[2] = {2048, 4096};" in f.snippet


def test_hdf5_chunking_pass():
    contiguous = chunked([], [512, 256], MiB)
    assert findings(trace(h5f(), contiguous), "hdf5-chunking") == []
    # A tiny dataset held in one chunk.
    whole = chunked([10, 10], [10, 10], 800, npoints=100)
    assert findings(trace(h5f(), whole), "hdf5-chunking") == []
    # 4 MiB chunks for 32 MiB accesses (as in the openPMD log): fine.
    fine = chunked([64, 128, 64], [64, 256, 256], 32 * MiB, ndims=3)
    assert findings(trace(h5f(), fine), "hdf5-chunking") == []


# ------------------------------------------------------------------ PnetCDF


def var(file, indep_w=0, coll_w=0, indep_r=0, **extra):
    row = {"file": file, "parent": 1, "rank": -1, "PNETCDF_VAR_INDEP_WRITES": indep_w,
           "PNETCDF_VAR_COLL_WRITES": coll_w, "PNETCDF_VAR_INDEP_READS": indep_r}  # fmt: skip
    row.update(extra)
    return row


def pfile():
    return counters("PNETCDF_FILE", [{"file": 1, "rank": -1, "PNETCDF_FILE_OPENS": 4}])


def test_pnetcdf_independent():
    v = counters("PNETCDF_VAR", [var(11, indep_w=16, indep_r=16)])
    f = only(findings(trace(pfile(), v, nprocs=4), "pnetcdf-independent"), Level.WARN)
    assert f.evidence == {"independent_reads": 16, "independent_writes": 16, "collective": 0,
                          "variables": 1}  # fmt: skip
    assert "none is collective" in f.message and "_all" in f.snippet
    low = counters("PNETCDF_VAR", [var(11, indep_w=100, coll_w=10)])
    f = only(findings(trace(pfile(), low, nprocs=4), "pnetcdf-independent"))
    assert "only 9.1 % are collective" in f.message


def test_pnetcdf_independent_pass():
    mostly = counters("PNETCDF_VAR", [var(11, indep_w=10, coll_w=100)])
    assert findings(trace(pfile(), mostly, nprocs=4), "pnetcdf-independent") == []
    alone = counters("PNETCDF_VAR", [var(11, indep_w=16)])
    assert findings(trace(pfile(), alone, nprocs=1), "pnetcdf-independent") == []
    # File per process: rank 0's own file, no reduced or multi-rank record.
    own = counters("PNETCDF_VAR", [{**var(11, indep_w=16), "rank": 0}])
    own_file = counters("PNETCDF_FILE", [{"file": 1, "rank": 0, "PNETCDF_FILE_OPENS": 1}])
    assert findings(trace(own_file, own, nprocs=4), "pnetcdf-independent") == []


def test_pnetcdf_blocking_many_vars():
    v = counters("PNETCDF_VAR", [var(11 + k, coll_w=5) for k in range(3)])
    f = only(findings(trace(pfile(), v, nprocs=4), "pnetcdf-blocking-many-vars"), Level.INFO)
    assert f.evidence == {"variables": 3, "blocking_writes": 15, "files": 1}
    assert f.files[0].numbers == {"variables written": 3, "blocking writes": 15}
    assert "ncmpi_wait_all" in f.snippet


def test_pnetcdf_blocking_many_vars_pass():
    nb = counters("PNETCDF_VAR", [var(11, coll_w=5), var(12, coll_w=5, PNETCDF_VAR_IPUT_VARA=2)])
    assert findings(trace(pfile(), nb, nprocs=4), "pnetcdf-blocking-many-vars") == []
    one = counters("PNETCDF_VAR", [var(11, coll_w=50)])
    assert findings(trace(pfile(), one, nprocs=4), "pnetcdf-blocking-many-vars") == []


def test_pnetcdf_small_requests():
    v = counters("PNETCDF_VAR", [var(11, coll_w=600, PNETCDF_VAR_SIZE_WRITE_AGG_0_100=500,
                                     PNETCDF_VAR_SIZE_WRITE_AGG_1M_4M=100)])  # fmt: skip
    f = only(findings(trace(pfile(), v, nprocs=4), "pnetcdf-small-requests"), Level.WARN)
    assert f.evidence == {"small_reads": 0, "small_writes": 500, "accesses": 600}
    assert "83.3 %" in f.message
    few = counters("PNETCDF_VAR", [var(11, coll_w=50, PNETCDF_VAR_SIZE_WRITE_AGG_0_100=50)])
    assert findings(trace(pfile(), few, nprocs=4), "pnetcdf-small-requests") == []


# ------------------------------------------------------------------- Lustre


def shared_file(file=1, nbytes=GiB, size=4 * MiB, count=256, **extra):
    row = {"file": file, "rank": -1, "POSIX_WRITES": count, "POSIX_BYTES_WRITTEN": nbytes,
           "POSIX_ACCESS1_ACCESS": size, "POSIX_ACCESS1_COUNT": count}  # fmt: skip
    row.update(extra)
    return row


def test_lustre_single_stripe_shared():
    p = counters("POSIX", [shared_file()])
    tr = trace(p, nprocs=32, lustre=striping([(1, MiB, [7])]), names={1: "/lus/run/out.dat"})
    f = only(findings(tr, "lustre-single-stripe-shared"), Level.HIGH)
    # 32 ranks, OST count unknown beyond one: 16 stripes of the 4 MiB request size.
    assert "lfs setstripe -c 16 -S 4M /lus/run" in f.snippet
    assert f.evidence["max_ranks"] == 32 and f.evidence["bytes"] == GiB
    # Another file in the log shows 24 OSTs exist: use them.
    p2 = counters("POSIX", [shared_file(), shared_file(file=2, nbytes=MiB)])
    lay = striping([(1, MiB, [7]), (2, MiB, list(range(24)))])
    f = only(findings(trace(p2, nprocs=32, lustre=lay), "lustre-single-stripe-shared"))
    assert "-c 24 " in f.snippet


def test_lustre_single_stripe_pass():
    p = counters("POSIX", [shared_file()])
    assert findings(trace(p, nprocs=32, lustre=striping([(1, MiB, [0, 1, 2, 3])])),
                    "lustre-single-stripe-shared") == []  # fmt: skip
    # Four ranks on one OST (as in the mpi-io-test logs): at the threshold, not above.
    assert findings(trace(p, nprocs=4, lustre=striping([(1, MiB, [0])])),
                    "lustre-single-stripe-shared") == []  # fmt: skip
    small = counters("POSIX", [shared_file(nbytes=10 * MiB)])
    assert findings(trace(small, nprocs=32, lustre=striping([(1, MiB, [0])])),
                    "lustre-single-stripe-shared") == []  # fmt: skip
    assert findings(trace(p, nprocs=32), "lustre-single-stripe-shared") == []  # no layout


def test_lustre_request_mismatch_large_requests():
    # 1.5 MiB requests on 1 MiB stripes: every one ends inside a stripe.
    p = counters("POSIX", [shared_file(size=3 * MiB // 2, count=1000)])
    tr = trace(p, nprocs=8, lustre=striping([(1, MiB, [0, 1, 2, 3])]))
    f = only(findings(tr, "lustre-stripe-request-mismatch"), Level.WARN)
    assert f.evidence["crossing"] == 1000 and f.evidence["requests"] == 1000
    assert f.evidence["exact"] is False and "100.0 %" in f.message
    assert "cb_buffer_size" in f.snippet
    # 1.5 MiB stripes would hold each request whole: the snippet sets them.
    assert "-S 1536K" in f.snippet and "(1536K here)" in f.recommendation


def test_lustre_request_mismatch_snippet_keeps_a_stripe_size_already_in_use():
    # 768 KiB back-to-back requests on 1 MiB stripes: 1 MiB is also what suits
    # them, so no layout command (it would set what is there), only the
    # collective buffer hint.
    p = counters("POSIX", [shared_file(size=768 * KiB, count=1000, POSIX_CONSEC_WRITES=1000)])
    tr = trace(p, nprocs=8, lustre=striping([(1, MiB, [0, 1, 2, 3])]))
    f = only(findings(tr, "lustre-stripe-request-mismatch"), Level.WARN)
    assert "lfs setstripe" not in f.snippet and "cb_buffer_size" in f.snippet
    assert " here)" not in f.recommendation


def test_lustre_request_mismatch_small_requests_need_back_to_back():
    # 768 KiB requests written back to back: 3 in 4 cross a 1 MiB boundary.
    lay = striping([(1, MiB, [0, 1, 2, 3])])
    seq = counters("POSIX", [shared_file(size=768 * KiB, count=1000, POSIX_CONSEC_WRITES=1000)])
    f = only(findings(trace(seq, nprocs=8, lustre=lay), "lustre-stripe-request-mismatch"))
    assert f.evidence["crossing"] == 750 and "75.0 %" in f.message
    # Strided (as ROMIO's Lustre driver writes inside stripe-aligned domains): no claim.
    strided = counters("POSIX", [shared_file(size=768 * KiB, count=1000)])
    assert findings(trace(strided, nprocs=8, lustre=lay), "lustre-stripe-request-mismatch") == []


def test_lustre_request_mismatch_from_dxt():
    lay = striping([(1, MiB, [0, 1, 2, 3])])
    p = counters("POSIX", [shared_file(size=768 * KiB, count=200)])
    # Back-to-back 768 KiB writes by two ranks: offsets known, so the count is exact.
    cross = records([(i % 2, "w", 1, i * 768 * KiB, 768 * KiB, 0.0, 0.1) for i in range(200)])
    f = only(findings(trace(p, recs=cross, nprocs=8, lustre=lay),
                      "lustre-stripe-request-mismatch"))  # fmt: skip
    assert f.evidence["exact"] is True and "DXT" in f.message
    # Every 3 MiB holds 4 requests; the ones over 1 MiB and 2 MiB cross, the one
    # ending at 3 MiB does not (the size-based estimate would say 3 in 4).
    assert f.evidence["crossing"] == 100
    # Each 768 KiB piece at the start of its own stripe: nothing crosses.
    inside = records([(i % 2, "w", 1, i * MiB, 768 * KiB, 0.0, 0.1) for i in range(200)])
    assert findings(trace(p, recs=inside, nprocs=8, lustre=lay),
                    "lustre-stripe-request-mismatch") == []  # fmt: skip


def test_lustre_request_mismatch_pass():
    lay = striping([(1, MiB, [0, 1, 2, 3])])
    whole = counters("POSIX", [shared_file(size=4 * MiB, POSIX_CONSEC_WRITES=256)])
    assert findings(trace(whole, nprocs=8, lustre=lay), "lustre-stripe-request-mismatch") == []
    # One stripe: crossing a boundary stays on the same OST.
    odd = counters("POSIX", [shared_file(size=3 * MiB // 2, count=1000)])
    assert findings(trace(odd, nprocs=8, lustre=striping([(1, MiB, [0])])),
                    "lustre-stripe-request-mismatch") == []  # fmt: skip


def test_lustre_ost_imbalance_even_spread():
    p = counters("POSIX", [shared_file(file=1, nbytes=2 * GiB),
                           shared_file(file=2, nbytes=100 * MiB)])  # fmt: skip
    lay = striping([(1, MiB, [0]), (2, MiB, [1, 2, 3, 4])])
    f = only(findings(trace(p, nprocs=8, lustre=lay), "lustre-ost-imbalance"), Level.WARN)
    # OST 0 holds 2048 MiB of 2148 MiB over 5 OSTs: 4.77x the mean.
    assert f.evidence["busiest_ost"] == 0 and f.evidence["ratio"] == pytest.approx(4.767, 1e-3)
    assert f.files[0].path == "/data/file1" and "evenly" in f.message
    assert "lfs setstripe -c 5 " in f.snippet


def test_lustre_ost_imbalance_pass():
    p = counters("POSIX", [shared_file(file=k, nbytes=GiB) for k in (1, 2)])
    lay = striping([(1, MiB, [0, 1]), (2, MiB, [2, 3])])
    assert findings(trace(p, nprocs=8, lustre=lay), "lustre-ost-imbalance") == []
    tiny = counters("POSIX", [shared_file(file=1, nbytes=MiB), shared_file(file=2, nbytes=1)])
    assert findings(trace(tiny, lustre=striping([(1, MiB, [0]), (2, MiB, [1])])),
                    "lustre-ost-imbalance") == []  # fmt: skip


def test_lustre_ost_imbalance_uses_dxt_offsets():
    # Striped over OSTs 5 and 6, but every write lands in even stripes: all on OST 5.
    p = counters("POSIX", [shared_file(nbytes=200 * MiB, count=100)])
    recs = records([(0, "w", 1, 2 * i * MiB, 2 * MiB // 2, 0.0, 0.1) for i in range(100)])
    lay = striping([(1, MiB, [5, 6])])
    f = only(findings(trace(p, recs=recs, nprocs=8, lustre=lay), "lustre-ost-imbalance"))
    assert f.evidence["busiest_ost"] == 5 and f.evidence["ratio"] == 2.0
    assert "DXT" in f.message
    # Counters alone spread the file evenly over its two OSTs.
    assert findings(trace(p, nprocs=8, lustre=lay), "lustre-ost-imbalance") == []


def test_lustre_ost_imbalance_never_suggests_the_stripe_count_in_use():
    # Striped over 4 OSTs already, but every write lands in the first stripe of
    # each 4 MiB: the usual suggestion (4 stripes, the OSTs in use) is what the
    # file has, so more stripes are suggested instead.
    p = counters("POSIX", [shared_file(nbytes=100 * MiB, count=100)])
    recs = records([(0, "w", 1, 4 * i * MiB, MiB, 0.0, 0.1) for i in range(100)])
    lay = striping([(1, MiB, [0, 1, 2, 3])])
    f = only(findings(trace(p, recs=recs, nprocs=8, lustre=lay), "lustre-ost-imbalance"))
    assert f.evidence["busiest_ost"] == 0 and f.evidence["ratio"] == 4.0
    assert "-c 4 " not in f.snippet and "lfs setstripe -c 8 " in f.snippet
    # With 64 stripes in use, the only larger choice is every OST.
    lay64 = striping([(1, MiB, list(range(64)))])
    recs64 = records([(0, "w", 1, 64 * i * MiB, MiB, 0.0, 0.1) for i in range(100)])
    f = only(findings(trace(p, recs=recs64, nprocs=8, lustre=lay64), "lustre-ost-imbalance"))
    assert "lfs setstripe -c -1 " in f.snippet and '"striping_factor", "-1"' not in f.snippet


def slow_posix(slow_secs):
    rows = []
    for k in range(10):  # two 100 MiB files per OST 0..4; OST 4's files are slow
        secs = slow_secs if k >= 8 else 1.0
        rows.append({"file": k + 1, "rank": k, "POSIX_WRITES": 100,
                     "POSIX_BYTES_WRITTEN": 100 * MiB, "POSIX_F_WRITE_TIME": secs})  # fmt: skip
    lay = striping([(k + 1, MiB, [k // 2]) for k in range(10)])
    return trace(counters("POSIX", rows), nprocs=10, lustre=lay)


def test_lustre_slow_ost():
    f = only(findings(slow_posix(50.0), "lustre-slow-ost"), Level.WARN)
    assert f.evidence["slow_osts"] == "4" and f.evidence["slowdown"] == 50.0
    assert f.evidence["typical_mib_s"] == 100.0 and f.files_total == 2
    assert "lfs df" in f.snippet and "-o " in f.snippet and ",4" not in f.snippet


def test_lustre_slow_ost_pass():
    assert findings(slow_posix(1.0), "lustre-slow-ost") == []
    assert findings(slow_posix(2.0), "lustre-slow-ost") == []  # 2x: below the 3x threshold


# --------------------------------------------------------------- real logs


def diagnosis(path: Path):
    d = diagnose(load(str(path)))
    failed = [w for w in d.warnings if w.startswith("check ") and w.split()[1] in MINE]
    assert not failed, failed
    return {f.check: f for f in d.findings if f.check in MINE}


@pytest.mark.parametrize("name", sorted(p.name for p in example_dir().glob("*.darshan")))
def test_example_logs_run_cleanly(name):
    got = diagnosis(example_dir() / name)
    assert all(f.message and f.recommendation for f in got.values())


def test_example_ior_hdf5():
    got = diagnosis(example_dir() / "ior_hdf5_example.darshan")
    assert got["hdf5-independent-transfers"].level == Level.WARN
    assert got["hdf5-independent-transfers"].evidence["mpiio_collective"] == 0
    meta = got["hdf5-metadata-reads"]  # DXT: all 4 ranks read the same few offsets
    assert meta.level == Level.WARN and meta.evidence["ranks_reading"] == 4
    assert "H5Pset_alignment(fapl, 131072, 1048576)" in got["hdf5-alignment"].snippet
    assert not {k for k in got if k.startswith("lustre-")}  # 8 MiB on one stripe


def test_example_vpicio_alignment_and_badost():
    got = diagnosis(example_dir() / "example.darshan")
    f = got["hdf5-alignment"]  # 128 MiB writes of vpicio.hdf5, found by its name
    assert "H5Pset_alignment(fapl, 67108864, 1048576)" in f.snippet
    assert f.evidence["misaligned"] == 16401
    assert not {k for k in got if k.startswith("lustre-")}  # 24 stripes, balanced
    bad = diagnosis(example_dir() / "sample-badost.darshan")
    assert bad["lustre-slow-ost"].evidence["slow_osts"] == "14"
    assert bad["lustre-slow-ost"].evidence["slowdown"] > 10
    # Bytes are balanced over the 24 OSTs: the problem is speed, not load.
    assert "lustre-ost-imbalance" not in bad and "lustre-single-stripe-shared" not in bad


@pytest.mark.parametrize("name", shared_logs())
def test_shared_logs_run_cleanly(name):
    got = diagnosis(SHARED / name)
    assert all(f.files_total >= 1 for f in got.values())


@needs_shared
def test_shared_hdf5_logs():
    one_byte = diagnosis(SHARED / "hdf5_diagonal_write_1_byte_dxt.darshan")
    f = one_byte["hdf5-small-dataset-access"]
    assert f.level == Level.WARN and f.evidence["mean_bytes"] == 1.0
    assert f.evidence["accesses"] == 10
    (ior,) = SHARED.glob("shane_ior-HDF5_*.darshan")
    got = diagnosis(ior)
    assert got["hdf5-independent-transfers"].evidence["reads"] == 16
    assert got["hdf5-metadata-reads"].level == Level.INFO  # reduced record: not certain
    (jlbez,) = SHARED.glob("jlbez_8a_*.darshan")
    got = diagnosis(jlbez)  # collective transfers and metadata, 4 MiB chunks
    assert not {"hdf5-independent-transfers", "hdf5-metadata-reads", "hdf5-chunking",
                "hdf5-alignment", "hdf5-small-dataset-access"} & set(got)  # fmt: skip


@needs_shared
def test_shared_pnetcdf_logs():
    (ior,) = SHARED.glob("shane_ior-PNETCDF_*.darshan")
    got = diagnosis(ior)
    f = got["pnetcdf-independent"]
    assert f.evidence["independent_reads"] == 16 and f.evidence["independent_writes"] == 16
    assert "pnetcdf-blocking-many-vars" not in got  # a single variable
    assert "pnetcdf-small-requests" not in got  # 32 requests of 256 KiB
    e3sm = diagnosis(SHARED / "e3sm_io_heatmap_only.darshan")
    assert not {k for k in e3sm if k.startswith("pnetcdf-")}  # PNETCDF_FILE only
    # Aggregators write inside stripe-aligned domains (strides of 56 MiB).
    assert not {k for k in e3sm if k.startswith("lustre-")}


@needs_shared
def test_shared_lustre_logs():
    for v in ("3.4.6", "3.4.7", "3.5.0"):  # 4 ranks, 64 MiB, one stripe
        assert not diagnosis(SHARED / f"mpi-io-test-x86_64-{v}.darshan")
    (ckpt,) = SHARED.glob("snyder_python3_id3116902-2110365_*.darshan")
    f = diagnosis(ckpt)["lustre-ost-imbalance"]
    assert f.evidence["busiest_ost"] == 5 and f.evidence["ratio"] > 7
    assert f.files[0].path.endswith("model-5-7-0.pt")
