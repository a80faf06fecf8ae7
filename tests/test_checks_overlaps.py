"""Bytes read more than once, with the evidence, rows and cost worked out by
hand, and both sides of reread_share and reread_min_bytes."""

from __future__ import annotations

import pytest

from iopilot.checks import Level, advice
from kit import findings, only, records, trace

MiB = 1024**2
# File 1: ranks 0 and 1 read the same 2 MiB; file 2: rank 0 reads 1 MiB twice.
ROWS = [(0, "r", 1, 0, 2 * MiB, 0.0, 1.0), (0, "r", 2, 0, MiB, 2.0, 2.5),
        (0, "r", 2, 0, MiB, 2.5, 3.0), (1, "r", 1, 0, 2 * MiB, 1.0, 2.0)]  # fmt: skip



def test_rereads_by_hand():
    f = only(findings(trace(recs=records(ROWS), nprocs=2), "overlapping-reads"), Level.INFO)
    assert f.evidence == {"bytes_read": 6 * MiB, "distinct_bytes": 3 * MiB,
                          "reread_bytes": 3 * MiB, "reread_by_other_ranks": 2 * MiB,
                          "reread_by_same_rank": MiB, "reread_by_mpiio_itself": 0,
                          "files": 2}  # fmt: skip
    assert f.message.startswith(
        "3.0 MiB of 6.0 MiB read through POSIX (50.0 %) are bytes read before (3.0 MiB of "
        "distinct data): 2.0 MiB re-read by other ranks, 1.0 MiB by the same rank, on 2 "
        "file(s).")
    assert [(e.path, e.numbers) for e in f.files] == [
        ("/data/file1", {"bytes read again": 2 * MiB, "by the same rank": 0,
                         "by other ranks": 2 * MiB, "bytes read": 4 * MiB}),
        ("/data/file2", {"bytes read again": MiB, "by the same rank": MiB,
                         "by other ranks": 0, "bytes read": 2 * MiB})]  # fmt: skip
    assert f.snippet == advice.READ_ONCE_BCAST
    assert f.recommendation.startswith("Several ranks read the same bytes")
    # Rank 0, the slowest: half of each file's bytes were repeats, 1 s on each.
    assert f.cost_seconds == pytest.approx(1.0)


def test_share_and_bytes_both_sides():
    tr = trace(recs=records(ROWS), nprocs=2)
    # A share of exactly 0.5 is not above it; 3 MiB again is enough bytes.
    only(findings(tr, "overlapping-reads", reread_share=0.5), Level.INFO)
    only(findings(tr, "overlapping-reads", reread_share=0.49), Level.WARN)
    only(findings(tr, "overlapping-reads", reread_share=0.49, reread_min_bytes=3 * MiB),
         Level.WARN)  # fmt: skip
    only(findings(tr, "overlapping-reads", reread_share=0.49, reread_min_bytes=3 * MiB + 1),
         Level.INFO)  # fmt: skip


def test_same_rank_rereads_are_kept_in_memory():
    rows = [(0, "r", 2, 0, MiB, 0.0, 0.5), (0, "r", 2, 0, MiB, 0.5, 1.0),
            (0, "r", 2, 0, MiB, 1.0, 1.5), (1, "r", 1, 0, 10, 0.0, 0.1),
            (2, "r", 1, 5, 10, 0.0, 0.1)]  # fmt: skip
    f = only(findings(trace(recs=records(rows), nprocs=3), "overlapping-reads"))
    assert f.evidence["reread_by_same_rank"] == 2 * MiB
    assert f.evidence["reread_by_other_ranks"] == 5
    assert f.recommendation == "Ranks re-read bytes they already read: keep them in memory instead."
    assert f.snippet == ""


def test_no_reread_no_finding():
    rows = [(0, "r", 1, 0, MiB, 0.0, 1.0), (1, "r", 1, MiB, MiB, 0.0, 1.0),
            (0, "w", 1, 0, MiB, 1.0, 2.0)]  # fmt: skip
    assert findings(trace(recs=records(rows), nprocs=2), "overlapping-reads") == []
