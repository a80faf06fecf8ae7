"""The one helper per aggregation concept (model/aggregate.py) and the cache
of derived tables the checks share (checks/base.py AnalysisCache)."""

from __future__ import annotations

import numpy as np
import pytest

from iopilot.model import aggregate
from iopilot.model.aggregate import group_sum, per_file, per_rank
from kit import records, trace


def test_group_sum_keeps_integers_exact_and_integer():
    inv = np.array([0, 1, 0, 2])
    out = group_sum(inv, np.array([5, 7, -2, 1], np.int64), 4)
    assert out.dtype == np.int64 and out.tolist() == [3, 7, 1, 0]
    counts = group_sum(inv, None, 3)
    assert counts.tolist() == [2, 1, 1]
    flags = group_sum(inv, np.array([True, False, True, True]), 3)
    assert flags.dtype == np.int64 and flags.tolist() == [2, 0, 1]


@pytest.mark.parametrize("big", [2**53 - 8, 2**53, 2**60])
def test_group_sum_is_exact_on_both_sides_of_float_precision(big):
    # Sums float64 cannot hold exactly take the integer path.
    vals = np.array([big, 1, 1, 1], np.int64)
    out = group_sum(np.zeros(4, np.int64), vals, 1)
    assert int(out[0]) == big + 3


def test_group_sum_of_floats_is_float_in_row_order_even_when_empty():
    inv = np.array([1, 1, 0])
    vals = np.array([0.1, 0.2, 0.5])
    out = group_sum(inv, vals, 2)
    expected = np.zeros(2)
    np.add.at(expected, inv, vals)  # the order np.add.at sums in
    assert out.tobytes() == expected.tobytes()
    assert group_sum(inv, np.array([1, 2, 3]), 2, as_float=True).dtype == np.float64
    empty = group_sum(np.zeros(0, np.int64), np.zeros(0), 3)
    assert empty.dtype == np.float64 and empty.tolist() == [0.0, 0.0, 0.0]


def test_per_file_sums_each_column_by_sorted_file():
    fid = np.array([9, 3, 9, 3, 5], np.uint64)
    ids, sums = per_file(fid, {"ops": np.array([1, 2, 3, 4, 5]), "rows": None,
                               "secs": np.array([0.5, 0, 0.25, 1, 2])})  # fmt: skip
    assert ids.tolist() == [3, 5, 9]
    assert sums["ops"].tolist() == [6, 5, 4]
    assert sums["rows"].tolist() == [2, 1, 2]
    assert sums["secs"].tolist() == [1.0, 2.0, 0.75]


def test_per_rank_leaves_reduced_and_out_of_range_rows_out():
    rank = np.array([0, 2, -1, 3, 2])
    out = per_rank(rank, np.array([1.0, 2.0, 4.0, 8.0, 16.0]), 3)
    assert out.dtype == np.float64 and out.tolist() == [1.0, 0.0, 18.0]
    assert per_rank(np.array([0, 1, 1]), None, 2).tolist() == [1.0, 2.0]
    assert per_rank(np.array([0, 1]), np.array([1.0, 2.0]), 2).tolist() == [1.0, 2.0]
    assert per_rank(np.zeros(0, np.int64), np.zeros(0), 2).dtype == np.float64


def test_exact_limit_is_where_float_sums_stop_being_exact():
    assert float(aggregate._EXACT) + 1 == float(aggregate._EXACT)
    assert float(aggregate._EXACT - 1) + 1 == float(aggregate._EXACT)


def _rows(n_ranks: int = 3, per_rank: int = 20) -> list[tuple]:
    return [(r, "rw"[i % 2], 1, 4096 * i, 100, 0.01 * i, 0.01 * i + 0.005)
            for r in range(n_ranks) for i in range(per_rank)]  # fmt: skip


def test_checks_share_one_cache_per_diagnosis():
    from iopilot.checks.base import AnalysisCache
    from iopilot.checks.engine import diagnose

    t = trace(recs=records(_rows()), nprocs=3)
    cache = AnalysisCache()
    diagnose(t, cache=cache)
    # Every derived table is computed once, whichever checks read it.
    assert cache.computed and set(cache.computed.values()) == {1}
    assert {"phases", "rank_load", "io_time"} <= set(cache.computed)
    assert cache.reused.get("io_time", 0) > 0 and cache.reused.get("phases", 0) > 0
    again = AnalysisCache()
    diagnose(t, cache=again)  # a new diagnosis computes its own
    assert again.computed == cache.computed


def test_a_shared_file_index_cannot_be_changed_by_a_check():
    from iopilot.checks.base import Context
    from iopilot.checks.thresholds import defaults
    from kit import counters

    c = counters("POSIX", [{"file": 2, "rank": 0, "POSIX_READS": 3},
                           {"file": 1, "rank": 1, "POSIX_READS": 4},
                           {"file": 2, "rank": 1, "POSIX_READS": 5}])  # fmt: skip
    ctx = Context(trace(c), defaults())
    ids, inv = ctx.file_index(c)
    assert ctx.file_index(c)[0] is ids  # computed once
    assert ids.tolist() == [1, 2] and inv.tolist() == [1, 0, 1]
    with pytest.raises(ValueError):
        ids[0] = 7
    _, per = ctx.per_file(c, {"reads": c["POSIX_READS"]})
    assert per["reads"].tolist() == [4, 8]
    part = c.select(c.rank == 1)  # a selection gets its own index, not the table's
    _, own = ctx.file_index(part)
    assert own.tolist() == [0, 1] and own.flags.writeable
