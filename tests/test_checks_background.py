"""The background-waits check: background I/O the program waited for, on
both sides of its thresholds, and the call that waited named."""

from __future__ import annotations

import numpy as np
import pytest

from iopilot._record import replace
from iopilot.model import OP_NAMES, BackgroundOps
from kit import findings, records, trace
from test_overlap_advise import meta

SYNC, WRITE = OP_NAMES.index("sync"), OP_NAMES.index("write")


def _bg(rows: list[tuple]) -> BackgroundOps:
    """Background operations from (rank, op, queued, issued, completed)."""
    col = list(zip(*rows, strict=True))
    n = len(rows)
    return BackgroundOps(np.array(col[0], np.int32), np.full(n, 1, np.uint64),
                         np.array(col[1], np.uint8), np.zeros(n, np.int64),
                         np.full(n, 1 << 20, np.int64), np.array(col[2], float),
                         np.array(col[3], float), np.array(col[4], float),
                         np.zeros(n, bool))  # fmt: skip


def _run(waited: float, busy: float = 1.0, call: str = "sync", rank: int = 0):
    """Rank ``rank``: a 1 MiB write call at 0-0.01 s (deferred), then the
    thread writes for ``busy`` seconds from 0.01; the program's ``call``
    starts ``busy - waited`` seconds into that and ends with it."""
    end = 0.01 + busy
    t = trace(recs=records([(rank, "w", 1, 0, 1 << 20, 0.0, 0.01)]), nprocs=rank + 1)
    t = replace(t, background=_bg([(rank, WRITE, 0.01, 0.01, end)]),
                meta_records=meta([(rank, call, 1, end - waited, end + 0.001)]))
    t.job.runtime = end + 1.0
    return t


def test_a_sync_that_waits_for_most_of_the_background_io():
    (f,) = findings(_run(0.8), "background-waits")
    assert f.evidence["exposed_seconds"] == pytest.approx(0.8)
    assert f.evidence["waited_in"] == {"sync": pytest.approx(0.8)}
    assert "(in sync 0.8 s)" in f.message and "80 %" in f.message
    assert f.recommendation.startswith("Each fsync waits")
    assert f.cost_seconds == pytest.approx(0.8, abs=1e-6)


def test_the_share_threshold_on_both_sides():
    assert not findings(_run(0.5), "background-waits")  # exactly half: not above
    assert findings(_run(0.51), "background-waits")
    assert not findings(_run(0.8), "background-waits", background_exposed_share=0.8)
    assert findings(_run(0.81), "background-waits", background_exposed_share=0.8)


def test_the_minimum_time_on_both_sides():
    assert findings(_run(0.1, busy=0.15), "background-waits")  # 0.1 s: not below
    assert not findings(_run(0.099, busy=0.12), "background-waits")
    assert findings(_run(0.099, busy=0.12), "background-waits", background_min_time=0.05)


@pytest.mark.parametrize(("call", "starts"), [("close", "Each close waits"),
                                               ("stat", "The program waits for pending")])
def test_the_call_that_waited_picks_the_advice(call, starts):
    (f,) = findings(_run(0.9, call=call), "background-waits")
    assert f.evidence["waited_in"] == {call: pytest.approx(0.9)}
    assert f.recommendation.startswith(starts)


def test_hidden_background_io_or_none_at_all_is_no_finding():
    t = _run(0.9)
    hidden = replace(t, meta_records=meta([(0, "sync", 1, 5.0, 5.1)]))  # after the thread
    assert not findings(hidden, "background-waits")
    assert not findings(replace(t, background=None), "background-waits")
    # another rank's sync does not make rank 0 wait
    other = replace(t, meta_records=meta([(1, "sync", 1, 0.2, 1.02)]))
    other.job.nprocs = 2
    assert not findings(other, "background-waits")


def test_the_least_hidden_rank_is_judged():
    t = _run(0.9, rank=1)
    (f,) = findings(t, "background-waits")
    assert f.evidence["rank"] == 1 and "Rank 1's" in f.message
