"""``iopilot optimize``: trace, diagnose, tune and compare in one command."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..outfile import emit
from ..tune.optimize import optimize, page
from ..tune.tuning import TuneOptions
from .common import EXIT_OK, add_output_options, command_after, to_stdout
from .tune import add_trial_options, trial_options

# What the command does and how it is called, shown by its --help.
ABOUT: dict[str, tuple[str, str]] = {
    "optimize": ("Trace the program with the default settings, diagnose it, tune the "
                 "settings the diagnosis points at (guided search), trace it again with the "
                 "best settings and compare the two runs: I/O time, speedup, what changed, "
                 "which findings went away.",
                 "iopilot optimize -- mpirun -np 4 build/kernels/ior --api mpiio "
                 "--collective --transfer 4k --block 8m --write\n"
                 "  iopilot optimize --trials 30 --json opt.json --html opt.html -- ./app"),
}  # fmt: skip


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``optimize`` subcommand and its options."""
    o = sub.add_parser("optimize", help="trace, tune and compare a program in one command")
    add_trial_options(o)
    add_output_options(o, "before, after, best, speedup and the tuning",
                       "the before/after page (without --html: OUT/optimize.html)", "optimize")
    o.add_argument("--out", metavar="DIR", default="iopilot-optimize",
                   help="directory for the traces, best.toml, the plot and the study "
                   "(default ./iopilot-optimize)")
    o.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND...")
    o.set_defaults(func=cmd_optimize)  # fmt: skip


def cmd_optimize(args: argparse.Namespace) -> int:
    opts = TuneOptions(command_after(args.command), Path(args.out),
                       **trial_options(args))  # type: ignore[arg-type]
    doc = optimize(opts, quiet=to_stdout(args))
    emit(args.html or str(opts.out.resolve() / "optimize.html"), page(doc))
    if args.json:
        emit(args.json, json.dumps(doc, indent=2, default=str) + "\n")
    return EXIT_OK
