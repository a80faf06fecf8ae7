"""Per-rank load from per-operation records: reads and writes apart, bytes
and busy seconds, whether each rank's operations sit in one run (summed run
by run) or are interleaved (counted operation by operation), in steps."""

from __future__ import annotations

import pytest

from iopilot.checks import Level
from iopilot.checks.base import Context
from iopilot.checks.ranks import rank_load
from iopilot.checks.thresholds import defaults
from iopilot.model import Records
from kit import records, trace


def _load(rows, nprocs=1, **kw):
    return rank_load(Context(trace(recs=records(rows, **kw), nprocs=nprocs), defaults()))


# Rank 0: 9 reads of 10 bytes (0.5 s each) and a write of 100 bytes (1 s);
# rank 2: 8 writes of 5 bytes (0.25 s each), one of them backwards in time.
BLOCKED = ([(0, "r", 1, 10 * i, 10, i, i + 0.5) for i in range(9)]
           + [(0, "w", 1, 90, 100, 9.0, 10.0)]
           + [(2, "w", 2, 5 * i, 5, i, i + 0.25) for i in range(7)]
           + [(2, "w", 2, 35, 5, 3.0, 2.75)])  # fmt: skip


def _check(load):
    assert load.source == "records"
    assert load.reads.tolist() == [9, 0, 0]
    assert load.writes.tolist() == [1, 0, 7 + 1]
    assert load.bytes.tolist() == [190.0, 0.0, 40.0]
    # The backwards operation counts 0 s, never less.
    assert load.seconds.tolist() == pytest.approx([5.5, 0.0, 1.75])


def test_ranks_in_runs():
    _check(_load(BLOCKED, nprocs=2))  # rank 2 is seen: three ranks


def test_ranks_interleaved():
    _check(_load(BLOCKED[::2] + BLOCKED[1::2], nprocs=3))


@pytest.mark.parametrize("step", [1, 3, 7])
def test_in_steps(step, monkeypatch):
    from iopilot.checks import recordtools

    monkeypatch.setattr(recordtools, "STEP", step)
    _check(_load(BLOCKED, nprocs=3))
    _check(_load(BLOCKED[::2] + BLOCKED[1::2], nprocs=3))


def test_negative_lengths_count_no_bytes():
    load = _load([(0, "w", 1, 0, -1, 0.0, 1.0), (1, "r", 1, 0, 8, 0.0, 1.0)], nprocs=2)
    assert load.bytes.tolist() == [0.0, 8.0]


def test_records_of_the_lower_layer_of_a_file_do_not_count_twice():
    mpiio = records([(0, "w", 1, 0, 100, 0.0, 2.0)], layer="MPIIO")
    posix = records([(0, "w", 1, 0, 100, 0.5, 1.5), (1, "r", 2, 0, 10, 0.0, 1.0)])
    load = rank_load(Context(trace(recs=Records.concat([posix, mpiio]), nprocs=2), defaults()))
    assert load.writes.tolist() == [1, 0] and load.reads.tolist() == [0, 1]
    assert load.seconds.tolist() == pytest.approx([2.0, 1.0])


def test_records_without_a_rank_give_no_load():
    assert _load([(-1, "w", 1, 0, 10, 0.0, 1.0)]) is None


def test_per_rank_spreads_shared_rows_over_every_rank():
    import numpy as np

    from iopilot.checks.rankcost import level_by_share, per_rank, slowest

    ctx = Context(trace(nprocs=4), defaults())
    out = per_rank(ctx, np.array([0, 2, -1, 2]), np.array([1.0, 2.0, 8.0, 0.5]))
    # 8 s of a shared row: 2 s each for the 4 ranks of the job.
    assert out.tolist() == [3.0, 2.0, 4.5, 2.0]
    # A rank beyond the job's size widens the table.
    assert per_rank(ctx, np.array([5]), np.array([1.0])).tolist() == [0, 0, 0, 0, 0, 1.0]
    one = Context(trace(nprocs=1), defaults())
    assert per_rank(one, np.array([-1]), np.array([3.0])).tolist() == [3.0]
    assert per_rank(one, np.array([], np.int64), np.array([])).tolist() == [0.0]
    assert slowest(out) == (2, 4.5) and slowest(np.array([])) == (0, 0.0)
    assert level_by_share(5.0, 10.0, 0.5) == Level.HIGH
    assert level_by_share(4.99, 10.0, 0.5) == Level.WARN
    assert level_by_share(0.0, 0.0, 0.5) == Level.WARN
