"""Ranks of jobs started without MPI: torchrun and PyTorch's launchers give
each worker RANK and WORLD_SIZE (and LOCAL_RANK).  A small launcher here does
the same, so no PyTorch is needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from iopilot.model import OP_READ, OP_WRITE
from iopilot.sources import load

LAUNCHER = """
import os, subprocess, sys
n, out, names = int(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
worker = "import os, sys; open(sys.argv[1], 'wb').write(b'x' * int(sys.argv[2]))"
procs = []
for r in range(n):
    env = dict(os.environ, LOCAL_RANK=str(r))
    env.update({k: v for k, v in (("RANK", str(r)), ("WORLD_SIZE", str(n))) if k in names})
    procs.append(subprocess.Popen([sys.executable, "-c", worker,
                                   os.path.join(out, f"w{r}.dat"), str(1024 * (r + 1))],
                                  env=env))
sys.exit(max(p.wait() for p in procs))
"""


def traced(tmp_path: Path, *argv: str):
    """``iopilot run`` of a Python script with its arguments: the trace."""
    trace = tmp_path / "trace"
    done = subprocess.run([sys.executable, "-m", "iopilot", "run", "--trace-only",
                           "--trace-dir", str(trace), "--", sys.executable, *argv],
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return load(str(trace))


def run_job(tmp_path: Path, names: str, n: int = 3):
    script = tmp_path / "launch.py"
    script.write_text(LAUNCHER)
    out = tmp_path / "out"
    out.mkdir()
    return out, traced(tmp_path, str(script), str(n), str(out), names)


def written_by_rank(t, out: Path) -> dict[int, dict[str, int]]:
    """rank -> {file name: bytes written} from the trace's write records."""
    r = t.records
    w = r.op == OP_WRITE
    got: dict[int, dict[str, int]] = {}
    for rank, fid, length in zip(r.rank[w], r.file_id[w], r.length[w], strict=True):
        name = Path(t.names[int(fid)])
        if name.parent == out:
            files = got.setdefault(int(rank), {})
            files[name.name] = files.get(name.name, 0) + int(length)
    return got


def test_rank_and_world_size_make_each_worker_a_rank(tmp_path):
    out, t = run_job(tmp_path, "RANK,WORLD_SIZE")
    assert t.job.nprocs == 3
    assert written_by_rank(t, out) == {r: {f"w{r}.dat": 1024 * (r + 1)} for r in range(3)}
    assert sorted(np.unique(t.records.rank).tolist()) == [0, 1, 2]


def test_rank_without_world_size_is_not_a_job_s_rank(tmp_path):
    # RANK alone is too common a name: the workers are the program's children
    out, t = run_job(tmp_path, "RANK")
    assert t.job.nprocs == 1
    assert set(written_by_rank(t, out)) == {0}
    # and WORLD_SIZE alone gives no rank either
    (tmp_path / "alone").mkdir()
    out, t = run_job(tmp_path / "alone", "WORLD_SIZE")
    assert t.job.nprocs == 1 and set(written_by_rank(t, out)) == {0}


TRAINER = """
import multiprocessing as mp, os, sys

def load(path):  # a data loader's worker: reads what its trainer wrote
    with open(path, 'rb') as f:
        return len(f.read())

if __name__ == '__main__':
    out = sys.argv[1]
    rank = int(os.environ['RANK'])
    path = os.path.join(out, f'w{rank}.dat')
    open(path, 'wb').write(b'x' * 1024 * (rank + 1))
    pool = mp.get_context(sys.argv[2]).Pool(2)
    assert pool.map(load, [path] * 4) == [1024 * (rank + 1)] * 4
    pool.close()  # the workers end as a data loader's do (terminate() would kill them)
    pool.join()
"""


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_a_rank_s_multiprocessing_workers_are_counted_under_its_rank(tmp_path, method):
    """Each rank starts a pool (as PyTorch's data loaders do); its workers'
    reads belong to that rank, whatever the start method."""
    trainer = tmp_path / "trainer.py"
    trainer.write_text(TRAINER)
    launch = tmp_path / "launch.py"
    launch.write_text("""
import os, subprocess, sys
n = 2
procs = [subprocess.Popen([sys.executable, sys.argv[1], sys.argv[2], sys.argv[3]],
                          env=dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r)))
         for r in range(n)]
sys.exit(max(p.wait() for p in procs))
""")
    out = tmp_path / "out"
    out.mkdir()
    t = traced(tmp_path, str(launch), str(trainer), str(out), method)
    assert t.job.nprocs == 2
    r = t.records
    for rank in (0, 1):
        name = str(out / f"w{rank}.dat")
        ids = [k for k, v in t.names.items() if v == name]
        m = np.isin(r.file_id, np.array(ids, np.uint64)) & (r.op == OP_READ)
        # 4 reads of the whole file, each by a worker of that rank's pool, and EOF reads
        assert set(r.rank[m].tolist()) == {rank}
        assert int(r.length[m].sum()) >= 4 * 1024 * (rank + 1)
