"""Files every rank of a trace touched become one shared row (rank -1), as
Darshan writes them: sums, maxima, the earliest open, fastest and slowest rank."""

from __future__ import annotations

import pytest

from iopilot.sources.trace_counters import _reduce_shared
from kit import counters


def _posix():
    shared = [
        {"file": 1, "rank": 0, "POSIX_READS": 2, "POSIX_BYTES_READ": 100,
         "POSIX_F_READ_TIME": 1.0, "POSIX_F_META_TIME": 0.5, "POSIX_MAX_BYTE_READ": 99,
         "POSIX_F_MAX_READ_TIME": 0.75, "POSIX_F_OPEN_START_TIMESTAMP": 2.0},
        {"file": 1, "rank": 1, "POSIX_READS": 3, "POSIX_BYTES_READ": 50,
         "POSIX_BYTES_WRITTEN": 200, "POSIX_F_READ_TIME": 0.25, "POSIX_F_WRITE_TIME": 3.0,
         "POSIX_MAX_BYTE_READ": 499, "POSIX_F_MAX_READ_TIME": 0.25},  # never opened: 0
        {"file": 1, "rank": 2, "POSIX_READS": 1, "POSIX_BYTES_READ": 10,
         "POSIX_F_READ_TIME": 0.1, "POSIX_MAX_BYTE_READ": 9, "POSIX_F_MAX_READ_TIME": 0.1,
         "POSIX_F_OPEN_START_TIMESTAMP": 1.5},
    ]  # fmt: skip
    # file 2: two of the three ranks, not shared
    own = [{"file": 2, "rank": r, "POSIX_READS": 1 + r, "POSIX_MAX_BYTE_READ": 7} for r in (0, 1)]
    return counters("POSIX", [own[0], *shared, own[1]])


def test_a_file_of_every_rank_becomes_one_shared_row():
    out = _reduce_shared(_posix(), 3)
    assert out.file_id.tolist() == [2, 2, 1]
    assert out.rank.tolist() == [0, 1, -1]
    assert out["POSIX_READS"].tolist() == [1, 2, 6]
    row = out.select(out.rank == -1)
    # sums
    assert row["POSIX_BYTES_READ"].tolist() == [160]
    assert row["POSIX_BYTES_WRITTEN"].tolist() == [200]
    assert row["POSIX_F_READ_TIME"].tolist() == [1.35]
    # maxima, not sums
    assert row["POSIX_MAX_BYTE_READ"].tolist() == [499]
    assert row["POSIX_F_MAX_READ_TIME"].tolist() == [0.75]
    # the earliest open of the ranks that opened it
    assert row["POSIX_F_OPEN_START_TIMESTAMP"].tolist() == [1.5]
    # busy seconds per rank: 1.5, 3.25, 0.1; bytes: 100, 250, 10
    assert row["POSIX_FASTEST_RANK"].tolist() == [2]
    assert row["POSIX_SLOWEST_RANK"].tolist() == [1]
    assert row["POSIX_FASTEST_RANK_BYTES"].tolist() == [10]
    assert row["POSIX_SLOWEST_RANK_BYTES"].tolist() == [250]
    assert row["POSIX_F_FASTEST_RANK_TIME"].tolist() == [0.1]
    assert row["POSIX_F_SLOWEST_RANK_TIME"].tolist() == [3.25]
    # population variances: (0.11667² + 1.63333² + 1.51667²) / 3 and (20² + 130² + 110²) / 3
    assert row["POSIX_F_VARIANCE_RANK_TIME"][0] == pytest.approx(4.981667 / 3, rel=1e-5)
    assert row["POSIX_F_VARIANCE_RANK_BYTES"].tolist() == [9800.0]


def test_no_file_of_every_rank_leaves_the_table_alone():
    c = _posix()
    # four ranks: file 1 has only three
    out = _reduce_shared(c, 4)
    assert out.rank.tolist() == c.rank.tolist()
    assert out["POSIX_READS"].tolist() == [1, 2, 3, 1, 2]
