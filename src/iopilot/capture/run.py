"""``iopilot run [options] -- COMMAND...``: trace a program, then diagnose it.

The runtime is injected with ``LD_PRELOAD``.  For MPI launchers the
variables are passed to the ranks with the launcher's own option (``-x`` for
Open MPI, ``--export`` for Slurm), so the launcher itself is not traced.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ..errors import InputError

LAYERS = ("POSIX", "STDIO", "MPIIO", "HDF5")
OPENMPI_LAUNCHERS = ("mpirun", "mpiexec", "orterun", "mpirun.openmpi", "mpiexec.openmpi")
SLURM_LAUNCHERS = ("srun",)


def library_path() -> Path:
    """The built runtime library; a clear error when it was not built."""
    env = os.environ.get("IOPILOT_LIB")
    lib = Path(env) if env else Path(__file__).resolve().parent.parent / "_lib" / "libiopilot.so"
    if not lib.exists():
        raise InputError(str(lib), "the iopilot runtime is not built", "run `make` first")
    return lib


def default_trace_dir(command: Sequence[str]) -> Path:
    exe = Path(_program(command)).name or "prog"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(f"iopilot-trace-{exe}-{stamp}-{os.getpid()}")


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
    passed = ["LD_PRELOAD", "IOPILOT_TRACE_DIR", "IOPILOT_MAX_RECORDS", "IOPILOT_LAYERS"]
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


def run(command: Sequence[str], trace_dir: Path, *, max_records: int | None = None,
        layers: Sequence[str] | None = None) -> int:  # fmt: skip
    """Run ``command`` under the runtime, write ``job.json``; return its exit status."""
    if not command:
        raise InputError("iopilot run", "no command given (put it after --)")
    lib = library_path()
    trace_dir.mkdir(parents=True, exist_ok=True)
    if any(trace_dir.glob("p*.json")):
        raise InputError(str(trace_dir), "already holds a trace; choose another --trace-dir")
    env = dict(os.environ)
    env["IOPILOT_TRACE_DIR"] = str(trace_dir.resolve())
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = f"{lib}:{preload}" if preload else str(lib)
    if max_records is not None:
        env["IOPILOT_MAX_RECORDS"] = str(max_records)
    if layers:
        bad = [x for x in layers if x not in LAYERS]
        if bad:
            raise InputError("--layers", f"unknown layer(s) {', '.join(bad)}; known: {LAYERS}")
        env["IOPILOT_LAYERS"] = ",".join(layers)
    argv = traced_command(resolve_shim(command), env)
    if Path(command[0]).name in OPENMPI_LAUNCHERS + SLURM_LAUNCHERS:
        # The launcher gets the variables on its command line, not in its own
        # environment, so it does not trace itself.
        env["LD_PRELOAD"] = preload
        if not preload:
            del env["LD_PRELOAD"]
        env.pop("IOPILOT_TRACE_DIR", None)
    if shutil.which(argv[0]) is None and not Path(argv[0]).exists():
        raise InputError(argv[0], "command not found")
    start = time.time()
    try:
        proc = subprocess.run(argv, env=env)
        status = proc.returncode
    except KeyboardInterrupt:
        status = 130
    end = time.time()
    job = {
        "format": "iopilot-job",
        "version": 1,
        "command": list(command),
        "launched": argv,
        "start": start,
        "end": end,
        "exit_status": status,
        "host": socket.gethostname(),
        "mounts": mounts(),
        "env": {k: os.environ[k] for k in ("ROMIO_HINTS", "OMPI_MCA_io", "OMPI_MCA_fcoll",
                                           "SLURM_JOB_ID") if k in os.environ},
    }  # fmt: skip
    (trace_dir / "job.json").write_text(json.dumps(job, indent=1) + "\n")
    return status


def main(args) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise InputError("iopilot run", "no command given: iopilot run [options] -- COMMAND...")
    trace_dir = Path(args.trace_dir) if args.trace_dir else default_trace_dir(command)
    layers = args.layers.split(",") if args.layers else None
    status = run(command, trace_dir, max_records=args.max_records, layers=layers)
    print(f"iopilot: trace in {trace_dir}", file=sys.stderr)
    if not args.trace_only:
        from ..cli import main as cli_main

        rc = cli_main(["report", str(trace_dir), "--color", args.color])
        if rc == 2:
            return rc
    return status
