"""Async I/O under a launcher's binding: where the trace says each rank could
run, the advisor's model when the I/O thread shares the rank's core, the
launcher change it names, and the report's background-shared-core check."""

from __future__ import annotations

import pytest

from iopilot.checks.binding import Binding, binding_of, launcher_fix
from iopilot.model import BackgroundThread, ProcessCpu
from iopilot.overlap.advise import advise
from iopilot.overlap.calibrate import Calibration
from kit import findings, only
from test_overlap_advise import epochs

FREE = Calibration(1e15, 0.0, 64, measured=False)


def cpu(rank, allowed, online=8, launcher="openmpi", threads=(), per_byte=None):
    nbytes = 10**9 if per_byte is not None else 0
    return ProcessCpu(rank=rank, pid=100 + rank, allowed=tuple(allowed), online=online,
                      ran_on=allowed[0], user_s=1.0, system_s=0.5,
                      io_cpu_s=(per_byte or 0.0) * nbytes, io_cpu_bytes=nbytes,
                      launcher=launcher, binding="", threads=tuple(threads))  # fmt: skip


def bound(t, allowed_per_rank, online=8, launcher="openmpi", per_byte=None):
    t.cpus = [cpu(r, a, online, launcher, per_byte=per_byte)
              for r, a in enumerate(allowed_per_rank)]
    return t


def test_the_binding_is_the_fewest_cpus_a_rank_could_use():
    t = bound(epochs(2.0, 1.0, ranks=2, hosts={0: "n1", 1: "n1"}), [[0], [1, 2]])
    b = binding_of(t)
    assert b == Binding("openmpi", 1, 8, 2) and b.shares_core and b.room
    assert not Binding("openmpi", 2, 8, 2).shares_core
    t.cpus = None
    assert binding_of(t) is None  # a Darshan log says nothing of it


@pytest.mark.parametrize(("online", "ranks", "room"), [(4, 2, True), (3, 2, False)])
def test_a_core_for_each_rank_and_its_thread_or_how_many_ranks_fit(online, ranks, room):
    b = Binding("openmpi", 1, online, ranks)
    assert b.room is room
    fix = launcher_fix(b)
    if room:
        assert "--map-by slot:PE=2" in fix and "--bind-to none" in fix
    else:
        assert f"run at most {online // 2} rank(s) per node" in fix


@pytest.mark.parametrize(("launcher", "words"), [
    ("openmpi", "mpirun --map-by slot:PE=2"), ("slurm", "srun --cpus-per-task=2"),
    ("mpich", "mpiexec -bind-to core:2"), ("", "taskset -c 0,1")])  # fmt: skip
def test_the_fix_is_in_the_launcher_the_job_used(launcher, words):
    assert words in launcher_fix(Binding(launcher, 1, 8, 1))


def test_a_thread_sharing_the_core_takes_its_cpu_time_from_the_computation():
    """One rank, compute 2 s then a 1 s write per step (all of it CPU: copies
    into the page cache).  With a core to spare: 4 x 2 + 1 = 9 s.  On one core,
    each step's computation also carries the previous write (3 s), and the
    last write overlaps nothing: 2 + 3 x 3 + 1 = 12 s, what the program took
    without async."""
    free = advise(bound(epochs(2.0, 1.0), [[0, 1]]), FREE)
    assert free.async_seconds == pytest.approx(9.0) and free.own_core_seconds is None
    shared = advise(bound(epochs(2.0, 1.0), [[0]]), FREE)
    assert shared.async_seconds == pytest.approx(12.0)
    assert shared.own_core_seconds == pytest.approx(9.0)
    assert shared.recommendation == "off"
    assert "Open MPI's mpirun binds each rank to a core" in shared.reason
    assert "mpirun --map-by slot:PE=2" in shared.reason and "9.000 s" in shared.reason
    doc = shared.as_dict()["binding"]
    assert doc["shares_core"] and doc["own_core_seconds"] == pytest.approx(9.0)


def test_measured_cpu_per_byte_is_what_the_thread_takes_from_the_computation():
    """The writes last 1 s, but their CPU time is 0.25 s per 100 MB: on a
    shared core only that is taken from the computation."""
    a = advise(bound(epochs(2.0, 1.0), [[0]], per_byte=0.25 / 1e8), FREE)
    assert a.async_seconds == pytest.approx(9.0 + 3 * 0.25 + 0.0, abs=0.01)
    never_more = advise(bound(epochs(2.0, 1.0), [[0]], per_byte=5.0 / 1e8), FREE)
    assert never_more.async_seconds == pytest.approx(12.0)  # at most the calls' time


@pytest.mark.parametrize("turns", [1.0, 1.5])
def test_taking_turns_on_one_core_costs_what_the_calibration_measured(turns):
    """Sharing a core costs the computation the thread's CPU time times the
    measured factor (switches, caches refilled); a free core, nothing."""
    cal = Calibration(1e15, 0.0, 64, measured=False, shared_core=turns)
    a = advise(bound(epochs(2.0, 1.0), [[0]], per_byte=0.25 / 1e8), cal)
    assert a.async_seconds == pytest.approx(9.0 + 3 * 0.25 * turns, abs=0.01)
    assert a.own_core_seconds == pytest.approx(9.0, abs=0.01)
    free = advise(bound(epochs(2.0, 1.0), [[0, 1]], per_byte=0.25 / 1e8), cal)
    assert free.async_seconds == pytest.approx(9.0, abs=0.01)


@pytest.mark.parametrize(("syncs", "extra"), [(0, 0.0), (4, 3 * 0.1)])
def test_a_sync_s_measured_cpu_time_is_taken_from_the_computation_too(syncs, extra):
    """Steps of 2 s of computation, a 0.5 s write (0.25 s of it CPU) and a
    0.5 s fsync.  Its measured CPU time (0.1 s a sync) is the thread's work
    too; unmeasured (a runtime before it), only the wait is counted: none."""
    from iopilot._record import replace
    from kit import records, trace
    from test_overlap_advise import MB, meta

    step = 3.0
    t = trace(recs=records([(0, "w", 1, k * MB, MB, 2.0 + k * step, 2.5 + k * step)
                            for k in range(4)]))  # fmt: skip
    t = replace(t, meta_records=meta([(0, "sync", 1, 2.5 + k * step, 3.0 + k * step)
                                      for k in range(4)]))  # fmt: skip
    t.job.runtime = 4 * step
    c = cpu(0, [0], per_byte=0.25 / 1e8)
    t.cpus = [replace(c, io_cpu_bytes=MB, io_cpu_s=0.25,
                      io_syncs=syncs, io_sync_cpu_s=0.1 * syncs)]  # fmt: skip
    a = advise(t, FREE)
    # 4 x 2 s of computation, 3 of them carrying the previous write's CPU,
    # the last write and sync never hidden
    assert a.async_seconds == pytest.approx(4 * 2.0 + 3 * 0.25 + extra + 1.0, abs=0.01)


def thread_trace(cpu_s, shares=True, runtime=10.0):
    t = epochs(2.0, 0.5, ranks=1, runtime=runtime)
    th = BackgroundThread("write_behind", (0,) if shares else (1,), shares, cpu_s, 0)
    t.cpus = [cpu(0, [0] if shares else [0, 1], threads=[th])]
    return t


@pytest.mark.parametrize(("cpu_s", "level"), [(0.1, "WARN"), (0.0999, "INFO")])
def test_shared_core_check_warns_from_one_percent_of_the_run(cpu_s, level):
    f = only(findings(thread_trace(cpu_s), "background-shared-core"))
    assert f.level.name == level
    assert f.cost_seconds == pytest.approx(cpu_s, abs=1e-6)
    assert "mpirun --map-by slot:PE=2" in f.recommendation
    assert f.evidence["thread_cpu_seconds"] == cpu_s


def test_no_finding_when_the_thread_had_a_core_of_its_own():
    assert findings(thread_trace(1.0, shares=False), "background-shared-core") == []
    t = thread_trace(1.0)
    t.cpus = None
    assert findings(t, "background-shared-core") == []


# -- a real run under mpirun ---------------------------------------------------------------

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from test_overlap_advise import EPOCHS  # noqa: E402


def _iopilot(*args, cwd):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return subprocess.run([sys.executable, "-m", "iopilot", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


@pytest.mark.skipif(not EPOCHS.exists(), reason="kernels not built (make -C kernels)")
@pytest.mark.parametrize("bind", [[], ["--bind-to", "none"]])
def test_the_advisor_knows_whether_mpirun_bound_the_rank(tmp_path, bind):
    """mpirun binds one rank to a core by default: the advisor says the I/O
    thread would share it and names the change; unbound, it says nothing of it."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU: every rank shares it")
    r = _iopilot("run", "--trace-dir", "t", "--trace-only", "--", "mpirun", "-np", "1", *bind,
                 str(EPOCHS), "--api", "posix", "--steps", "3", "--compute", "0.1", "--size",
                 "4m", "--fsync", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = _iopilot("advise", "async", "t", "--json", "a.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    b = json.loads((tmp_path / "a.json").read_text())["binding"]
    assert b["launcher"] == "openmpi" and b["ranks_per_node"] == 1
    if bind:
        assert b["cpus_per_rank"] >= 2 and not b["shares_core"]
        assert b["own_core_seconds"] is None and "mpirun --map-by" not in r.stdout
    else:
        assert b["cpus_per_rank"] == 1 and b["shares_core"]
        assert b["own_core_seconds"] is not None
        assert "binding: each rank could use 1 CPU(s)" in r.stdout
