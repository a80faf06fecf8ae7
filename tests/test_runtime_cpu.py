"""Where a traced process may run, and what its processors did: the summary's
"cpu" part (affinity mask, online CPUs, launcher and binding, user and system
CPU time, the CPU time of data calls of 64 KiB or more) and the placement of
the background I/O threads (write-behind's, the event-set engine's) on a CPU
the creating thread is not on, read back through the trace reader into
``Trace.cpus``.  Bound and unbound runs: ``taskset``, ``mpirun``'s default
binding (a core per rank) and ``--bind-to none``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from iopilot.capture.run import library_path
from iopilot.errors import InputError
from iopilot.model import ProcessCpu
from iopilot.sources import load

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "runtime" / "tests"
ALLOWED = sorted(os.sched_getaffinity(0))
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
TWO_CPUS = pytest.mark.skipif(len(ALLOWED) < 2, reason="the tests run on one CPU")


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("bin") / "cpu_probe"
    subprocess.run(["cc", "-O1", "-Wall", "-Werror", "-pthread", "-o", str(exe),
                    str(SOURCES / "cpu_probe.c"), str(ROOT / "runtime" / "src" / "async.c"),
                    "-ldl"], check=True, timeout=120)  # fmt: skip
    return exe


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("IOPILOT_", "OMPI_", "SLURM_", "PMI")) and k != "LD_PRELOAD"}


def run(prefix: list[str], probe: Path, tmp: Path, *args: str, mpi: bool = False,
        **env: str) -> tuple[list[ProcessCpu], dict[str, list[set[int]]], Path]:  # fmt: skip
    """Run the probe traced (``prefix``: taskset, mpirun ...): the trace's
    processes, the CPUs of the probe's threads by name, and the trace."""
    work = Path(tempfile.mkdtemp(dir=tmp))
    trace = Path(tempfile.mkdtemp(prefix="iop-trace-", dir=tmp))
    tracing = {"LD_PRELOAD": str(library_path()), "IOPILOT_TRACE_DIR": str(trace), **env}
    e = clean_env()
    if mpi:
        e.update(MPI_ENV)
        prefix = [*prefix, *(a for k in tracing for a in ("-x", k))]
    e.update(tracing)
    r = subprocess.run([*prefix, str(probe), str(work), *args], env=e, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    threads: dict[str, list[set[int]]] = {}
    for line in r.stdout.splitlines():
        name, cpus = line.split("\t")
        threads.setdefault(name, []).append(cpu_list(cpus))
    t = load(str(trace))
    assert t.cpus is not None
    return t.cpus, threads, trace


def cpu_list(text: str) -> set[int]:
    """The CPUs of a list such as "0-2,5"."""
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def thread(p: ProcessCpu, kind: str):
    (t,) = [t for t in p.threads if t.kind == kind]
    return t


@TWO_CPUS
def test_an_unbound_run_places_its_io_threads_off_the_creating_threads_cpu(probe, tmp_path):
    (p,), threads, _ = run([], probe, tmp_path, "engine", IOPILOT_ASYNC="1")
    assert list(p.allowed) == ALLOWED and p.online == os.cpu_count() and not p.bound
    assert p.launcher == "" and p.binding == ""
    wb = thread(p, "write_behind")
    assert wb.creator_cpu in ALLOWED and not wb.shares_core
    assert set(wb.cpus) == set(ALLOWED) - {wb.creator_cpu}
    assert wb.cpu_s is not None and wb.cpu_s > 0
    # the threads as the kernel has them: the I/O threads placed, the
    # program's own thread left with every CPU it had
    assert threads["iopilot-behind"] == [set(wb.cpus)]
    assert threads["cpu_probe"] == [set(ALLOWED)]
    engine = thread(p, "async_engine")
    assert engine.threads == 1 and not engine.shares_core and engine.cpu_s is not None
    assert threads["iopilot-engine"] == [set(engine.cpus)]
    assert len(engine.cpus) == len(ALLOWED) - 1
    assert not p.shares_core()


def test_a_run_bound_to_one_cpu_says_its_io_threads_share_the_core(probe, tmp_path):
    (p,), threads, _ = run(["taskset", "-c", str(ALLOWED[0])], probe, tmp_path, "engine",
                           IOPILOT_ASYNC="1")  # fmt: skip
    assert p.allowed == (ALLOWED[0],) and p.ran_on == ALLOWED[0]
    assert p.bound == (len(ALLOWED) > 1)
    wb, engine = thread(p, "write_behind"), thread(p, "async_engine")
    assert wb.shares_core and wb.cpus == (ALLOWED[0],) and wb.creator_cpu == ALLOWED[0]
    assert engine.shares_core and engine.cpus == (ALLOWED[0],)
    assert p.shares_core()
    # they still did their work: every thread on the one CPU, the bytes written
    assert {frozenset(c) for cs in threads.values() for c in cs} == {frozenset({ALLOWED[0]})}


def test_only_data_calls_of_64_kib_or_more_have_their_cpu_time_measured(probe, tmp_path):
    """The probe writes 64 KiB - 1 bytes, then 64 KiB (and, with write-behind
    and the engine, the threads' own writes are not the program's calls)."""
    for env in ({}, {"IOPILOT_ASYNC": "1"}):
        (p,), _, _ = run([], probe, tmp_path, "engine", **env)
        assert p.io_cpu_bytes == 64 << 10, env
        assert p.io_cpu_s > 0 and p.io_cpu_per_byte == p.io_cpu_s / (64 << 10)


def test_an_fsync_has_its_cpu_time_measured_and_none_without_one(probe, tmp_path):
    """The write-back an fsync starts costs the processor (finding the dirty
    pages, building the requests): measured per sync, apart from the data
    calls' bytes; a run without fsync says none."""
    (p,), _, _ = run([], probe, tmp_path, "sync")
    assert p.io_syncs == 1 and p.io_sync_cpu_s > 0
    assert p.sync_cpu_seconds == p.io_sync_cpu_s and p.io_cpu_bytes == 64 << 10
    (p,), _, _ = run([], probe, tmp_path)
    assert p.io_syncs == 0 and p.io_sync_cpu_s == 0 and p.sync_cpu_seconds is None


def test_large_calls_are_measured_while_measuring_costs_under_1_percent(probe, tmp_path):
    """4,000 more 64 KiB writes into the page cache take a few microseconds
    each, about what the two clock reads cost: some are measured, not all
    (all would need the calls to take 100 times the reads, on average)."""
    (p,), _, _ = run([], probe, tmp_path, "many")
    assert 64 << 10 <= p.io_cpu_bytes < 4001 * (64 << 10)
    assert p.io_cpu_bytes % (64 << 10) == 0 and p.io_cpu_s > 0


def test_user_and_system_cpu_time_of_a_program_that_burns_cpu(probe, tmp_path):
    """The probe burns 0.2 s of its own CPU time (its process CPU clock),
    whatever the machine's load; without it the run takes far less."""
    (busy,), _, _ = run([], probe, tmp_path, "burn")
    (idle,), _, _ = run([], probe, tmp_path)
    assert busy.user_s is not None and busy.system_s is not None and idle.user_s is not None
    assert busy.user_s > 0 and busy.user_s + busy.system_s >= 0.19
    assert idle.user_s + (idle.system_s or 0) < busy.user_s + busy.system_s - 0.1


MPIRUN = shutil.which("mpirun")
needs_mpirun = pytest.mark.skipif(MPIRUN is None, reason="no mpirun")


@needs_mpirun
@TWO_CPUS
def test_mpirun_binds_each_rank_to_a_core_by_default(probe, tmp_path):
    procs, threads, _ = run([MPIRUN, "-np", "2"], probe, tmp_path, mpi=True, IOPILOT_ASYNC="1")
    assert sorted(p.rank for p in procs) == [0, 1]
    for p in procs:
        assert len(p.allowed) == 1 and p.bound, p
        assert p.launcher == "openmpi" and "OMPI_MCA_orte_bound_at_launch=1" in p.binding
        assert thread(p, "write_behind").shares_core
    assert len({p.allowed for p in procs}) == 2  # a core each
    assert all(len(c) == 1 for c in threads["iopilot-behind"])


@needs_mpirun
@TWO_CPUS
def test_mpirun_bind_to_none_leaves_every_cpu_to_each_rank(probe, tmp_path):
    procs, threads, _ = run([MPIRUN, "--bind-to", "none", "-np", "2"], probe, tmp_path,
                            mpi=True, IOPILOT_ASYNC="1")  # fmt: skip
    assert sorted(p.rank for p in procs) == [0, 1]
    for p in procs:
        assert list(p.allowed) == ALLOWED and not p.bound
        assert p.launcher == "openmpi"
        assert "OMPI_MCA_hwloc_base_binding_policy=none" in p.binding
        wb = thread(p, "write_behind")
        assert not wb.shares_core and wb.creator_cpu not in wb.cpus
    assert all(len(c) == len(ALLOWED) - 1 for c in threads["iopilot-behind"])


@TWO_CPUS
def test_srun_cpu_bind_cores_shows_slurm_and_its_binding(probe, tmp_path):
    """A real single-node Slurm whose task plugin binds: ``srun -n2
    --cpu-bind=cores`` gives each task one core, and the trace says so;
    ``--cpus-per-task=2`` gives the task two, and its I/O thread one of its own."""
    from services import slurm_cluster

    with slurm_cluster(task_plugin="task/affinity") as slurm:
        procs, threads, _ = run(["srun", "-n2", "--cpu-bind=cores"], probe, tmp_path,
                                IOPILOT_ASYNC="1", **slurm.env)  # fmt: skip
        (wide,), _, _ = run(["srun", "-n1", "--cpus-per-task=2", "--cpu-bind=cores"], probe,
                            tmp_path, IOPILOT_ASYNC="1", **slurm.env)  # fmt: skip
    assert len(wide.allowed) == 2 and wide.launcher == "slurm"
    assert "SLURM_CPUS_PER_TASK=2" in wide.binding and not wide.shares_core()
    assert sorted(p.rank for p in procs) == [0, 1]
    for p in procs:
        assert p.launcher == "slurm" and len(p.allowed) == 1 and p.bound, p
        assert "SLURM_CPU_BIND_TYPE=mask_cpu:" in p.binding and "SLURM_CPU_BIND=" in p.binding
        assert thread(p, "write_behind").shares_core
    assert len({p.allowed for p in procs}) == 2
    assert all(len(c) == 1 for c in threads["iopilot-behind"])


# -- the reader: damaged values are one-line errors naming the file ----------

DAMAGED = [
    ("cpu", lambda s: s["cpu"].update(allowed="0-1"), "'cpu' allowed"),
    ("cpu", lambda s: s["cpu"].update(allowed=[0, -1]), "'cpu' allowed"),
    ("cpu", lambda s: s["cpu"].update(online="2"), "'cpu' online"),
    ("cpu", lambda s: s["cpu"].update(user_s=-1.0), "'cpu' user_s"),
    ("cpu", lambda s: s["cpu"].update(io_cpu_bytes=1.5), "'cpu' io_cpu_bytes"),
    ("cpu", lambda s: s["cpu"].update(launcher="openmpi"), "'cpu' launcher"),
    ("cpu", lambda s: s.update(cpu=[0]), "'cpu' should be an object"),
    ("wb", lambda s: s["write_behind"].update(shares_core=1), "'write_behind' shares_core"),
    ("wb", lambda s: s["write_behind"].update(thread_cpus=[None]), "'write_behind' thread_cpus"),
    ("wb", lambda s: s["write_behind"].update(thread_cpu_s="x"), "'write_behind' thread_cpu_s"),
    ("engine", lambda s: s["async_engine"].update(threads=-2), "'async_engine' threads"),
]


@pytest.fixture(scope="module")
def good_trace(probe, tmp_path_factory) -> Path:
    _, _, trace = run([], probe, tmp_path_factory.mktemp("good"), "engine", IOPILOT_ASYNC="1")
    return trace


@pytest.mark.parametrize("damage", DAMAGED, ids=[f"{k}-{w}" for k, _, w in DAMAGED])
def test_damaged_cpu_fields_are_an_error_naming_the_file(good_trace, tmp_path, damage):
    _, change, what = damage
    trace = tmp_path / "trace"
    shutil.copytree(good_trace, trace)
    (summary,) = [p for p in trace.glob("*.json") if p.name != "job.json"]
    s = json.loads(summary.read_text())
    change(s)
    summary.write_text(json.dumps(s))
    with pytest.raises(InputError) as e:
        load(str(trace))
    message = str(e.value)
    assert summary.name in message and what in message and "\n" not in message


def test_a_summary_without_the_cpu_part_still_reads(good_trace, tmp_path):
    """An older runtime's summary: no "cpu" part, no thread placement."""
    trace = tmp_path / "trace"
    shutil.copytree(good_trace, trace)
    (summary,) = [p for p in trace.glob("*.json") if p.name != "job.json"]
    s = json.loads(summary.read_text())
    for key in ("thread_cpus", "creator_cpu", "shares_core", "thread_cpu_s"):
        del s["write_behind"][key]
    del s["cpu"], s["async_engine"]
    summary.write_text(json.dumps(s))
    assert load(str(trace)).cpus == []
    assert load(str(good_trace)).cpus[0].threads  # the same trace, whole, has them
