"""Checks over ranks, I/O phases and byte ranges (iopilot.checks.ranks)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iopilot.checks import Level, diagnose
from iopilot.checks.phases import _busy_intervals, phases
from iopilot.demo import example_dir
from iopilot.model import Records
from iopilot.sources import load
from kit import SHARED, counters, findings, records, shared_logs, trace

needs_shared = pytest.mark.skipif(not SHARED.exists(), reason="shared Darshan logs not present")
EXAMPLES = example_dir()
OURS = {
    "rank-zero-heavy",
    "unbalanced-ranks",
    "io-phases",
    "phase-stragglers",
    "overlapping-writes",
    "overlapping-reads",
}
MiB = 1024 * 1024


def by_level(found, level):
    return [f for f in found if f.level == level]


# -- rank-zero-heavy ---------------------------------------------------------


def test_rank_zero_doing_most_bytes_is_high():
    rows = [(0, "w", 1, 1000 * i, 1000, 0.1 * i, 0.1 * i + 0.05) for i in range(10)]
    rows += [(r, "w", 1, 20000 + 100 * r, 100, 0.0, 0.05) for r in (1, 2, 3)]
    (f,) = findings(trace(recs=records(rows), nprocs=4), "rank-zero-heavy")
    assert f.level == Level.HIGH
    assert f.drishti == "D01"
    assert f.evidence["rank0_bytes"] == 10000
    assert f.evidence["others_mean_bytes"] == 100
    assert f.evidence["rank0_ops"] == 10
    assert "100.0×" in f.message and "10 operations" in f.message


@pytest.mark.parametrize("per_rank", [4, 40])  # short runs of a rank; long runs (summed per run)
@pytest.mark.parametrize("step", [1, 3, 1 << 20])
def test_rank_loads_in_steps_add_up(step, per_rank, monkeypatch):
    from iopilot.checks import recordtools
    from iopilot.checks.base import Context
    from iopilot.checks.ranks import rank_load
    from iopilot.checks.thresholds import defaults

    monkeypatch.setattr(recordtools, "STEP", step)
    rows = [(r, "rw"[i % 2], 1, 100 * i, 10 * r + i, 0.5 * i, 0.5 * i + 0.1 * r)
            for r in range(3) for i in range(per_rank)]  # fmt: skip
    rows += [(0, "w", 1, 0, 7, 1.0, 0.5)]  # rank 0 again, and an end before its start
    load = rank_load(Context(trace(recs=records(rows), nprocs=4), defaults()))
    half = per_rank // 2
    assert load.reads.tolist() == [half, half, half, 0]
    assert load.writes.tolist() == [half + 1, half, half, 0]
    assert load.bytes.tolist() == [sum(10 * r + i for i in range(per_rank)) + 7 * (r == 0)
                                   for r in range(3)] + [0]  # fmt: skip
    assert load.seconds.tolist() == pytest.approx([0.0, 0.1 * per_rank, 0.2 * per_rank, 0.0])


def test_rank_zero_heavy_but_not_majority_is_warn():
    rows = [(0, "w", 1, 0, 3000, 0.0, 0.1)]
    rows += [(r, "w", 1, 1000 * (r + 3), 1000, 0.0, 0.1) for r in range(1, 8)]
    (f,) = findings(trace(recs=records(rows), nprocs=8), "rank-zero-heavy")
    assert f.level == Level.WARN
    assert f.evidence["rank0_byte_share_pct"] == pytest.approx(30.0)


def test_balanced_ranks_have_no_rank_zero_finding():
    rows = [(r, "w", 1, 1000 * r, 1000, 0.0, 0.1) for r in range(4)]
    assert findings(trace(recs=records(rows), nprocs=4), "rank-zero-heavy") == []


def test_rank_zero_from_counters_when_there_are_no_records():
    rows = [{"file": 1, "rank": 0, "POSIX_WRITES": 100, "POSIX_BYTES_WRITTEN": 10 * MiB}]
    rows += [{"file": 1 + r, "rank": r, "POSIX_WRITES": 10, "POSIX_BYTES_WRITTEN": MiB}
             for r in (1, 2, 3)]  # fmt: skip
    (f,) = findings(trace(counters("POSIX", rows), nprocs=4), "rank-zero-heavy")
    assert f.evidence["source"] == "counters"
    assert f.level == Level.HIGH  # 10 of 13 MiB


def test_rank_zero_counters_with_reduced_shared_file_stay_quiet():
    # The 100 MiB of the shared file may belong to any rank: no verdict on rank 0.
    rows = [
        {"file": 1, "rank": 0, "POSIX_WRITES": 100, "POSIX_BYTES_WRITTEN": 10 * MiB},
        {"file": 9, "rank": -1, "POSIX_WRITES": 400, "POSIX_BYTES_WRITTEN": 100 * MiB},
    ]
    assert findings(trace(counters("POSIX", rows), nprocs=4), "rank-zero-heavy") == []


def test_serial_job_has_no_rank_zero_finding():
    rows = [(0, "w", 1, 0, 1000, 0.0, 0.1)]
    assert findings(trace(recs=records(rows), nprocs=1), "rank-zero-heavy") == []


def test_rank_zero_counts_each_file_at_its_highest_layer():
    # MPI-IO aggregation: rank 0 alone writes at POSIX level what all ranks asked
    # MPI-IO for; counted at the MPI-IO level the ranks are balanced.
    mpiio = records([(r, "w", 1, MiB * r, MiB, 0.0, 0.1) for r in range(4)], layer="MPIIO")
    posix = records([(0, "w", 1, 0, 4 * MiB, 0.05, 0.1)])
    tr = trace(recs=Records.concat([mpiio, posix]), nprocs=4)
    assert findings(tr, "rank-zero-heavy") == []


# -- unbalanced-ranks --------------------------------------------------------


def test_two_heavy_ranks_are_unbalanced():
    rows = [(r, "w", 1, 10000 * r, 100, 0.0, 0.1) for r in range(8)]
    rows += [(r, "w", 2, 1000 * i, 1000, 0.1 * i, 0.1 * i + 0.1) for r in (8, 9) for i in range(5)]
    (f,) = findings(trace(recs=records(rows), nprocs=10), "unbalanced-ranks")
    assert f.level == Level.WARN
    assert f.drishti == "D02"
    assert f.evidence["unbalanced"] == 2
    assert set(f.evidence["listed_ranks"].split()) == {"8", "9"}
    assert "rank(s) 8, 9" in f.message
    assert [e.path for e in f.files] == ["rank 8", "rank 9"]


def test_a_few_extra_bytes_are_not_an_imbalance():
    # Above mean + 1σ, but only 10 bytes more than its peers: below rank_excess.
    rows = [(r, "w", 1, 10000 * r, 1000, 0.0, 0.1) for r in range(9)]
    rows.append((9, "w", 1, 90000, 1010, 0.0, 0.5))
    assert findings(trace(recs=records(rows), nprocs=10), "unbalanced-ranks") == []


def test_equal_ranks_are_balanced():
    rows = [(r, "w", 1, 1000 * r, 1000, 0.0, 0.1) for r in range(6)]
    assert findings(trace(recs=records(rows), nprocs=6), "unbalanced-ranks") == []


# -- phases() helper ---------------------------------------------------------


def test_three_bursts_are_three_phases():
    rows = []
    for burst, t0 in enumerate((0.0, 100.0, 200.0)):
        for r in range(4):
            rows.append((r, "w", 1, 1000 * (4 * burst + r), 1000, t0 + 0.1 * r, t0 + 0.1 * r + 1))
    p = phases(records(rows))
    assert len(p["start"]) == 3
    assert p["start"].tolist() == pytest.approx([0.0, 100.0, 200.0])
    assert p["end"].tolist() == pytest.approx([1.3, 101.3, 201.3])
    assert p["duration"].tolist() == pytest.approx([1.3, 1.3, 1.3])
    assert p["ops"].tolist() == [4, 4, 4]
    assert p["bytes"].tolist() == [4000, 4000, 4000]
    assert p["ranks"].tolist() == [4, 4, 4]


def test_overlapping_intervals_merge_and_rank_times():
    rows = [
        (0, "w", 1, 0, 10, 0.0, 1.0),
        (1, "w", 1, 10, 10, 0.5, 3.0),  # overlaps rank 0: one busy interval
        (2, "r", 1, 20, 10, 2.9, 3.2),  # overlaps rank 1
        (2, "r", 1, 30, 10, 3.2, 3.3),  # touches: still the same interval
    ]
    p = phases(records(rows))
    assert len(p["start"]) == 1
    assert p["busy"][0] == pytest.approx(3.3)
    assert p["fastest_rank"][0] == 2 and p["fastest_time"][0] == pytest.approx(0.4)
    assert p["slowest_rank"][0] == 1 and p["slowest_time"][0] == pytest.approx(2.5)
    assert p["median_time"][0] == pytest.approx(1.0)


def test_jitter_between_back_to_back_operations_does_not_split_a_phase():
    rng = np.random.default_rng(3)
    gaps = rng.uniform(0.0005, 0.0015, 1000)  # half of them above the mean gap
    start = np.cumsum(gaps + 0.01)
    rows = [(0, "w", 1, 100 * i, 100, s, s + 0.01) for i, s in enumerate(start)]
    assert len(phases(records(rows))["start"]) == 1


def test_explicit_gap_joins_or_splits():
    rows = [(0, "w", 1, 0, 10, 0.0, 1.0), (0, "w", 1, 10, 10, 3.0, 4.0),
            (0, "w", 1, 20, 10, 4.5, 5.0)]  # fmt: skip
    assert len(phases(records(rows), gap=1.0)["start"]) == 2
    assert len(phases(records(rows), gap=2.5)["start"]) == 1
    assert len(phases(records(rows), gap=0.1)["start"]) == 3


def _naive_phases(rows, gap):
    """Busy intervals and phases of rows, one operation at a time."""
    spans = sorted((s, max(e, s)) for *_, s, e in rows)
    busy = [list(spans[0])]
    for s, e in spans[1:]:
        if s > busy[-1][1]:
            busy.append([s, e])
        else:
            busy[-1][1] = max(busy[-1][1], e)
    ph = [[busy[0][0], busy[0][1], busy[0][1] - busy[0][0]]]
    for s, e in busy[1:]:
        if s - ph[-1][1] > gap:
            ph.append([s, e, e - s])
        else:
            ph[-1][1] = max(ph[-1][1], e)
            ph[-1][2] += e - s
    which = [max(i for i, p in enumerate(ph) if p[0] <= r[5]) for r in rows]
    ops = [which.count(i) for i in range(len(ph))]
    nbytes = [sum(r[4] for r, w in zip(rows, which, strict=True) if w == i)
              for i in range(len(ph))]  # fmt: skip
    slowest = []
    for i in range(len(ph)):
        per: dict[int, float] = {}
        for r, w in zip(rows, which, strict=True):
            if w == i:
                per[r[0]] = per.get(r[0], 0.0) + max(r[6] - r[5], 0.0)
        slowest.append(max(per.values()))
    return busy, ph, ops, nbytes, slowest


@pytest.mark.parametrize("step", [1, 2, 5, 1 << 20])
@pytest.mark.parametrize("seed", range(6))
def test_phases_in_steps_match_an_operation_by_operation_count(seed, step, monkeypatch):
    from iopilot.checks import recordtools

    monkeypatch.setattr(recordtools, "STEP", step)
    rng = np.random.default_rng(seed)
    rows = []
    for rank in range(3):  # one block per rank, as traces hold them
        t = float(rng.uniform(0, 2))
        for i in range(int(rng.integers(3, 15))):
            d = float(rng.choice([0.0, 0.1, 0.5, 2.0]))
            rows.append((rank, "w", 1, 10 * i, int(rng.integers(1, 9)), t, t + d))
            # the next one touches, starts together, starts near or far
            t += d if rng.random() < 0.3 else float(rng.choice([0.0, 0.05, 1.0, 3.0]))
    busy, ph, ops, nbytes, slowest = _naive_phases(rows, gap=0.9)
    recs = records(rows)
    b_start, b_end = _busy_intervals(recs.start, recs.end)
    assert b_start.tolist() == [b[0] for b in busy]  # touching spans are one interval
    assert b_end.tolist() == [b[1] for b in busy]
    p = phases(recs, gap=0.9)
    assert p["start"].tolist() == pytest.approx([x[0] for x in ph])
    assert p["end"].tolist() == pytest.approx([x[1] for x in ph])
    assert p["busy"].tolist() == pytest.approx([x[2] for x in ph])
    assert p["ops"].tolist() == ops
    assert p["bytes"].tolist() == nbytes
    assert p["slowest_time"].tolist() == pytest.approx(slowest)


@pytest.mark.parametrize("step", [1, 2, 3, 5, 7])
@pytest.mark.parametrize("seed", range(6))
def test_phases_by_the_mean_gap_in_steps_match_one_step(seed, step, monkeypatch):
    """The mean gap is found in one pass, the phases in a second: any steps
    give what one step over all operations gives."""
    from iopilot.checks import recordtools

    rng = np.random.default_rng(50 + seed)
    rows = []
    for rank in range(3):
        t = float(rng.uniform(0, 2))
        for i in range(int(rng.integers(3, 15))):
            d = float(rng.choice([0.0, 0.1, 0.5]))
            rows.append((rank, "w", 1, 10 * i, int(rng.integers(1, 9)), t, t + d))
            t += d + float(rng.choice([0.0, 0.01, 0.05, 1.0, 3.0]))
    recs = records(rows)
    whole = phases(recs)
    monkeypatch.setattr(recordtools, "STEP", step)
    stepped = phases(recs)
    assert stepped.keys() == whole.keys()
    for k in whole:
        assert stepped[k].tolist() == pytest.approx(whole[k].tolist(), rel=1e-12), k


def test_phases_of_nothing_is_empty():
    p = phases(Records.empty())
    assert all(len(v) == 0 for v in p.values())
    assert {"start", "end", "slowest_rank", "median_time"} <= set(p)


# -- io-phases ---------------------------------------------------------------


def _bursts(ranks: int = 4, slow: dict[int, float] | None = None) -> Records:
    rows = []
    for burst, t0 in enumerate((0.0, 4.0, 8.0)):
        for r in range(ranks):
            d = (slow or {}).get(r, 0.1)
            rows.append((r, "w", 1, 1000 * (ranks * burst + r), 1000, t0, t0 + d))
    return records(rows)


def test_io_phases_reports_phases_and_runtime_share():
    (f,) = findings(trace(recs=_bursts(), nprocs=4), "io-phases")
    assert f.level == Level.INFO
    assert f.evidence["phases"] == 3
    assert f.evidence["phase_seconds"] == pytest.approx(0.3)
    assert f.evidence["runtime_seconds"] == pytest.approx(10.0)
    assert f.evidence["phase_share_pct"] == pytest.approx(3.0)
    assert [e.path for e in f.files] == ["phase 1", "phase 2", "phase 3"]
    assert f.files[0].numbers["ranks"] == 4
    assert f.files_total == 3


def test_io_phases_prefers_mpiio_records():
    mpiio = records([(0, "w", 1, 0, 100, 0.0, 1.0)], layer="MPIIO")
    posix = records([(0, "w", 1, 0, 100, 0.2, 0.3), (0, "w", 1, 100, 100, 5.0, 5.1)])
    (f,) = findings(trace(recs=Records.concat([posix, mpiio]), nprocs=1), "io-phases")
    assert f.evidence["layer"] == "MPI-IO"
    assert f.evidence["phases"] == 1


def test_no_records_no_phases():
    rows = [{"file": 1, "rank": 0, "POSIX_WRITES": 10, "POSIX_BYTES_WRITTEN": 100}]
    assert findings(trace(counters("POSIX", rows), nprocs=1), "io-phases") == []


# -- phase-stragglers --------------------------------------------------------


def test_straggler_in_every_phase():
    (f,) = findings(trace(recs=_bursts(slow={3: 1.0}), nprocs=4), "phase-stragglers")
    assert f.level == Level.WARN
    assert f.evidence["straggler_phases"] == 3
    assert f.evidence["worst_rank"] == 3
    assert f.evidence["worst_ratio"] == pytest.approx(10.0)
    assert f.evidence["frequent_stragglers"] == "3"
    # Same bytes as the others: the advice points at the rank's path, not its share.
    assert "node" in f.recommendation


def test_straggler_with_more_data_is_told_to_balance():
    rows = [(r, "w", 1, 1000 * r, 1000, 0.0, 0.1) for r in range(3)]
    rows.append((3, "w", 1, 10000, 9000, 0.0, 0.9))
    (f,) = findings(trace(recs=records(rows), nprocs=4), "phase-stragglers")
    assert f.evidence["worst_rank_bytes"] == 9000
    assert "Balance" in f.recommendation


def test_no_straggler_when_ranks_take_the_same_time():
    assert findings(trace(recs=_bursts(), nprocs=4), "phase-stragglers") == []


def test_no_straggler_below_the_minimum_time():
    # 9× the median, but 9 ms is below straggler_min_time (10 ms).
    fast = _bursts(slow={0: 0.001, 1: 0.001, 2: 0.001, 3: 0.009})
    assert findings(trace(recs=fast, nprocs=4), "phase-stragglers") == []
    assert findings(trace(recs=fast, nprocs=4), "phase-stragglers", straggler_min_time=0.001)


def test_straggler_from_counters_without_records():
    rows = [{"file": 1 + r, "rank": r, "POSIX_WRITES": 10, "POSIX_BYTES_WRITTEN": MiB,
             "POSIX_F_WRITE_TIME": 30.0 if r == 2 else 1.0} for r in range(4)]  # fmt: skip
    (f,) = findings(trace(counters("POSIX", rows), nprocs=4), "phase-stragglers")
    assert f.evidence["source"] == "counters"
    assert f.evidence["worst_rank"] == 2
    assert f.evidence["worst_ratio"] == pytest.approx(30.0)
    assert f.evidence["straggler_ranks"] == 1


# -- overlapping-writes ------------------------------------------------------


def test_two_ranks_writing_the_same_bytes_conflict():
    rows = [(0, "w", 1, 0, 100, 0.0, 0.1), (1, "w", 1, 0, 100, 0.2, 0.3)]
    (f,) = findings(trace(recs=records(rows), nprocs=2), "overlapping-writes")
    assert f.level == Level.WARN
    assert f.evidence["conflicts"] == 1
    assert f.evidence["conflict_bytes"] == 100
    assert f.evidence["top_pair"] == "0-1"
    assert "sync" in f.recommendation and "atomic" in f.recommendation
    assert "MPI_File_set_atomicity" in f.snippet


def test_three_ranks_on_the_same_bytes():
    rows = [(r, "w", 1, 50, 100, 0.0, 0.1) for r in range(3)]
    (f,) = findings(trace(recs=records(rows), nprocs=3), "overlapping-writes")
    assert f.evidence["conflicts"] == 2
    assert f.evidence["conflict_bytes"] == 200
    assert f.evidence["ranks_involved"] == 3


def test_same_rank_rewrite_is_info():
    rows = [(0, "w", 1, 0, 100, 0.0, 0.1), (0, "w", 1, 60, 100, 0.2, 0.3),
            (1, "w", 1, 1000, 100, 0.0, 0.1)]  # fmt: skip
    (f,) = findings(trace(recs=records(rows), nprocs=2), "overlapping-writes")
    assert f.level == Level.INFO
    assert f.evidence["rewrites"] == 1
    assert f.evidence["rewritten_bytes"] == 40
    assert f.evidence["bytes_written"] == 300


def test_adjacent_writes_and_other_files_do_not_overlap():
    rows = [
        (0, "w", 1, 0, 100, 0.0, 0.1),
        (1, "w", 1, 100, 100, 0.0, 0.1),  # touches rank 0's range
        (0, "w", 1, 200, 100, 0.0, 0.1),
        (1, "w", 2, 0, 100, 0.0, 0.1),  # same offsets, another file
        (0, "r", 1, 0, 100, 0.0, 0.1),  # a read is not a rewrite
    ]
    assert findings(trace(recs=records(rows), nprocs=2), "overlapping-writes") == []


def test_conflict_threshold():
    rows = [(0, "w", 1, 0, 100, 0.0, 0.1), (1, "w", 1, 0, 100, 0.2, 0.3)]
    tr = trace(recs=records(rows), nprocs=2)
    assert findings(tr, "overlapping-writes", overlap_count=2) == []


def test_conflict_the_application_asked_for_through_mpiio():
    rows = [(0, "w", 1, 0, 100, 0.0, 0.1), (1, "w", 1, 0, 100, 0.2, 0.3)]
    both = Records.concat([records(rows), records(rows, layer="MPIIO")])
    (f,) = findings(trace(recs=both, nprocs=2), "overlapping-writes")
    assert "asked MPI-IO to write 200 B" in f.recommendation
    assert "100 B of distinct data" in f.recommendation


def test_conflict_from_data_sieving_of_independent_mpiio_writes():
    # The ranks asked MPI-IO for 300 distinct bytes; ROMIO's read-modify-write
    # blocks overlap at the POSIX level.
    posix = records([(0, "w", 1, 0, 200, 0.0, 0.1), (1, "w", 1, 100, 200, 0.2, 0.3)])
    mpiio = counters("MPIIO", [{"file": 1, "rank": -1, "MPIIO_INDEP_WRITES": 2,
                                "MPIIO_BYTES_WRITTEN": 300}])  # fmt: skip
    (f,) = findings(trace(mpiio, recs=posix, nprocs=2), "overlapping-writes")
    assert f.evidence["conflict_bytes"] == 100
    assert "data-sieving" in f.recommendation and "asked" not in f.recommendation


def _naive_repeats(rows):
    """Bytes rewritten by the same rank and by other ranks, byte by byte."""
    same = cross = 0
    for f in {r[2] for r in rows}:
        per_rank: dict[int, set[int]] = {}
        for rank, _op, file, off, ln, *_ in rows:
            if file != f:
                continue
            got = per_rank.setdefault(rank, set())
            span = set(range(off, off + ln))
            same += len(span & got)
            got |= span
        union = set().union(*per_rank.values())
        cross += sum(len(v) for v in per_rank.values()) - len(union)
    return same, cross


@pytest.mark.parametrize("base", [0, 2**61])  # 2**61: keys too wide to pack in one int64
@pytest.mark.parametrize("seed", range(6))
def test_overlap_bytes_match_a_byte_by_byte_count(seed, base):
    rng = np.random.default_rng(seed)
    rows = [(int(rng.integers(0, 4)), "w", int(rng.integers(1, 3)),
             base + int(rng.integers(0, 300)), int(rng.integers(1, 60)), 0.0, 0.1)
            for _ in range(60)]  # fmt: skip
    same, cross = _naive_repeats(rows)
    found = findings(trace(recs=records(rows), nprocs=4), "overlapping-writes")
    got = {f.level: f.evidence for f in found}
    assert got.get(Level.INFO, {}).get("rewritten_bytes", 0) == same
    assert got.get(Level.WARN, {}).get("conflict_bytes", 0) == cross


def _forward_rows(rng, base=0):
    """Rows as traces hold them: one block per rank, each rank moving forward
    through its files (with overlaps of its own and with other ranks)."""
    rows = []
    for rank in range(4):
        off = base + int(rng.integers(0, 100))
        for _ in range(int(rng.integers(5, 25))):
            ln = int(rng.integers(1, 60))
            rows.append((rank, "w", int(rng.integers(1, 3)), off, ln, 0.0, 0.1))
            off += int(rng.integers(-ln + 1, 40))  # may start inside the last one
            off = max(off, rows[-1][3])  # never back
    return rows


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 20])
@pytest.mark.parametrize("seed", range(8))
def test_overlaps_in_steps_match_a_byte_by_byte_count(seed, chunk, monkeypatch):
    from iopilot.checks import recordtools

    monkeypatch.setattr(recordtools, "STEP", chunk)
    rng = np.random.default_rng(100 + seed)
    for rows in (_forward_rows(rng), _forward_rows(rng)[::-1]):  # counting sort; full sort
        same, cross = _naive_repeats(rows)
        found = findings(trace(recs=records(rows), nprocs=4), "overlapping-writes")
        got = {f.level: f.evidence for f in found}
        assert got.get(Level.INFO, {}).get("rewritten_bytes", 0) == same
        assert got.get(Level.WARN, {}).get("conflict_bytes", 0) == cross


def test_the_counting_sort_is_used_only_when_each_rank_moves_forward_in_one_block():
    from iopilot.checks.overlaps import _by_kind_file

    def order(rows):
        r = records(rows)
        grouped, o = _by_kind_file(r.file_id.astype(np.uint8), r.rank, r.offset)
        return (range(len(rows)) if o is None else o) if grouped else None

    forward = [(0, "w", 1, 0, 10, 0, 1), (0, "w", 2, 0, 10, 0, 1), (0, "w", 1, 10, 10, 0, 1),
               (1, "w", 1, 5, 10, 0, 1), (1, "w", 1, 5, 10, 0, 1)]  # fmt: skip
    assert list(order(forward)) == [0, 2, 3, 4, 1]
    in_order = [forward[i] for i in (0, 2, 3, 4)]  # one file: grouped already, no order kept
    r = records(in_order)
    assert _by_kind_file(r.file_id.astype(np.uint8), r.rank, r.offset) == (True, None)
    back = [*forward[:2], (0, "w", 1, 0, 10, 0, 1), *forward[3:]]  # 0 then 0: still forward
    assert order(back) is not None
    back[2] = (0, "w", 1, -1, 10, 0, 1)  # one byte back
    assert order(back) is None
    split = [*forward, (0, "w", 1, 30, 10, 0, 1)]  # rank 0 in two blocks
    assert order(split) is None


# -- overlapping-reads -------------------------------------------------------


def test_all_ranks_reading_the_same_input_is_warn():
    rows = [(r, "r", 1, 0, MiB, 0.0, 0.1) for r in range(4)]
    (f,) = findings(trace(recs=records(rows), nprocs=4), "overlapping-reads")
    assert f.level == Level.WARN
    assert f.evidence["reread_bytes"] == 3 * MiB
    assert f.evidence["reread_by_other_ranks"] == 3 * MiB
    assert f.evidence["distinct_bytes"] == MiB
    assert "MPI_Bcast" in f.snippet


def test_small_rereads_are_info():
    rows = [(r, "r", 1, 0, 100, 0.0, 0.1) for r in range(2)]
    (f,) = findings(trace(recs=records(rows), nprocs=2), "overlapping-reads")
    assert f.level == Level.INFO
    assert f.evidence["reread_bytes"] == 100


def test_same_rank_rereads_are_counted_apart():
    rows = [(0, "r", 1, 0, 2 * MiB, 0.0, 0.1), (0, "r", 1, MiB, 2 * MiB, 0.2, 0.3)]
    (f,) = findings(trace(recs=records(rows), nprocs=1), "overlapping-reads")
    assert f.evidence["reread_by_same_rank"] == MiB
    assert f.evidence["reread_by_other_ranks"] == 0
    assert f.level == Level.INFO  # 1 of 4 MiB: not above half


def test_disjoint_reads_are_fine():
    rows = [(r, "r", 1, 100 * r, 100, 0.0, 0.1) for r in range(4)]
    assert findings(trace(recs=records(rows), nprocs=4), "overlapping-reads") == []


def test_rereads_of_a_file_only_written_through_mpiio_are_blamed_on_mpiio():
    posix = records([(0, "r", 1, 0, MiB, 0.0, 0.1), (1, "r", 1, 0, MiB, 0.0, 0.1),
                     (0, "w", 1, 0, MiB, 0.2, 0.3)])  # fmt: skip
    mpiio = records([(0, "w", 1, 0, MiB, 0.0, 0.3)], layer="MPIIO")
    tr = trace(recs=Records.concat([posix, mpiio]), nprocs=2)
    (f,) = findings(tr, "overlapping-reads")
    assert f.evidence["reread_by_mpiio_itself"] == MiB
    assert "romio_ds_write" in f.snippet


# -- real logs ---------------------------------------------------------------


def _ours(path: Path):
    d = diagnose(load(str(path)), only=OURS)
    assert not [w for w in d.warnings if "failed" in w], d.warnings
    return {(f.check, f.level): f for f in d.findings}


def test_example_ior_hdf5_has_two_phases_and_a_straggler():
    got = _ours(EXAMPLES / "ior_hdf5_example.darshan")
    ph = got[("io-phases", Level.INFO)]
    assert ph.evidence["layer"] == "MPI-IO" and ph.evidence["phases"] == 2
    st = got[("phase-stragglers", Level.WARN)]
    assert st.evidence["worst_phase"] == 2 and st.evidence["worst_rank"] == 1
    assert st.evidence["worst_ratio"] == pytest.approx(3.97, abs=0.01)
    assert st.evidence["host"]
    assert ("rank-zero-heavy", Level.WARN) not in got
    assert ("overlapping-writes", Level.WARN) not in got


def test_example_dxt_serial_log():
    got = _ours(EXAMPLES / "dxt.darshan")
    ph = got[("io-phases", Level.INFO)]
    assert ph.evidence["layer"] == "POSIX" and ph.evidence["phases"] == 4
    assert got[("overlapping-writes", Level.INFO)].evidence["rewrites"] == 5
    assert not any(check in ("rank-zero-heavy", "unbalanced-ranks") for check, _ in got)


def test_example_bad_ost_straggler_from_counters():
    got = _ours(EXAMPLES / "sample-badost.darshan")
    f = got[("phase-stragglers", Level.WARN)]
    assert f.evidence["source"] == "counters"
    assert f.evidence["worst_rank"] == 1507
    assert f.evidence["straggler_ranks"] == 85
    assert f.evidence["worst_ratio"] > 50
    assert ("io-phases", Level.INFO) not in got  # no trace, no phases


@needs_shared
def test_jlbez_rewrites_conflicts_and_mpiio_rereads():
    got = _ours(SHARED / "jlbez_8a_benchmark_write_parallel_id1322696_8-21-14519-"
                "8141979180909667175_12.darshan")  # fmt: skip
    conflict = got[("overlapping-writes", Level.WARN)]
    assert conflict.evidence["conflicts"] == 573
    assert conflict.evidence["conflict_bytes"] == 8276624856
    rewrite = got[("overlapping-writes", Level.INFO)]
    # All bytes of the 128.85 GB file are written twice: 266.1 GB moved in total.
    assert rewrite.evidence["bytes_written"] == 266129016488
    assert (rewrite.evidence["bytes_written"] - rewrite.evidence["rewritten_bytes"]
            - conflict.evidence["conflict_bytes"]) == 128850590856  # fmt: skip
    reads = got[("overlapping-reads", Level.WARN)]
    assert reads.evidence["reread_by_mpiio_itself"] == reads.evidence["reread_bytes"]
    ph = got[("io-phases", Level.INFO)]
    assert ph.evidence["layer"] == "MPI-IO" and ph.evidence["phases"] == 1
    assert ph.files[0].numbers["ranks"] == 384
    assert not any(check in ("rank-zero-heavy", "unbalanced-ranks") for check, _ in got)


@needs_shared
def test_treddy_32_ranks():
    got = _ours(SHARED / "treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan")
    assert got[("io-phases", Level.INFO)].evidence["phases"] == 1
    assert got[("overlapping-writes", Level.INFO)].evidence["rewrites"] == 32
    assert ("overlapping-writes", Level.WARN) not in got
    assert ("unbalanced-ranks", Level.WARN) not in got


@needs_shared
def test_local_collective_4p_is_balanced():
    got = _ours(SHARED / "LOCAL_mpi-io-test_coll_4p_dxt_v3.5.0.darshan")
    # Rank 0 moves 80 bytes more than the others: not an imbalance.
    assert ("unbalanced-ranks", Level.WARN) not in got
    assert got[("io-phases", Level.INFO)].evidence["phases"] == 2


@needs_shared
def test_hdf5_diagonal_every_rank_reads_the_same_metadata():
    got = _ours(SHARED / "hdf5_diagonal_write_1_byte_dxt.darshan")
    f = got[("overlapping-reads", Level.WARN)]
    assert f.evidence["reread_by_other_ranks"] == f.evidence["reread_bytes"] == 2364849
    assert f.evidence["files"] == 20


@needs_shared
def test_nonmpi_phases():
    got = _ours(SHARED / "nonmpi_dxt_anonymized.darshan")
    assert got[("io-phases", Level.INFO)].evidence["phases"] == 11
    assert ("phase-stragglers", Level.WARN) not in got  # one rank: nobody to compare with


@needs_shared
def test_phases_helper_on_a_real_trace():
    tr = load(str(SHARED / "treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan"))
    p = phases(tr.records.of_layer("MPIIO"))
    assert len(p["start"]) == 1 and p["ranks"][0] == 32 and p["ops"][0] == 256
    posix = phases(tr.records.of_layer("POSIX"))
    assert posix["ops"].sum() == 320
    assert np.all(np.diff(posix["start"]) > 0)


@pytest.mark.parametrize("name", shared_logs())
def test_every_shared_log_runs_cleanly(name):
    tr = load(str(SHARED / name))  # every corpus log loads: a failure is a failure
    d = diagnose(tr, only=OURS)
    assert not [w for w in d.warnings if "failed" in w], d.warnings
    for f in d.findings:
        assert f.message and f.check in OURS
        assert all(isinstance(v, int | float | str) for v in f.evidence.values())


def test_overlapping_writes_list_only_the_files_with_overlaps():
    # File 1: a conflict between ranks 0 and 1 and one rewrite by rank 0;
    # file 2: written once, no overlap; file 3: one rewrite by rank 1.
    rows = [(0, "w", 1, 0, 100, 0.0, 0.1), (1, "w", 1, 50, 100, 0.2, 0.3),
            (0, "w", 1, 0, 10, 0.4, 0.5),
            (0, "w", 2, 0, 100, 0.0, 0.1),
            (1, "w", 3, 0, 100, 0.0, 0.1), (1, "w", 3, 0, 30, 0.1, 0.2)]  # fmt: skip
    conflict, rewrite = findings(trace(recs=records(rows), nprocs=2), "overlapping-writes")
    assert conflict.level == Level.WARN and conflict.files_total == 1
    assert [(e.path, e.numbers) for e in conflict.files] == [
        ("/data/file1", {"conflicting ranges": 1, "bytes rewritten by another rank": 50,
                         "bytes written": 210})]  # fmt: skip
    assert conflict.evidence["files"] == 1 and "on 1 file(s)" in conflict.message
    assert rewrite.level == Level.INFO and rewrite.files_total == 2
    assert sorted((e.path, e.numbers["rewrites"], e.numbers["bytes rewritten"])
                  for e in rewrite.files) == [("/data/file1", 1, 10), ("/data/file3", 1, 30)]
    assert rewrite.evidence["rewrites"] == 2 and rewrite.evidence["files"] == 2


def test_python_worker_ranks_get_advice_for_workers():
    """Without launcher ranks the ranks are a main process and its Python
    workers: the advice is about the workers, not MPI-IO; the findings are
    the same."""
    heavy = [(0, "w", 1, 1000 * i, 1000, 0.1 * i, 0.1 * i + 0.05) for i in range(10)]
    heavy += [(r, "w", 1, 20000 + 100 * r, 100, 0.0, 0.05) for r in (1, 2, 3)]
    uneven = [(r, "w", 1, 10000 * r, 100, 0.0, 0.1) for r in range(8)]
    uneven += [(r, "w", 2, 1000 * i, 1000, 0.1 * i, 0.1 * i + 0.1) for r in (8, 9)
               for i in range(5)]  # fmt: skip
    for rows, n, check in ((heavy, 4, "rank-zero-heavy"), (uneven, 10, "unbalanced-ranks")):
        mpi, workers = trace(recs=records(rows), nprocs=n), trace(recs=records(rows), nprocs=n)
        workers.job.rank_source = "workers"
        (f,) = findings(mpi, check)
        (g,) = findings(workers, check)
        assert (f.level, f.message) == (g.level, g.message)
        assert "collective" in f.recommendation and "MPI" not in g.recommendation
        assert "workers" in g.recommendation
    heavy_workers = trace(recs=records(heavy), nprocs=4)
    heavy_workers.job.rank_source = "workers"
    (f,) = findings(heavy_workers, "rank-zero-heavy")
    assert "main process" in f.recommendation and "multiprocessing.Pool" in f.snippet


@pytest.mark.parametrize("step", [1, 2, 3, 7, 1 << 20])
@pytest.mark.parametrize("seed", range(4))
def test_start_order_is_the_stable_sort_in_any_windows(seed, step, monkeypatch):
    from iopilot.checks import recordtools
    from iopilot.checks.phases import _start_order

    monkeypatch.setattr(recordtools, "STEP", step)
    rng = np.random.default_rng(seed)
    # runs in order, one per process, with starts shared within and across them
    start = np.concatenate([np.sort(rng.choice([0.0, 0.5, 1.0, 2.5, 3.0], 12))
                            for _ in range(3)])  # fmt: skip
    assert _start_order(start).tolist() == np.argsort(start, kind="stable").tolist()
    assert _start_order(np.sort(start)) is None
    same = np.full(9, 4.0)  # one window holds them all
    assert _start_order(same) is None
    assert _start_order(np.concatenate([same, [1.0]])).tolist() == [9, *range(9)]
