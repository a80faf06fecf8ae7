"""The work of ``iopilot report``: read, check and write, one log or a pile.

``iopilot.cli.report`` holds the options and decides where this runs: a
one-log report runs whole in the child the program forked at start, which
imported this module while the parent read the command line."""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path
from typing import Any

from .. import api
from .._alloc import keep_freed_memory_for, settled
from .._child import run_isolated
from .._progress import Progress
from ..errors import InputError
from ..model.scope import FileScope, scope_args
from ..outfile import emit
from ..report import csv_report, fleet, json_report, terminal
from .common import EXIT_BAD_INPUT, EXIT_CRITICAL, EXIT_OK


def analyse(path: str, thresholds: dict[str, Any], only: set[str] | None,
             html: str | None = None,
             scope: FileScope | None = None) -> dict[str, Any]:  # fmt: skip
    """Load and diagnose one log (and write its HTML page); runs in a worker for many logs."""
    keep_freed_memory_for(path)  # also in worker processes
    try:
        d = api.diagnose(path, thresholds=thresholds, only=only, scope=scope)
        out: dict[str, Any] = {"ok": api.render(d, "dict")}
        gap = thresholds.get("phase_gap") or None
        if html == "-":  # the page is the output: written with the others
            out["page"] = api.render(d, "html", phase_gap=gap)
        elif html:
            out["html"] = api.write_page(d, html, phase_gap=gap)
        return out
    except InputError as e:
        return {"error": {"path": e.path, "reason": str(e).removeprefix(f"{e.path}: ")}}
    except MemoryError:
        return {"error": {"path": path, "reason": "out of memory while reading this log"}}
    except Exception as e:  # keep other logs going; say what broke, not a traceback
        if os.environ.get("IOPILOT_DEBUG"):
            raise
        return {"error": {"path": path, "reason": f"internal error: {type(e).__name__}: {e}"}}


def report(args: argparse.Namespace, isolate: bool) -> int:
    """Read, check and write.  With ``isolate`` each log runs in a worker
    that may die alone; else all run in this process."""
    thresholds = api.thresholds(args.config, args.set)
    only = set(args.checks.split(",")) if args.checks else None
    if only:
        unknown = only - set(api.checks())
        if unknown:
            raise InputError("--checks", f"unknown check(s): {', '.join(sorted(unknown))}")
    paths = api.inputs(args.logs)
    scope = scope_args(args.exclude, args.include_only, args.no_default_excludes)
    if args.summary or args.scheduler or args.parquet:
        return _summary(args, paths, thresholds, only, scope)
    htmls = html_targets(args.html, paths)
    jobs = max(1, min(args.jobs or os.cpu_count() or 1, len(paths)))
    if isolate:
        # Each log in a worker that may die alone: one log that crashes the
        # C library is one error row, never the end of the run.  One log too
        # (a directory or manifest that holds one): a damaged log can abort
        # the library in ways no header check foresees (a version string
        # changed into another valid one); only the findings travel back.
        def failed(i: int, why: str) -> dict[str, Any]:
            return {"error": {"path": paths[i], "reason": why}}

        items = [(p, thresholds, only, h, scope) for p, h in zip(paths, htmls, strict=True)]
        results = run_isolated(analyse, items, jobs, failed, timeout=args.timeout or None)
    else:
        results = [analyse(p, thresholds, only, h, scope)
                   for p, h in zip(paths, htmls, strict=True)]  # fmt: skip
    settled()
    return write(args, paths, results)


def write(args: argparse.Namespace, paths: list[str], results: list[dict[str, Any]]) -> int:
    """The reports and error rows of ``results`` in the formats asked for;
    the exit status."""
    reports = [r["ok"] for r in results if "ok" in r]
    errors = [r["error"] for r in results if "error" in r]

    to_stdout = "-" in (args.json, args.csv, args.html)
    for r in results:
        if "page" in r:
            emit("-", r["page"])
    if args.json:
        emit(args.json, json_report.dumps(json_report.document(reports, errors)))
    if args.csv:
        emit(args.csv, csv_report.render(reports, errors))
    if not to_stdout:
        style = terminal.Style(terminal.want_color(args.color, sys.stdout))
        if not args.html or args.verbose:  # with --html the page is the report
            for r in reports:
                terminal.write(terminal.render(r, style, min_level=args.min_level,
                                               verbose=args.verbose))  # fmt: skip
        if len(paths) > 1 or args.html:
            terminal.write(terminal.render_summary(reports, errors, style))
    for r in results:
        if "html" in r:
            h = r["html"]
            sampled = " (timeline binned/sampled)" if h.get("sampled") else ""
            print(f"iopilot: wrote {h['path']} ({h['bytes'] / 2**20:.1f} MiB){sampled}",
                  file=sys.stderr)  # fmt: skip
    for e in errors:
        print(f"iopilot: error: {e['path']}: {e['reason']}", file=sys.stderr)
    if errors:
        return EXIT_BAD_INPUT
    if args.fail_on_critical and any(r["counts"]["HIGH"] for r in reports):
        return EXIT_CRITICAL
    return EXIT_OK


def job_row(path: str, thresholds: dict[str, Any], only: set[str] | None,
             scope: FileScope | None = None) -> dict[str, Any]:  # fmt: skip
    """One log's summary row (runs in a worker process or on a Dask worker)."""
    r = analyse(path, thresholds, only, scope=scope)
    if "ok" in r:
        return fleet.job_row(r["ok"])
    return fleet.error_row(r["error"]["path"], r["error"]["reason"])


def _summary(args: argparse.Namespace, paths: list[str], thresholds: dict[str, Any],
             only: set[str] | None, scope: FileScope) -> int:  # fmt: skip
    """``report --summary``: one row per job, ranked by I/O core-hours."""
    settled()  # a long run (Dask clients make reference cycles): collect as usual
    progress = Progress(len(paths))
    if args.scheduler:
        row_of = partial(job_row, thresholds=thresholds, only=only, scope=scope)
        rows = []
        for row in fleet.rows_on_dask(paths, row_of, args.scheduler, args.parquet):
            rows.append(row)
            progress.step()
    elif os.environ.get("IOPILOT_DEBUG"):
        rows = [job_row(p, thresholds, only, scope) for p in paths]
    else:  # each log in a worker that may die alone, as for the full report
        jobs = max(1, min(args.jobs or os.cpu_count() or 1, len(paths)))
        items = [(p, thresholds, only, scope) for p in paths]
        rows = run_isolated(job_row, items, jobs,
                                lambda i, why: fleet.error_row(paths[i], why),
                                timeout=args.timeout or None, each=progress.step)  # fmt: skip
    if args.parquet:
        if not args.scheduler:  # on Dask, the workers wrote their rows themselves
            fleet.write_parquet(rows, args.parquet)
        print(f"iopilot: wrote {len(rows):,} rows to {args.parquet}", file=sys.stderr)
    if args.json:
        emit(args.json, json_report.dumps(fleet.document(rows)))
    if args.csv:
        emit(args.csv, fleet.render_csv(rows))
    if args.json != "-" and args.csv != "-":
        sys.stdout.write(fleet.render_terminal(rows))
    failed = [r for r in rows if r["error"]]
    for r in failed:
        print(f"iopilot: error: {r['log']}: {r['error']}", file=sys.stderr)
    return EXIT_BAD_INPUT if failed else EXIT_OK


def html_targets(html: str | None, paths: list[str]) -> list[str | None]:
    """Where each log's page goes: the given file for one log, DIR/<name>.html for many."""
    if not html:
        return [None] * len(paths)
    if html == "-" and len(paths) > 1:
        raise InputError("--html", "standard output takes the page of one log, not of "
                         f"{len(paths)}: give a directory")
    if len(paths) == 1 and not Path(html).is_dir():
        return [html]
    out = Path(html)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(html, f"cannot create the directory: {e.strerror}") from None
    names = [Path(p.rstrip("/")).name for p in paths]
    return [str(out / f"{n}.html") for n in names]
