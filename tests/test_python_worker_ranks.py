"""Ranks of Python jobs that no launcher gave ranks: the main process is rank
0 and each worker process (a multiprocessing pool's, Dask's) a rank of its
own; helpers count under whoever ran them.  Real runs through ``iopilot run``;
each worker names the files it writes after its process id, so the test
knows who wrote what whatever the scheduling."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from iopilot.model import OP_WRITE
from iopilot.sources.trace_procs import Proc, assign_ranks, child_images, program_procs
from test_runtime_env_ranks import traced, written_by_rank

POOL = """
import multiprocessing as mp, os, sys

def work(i):
    with open(os.path.join(sys.argv[1], f"w{os.getpid()}-{i}.dat"), "wb") as f:
        f.write(b"x" * (100 + i))
    return os.getpid()

if __name__ == "__main__":
    open(os.path.join(sys.argv[1], "main.dat"), "wb").write(b"m" * 10)
    pool = mp.get_context(sys.argv[2]).Pool(3)
    res = pool.map_async(work, range(9), chunksize=1)
    res.wait(120)
    assert res.ready()
    pool.close()  # the workers end and write their summaries (terminate() kills them)
    pool.join()
"""

DASK = """
import os, sys
from dask.distributed import Client, LocalCluster, get_worker, wait

def write(i, out):
    name = get_worker().name
    with open(os.path.join(out, f"w{os.getpid()}-{i}-n{name}.dat"), "wb") as f:
        f.write(b"y" * (1000 + i))
    return os.getpid()

if __name__ == "__main__":
    out = sys.argv[1]
    open(os.path.join(out, "main.dat"), "wb").write(b"m" * 10)
    cluster = LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                           dashboard_address=None, timeout=120)
    client = Client(cluster, timeout=120)
    client.wait_for_workers(2, timeout=120)
    addrs = sorted(client.scheduler_info()["workers"])
    futs = [client.submit(write, i, out, workers=[addrs[i % 2]], pure=False) for i in range(6)]
    done, not_done = wait(futs, timeout=120)
    assert not not_done
    assert len({f.result() for f in futs}) == 2
    client.close(timeout=60)
    cluster.close(timeout=60)
"""

_WORKER_FILE = re.compile(r"w(\d+)-(\d+)(?:-n\d+)?\.dat")


def run(tmp_path: Path, script: str, *args: str):
    """``iopilot run --trace-only`` of a Python script: (output directory, trace)."""
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "job.py").write_text(script)
    out = tmp_path / "out"
    out.mkdir()
    return out, traced(tmp_path, str(tmp_path / "job.py"), str(out), *args)


def ranks_of_writers(t, out: Path) -> dict[int, int]:
    """pid of the worker that wrote a file (from its name) -> the one rank its
    writes are under; main.dat, written by the main process, under pid 0."""
    pids: dict[int, set[int]] = {}
    for rank, files in written_by_rank(t, out).items():
        for name in files:
            m = _WORKER_FILE.fullmatch(name)
            pids.setdefault(int(m.group(1)) if m else 0, set()).add(rank)
    assert all(len(r) == 1 for r in pids.values()), pids  # each writer under one rank
    return {pid: r.pop() for pid, r in pids.items()}


def report_json(tmp_path: Path, trace: str) -> dict:
    out = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "iopilot", "report", trace, "--json", str(out)],
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    return report["reports"][0] if "reports" in report else report


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_a_pool_s_workers_are_ranks_of_their_own(tmp_path, method):
    out, t = run(tmp_path, POOL, method)
    workers = t.processes["workers"]
    # a pool starts all its workers at once: ranks 1 to 3, the main process 0
    assert [w["rank"] for w in workers] == [1, 2, 3]
    assert {w["start"] for w in workers} == {"fork" if method != "spawn" else "spawn"}
    rank_of = {w["pid"]: w["rank"] for w in workers}
    writers = ranks_of_writers(t, out)
    assert writers.pop(0) == 0  # main.dat
    assert writers and all(rank_of[pid] == rank for pid, rank in writers.items())
    assert sum(len(f) for f in written_by_rank(t, out).values()) == 10  # every file, once
    assert t.job.nprocs == 4 and t.job.rank_source == "workers"
    # per-rank counters: each worker's files are its own rows
    posix = t.counters["POSIX"]
    for pid, rank in writers.items():
        ids = [k for k, v in t.names.items() if Path(v).parent == out
               and Path(v).name.startswith(f"w{pid}-")]  # fmt: skip
        rows = np.isin(posix.file_id, np.array(ids, np.uint64))
        assert set(posix.rank[rows].tolist()) == {rank}
        assert int(posix["POSIX_WRITES"][rows].sum()) == len(ids)
    # the forkserver and the resource tracker are helpers of rank 0, not ranks
    helpers = t.processes["children"]
    assert t.processes["images"] == 4 + sum(helpers.values())
    if method == "forkserver":
        assert any(k.endswith(" (multiprocessing.forkserver)") for k in helpers), helpers
    report = report_json(tmp_path, str(tmp_path / "trace"))
    assert report["job"]["nprocs"] == 4 and report["job"]["rank_source"] == "workers"
    assert report["processes"]["ranks"] == 4
    assert report["processes"]["exit_codes"] == {"0": 4}
    assert "ranks 1–3 are Python worker processes" in report["processes"]["summary"]
    assert not any(f["check"] == "mpiio-not-used" for f in report["findings"])


def test_dask_local_cluster_workers_are_ranks_and_the_client_is_rank_0(tmp_path):
    out, t = run(tmp_path, DASK)
    workers = t.processes["workers"]
    assert [w["rank"] for w in workers] == [1, 2]
    assert {w["start"] for w in workers} == {"spawn"}  # each Nanny spawns its worker
    rank_of = {w["pid"]: w["rank"] for w in workers}
    writers = ranks_of_writers(t, out)
    # the client's process, which runs the scheduler and the nannies, is rank 0
    assert writers.pop(0) == 0
    assert sorted(writers) == sorted(rank_of)  # both workers wrote, each under its rank
    assert all(rank_of[pid] == rank for pid, rank in writers.items())
    assert sum(len(f) for f in written_by_rank(t, out).values()) == 7
    assert t.job.nprocs == 3 and t.job.rank_source == "workers"
    report = report_json(tmp_path, str(tmp_path / "trace"))
    assert report["job"]["nprocs"] == 3 and report["processes"]["ranks"] == 3


FORK_EXEC_C = """
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char path[4096];
    snprintf(path, sizeof path, "%s/main.dat", argv[1]);
    FILE *f = fopen(path, "w");
    fputs("m", f);
    fclose(f);
    pid_t pid = fork();
    if (pid == 0) {
        execlp("uname", "uname", "-p", (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    return 0;
}
"""

FORK_EXEC_PY = """
import os, subprocess, sys
open(os.path.join(sys.argv[1], "main.dat"), "w").write("m")
pid = os.fork()
if pid == 0:
    os.execvp("uname", ["uname", "-p"])
os.waitpid(pid, 0)
subprocess.run(["uname", "-p"], check=True, stdout=subprocess.DEVNULL)
"""


def test_a_child_that_runs_another_program_is_not_a_worker(tmp_path):
    """A fork that execs ``uname`` (C and Python), and ``subprocess``: helpers of rank 0."""
    exe = tmp_path / "forkexec"
    src = tmp_path / "forkexec.c"
    src.write_text(FORK_EXEC_C)
    subprocess.run(["cc", "-O1", "-o", str(exe), str(src)], check=True, timeout=120)
    out = tmp_path / "c-out"
    out.mkdir()
    trace = tmp_path / "c-trace"
    done = subprocess.run([sys.executable, "-m", "iopilot", "run", "--trace-only", "--trace-dir",
                           str(trace), "--", str(exe), str(out)], capture_output=True,
                          text=True, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr
    from iopilot.sources import load

    for t in (load(str(trace)), run(tmp_path / "py", FORK_EXEC_PY)[1]):
        assert t.job.nprocs == 1 and t.job.rank_source == ""
        assert t.processes["workers"] == [] and t.processes["ranks"] == 1
        assert set(np.unique(t.records.rank).tolist()) == {0}
        assert t.processes["children"].get("uname", 0) >= 1


def test_a_serial_python_program_stays_rank_0(tmp_path):
    out, t = run(tmp_path, "import os, sys\n"
                           "open(os.path.join(sys.argv[1], 'a.dat'), 'wb').write(b'a' * 64)\n")
    assert t.job.nprocs == 1 and t.processes["ranks"] == 1 and t.processes["workers"] == []
    assert written_by_rank(t, out) == {0: {"a.dat": 64}}
    assert set(np.unique(t.records.rank[t.records.op == OP_WRITE]).tolist()) == {0}


# -- the rule, on process images made by hand -----------------------------------

PY = "/usr/bin/python3.11"
SPAWN = [PY, "-B", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()",
         "--multiprocessing-fork"]  # fmt: skip


def image(pid: int, ppid: int, t0: float, exe: str | None = PY, *, n: int = 0,
          cmdline: list[str] | None = None, ended: str = "exit", rank: int = -1) -> Proc:
    """An image; ``exe`` None: it left no summary (killed)."""
    summary = None if exe is None else {
        "exe": exe, "cmdline": cmdline or [exe, "job.py"], "ended_by": ended,
        "execs": int(ended == "exec"), "exit_code": 0,
        "rank_source": "env" if rank >= 0 else "none"}
    return Proc(stem=f"ph-{pid}-{n}", root=Path("/t"), version=3, pid=pid, ppid=ppid, image=n,
                host="h", t0=t0, t_end=1.0, written_rank=rank, known=rank >= 0,
                summary=summary, rec_size=0)  # fmt: skip


def ranks(procs: list[Proc]) -> dict[str, int | None]:
    assign_ranks(procs)
    return {p.stem: p.rank for p in procs}


def test_workers_are_told_by_their_command_line_or_their_parent_s_clock():
    procs = [
        image(10, 1, 1.0),  # the program
        image(15, 10, 1.5, cmdline=SPAWN),  # spawned, started after the forks' time zero
        image(16, 15, 1.6, "/usr/bin/uname"),  # the spawned worker's helper
        image(11, 10, 1.0, ended="_exit"),  # forked: the program's time zero
        image(12, 10, 1.0, None),  # forked, killed: still told by its time zero
        image(13, 10, 1.0, ended="exec"), image(13, 10, 1.3, "/usr/bin/uname", n=1),  # fork+exec
        image(14, 10, 2.0),  # an exec'd Python child, not spawned by multiprocessing
        image(17, 10, 1.7, None),  # spawned and killed: its command line is unknown
        image(18, 14, 2.0, ended="_exit"),  # forked from the helper: a worker of its own
    ]
    got = ranks(procs)
    assert got == {"ph-10-0": 0, "ph-11-0": 1, "ph-12-0": 2, "ph-15-0": 3, "ph-16-0": 3,
                   "ph-13-0": 0, "ph-13-1": 0, "ph-14-0": 0, "ph-17-0": 0, "ph-18-0": 4}
    assert {p.pid: p.worker for p in procs if p.worker} == {11: "fork", 12: "fork", 15: "spawn",
                                                           18: "fork"}  # fmt: skip
    assert child_images(procs) == {"ph-16-0", "ph-13-0", "ph-13-1", "ph-14-0", "ph-17-0"}
    assert [(p.pid, p.rank) for p in program_procs(procs)] == [(10, 0), (11, 1), (15, 3),
                                                               (18, 4)]  # fmt: skip


def test_a_fork_of_a_program_that_is_not_python_is_not_a_worker():
    procs = [image(10, 1, 1.0, "/bin/app"), image(11, 10, 1.0, "/bin/app", ended="_exit")]
    assert ranks(procs) == {"ph-10-0": 0, "ph-11-0": 0}
    # one time zero apart: the same Python fork is a worker
    procs = [image(10, 1, 1.0), image(11, 10, 1.0, ended="_exit")]
    assert ranks(procs) == {"ph-10-0": 0, "ph-11-0": 1}
    procs = [image(10, 1, 1.0), image(11, 10, 1.0 + 1e-9, ended="_exit")]
    assert ranks(procs) == {"ph-10-0": 0, "ph-11-0": 0}


def test_launcher_ranks_keep_their_workers():
    procs = [image(9, 1, 0.5, "/usr/bin/bash"),
             image(10, 9, 1.0, rank=0), image(11, 9, 1.1, rank=1),
             image(12, 10, 1.0, ended="_exit", rank=0), image(13, 11, 1.2, cmdline=SPAWN, rank=1)]
    assert ranks(procs) == {"ph-9-0": None, "ph-10-0": 0, "ph-11-0": 1, "ph-12-0": 0,
                            "ph-13-0": 1}  # fmt: skip
    assert not any(p.worker for p in procs)
    assert child_images(procs) == {"ph-12-0", "ph-13-0"}
