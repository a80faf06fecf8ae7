"""``iopilot report DIR --summary``: one row per job over a pile of logs.

A centre's first questions about a pile of jobs are which jobs spend the most
machine time in I/O and which problems cost the most hours across all of them.
Each log becomes one small row (:func:`job_row`); rows are ranked by I/O
core-hours (the slowest rank's I/O seconds times the number of processes: the
allocation that waits while the slowest rank does I/O), and each check's cost
is added up over the jobs (:func:`check_hours`).

Rows are plain data, so they travel cheaply from worker processes or Dask
workers (:func:`rows_on_dask`) and land in Parquet (:func:`write_parquet`) for
archives too big for one table in memory.
"""

from __future__ import annotations

import csv
import io
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from .._child import run_isolated
from ..model.command import short_command
from ..model.trace import safe_name
from .csv_report import _safe  # names from other people's jobs: made safe

# One job's row: the order is the CSV's and the Parquet file's column order.
COLUMNS = ("log", "jobid", "nprocs", "run_seconds", "io_seconds", "io_share", "io_core_hours",
           "slowest_rank", "top_check", "top_level", "top_cost_seconds", "high", "warn",
           "error", "command")  # fmt: skip


def job_row(report: dict[str, Any]) -> dict[str, Any]:
    """The summary row of one log's report (``report.json_report.diagnosis_dict``)."""
    job = report["job"]
    io_time = report.get("io_time") or {}
    nprocs = int(job.get("nprocs") or 1)
    io_seconds = io_time.get("slowest_rank_seconds")
    top = report["findings"][0] if report["findings"] else None  # most costly first
    return {
        "log": report["source"],
        "jobid": str(job.get("jobid") or ""),
        "nprocs": nprocs,
        "run_seconds": float(io_time.get("run_seconds", job.get("runtime") or 0.0)),
        "io_seconds": None if io_seconds is None else float(io_seconds),
        "io_share": io_time.get("share"),
        "io_core_hours": None if io_seconds is None else float(io_seconds) * nprocs / 3600,
        "slowest_rank": io_time.get("slowest_rank"),
        "top_check": top["check"] if top else "",
        "top_level": top["level"] if top else "",
        "top_cost_seconds": top.get("cost_seconds") if top else None,
        "high": int(report["counts"]["HIGH"]),
        "warn": int(report["counts"]["WARN"]),
        "error": "",
        "command": str(job.get("executable") or ""),
        # Per check that found a problem (HIGH or WARN): its cost, for check_hours().
        "_checks": {f["check"]: f.get("cost_seconds") for f in report["findings"]
                    if f["level"] in ("HIGH", "WARN")},
    }


def error_row(path: str, reason: str) -> dict[str, Any]:
    """The row of a log that could not be read."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(log=path, jobid="", nprocs=0, high=0, warn=0, top_check="", top_level="",
               error=reason, command="", _checks={})  # fmt: skip
    return row


def ranked(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows by I/O core-hours, most first; rows without an estimate, then errors, last."""
    return sorted(rows, key=lambda r: (bool(r["error"]), r["io_core_hours"] is None,
                                       -(r["io_core_hours"] or 0.0), r["log"]))  # fmt: skip


def check_hours(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per check: the core-hours its findings cost summed over jobs, and how many jobs."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        for check, cost in r.get("_checks", {}).items():
            e = out.setdefault(check, {"check": check, "jobs": 0, "core_hours": 0.0,
                                       "jobs_with_cost": 0})  # fmt: skip
            e["jobs"] += 1
            if cost is not None:
                e["jobs_with_cost"] += 1
                e["core_hours"] += float(cost) * r["nprocs"] / 3600
    return sorted(out.values(), key=lambda e: (-e["core_hours"], -e["jobs"], e["check"]))


def document(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON summary: jobs (ranked) and checks (by hours)."""
    jobs = ranked(rows)
    return {
        "jobs": [{k: r[k] for k in COLUMNS} for r in jobs],
        "checks": check_hours(jobs),
        "logs": len(jobs),
        "failed": sum(1 for r in jobs if r["error"]),
        "io_core_hours": sum(r["io_core_hours"] or 0.0 for r in jobs),
    }


def render_csv(rows: list[dict[str, Any]]) -> str:

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in ranked(rows):
        w.writerow(_safe(["" if r[k] is None else r[k] for k in COLUMNS]))
    return buf.getvalue()


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def render_terminal(rows: list[dict[str, Any]], limit: int = 25) -> str:
    """The ranked jobs (the first ``limit``) and the checks that cost most hours."""

    doc = document(rows)
    jobs = ranked(rows)
    lines = [f"{doc['logs']:,} logs, {doc['failed']:,} unreadable; "
             f"I/O core-hours in all: {doc['io_core_hours']:.3g}", "",
             f"  {'core-h':>9}  {'I/O s':>9}  {'share':>6}  {'ranks':>6}  "
             f"{'top finding (cost s)':<34}  log: command"]  # fmt: skip
    for r in jobs[:limit]:
        name = safe_name(os.path.basename(r["log"]))[:60]
        # two jobs of one program (python3 ...) differ by their arguments
        if r.get("command"):
            name += ": " + safe_name(short_command(r["command"], 60))
        if r["error"]:
            lines.append(f"  {'':>9}  {'':>9}  {'':>6}  {'':>6}  "
                         f"{'error: ' + safe_name(r['error'])[:60]:<34}  {name}")  # fmt: skip
            continue
        share = _num(None if r["io_share"] is None else 100 * r["io_share"], ".1f") + "%"
        top = r["top_check"] and f"{r['top_check']} ({_num(r['top_cost_seconds'], '.3g')})"
        lines.append(f"  {_num(r['io_core_hours'], '.3g'):>9}  {_num(r['io_seconds'], '.3g'):>9}"
                     f"  {share:>6}  {r['nprocs']:>6}  {top:<34}  {name}")  # fmt: skip
    if len(jobs) > limit:
        lines.append(f"  ... {len(jobs) - limit:,} more (--csv or --json for all)")
    lines += ["", "checks by core-hours across jobs:"]
    for e in doc["checks"][:10]:
        lines.append(f"  {e['core_hours']:9.3g}  {e['check']:<34}  in {e['jobs']:,} job(s)")
    return "\n".join(lines) + "\n"


def write_parquet(rows: list[dict[str, Any]], path: str | Path, batch: int = 100_000,
                  name: str | None = None) -> list[Path]:  # fmt: skip
    """Rows as a Parquet dataset: ``path`` is a directory of part files, read as one
    table by any Parquet reader (``pyarrow.dataset``, DuckDB, Spark ...).

    Parts are named ``part-NAME-K.parquet``; NAME defaults to one unique to this
    call, so that many writers and later runs add files to one dataset without
    clashing.  A caller that may run again for the same rows (a Dask task
    recomputed after a worker died) passes its own NAME, and the second write
    replaces the first instead of doubling the rows.  Each part records the host
    and process that wrote it (schema metadata ``iopilot.writer``)."""
    import socket

    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("log", pa.string()), ("jobid", pa.string()), ("nprocs", pa.int64()),
                        ("run_seconds", pa.float64()), ("io_seconds", pa.float64()),
                        ("io_share", pa.float64()), ("io_core_hours", pa.float64()),
                        ("slowest_rank", pa.int64()), ("top_check", pa.string()),
                        ("top_level", pa.string()), ("top_cost_seconds", pa.float64()),
                        ("high", pa.int64()), ("warn", pa.int64()),
                        ("error", pa.string()), ("command", pa.string())])  # fmt: skip
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    writer = f"{socket.gethostname()}-{os.getpid()}"
    name = name or f"{writer}-{time.time_ns():x}"
    schema = schema.with_metadata({"iopilot.writer": writer})
    parts = []
    for k, i in enumerate(range(0, len(rows), batch)):
        cols = {c: [r[c] for r in rows[i : i + batch]] for c in COLUMNS}
        part = out / f"part-{name}-{k:06d}.parquet"
        tmp = out / f".{part.name}.tmp"  # hidden from readers until whole
        pq.write_table(pa.table(cols, schema=schema), tmp)
        tmp.rename(part)
        parts.append(part)
    return parts


def _batch_rows(paths: list[str], row_of: Callable[[str], dict[str, Any]],
                parquet: str | None, name: str) -> list[dict[str, Any]]:  # fmt: skip
    """Runs on a Dask worker: the rows of some logs, written there as one Parquet part.

    Where the worker may start processes (Dask's ``worker.daemon: false``), each
    log is read in a forked child as on one machine, so a log that crashes the
    reader gives the same error row as a local run and the worker lives on."""
    import multiprocessing

    if multiprocessing.current_process().daemon:
        rows = [row_of(p) for p in paths]
    else:
        rows = run_isolated(row_of, [(p,) for p in paths], 1,
                            lambda i, why: error_row(paths[i], why))  # fmt: skip
    if parquet:
        write_parquet(rows, parquet, name=name)
    return rows


def rows_on_dask(paths: list[str], row_of: Callable[[str], dict[str, Any]],
                 scheduler: str, parquet: str | None = None,
                 batch: int = 64) -> Iterator[dict[str, Any]]:  # fmt: skip
    """Rows of ``paths`` computed on a Dask cluster: ``scheduler`` is its address, or
    ``local`` for a cluster of this machine's cores.

    Logs go out in batches of ``batch``; with ``parquet`` (a directory every worker
    can write, as on a shared file system) each worker writes its batch's rows
    there itself, so the archive's rows never pass through one process.  A batch
    whose worker dies (a crash in a C library) is sent again one log per task,
    and only the log that still fails, twice, gets an error row."""
    from dask.distributed import Client, LocalCluster, as_completed

    cluster = None
    if scheduler == "local":
        cluster = LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1,
                               processes=True, dashboard_address=None)  # fmt: skip
    client = Client(cluster if cluster is not None else scheduler)
    run = f"{os.getpid()}-{time.time_ns():x}"  # this run's part names: part-RUN-BATCH-...
    lost: list[dict[str, Any]] = []

    def send(some: list[str], name: str) -> Any:
        fut = client.submit(_batch_rows, some, row_of, parquet, f"{run}-{name}",
                            pure=False, retries=0)  # fmt: skip
        batches[fut] = (some, name)
        return fut

    try:
        batches: dict[Any, tuple[list[str], str]] = {}
        done = as_completed([send(paths[i : i + batch], f"{i // batch:06d}")
                             for i in range(0, len(paths), batch)])  # fmt: skip
        for fut in done:
            mine, name = batches.pop(fut)  # a result taken is never recomputed
            try:
                yield from fut.result()
            except Exception as e:  # KilledWorker and the like
                if len(mine) == 1 and not name.endswith("-again"):
                    # a task waiting on the worker the culprit killed dies with it:
                    # a log alone is blamed only when it fails a second time
                    done.add(send(mine, f"{name}-again"))
                    continue
                if len(mine) == 1:
                    lost.append(error_row(mine[0], f"failed on the cluster: {type(e).__name__}"))
                    yield lost[-1]
                    continue
                for k, p in enumerate(mine):  # find the log that fails; the others get rows
                    done.add(send([p], f"{name}-{k:06d}"))
            fut.release()
        if parquet and lost:
            write_parquet(lost, parquet, name=f"{run}-lost")
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
