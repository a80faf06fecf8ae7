"""``iopilot report``: diagnose logs and traces, one at a time or a pile of them."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._child import release, run_in_child, run_isolated
from .._progress import Progress
from ..errors import InputError
from .common import EXIT_BAD_INPUT, EXIT_CRITICAL, EXIT_OK, add_scope_options, emit, file_scope

if TYPE_CHECKING:
    from ..model.scope import FileScope

# What the command does and how it is called, shown by its --help.
ABOUT: dict[str, tuple[str, str]] = {
    "report": ("Diagnose Darshan logs and iopilot trace directories: what slows the I/O, "
               "what it costs, and what to change.",
               "iopilot report run.darshan\n"
               "  iopilot report ~/.local/share/iopilot/traces/<run> --html page.html\n"
               "  iopilot report logs/ --csv findings.csv --json report.json"),
}  # fmt: skip


# Seconds a log may take before it is an error row: no input can hang a
# report of a pile of logs for ever.
DEFAULT_TIMEOUT = 600.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``report`` subcommand and its options."""
    r = sub.add_parser("report", help="diagnose Darshan logs and iopilot traces")
    r.add_argument("logs", nargs="+", metavar="LOG", help="log files or directories of logs")
    r.add_argument("--json", nargs="?", const="-", metavar="PATH",
                   help="write the JSON report to PATH (default: standard output)")
    r.add_argument("--csv", nargs="?", const="-", metavar="PATH",
                   help="write a CSV table of findings to PATH (default: standard output)")
    r.add_argument("--html", nargs="?", const="iopilot-report.html", metavar="PATH",
                   help="write the interactive HTML report (a directory for many logs)")
    r.add_argument("--config", metavar="TOML", help="thresholds from a TOML file")
    r.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="override one threshold (repeatable); see 'iopilot checks -v'")
    r.add_argument("--checks", metavar="ID[,ID...]", help="run only these checks")
    add_scope_options(r)
    r.add_argument("--min-level", choices=("HIGH", "WARN", "INFO", "OK"), default="OK",
                   help="hide findings below this level in the terminal report")
    r.add_argument("--fail-on-critical", action="store_true",
                   help="exit with status 1 when any HIGH finding exists (for CI pipelines)")
    r.add_argument("-v", "--verbose", action="store_true",
                   help="list every file and snippet")
    r.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    r.add_argument("-j", "--jobs", type=int, default=0,
                   help="worker processes for many logs (default: all cores)")
    r.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"give up on a log that takes longer to read and check "
                        f"(default: {DEFAULT_TIMEOUT:g}; 0: no limit)")
    r.add_argument("--summary", action="store_true",
                   help="one row per job (I/O seconds, share, core-hours, top finding), "
                        "ranked by I/O core-hours, and the checks that cost most hours")
    r.add_argument("--scheduler", metavar="ADDRESS",
                   help="with --summary: run on a Dask cluster (its scheduler's address, "
                        "or 'local' for this machine's cores)")
    r.add_argument("--parquet", metavar="DIR",
                   help="with --summary: also write the rows as a Parquet dataset in DIR")
    r.set_defaults(func=cmd_report)  # fmt: skip


def _analyse(path: str, thresholds: dict[str, Any], only: set[str] | None,
             html: str | None = None,
             scope: FileScope | None = None) -> dict[str, Any]:  # fmt: skip
    """Load and diagnose one log (and write its HTML page); runs in a worker for many logs."""
    from .. import api
    from .._alloc import keep_freed_memory_for

    keep_freed_memory_for(path)  # also in worker processes
    try:
        d = api.diagnose(path, thresholds=thresholds, only=only, scope=scope)
        out: dict[str, Any] = {"ok": api.render(d, "dict")}
        if html:
            out["html"] = api.write_page(d, html, phase_gap=thresholds.get("phase_gap") or None)
        return out
    except InputError as e:
        return {"error": {"path": e.path, "reason": str(e).removeprefix(f"{e.path}: ")}}
    except MemoryError:
        return {"error": {"path": path, "reason": "out of memory while reading this log"}}
    except Exception as e:  # keep other logs going; say what broke, not a traceback
        if os.environ.get("IOPILOT_DEBUG"):
            raise
        return {"error": {"path": path, "reason": f"internal error: {type(e).__name__}: {e}"}}


def cmd_report(args: argparse.Namespace) -> int:
    if not args.timeout >= 0:  # also NaN
        raise InputError("--timeout", f"must be 0 (no limit) or more, not {args.timeout:g}")
    if os.environ.get("IOPILOT_DEBUG"):  # in this process, so that a failure shows its traceback
        return _report(args, isolate=False)
    if _one_log_file(args):
        return _one_log_in_child(args)
    release()  # the child the program started for one log: not needed
    return _report(args, isolate=True)


def preload() -> None:
    """Import what a report needs (in the child the program starts for it)."""
    from .. import api

    api.preload()


def _one_log_file(args: argparse.Namespace) -> bool:
    """A report of one log file (not a directory, manifest or fleet summary),
    written to the process's own output: a child's writes to a stream that a
    caller put in place of it (``redirect_stdout``) would not reach the caller."""
    (log,) = args.logs if len(args.logs) == 1 else (None,)
    return (log is not None and not log.startswith("@") and os.path.isfile(log)
            and not (args.summary or args.scheduler or args.parquet)
            and sys.stdout is sys.__stdout__ and sys.stderr is sys.__stderr__)  # fmt: skip


def _one_log_in_child(args: argparse.Namespace) -> int:
    """One log: the whole report (read, check, write) in one forked child.

    Forked before anything heavy is imported, so the child does not copy the
    parent's pages (``iopilot._child``).  A log that crashes the C library or
    runs past ``--timeout`` still ends as its one-line error row, as in the
    worker of many logs.
    """
    timeout = args.timeout or None
    out = run_in_child(_child_report, (args,), timeout, warm=True)
    if out.ok:
        return out.value  # type: ignore[no-any-return]
    if out.code >= 0 and not out.late:  # a traceback (1), an interrupt (130)
        return out.code
    why = out.reason(timeout)
    return _write(args, args.logs, [{"error": {"path": args.logs[0], "reason": why}}])


def _child_report(args: argparse.Namespace) -> int:
    """The report of ``_one_log_in_child``, in its child."""
    try:
        return _report(args, isolate=False)
    except InputError as e:
        print(f"iopilot: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return EXIT_OK


def _report(args: argparse.Namespace, isolate: bool) -> int:
    """Read, check and write.  With ``isolate`` each log runs in a worker
    that may die alone; else all run in this process."""
    from .. import api

    thresholds = api.thresholds(args.config, args.set)
    only = set(args.checks.split(",")) if args.checks else None
    if only:
        unknown = only - set(api.checks())
        if unknown:
            raise InputError("--checks", f"unknown check(s): {', '.join(sorted(unknown))}")
    paths = api.inputs(args.logs)
    scope = file_scope(args)
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
        results = run_isolated(_analyse, items, jobs, failed, timeout=args.timeout or None)
    else:
        results = [_analyse(p, thresholds, only, h, scope)
                   for p, h in zip(paths, htmls, strict=True)]  # fmt: skip
    from .._alloc import settled

    settled()
    return _write(args, paths, results)


def _write(args: argparse.Namespace, paths: list[str], results: list[dict[str, Any]]) -> int:
    """The reports and error rows of ``results`` in the formats asked for;
    the exit status."""
    from ..report import json_report, terminal

    reports = [r["ok"] for r in results if "ok" in r]
    errors = [r["error"] for r in results if "error" in r]

    to_stdout = args.json == "-" or args.csv == "-"
    if args.json:
        emit(args.json, json_report.dumps(json_report.document(reports, errors)))
    if args.csv:
        from ..report import csv_report

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


def _job_row(path: str, thresholds: dict[str, Any], only: set[str] | None,
             scope: FileScope | None = None) -> dict[str, Any]:  # fmt: skip
    """One log's summary row (runs in a worker process or on a Dask worker)."""
    from ..report import fleet

    r = _analyse(path, thresholds, only, scope=scope)
    if "ok" in r:
        return fleet.job_row(r["ok"])
    return fleet.error_row(r["error"]["path"], r["error"]["reason"])


def _summary(args: argparse.Namespace, paths: list[str], thresholds: dict[str, Any],
             only: set[str] | None, scope: FileScope) -> int:  # fmt: skip
    """``report --summary``: one row per job, ranked by I/O core-hours."""
    from functools import partial

    from .._alloc import settled
    from ..report import fleet, json_report

    settled()  # a long run (Dask clients make reference cycles): collect as usual
    progress = Progress(len(paths))
    if args.scheduler:
        row_of = partial(_job_row, thresholds=thresholds, only=only, scope=scope)
        rows = []
        for row in fleet.rows_on_dask(paths, row_of, args.scheduler, args.parquet):
            rows.append(row)
            progress.step()
    elif os.environ.get("IOPILOT_DEBUG"):
        rows = [_job_row(p, thresholds, only, scope) for p in paths]
    else:  # each log in a worker that may die alone, as for the full report
        jobs = max(1, min(args.jobs or os.cpu_count() or 1, len(paths)))
        items = [(p, thresholds, only, scope) for p in paths]
        rows = run_isolated(_job_row, items, jobs, lambda i, why: fleet.error_row(paths[i], why),
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
    if len(paths) == 1 and not Path(html).is_dir():
        return [html]
    out = Path(html)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(html, f"cannot create the directory: {e.strerror}") from None
    names = [Path(p.rstrip("/")).name for p in paths]
    return [str(out / f"{n}.html") for n in names]
