"""What an I/O kernel prints and where the kernels are: one parser for
``iopilot bench KERNEL`` (which runs them) and ``iopilot tune`` (whose
bandwidth objective reads a trial's output).

Kernels are C programs built by ``make`` into ``build/kernels/``; each prints
one ``IOPILOT-RESULT {json}`` line (see ``kernels/common.h``).  This module
imports nothing from iopilot.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
KERNEL_DIR = REPO / "build" / "kernels"
MiB = 1024 * 1024
MD_PHASES = ("create", "stat", "read", "remove")
RESULT_TAG = "IOPILOT-RESULT "


def last_result(stdout: str) -> dict[str, Any] | None:
    """The document of the last ``IOPILOT-RESULT`` line of ``stdout``, or None."""
    lines = [x for x in stdout.splitlines() if x.startswith(RESULT_TAG)]
    return json.loads(lines[-1][len(RESULT_TAG) :]) if lines else None


def _stats(values: list[float]) -> dict[str, float]:
    """Max, min, mean and the population standard deviation (as IOR)."""
    mean = sum(values) / len(values)
    std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    return {"max": max(values), "min": min(values), "mean": mean, "std": std}


def phase_total(it: dict[str, Any], phase: str, time_key: str) -> float:
    """Open-to-close seconds of a phase: the kernel's own figure, else the parts."""
    total = it.get(f"{phase}_total_s")
    return total if total else it[time_key] + it["open_s"] + it["close_s"]


def summarise(result: dict[str, Any]) -> dict[str, Any]:
    """IOR's summary: bandwidth (MiB/s) and ops/s from open to close, per phase.

    ``max_mib_s`` and friends divide the bytes by the open-to-close time of the
    slowest rank, as IOR's "Max Write"; ``*_transfer`` divide by the transfer
    time alone (the calls, plus an fsync at the end).
    """
    out: dict[str, Any] = {}
    for phase, bytes_key, ops_key, time_key in (
        ("write", "bytes_written", "write_ops", "write_s"),
        ("read", "bytes_read", "read_ops", "read_s"),
    ):
        rows = [it for it in result["iterations"] if it[bytes_key] > 0 and it[time_key] > 0]
        if not rows:
            continue
        totals = [phase_total(it, phase, time_key) for it in rows]
        bw = _stats([it[bytes_key] / MiB / t for it, t in zip(rows, totals, strict=True)])
        ops = _stats([it[ops_key] / t for it, t in zip(rows, totals, strict=True)])
        bw_x = _stats([it[bytes_key] / MiB / it[time_key] for it in rows])
        ops_x = [it[ops_key] / it[time_key] for it in rows]
        out[phase] = {
            "max_mib_s": bw["max"],
            "min_mib_s": bw["min"],
            "mean_mib_s": bw["mean"],
            "std_mib_s": bw["std"],
            "max_ops_s": ops["max"],
            "min_ops_s": ops["min"],
            "mean_ops_s": ops["mean"],
            "std_ops_s": ops["std"],
            "mean_s": sum(totals) / len(totals),
            "max_mib_s_transfer": bw_x["max"],
            "min_mib_s_transfer": bw_x["min"],
            "mean_mib_s_transfer": bw_x["mean"],
            "max_ops_s_transfer": max(ops_x),
            "max_mib_s_with_open_close": bw["max"],  # the same as max_mib_s; older name
            "bytes": sum(it[bytes_key] for it in rows),
            "iterations": len(rows),
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
        io = [it["write_s"] + it["read_s"] + it["open_s"] + it["close_s"]
              for it in result["iterations"]]  # fmt: skip
        out["compute"] = {"mean_s": sum(comp) / len(comp), "io_mean_s": sum(io) / len(io)}
    if "total_s" in result:  # the whole run's wall time, slowest rank (epochs)
        out["total_s"] = result["total_s"]
    checks = [it["check_s"] for it in result["iterations"] if "check_s" in it]
    if checks:
        out["check_s"] = sum(checks)
    verified = [it["verified"] for it in result["iterations"] if it["verified"] is not None]
    out["verified"] = all(verified) if verified else None
    return out
