"""How a trial's command is started: the launcher interface of ``iopilot tune``.

A launcher is a function ``run_trial(command, env, cwd, timeout) -> TrialRun``:
it runs ``command`` with ``env`` in ``cwd``, stops it (and every process it
started) after ``timeout`` seconds and says what happened.  The launchers
themselves (``local``: a child process on this node; ``slurm``: a job step or
batch job) live in :mod:`iopilot.tune.launch`; this module is the name the
search code depends on.
"""

from __future__ import annotations

from .launch import LAUNCHERS, RunTrial, TrialRun
from .launch import launcher as _launcher

Launcher = RunTrial

__all__ = ["LAUNCHERS", "Launcher", "TrialRun", "launcher"]


def launcher(name: str) -> Launcher:
    """The launcher called ``name``; InputError when unknown or not available."""
    return _launcher(name)
