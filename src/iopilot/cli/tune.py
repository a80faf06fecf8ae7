"""``iopilot tune``: search I/O-stack settings for a program in a few trials."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..outfile import emit
from ..tune import output
from ..tune.generate import parameter_lines
from ..tune.search import STRATEGIES
from ..tune.tuning import TuneOptions, tune
from .common import EXIT_OK, add_output_options, command_after, to_stdout

# What the command does and how it is called, shown by its --help.
ABOUT: dict[str, tuple[str, str]] = {
    "tune": ("Search MPI-IO hints, Open MPI components, HDF5 and STDIO settings for an "
             "unmodified program: each trial runs it with a settings file applied "
             "(iopilot run --settings) and measures it; the best settings go to "
             "OUT/best.toml.",
             "iopilot tune --trials 16 -- mpirun -np 4 build/kernels/ior --api mpiio "
             "--collective --transfer 4k --block 8m --write\n"
             "  iopilot tune --space space.toml --strategy tpe --objective wall -- ./app"),
}  # fmt: skip


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``tune`` subcommand and its options."""
    t = sub.add_parser("tune", help="search I/O settings for a program in a few trials")
    t.add_argument("--strategy", choices=STRATEGIES, default="guided",
                   help="guided (default): the default, one change at a time in the order "
                   "the diagnosis suggests, then TPE; tpe; ga (genetic); random; grid")
    add_trial_options(t)
    t.add_argument("--objective", choices=("io", "wall", "bandwidth"), default="io",
                   help="io (default): slowest rank's I/O seconds in the trace; wall: "
                   "seconds to exit; bandwidth: MiB/s of a kernel's IOPILOT-RESULT line")
    add_output_options(t, "the study's summary",
                       "a self-contained page with the interactive convergence plot", "tune")
    t.add_argument("--out", metavar="DIR", default="iopilot-tune",
                   help="directory for best.toml, the plot, the study and the trials' "
                   "work (default ./iopilot-tune)")
    t.add_argument("--list-parameters", action="store_true",
                   help="print every parameter a space may name, its kind, what it does "
                   "and what a generated space tries, then exit")
    t.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND...")
    t.set_defaults(func=cmd_tune)  # fmt: skip


def add_trial_options(p: argparse.ArgumentParser) -> None:
    """What is tried and how trials are run and kept: shared by ``tune`` and
    ``optimize``."""
    p.add_argument("--space", metavar="FILE",
                   help="the parameters and values to try (TOML, README \"Tuning\"); "
                   "default: chosen from the diagnosis of the first run")
    p.add_argument("--trials", type=int, default=20, metavar="N",
                   help="trials in all, the default included (default 20)")
    p.add_argument("--repeats", type=int, default=3, metavar="K",
                   help="runs of the default and of promising candidates (default 3)")
    p.add_argument("--study", metavar="URL",
                   help="Optuna storage (sqlite:///file.db, postgresql://...); default "
                   "sqlite:///OUT/study.db. Running the same tuning again continues it")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    p.add_argument("--timeout", type=float, metavar="S",
                   help="stop a trial after S seconds (default: 5x the default's slowest "
                   "run, at least 10 s)")
    p.add_argument("--verify", metavar="CMD",
                   help="shell command run in the trial's directory after the program; a "
                   "non-zero status fails the trial")
    p.add_argument("--launcher", choices=("local", "slurm"), default="local",
                   help="where trials run (default local)")
    w = p.add_mutually_exclusive_group()
    w.add_argument("--warm-from", metavar="URL", default="",
                   help="Optuna storage of earlier tunings: the settings that won for a "
                   "similar job (same program, or the same warnings) are tried first "
                   "(default: the --study storage)")
    w.add_argument("--no-warm", action="store_true",
                   help="start from the default only, whatever was learnt before")  # fmt: skip


def trial_options(args: argparse.Namespace) -> dict[str, object]:
    """The options of ``add_trial_options`` as ``TuneOptions`` fields."""
    return {"space": args.space, "trials": args.trials, "repeats": args.repeats,
            "study": args.study, "seed": args.seed, "timeout": args.timeout,
            "verify": args.verify, "launcher": args.launcher,
            "warm_from": None if args.no_warm else args.warm_from}  # fmt: skip


def cmd_tune(args: argparse.Namespace) -> int:
    if args.list_parameters:
        print("\n".join(parameter_lines()))
        return EXIT_OK
    opts = TuneOptions(command_after(args.command), Path(args.out), strategy=args.strategy,
                       objective=args.objective, **trial_options(args))  # type: ignore[arg-type]
    _, doc = tune(opts, quiet=to_stdout(args))
    if args.json:
        emit(args.json, json.dumps(doc, indent=2, default=str) + "\n")
    if args.html:
        emit(args.html, output.page(doc))
    return EXIT_OK
