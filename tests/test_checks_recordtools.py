"""The sorting and running-maximum helpers every record pass stands on
(checks/recordtools.py), against plain loops, on the paths each takes:
packed keys and lexsort, dense and sparse groups, small and huge values."""

from __future__ import annotations

import numpy as np
import pytest

from iopilot.checks.recordtools import _INT63, _prev_max, _sort2


def _naive_prev_max(group, end):
    prev, who = [], []
    best: dict[int, tuple[int, int]] = {}
    for i, (g, e) in enumerate(zip(group.tolist(), end.tolist(), strict=True)):
        m, at = best.get(g, (-1, -1))
        prev.append(m)
        who.append(at)
        if e > m or at < 0:
            best[g] = (e, i) if e >= m else (m, at)
    return prev, who


@pytest.mark.parametrize(("groups", "ends"), [
    ([0, 0, 0, 1, 1, 3], [5, 2, 9, 1, 1, 0]),  # dense groups, small ends
    ([0, 0, 2**40, 2**40, 2**61], [3, 7, 2, 8, 1]),  # group numbers too sparse to shift
    ([0, 0, 1, 1], [2**61, 5, 2**60, 2**61 + 3]),  # ends too wide: ranked
    ([4], [6]),  # one element
])  # fmt: skip
def test_prev_max_and_holders_equal_a_loop(groups, ends):
    g, e = np.array(groups, np.int64), np.array(ends, np.int64)
    prev, who = _prev_max(g, e, holders=True)
    want_prev, want_who = _naive_prev_max(g, e)
    assert prev.tolist() == want_prev
    assert who.tolist() == want_who
    alone, none = _prev_max(g, e)
    assert alone.tolist() == want_prev and none is None


def test_prev_max_random_against_a_loop():
    rng = np.random.default_rng(3)
    for _ in range(20):
        g = np.sort(rng.integers(0, 6, 40))
        e = rng.integers(0, 50, 40)
        prev, who = _prev_max(g, e, holders=True)
        want_prev, _ = _naive_prev_max(g, e)
        assert prev.tolist() == want_prev
        held = who >= 0
        assert (e[who[held]] == prev[held]).all() and (g[who[held]] == g[held]).all()
        assert (who[held] < np.flatnonzero(held)).all()


def test_prev_max_of_nothing():
    prev, who = _prev_max(np.zeros(0, np.int64), np.zeros(0, np.int64), holders=True)
    assert prev.shape == who.shape == (0,)


@pytest.mark.parametrize("runs", [False, True])
@pytest.mark.parametrize(("major", "minor"), [
    ([3, 1, 3, 0, 1], [2, 9, 1, 4, 9]),  # packed into one key
    ([2**40, 1, 2**40, 0], [2**30, 5, 3, 2**30]),  # too wide to pack: lexsort
    ([0, 0], [0, 0]),
])  # fmt: skip
def test_sort2_equals_lexsort(major, minor, runs):
    a, b = np.array(major, np.int64), np.array(minor, np.int64)
    order, hi, lo = _sort2(a, b, runs=runs)
    want = np.lexsort((b, a))
    assert hi.tolist() == a[want].tolist() and lo.tolist() == b[want].tolist()
    assert a[order].tolist() == hi.tolist() and b[order].tolist() == lo.tolist()
    assert sorted(order.tolist()) == list(range(len(a)))


def test_sort2_is_stable_for_equal_pairs_and_packs_right_at_the_limit():
    a, b = np.array([1, 0, 1, 0], np.int64), np.array([2, 2, 2, 2], np.int64)
    order, _, _ = _sort2(a, b, runs=True)
    assert order.tolist() == [1, 3, 0, 2]
    # (major + 1) << bits just below the int63 guard, then at it
    bits = 3
    top = (_INT63 >> bits) - 2
    for m in (top, top + 1):
        a, b = np.array([m, 0], np.int64), np.array([7, 1], np.int64)
        _, hi, lo = _sort2(a, b)
        assert hi.tolist() == [0, m] and lo.tolist() == [1, 7]
    order, hi, lo = _sort2(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert order.shape == hi.shape == lo.shape == (0,)


@pytest.mark.parametrize("step", [1, 2, 3, 5, 8, 1 << 20])
@pytest.mark.parametrize("seed", range(4))
def test_key_order_is_the_stable_argsort_in_any_steps(seed, step, monkeypatch):
    from iopilot.checks import recordtools

    monkeypatch.setattr(recordtools, "STEP", step)
    rng = np.random.default_rng(seed)
    for key in (rng.integers(0, 5, 40).astype(np.uint8), np.repeat(np.uint16([3, 0, 2]), 7)):
        order = recordtools.key_order(key)
        assert order.dtype == np.uint32
        assert order.tolist() == np.argsort(key, kind="stable").tolist()


@pytest.mark.parametrize("step", [1, 2, 3, 4, 5, 1 << 20])
def test_key_order_is_none_for_keys_in_order_at_every_seam(step, monkeypatch):
    from iopilot.checks import recordtools

    monkeypatch.setattr(recordtools, "STEP", step)
    ordered = np.uint8([0, 0, 1, 1, 1, 4])
    assert recordtools.key_order(ordered) is None
    for at in range(1, len(ordered)):  # one step down, at every place: before, at, after a seam
        down = ordered.copy()
        down[at] = 0 if ordered[at] else 9
        down[at - 1] = max(int(down[at - 1]), 1)
        order = recordtools.key_order(down)
        assert order is not None and order.tolist() == np.argsort(down, kind="stable").tolist()
    assert recordtools.key_order(np.zeros(0, np.uint8)) is None


@pytest.mark.parametrize("step", [1, 2, 3, 1 << 20])
def test_distinct_in_steps_is_unique(step, monkeypatch):
    from iopilot.checks import recordtools

    monkeypatch.setattr(recordtools, "STEP", step)
    v = np.uint64([7, 3, 7, 2**63 + 1, 3, 0, 9])
    assert recordtools.distinct(v).tolist() == sorted(set(v.tolist()))
    odd = recordtools.distinct(v, lambda cut: np.arange(len(v))[cut] % 2 == 1)
    assert odd.tolist() == [0, 3, 2**63 + 1]  # places 1, 3 and 5
    assert recordtools.distinct(v[:0]).tolist() == []
