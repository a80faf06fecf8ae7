"""``iopilot demo``: the main job on a built-in example.

Traces ``examples/mpi_small_writes.c`` (4 MPI ranks writing a shared file
in small independent requests, then reading it back collectively) with the
iopilot runtime, diagnoses the trace and writes the HTML report.  ``--darshan`` diagnoses a real
Darshan log that ships with PyDarshan instead.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

EXAMPLE_LOG = "ior_hdf5_example.darshan"
REPO = Path(__file__).resolve().parents[2]
EXAMPLE_PROGRAM = REPO / "build" / "examples" / "mpi_small_writes"


def example_dir() -> Path:
    """Where PyDarshan keeps its example logs."""
    spec = importlib.util.find_spec("darshan")
    if spec is None or spec.origin is None:
        raise SystemExit("iopilot demo: PyDarshan is not installed; run `make demo`")
    return Path(spec.origin).parent / "examples" / "example_logs"


def mpirun_prefix(ranks: int) -> list[str]:
    """mpirun with what this machine needs (root, fewer cores than ranks)."""
    cmd = ["mpirun", "-np", str(ranks), "--oversubscribe"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def main(cli_main: Callable[[list[str]], int], out_dir: str = "demo-output",
         darshan: bool = False) -> int:  # fmt: skip
    """Trace the example (or read the example log) and report it through
    ``cli_main``, the command line's entry point (passed in: no import cycle)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report, page = out / "report.json", out / "report.html"
    if darshan:
        rc = cli_main(["report", str(example_dir() / EXAMPLE_LOG), "--json", str(report),
                       "--html", str(page)])  # fmt: skip
        print(f"\nThe report of {EXAMPLE_LOG}: open {page.resolve()} in a browser "
              f"(JSON: {report.resolve()})")  # fmt: skip
        return rc
    if not EXAMPLE_PROGRAM.exists() or shutil.which("mpirun") is None:
        print("iopilot demo: the example program or mpirun is missing; run `make demo`",
              file=sys.stderr)  # fmt: skip
        return 2
    data, trace = out / "data", out / "trace"
    shutil.rmtree(trace, ignore_errors=True)
    data.mkdir(parents=True, exist_ok=True)
    command = [*mpirun_prefix(4), str(EXAMPLE_PROGRAM), str(data)]
    print("$ iopilot run -- " + " ".join(command), flush=True)
    rc = cli_main(["run", "--trace-only", "--trace-dir", str(trace), "--", *command])
    if rc != 0:
        print(f"iopilot demo: the example program failed (exit {rc})", file=sys.stderr)
        return rc
    # The findings on the terminal (the newcomer's first look), then the page.
    rc = cli_main(["report", str(trace), "--json", str(report)])
    with contextlib.redirect_stdout(io.StringIO()):
        cli_main(["report", str(trace), "--html", str(page)])
    print(f"\nThe report: open {page.resolve()} in a browser.")
    print(f"The trace is in {trace.resolve()}; the JSON report in {report.resolve()}.")
    print("Trace your own program with `.venv/bin/iopilot run -- PROGRAM ARGS`.")
    return rc
