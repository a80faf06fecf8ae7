"""``iopilot optimize``: trace, diagnose, tune and compare in one command."""

from __future__ import annotations

import argparse

from .tune import add_trial_options

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
    o.add_argument("--json", metavar="OUT", help="write before, after, best, speedup and "
                   "the tuning as JSON")
    o.add_argument("--html", metavar="PATH",
                   help="the before/after page (default OUT/optimize.html)")
    o.add_argument("--out", metavar="DIR", default="iopilot-optimize",
                   help="directory for the traces, best.toml, the plot and the study "
                   "(default ./iopilot-optimize)")
    o.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND...")
    o.set_defaults(func=cmd_optimize)  # fmt: skip


def cmd_optimize(args: argparse.Namespace) -> int:
    from ..tune import optimize

    for name, v in (("--trials", args.trials), ("--repeats", args.repeats)):
        if v < 1:
            from ..errors import InputError

            raise InputError(name, f"must be 1 or more, not {v}")
    return optimize.main(args)
