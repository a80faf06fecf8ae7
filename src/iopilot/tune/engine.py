"""How a trial's command is started: the launcher interface of ``iopilot tune``.

A launcher is a function with the signature of :func:`run_trial`: it runs
``command`` with ``env`` in ``cwd``, stops it after ``timeout`` seconds and
returns a :class:`TrialRun`.  ``local`` runs it on this node (a plain command
or ``mpirun``); ``slurm`` comes from ``iopilot.tune.launch`` when present.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError

LAUNCHERS = ("local", "slurm")
GRACE_S = 5.0  # between SIGTERM and SIGKILL of a trial that ran out of time


@dataclass
class TrialRun:
    """What one run of a trial's command gave."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False


Launcher = Callable[[list[str], dict[str, str], Path, "float | None"], TrialRun]


def _stop(p: subprocess.Popen[str]) -> None:
    """End the run's process group: SIGTERM first (``iopilot run`` and mpirun
    pass it on to the ranks), SIGKILL for what is left after the grace time."""
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_trial(command: list[str], env: dict[str, str], cwd: Path,
              timeout: float | None) -> TrialRun:  # fmt: skip
    """Run ``command`` on this node in its own session (so a timeout can end
    every process it started) and collect its output."""
    t0 = time.monotonic()
    p = subprocess.Popen(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         errors="replace", start_new_session=True)  # fmt: skip
    try:
        out, err = p.communicate(timeout=timeout)
        return TrialRun(p.returncode, out, err, time.monotonic() - t0)
    except subprocess.TimeoutExpired:
        _stop(p)
        out, err = p.communicate()
        return TrialRun(p.returncode, out, err, time.monotonic() - t0, timed_out=True)
    except BaseException:  # interrupted: leave nothing running behind
        _stop(p)
        raise


def launcher(name: str) -> Launcher:
    """The launcher called ``name``; InputError when unknown or not available.
    Launchers other than ``local`` live in ``iopilot.tune.launch``."""
    if name == "local":
        return run_trial
    try:
        from . import launch
    except ImportError:
        if name in LAUNCHERS:
            raise InputError(f"--launcher {name}", "not yet available",
                             "use --launcher local") from None  # fmt: skip
        raise InputError("--launcher", f"unknown launcher {name!r}",
                         f"known: {', '.join(LAUNCHERS)}") from None  # fmt: skip
    return launch.launcher(name)  # type: ignore[return-value]
