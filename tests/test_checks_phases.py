"""I/O phases and stragglers with every number worked out by hand: the whole
evidence, the phase rows, the cost, and both sides of each threshold."""

from __future__ import annotations

import pytest

from iopilot.checks import Level, advice
from iopilot.checks.phases import _meta_advice, _straggler_advice, phases
from kit import counters, findings, only, records, trace

# Two phases of three ranks.  Phase 1: rank 2 writes 900 bytes in two
# operations of 3 s with a 0.2 s pause (busy 7.0 s of 7.2 s); ranks 0 and 1
# take 1 s and 2 s.  Phase 2, 42.8 s later: reads of 1, 1 and 1.5 s, so its
# slowest/median ratio is exactly the straggler ratio (1.5).
ROWS = [
    (0, "w", 1, 0, 100, 0.0, 1.0),
    (1, "w", 1, 100, 200, 0.0, 2.0),
    (2, "w", 1, 300, 450, 1.0, 4.0),
    (2, "w", 1, 750, 450, 4.2, 7.2),
    (0, "r", 1, 0, 100, 50.0, 51.0),
    (1, "r", 1, 100, 100, 50.0, 51.0),
    (2, "r", 1, 200, 100, 50.0, 51.5),
]
PHASE_1 = {"start s": 0.0, "end s": 7.2, "duration s": 7.2, "operations": 4, "bytes": 1200,
           "ranks": 3, "fastest rank": 0, "fastest rank s": 1.0, "slowest rank": 2,
           "slowest rank s": 6.0}  # fmt: skip
PHASE_2 = {"start s": 50.0, "end s": 51.5, "duration s": 1.5, "operations": 3, "bytes": 300,
           "ranks": 3, "fastest rank": 0, "fastest rank s": 1.0, "slowest rank": 2,
           "slowest rank s": 1.5}  # fmt: skip



def test_phase_table_by_hand():
    p = phases(records(ROWS))
    assert p["start"].tolist() == [0.0, 50.0]
    assert p["end"].tolist() == [7.2, 51.5]
    assert p["duration"].tolist() == pytest.approx([7.2, 1.5])
    assert p["busy"].tolist() == pytest.approx([7.0, 1.5])
    assert p["ops"].tolist() == [4, 3]
    assert p["bytes"].tolist() == [1200, 300]
    assert p["ranks"].tolist() == [3, 3]
    assert p["fastest_rank"].tolist() == [0, 0]
    assert p["fastest_time"].tolist() == pytest.approx([1.0, 1.0])
    assert p["slowest_rank"].tolist() == [2, 2]
    assert p["slowest_time"].tolist() == pytest.approx([6.0, 1.5])
    assert p["median_time"].tolist() == pytest.approx([2.0, 1.0])


def test_median_of_an_even_number_of_ranks_is_the_mean_of_the_middle_two():
    rows = [(r, "w", 1, 10 * r, 10, 0.0, d) for r, d in enumerate((1.0, 2.0, 4.0, 8.0))]
    p = phases(records(rows))
    assert p["median_time"].tolist() == pytest.approx([3.0])
    assert p["fastest_rank"].tolist() == [0] and p["slowest_rank"].tolist() == [3]


def test_ranks_need_not_start_at_zero():
    rows = [(5, "w", 1, 0, 10, 0.0, 1.0), (7, "w", 1, 10, 30, 0.0, 3.0)]
    p = phases(records(rows))
    assert p["fastest_rank"].tolist() == [5] and p["slowest_rank"].tolist() == [7]
    assert p["bytes"].tolist() == [40] and p["ranks"].tolist() == [2]


def test_a_gap_is_split_only_above_the_share_of_the_span():
    # One gap of 1 s in a 100 s span: 1 % of the span is not more than 1 %.
    rows = [(0, "w", 1, 0, 10, 0.0, 49.5), (0, "w", 1, 10, 10, 50.5, 100.0)]
    assert len(phases(records(rows), min_gap_share=0.01)["start"]) == 1
    assert len(phases(records(rows), min_gap_share=0.0099)["start"]) == 2


def test_an_explicit_gap_splits_only_above_it():
    rows = [(0, "w", 1, 0, 10, 0.0, 1.0), (0, "w", 1, 10, 10, 3.0, 4.0)]
    assert len(phases(records(rows), gap=2.0)["start"]) == 1
    assert len(phases(records(rows), gap=1.999)["start"]) == 2


def test_io_phases_evidence_rows_and_advice_by_hand():
    f = only(findings(trace(recs=records(ROWS), nprocs=3), "io-phases"))
    assert f.level == Level.INFO and f.cost_seconds == 0.0
    assert f.evidence == {
        "layer": "POSIX",
        "phases": 2,
        "phase_seconds": 8.7,
        "busy_seconds": 8.5,
        "idle_in_phases_seconds": 0.2,
        "runtime_seconds": 51.5,  # the last operation ends after the job's 10 s
        "phase_share_pct": 16.89,
        "longest_phase": 1,
        "longest_phase_seconds": 7.2,
        "first_io_seconds": 0.0,
        "last_io_seconds": 51.5,
    }
    assert f.message == (
        "I/O through POSIX ran in 2 phase(s) covering 8.7 s of the 51.5 s run (16.9 %), with "
        "operations in flight for 8.5 s of it; the longest, phase 1, lasted 7.2 s (from 0 s "
        "to 7.2 s)."
    )
    assert [(e.path, e.numbers) for e in f.files] == [("phase 1", PHASE_1), ("phase 2", PHASE_2)]
    assert f.files_total == 2
    assert f.recommendation.startswith("The job computes for 42.8 s outside these phases;")


def test_io_phases_lists_the_longest_phases_in_time_order(monkeypatch):
    from iopilot.checks import phases as mod

    monkeypatch.setattr(mod, "PHASES_LISTED", 2)
    # Equal gaps of 100 s between phases of 1, 5, 2 and 4 s.
    spans = [(0.0, 1.0), (101.0, 106.0), (206.0, 208.0), (308.0, 312.0)]
    rows = [(0, "w", 1, 10 * i, 10, s, e) for i, (s, e) in enumerate(spans)]
    f = only(findings(trace(recs=records(rows), nprocs=1), "io-phases"))
    assert [e.path for e in f.files] == ["phase 2", "phase 4"]
    assert f.files_total == 4
    assert f.evidence["longest_phase"] == 2 and f.evidence["longest_phase_seconds"] == 5.0


def test_io_phases_advice_when_io_is_in_flight_for_half_the_run_or_more():
    # Busy 5 s of a 10 s run: on the critical path.
    half = [(0, "w", 1, 0, 10, 0.0, 5.0)]
    f = only(findings(trace(recs=records(half), nprocs=1), "io-phases"))
    assert f.recommendation.startswith("Some operation is in flight for most of the run")
    # Busy 4.9 s, one phase: nothing to say.
    less = [(0, "w", 1, 0, 10, 0.0, 4.9)]
    f = only(findings(trace(recs=records(less), nprocs=1), "io-phases"))
    assert f.recommendation == ""


def test_straggler_from_records_by_hand():
    f = only(findings(trace(recs=records(ROWS), nprocs=3, hosts={2: "nodeB"}),
                      "phase-stragglers"))  # fmt: skip
    assert f.level == Level.WARN
    # Only phase 1: phase 2's ratio is exactly 1.5, not above it.
    assert f.evidence == {
        "host": "nodeB",
        "layer": "POSIX",
        "phases": 2,
        "straggler_phases": 1,
        "worst_phase": 1,
        "worst_ratio": 3.0,
        "worst_rank": 2,
        "worst_rank_seconds": 6.0,
        "median_seconds": 2.0,
        "worst_rank_bytes": 900,
        "median_bytes": 200,
        "frequent_stragglers": "2",
        "source": "records",
    }
    assert f.cost_seconds == pytest.approx(4.0)  # 6 s - the median's 2 s
    assert f.message.startswith(
        "1 of 2 I/O phase(s) through POSIX have a straggler: in phase 1 rank 2 (on nodeB) "
        "spent 6 s in I/O, 3.0× the median rank (2 s); slowest most often: rank(s) 2."
    )
    assert [(e.path, e.numbers) for e in f.files] == [
        ("phase 1", PHASE_1 | {"slowest / median": 3.0})]
    assert f.files_total == 1
    assert f.recommendation.startswith("The straggler moved 900 B against a median of 200 B")


def test_straggler_ratio_and_minimum_time_both_sides():
    tr = trace(recs=records(ROWS), nprocs=3)
    # Phase 2 (ratio 1.5) joins once the ratio is just below it.
    f = only(findings(tr, "phase-stragglers", straggler_ratio=1.49))
    assert f.evidence["straggler_phases"] == 2
    assert f.cost_seconds == pytest.approx(4.5)  # (6 - 2) + (1.5 - 1)
    assert f.evidence["worst_phase"] == 1  # the larger ratio
    # Phase 1's ratio 3 is not above 3; phase 1's 6 s are not above 6 s.
    assert findings(tr, "phase-stragglers", straggler_ratio=3.0) == []
    assert only(findings(tr, "phase-stragglers", straggler_ratio=2.99))
    assert findings(tr, "phase-stragglers", straggler_min_time=6.0) == []
    assert only(findings(tr, "phase-stragglers", straggler_min_time=5.99))


def test_a_phase_of_one_rank_has_no_straggler():
    rows = [(0, "w", 1, 0, 10, 0.0, 0.001), (0, "w", 1, 10, 10, 0.0, 9.0)]
    assert findings(trace(recs=records(rows), nprocs=2), "phase-stragglers") == []


def test_most_frequent_straggler_comes_first():
    rows = []
    for k, (t0, slow) in enumerate(((0.0, 1), (100.0, 2), (200.0, 2))):
        for r in range(3):
            rows.append((r, "w", 1, 100 * (3 * k + r), 100, t0, t0 + (4.0 if r == slow else 1.0)))
    f = only(findings(trace(recs=records(rows), nprocs=3), "phase-stragglers"))
    assert f.evidence["frequent_stragglers"] == "2 1"
    assert f.evidence["straggler_phases"] == 3
    assert f.cost_seconds == pytest.approx(9.0)


def _posix_rank(rank: int, seconds: float, meta: float, nbytes: int) -> dict:
    return {"file": 10 + rank, "rank": rank, "POSIX_WRITES": 4, "POSIX_READS": 1,
            "POSIX_BYTES_WRITTEN": nbytes, "POSIX_F_WRITE_TIME": seconds,
            "POSIX_F_META_TIME": meta}  # fmt: skip


def test_straggler_from_counters_by_hand():
    rows = [_posix_rank(0, 1.0, 0.0, 100), _posix_rank(1, 2.0, 0.0, 200),
            _posix_rank(2, 8.0, 1.0, 250)]  # fmt: skip
    f = only(findings(trace(counters("POSIX", rows), nprocs=3), "phase-stragglers"))
    assert f.evidence == {
        "layer": "POSIX/MPI-IO counters",
        "straggler_ranks": 1,
        "worst_ratio": 4.5,
        "worst_rank": 2,
        "worst_rank_seconds": 9.0,
        "worst_rank_meta_seconds": 1.0,
        "median_seconds": 2.0,
        "worst_rank_bytes": 250,
        "median_bytes": 200,
        "source": "counters",
    }
    assert f.cost_seconds == pytest.approx(7.0)
    assert [(e.path, e.numbers) for e in f.files] == [
        ("rank 2", {"seconds": 9.0, "metadata seconds": 1.0, "bytes": 250, "operations": 5})]
    assert f.files_total == 1
    assert f.message.startswith(
        "Over the whole run (per-rank counters, no per-operation trace) rank 2 spent 9 s in "
        "I/O (1 s of it in metadata calls), 4.5× the median rank (2 s); 1 of 3 ranks with "
        "I/O took over 1.5× the median.")
    # 250 B is not above 1.5 × 200 B: the same work, a slower path.
    assert "about as much as the median" in f.recommendation


def test_counter_straggler_thresholds_both_sides():
    rows = [_posix_rank(0, 1.0, 0.0, 100), _posix_rank(1, 2.0, 0.0, 200),
            _posix_rank(2, 8.0, 1.0, 250)]  # fmt: skip
    tr = trace(counters("POSIX", rows), nprocs=3)
    assert findings(tr, "phase-stragglers", straggler_ratio=4.5) == []
    assert only(findings(tr, "phase-stragglers", straggler_ratio=4.49))
    assert findings(tr, "phase-stragglers", straggler_min_time=9.0) == []
    assert only(findings(tr, "phase-stragglers", straggler_min_time=8.99))
    # Two ranks above 1.5 × the median once the limit is lower.
    f = only(findings(tr, "phase-stragglers", straggler_ratio=0.99))
    assert f.evidence["straggler_ranks"] == 2
    assert [e.path for e in f.files] == ["rank 2", "rank 1"]
    # One process: no ranks to compare.
    assert findings(trace(counters("POSIX", rows), nprocs=1), "phase-stragglers") == []


def test_counter_straggler_needs_two_ranks_with_io():
    rows = [_posix_rank(0, 1.0, 0.0, 100), _posix_rank(1, 9.0, 0.0, 200)]
    rows[0].update(POSIX_WRITES=0, POSIX_READS=0)
    assert findings(trace(counters("POSIX", rows), nprocs=2), "phase-stragglers") == []


def test_metadata_advice_only_when_metadata_is_more_than_half():
    assert _meta_advice(5.0, 10.0) == ""
    assert _meta_advice(5.01, 10.0).startswith("5.01 s of the straggler's 10 s are opens")


def test_straggler_advice_more_work_only_above_ratio_times_median():
    assert "about as much" in _straggler_advice(300.0, 200.0, 1.5)
    assert "more of the work" in _straggler_advice(301.0, 200.0, 1.5)
    assert "about as much" in _straggler_advice(301.0, 0.0, 1.5)


def test_io_phases_use_an_explicit_gap_when_set():
    # Gaps of 1 s and 3 s: by the mean (2 s) two phases; with phase_gap 0.5 s three.
    rows = [(0, "w", 1, 0, 10, 0.0, 1.0), (0, "w", 1, 10, 10, 2.0, 3.0),
            (0, "w", 1, 20, 10, 6.0, 7.0)]  # fmt: skip
    tr = trace(recs=records(rows), nprocs=1)
    assert only(findings(tr, "io-phases")).evidence["phases"] == 2
    assert only(findings(tr, "io-phases", phase_gap=0.5)).evidence["phases"] == 3
    assert only(findings(tr, "io-phases", phase_gap=5.0)).evidence["phases"] == 1


def test_a_phase_of_two_ranks_not_starting_at_zero_with_a_gap_between_them():
    # Ranks 1 and 3 write in one phase, rank 2 not at all: two ranks are
    # enough for a straggler, and the median bytes are over ranks 1 and 3 only.
    rows = [(1, "w", 1, 0, 100, 0.0, 1.0), (3, "w", 1, 100, 300, 0.0, 4.0)]
    f = only(findings(trace(recs=records(rows), nprocs=4), "phase-stragglers"), Level.WARN)
    assert f.evidence == {
        "layer": "POSIX", "phases": 1, "straggler_phases": 1, "worst_phase": 1,
        "worst_ratio": 1.6, "worst_rank": 3, "worst_rank_seconds": 4.0, "median_seconds": 2.5,
        "worst_rank_bytes": 300, "median_bytes": 200, "frequent_stragglers": "3",
        "source": "records"}  # fmt: skip
    assert "(on " not in f.message  # no host known
    assert f.cost_seconds == pytest.approx(1.5)
    assert [e.numbers["slowest / median"] for e in f.files] == [1.6]
    assert f.snippet == advice.MPIIO_COLLECTIVE_WRITE and f.snippet_lang == "c"
