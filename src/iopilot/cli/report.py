"""``iopilot report``: diagnose logs and traces, one at a time or a pile of them.

This module is the options and where the report runs; the work is
``iopilot.cli.reporting``.  It imports nothing heavy: the parent of a one-log
report stays without NumPy, the readers and the checks, which only its child
(``iopilot._child``) imports."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from types import ModuleType

from .._child import run_in_child
from ..errors import InputError
from .common import EXIT_BAD_INPUT, EXIT_OK, add_output_options, add_scope_options

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
    r.add_argument("--csv", nargs="?", const="-", metavar="PATH",
                   help="write a CSV table of findings to PATH (default: standard output)")
    add_output_options(r, "the report", "the interactive HTML report (a directory of pages "
                       "for many logs)", "report")
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


def cmd_report(args: argparse.Namespace) -> int:
    if not args.timeout >= 0:  # also NaN
        raise InputError("--timeout", f"must be 0 (no limit) or more, not {args.timeout:g}")
    if os.environ.get("IOPILOT_DEBUG"):  # in this process, so that a failure shows its traceback
        return _work().report(args, isolate=False)
    if _one_log_file(args):
        return _one_log_in_child(args)
    return _work().report(args, isolate=True)


def _work() -> ModuleType:
    """The module that does the report's work.  The one lazy import of the
    command line besides the choice of command: the parent of a one-log
    report never needs it (its child does the work)."""
    return importlib.import_module("iopilot.cli.reporting")


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
    parent's pages as it touches them.  A log that crashes the C library or
    runs past ``--timeout`` still ends as its one-line error row, as in the
    worker of many logs.
    """
    timeout = args.timeout or None
    out = run_in_child(_child_report, (args,), timeout)
    if out.ok:
        return out.value  # type: ignore[no-any-return]
    if out.code >= 0 and not out.late:  # a traceback (1), an interrupt (130)
        return out.code
    why = out.reason(timeout)
    return _work().write(args, args.logs, [{"error": {"path": args.logs[0], "reason": why}}])


def _child_report(args: argparse.Namespace) -> int:
    """The report of ``_one_log_in_child``, in its child."""
    try:
        return _work().report(args, isolate=False)
    except InputError as e:
        print(f"iopilot: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return EXIT_OK


