"""The async advisor: timelines worked out by hand on both sides of each
rule, the safety check, and the command on a real traced run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from iopilot._record import replace
from iopilot.model import Records
from iopilot.overlap.advise import advise, render_text
from iopilot.overlap.calibrate import Calibration
from iopilot.vocabulary import OP_NAMES, RECORD_LAYERS
from kit import records, trace

FREE = Calibration(float("inf"), 0.0, 64, measured=False)  # no overhead, cores to spare
MB = 100_000_000


def meta(rows: list[tuple], layer: str = "POSIX") -> Records:
    """Metadata records from (rank, op name, file, start, end)."""
    col = list(zip(*rows, strict=True)) if rows else [()] * 5
    n = len(rows)
    return Records(np.array(col[0], np.int32), np.full(n, RECORD_LAYERS.index(layer), np.uint8),
                   np.array([OP_NAMES.index(o) for o in col[1]], np.uint8),
                   np.array(col[2], np.uint64), np.full(n, -1, np.int64), np.zeros(n, np.int64),
                   np.array(col[3], np.float64), np.array(col[4], np.float64))  # fmt: skip


def epochs(compute: float, io: float, steps: int = 4, ranks: int = 1, runtime: float | None = None,
           hosts: dict[int, str] | None = None, metas: list[tuple] | None = None):
    """Each rank: compute, then one write of 100 MB taking ``io`` seconds, per step."""
    rows = [(r, "w", 1 + r, k * MB, MB, compute + k * (compute + io),
             (k + 1) * (compute + io)) for r in range(ranks) for k in range(steps)]  # fmt: skip
    t = trace(recs=records(rows), nprocs=ranks, hosts=hosts)
    t = replace(t, meta_records=meta(metas or []))
    t.job.runtime = runtime if runtime is not None else steps * (compute + io)
    return t


def test_compute_longer_than_io_hides_all_but_the_last_phase():
    a = advise(epochs(2.0, 1.0), FREE)
    # 4 x max(2, 1) + min(2, 1): the last write is never hidden
    assert a.sync_seconds == pytest.approx(12.0) and a.async_seconds == pytest.approx(9.0)
    assert a.recommendation == "on" and "3.000 s" in a.reason
    assert [p.stall_seconds for p in a.phases] == pytest.approx([0, 0, 0, 0])
    assert [p.hidden_seconds for p in a.phases] == pytest.approx([1, 1, 1, 0])
    assert [p.compute_before_seconds for p in a.phases] == pytest.approx([2, 2, 2, 2])


def test_compute_shorter_than_io_hides_the_compute():
    a = advise(epochs(0.5, 1.0), FREE)
    assert a.sync_seconds == pytest.approx(6.0) and a.async_seconds == pytest.approx(4.5)
    assert [p.stall_seconds for p in a.phases] == pytest.approx([0, 0.5, 0.5, 0.5])
    # each write hides behind the next computation only as long as that lasts
    assert [p.hidden_seconds for p in a.phases] == pytest.approx([0.5, 0.5, 0.5, 0])
    # a phase ends where its last write did
    assert [x for p in a.phases for x in (p.start, p.end)] == pytest.approx(
        [0.5, 1.5, 2.0, 3.0, 3.5, 4.5, 5.0, 6.0])  # fmt: skip
    assert a.recommendation == "on"


def test_overhead_longer_than_compute_makes_async_slower():
    handoff = Calibration(float("inf"), 1.0, 64, measured=False)  # 1 s per operation
    a = advise(epochs(0.5, 1.0), handoff)
    assert a.async_seconds == pytest.approx(8.5) and a.sync_seconds == pytest.approx(6.0)
    assert a.recommendation == "off" and "would cost 2.500 s more" in a.reason
    assert [p.overhead_seconds for p in a.phases] == pytest.approx([1.0] * 4)
    handoffs = Calibration(1e15, 0.25, 64, measured=False)  # per operation
    assert advise(epochs(0.5, 1.0), handoffs).async_seconds == pytest.approx(5.5)


def test_async_with_two_buffers_copies_nothing_and_write_behind_copies_every_write():
    slow_copy = Calibration(1e8, 0.0, 64, measured=False)  # 1 s to copy each 100 MB
    a = advise(epochs(0.5, 1.0), slow_copy)
    assert a.async_seconds == pytest.approx(4.5)  # as with no cost at all
    assert [p.overhead_seconds for p in a.phases] == pytest.approx([0.0] * 4)
    # write-behind (no sync or close here: it never waits) pays 1 s a phase
    assert a.write_behind["strict_seconds"] == pytest.approx(8.5)
    fast = advise(epochs(0.5, 1.0), Calibration(1e12, 0.0, 64, measured=False))
    assert fast.write_behind["strict_seconds"] == pytest.approx(4.5 + 4 * MB / 1e12)


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("wakeup_seconds", 0.25, 5.5),   # once per phase, on the program's side
    ("thread_seconds", 0.5, 6.5),    # per operation, on the thread's side: async loses
    ("thread_seconds", 0.0, 4.5),
])  # fmt: skip
def test_engine_costs_per_phase_and_per_operation(field, value, expected):
    cal = Calibration(float("inf"), 0.0, 64, measured=False, **{field: value})
    a = advise(epochs(0.5, 1.0), cal)
    assert a.async_seconds == pytest.approx(expected)
    assert a.recommendation == ("off" if expected > 6.0 else "on")


@pytest.mark.parametrize(("cores", "expected"), [(2, 12.0), (3, 10.5), (4, 9.0)])
def test_io_threads_without_cores_of_their_own_slow_the_compute(cores, expected):
    """Two ranks on one node: their I/O threads need two more cores; with
    fewer, the write calls' time is taken from the computation they overlap."""
    t = epochs(2.0, 1.0, ranks=2, hosts={0: "n1", 1: "n1"})
    a = advise(t, Calibration(1e15, 0.0, cores, measured=False))
    assert a.async_seconds == pytest.approx(expected)


@pytest.mark.parametrize(("io", "rec"), [(0.5, "on"), (0.49, "off")])
def test_the_gain_must_reach_five_percent_of_the_run(io, rec):
    """Two phases: the first one's I/O hides behind the 5 s of computation
    after it; the last one's (0.1 s) never hides."""
    t = trace(recs=records([(0, "w", 1, 0, MB, 4.0, 4.0 + io), (0, "w", 1, MB, MB, 9.5, 9.6)]))
    t = replace(t, meta_records=meta([]))
    t.job.runtime = 10.0
    a = advise(t, FREE)
    assert a.sync_seconds == pytest.approx(10.0)
    assert a.saved_seconds == pytest.approx(io)
    assert a.recommendation == rec


def test_the_last_phase_is_never_hidden_behind_what_follows():
    t = trace(recs=records([(0, "w", 1, 0, MB, 4.0, 5.0)]))
    t = replace(t, meta_records=meta([]))
    t.job.runtime = 10.0  # 5 s after the only phase: async gains nothing
    a = advise(t, FREE)
    assert a.async_seconds == pytest.approx(10.0) and a.recommendation == "off"


@pytest.mark.parametrize(("interference", "expected"), [(0.0, 9.0), (0.5, 10.5), (1.0, 12.0)])
def test_measured_interference_slows_computation_and_writes(interference, expected):
    """One rank with a core to spare: what the calibration measured is still
    taken from the computation a write overlaps (and from the write)."""
    cal = Calibration(float("inf"), 0.0, 64, measured=False, interference=interference)
    assert advise(epochs(2.0, 1.0), cal).async_seconds == pytest.approx(expected)


def test_syncs_move_to_the_thread_and_opens_stay():
    metas = [(0, "open", 1, 1.9, 2.0), (0, "sync", 1, 3.0, 3.5), (0, "close", 1, 3.5, 3.6)]
    t = trace(recs=records([(0, "w", 1, 0, MB, 2.0, 3.0)]))
    t = replace(t, meta_records=meta(metas))
    t.job.runtime = 6.0
    (p,) = advise(t, FREE).phases
    assert p.io_seconds == pytest.approx(1.5)  # the write and the fsync
    assert p.compute_before_seconds == pytest.approx(2.0)


def test_each_rank_s_phases_are_its_own_even_when_the_ranks_are_skewed():
    """Two ranks alternating: while one computes the other writes, so the
    ranks' I/O together leaves no idle gap.  Each rank still has four
    phases of its own, and async hides each write behind its next step."""
    rows = [(r, "w", 1 + r, k * MB, MB, 1.0 + r + 2 * k, 2.0 + r + 2 * k)
            for r in range(2) for k in range(4)]  # fmt: skip
    t = trace(recs=records(rows), nprocs=2)
    t = replace(t, meta_records=meta([]))
    t.job.runtime = 9.0
    a = advise(t, FREE)
    assert len(a.phases) == 4 and a.sync_seconds == pytest.approx(9.0)
    # rank 1: 2 s before its first write, three more steps of 1 s, the last write
    assert a.async_seconds == pytest.approx(6.0)


def test_no_io_is_no_advice():
    t = replace(trace(recs=records([])), meta_records=meta([]))
    a = advise(t, FREE)
    assert a.recommendation == "off" and "no reads, writes" in a.reason and a.phases == []


def _stack(layers: tuple[str, ...], sync_layers: tuple[str, ...], open_s: float = 0.0,
           close_s: float = 0.0, steps: int = 4, compute: float = 2.0):
    """Steps of ``compute`` s, then (HDF5) a file open of ``open_s``, a 1 s
    write of 100 MB seen at each of ``layers`` (nested: same times), a 0.5 s
    sync seen at each of ``sync_layers``, and a close of ``close_s`` (HDF5's
    file layer, and POSIX's at its end)."""
    rows: dict[str, list[tuple]] = {n: [] for n in (*layers, "H5F", "POSIX")}
    metas: dict[str, list[tuple]] = {n: [] for n in rows}
    span = open_s + 1.0 + 0.5 + close_s
    for k in range(steps):
        t = compute + k * (compute + span)
        if open_s:
            metas["H5F"].append((0, "open", 1, t, t + open_s))
        w = t + open_s
        for n in layers:
            rows[n].append((0, "w", 1, k * MB, MB, w, w + 1.0))
        for n in sync_layers:
            metas[n].append((0, "sync", 1, w + 1.0, w + 1.5))
        if close_s:
            metas["H5F"].append((0, "close", 1, w + 1.5, w + 1.5 + close_s))
        metas["POSIX"].append((0, "close", 1, w + 1.5 + close_s - 1e-3, w + 1.5 + close_s))
    t = trace(recs=Records.concat([records(r, n) for n, r in rows.items() if r]))
    t = replace(t, meta_records=Records.concat([meta(m, n) for n, m in metas.items() if m]))
    t.job.runtime = steps * (compute + span)
    return t


def test_the_interface_is_the_highest_one_the_program_calls():
    from iopilot.overlap.advise import interface_of

    assert interface_of(_stack(("POSIX",), ("POSIX",))) == "POSIX"
    assert interface_of(_stack(("POSIX", "STDIO"), ("POSIX",))) == "POSIX"
    assert interface_of(_stack(("POSIX", "MPIIO"), ("POSIX",))) == "MPI-IO"
    assert interface_of(_stack(("POSIX", "MPIIO", "H5D"), ("POSIX",))) == "HDF5"


def test_posix_async_takes_the_fsync_and_mpi_io_leaves_its_sync_on_the_program():
    posix = advise(_stack(("POSIX",), ("POSIX",)), FREE)
    assert posix.interface == "POSIX"
    assert [p.io_seconds for p in posix.phases] == pytest.approx([1.5] * 4)
    # 4 x 2 s of computation, the last write and fsync never hidden
    assert posix.async_seconds == pytest.approx(4 * 2.0 + 1.5)
    # the form predicted, nothing copied, is the one the text tells how to write
    assert "copy=False" in render_text(posix) and "IOPILOT_ES_NOCOPY" in render_text(posix)
    mpi = advise(_stack(("POSIX", "MPIIO"), ("POSIX", "MPIIO")), FREE)
    assert mpi.interface == "MPI-IO" and mpi.sync_seconds == pytest.approx(14.0)
    assert [p.io_seconds for p in mpi.phases] == pytest.approx([1.0] * 4)
    assert [p.own_seconds for p in mpi.phases] == pytest.approx([0.5] * 4)
    assert mpi.async_seconds == pytest.approx(4 * (2.0 + 0.5) + 1.0)
    assert "MPI_File_sync stays blocking" in render_text(mpi)


def test_hdf5_async_takes_the_opens_and_closes_too_write_behind_only_posix():
    t = _stack(("POSIX", "MPIIO", "H5D"), ("POSIX", "MPIIO"), open_s=0.25, close_s=0.25)
    a = advise(t, FREE)
    assert a.interface == "HDF5" and a.as_dict()["interface"] == "HDF5"
    # open, write, close move to the thread; the sync under them is inside
    # no HDF5 call here, so it stays the program's
    assert [p.io_seconds for p in a.phases] == pytest.approx([1.5] * 4)
    assert [p.own_seconds for p in a.phases] == pytest.approx([0.5] * 4)
    assert a.async_seconds == pytest.approx(4 * (2.0 + 0.5) + 1.5)
    # write-behind sees the file system's calls: a close of the written file
    # in every phase, where it waits
    assert a.write_behind["phases_waiting_strict"] == 4


def _two_ranks(second: tuple, metas: list[tuple]):
    rows = [(0, "w", 1, 0, 100, 1.0, 2.0), second]
    t = trace(recs=records(rows), nprocs=2)
    t = replace(t, meta_records=meta(metas))
    t.job.runtime = 5.0
    return advise(t, FREE)


@pytest.mark.parametrize(("second", "metas", "unsafe"), [
    ((1, "r", 1, 50, 100, 3.0, 4.0), [], True),                          # read after write
    ((1, "w", 1, 99, 10, 3.0, 4.0), [], True),                           # write after write
    ((1, "r", 1, 100, 100, 3.0, 4.0), [], False),                        # touching, no overlap
    ((1, "w", 1, 50, 0, 3.0, 4.0), [], False),                           # a write of no byte
    ((1, "r", 1, 50, 0, 3.0, 4.0), [], False),                           # a read of no byte
    ((1, "r", 1, 50, 100, 3.0, 4.0), [(0, "sync", 1, 2.1, 2.2)], False),  # writer synced
    ((1, "r", 1, 50, 100, 3.0, 4.0), [(0, "close", 1, 2.1, 2.2)], False),  # writer closed
    ((1, "r", 1, 50, 100, 3.0, 4.0), [(1, "sync", 1, 2.1, 2.2)], True),   # the reader synced
    ((1, "r", 1, 50, 100, 3.0, 4.0), [(0, "sync", 2, 2.1, 2.2)], True),   # another file
    ((1, "r", 1, 50, 100, 3.0, 4.0), [(0, "sync", 1, 3.5, 3.6)], True),   # too late
    ((1, "r", 1, 50, 100, 0.1, 0.2), [], False),                         # read first
    ((0, "r", 1, 50, 100, 3.0, 4.0), [], False),                         # the same rank
    ((1, "r", 2, 50, 100, 3.0, 4.0), [], False),                         # another file
])  # fmt: skip
def test_reordering_is_unsafe_only_across_ranks_without_a_sync(second, metas, unsafe):
    a = _two_ranks(second, metas)
    assert (a.conflicts_total == 1) is unsafe
    if unsafe:
        assert a.recommendation == "off" and "no sync or close" in a.reason
        (c,) = a.conflicts
        assert (c.first_rank, c.second_rank, c.first_op) == (0, second[0], "write")
        assert c.offset == second[3]
        assert c.bytes == min(100, second[3] + second[4]) - c.offset
    else:
        assert a.conflicts == []


def test_a_fence_counts_for_its_own_file_and_rank_from_after_until_before():
    """_fenced: a sync or close (POSIX) of the rank's file that starts at or
    after ``after`` and ends by ``before``; the first such of the file and
    rank decides, whatever the other files' and ranks' fences."""
    from iopilot.overlap.advise import _fenced

    t = trace(recs=records([(0, "w", 1, 0, 1, 0.0, 0.1)]), nprocs=2)
    t = replace(t, meta_records=meta([
        (0, "sync", 1, 2.0, 2.5), (1, "close", 1, 5.0, 6.0), (0, "sync", 2, 1.0, 1.2),
        (0, "sync", 1, 7.0, 7.1), (1, "open", 2, 0.5, 0.6), (0, "stat", 3, 0.5, 0.6)]))
    cases = [  # (file, rank, after, before): fenced
        ((1, 0, 2.0, 2.5), True),      # starts at after, ends at before
        ((1, 0, 2.0001, 10.0), True),  # the next one of the file and rank
        ((1, 0, 2.0001, 7.05), False),  # which ends after before
        ((1, 0, 1.9, 2.4), False),     # the first after 1.9 ends after 2.4
        ((2, 0, 0.0, 1.2), True),
        ((2, 0, 1.3, 100.0), False),   # rank 1's close of file 1 is not rank 0's of file 2
        ((2, 1, 0.0, 100.0), False),   # an open is no fence
        ((1, 1, 0.0, 6.0), True),      # a close is
        ((1, 1, 5.1, 100.0), False),   # none of this file and rank after 5.1
        ((3, 0, 0.0, 100.0), False),   # a stat is no fence
        ((1, 0, 7.2, 100.0), False),   # after the last of all
        ((4, 1, 0.0, 100.0), False),   # a file never fenced, a rank above the fences'
    ]  # fmt: skip
    q = np.array([c for c, _ in cases], float)
    got = _fenced(t, q[:, 0].astype(np.uint64), q[:, 1].astype(np.int32), q[:, 2], q[:, 3])
    assert got.tolist() == [w for _, w in cases]
    for k, (c, w) in enumerate(cases):  # one at a time, as alone in a job
        one = _fenced(t, np.array([c[0]], np.uint64), np.array([c[1]], np.int32),
                      np.array([c[2]]), np.array([c[3]]))  # fmt: skip
        assert one.tolist() == [w], (k, c)
    empty = _fenced(t, np.array([], np.uint64), np.array([], np.int32), np.array([]), np.array([]))
    assert empty.tolist() == []


def test_both_timelines_of_the_slowest_rank():
    a = advise(epochs(0.5, 1.0, steps=2), FREE)
    got = [(lane, kind, k, round(s, 6), round(e, 6)) for lane, kind, k, s, e in a.lanes]
    assert [x for x in got if x[0] == "sync"] == [
        ("sync", "compute", 0, 0.0, 0.5), ("sync", "io", 0, 0.5, 1.5),
        ("sync", "compute", 1, 1.5, 2.0), ("sync", "io", 1, 2.0, 3.0)]
    assert [x for x in got if x[0] != "sync" and x[4] > x[3]] == [
        ("async", "compute", 0, 0.0, 0.5), ("thread", "io", 0, 0.5, 1.5),
        ("async", "compute", 1, 0.5, 1.0), ("async", "wait", 1, 1.0, 1.5),
        ("thread", "io", 1, 1.5, 2.5), ("async", "wait", 2, 1.5, 2.5)]


def test_the_page_draws_both_timelines_and_fetches_nothing():
    from iopilot.overlap.page import LEFT, WIDTH, render_html

    a = advise(epochs(0.5, 1.0, steps=2), FREE)
    page = render_html(a)
    assert page.count('<rect class="io"') == 4  # two phases, as traced and in the thread
    assert page.count('<rect class="wait"') == 2
    for label in ("without async: program", "with async: program", "with async: I/O thread"):
        assert label in page
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<script" not in page and "ON</b>" in page
    # The time axis: six ticks from 0 to the longer run (3 s as traced), evenly
    # spaced over the drawing's width, and the bars on the same scale.
    ticks = re.findall(r'<text x="([0-9.]+)" y="[0-9.]+" text-anchor="middle">([0-9.]+) s</text>',
                       page)  # fmt: skip
    assert [t for _, t in ticks] == ["0.00", "0.60", "1.20", "1.80", "2.40", "3.00"]
    xs = [float(x) for x, _ in ticks]
    assert xs[0] == LEFT and xs[-1] == pytest.approx(WIDTH - 20, abs=0.1)
    assert np.diff(xs) == pytest.approx([(WIDTH - 20 - LEFT) / 5] * 5, abs=0.1)
    last_io = re.findall(r'<rect class="io" x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)"', page)[1]
    assert float(last_io[0]) + float(last_io[1]) == pytest.approx(xs[-1], abs=0.1)  # ends at 3 s


ADVICE_KEYS = {"source", "ranks", "interface", "predicted", "write_behind", "binding",
               "recommendation", "reason", "safe", "conflicts_total", "conflicts",
               "calibration", "phases", "timelines"}  # fmt: skip


def test_json_fields(tmp_path):
    d = advise(epochs(2.0, 1.0), FREE).as_dict()
    assert set(d) == ADVICE_KEYS and d["source"] == "<test>" and d["ranks"] == 1
    p = d["predicted"]
    assert set(p) == {"sync_seconds", "async_seconds", "saved_seconds", "saved_share",
                      "slowest_rank", "write_behind_seconds", "write_behind_relaxed_seconds"}
    assert p["saved_share"] == pytest.approx(p["saved_seconds"] / p["sync_seconds"])
    assert d["timelines"] and all(set(t) == {"lane", "kind", "phase", "start", "end"}
                                  for t in d["timelines"])  # fmt: skip
    assert {t["lane"] for t in d["timelines"]} == {"sync", "async", "thread"}
    # a run of no time: no share to divide by
    empty = replace(trace(recs=records([])), meta_records=meta([]))
    empty.job.runtime = 0.0
    assert advise(empty, FREE).as_dict()["predicted"]["saved_share"] == 0.0
    assert d["recommendation"] == "on" and d["safe"] is True
    assert len(d["phases"]) == 4 and {"io_seconds", "compute_before_seconds",
                                      "hidden_seconds"} <= set(d["phases"][0])  # fmt: skip
    json.dumps(d)


# ---------------------------------------------------------------------------
# The command on a real run

ROOT = Path(__file__).resolve().parents[1]
EPOCHS = ROOT / "build" / "kernels" / "epochs"


def _iopilot(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return subprocess.run([sys.executable, "-m", "iopilot", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


@pytest.mark.skipif(not EPOCHS.exists(), reason="kernels not built (make -C kernels)")
def test_advise_async_on_a_traced_run(tmp_path):
    r = _iopilot("run", "--trace-dir", "t", "--trace-only", "--", str(EPOCHS), "--api", "posix",
                 "--steps", "3", "--compute", "0.2", "--size", "4m", "--fsync", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = _iopilot("advise", "async", "t", "--json", "a.json", "--html", "a.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "<svg" in (tmp_path / "a.html").read_text()
    d = json.loads((tmp_path / "a.json").read_text())
    assert len(d["phases"]) == 3 and d["ranks"] == 1
    assert all(p["bytes_written"] == 4 << 20 and p["operations"] == 2 for p in d["phases"])
    assert d["predicted"]["async_seconds"] < d["predicted"]["sync_seconds"]
    assert d["calibration"]["measured"] and d["calibration"]["copy_bytes_per_second"] > 1e8
    assert "recommendation:" in r.stdout and "phase" in r.stdout


def test_advise_async_bad_input_is_one_line(tmp_path):
    r = _iopilot("advise", "async", str(tmp_path / "missing"), cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    assert "missing" in r.stderr
    r = _iopilot("advise", "async", str(tmp_path), "--cores", "0", cwd=tmp_path)
    assert r.returncode == 2 and "--cores" in r.stderr and "Traceback" not in r.stderr
    r = _iopilot("advise", "sync", "x", cwd=tmp_path)
    assert r.returncode == 2 and "usage: iopilot advise" in r.stderr


@pytest.mark.skipif(not EPOCHS.exists(), reason="kernels not built (make -C kernels)")
def test_bench_async_runs_and_reports_every_figure(tmp_path):
    r = _iopilot("bench", "async", "--steps", "2", "--size", "1m", "--scenarios",
                 "equal,overhead", "--bindings", "default,advised", "--dir", "runs", "--json",
                 "b.json", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    d = json.loads((tmp_path / "b.json").read_text())
    row, over, *advised = d["scenarios"]
    assert [x["binding"] for x in d["scenarios"]] == ["default"] * 2 + ["advised"] * 2
    # mpirun binds one rank to one core; the advised binding gives it two (when
    # the machine has them), and the advisor sees both from the traces
    assert row["cpus_per_rank"] == 1 and row["predicted_with_own_core_s"] is not None
    assert "--map-by slot:PE=2" in row["launcher_fix"]
    if (os.cpu_count() or 1) >= 2:
        assert advised[0]["cpus_per_rank"] == 2 and advised[0]["launcher_fix"] == ""
    r2 = _iopilot("bench", "async", "--bindings", "tight", cwd=tmp_path)
    assert r2.returncode == 2 and "tight" in r2.stderr and "Traceback" not in r2.stderr
    # no computation to hide anything behind: never worth it
    assert over["scenario"] == "overhead" and over["recommendation"] == "off"
    assert row["scenario"] == "equal" and row["recommendation"] in ("on", "off")
    for key in ("sync_total_s", "async_total_s", "ideal_total_s", "traced_async_run_s",
                "predicted_async_run_s", "prediction_error"):
        assert isinstance(row[key], float), key
    assert row["ideal_total_s"] <= row["sync_total_s"]
    assert "equal" in r.stdout and "predicted" in r.stdout
    r = _iopilot("bench", "async", "--scenarios", "sideways", cwd=tmp_path)
    assert r.returncode == 2 and "sideways" in r.stderr and "Traceback" not in r.stderr


def test_write_behind_waits_where_the_program_syncs_or_closes():
    # 4 x (2 s compute, 1 s write): closing or syncing the file right after
    # each write makes write-behind wait there; the engine still hides it
    closes = [(0, "close", 1, (k + 1) * 3.0, (k + 1) * 3.0) for k in range(4)]
    syncs = [(0, "sync", 1, (k + 1) * 3.0, (k + 1) * 3.0) for k in range(4)]
    plain = advise(epochs(2.0, 1.0), FREE)
    assert plain.write_behind == {"strict_seconds": pytest.approx(9.0),
                                  "relaxed_seconds": pytest.approx(9.0),
                                  "phases_waiting_strict": 0, "phases_waiting_relaxed": 0}
    closed = advise(epochs(2.0, 1.0, metas=closes), FREE)
    assert closed.async_seconds == pytest.approx(9.0)
    assert closed.write_behind["strict_seconds"] == pytest.approx(12.0)
    assert closed.write_behind["relaxed_seconds"] == pytest.approx(12.0)
    assert closed.write_behind["phases_waiting_relaxed"] == 4
    synced = advise(epochs(2.0, 1.0, metas=syncs), FREE)
    assert synced.write_behind["strict_seconds"] == pytest.approx(12.0)
    assert synced.write_behind["relaxed_seconds"] == pytest.approx(9.0)
    assert synced.write_behind["phases_waiting_strict"] == 4
    # a close in only the first two phases: the other two are hidden, but
    # the last is never hidden anyway: 12 - 1
    two = advise(epochs(2.0, 1.0, metas=closes[:2]), FREE)
    assert two.write_behind["phases_waiting_strict"] == 2
    assert two.write_behind["strict_seconds"] == pytest.approx(11.0)
    # a close before the phase's first write (of another file) is no wait
    early = [(0, "close", 9, 2.0 + k * 3.0 - 0.5, 2.0 + k * 3.0 - 0.4) for k in range(4)]
    assert advise(epochs(2.0, 1.0, metas=early), FREE).write_behind["strict_seconds"] == \
        pytest.approx(9.0)  # fmt: skip
    # a close by another rank is not this rank's wait
    other = [(1, "close", 1, (k + 1) * 3.0, (k + 1) * 3.0) for k in range(4)]
    assert advise(epochs(2.0, 1.0, metas=other), FREE).write_behind["strict_seconds"] == \
        pytest.approx(9.0)  # fmt: skip
    d = closed.as_dict()
    assert d["predicted"]["write_behind_seconds"] == pytest.approx(12.0)
    assert d["write_behind"]["phases_waiting_strict"] == 4
    from iopilot.overlap.advise import render_text

    assert "write-behind (iopilot run --async, no change to the program): 12.000 s; it waits " \
           "in 4 of 4 phase(s)" in render_text(closed)  # fmt: skip
    from iopilot.overlap.page import render_html

    assert "no change to the program): 12.000 s; it waits in 4 of 4 phase(s)" in \
        render_html(closed)  # fmt: skip


def test_bench_async_aims_again_when_a_run_misses_its_ratio():
    from iopilot.bench.overlap import TOLERANCE, _aim

    # asked 1.0 s of computation for c = io; the run measured c 1.4 (the fill
    # is in it), io 1.0: 0.4 s too much
    assert _aim(1.0, 1.0, 1.4, 1.0) == pytest.approx(0.6)
    # within the tolerance either side: kept
    assert _aim(1.0, 1.0, 1.0 + TOLERANCE * 0.99, 1.0) is None
    assert _aim(1.0, 1.0, 1.0 - TOLERANCE * 0.99, 1.0) is None
    assert _aim(1.0, 1.0, 1.0 - TOLERANCE * 1.01, 1.0) == pytest.approx(1.0 + TOLERANCE * 1.01)
    # a ratio of 4: 4.0 wanted, 3.0 measured (beyond 20 % of 4)
    assert _aim(3.5, 4.0, 3.0, 1.0) == pytest.approx(4.5)
    assert _aim(3.5, 4.0, 3.3, 1.0) is None
    # never negative, and nothing to aim without computation or I/O
    assert _aim(0.1, 0.1, 2.0, 1.0) == 0.0
    assert _aim(0.0, 1.0, 2.0, 1.0) is None and _aim(1.0, 1.0, 2.0, 0.0) is None
