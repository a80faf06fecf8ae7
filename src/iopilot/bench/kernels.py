"""``iopilot bench KERNEL``: run an I/O kernel with MPI and summarise it like IOR.

Kernels are C programs built by ``make`` into ``build/kernels/``; each prints
one ``IOPILOT-RESULT {json}`` line, parsed and summarised like IOR by
:mod:`iopilot.kernel_results`.  This module launches them and prints the
result.  Nothing is compiled at run time.
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
from ..kernel_results import (
    KERNEL_DIR,
    MD_PHASES,
    MiB,
    last_result,
    phase_total,
    summarise,
)
from ..outfile import emit
from .catalog import KERNELS
from .h5bench_config import kernel_runs

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
    result = last_result(p.stdout)
    if p.returncode != 0 or result is None:
        raise failure(name, p.returncode, p.stderr)
    result["summary"] = summarise(result)
    return result


# Parameters shown on lines of their own (or not at all) rather than in the header.
_HEADER_SKIP = ("command_line", "began", "finished", "machine", "hints_in_effect",
                "mpiio_component", "read_cache")  # fmt: skip


def render(result: dict[str, Any]) -> str:
    """IOR-like text: the setup, one row per iteration and phase, then the summary."""
    p = result["params"]
    params = " ".join(f"{k}={v}" for k, v in p.items() if k not in _HEADER_SKIP)
    lines = [f"iopilot bench {result['kernel']}: {result['ranks']} rank(s)  {params}"]
    if "mpiio_component" in p:
        hints = p.get("hints_in_effect") or "(none reported)"
        lines.append(f"MPI-IO component: {p['mpiio_component']}  hints in effect: {hints}")
    if "read_cache" in p and p.get("read"):
        lines.append(f"reads measured with read cache: {p['read_cache']}")
    lines.append("")
    header = len(lines)
    lines.append(f"{'access':<7} {'bw(MiB/s)':>10} {'IOPS':>11} {'Latency(s)':>11} "
                 f"{'open(s)':>9} {'wr/rd(s)':>9} {'close(s)':>9} {'total(s)':>9} "
                 f"{'xfer MiB/s':>10} {'iter':>4} {'bytes':>14} {'check':>6}")  # fmt: skip
    for it in result["iterations"]:
        for phase, b, o, t in (("write", "bytes_written", "write_ops", "write_s"),
                               ("read", "bytes_read", "read_ops", "read_s")):  # fmt: skip
            if not it[b] and not it[o]:
                continue
            total = phase_total(it, phase, t)
            bw = it[b] / MiB / total if total > 0 else 0.0
            bw_x = it[b] / MiB / it[t] if it[t] > 0 else 0.0
            iops = it[o] / it[t] if it[t] > 0 else 0.0
            latency = it.get(f"{phase}_latency_s")
            lat = f"{latency:>11.6f}" if latency is not None else f"{'-':>11}"
            op_s = it.get(f"{phase}_open_s", it["open_s"])
            cl_s = it.get(f"{phase}_close_s", it["close_s"])
            check = {True: "ok", False: "WRONG", None: "-"}[it["verified"] if phase == "read"
                                                             else None]  # fmt: skip
            lines.append(f"{phase:<7} {bw:>10.2f} {iops:>11.1f} {lat} {op_s:>9.4f} "
                         f"{it[t]:>9.4f} {cl_s:>9.4f} {total:>9.4f} {bw_x:>10.2f} "
                         f"{it['iteration']:>4} {it[b]:>14,} {check:>6}")  # fmt: skip
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
    if "total_s" in s:
        lines.append(f"whole run {s['total_s']:.4f} s (slowest rank)")
    lines.append("")
    if "write" in s or "read" in s:
        lines.append(f"{'Operation':<9} {'Max(MiB)':>10} {'Min(MiB)':>10} {'Mean(MiB)':>10} "
                     f"{'StdDev':>9} {'Max(OPs)':>10} {'Min(OPs)':>10} {'Mean(OPs)':>10} "
                     f"{'StdDev':>9} {'Mean(s)':>9} {'Xfer Max(MiB)':>14}")  # fmt: skip
    for phase in ("write", "read"):
        if phase in s:
            q = s[phase]
            lines.append(f"{phase.capitalize():<9} {q['max_mib_s']:>10.2f} {q['min_mib_s']:>10.2f} "
                         f"{q['mean_mib_s']:>10.2f} {q['std_mib_s']:>9.2f} {q['max_ops_s']:>10.2f} "
                         f"{q['min_ops_s']:>10.2f} {q['mean_ops_s']:>10.2f} {q['std_ops_s']:>9.2f} "
                         f"{q['mean_s']:>9.5f} {q['max_mib_s_transfer']:>14.2f}")  # fmt: skip
    for phase in ("write", "read"):
        if phase in s:
            q = s[phase]
            x = q["max_mib_s_transfer"]
            lines.append(f"Max {phase.capitalize():<5} {q['max_mib_s']:>10.2f} MiB/s "
                         f"(open to close)  transfers only: {x:.2f} MiB/s")  # fmt: skip
    if result.get("params", {}).get("async") and ("write" in s or "read" in s):
        # The steps' I/O ran behind the computation: what a step spent on it is
        # its wait for the previous step's, not a transfer.
        lines.append("async: the MiB/s above divide by the time the program waited for its "
                     "I/O, not by the transfers' own time; compare the whole run's time "
                     "with and without --async")  # fmt: skip
    if s.get("check_s"):
        lines.append(f"data checked in {s['check_s']:.4f} s (not in any figure above)")
    lines += hdf5_breakdown(result)
    for note in result.get("notes", []):
        lines.append(f"note: {note}")
    return "\n".join(lines) + "\n"


def hdf5_breakdown(result: dict[str, Any]) -> list[str]:
    """Where an HDF5 phase's time went: inside MPI-IO (and how many calls,
    file views among them, per transfer) or in HDF5 itself.  Sums over the
    iterations; the MPI-IO time is the slowest rank's."""
    out = []
    for phase, ops_key in (("write", "write_ops"), ("read", "read_ops")):
        its = [it for it in result["iterations"]
               if it.get(f"{phase}_mpiio_calls") and it.get(f"{phase}_total_s")]  # fmt: skip
        if not its:
            continue
        total = sum(it[f"{phase}_total_s"] for it in its)
        inside = min(sum(it[f"{phase}_mpiio_s"] for it in its), total)
        calls = sum(it[f"{phase}_mpiio_calls"] for it in its)
        views = sum(it.get(f"{phase}_mpiio_views", 0) for it in its)
        transfers = sum(it[ops_key] for it in its)
        own = total - inside
        out.append(f"HDF5 {phase}: {inside:.4f} s of {total:.4f} s inside MPI-IO "
                   f"({calls} calls for {transfers} H5D{phase} calls, {views} of them file views); "
                   f"{own:.4f} s ({100 * own / total:.0f} %) in HDF5 itself")  # fmt: skip
    return out


_IOR_API = {"posix": "POSIX", "mpiio": "MPIIO", "hdf5": "HDF5"}
KERNEL_APIS: tuple[str, ...] = tuple(_IOR_API)  # the --api values of ior and epochs
_PACKET_CODE = {"timestamp": "t", "offset": "o", "incompressible": "i"}


def ior_json(result: dict[str, Any]) -> dict[str, Any]:
    """An ior kernel result as IOR's ``-O summaryFormat=JSON`` document.

    Field names and nesting are IOR 4's; values come from the result, so
    fields IOR fills from things the kernel does not do (GPU, memory hogs,
    outlier checks, file system capacity) hold IOR's neutral values or are left out.
    """
    p, its = result["params"], result["iterations"]
    summary = result.get("summary") or summarise(result)
    api = _IOR_API.get(str(p.get("api", "")), str(p.get("api", "")).upper())
    ranks = int(result["ranks"])
    fpp = int(p.get("fpp", 0))
    block, transfer, segments = int(p["block"]), int(p["transfer"]), int(p["segments"])
    reps = int(p.get("iterations", len(its)))
    tpn = int(p.get("tasks_per_node", ranks))
    path = str(p.get("file", ""))
    first_file = f"{path}.{0:08d}" if fpp else path
    aggregate = ranks * segments * block
    began = p.get("began", "")
    reorder_random = int(p.get("reorder_random", 0))
    results = []
    for it in its:
        for phase, b, o, t in (("write", "bytes_written", "write_ops", "write_s"),
                               ("read", "bytes_read", "read_ops", "read_s")):  # fmt: skip
            if not it[b] or not it[t]:
                continue
            total = phase_total(it, phase, t)
            results.append(
                {
                    "access": phase,
                    "bwMiB": it[b] / MiB / total,
                    "blockKiB": block / 1024,
                    "xferKiB": transfer / 1024,
                    "iops": it[o] / it[t],
                    "latency": it.get(f"{phase}_latency_s", it[t] / max(it[o], 1)),
                    "openTime": it.get(f"{phase}_open_s", it["open_s"]),
                    "wrRdTime": it[t],
                    "closeTime": it.get(f"{phase}_close_s", it["close_s"]),
                    "totalTime": total,
                }
            )
    ordering_inter = "no tasks offsets"
    if reorder_random:
        ordering_inter = "random task offsets"
    elif p.get("reorder"):
        ordering_inter = "constant task offset"
    system, _, host = str(p.get("machine", "")).partition(" ")
    packet = p.get("data_packet_type", "timestamp")
    test = {
        "TestID": 0,
        "StartTime": began,
        "Path": first_file,
        "Parameters": {
            "testID": 0,
            "refnum": 0,
            "api": api,
            "platform": f"{host}({system})",
            "testFileName": path,
            "deadlineForStonewall": p.get("stonewall_s", 0),
            "stoneWallingWearOut": 0,
            "maxTimeDuration": 0,
            "outlierThreshold": 0,
            "options": "(null)",
            "dryRun": 0,
            "nodes": int(p.get("nodes", 1)),
            "memoryPerTask": 0,
            "memoryPerNode": 0,
            "tasksPerNode": tpn,
            "repetitions": reps,
            "multiFile": int(p.get("multi_file", 0)),
            "interTestDelay": p.get("inter_test_delay_s", 0),
            "fsync": int(p.get("fsync", 0)),
            "fsyncperwrite": int(p.get("fsync_per_write", 0)),
            "useExistingTestFile": int(p.get("use_existing_file", 0)),
            "uniqueDir": int(p.get("unique_dir", 0)),
            "singleXferAttempt": 0,
            "readFile": int(p.get("read", 0)),
            "writeFile": int(p.get("write", 0)),
            "filePerProc": fpp,
            "reorderTasks": int(p.get("reorder", 0)),
            "reorderTasksRandom": reorder_random,
            "reorderTasksRandomSeed": 0,
            "randomOffset": int(p.get("random_offset", 0)),
            "checkWrite": int(p.get("check_write", 0)),
            "checkRead": int(p.get("check_read", 0)),
            "dataPacketType": list(_PACKET_CODE).index(packet) if packet in _PACKET_CODE else 0,
            "keepFile": int(p.get("keep", 0)),
            "keepFileWithError": 0,
            "warningAsErrors": 0,
            "verbose": 0,
            "data packet type": _PACKET_CODE.get(packet, "g"),
            "setTimeStampSignature/incompressibleSeed": 0,
            "collective": int(p.get("collective", 0)),
            "segmentCount": segments,
            "transferSize": transfer,
            "blockSize": block,
        },
        "Options": {
            "api": api,
            "apiVersion": "",
            "test filename": path,
            "access": "file-per-process" if fpp else "single-shared-file",
            "type": "collective" if p.get("collective") else "independent",
            "segments": segments,
            "ordering in a file": "random" if p.get("random_offset") else "sequential",
            "ordering inter file": ordering_inter,
            "nodes": int(p.get("nodes", 1)),
            "tasks": ranks,
            "clients per node": tpn,
            "memoryBuffer": "CPU",
            "dataAccess": "CPU",
            "GPUDirect": "0",
            "repetitions": reps,
            "xfersize": f"{transfer} bytes",
            "blocksize": _ior_size(block),
            "aggregate filesize": _ior_size(aggregate),
        },
        "Results": results,
    }
    rows = []
    for phase in ("write", "read"):
        if phase not in summary:
            continue
        q = summary[phase]
        # IOR's ops/s in the summary are MiB/s over the transfer size in MiB
        per_op = transfer / MiB
        bytes_per_rep = q["bytes"] / max(q.get("iterations", 1), 1)
        rows.append(
            {
                "operation": phase,
                "API": api,
                "TestID": 0,
                "ReferenceNumber": 0,
                "segmentCount": segments,
                "blockSize": block,
                "transferSize": transfer,
                "numTasks": ranks,
                "tasksPerNode": tpn,
                "repetitions": reps,
                "filePerProc": fpp,
                "reorderTasks": int(p.get("reorder", 0)),
                "taskPerNodeOffset": 1,
                "reorderTasksRandom": reorder_random,
                "reorderTasksRandomSeed": 0,
                "bwMaxMIB": q["max_mib_s"],
                "bwMinMIB": q["min_mib_s"],
                "bwMeanMIB": q["mean_mib_s"],
                "bwStdMIB": q["std_mib_s"],
                "OPsMax": q["max_mib_s"] / per_op,
                "OPsMin": q["min_mib_s"] / per_op,
                "OPsMean": q["mean_mib_s"] / per_op,
                "OPsSD": q["std_mib_s"] / per_op,
                "MeanTime": q["mean_s"],
                "xsizeMiB": bytes_per_rep / MiB,
            }
        )
    return {
        "Version": "iopilot ior kernel",
        "Began": began,
        "Command line": p.get("command_line", ""),
        "Machine": p.get("machine", ""),
        "tests": [test],
        "summary": rows,
        "Finished": p.get("finished", ""),
    }


def _ior_size(n: int) -> str:
    """IOR's human size: the largest binary unit that divides it evenly, else bytes."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def main(name: str, kernel_args: Sequence[str], *, ranks: int = 1, json_path: str | None = None,
         trace: str | None = None, dir: str | None = None, keep: bool = False,
         ior_json_path: str | None = None) -> int:
    """``iopilot bench KERNEL``: run kernel ``name`` with ``kernel_args`` on
    ``ranks`` ranks (traced into ``trace``) and print its result (as JSON
    to ``json_path``, ``-`` for standard output)."""
    kernel_args = list(kernel_args)
    if keep and "keep" in kernel_options(name)[1] and "--keep" not in kernel_args:
        kernel_args.append("--keep")  # the kernel's files too, not only the directory
    workdir = Path(dir) if dir else Path(tempfile.mkdtemp(prefix="iopilot-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    trace_dir = Path(trace) if trace else None
    try:
        result = run_kernel(name, ranks, kernel_args, trace_dir=trace_dir, cwd=workdir)
    except KernelFailed as e:
        if e.usage:
            print(e.usage, file=sys.stderr)
        print(f"iopilot: error: {e}", file=sys.stderr)
        return e.status
    finally:
        if not dir and not keep:
            shutil.rmtree(workdir, ignore_errors=True)
        elif keep and not dir:
            print(f"iopilot: kernel files kept in {workdir}", file=sys.stderr)
    if json_path:
        emit(json_path, json.dumps(result, indent=2) + "\n")
    if json_path != "-":
        sys.stdout.write(render(result))
    if ior_json_path:
        Path(ior_json_path).write_text(json.dumps(ior_json(result), indent=2) + "\n")
        print(f"iopilot: IOR JSON summary in {ior_json_path}", file=sys.stderr)
    if trace_dir is not None:
        print(f"iopilot: trace in {trace_dir} (diagnose it with `iopilot report {trace_dir}`)",
              file=sys.stderr)  # fmt: skip
    return 0 if result["summary"]["verified"] is not False else 3


def h5bench_main(config: str, *, json_path: str | None = None, dir: str | None = None) -> int:
    """``iopilot bench h5bench CONFIG``: the benchmarks of an h5bench JSON
    configuration, in order, in one directory (a read finds the write's file)."""
    runs = kernel_runs(config)
    workdir = Path(dir) if dir else Path(tempfile.mkdtemp(prefix="iopilot-h5bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results, status = [], 0
    try:
        for name, ranks, kargs in runs:
            # h5bench makes the data directory before it runs; so do we.
            data = Path(workdir, kargs[kargs.index("--file") + 1])
            data.parent.mkdir(parents=True, exist_ok=True)
            print(f"iopilot: {name} on {ranks} rank(s): {' '.join(kargs)}", file=sys.stderr)
            try:
                result = run_kernel(name, ranks, kargs, cwd=workdir)
            except KernelFailed as e:
                print(f"iopilot: error: {e}", file=sys.stderr)
                status = e.status
                break
            results.append(result)
            if json_path != "-":
                sys.stdout.write(render(result) + "\n")
            if result["summary"]["verified"] is False:
                status = 3
    finally:
        if not dir:
            shutil.rmtree(workdir, ignore_errors=True)
    if json_path:
        emit(json_path, json.dumps(results, indent=2) + "\n")
    return status
