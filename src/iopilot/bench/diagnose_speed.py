"""``iopilot bench diagnose``: wall time and peak memory of ``iopilot report`` per log.

Each run is a fresh process, so start-up and imports count, as a user sees
them.  Peak memory is the child's maximum resident set size (``wait4``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import api
from .synthetic import write_trace

# Byte-compiled modules are what an installed tool runs from; an environment
# that forbids writing them would time the compiler, not the tool.
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def report_command(*args: str) -> list[str]:
    """``iopilot report ARGS`` in a fresh interpreter: what the benches time."""
    return [sys.executable, "-m", "iopilot", "report", *args]


def run_once(cmd: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MiB, exit status) of one command."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_ENV)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024.0, p.returncode


def best_of(cmd: list[str], repeat: int) -> tuple[float, float, int]:
    runs = [run_once(cmd) for _ in range(max(1, repeat))]
    return min(r[0] for r in runs), max(r[1] for r in runs), runs[-1][2]


def main(logs: list[str], *, repeat: int = 3, synthetic: list[int] | None = None,
         compare: str | None = None) -> int:
    """Time ``iopilot report`` on each of ``logs`` (and synthetic traces of
    ``synthetic`` records), best of ``repeat``; also ``compare``, a command."""
    work = Path(tempfile.mkdtemp(prefix="iopilot-bench-diagnose-"))
    try:
        return _main(logs, repeat, synthetic or [], compare, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _size(path: str) -> int:
    p = Path(path)
    return sum(f.stat().st_size for f in p.iterdir()) if p.is_dir() else p.stat().st_size


def _main(given: list[str], repeat: int, synthetic: list[int], compare: str | None,
          work: Path) -> int:
    logs = api.inputs(given)
    for n in synthetic:
        print(f"writing a synthetic trace of {n:,} records ...", file=sys.stderr, flush=True)
        logs.append(str(write_trace(work / f"synthetic-{n}", n)))
    if not logs:
        print("iopilot: error: no logs given (name some, or --synthetic N)", file=sys.stderr)
        return 2
    ours = report_command("--json", os.devnull, "-j", "1")
    other = shlex.split(compare) if compare else None
    width = min(max(len(Path(p).name) for p in logs), 48)
    head = f"{'log':<{width}} {'KiB':>7} {'iopilot s':>9} {'MiB':>6}"
    if other:
        head += f" {other[0] + ' s':>10} {'MiB':>6} {'speed-up':>8}"
    print(head)
    total_ours = total_other = 0.0
    worst_mem = 0.0
    for log in logs:
        wall, mem, rc = best_of([*ours, log], repeat)
        total_ours += wall
        worst_mem = max(worst_mem, mem)
        name = Path(log).name
        name = name if len(name) <= width else name[: width - 3] + "..."
        line = f"{name:<{width}} {_size(log) / 1024:>7.0f} {wall:>9.3f} {mem:>6.0f}"
        if rc not in (0, 1):
            line += f"  (exit {rc})"
        if other:
            owall, omem, orc = best_of([*other, log], repeat)
            total_other += owall
            line += f" {owall:>10.3f} {omem:>6.0f} {owall / wall:>7.1f}x"
            if orc:
                line += f"  ({other[0]} exit {orc})"
        print(line, flush=True)
    summary = f"\n{len(logs)} logs: iopilot {total_ours:.2f} s in all, "
    summary += f"{total_ours / len(logs):.3f} s per log, peak {worst_mem:.0f} MiB"
    if other:
        summary += f"; {other[0]} {total_other:.2f} s ({total_other / total_ours:.1f}x slower)"
    print(summary)
    return 0
