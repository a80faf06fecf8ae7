"""``iopilot bench async``: does asynchronous I/O hide the I/O, and does the
advisor predict it?

The epochs kernel (POSIX, one rank by default, durable steps with --fsync;
``--ranks N`` shares the cores between ranks and their I/O threads), started
by ``mpirun`` under each of three bindings: the launcher's default (each rank
bound to a core, which its I/O thread inherits), the one the advisor names
(two cores a rank) and none, runs in three scenarios whose computation per
step is a multiple of its I/O per step (measured first): much longer, about
equal, much shorter; and a fourth, "overhead", with no computation and one
small write per step, where async can only cost.  For each:

1. the synchronous run, traced: its total time, and per step the I/O time
   and the rest (computation, filling the buffer, opens and closes);
2. ``iopilot advise async`` on that trace: the predicted run time with
   async;
3. the same run with ``--async`` (the engine's event set: step k's writes
   and fsync overlap step k+1's computation), traced the same way.

Figures: the ideal async time, steps x max(c, io) + min(c, io) with c and
io per step from the synchronous run; the share of the ideal saving that
async reached; and the advisor's error against the measured async run
(both runs' whole traced time, start-up included).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .. import api
from .._record import record
from ..errors import InputError
from ..kernel_results import last_result
from ..outfile import emit
from .kernels import kernel_path, mpirun_command


# Computation per step as a multiple of the I/O per step; "overhead" has
# none: many steps of one 4 KiB write each, not synced (a sync's disk time
# would hide what it measures), where the engine's hand-off and wake-up per
# step are all that async adds and nothing hides them.
@record(frozen=True)
class Plan:
    """What ``iopilot bench async`` runs: ``steps`` steps of ``size`` bytes
    on ``ranks`` ranks, for each of ``scenarios``, in ``dir`` (or a temporary one)."""

    ranks: int = 1
    steps: int = 10
    size: str = "128m"
    scenarios: tuple[str, ...] = ("longer", "equal", "shorter", "overhead")
    dir: str | None = None
    bindings: tuple[str, ...] = ("default", "advised", "none")


# mpirun's options for each binding: its default (one core a rank for small
# jobs), two cores a rank (the advisor's change: one for the I/O thread), none.
BINDINGS = {"default": [], "advised": ["--map-by", "slot:PE=2"], "none": ["--bind-to", "none"]}


SCENARIOS = {"longer": 4.0, "equal": 1.0, "shorter": 0.1, "overhead": 0.0}
SMALL = ("4k", "4k", 500)  # size, transfer and steps of the "overhead" runs
TOLERANCE = 0.2  # a synchronous run further than this from its scenario's ratio is run again


def _epochs(workdir: Path, trace: Path, compute: float, plan: Plan, asynchronous: bool,
            small: bool = False,
            binding: str = "default") -> tuple[dict[str, Any], float]:  # fmt: skip
    """One traced epochs run: its result and the traced run time (s)."""
    size, transfer, steps = SMALL if small else (plan.size, plan.size, plan.steps)
    launch = [*mpirun_command(plan.ranks), *BINDINGS[binding]]
    cmd = [sys.executable, "-m", "iopilot", "run", "--trace-dir", str(trace), "--trace-only",
           "--", *launch, str(kernel_path("epochs")), "--api", "posix",
           *([] if small else ["--fsync"]), "--steps", str(steps), "--compute",
           f"{compute:.6f}", "--size", size, "--transfer", transfer,
           "--file", str(workdir / "epochs.dat")]  # fmt: skip
    if asynchronous:
        cmd.append("--async")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_")}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    result = last_result(done.stdout)
    if done.returncode != 0 or result is None:
        raise InputError("iopilot bench async", f"the epochs kernel failed: "
                         f"{(done.stderr or done.stdout).strip()[-300:]}")  # fmt: skip
    return result, float(api.load(str(trace)).job.runtime)


def _per_step(result: dict[str, Any]) -> tuple[float, float]:
    """(c, io) per step of a synchronous run: I/O is open + write + fsync +
    close; the rest of the run's time per step is computation."""
    its = result["iterations"]
    io = statistics.fmean(it["open_s"] + it["write_s"] + it["close_s"] for it in its)
    c = result["total_s"] / len(its) - io
    return max(c, 0.0), io


def _aim(compute: float, ratio: float, c: float, io: float) -> float | None:
    """The computation to ask for again when a synchronous run's c / io missed
    its scenario's ratio by more than TOLERANCE of it; None when it did not.
    The probe's I/O (no computation between steps, so no writeback in
    between) is not a computing run's, and c holds the buffer's filling too:
    aim from what the run measured."""
    if compute <= 0 or io <= 0 or abs(c / io - ratio) <= TOLERANCE * ratio:
        return None
    return max(compute + ratio * io - c, 0.0)


def run(plan: Plan) -> dict[str, Any]:
    base = Path(plan.dir) if plan.dir else Path(tempfile.mkdtemp(prefix="iopilot-bench-async-"))
    base.mkdir(parents=True, exist_ok=True)
    probe, _ = _epochs(base, base / "probe.trace", 0.0, plan, False)
    io_step = _per_step(probe)[1]
    print(f"iopilot bench async: {plan.ranks} rank(s), {plan.steps} steps of {plan.size} "
          f"with fsync, I/O {io_step:.3f} s per step", file=sys.stderr)  # fmt: skip
    rows = []
    calibration: dict[str, Any] = {}
    for binding in plan.bindings:
        for name in plan.scenarios:
            try:
                row, calibration = _scenario(base, plan, name, io_step, binding)
                rows.append(row)
            except InputError as e:
                if binding == "default":
                    raise
                # two cores a rank may be more than the node has: said, not fatal
                rows.append({"scenario": name, "binding": binding, "failed": e.reason})
            print(f"  {name} ({binding} binding): done", file=sys.stderr)
    return {"ranks": plan.ranks, "steps": plan.steps, "size": plan.size, "io_per_step_s": io_step,
            "calibration": calibration, "scenarios": rows}  # fmt: skip


def _scenario(base: Path, plan: Plan, name: str, io_step: float,
              binding: str) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
    """One scenario under one binding: sync traced, advised, async traced;
    its row and the advisor's calibration."""
    compute = SCENARIOS[name] * io_step
    small = name == "overhead"
    tag = f"{name}-{binding}"
    sync_trace = base / f"{tag}-sync.trace"
    sync, sync_run = _epochs(base, sync_trace, compute, plan, False, small, binding)
    aimed = _aim(compute, SCENARIOS[name], *_per_step(sync))
    if aimed is not None:
        compute = aimed
        sync_trace = base / f"{tag}-sync-aimed.trace"
        sync, sync_run = _epochs(base, sync_trace, compute, plan, False, small, binding)
    advice = api.advise_async(str(sync_trace))
    asy, async_run = _epochs(base, base / f"{tag}-async.trace", compute, plan, True, small,
                             binding)  # fmt: skip
    c, io = _per_step(sync)
    n = len(sync["iterations"])
    ideal = n * max(c, io) + min(c, io)
    reach = ((sync["total_s"] - asy["total_s"]) / (sync["total_s"] - ideal)
             if sync["total_s"] - ideal > 1e-9 else None)  # fmt: skip
    predicted = advice.async_seconds
    b = advice.binding
    return {
        "scenario": name, "binding": binding, "compute_per_step_s": c, "io_per_step_s": io,
        "cpus_per_rank": b.cpus_per_rank if b else None,
        "sync_total_s": sync["total_s"], "async_total_s": asy["total_s"],
        "ideal_total_s": ideal, "share_of_ideal_overlap": reach,
        "traced_sync_run_s": sync_run, "traced_async_run_s": async_run,
        "predicted_sync_run_s": advice.sync_seconds, "predicted_async_run_s": predicted,
        "prediction_error": (predicted - async_run) / async_run if async_run else None,
        "predicted_with_own_core_s": advice.own_core_seconds,
        "launcher_fix": advice.launcher_fix, "recommendation": advice.recommendation,
    }, advice.calibration.as_dict()  # fmt: skip


def render(doc: dict[str, Any]) -> str:
    lines = [f"{'scenario':<9} {'binding':<8} {'cpus':>4} {'c/step':>7} {'io/step':>8} "
             f"{'sync':>8} {'async':>8} {'ideal':>8} {'reached':>8} {'run async':>10} "
             f"{'predicted':>10} {'error':>7}  advice"]  # fmt: skip
    for r in doc["scenarios"]:
        if "failed" in r:
            lines.append(f"{r['scenario']:<9} {r['binding']:<8} could not run: {r['failed']}")
            continue
        reach = ("-" if r["share_of_ideal_overlap"] is None
                 else f"{r['share_of_ideal_overlap']:.0%}")  # fmt: skip
        cpus = "?" if r["cpus_per_rank"] is None else str(r["cpus_per_rank"])
        lines.append(f"{r['scenario']:<9} {r['binding']:<8} {cpus:>4} "
                     f"{r['compute_per_step_s']:>7.3f} "
                     f"{r['io_per_step_s']:>8.3f} {r['sync_total_s']:>8.3f} "
                     f"{r['async_total_s']:>8.3f} {r['ideal_total_s']:>8.3f} {reach:>8} "
                     f"{r['traced_async_run_s']:>10.3f} {r['predicted_async_run_s']:>10.3f} "
                     f"{r['prediction_error']:>+7.1%}  {r['recommendation']}")  # fmt: skip
    lines.append("(seconds; sync/async/ideal: the kernel's steps; run async / predicted: the "
                 "whole traced run, start-up included)")  # fmt: skip
    return "\n".join(lines)


def main(plan: Plan, json_path: str | None = None) -> int:
    bad = [s for s in plan.scenarios if s not in SCENARIOS]
    if bad:
        raise InputError("--scenarios", f"unknown {', '.join(bad)} (known: {', '.join(SCENARIOS)})")
    if plan.ranks < 1:
        raise InputError("--ranks", "at least 1")
    if plan.steps < 2:
        raise InputError("--steps", "at least 2 (one step's I/O has nothing to overlap)")
    unknown = [b for b in plan.bindings if b not in BINDINGS]
    if unknown or not plan.bindings:
        raise InputError("--bindings", f"unknown {', '.join(unknown) or '(none given)'} "
                         f"(known: {', '.join(BINDINGS)})")  # fmt: skip
    doc = run(plan)
    if json_path != "-":
        print(render(doc))
    if json_path:
        emit(json_path, json.dumps(doc, indent=2) + "\n")
    return 0
