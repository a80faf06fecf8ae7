"""``iopilot run``: trace a program, then diagnose it."""

from __future__ import annotations

import argparse

from ..capture import run
from ..model.scope import scope_args
from .common import add_scope_options, command_after

# What the command does and how it is called, shown by its --help.
ABOUT: dict[str, tuple[str, str]] = {
    "run": ("Run a program (serial or under mpirun) with the iopilot runtime preloaded, "
            "then diagnose the trace it leaves.",
            "iopilot run -- ./my_app input.cfg\n"
            "  iopilot run --trace-dir /scratch/t1 -- mpirun -n 4 ./my_app"),
}  # fmt: skip


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``run`` subcommand and its options."""
    u = sub.add_parser("run", help="trace a program (serial or MPI), then diagnose it")
    u.add_argument("--trace-dir", metavar="DIR", help="where to write the trace")
    u.add_argument("--trace-only", action="store_true", help="keep the trace, skip the report")
    u.add_argument("--max-records", type=int, metavar="N",
                   help="operation records kept per process (counters stay exact)")
    u.add_argument("--layers", metavar="L[,L...]",
                   help="trace only these layers: POSIX, STDIO, MPIIO, HDF5, FORTRAN")
    u.add_argument("--settings", metavar="FILE",
                   help="apply this settings file (TOML: MPI-IO hints, HDF5 properties, ...) "
                        "to the program without changing it")
    u.add_argument("--async", dest="async_writes", action="store_true",
                   help="write-behind: the program's POSIX writes are made by a background "
                   "thread while it goes on; reads, stats, syncs and closes wait for them, "
                   "and a deferred error comes back at the next fsync or close")
    u.add_argument("--async-relaxed", action="store_true",
                   help="with --async, also run fsync and fdatasync in the background "
                   "(durability is then the thread's: ask for it knowingly)")
    u.add_argument("--async-max-bytes", metavar="SIZE",
                   help="memory for pending writes (default 256m); a write that does not "
                   "fit is made at once")
    u.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    add_scope_options(u)
    u.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND...")
    u.set_defaults(func=cmd_run)  # fmt: skip


def cmd_run(args: argparse.Namespace) -> int:
    extra: dict[str, str] = {}
    if args.settings:
        extra.update(run.settings_env(args.settings))
    if args.async_writes or args.async_relaxed:
        extra.update(run.async_env(relaxed=args.async_relaxed, max_bytes=args.async_max_bytes))
    scope = scope_args(args.exclude, args.include_only, args.no_default_excludes)
    return run.trace_and_report(
        command_after(args.command), trace_dir=args.trace_dir, trace_only=args.trace_only,
        max_records=args.max_records, layers=args.layers.split(",") if args.layers else None,
        extra=extra or None, color=args.color, scope=scope)
