"""``iopilot bench KERNEL``: run an I/O kernel with MPI and summarise it like IOR.

Kernels are C programs built by ``make`` into ``build/kernels/``; each prints
one ``IOPILOT-RESULT {json}`` line (see ``kernels/common.h``).  This module
launches them, parses that line and turns bytes and times into bandwidths.
Nothing is compiled at run time.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import InputError
from .catalog import KERNELS

REPO = Path(__file__).resolve().parents[3]
KERNEL_DIR = REPO / "build" / "kernels"
MiB = 1024 * 1024
MD_PHASES = ("create", "stat", "read", "remove")
RESULT_TAG = "IOPILOT-RESULT "
OPTIONS_TAG = "IOPILOT-OPTIONS "


def kernel_path(name: str) -> Path:
    if name not in KERNELS:
        raise InputError(name, f"unknown kernel (known: {', '.join(KERNELS)})")
    exe = KERNEL_DIR / name
    if not exe.exists():
        raise InputError(str(exe), "kernel not built", "run `make` first")
    return exe


def mpirun_command(ranks: int) -> list[str]:
    """mpirun with what this machine needs (root, more ranks than cores)."""
    if shutil.which("mpirun") is None:
        raise InputError("mpirun", "not found", "run `make` to install Open MPI")
    cmd = ["mpirun", "-np", str(ranks), "--oversubscribe"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


class KernelFailed(InputError):
    """A kernel run that stopped: the kernel's own message, the usage it
    printed (if any) and the exit status to pass on (3: data read back wrong)."""

    def __init__(self, name: str, reason: str, status: int = 2, usage: str = "") -> None:
        super().__init__(f"iopilot bench {name}", reason)
        self.status, self.usage = status, usage


# What a kernel prints when it stops (kernels/common.c: stop()).
_KERNEL_STOP = re.compile(r"^[\w-]+: (error|verification failed) \(rank (\d+)\): (.*)$")
_BANNER = re.compile(r"^-{10,}$")


def failure(name: str, status: int, stderr: str) -> KernelFailed:
    """Why a kernel run failed, from its stderr: the kernel's own line when it
    printed one, else the first paragraph of mpirun's (a crash, a launch error)."""
    lines = stderr.splitlines()
    usage: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("usage:"):
            usage = [line]
            usage += [x for x in itertools.takewhile(lambda x: x.startswith(" "), lines[i + 1 :])]
            break
    for line in lines:
        m = _KERNEL_STOP.match(line.strip())
        if m:
            what, rank, msg = m.groups()
            code = 3 if what == "verification failed" else 2
            reason = f"{msg} (rank {rank})" if what == "error" else f"{what}: {msg} (rank {rank})"
            return KernelFailed(name, reason, code, "\n".join(usage))
    # No line of the kernel's: mpirun's own message, between its banners.
    paragraph: list[str] = []
    for line in lines:
        text = line.strip()
        if _BANNER.match(text) or not text:
            if paragraph:
                break
            continue
        paragraph.append(text)
    reason = " ".join(paragraph)[:400] or f"exit status {status}"
    if status < 0:
        reason = f"killed by signal {-status}: {reason}"
    return KernelFailed(name, reason, 2, "\n".join(usage))


@cache
def kernel_options(name: str) -> tuple[frozenset[str], frozenset[str]]:
    """The kernel's options as (valued, flags), names without the leading dashes;
    asked of the kernel itself so there is one table of them (in its C source)."""
    p = subprocess.run([str(kernel_path(name)), "--list-options"], capture_output=True,
                       text=True, timeout=60)  # fmt: skip
    for line in p.stdout.splitlines():
        if line.startswith(OPTIONS_TAG):
            d = json.loads(line[len(OPTIONS_TAG) :])
            return (frozenset(v.lstrip("-") for v in d["valued"]),
                    frozenset(f.lstrip("-") for f in d["flags"]))  # fmt: skip
    raise failure(name, p.returncode, p.stderr)


def run_kernel(
    name: str,
    ranks: int,
    args: Sequence[str],
    *,
    trace_dir: Path | None = None,
    timeout: float | None = None,
    cwd: Path | None = None,
) -> dict[str, Any]:
    """Run one kernel; return its parsed result (raises KernelFailed on failure)."""
    argv = [*mpirun_command(ranks), str(kernel_path(name)), *args]
    if trace_dir is not None:
        argv = [sys.executable, "-m", "iopilot", "run", "--trace-only", "--trace-dir",
                str(trace_dir), "--", *argv]  # fmt: skip
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    lines = [x for x in p.stdout.splitlines() if x.startswith(RESULT_TAG)]
    if p.returncode != 0 or not lines:
        raise failure(name, p.returncode, p.stderr)
    result = json.loads(lines[-1][len(RESULT_TAG) :])
    result["summary"] = summarise(result)
    return result


def summarise(result: dict[str, Any]) -> dict[str, Any]:
    """Bandwidths (MiB/s, from bytes moved over the slowest rank's time) and op rates."""
    out: dict[str, Any] = {}
    for phase, bytes_key, ops_key, time_key in (
        ("write", "bytes_written", "write_ops", "write_s"),
        ("read", "bytes_read", "read_ops", "read_s"),
    ):
        rows = [it for it in result["iterations"] if it[bytes_key] > 0 and it[time_key] > 0]
        if not rows:
            continue
        bw = [it[bytes_key] / MiB / it[time_key] for it in rows]
        # With open and close, as IOR reports it; kernels that time each phase
        # from open to close say so (ior's write_total_s / read_total_s).
        bw_total = [it[bytes_key] / MiB / it.get(f"{phase}_total_s",
                                                 it[time_key] + it["open_s"] + it["close_s"])
                    for it in rows]  # fmt: skip
        ops = [it[ops_key] / it[time_key] for it in rows]
        out[phase] = {
            "max_mib_s": max(bw),
            "mean_mib_s": sum(bw) / len(bw),
            "min_mib_s": min(bw),
            "max_mib_s_with_open_close": max(bw_total),
            "max_ops_s": max(ops),
            "bytes": sum(it[bytes_key] for it in rows),
        }
    meta = [it for it in result["iterations"] if it.get("meta_ops")]
    if meta:
        out["meta"] = {"ops": sum(it["meta_ops"] for it in meta)}
    # mdtest: operations per second of each metadata phase.
    for phase in MD_PHASES:
        ops, secs = f"file_{phase}_ops", f"file_{phase}_s"
        rows = [it for it in result["iterations"] if it.get(ops) and it.get(secs)]
        if rows:
            rates = [it[ops] / it[secs] for it in rows]
            out[f"{phase}_ops_s"] = {"max": max(rates), "mean": sum(rates) / len(rates),
                                     "min": min(rates)}  # fmt: skip
    # epochs: computation per step next to the I/O.
    comp = [it["compute_s"] for it in result["iterations"] if "compute_s" in it]
    if comp:
        io = [it["write_s"] + it["open_s"] + it["close_s"] for it in result["iterations"]]
        out["compute"] = {"mean_s": sum(comp) / len(comp), "io_mean_s": sum(io) / len(io)}
    verified = [it["verified"] for it in result["iterations"] if it["verified"] is not None]
    out["verified"] = all(verified) if verified else None
    return out


def render(result: dict[str, Any]) -> str:
    """An IOR-like table: one row per iteration and phase, then max/mean/min."""
    params = " ".join(f"{k}={v}" for k, v in result["params"].items())
    lines = [f"iopilot bench {result['kernel']}: {result['ranks']} rank(s)  {params}", ""]
    header = len(lines)
    lines.append(f"{'access':<7} {'iter':>4} {'bw MiB/s':>10} {'ops/s':>11} {'open s':>9} "
                 f"{'xfer s':>9} {'close s':>9} {'bytes':>14} {'check':>6}")  # fmt: skip
    for it in result["iterations"]:
        for phase, b, o, t in (("write", "bytes_written", "write_ops", "write_s"),
                               ("read", "bytes_read", "read_ops", "read_s")):  # fmt: skip
            if not it[b] and not it[o]:
                continue
            bw = it[b] / MiB / it[t] if it[t] > 0 else 0.0
            ops = it[o] / it[t] if it[t] > 0 else 0.0
            check = {True: "ok", False: "WRONG", None: "-"}[it["verified"] if phase == "read"
                                                             else None]  # fmt: skip
            lines.append(f"{phase:<7} {it['iteration']:>4} {bw:>10.1f} {ops:>11.1f} "
                         f"{it['open_s']:>9.4f} {it[t]:>9.4f} {it['close_s']:>9.4f} "
                         f"{it[b]:>14,} {check:>6}")  # fmt: skip
    if len(lines) == header + 1:
        lines.pop()  # no data phases (mdtest): no table
    s = result["summary"]
    for phase in MD_PHASES:
        if f"{phase}_ops_s" in s:
            r = s[f"{phase}_ops_s"]
            lines.append(f"file {phase:<7} {r['max']:>12.1f} ops/s  mean {r['mean']:.1f}  "
                         f"min {r['min']:.1f}")  # fmt: skip
    if "compute" in s:
        c = s["compute"]
        lines.append(f"compute per step {c['mean_s']:.4f} s, I/O per step {c['io_mean_s']:.4f} s")
    lines.append("")
    for phase in ("write", "read"):
        if phase in s:
            p = s[phase]
            lines.append(f"Max {phase.capitalize():<5} {p['max_mib_s']:>10.2f} MiB/s  "
                         f"mean {p['mean_mib_s']:.2f}  min {p['min_mib_s']:.2f}  "
                         f"(with open/close: {p['max_mib_s_with_open_close']:.2f})")  # fmt: skip
    for note in result.get("notes", []):
        lines.append(f"note: {note}")
    return "\n".join(lines) + "\n"


def main(args: Any, kernel_args: Sequence[str]) -> int:
    kernel_args = list(kernel_args)
    if args.keep and "keep" in kernel_options(args.bench)[1] and "--keep" not in kernel_args:
        kernel_args.append("--keep")  # the kernel's files too, not only the directory
    workdir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="iopilot-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    trace = Path(args.trace) if args.trace else None
    try:
        result = run_kernel(args.bench, args.ranks, kernel_args, trace_dir=trace, cwd=workdir)
    except KernelFailed as e:
        if e.usage:
            print(e.usage, file=sys.stderr)
        print(f"iopilot: error: {e}", file=sys.stderr)
        return e.status
    finally:
        if not args.dir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        elif args.keep and not args.dir:
            print(f"iopilot: kernel files kept in {workdir}", file=sys.stderr)
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        sys.stdout.write(render(result))
    if trace is not None:
        print(f"iopilot: trace in {trace} (diagnose it with `iopilot report {trace}`)",
              file=sys.stderr)  # fmt: skip
    return 0 if result["summary"]["verified"] is not False else 3
