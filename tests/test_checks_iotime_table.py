"""The I/O time table's JSON form (rounded to microseconds) and the cost of
small requests against large ones, worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from iopilot.checks.base import Context
from iopilot.checks.iotime import compute, small_request_seconds
from iopilot.checks.thresholds import defaults
from kit import counters, trace

MiB = 1024**2


def test_as_dict_by_hand():
    tr = trace(counters("POSIX", [{"file": 1, "rank": 0, "POSIX_F_WRITE_TIME": 1.23456789},
                                  {"file": 2, "rank": 1, "POSIX_F_READ_TIME": 0.5}]),
               nprocs=2)  # fmt: skip
    tr.job.runtime = 10.1234567
    d = compute(tr).as_dict()
    assert d == {
        "run_seconds": 10.123457,
        "slowest_rank": 0,
        "slowest_rank_seconds": 1.234568,
        "share": round(1.23456789 / 10.1234567, 6),
        "mean_rank_seconds": 0.867284,
        "nprocs": 2,
        "by_layer": {"slowest_rank": {"POSIX": 1.234568}, "all_ranks": {"POSIX": 1.734568}},
        "source": {"POSIX": "counters"},
        "shared_rows": {},
    }
    tr.job.runtime = 0
    assert compute(tr).as_dict()["share"] is None


def _cost(row: dict) -> float:
    c = counters("POSIX", [row])
    ctx = Context(trace(c), defaults())
    small = ctx.small_ops(c, "POSIX_SIZE", "WRITE")
    return float(small_request_seconds(ctx, c, "POSIX_SIZE", "WRITE", small,
                                       c["POSIX_WRITES"], c["POSIX_BYTES_WRITTEN"])[0])


def test_small_requests_against_the_large_ones_rate():
    # 8 writes in 0-100 B (midpoint 50), 1 in 101-1024 B (midpoint 562.5),
    # 2 large ones; 11 s of writes, so the small ones took 9 s.
    row = {"POSIX_WRITES": 11, "POSIX_SIZE_WRITE_0_100": 8, "POSIX_SIZE_WRITE_100_1K": 1,
           "POSIX_SIZE_WRITE_1M_4M": 2, "POSIX_BYTES_WRITTEN": 4 * MiB + 1000,
           "POSIX_F_WRITE_TIME": 11.0}  # fmt: skip
    small_b = 8 * 50 + 562.5
    rate = (4 * MiB + 1000 - small_b) / 2.0  # the large writes' bytes over their 2 s
    assert _cost(row) == pytest.approx(9.0 - small_b / rate, rel=1e-12)


def test_small_requests_without_large_ones_use_the_default_bandwidth():
    row = {"POSIX_WRITES": 4, "POSIX_SIZE_WRITE_0_100": 4, "POSIX_BYTES_WRITTEN": 200,
           "POSIX_F_WRITE_TIME": 2.0}  # fmt: skip
    assert _cost(row) == pytest.approx(2.0 - 200 / (1024 * MiB), rel=1e-12)
    # The estimate never exceeds the bytes moved: 4 × 50 estimated, 120 moved.
    assert _cost(row | {"POSIX_BYTES_WRITTEN": 120}) == pytest.approx(
        2.0 - 120 / (1024 * MiB), rel=1e-12)


def test_small_request_cost_is_never_negative():
    row = {"POSIX_WRITES": 4, "POSIX_SIZE_WRITE_0_100": 4, "POSIX_BYTES_WRITTEN": 200}
    assert _cost(row) == 0.0
    assert np.isfinite(_cost(row))
