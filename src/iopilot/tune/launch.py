"""Launchers: how one trial of ``iopilot tune`` runs, and what it leaves behind.

A launcher is a function ``run_trial(command, env, cwd, timeout) -> TrialRun``.
``env`` holds the trial's variables; they are laid over the current
environment.  ``launcher(name, **options)`` looks one up in ``LAUNCHERS``;
adding a launcher is one factory registered with ``@register``.

- ``local``: the command as a child process (it says itself how many ranks,
  e.g. ``mpirun -n 4 prog``).
- ``slurm``: the command as a Slurm job step (``srun``) inside the current
  allocation when ``SLURM_JOB_ID`` is set, otherwise as its own one-node job
  (``srun -N1 -n<ranks>``), or as a batch job (``mode="sbatch"``).  A command
  that starts its own ranks (``mpirun -np N ...``) runs once, in a batch job
  of N tasks (or as it is inside an allocation).  A trial past its timeout is
  cancelled with ``scancel``.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from iopilot.errors import InputError

from .._record import record


@record(frozen=True)
class TrialRun:
    """What one trial did: exit status (negative: killed by that signal), its
    output, its wall time, and whether it was stopped for exceeding its timeout."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False


RunTrial = Callable[[list[str], dict[str, str], Path, float | None], TrialRun]

LAUNCHERS: dict[str, Callable[..., RunTrial]] = {}


def register(name: str) -> Callable[[Callable[..., RunTrial]], Callable[..., RunTrial]]:
    def add(factory: Callable[..., RunTrial]) -> Callable[..., RunTrial]:
        LAUNCHERS[name] = factory
        return factory
    return add


def launcher(name: str, **options) -> RunTrial:
    """The ``run_trial`` function of launcher ``name`` (``local`` or ``slurm``)."""
    try:
        factory = LAUNCHERS[name]
    except KeyError:
        raise InputError("--launcher", f"unknown launcher {name!r}",
                         f"choose one of {', '.join(sorted(LAUNCHERS))}") from None
    return factory(**options)


def _merged_env(env: Mapping[str, str]) -> dict[str, str]:
    return {**os.environ, **{k: str(v) for k, v in env.items()}}


def _timeout_note(timeout: float) -> str:
    return f"iopilot: timed out after {timeout:g} s and was stopped\n"


# --------------------------------------------------------------------------- local


@register("local")
def local_launcher(ranks: int | None = None) -> RunTrial:
    """Trials as child processes.  ``ranks`` is accepted for symmetry with
    ``slurm`` and unused: a local command starts its own ranks."""
    del ranks

    def run_trial(command: list[str], env: dict[str, str], cwd: Path,
                  timeout: float | None) -> TrialRun:
        start = time.monotonic()
        try:
            # Its own session, so that a timeout stops mpirun and all its ranks.
            proc = subprocess.Popen(list(command), env=_merged_env(env), cwd=cwd,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except FileNotFoundError:
            raise InputError(command[0], "no such program") from None
        except PermissionError:
            raise InputError(command[0], "not executable") from None
        try:
            out, err = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            out, err = _stop_group(proc)
        except BaseException:  # interrupted: leave nothing running
            _stop_group(proc)
            raise
        return TrialRun(proc.returncode, _text(out), _text(err) + (
            _timeout_note(timeout) if timed_out and timeout is not None else ""),
            time.monotonic() - start, timed_out)

    return run_trial


def _stop_group(proc: subprocess.Popen, grace: float = 5.0) -> tuple[bytes, bytes]:
    """SIGTERM the process group, SIGKILL it after ``grace`` s; the output so far."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            return proc.communicate(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    return b"", b""  # not reached: communicate() without timeout returns


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode(errors="replace")


# --------------------------------------------------------------------------- slurm

# srun/sbatch messages meaning Slurm itself could not be used (the program never ran).
_SLURM_UNREACHABLE = re.compile(
    r"(?:srun|sbatch): (?:error|fatal): ("
    r"Unable to contact slurm controller.*|Unable to allocate resources: .*|"
    r"Batch job submission failed: .*|Could not establish a configuration source.*|"
    r"Unable to create step for job .*)")

_WAITING_STATES = {"PENDING", "CONFIGURING", "REQUEUED", "SUSPENDED", "REQUEUE_HOLD",
                   "RESV_DEL_HOLD", "REQUEUE_FED"}
_FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                 "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT"}


@record
class SlurmLauncher:
    """Trials through Slurm.

    mode: ``srun`` (a job step in the current allocation, else a one-node job)
    or ``sbatch`` (a batch job whose script runs ``srun <command>``; its state
    is polled every ``poll`` s, much sooner than ``sbatch --wait`` notices).
    ranks: tasks per trial (default: the allocation's, or 1 for a new job).
    mpi: ``--mpi`` plugin (default: the cluster's ``MpiDefault``; Debian's
    Open MPI needs ``pmix``).  srun_args: more options for srun/sbatch, by
    default from ``IOPILOT_SRUN_ARGS`` (e.g. ``-p debug -A proj``).
    The timeout and ``TrialRun.seconds`` count from when the job runs: its
    wait in the queue is left out (to within the polling interval).
    """

    mode: str = "srun"
    ranks: int | None = None
    mpi: str | None = None
    srun_args: Sequence[str] | None = None
    poll: float = 0.2
    pending_poll: float = 0.5  # how often srun's job is looked at while it waits
    grace: float = 15.0  # seconds a cancelled trial has to end before SIGKILL

    def __post_init__(self) -> None:
        if self.mode not in ("srun", "sbatch"):
            raise InputError("--launcher slurm", f"unknown mode {self.mode!r}",
                             "choose srun or sbatch")
        if self.srun_args is None:
            self.srun_args = shlex.split(os.environ.get("IOPILOT_SRUN_ARGS", ""))
        check_slurm(os.environ)

    def __call__(self, command: list[str], env: dict[str, str], cwd: Path,
                 timeout: float | None) -> TrialRun:
        full = _merged_env(env)
        name = f"iopilot-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        ranks = mpi_launcher_ranks(command)
        if ranks is not None:
            # The command starts its own ranks (mpirun): inside an allocation it
            # spreads them over it as it is; otherwise it becomes a batch job
            # holding that many tasks, run once, not once per task by srun.
            if "SLURM_JOB_ID" in full and self.mode == "srun":
                return LAUNCHERS["local"]()(command, env, Path(cwd), timeout)
            return self._sbatch(command, full, Path(cwd), timeout, name,
                                self.ranks or ranks, direct=True)
        if self.mode == "sbatch":
            return self._sbatch(command, full, Path(cwd), timeout, name, self.ranks)
        return self._srun(command, full, Path(cwd), timeout, name)

    # -- pieces shared by both modes
    def _options(self, env: Mapping[str, str], cwd: Path, timeout: float | None,
                 name: str, ranks: int | None, new_job: bool) -> list[str]:
        opts = ["--export=ALL", f"--chdir={cwd}", f"--job-name={name}"]
        if new_job:
            opts += ["--nodes=1", f"--ntasks={ranks or 1}"]
        elif ranks is not None:
            opts.append(f"--ntasks={ranks}")
        if timeout is not None:
            # A backstop in whole minutes; the launcher itself cancels on time.
            opts.append(f"--time={math.ceil(timeout / 60) + 1}")
        return [*opts, *(self.srun_args or ())]

    def _mpi(self) -> list[str]:
        return [f"--mpi={self.mpi}"] if self.mpi else []

    # -- srun: a job step, or a job of its own
    def _srun(self, command: list[str], env: dict[str, str], cwd: Path,
              timeout: float | None, name: str) -> TrialRun:
        argv = ["srun", *self._options(env, cwd, timeout, name, self.ranks,
                                       new_job="SLURM_JOB_ID" not in env),
                *self._mpi(), *command]
        start = time.monotonic()
        try:
            proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True)
        except FileNotFoundError:
            raise _no_slurm("srun") from None
        timed_out = False
        # The timeout and the time taken count from when the trial runs, not
        # from its wait in the queue: while the job is pending, look every
        # `pending_poll` s (a trial that ends sooner is never looked at).
        since = start  # the last moment the trial was known not to be running
        running = False
        try:
            while True:
                if timeout is None:
                    wait = None
                elif running:
                    wait = max(0.0, since + timeout - time.monotonic())
                else:
                    wait = min(self.pending_poll, max(0.0, since + timeout - time.monotonic()))
                try:
                    out, err = proc.communicate(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if not running:
                    now = time.monotonic()
                    running = _running(name, env)
                    if not running:
                        since = now
                        continue
                    if time.monotonic() < since + timeout:
                        continue
                timed_out = True
                _scancel_by_name(name, env)
                try:
                    out, err = proc.communicate(timeout=self.grace)
                except subprocess.TimeoutExpired:
                    _scancel_by_name(name, env, "--signal=KILL")
                    out, err = _stop_group(proc, grace=2.0)
                break
        except BaseException:  # interrupted: cancel the job, not only srun
            _scancel_by_name(name, env)
            _stop_group(proc, grace=2.0)
            raise
        seconds = time.monotonic() - since
        stderr = _text(err)
        if not timed_out and proc.returncode != 0:
            _raise_if_unreachable(stderr)
        if timed_out and timeout is not None:
            stderr += _timeout_note(timeout)
        return TrialRun(proc.returncode, _text(out), stderr, seconds, timed_out)

    # -- sbatch: a batch job, polled
    def _sbatch(self, command: list[str], env: dict[str, str], cwd: Path,
                timeout: float | None, name: str, ranks: int | None,
                direct: bool = False) -> TrialRun:
        """A batch job whose script runs ``srun command`` (or, ``direct``, the
        command itself: it starts its ranks in the job's allocation)."""
        # The output files sit in the trial's directory: the node must reach them.
        spool = Path(tempfile.mkdtemp(prefix=".iopilot-sbatch-", dir=cwd))
        out_file, err_file = spool / "stdout", spool / "stderr"
        script = shlex.join(command if direct else ["srun", *self._mpi(), *command])
        argv = ["sbatch", "--parsable",
                *self._options(env, cwd, timeout, name, ranks, new_job=True),
                f"--output={out_file}", f"--error={err_file}", f"--wrap={script}"]
        start = time.monotonic()
        try:
            try:
                sub = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                                     timeout=60)
            except FileNotFoundError:
                raise _no_slurm("sbatch") from None
            if sub.returncode != 0:
                _raise_if_unreachable(sub.stderr)
                raise InputError("--launcher slurm", f"sbatch failed: {sub.stderr.strip()}")
            job = sub.stdout.strip().split(";")[0]
            timed_out = False
            since = start  # the last moment the job was seen waiting (queue time is not run time)
            try:
                while (info := _job_info(job, env)).get("JobState") not in _FINAL_STATES:
                    now = time.monotonic()
                    if info.get("JobState") in _WAITING_STATES:
                        since = now
                    elif not timed_out and timeout is not None and now > since + timeout:
                        timed_out = True
                        subprocess.run(["scancel", job], env=env, capture_output=True,
                                       timeout=30)
                    time.sleep(self.poll)
            except BaseException:  # interrupted: the job must not run on
                subprocess.run(["scancel", job], env=env, capture_output=True, timeout=30)
                raise
            code, _, sig = info.get("ExitCode", "0:0").partition(":")
            returncode = -int(sig) if sig.strip("0") else int(code)
            stdout = _read(out_file)
            stderr = _read(err_file)
            if info.get("JobState") != "COMPLETED" and not returncode:
                returncode = 1  # cancelled or failed before the script set a status
            if timed_out and timeout is not None:
                stderr += _timeout_note(timeout)
            return TrialRun(returncode, stdout, stderr, time.monotonic() - since, timed_out)
        finally:
            for f in (out_file, err_file):
                f.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                spool.rmdir()


register("slurm")(SlurmLauncher)


_MPI_LAUNCHERS = {"mpirun", "mpiexec", "orterun", "mpiexec.hydra", "mpirun.openmpi",
                  "mpiexec.openmpi", "mpirun.mpich", "mpiexec.mpich"}
_NP_FLAGS = {"-np", "--np", "-n", "--n", "-c"}


def mpi_launcher_ranks(command: Sequence[str]) -> int | None:
    """Ranks asked of mpirun when the command (or the program after a ``--``,
    as in ``iopilot run ... -- mpirun -np 4 app``) is an MPI launcher: 1 when
    it does not say; None when the command is no MPI launcher."""
    starts = [0] + [i + 1 for i, a in enumerate(command) if a == "--"]
    for i in starts:
        if i < len(command) and os.path.basename(command[i]) in _MPI_LAUNCHERS:
            args = command[i + 1:]
            for flag, value in itertools.pairwise(args):
                if flag in _NP_FLAGS and value.isdigit():
                    return int(value)
            for a in args:
                key, _, value = a.partition("=")
                if key in _NP_FLAGS and value.isdigit():
                    return int(value)
            return 1
    return None


def check_slurm(env: Mapping[str, str]) -> None:
    """Raise InputError unless the Slurm controller answers."""
    conf = env.get("SLURM_CONF")
    if conf and not Path(conf).is_file():
        # Slurm's clients would retry for a minute before saying so.
        raise InputError("--launcher slurm", f"SLURM_CONF names {conf}, which does not exist")
    try:
        ping = subprocess.run(["scontrol", "ping"], env=dict(env), capture_output=True,
                              text=True, timeout=60)
    except FileNotFoundError:
        raise _no_slurm("scontrol") from None
    except subprocess.TimeoutExpired:
        raise InputError("--launcher slurm", "the Slurm controller did not answer in 60 s",
                         "scontrol ping hangs") from None
    if ping.returncode != 0 or " is UP" not in ping.stdout:
        # One line says it ("... is DOWN", else the last: "fatal: Could not ...");
        # scontrol frames the first in a banner of asterisks.
        lines = [line.strip() for line in (ping.stdout + ping.stderr).splitlines()
                 if line.strip(" *")]
        down = [line for line in lines if " is DOWN" in line]
        said = (down or lines or [f"scontrol ping exited with status {ping.returncode}"])[-1]
        for prefix in ("scontrol: ", "fatal: ", "error: "):
            said = said.removeprefix(prefix)
        raise InputError("--launcher slurm", f"cannot reach the Slurm controller: {said}",
                         "is slurmctld running, and SLURM_CONF set for this cluster?")


def _no_slurm(program: str) -> InputError:
    return InputError("--launcher slurm", f"{program} is not on PATH",
                      "install Slurm's client commands, or use --launcher local")


def _raise_if_unreachable(stderr: str) -> None:
    m = _SLURM_UNREACHABLE.search(stderr)
    if m:
        raise InputError("--launcher slurm", f"Slurm refused the trial: {m.group(1).strip()}")


def _scancel_by_name(name: str, env: Mapping[str, str], *extra: str) -> None:
    """Cancel the trial's job, or its step when it runs inside an allocation."""
    targets = []
    job = env.get("SLURM_JOB_ID")
    if job:
        with contextlib.suppress(subprocess.TimeoutExpired):
            steps = subprocess.run(["squeue", "-h", "-s", "-j", job, "-o", "%i %j"],
                                   env=dict(env), capture_output=True, text=True, timeout=30)
            targets = [line.split()[0] for line in steps.stdout.splitlines()
                       if line.split()[1:] == [name]]
    cmd = ["scancel", *extra, *targets] if targets else ["scancel", *extra, f"--name={name}"]
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(cmd, env=dict(env), capture_output=True, timeout=30)


def _running(name: str, env: Mapping[str, str]) -> bool:
    """Whether the trial's job (or, inside an allocation, its step) has started."""
    job = env.get("SLURM_JOB_ID")
    argv = (["squeue", "-h", "-s", "-j", job, "-o", "%j"] if job
            else ["squeue", "-h", f"--name={name}", "-o", "%T"])
    try:
        r = subprocess.run(argv, env=dict(env), capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return False
    words = r.stdout.split()
    if job:
        return name in words
    return bool(words) and words[0] not in _WAITING_STATES


def _job_info(job: str, env: Mapping[str, str]) -> dict[str, str]:
    r = subprocess.run(["scontrol", "show", "job", "-o", job], env=dict(env),
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise InputError("--launcher slurm", f"lost track of job {job}: {r.stderr.strip()}")
    return dict(kv.split("=", 1) for kv in r.stdout.split() if "=" in kv)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
