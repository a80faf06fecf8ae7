"""``iopilot bench async``: does asynchronous I/O hide the I/O, and does the
advisor predict it?

The epochs kernel (one rank by default, durable steps with --fsync;
``--ranks N`` shares the cores between ranks and their I/O threads) at each
I/O layer of ``--apis`` (``--api`` of the kernel: POSIX through iopilot's
engine, MPI-IO's non-blocking writes, HDF5 on a thread of its own; see
kernels/epochs.c), started by ``mpirun`` under each of ``--bindings``: the
launcher's default (each rank bound to a core, which its I/O thread
inherits), the one the advisor names (two cores a rank) and none.  At each
layer a probe with no computation measures the I/O per step; then three
scenarios have computation per step a multiple of it: much longer, about
equal, much shorter; and a fourth, "overhead", has no computation and one
small write per step, where async has nothing to hide behind.  For each
layer, binding and scenario:

1. the synchronous run, traced: its total time, and per step the I/O time
   and the rest (the computation; every run writes from a buffer filled
   once, ``--fill-once``, so no filling comes between steps);
2. ``iopilot advise async`` on that trace: the predicted run time with
   async;
3. the same run with ``--async`` (step k's writes and sync overlap step
   k+1's computation), traced the same way.

All runs of a scenario at a layer do the same work, and none spends its
start-up calibrating.  The probe calibrates the kernel's computation (work
units per second); the scenario's first synchronous run (under the first
binding) is given the units of its ratio of the probe's I/O, and is run
once more, aimed, when its c / io missed the scenario's ratio; the units that run did are then
given with ``--units`` to every other run of the scenario at that layer
(its async run, and every run under the other bindings), so a binding that
slows the computation shows as longer steps, not as less work.  Rows give
the units the kernel reported for both runs, whether the async run ran
asynchronously, and the computation per step each sync run measured.

Figures: the ideal async time, steps x max(c, io) + min(c, io) with c and
io per step from the synchronous run (at MPI-IO with --fsync, only the
writes can be hidden: MPI_File_sync has no non-blocking form, and its share
of the I/O, as the advisor finds it in the phases, is added to each
step); the share of the ideal saving that async reached; and the advisor's
error against the measured async run (both runs' whole traced time,
start-up included, and over the kernel's steps only).
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
from .kernels import KERNEL_APIS, kernel_path, mpirun_command


# Computation per step as a multiple of the I/O per step; "overhead" has
# none: many steps of one 4 KiB write each, not synced (a sync's disk time
# would hide what it measures), where the engine's hand-off and wake-up per
# step are all that async adds and nothing hides them.
@record(frozen=True)
class Plan:
    """What ``iopilot bench async`` runs: ``steps`` steps of ``size`` bytes
    on ``ranks`` ranks, for each of ``scenarios`` at each layer of ``apis``
    under each of ``bindings``, in ``dir`` (or a temporary one)."""

    ranks: int = 1
    steps: int = 10
    size: str = "128m"
    scenarios: tuple[str, ...] = ("longer", "equal", "shorter", "overhead")
    dir: str | None = None
    bindings: tuple[str, ...] = ("default", "advised", "none")
    apis: tuple[str, ...] = ("posix",)
    repeat: int = 1


# mpirun's options for each binding: its default (one core a rank for small
# jobs), two cores a rank (the advisor's change: one for the I/O thread), none.
BINDINGS = {"default": [], "advised": ["--map-by", "slot:PE=2"], "none": ["--bind-to", "none"]}


SCENARIOS = {"longer": 4.0, "equal": 1.0, "shorter": 0.2, "overhead": 0.0}
SMALL = ("4k", "4k", 500)  # size, transfer and steps of the "overhead" runs
TOLERANCE = 0.2  # a synchronous run further than this from its scenario's ratio is run again
# What "overhead" measures where async is not iopilot's engine (kernels/epochs.c).
OVERHEAD_NOTES = {
    "mpiio": "async here is MPI's non-blocking writes, and the next step's MPI_File_open "
             "overlaps them: a cost and a little hiding, not the engine's hand-off",
    "hdf5": "async here is a thread started and joined per step (HDF5 is not thread-safe), "
            "not the engine's hand-off",
}


def _data_file(workdir: Path, api_name: str, small: bool) -> Path:
    """The file every run of a layer (and of its "overhead" scenario) rewrites
    in place (``--overwrite``): its pages stay in the page cache from one run
    to the next, so no run pays for memory the run before it freed.  (On a
    virtual machine that hands memory free for a few seconds back to its
    host, taking such pages again costs several times more processor time:
    here 5 x 256 MiB written into new page-cache pages took 0.26 s of CPU
    right after other pages were freed and 2.1-2.9 s a few seconds later.)"""
    return workdir / f"epochs-{api_name}{'-small' if small else ''}.dat"


def _epochs(workdir: Path, trace: Path, plan: Plan, api_name: str, work: tuple[str, str],
            asynchronous: bool, small: bool = False,
            binding: str = "default") -> tuple[dict[str, Any], float]:  # fmt: skip
    """One traced epochs run at layer ``api_name`` doing ``work`` per step
    (``("--compute", seconds)`` or ``("--units", n)``): its result and the
    traced run time (s)."""
    size, transfer, steps = SMALL if small else (plan.size, plan.size, plan.steps)
    launch = [*mpirun_command(plan.ranks), *BINDINGS[binding]]
    cmd = [sys.executable, "-m", "iopilot", "run", "--trace-dir", str(trace), "--trace-only",
           "--", *launch, str(kernel_path("epochs")), "--api", api_name,
           *([] if small else ["--fsync"]), "--steps", str(steps), *work,
           "--size", size, "--transfer", transfer, "--overwrite", "--fill-once",
           "--file", str(_data_file(workdir, api_name, small))]  # fmt: skip
    if asynchronous:
        cmd.append("--async")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_")}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    result = last_result(done.stdout)
    if done.returncode != 0 or result is None:
        raise InputError("iopilot bench async", f"the epochs kernel failed ({api_name}, "
                         f"{binding} binding): "
                         f"{' '.join((done.stderr or done.stdout).split())[-300:]}")  # fmt: skip
    return result, float(api.load(str(trace)).job.runtime)


def _per_step(result: dict[str, Any]) -> tuple[float, float]:
    """(c, io) per step of a synchronous run: I/O is open + write + fsync +
    close; the rest of the run's time per step is computation."""
    its = result["iterations"]
    io = statistics.fmean(it["open_s"] + it["write_s"] + it["close_s"] for it in its)
    c = result["total_s"] / len(its) - io
    return max(c, 0.0), io


def _ran_async(result: dict[str, Any]) -> bool:
    """Whether the kernel says it ran asynchronously, and timed each step's
    wait for the previous step's I/O."""
    return bool(result["params"].get("async")) and all(
        "wait_s" in it for it in result["iterations"])


def _ideal(n: int, c: float, io: float, phases: list[Any]) -> float:
    """The best async at the layer can do over ``n`` steps of ``c`` seconds
    of computation and ``io`` of I/O: the I/O its asynchronous form takes
    off the program's thread hidden behind the next step's computation,
    what it leaves there (MPI_File_sync, which has no non-blocking form)
    added to every step, and the last step's I/O never hidden.  The share
    left is the advisor's own time in the phases against their I/O."""
    moved = sum(p.io_seconds for p in phases)
    left = sum(p.own_seconds for p in phases)
    stay = io * left / (moved + left) if moved + left > 0 else 0.0
    hide = io - stay
    return n * (max(c, hide) + stay) + min(c, hide)


def _aim(compute: float, ratio: float, c: float, io: float) -> float | None:
    """The computation to ask for again when a synchronous run's c / io missed
    its scenario's ratio by more than TOLERANCE of it; None when it did not.
    The probe's I/O (no computation between steps, so no writeback in
    between) is not a computing run's: aim from what the run measured."""
    if compute <= 0 or io <= 0 or abs(c / io - ratio) <= TOLERANCE * ratio:
        return None
    return max(compute + ratio * io - c, 0.0)


def run(plan: Plan) -> dict[str, Any]:
    base = Path(plan.dir) if plan.dir else Path(tempfile.mkdtemp(prefix="iopilot-bench-async-"))
    base.mkdir(parents=True, exist_ok=True)
    reference = plan.bindings[0]  # where each scenario's work is set
    rows = []
    io_steps: dict[str, float] = {}
    calibration: dict[str, Any] = {}
    for api_name in plan.apis:
        # The probe calibrates the kernel's computation (a token request
        # makes it) and measures the I/O per step; every run after it is
        # given its work in units, so none spends start-up time calibrating.
        # (Twice: the first run makes the file the others rewrite in place.)
        for tag in ("first", "probe"):
            probe, _ = _epochs(base, base / f"{api_name}-{tag}.trace", plan, api_name,
                               ("--compute", "1e-9"), False, binding=reference)  # fmt: skip
        io_step = io_steps[api_name] = _per_step(probe)[1]
        rate = float(probe["params"]["units_per_s"])
        print(f"iopilot bench async: {api_name}, {plan.ranks} rank(s), {plan.steps} steps of "
              f"{plan.size} with fsync, I/O {io_step:.3f} s per step", file=sys.stderr)  # fmt: skip
        units: dict[str, int] = {}  # each scenario's work, fixed by its reference run
        for binding in plan.bindings:
            for name in plan.scenarios:
                where = {"api": api_name, "scenario": name, "binding": binding}
                if binding != reference and name not in units:
                    rows.append({**where, "failed": f"its run under the {reference} binding, "
                                 "which sets its work, failed"})  # fmt: skip
                    continue
                try:
                    row, calibration = _scenario(base, plan, api_name, name, io_step, rate,
                                                 binding, units)  # fmt: skip
                    rows.append(row)
                except InputError as e:
                    if binding == "default":
                        raise
                    # two cores a rank may be more than the node has: said, not fatal
                    rows.append({**where, "failed": e.reason})
                print(f"  {api_name} {name} ({binding} binding): done", file=sys.stderr)
        for small in (False, True):  # the data, not the traces
            _data_file(base, api_name, small).unlink(missing_ok=True)
    return {"dir": str(base), "ranks": plan.ranks, "steps": plan.steps, "size": plan.size,
            "apis": list(plan.apis), "repeat": plan.repeat,
            "io_per_step_s": io_steps, "calibration": calibration,
            "scenarios": rows}  # fmt: skip


def _scenario(base: Path, plan: Plan, api_name: str, name: str, io_step: float, rate: float,
              binding: str,
              units: dict[str, int]) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
    """One scenario at one layer under one binding: sync traced, advised,
    async traced; its row and the advisor's calibration.  Without an entry
    in ``units`` this is the scenario's reference run: its work is the
    scenario's ratio of the probe's I/O at the probe's ``rate`` (units per
    second), aimed once more if it missed the ratio, and it enters the
    units it did; with one, every run does that many."""
    ratio = SCENARIOS[name]
    small = name == "overhead"
    tag = f"{api_name}-{name}-{binding}"

    def epochs(kind: str, work: tuple[str, str], asynchronous: bool) -> tuple[Any, float, Path]:
        trace = base / f"{tag}-{kind}.trace"
        result, runtime = _epochs(base, trace, plan, api_name, work, asynchronous, small, binding)
        return result, runtime, trace

    if name in units:
        first = epochs("sync", ("--units", str(units[name])), False)
    else:
        n = round(ratio * io_step * rate)
        first = epochs("sync", ("--units", str(n)), False)
        aimed = _aim(n / rate, ratio, *_per_step(first[0]))
        if aimed is not None:
            n = round(aimed * rate)
            first = epochs("sync-aimed", ("--units", str(n)), False)
        units[name] = int(first[0]["params"]["units"])
    work = ("--units", str(units[name]))
    samples, calibration = [], {}
    for k in range(plan.repeat):
        # each repeat a synchronous run, its advice, then the async run, so
        # that a drift of the machine falls on both sides of a comparison
        sync, sync_run, sync_trace = first if k == 0 else epochs(f"sync-{k}", work, False)
        advice = api.advise_async(str(sync_trace))
        asy, async_run, _ = epochs("async" if k == 0 else f"async-{k}", work, True)
        samples.append(_sample(api_name, name, binding, sync, sync_run, advice, asy, async_run))
        calibration = advice.calibration.as_dict()
    row = _median_row(samples)
    if small and api_name in OVERHEAD_NOTES:
        row["note"] = OVERHEAD_NOTES[api_name]
    return row, calibration


def _sample(api_name: str, name: str, binding: str, sync: dict[str, Any], sync_run: float,
            advice: Any, asy: dict[str, Any], async_run: float) -> dict[str, Any]:  # fmt: skip
    """The figures of one synchronous run, its advice and one async run."""
    c, io = _per_step(sync)
    n = len(sync["iterations"])
    ideal = _ideal(n, c, io, advice.phases)
    reach = ((sync["total_s"] - asy["total_s"]) / (sync["total_s"] - ideal)
             if sync["total_s"] - ideal > 1e-9 else None)  # fmt: skip
    predicted = advice.async_seconds
    b = advice.binding
    return {
        "api": api_name, "scenario": name, "binding": binding,
        # the work per step each run reported doing, and how each ran
        "units": sync["params"]["units"], "async_units": asy["params"]["units"],
        "sync_ran_async": _ran_async(sync), "async_ran_async": _ran_async(asy),
        # given their work: neither spent its start-up calibrating
        "calibrated": "units_per_s" in sync["params"] or "units_per_s" in asy["params"],
        "in_place": sync["params"].get("overwrite") == 1 == asy["params"].get("overwrite"),
        # the buffer filled once: the computation between steps is the units' alone
        "fill_once": sync["params"].get("fill_once") == 1 == asy["params"].get("fill_once"),
        "compute_per_step_s": c, "io_per_step_s": io,
        "cpus_per_rank": b.cpus_per_rank if b else None,
        "sync_total_s": sync["total_s"], "async_total_s": asy["total_s"],
        "ideal_total_s": ideal, "share_of_ideal_overlap": reach,
        "traced_sync_run_s": sync_run, "traced_async_run_s": async_run,
        "predicted_sync_run_s": advice.sync_seconds, "predicted_async_run_s": predicted,
        "prediction_error": (predicted - async_run) / async_run if async_run else None,
        # The same over the kernel's steps only: the prediction less the
        # synchronous run's time outside its steps (the launcher's start-up,
        # which varies by a few tenths of a second from run to run here),
        # against the async run's steps.
        "predicted_async_steps_s": predicted - (sync_run - sync["total_s"]),
        "steps_error": ((predicted - (sync_run - sync["total_s"]) - asy["total_s"])
                        / asy["total_s"] if asy["total_s"] else None),
        "predicted_with_own_core_s": advice.own_core_seconds,
        "launcher_fix": advice.launcher_fix, "recommendation": advice.recommendation,
        # what async really saved of the whole traced run
        "saved_share": (sync_run - async_run) / sync_run if sync_run else None,
    }  # fmt: skip


# The figures of a row that are the median of its repeats.
MEDIAN = ("compute_per_step_s", "io_per_step_s", "sync_total_s", "async_total_s",
          "ideal_total_s", "share_of_ideal_overlap", "traced_sync_run_s", "traced_async_run_s",
          "predicted_sync_run_s", "predicted_async_run_s", "prediction_error",
          "predicted_async_steps_s", "steps_error", "predicted_with_own_core_s",
          "saved_share")  # fmt: skip


def _median_row(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from a scenario's repeats: the median of each figure (each
    figure's own median, over the repeats that have it), the advice most of
    them gave (the first's on a tie), the flags of all of them, and with
    more than one repeat, every repeat's figures."""
    row = dict(samples[0])
    for key in MEDIAN:
        values = [s[key] for s in samples if s[key] is not None]
        row[key] = statistics.median(values) if values else None
    for key in ("sync_ran_async", "async_ran_async", "in_place", "fill_once"):
        row[key] = all(s[key] for s in samples)
    row["calibrated"] = any(s["calibrated"] for s in samples)
    said = [s["recommendation"] for s in samples]
    row["recommendation"] = max(said, key=lambda r: (said.count(r), -said.index(r)))
    if len(samples) > 1:
        row["repeats"] = [{key: s[key] for key in (*MEDIAN, "recommendation")} for s in samples]
    return row


def render(doc: dict[str, Any]) -> str:
    lines = [f"{'api':<6} {'scenario':<9} {'binding':<8} {'cpus':>4} {'c/step':>7} "
             f"{'io/step':>8} {'sync':>8} {'async':>8} {'ideal':>8} {'reached':>8} "
             f"{'run async':>10} {'predicted':>10} {'error':>7} {'steps':>7}  advice"]  # fmt: skip
    for r in doc["scenarios"]:
        where = f"{r['api']:<6} {r['scenario']:<9} {r['binding']:<8}"
        if "failed" in r:
            lines.append(f"{where} could not run: {r['failed']}")
            continue
        reach = ("-" if r["share_of_ideal_overlap"] is None
                 else f"{r['share_of_ideal_overlap']:.0%}")  # fmt: skip
        cpus = "?" if r["cpus_per_rank"] is None else str(r["cpus_per_rank"])
        error = "-" if r["prediction_error"] is None else f"{r['prediction_error']:+.1%}"
        steps = "-" if r.get("steps_error") is None else f"{r['steps_error']:+.1%}"
        lines.append(f"{where} {cpus:>4} {r['compute_per_step_s']:>7.3f} "
                     f"{r['io_per_step_s']:>8.3f} {r['sync_total_s']:>8.3f} "
                     f"{r['async_total_s']:>8.3f} {r['ideal_total_s']:>8.3f} {reach:>8} "
                     f"{r['traced_async_run_s']:>10.3f} {r['predicted_async_run_s']:>10.3f} "
                     f"{error:>7} {steps:>7}  {r['recommendation']}")  # fmt: skip
        if r.get("note"):
            lines.append(f"{'':<6} {'':<9} {'':<8} note: {r['note']}")
    lines.append("(seconds; sync/async/ideal: the kernel's steps; run async / predicted: the "
                 "whole traced run, start-up included; error: the prediction's, over the "
                 "whole run and over the steps; every run of a scenario at a layer "
                 "does the same work)")  # fmt: skip
    return "\n".join(lines)


def main(plan: Plan, json_path: str | None = None) -> int:
    bad = [s for s in plan.scenarios if s not in SCENARIOS]
    if bad or not plan.scenarios:
        raise InputError("--scenarios", f"unknown {', '.join(bad) or '(none given)'} "
                         f"(known: {', '.join(SCENARIOS)})")  # fmt: skip
    if plan.ranks < 1:
        raise InputError("--ranks", "at least 1")
    if plan.repeat < 1:
        raise InputError("--repeat", "at least 1")
    if plan.steps < 2:
        raise InputError("--steps", "at least 2 (one step's I/O has nothing to overlap)")
    unknown = [b for b in plan.bindings if b not in BINDINGS]
    if unknown or not plan.bindings:
        raise InputError("--bindings", f"unknown {', '.join(unknown) or '(none given)'} "
                         f"(known: {', '.join(BINDINGS)})")  # fmt: skip
    unknown = [a for a in plan.apis if a not in KERNEL_APIS]
    if unknown or not plan.apis:
        raise InputError("--apis", f"unknown {', '.join(unknown) or '(none given)'} "
                         f"(known: {', '.join(KERNEL_APIS)})")  # fmt: skip
    doc = run(plan)
    if json_path != "-":
        print(render(doc))
    if json_path:
        emit(json_path, json.dumps(doc, indent=2) + "\n")
    return 0
