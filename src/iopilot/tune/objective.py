"""One measurement of a trial: run the command with a settings file applied,
check it, and reduce it to one number.

Objectives: ``io`` (the slowest rank's I/O seconds in the run's trace,
minimised), ``wall`` (seconds from start to exit, minimised) and
``bandwidth`` (MiB/s of a kernel's ``IOPILOT-RESULT`` line, maximised).
Every run goes through ``iopilot run --settings``, so MPI-IO hints and HDF5
properties reach an unmodified program.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from .. import api
from .. import settings as st
from .._record import field, record
from ..errors import InputError
from ..kernel_results import last_result, summarise
from .launch import RunTrial

OBJECTIVES = {"io": ("s", "minimize"), "wall": ("s", "minimize"),
              "bandwidth": ("MiB/s", "maximize")}


@record
class Run:
    """One run: its value, or why it failed."""

    value: float | None
    seconds: float
    reason: str = ""
    findings: list[dict[str, Any]] = field(default_factory=list)
    io: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.value is not None


def absolute_command(command: list[str], cwd: Path) -> list[str]:
    """The command with every argument that names an existing relative path
    made absolute: trials run in directories of their own."""
    out = []
    for arg in command:
        if not arg.startswith("-") and not os.path.isabs(arg) and (cwd / arg).exists() \
                and ("/" in arg or (cwd / arg).is_file()):
            arg = str((cwd / arg).resolve())
        out.append(arg)
    return out


def _tail(text: str, n: int = 300) -> str:
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    lines = [x for x in lines if not x.startswith("iopilot: trace in")]
    return (" | ".join(lines[-3:]))[-n:]


def _failure(rc: int, stderr: str) -> str:
    if rc > 128 or rc < 0:
        what = f"killed by signal {rc - 128 if rc > 128 else -rc}"
    else:
        what = f"exit status {rc}"
    tail = _tail(stderr)
    return f"{what}: {tail}" if tail else what


def bandwidth(stdout: str) -> float | None:
    """MiB/s of the last IOPILOT-RESULT line: writes when it wrote, else reads."""
    result = last_result(stdout)
    if result is None:
        return None
    s = summarise(result)
    for phase in ("write", "read"):
        if phase in s:
            return float(s[phase]["max_mib_s"])
    return None


def io_seconds(trace: Path, *, keep_findings: bool) -> tuple[float, list[dict[str, Any]], dict]:
    """The slowest rank's I/O seconds of a trace, with its findings when asked."""
    doc = api.render(api.diagnose(trace), "dict")
    findings = [{k: f.get(k) for k in ("check", "layer", "level", "cost_seconds", "evidence")}
                for f in doc["findings"]] if keep_findings else []  # fmt: skip
    # per-layer totals ride along: the generated space looks at request sizes
    io = dict(doc["io_time"], layer_summaries=doc["layers"])
    return float(doc["io_time"]["slowest_rank_seconds"]), findings, io


def measure(command: list[str], doc: dict[str, Any], objective: str, run_dir: Path, *,
            launch: RunTrial, timeout: float | None, verify: str | None = None,
            keep_findings: bool = False) -> Run:  # fmt: skip
    """Run ``command`` once in ``run_dir`` (created, then removed) with the
    settings ``doc``; the objective's value, or the reason it has none."""
    run_dir.mkdir(parents=True)
    try:
        return _measure(command, doc, objective, run_dir, launch, timeout, verify, keep_findings)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def _measure(command: list[str], doc: dict[str, Any], objective: str, run_dir: Path,
             launch: RunTrial, timeout: float | None, verify: str | None,
             keep_findings: bool) -> Run:  # fmt: skip
    file = run_dir / "settings.toml"
    st.dump(doc, file)
    trace = run_dir / "trace"
    argv = [sys.executable, "-m", "iopilot", "run", "--trace-only", "--trace-dir", str(trace),
            "--settings", str(file), "--", *command]  # fmt: skip
    # The [ompi] variables also go in the environment: launchers that do not
    # go through `iopilot run` still pass them on, and they are what mpirun reads.
    env = {**os.environ, **st.job_env(doc)}
    r = launch(argv, env, run_dir, timeout)
    if r.timed_out:
        return Run(None, r.seconds, f"timed out after {timeout:g} s")
    if r.returncode != 0:
        return Run(None, r.seconds, _failure(r.returncode, r.stderr))
    if verify:
        v = subprocess.run(verify, shell=True, cwd=run_dir, env=env, capture_output=True,
                           text=True, timeout=timeout)  # fmt: skip
        if v.returncode != 0:
            why = _tail(v.stderr) or _tail(v.stdout)
            return Run(None, r.seconds,
                       f"verify failed (exit status {v.returncode})" + (f": {why}" if why else ""))
    run = Run(r.seconds, r.seconds)
    if objective == "bandwidth":
        bw = bandwidth(r.stdout)
        if bw is None or bw <= 0:
            return Run(None, r.seconds, "no bandwidth: the program printed no IOPILOT-RESULT "
                       "line with bytes written or read")  # fmt: skip
        run = Run(bw, r.seconds)
    if objective != "io" and not keep_findings:
        return run
    if not trace.exists():
        return run if objective != "io" else Run(None, r.seconds, "the program left no trace")
    try:
        value, run.findings, run.io = io_seconds(trace, keep_findings=keep_findings)
    except InputError as e:
        if objective != "io":
            return run
        return Run(None, r.seconds, f"cannot read the trace: {e.reason}")
    if objective == "io":
        run.value = value
    return run
