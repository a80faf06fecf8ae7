"""How the trace reader combines Darshan's four most common values (access
sizes, strides, HDF5 access tuples) of several rows, as Darshan does when it
reduces ranks: counts of equal values add, the top four are kept, larger
values first on a tie."""

from __future__ import annotations

import numpy as np

from iopilot.sources.darshan_library import counter_names
from iopilot.sources.trace_counters import _common_values, _slowest_sizes, _tuple_update

NAMES = counter_names("posix")


def _row(**c: int) -> np.ndarray:
    r = np.zeros(len(NAMES), np.int64)
    for k, v in c.items():
        r[NAMES.index(f"POSIX_{k}")] = v
    return r


def _top(out: np.ndarray, kind: str) -> list[tuple[int, int]]:
    return [(int(out[NAMES.index(f"POSIX_{kind}{k}_{kind}")]),
             int(out[NAMES.index(f"POSIX_{kind}{k}_COUNT")])) for k in range(1, 5)]  # fmt: skip


def test_counts_of_equal_sizes_add_and_ties_put_the_larger_size_first():
    a = _row(ACCESS1_ACCESS=100, ACCESS1_COUNT=5, ACCESS2_ACCESS=200, ACCESS2_COUNT=3)
    b = _row(ACCESS1_ACCESS=200, ACCESS1_COUNT=2, ACCESS2_ACCESS=300, ACCESS2_COUNT=5,
             ACCESS3_ACCESS=50, ACCESS3_COUNT=1, ACCESS4_ACCESS=400, ACCESS4_COUNT=0)
    out = a + b
    _common_values(NAMES, np.stack([a, b]), out)
    assert _top(out, "ACCESS") == [(300, 5), (200, 5), (100, 5), (50, 1)]


def test_only_the_four_most_common_are_kept_and_empty_slots_are_zero():
    a = _row(STRIDE1_STRIDE=8, STRIDE1_COUNT=1, STRIDE2_STRIDE=16, STRIDE2_COUNT=9,
             STRIDE3_STRIDE=24, STRIDE3_COUNT=4, STRIDE4_STRIDE=32, STRIDE4_COUNT=3)
    b = _row(STRIDE1_STRIDE=40, STRIDE1_COUNT=2, STRIDE2_STRIDE=0, STRIDE2_COUNT=7)
    out = a + b
    _common_values(NAMES, np.stack([a, b]), out)
    # Stride 0 is no stride; 8 (once) is the fifth and drops out.
    assert _top(out, "STRIDE") == [(16, 9), (24, 4), (32, 3), (40, 2)]
    one = _row(ACCESS1_ACCESS=4096, ACCESS1_COUNT=3)
    out = one.copy()
    _common_values(NAMES, np.stack([one, _row()]), out)
    assert _top(out, "ACCESS") == [(4096, 3), (0, 0), (0, 0), (0, 0)]


def _t(size: int) -> tuple[int, ...]:
    return (size, *([0] * 10))


EMPTY = [(_t(0), 0)] * 4


def test_tuple_update_orders_by_count_then_size():
    top = _tuple_update(EMPTY, _t(100), 5)
    top = _tuple_update(top, _t(200), 5)  # same count, larger: goes first
    top = _tuple_update(top, _t(50), 5)  # same count, smaller: after both
    top = _tuple_update(top, _t(10), 9)  # more: first of all
    assert [(t[0], n) for t, n in top] == [(10, 9), (200, 5), (100, 5), (50, 5)]
    # A fifth with a count below them all does not get in; size 0 never does.
    assert _tuple_update(top, _t(7), 4) == top
    assert _tuple_update(EMPTY, _t(0), 99) == EMPTY
    # A tuple already listed moves instead of appearing twice.
    moved = _tuple_update(top, _t(50), 20)
    assert [(t[0], n) for t, n in moved] == [(50, 20), (10, 9), (200, 5), (100, 5)]


def test_slowest_sizes_come_from_the_row_with_the_slowest_operation():
    fnames = counter_names("posix_f")
    ints = np.stack([_row(MAX_READ_TIME_SIZE=10, MAX_WRITE_TIME_SIZE=30),
                     _row(MAX_READ_TIME_SIZE=20, MAX_WRITE_TIME_SIZE=40)])  # fmt: skip
    floats = np.zeros((2, len(fnames)))
    floats[0, fnames.index("POSIX_F_MAX_READ_TIME")] = 0.5
    floats[1, fnames.index("POSIX_F_MAX_READ_TIME")] = 0.25
    floats[1, fnames.index("POSIX_F_MAX_WRITE_TIME")] = 2.0
    out = ints.sum(axis=0)
    _slowest_sizes(NAMES, fnames, ints, floats, out)
    assert out[NAMES.index("POSIX_MAX_READ_TIME_SIZE")] == 10
    assert out[NAMES.index("POSIX_MAX_WRITE_TIME_SIZE")] == 40


def test_hdf5_access_tuples_fold_equal_tuples_and_keep_the_shape():
    names = counter_names("h5d")

    def row(*entries):
        r = np.zeros(len(names), np.int64)
        for k, (size, d1, count) in enumerate(entries, start=1):
            r[names.index(f"H5D_ACCESS{k}_ACCESS")] = size
            r[names.index(f"H5D_ACCESS{k}_LENGTH_D1")] = d1
            r[names.index(f"H5D_ACCESS{k}_COUNT")] = count
        return r

    # The same size with another shape is another tuple.
    rank0 = row((100, 10, 3), (100, 20, 1))
    rank1 = row((200, 5, 4), (100, 10, 2))
    out = rank0 + rank1
    _common_values(names, np.stack([rank0, rank1]), out)
    got = [(int(out[names.index(f"H5D_ACCESS{k}_ACCESS")]),
            int(out[names.index(f"H5D_ACCESS{k}_LENGTH_D1")]),
            int(out[names.index(f"H5D_ACCESS{k}_COUNT")])) for k in range(1, 5)]  # fmt: skip
    assert got == [(100, 10, 5), (200, 5, 4), (100, 20, 1), (0, 0, 0)]


def test_tuple_update_same_size_new_shape_goes_above_and_a_moved_entry_leaves_its_place():
    a, b = (100, 1, *([0] * 9)), (100, 2, *([0] * 9))
    top = _tuple_update(EMPTY, a, 5)
    top = _tuple_update(top, b, 5)  # same count, same size: above
    assert [t for t, _ in top[:2]] == [b, a]
    top = [(_t(50), 9), (_t(200), 5), (_t(100), 5), (_t(10), 1)]
    moved = _tuple_update(top, _t(200), 30)
    assert [(t[0], n) for t, n in moved] == [(200, 30), (50, 9), (100, 5), (10, 1)]


def test_hdf5_access_tuples_of_three_ranks_fold_from_the_last():
    names = counter_names("h5d")

    def row(size):
        r = np.zeros(len(names), np.int64)
        r[names.index("H5D_ACCESS1_ACCESS")] = size
        r[names.index("H5D_ACCESS1_COUNT")] = 1
        return r

    rows = np.stack([row(100), row(200), row(300)])
    out = rows.sum(axis=0)
    _common_values(names, rows, out)
    got = [(int(out[names.index(f"H5D_ACCESS{k}_ACCESS")]),
            int(out[names.index(f"H5D_ACCESS{k}_COUNT")])) for k in range(1, 5)]  # fmt: skip
    assert got == [(300, 1), (200, 1), (100, 1), (0, 0)]


def test_reduced_row_keeps_the_layer_the_earliest_open_and_a_parent_column():
    from iopilot.sources.trace_counters import _reduce_shared
    from kit import counters

    rows = [{"file": 1, "rank": 0, "POSIX_F_OPEN_START_TIMESTAMP": 2.0},
            {"file": 1, "rank": 1, "POSIX_F_OPEN_START_TIMESTAMP": 0.5},
            {"file": 2, "rank": 0}, {"file": 2, "rank": 1}]  # fmt: skip
    out = _reduce_shared(counters("POSIX", rows), 2)
    assert out.layer == "POSIX" and out.rank.tolist() == [-1, -1]
    opened = out["POSIX_F_OPEN_START_TIMESTAMP"]
    assert opened[out.file_id.tolist().index(1)] == 0.5  # below one second still counts
    assert opened[out.file_id.tolist().index(2)] == 0.0  # never opened
    h5d = counters("H5D", [{"file": 5, "rank": r, "parent": 1} for r in (0, 1)]
                   + [{"file": 6, "rank": 0, "parent": 1}])  # fmt: skip
    red = _reduce_shared(h5d, 2)
    assert red.parent_id is not None and len(red.parent_id) == len(red) == 2
