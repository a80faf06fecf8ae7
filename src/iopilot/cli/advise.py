"""``iopilot advise async``: would asynchronous I/O pay for this run?"""

from __future__ import annotations

import argparse
import json

from .. import api
from ..errors import InputError
from ..model.scope import scope_args
from ..outfile import emit
from ..overlap.advise import render_text
from ..overlap.page import render_html
from .common import EXIT_OK, add_output_options, add_scope_options, to_stdout

# What the command does and how it is called, shown by its --help.
ABOUT: dict[str, tuple[str, str]] = {
    "advise": ("Advice from a trace about a change to the program's I/O.",
               "iopilot advise async trace-dir"),
    "advise async": ("Predict from a trace the run time with and without asynchronous I/O "
                     "(a background thread doing the reads, writes and syncs while the program "
                     "computes), phase by phase, from the I/O phases and the computation "
                     "between them and this machine's copy and hand-off costs; say whether "
                     "to turn it on, and where reordering writes would be unsafe.",
                     "iopilot advise async ./iopilot-trace --json advice.json"),
}  # fmt: skip


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``advise`` subcommand and its topics."""
    a = sub.add_parser("advise", help="advice about a change to the program's I/O")
    topics = a.add_subparsers(dest="advise", required=True, metavar="TOPIC")
    p = topics.add_parser("async", help="would asynchronous I/O pay for this run?")
    p.add_argument("trace", help="an iopilot trace directory or a Darshan log with DXT")
    add_output_options(p, "the advice",
                       "a page with both timelines (as traced, and with async)", "advice")
    p.add_argument("--cores", type=int, metavar="N",
                   help="cores per node where the program runs (default: this machine's)")
    add_scope_options(p)
    p.set_defaults(func=cmd_advise_async)


def cmd_advise_async(args: argparse.Namespace) -> int:
    if args.cores is not None and args.cores < 1:
        raise InputError("--cores", "must be 1 or more")
    scope = scope_args(args.exclude, args.include_only, args.no_default_excludes)
    advice = api.advise_async(args.trace, cores=args.cores, scope=scope)
    if args.json:
        emit(args.json, json.dumps(advice.as_dict(), indent=2) + "\n")
    if args.html:
        emit(args.html, render_html(advice))
    if not to_stdout(args):
        print(render_text(advice))
    return EXIT_OK
