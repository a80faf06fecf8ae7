"""Lustre checks with the evidence, rows and cost worked out by hand, and both
sides of every threshold (lustre_shared_ranks, lustre_min_bytes,
misaligned_ratio, ost_imbalance, slow_ost_ratio, slow_ost_min_time)."""

from __future__ import annotations

import pytest

from iopilot.checks import Level
from iopilot.checks.lustre import _dir, stripe_for
from kit import counters, findings, only, records, striping, trace

KiB, MiB, GiB = 1024, 1024**2, 1024**3



def _shared(file=1, nbytes=GiB, size=4 * MiB, count=256, rank=-1, **extra):
    row = {"file": file, "rank": rank, "POSIX_WRITES": count, "POSIX_BYTES_WRITTEN": nbytes,
           "POSIX_ACCESS1_ACCESS": size, "POSIX_ACCESS1_COUNT": count}  # fmt: skip
    return row | extra


@pytest.mark.parametrize(("size", "stripe"), [
    (0, MiB), (512 * KiB, MiB), (MiB - 1, MiB), (MiB, MiB), (3 * MiB, 3 * MiB),
    (64 * MiB, 64 * MiB), (MiB + 1, 2 * MiB), (64 * MiB + 64 * KiB, 64 * MiB),
    (5 * MiB + 1, 8 * MiB),
])  # fmt: skip
def test_stripe_for_sizes(size, stripe):
    assert stripe_for(size) == stripe


def test_dir_of_a_path():
    assert _dir("/lus/run/out.dat") == "/lus/run"
    assert _dir("out.dat") == "DIR"
    assert _dir("<STDOUT>") == "DIR"


# ------------------------------------------------------- single stripe shared


def test_single_stripe_evidence_by_hand():
    tr = trace(counters("POSIX", [_shared()]), nprocs=5, lustre=striping([(1, MiB, [7])]),
               names={1: "/lus/run/out.dat"})  # fmt: skip
    f = only(findings(tr, "lustre-single-stripe-shared"), Level.HIGH)
    assert f.evidence == {
        "files": 1, "bytes": GiB, "max_ranks": 5, "suggested_stripe_count": 5,
        "suggested_stripe_size": 4 * MiB,
        "cost_unknown": "the bandwidth of OSTs the file does not use cannot be measured",
    }
    assert f.cost_seconds is None
    assert f.message == (
        "1 shared file(s) moving 1.0 GiB sit on a single OST (stripe count 1) although up to "
        "5 ranks access them: every request queues on one storage server.")
    assert [(e.path, e.numbers) for e in f.files] == [
        ("/lus/run/out.dat", {"bytes": GiB, "ranks": 5, "stripe count": 1})]
    assert f.recommendation.startswith(
        "Stripe such files over many OSTs before they are created: 5 stripes of 4M suit the "
        "5 ranks and the 4.0 MiB requests.")
    assert f.snippet.startswith("lfs setstripe -c 5 -S 4M /lus/run ")


def test_single_stripe_ranks_above_the_threshold_only():
    lay = striping([(1, MiB, [7])])
    # Per-rank rows: the ranks are counted, not the job's size.
    four = counters("POSIX", [_shared(rank=r, nbytes=GiB // 4) for r in range(4)])
    assert findings(trace(four, nprocs=100, lustre=lay), "lustre-single-stripe-shared") == []
    five = counters("POSIX", [_shared(rank=r, nbytes=GiB // 5) for r in range(5)])
    f = only(findings(trace(five, nprocs=100, lustre=lay), "lustre-single-stripe-shared"))
    assert f.evidence["max_ranks"] == 5
    assert only(findings(trace(four, nprocs=100, lustre=lay), "lustre-single-stripe-shared",
                         lustre_shared_ranks=3))  # fmt: skip


def test_single_stripe_bytes_above_the_threshold_only():
    lay = striping([(1, MiB, [7])])
    at = counters("POSIX", [_shared(nbytes=64 * MiB)])
    assert findings(trace(at, nprocs=8, lustre=lay), "lustre-single-stripe-shared") == []
    above = counters("POSIX", [_shared(nbytes=64 * MiB + 1)])
    assert only(findings(trace(above, nprocs=8, lustre=lay), "lustre-single-stripe-shared"))


def test_single_stripe_only_one_stripe_and_only_files_with_a_layout():
    p = counters("POSIX", [_shared()])
    two = striping([(1, MiB, [7, 8])])
    assert findings(trace(p, nprocs=8, lustre=two), "lustre-single-stripe-shared") == []
    other = striping([(2, MiB, [7])])  # a layout, but of another file
    assert findings(trace(p, nprocs=8, lustre=other), "lustre-single-stripe-shared") == []


def test_single_stripe_counts_sum_only_the_bad_files_and_the_stripe_count_is_capped():
    p = counters("POSIX", [_shared(file=1, nbytes=GiB), _shared(file=2, nbytes=2 * GiB),
                           _shared(file=3, nbytes=4 * GiB, size=0, count=0)])  # fmt: skip
    lay = striping([(1, MiB, [0]), (2, MiB, list(range(70))), (3, MiB, [1])])
    f = only(findings(trace(p, nprocs=100, lustre=lay), "lustre-single-stripe-shared"))
    assert f.evidence["files"] == 2 and f.evidence["bytes"] == 5 * GiB
    # 100 ranks, 70 OSTs known: at most 64 stripes.  The worst file (file 3)
    # has no common request size: the usual 1 MiB stripe, no size named.
    assert f.evidence["suggested_stripe_count"] == 64
    assert f.evidence["suggested_stripe_size"] == MiB
    assert "suit the 100 ranks. Set it" in f.recommendation
    assert [e.path for e in f.files] == ["/data/file3", "/data/file1"]
    few = trace(p, nprocs=100, lustre=striping([(1, MiB, [0]), (3, MiB, [1])]))
    assert only(findings(few, "lustre-single-stripe-shared")).evidence[
        "suggested_stripe_count"] == 16


# ------------------------------------------------------ stripe/request mismatch


def test_mismatch_evidence_by_hand():
    p = counters("POSIX", [_shared(size=3 * MiB // 2, count=1000)])
    tr = trace(p, nprocs=8, lustre=striping([(1, MiB, [0, 1, 2, 3])]))
    f = only(findings(tr, "lustre-stripe-request-mismatch"), Level.WARN)
    assert f.evidence == {
        "crossing": 1000, "requests": 1000, "stripe_size": MiB, "exact": False,
        "cost_unknown": "counters do not separate stripe-lock contention from request time",
    }
    assert [(e.path, e.numbers) for e in f.files] == [("/data/file1", {
        "crossing requests": 1000, "requests": 1000, "stripe size": MiB, "crossing %": 100.0})]
    assert f.message.startswith(
        "100.0 % of the requests to 1 striped shared file(s) (1,000 of 1,000) cross a stripe "
        "boundary (a lower bound estimated")
    assert "the common sizes (1.5 MiB) do not fit the 1.0 MiB stripes" in f.message
    assert "the stripe size match the request size (1536K here);" in f.recommendation
    assert f.snippet.startswith("lfs setstripe -c 4 -S 1536K /data ")
    assert 'MPI_Info_set(info, "cb_buffer_size", "6291456");' in f.snippet


@pytest.mark.parametrize(("consec", "flagged"), [(133, False), (134, True), (1000, True)])
def test_mismatch_share_of_back_to_back_requests_both_sides(consec, flagged):
    # 768 KiB back to back on 1 MiB stripes: 3 in 4 cross; the share counted
    # is 0.75 × consec / 1000, against misaligned_ratio 0.1.
    p = counters("POSIX", [_shared(size=768 * KiB, count=1000, POSIX_CONSEC_WRITES=consec)])
    fs = findings(trace(p, nprocs=8, lustre=striping([(1, MiB, [0, 1])])),
                  "lustre-stripe-request-mismatch")  # fmt: skip
    assert bool(fs) == flagged
    if flagged:
        assert fs[0].evidence["crossing"] == round(0.75 * consec)


def test_mismatch_needs_two_ranks_and_enough_bytes():
    lay = striping([(1, MiB, [0, 1])])
    p = counters("POSIX", [_shared(size=3 * MiB // 2, count=1000)])
    assert findings(trace(p, nprocs=1, lustre=lay), "lustre-stripe-request-mismatch") == []
    assert only(findings(trace(p, nprocs=2, lustre=lay), "lustre-stripe-request-mismatch"))
    at = counters("POSIX", [_shared(nbytes=64 * MiB, size=3 * MiB // 2, count=1000)])
    assert findings(trace(at, nprocs=8, lustre=lay), "lustre-stripe-request-mismatch") == []
    above = counters("POSIX", [_shared(nbytes=64 * MiB + 1, size=3 * MiB // 2, count=1000)])
    assert only(findings(trace(above, nprocs=8, lustre=lay), "lustre-stripe-request-mismatch"))


def test_mismatch_sizes_that_divide_or_multiply_the_stripe_never_cross():
    lay = striping([(1, MiB, [0, 1])])
    for size in (512 * KiB, 2 * MiB):
        p = counters("POSIX", [_shared(size=size, count=1000, POSIX_CONSEC_WRITES=1000)])
        assert findings(trace(p, nprocs=8, lustre=lay), "lustre-stripe-request-mismatch") == []


def test_mismatch_from_dxt_counts_each_request():
    lay = striping([(1, MiB, [0, 1])])
    p = counters("POSIX", [_shared(size=4 * MiB, count=4)])  # the counters see no problem
    # 4 requests: one inside a stripe, one from a stripe's start across the
    # next, one ending on a boundary, one across from the middle.
    rows = [(0, "w", 1, 0, 512 * KiB, 0.0, 0.1), (1, "w", 1, MiB, MiB + 1, 0.0, 0.1),
            (0, "w", 1, 3 * MiB + KiB, MiB - KiB, 0.0, 0.1),
            (1, "w", 1, 4 * MiB + KiB, MiB, 0.0, 0.1)]  # fmt: skip
    f = only(findings(trace(p, recs=records(rows), nprocs=8, lustre=lay),
                      "lustre-stripe-request-mismatch"))  # fmt: skip
    assert f.evidence["crossing"] == 2 and f.evidence["requests"] == 4
    assert f.evidence["exact"] is True
    assert "(per the DXT trace)" in f.message


# ------------------------------------------------------------- OST imbalance


def _two_osts(a_mib: float, b_mib: float, a_secs: float = 6.0, b_secs: float = 2.0):
    rows = [{"file": 1, "rank": 0, "POSIX_WRITES": 10, "POSIX_BYTES_WRITTEN": int(a_mib * MiB),
             "POSIX_F_WRITE_TIME": a_secs},
            {"file": 2, "rank": 1, "POSIX_WRITES": 10, "POSIX_BYTES_WRITTEN": int(b_mib * MiB),
             "POSIX_F_WRITE_TIME": b_secs}]  # fmt: skip
    return trace(counters("POSIX", rows), nprocs=2,
                 lustre=striping([(1, MiB, [0]), (2, MiB, [1])]))  # fmt: skip


def test_ost_imbalance_evidence_and_cost_by_hand():
    f = only(findings(_two_osts(400, 100), "lustre-ost-imbalance"), Level.WARN)
    assert f.evidence == {"busiest_ost": 0, "busiest_bytes": 400 * MiB, "mean_bytes": 250 * MiB,
                          "ratio": 1.6, "osts": 2, "bytes": 500 * MiB}  # fmt: skip
    # Rank 0, the slowest, spends 6 s on OST 0's file: 6 × (1 - 1/1.6).
    assert f.cost_seconds == pytest.approx(2.25)
    assert f.message.startswith(
        "OST 0 carries 400.0 MiB, 1.6x the mean of the 2 OSTs the job's files use (80.0 % of "
        "500.0 MiB; bytes per OST assuming each file's bytes spread evenly over its stripes). "
        "Busiest: OST 0: 400.0 MiB, OST 1: 100.0 MiB.")
    assert [(e.path, e.numbers) for e in f.files] == [("/data/file1", {
        "bytes on this OST": 400 * MiB, "file bytes": 400 * MiB, "stripe count": 1})]
    assert f.snippet.startswith("lfs setstripe -c 4 -S 1M /data ")


def test_ost_imbalance_ratio_and_bytes_both_sides():
    assert findings(_two_osts(300, 100), "lustre-ost-imbalance") == []  # 1.5: not above
    assert only(findings(_two_osts(301, 100), "lustre-ost-imbalance"))
    tr = _two_osts(400, 100)
    assert findings(tr, "lustre-ost-imbalance", lustre_min_bytes=500 * MiB) == []
    assert only(findings(tr, "lustre-ost-imbalance", lustre_min_bytes=500 * MiB - 1))


def test_ost_imbalance_needs_two_osts():
    rows = [{"file": 1, "rank": 0, "POSIX_WRITES": 10, "POSIX_BYTES_WRITTEN": GiB}]
    tr = trace(counters("POSIX", rows), lustre=striping([(1, MiB, [0])]))
    assert findings(tr, "lustre-ost-imbalance") == []


def test_ost_imbalance_with_dxt_on_part_of_the_files():
    rows = [{"file": 1, "rank": 0, "POSIX_WRITES": 2, "POSIX_BYTES_WRITTEN": 400 * MiB},
            {"file": 2, "rank": 1, "POSIX_WRITES": 2, "POSIX_BYTES_WRITTEN": 100 * MiB}]
    lay = striping([(1, MiB, [0, 1]), (2, MiB, [2])])
    # DXT saw half of file 1's bytes, all in even stripes (OST 0): scaled to 400 MiB.
    recs = records([(0, "w", 1, 2 * i * MiB, MiB, 0.0, 0.1) for i in range(200)])
    f = only(findings(trace(counters("POSIX", rows), recs=recs, nprocs=2, lustre=lay),
                      "lustre-ost-imbalance"))  # fmt: skip
    assert f.evidence["busiest_ost"] == 0 and f.evidence["busiest_bytes"] == 400 * MiB
    assert f.evidence["osts"] == 3 and f.evidence["bytes"] == 500 * MiB
    assert "from DXT offsets where traced, else spread evenly" in f.message


# ---------------------------------------------------------------- slow OST


def _slow(slow_secs: float = 50.0, osts: int = 5, slow_files: int = 2):
    rows = []
    n = 2 * (osts - 1) + slow_files
    for k in range(n):
        secs = slow_secs if k >= n - slow_files else 1.0
        rows.append({"file": k + 1, "rank": k, "POSIX_WRITES": 100,
                     "POSIX_BYTES_WRITTEN": 100 * MiB, "POSIX_F_WRITE_TIME": secs})  # fmt: skip
    lay = striping([(k + 1, MiB, [min(k // 2, osts - 1)]) for k in range(n)])
    return trace(counters("POSIX", rows), nprocs=n, lustre=lay)


def test_slow_ost_evidence_and_cost_by_hand():
    f = only(findings(_slow(), "lustre-slow-ost"), Level.WARN)
    assert f.evidence == {"slow_osts": "4", "median_mib_s": 2.0, "typical_mib_s": 100.0,
                          "slowdown": 50.0}  # fmt: skip
    assert f.message.startswith(
        "1 OST(s) are slow: files on OST 4 move data at a median 2.00 MiB/s against 100.00 "
        "MiB/s on the typical OST (50.0x slower, 2 files, 100.0 s of I/O).")
    # Rank 8 (one of the two slowest) spends 50 s there: 50 × (1 - 1/50).
    assert f.cost_seconds == pytest.approx(49.0)
    assert [(e.path, e.numbers) for e in f.files] == [
        ("/data/file9", {"seconds": 50.0, "MiB/s": 2.0, "OST": 4}),
        ("/data/file10", {"seconds": 50.0, "MiB/s": 2.0, "OST": 4})]
    assert f.snippet.startswith("lfs df -h /data ") and "compare OST(s) 4 with" in f.snippet


def test_slow_ost_thresholds_both_sides():
    tr = _slow()
    assert findings(tr, "lustre-slow-ost", slow_ost_ratio=50.0) == []
    assert only(findings(tr, "lustre-slow-ost", slow_ost_ratio=49.9))
    assert findings(tr, "lustre-slow-ost", slow_ost_min_time=100.0) == []
    assert only(findings(tr, "lustre-slow-ost", slow_ost_min_time=99.9))
    # Files of exactly small_request_size bytes count; one byte more, none do.
    assert only(findings(tr, "lustre-slow-ost", small_request_size=100 * MiB))
    assert findings(tr, "lustre-slow-ost", small_request_size=100 * MiB + 1) == []


def test_slow_ost_needs_two_files_on_it_and_three_osts():
    assert findings(_slow(slow_files=1), "lustre-slow-ost") == []
    assert only(findings(_slow(osts=3), "lustre-slow-ost"))
    assert findings(_slow(osts=2), "lustre-slow-ost") == []


def test_access_sizes_bytes_and_ranks_per_file():
    from iopilot.checks.base import Context
    from iopilot.checks.lustre import access_sizes, bytes_per_file, common_access, ranks_per_file
    from iopilot.checks.thresholds import defaults

    c = counters("POSIX", [
        {"file": 2, "rank": 0, "POSIX_ACCESS1_ACCESS": 0, "POSIX_ACCESS1_COUNT": 5,
         "POSIX_ACCESS2_ACCESS": 4096, "POSIX_ACCESS2_COUNT": 1,
         "POSIX_ACCESS3_ACCESS": 512, "POSIX_ACCESS3_COUNT": 0, "POSIX_BYTES_READ": 7},
        {"file": 2, "rank": 1, "POSIX_ACCESS1_ACCESS": 4096, "POSIX_ACCESS1_COUNT": 6,
         "POSIX_BYTES_WRITTEN": 5, "POSIX_BYTES_READ": -1},
        {"file": 1, "rank": -1, "POSIX_ACCESS4_ACCESS": 64, "POSIX_ACCESS4_COUNT": 1},
    ])  # fmt: skip
    fids, sizes, counts = access_sizes(c)
    # Zero-byte accesses count; a size seen zero times does not.
    assert list(zip(fids.tolist(), sizes.tolist(), counts.tolist(), strict=True)) == [
        (1, 64, 1), (2, 0, 5), (2, 4096, 7)]
    ids, size, count = common_access(c)
    assert ids.tolist() == [1, 2] and size.tolist() == [64, 4096] and count.tolist() == [1, 7]
    ctx = Context(trace(c, nprocs=8), defaults())
    ids, moved = bytes_per_file(ctx, c)
    assert ids.tolist() == [1, 2] and moved.tolist() == [0, 12]  # -1 is unknown: 0
    ids, ranks = ranks_per_file(ctx, c)
    assert ranks.tolist() == [8, 2]  # a reduced row stands for every rank
