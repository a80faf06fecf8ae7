"""Ranks of jobs started without MPI: torchrun and PyTorch's launchers give
each worker RANK and WORLD_SIZE (and LOCAL_RANK).  A small launcher here does
the same, so no PyTorch is needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from iopilot.model import OP_WRITE
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


def run_job(tmp_path: Path, names: str, n: int = 3):
    script = tmp_path / "launch.py"
    script.write_text(LAUNCHER)
    out = tmp_path / "out"
    out.mkdir()
    trace = tmp_path / "trace"
    done = subprocess.run([sys.executable, "-m", "iopilot", "run", "--trace-only",
                           "--trace-dir", str(trace), "--", sys.executable, str(script),
                           str(n), str(out), names],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out, load(str(trace))


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
