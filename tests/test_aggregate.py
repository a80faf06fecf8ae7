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


@pytest.mark.parametrize("values", [
    [], [7], [3, 3], [5, -1, 5, 2, -1, 0], [2**64 - 1, 0, 2**63, 2**64 - 1],
    [[4, 1], [1, 4]],  # flattened, as np.unique does
])  # fmt: skip
def test_unique_is_numpys_unique(values):
    dtype = np.uint64 if values and max(np.ravel(values)) >= 2**63 else np.int64
    a = np.array(values, dtype=dtype)
    got, want = aggregate.unique(a), np.unique(a)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()


def test_unique_on_random_integers_and_finite_floats():
    rng = np.random.default_rng(5)
    for n in (2, 3, 100, 5000):
        ints = rng.integers(-20, 20, n)
        assert aggregate.unique(ints).tolist() == np.unique(ints).tolist()
        floats = rng.choice([0.5, 0.1, 2.0], n)
        assert aggregate.unique(floats).tolist() == np.unique(floats).tolist()


@pytest.mark.parametrize("columns", [
    [], [(3, 1)], [(1, 2), (1, 2)], [(2, 1), (1, 9), (2, 0), (1, 9), (1, 2)],
    [(0, 5), (0, 4), (1, 4)],  # equal first row: the second decides
])  # fmt: skip
def test_unique_columns_is_numpys_unique_by_columns(columns):
    table = np.array(columns, np.int64).reshape(-1, 2).T
    got, want = aggregate.unique_columns(table), np.unique(table, axis=1)
    assert got.shape == want.shape and got.tolist() == want.tolist()


def test_unique_columns_on_random_pairs():
    rng = np.random.default_rng(9)
    table = rng.integers(0, 4, (2, 300))
    assert aggregate.unique_columns(table).tolist() == np.unique(table, axis=1).tolist()


@pytest.mark.parametrize("values", [[3.0], [4, 1], [5, 1, 3], [2, 9, 4, 4],
                                    [1.5, -2.0, 7.25, 0.0, 3.0]])
def test_median_is_numpys_median(values):
    assert aggregate.median(np.array(values)) == float(np.median(np.array(values)))


def test_median_of_nothing_or_nan_is_nan():
    assert np.isnan(aggregate.median(np.zeros(0)))
    assert np.isnan(aggregate.median(np.array([1.0, np.nan, 2.0])))


@pytest.mark.parametrize(("values", "among"), [
    ([1, 2, 3, 9], [3, 1]), ([4, 4, 0], [5]), ([], [1]), ([1, 2], []),
    ([0, 10, 11], [10, 11, 12, 0]),  # both ends of the sorted set
    ([13, -1], [12]),  # past the last and before the first
])  # fmt: skip
def test_isin_is_numpys_isin(values, among):
    v, a = np.array(values, np.int64), np.array(among, np.int64)
    assert aggregate.isin(v, a).tolist() == np.isin(v, a).tolist()


def test_isin_keeps_the_shape_and_takes_scalars_and_sequences():
    assert aggregate.isin(np.arange(6).reshape(2, 3), [1, 5]).tolist() == [
        [False, True, False], [False, False, True]]  # fmt: skip
    assert bool(aggregate.isin(np.uint64(5), np.array([5, 6], np.uint64)))
    assert not bool(aggregate.isin(np.uint64(7), np.array([5, 6], np.uint64)))
    assert aggregate.isin(np.array([1, 2, 3], np.uint8), (1, 3)).tolist() == [True, False, True]


def test_isin_is_exact_for_file_ids_past_two_to_the_63():
    # File ids are 64-bit hashes: uint64 against int64 must not go through
    # float64, where 2**64-1 and 2**64-2 are the same number.
    ids = np.array([2**64 - 1, 5, 2**63], np.uint64)
    assert aggregate.isin(ids, np.array([2**64 - 2], np.uint64)).tolist() == [False] * 3
    assert aggregate.isin(ids, np.array([-1, 5, 3], np.int64)).tolist() == [False, True, False]
    signed = np.array([-1, 5, 3], np.int64)
    assert aggregate.isin(signed, ids).tolist() == [False, True, False]
