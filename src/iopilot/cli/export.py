"""``iopilot export``: what a trace or a Darshan log holds, as text or as a
timeline for Perfetto."""

from __future__ import annotations

import argparse
import os
import sys

from .. import api
from ..errors import InputError
from ..report.counters_text import counter_lines, header
from ..report.perfetto import export as export_timeline
from .common import EXIT_OK

# What the command does and how it is called, shown by its --help.
ABOUT: dict[str, tuple[str, str]] = {
    "export": ("Export what a trace or a Darshan log holds: its counters as text, or its "
               "operations as a timeline for Perfetto.",
               "iopilot export counters run.darshan\n"
               "  iopilot export perfetto trace-dir/ -o run.pftrace"),
    "export counters": ("Every counter of a trace or Darshan log, one tab-separated line "
                        "each, as darshan-parser prints them.",
                        "iopilot export counters trace-dir/ > mine.txt\n"
                        "  iopilot export counters run.darshan --out theirs.txt"),
    "export perfetto": ("Every operation of a trace (or of a Darshan log's DXT records) as a "
                        "timeline: a process per rank, a track per thread, one slice per "
                        "operation (file, offset, bytes, layer, op and call site as "
                        "arguments), background I/O and I/O phases on their own tracks. "
                        "Open the file in ui.perfetto.dev; a .json file (Chrome's "
                        "trace-event format) also opens in chrome://tracing. An existing "
                        "FILE is replaced.",
                        "iopilot export perfetto trace-dir/ -o run.pftrace\n"
                        "  iopilot export perfetto run.darshan -o run.json"),
}  # fmt: skip


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``export`` subcommand and what it exports."""
    x = sub.add_parser("export", help="counters as text, or a timeline for Perfetto")
    xsub = x.add_subparsers(dest="export", required=True, metavar="WHAT")
    xc = xsub.add_parser(
        "counters",
        help="every counter, one line each, as darshan-parser "
        "prints them (module, rank, record id, counter, value, file, mount, "
        "fs type)",
    )
    xc.add_argument("log", metavar="TRACE-OR-LOG")
    xc.add_argument("--out", metavar="PATH", help="write to PATH (default: standard output)")
    xc.set_defaults(func=cmd_export)
    xp = xsub.add_parser(
        "perfetto",
        help="every operation as a timeline for ui.perfetto.dev "
        "(Perfetto protobuf, or Chrome JSON for a .json file)",
    )
    xp.add_argument(
        "log",
        metavar="TRACE-OR-LOG",
        help="an iopilot trace directory or a Darshan log with DXT records",
    )
    xp.add_argument(
        "-o",
        "--out",
        metavar="FILE",
        required=True,
        help="write to FILE (replaced if it exists; - for standard output)",
    )
    xp.add_argument(
        "--format",
        choices=("perfetto", "json"),
        help="perfetto: Perfetto's protobuf trace (smaller, faster); json: "
        "Chrome's trace-event JSON, which chrome://tracing opens too "
        "(default: json for a FILE ending in .json, else perfetto)",
    )
    xp.set_defaults(func=cmd_perfetto)  # fmt: skip


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


def cmd_perfetto(args: argparse.Namespace) -> int:
    fmt = args.format or ("json" if args.out.lower().endswith(".json") else "perfetto")
    trace = api.load(args.log)
    if not len(trace.records) and not len(trace.meta_records):
        raise InputError(
            args.log,
            "no per-operation records to export",
            "Darshan logs need DXT: DXT_ENABLE_IO_TRACE=1 when the program runs",
        )
    kind = "json" if fmt == "json" else "proto"
    if args.out == "-":  # standard output, as for every output the user names
        export_timeline(trace, sys.stdout.buffer, kind)
        sys.stdout.buffer.flush()
        return EXIT_OK
    # Written beside the target and renamed at the end: a failed export
    # leaves no half-written file in its place.
    part = f"{args.out}.part"
    try:
        with open(part, "wb") as f:
            tl = export_timeline(trace, f, kind)
        os.replace(part, args.out)
    except OSError as e:
        if os.path.exists(part):
            os.unlink(part)
        raise InputError(args.out, f"cannot write: {e.strerror}") from None
    print(f"iopilot: wrote {args.out} ({tl.n:,} operations, {len(tl.tracks)} tracks)",
          file=sys.stderr)  # fmt: skip
    return EXIT_OK
