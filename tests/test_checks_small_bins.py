"""Which histogram bins count as small, and the 1 MiB requests Darshan's
100K_1M bin holds (its upper edge is inclusive): taken back out per
direction, never more than the other direction's same bin cannot hold."""

from __future__ import annotations

from iopilot.checks.base import Context
from iopilot.checks.thresholds import defaults
from kit import counters, trace

MiB = 1024**2


def _ctx(row: dict, **over) -> tuple[Context, object]:
    c = counters("POSIX", [row])
    t = defaults() | over
    return Context(trace(c), t), c


def _small(row: dict, rw: str, **over) -> int:
    ctx, c = _ctx(row, **over)
    return int(ctx.small_ops(c, "POSIX_SIZE", rw)[0])


def test_bins_up_to_the_limit_are_small():
    ctx, c = _ctx({})
    names = ctx.small_bins(c, "POSIX_SIZE", "WRITE")
    assert names[0] == "POSIX_SIZE_WRITE_0_100" and names[-1] == "POSIX_SIZE_WRITE_100K_1M"
    assert "POSIX_SIZE_WRITE_1M_4M" not in names
    # One byte below 1 MiB: the 100K_1M bin may hold larger requests.
    ctx, c = _ctx({}, small_request_size=MiB - 1)
    assert ctx.small_bins(c, "POSIX_SIZE", "WRITE")[-1] == "POSIX_SIZE_WRITE_10K_100K"
    ctx, c = _ctx({}, small_request_size=4 * MiB)
    assert ctx.small_bins(c, "POSIX_SIZE", "READ")[-1] == "POSIX_SIZE_READ_1M_4M"


def test_requests_of_exactly_the_limit_leave_the_small_count():
    row = {"POSIX_SIZE_WRITE_100K_1M": 10, "POSIX_SIZE_WRITE_0_100": 2,
           "POSIX_SIZE_READ_100K_1M": 1, "POSIX_ACCESS1_ACCESS": MiB,
           "POSIX_ACCESS1_COUNT": 4}  # fmt: skip
    # 4 of 1 MiB: the read bin can hold one of them, so 3 were writes.
    assert _small(row, "WRITE") == 12 - 3
    # The reads' bin: the writes' bin could hold all 4, so none is taken.
    assert _small(row, "READ") == 1
    # Just below the limit it is a small request after all.
    assert _small(row | {"POSIX_ACCESS1_ACCESS": MiB - 1}, "WRITE") == 12
    # Never more than the bin holds.
    assert _small(row | {"POSIX_ACCESS1_COUNT": 50}, "WRITE") == 2


def test_every_common_size_slot_is_looked_at():
    row = {"POSIX_SIZE_WRITE_100K_1M": 10, "POSIX_ACCESS4_ACCESS": MiB,
           "POSIX_ACCESS4_COUNT": 6, "POSIX_ACCESS2_ACCESS": 512, "POSIX_ACCESS2_COUNT": 99}
    assert _small(row, "WRITE") == 4
