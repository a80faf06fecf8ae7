"""``iopilot run [options] -- COMMAND...``: trace a program, then diagnose it.

The runtime is injected with ``LD_PRELOAD``.  For MPI launchers the
variables are passed to the ranks with the launcher's own option (``-x`` for
Open MPI, ``--export`` for Slurm), so the launcher itself is not traced.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .. import api, settings
from ..errors import InputError
from ..model.scope import FileScope
from ..report import terminal
from ..runtime_lib import library_path
from ..vocabulary import RUNTIME_SWITCHES
from .foreground import Outcome, run_foreground
from .tracedir import TraceDir

LAYERS = RUNTIME_SWITCHES  # what --layers accepts
OPENMPI_LAUNCHERS = ("mpirun", "mpiexec", "orterun", "mpirun.openmpi", "mpiexec.openmpi")
SLURM_LAUNCHERS = ("srun",)


def _program(command: Sequence[str]) -> str:
    """The traced program's name, looking past an MPI launcher and its options."""
    if Path(command[0]).name in OPENMPI_LAUNCHERS + SLURM_LAUNCHERS:
        for arg in command[1:]:
            if not arg.startswith("-") and not arg.isdigit():
                return arg
    return command[0]


def resolve_shim(command: Sequence[str]) -> list[str]:
    """Replace a pyenv shim (a shell script that starts several processes)
    with the real interpreter, so the trace holds the program, not the shim."""
    found = shutil.which(command[0])
    if not found or "/.pyenv/shims/" not in found:
        return list(command)
    try:
        real = subprocess.run(["pyenv", "which", Path(command[0]).name], capture_output=True,
                              text=True, timeout=30).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return list(command)
    return [real, *command[1:]] if real and Path(real).exists() else list(command)


def traced_command(command: Sequence[str], env: dict[str, str]) -> list[str]:
    """The command line that carries the runtime's variables to every rank."""
    name = Path(command[0]).name
    passed = ["LD_PRELOAD", "IOPILOT_TRACE_DIR", "IOPILOT_MAX_RECORDS", "IOPILOT_LAYERS",
              "IOPILOT_SETTINGS", "IOPILOT_ASYNC", "IOPILOT_ASYNC_RELAXED",
              "IOPILOT_ASYNC_MAX_BYTES"]
    passed = [k for k in passed if k in env]
    if name in OPENMPI_LAUNCHERS:
        extra: list[str] = []
        for k in passed:
            extra += ["-x", f"{k}={env[k]}"]
        return [command[0], *extra, *command[1:]]
    if name in SLURM_LAUNCHERS:
        exports = ",".join(f"{k}={env[k]}" for k in passed)
        return [command[0], f"--export=ALL,{exports}", *command[1:]]
    return list(command)


def mounts() -> list[tuple[str, str]]:
    """(mount point, file-system type) of this node."""
    out = []
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3:
                out.append((parts[1].replace("\\040", " "), parts[2]))
    except OSError:
        pass
    return out


class LaunchError(Exception):
    """The program could not be started; carries the shell's status (126, 127)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def traced_env(command: Sequence[str], trace_dir: Path, max_records: int | None,
               layers: Sequence[str] | None,
               extra: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run ``command`` under the runtime
    (``extra``: more variables for the job, e.g. those of a settings file)."""
    lib = library_path()
    env = dict(os.environ)
    env.update(extra or {})
    env["IOPILOT_TRACE_DIR"] = str(trace_dir.resolve())
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = f"{lib}:{preload}" if preload else str(lib)
    if max_records is not None:
        env["IOPILOT_MAX_RECORDS"] = str(max_records)
    if layers:
        env["IOPILOT_LAYERS"] = ",".join(layers)
    argv = traced_command(resolve_shim(command), env)
    if Path(command[0]).name in OPENMPI_LAUNCHERS + SLURM_LAUNCHERS:
        # The launcher gets the variables on its command line, not in its own
        # environment, so it does not trace itself.
        env["LD_PRELOAD"] = preload
        if not preload:
            del env["LD_PRELOAD"]
        env.pop("IOPILOT_TRACE_DIR", None)
    return argv, env


def run(command: Sequence[str], trace: TraceDir, *, max_records: int | None = None,
        layers: Sequence[str] | None = None,
        extra: dict[str, str] | None = None) -> Outcome:  # fmt: skip
    """Run ``command`` under the runtime with ``job.json`` in ``trace``; raise
    LaunchError when it cannot start."""
    argv, env = traced_env(command, trace.path, max_records, layers, extra)
    job = {
        "format": "iopilot-job",
        "version": 2,
        "command": list(command),
        "launched": argv,
        "start": time.time(),
        "host": socket.gethostname(),
        "mounts": mounts(),
        "env": {k: env[k] for k in ("ROMIO_HINTS", "OMPI_MCA_io", "OMPI_MCA_fcoll",
                                    "SLURM_JOB_ID", "IOPILOT_SETTINGS") if k in env},
    }  # fmt: skip
    trace.claim(job)
    try:
        outcome = run_foreground(argv, env)
    except FileNotFoundError:
        raise LaunchError(f"{command[0]}: command not found", 127) from None
    except OSError as e:
        raise LaunchError(f"{command[0]}: cannot run: {e.strerror}", 126) from None
    job.update(end=time.time(), exit_status=outcome.status, signal=outcome.signal)
    job.update(_program_facts(trace.path))
    try:
        trace.write_job(job)
    except OSError as e:  # the program's status matters more than the job summary
        print(f"iopilot: could not write {trace.path / 'job.json'}: {e.strerror}",
              file=sys.stderr)  # fmt: skip
    return outcome


def _program_facts(trace_dir: Path) -> dict[str, object]:
    """What the program's executables link (statically linked I/O layers,
    language runtime), read here where they exist so that a report made
    elsewhere still says it; nothing when they cannot be read."""
    try:
        return api.program_facts(trace_dir)
    except Exception:  # the program's status and trace matter more
        if os.environ.get("IOPILOT_DEBUG"):
            raise
        return {}


def diagnose(trace_dir: Path, color: str, scope: FileScope | None = None) -> None:
    """Print the diagnosis; when it fails, say why in one line and carry on."""
    try:
        text = api.report(trace_dir, "terminal", thresholds=api.thresholds(), scope=scope,
                          color=terminal.want_color(color, sys.stdout))  # fmt: skip
        terminal.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (`| head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except InputError as e:
        print(f"iopilot: could not diagnose the trace: {e}", file=sys.stderr)
    except KeyboardInterrupt:
        print("iopilot: could not diagnose the trace: interrupted", file=sys.stderr)
    except Exception as e:
        if os.environ.get("IOPILOT_DEBUG"):
            raise
        print(f"iopilot: could not diagnose the trace: internal error: {type(e).__name__}: {e}",
              file=sys.stderr)  # fmt: skip


def trace_and_report(command: Sequence[str], *, trace_dir: str | None = None,
                     trace_only: bool = False, max_records: int | None = None,
                     layers: Sequence[str] | None = None, extra: dict[str, str] | None = None,
                     color: str = "auto", scope: FileScope | None = None) -> int:
    """``iopilot run``: trace ``command`` (with the job variables ``extra``),
    then, unless ``trace_only``, print its diagnosis; the program's status."""
    if not command:
        raise InputError("iopilot run", "no command given: iopilot run [options] -- COMMAND...")
    if bad := [x for x in layers or () if x not in LAYERS]:
        raise InputError("--layers", f"unknown layer(s) {', '.join(bad)}; known: {LAYERS}")
    library_path()  # before anything is created
    if trace_dir:
        trace = TraceDir.given(Path(trace_dir))
    else:
        trace = TraceDir.new_default(Path(_program(command)).name)
    try:
        outcome = run(command, trace, max_records=max_records, layers=layers, extra=extra)
    except LaunchError as e:
        trace.discard()
        print(f"iopilot: {e}", file=sys.stderr)
        return e.status
    except BaseException:
        trace.discard()  # interrupted before the program started, or the directory was taken
        raise
    status = finish(trace, outcome, trace_only=trace_only, color=color, scope=scope)
    if outcome.signal == signal.SIGINT:
        die_by_sigint()
    return status


def async_env(relaxed: bool = False, max_bytes: str | None = None) -> dict[str, str]:
    """The runtime's write-behind variables for --async, --async-relaxed and
    --async-max-bytes."""
    env = {"IOPILOT_ASYNC": "1"}
    if relaxed:
        env["IOPILOT_ASYNC_RELAXED"] = "1"
    if max_bytes:
        try:
            n = settings.parse_size(max_bytes)
        except ValueError as e:
            raise InputError("--async-max-bytes", str(e)) from None
        if n < 1:
            raise InputError("--async-max-bytes", "must be at least 1 byte")
        env["IOPILOT_ASYNC_MAX_BYTES"] = str(n)
    return env


def settings_env(path: str) -> dict[str, str]:
    """The job's variables for a settings file, checked before anything runs:
    IOPILOT_SETTINGS for the runtime, OMPI_MCA_* for Open MPI's [ompi] choices."""
    doc = settings.load(path)  # InputError naming the table and key: exit 2
    return {"IOPILOT_SETTINGS": str(Path(path).resolve()), **settings.job_env(doc)}


def die_by_sigint() -> None:
    """End by SIGINT, as shells and Python do when a child died of it: a calling
    script then stops instead of going on with its next command."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)


def finish(trace: TraceDir, outcome: Outcome, *, trace_only: bool, color: str,
           scope: FileScope | None = None) -> int:
    """Diagnose, say how the program ended and where the trace is; the program's status."""
    if not trace.holds_trace():
        trace.discard()
        print(f"iopilot: the program left no trace (exit status {outcome.status})",
              file=sys.stderr)  # fmt: skip
        return outcome.status
    trace.close()
    if not trace_only:
        diagnose(trace.path, color, scope)
    if failure := outcome.failure():
        print(f"iopilot: the program {failure}", file=sys.stderr)
    print(f"iopilot: trace in {trace.path}", file=sys.stderr)
    return outcome.status
