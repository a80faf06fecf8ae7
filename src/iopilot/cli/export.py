"""``iopilot export``: what a trace or a Darshan log holds, as text."""

from __future__ import annotations

import argparse
import sys

from .. import api
from ..report.counters_text import counter_lines, header
from .common import EXIT_OK

# What the command does and how it is called, shown by its --help.
ABOUT: dict[str, tuple[str, str]] = {
    "export": ("Export what a trace or a Darshan log holds as text.",
               "iopilot export counters run.darshan"),
    "export counters": ("Every counter of a trace or Darshan log, one tab-separated line "
                        "each, as darshan-parser prints them.",
                        "iopilot export counters trace-dir/ > mine.txt\n"
                        "  iopilot export counters run.darshan --out theirs.txt"),
}  # fmt: skip


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``export`` subcommand and what it exports."""
    x = sub.add_parser("export", help="counters of a trace or Darshan log as text")
    xsub = x.add_subparsers(dest="export", required=True, metavar="WHAT")
    xc = xsub.add_parser("counters", help="every counter, one line each, as darshan-parser "
                         "prints them (module, rank, record id, counter, value, file, mount, "
                         "fs type)")
    xc.add_argument("log", metavar="TRACE-OR-LOG")
    xc.add_argument("--out", metavar="PATH", help="write to PATH (default: standard output)")
    xc.set_defaults(func=cmd_export)  # fmt: skip


def cmd_export(args: argparse.Namespace) -> int:
    trace = api.load(args.log)
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout
    try:
        for line in header(trace):
            out.write(line + "\n")
        for line in counter_lines(trace):
            out.write(line + "\n")
    finally:
        if args.out:
            out.close()
    return EXIT_OK
