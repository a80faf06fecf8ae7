"""The ``iopilot`` command line: one module per subcommand, assembled here.

Each subcommand module has ``add_parser(sub)`` (its options and function)
and ``ABOUT`` (its description and examples for ``--help``); adding a
subcommand is adding a module and listing it in ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from .. import __version__
from ..errors import InputError
from . import advise, bench, checks, demo, export, optimize, report, run, tune
from .common import EXIT_BAD_INPUT, EXIT_OK

# In the order ``iopilot --help`` lists them.
COMMANDS = (report, checks, run, export, demo, bench, tune, optimize, advise)

# What each command does and how it is called, shown by its --help.
_ABOUT: dict[str, tuple[str, str]] = {k: v for m in COMMANDS for k, v in m.ABOUT.items()}


def _command_of(module: object) -> str:
    return next(iter(module.ABOUT)).split()[0]  # type: ignore[attr-defined]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with ``only`` just that command's part:
    building every subcommand's options costs as much as reading a small log."""
    p = argparse.ArgumentParser(
        prog="iopilot",
        description="Capture, diagnose, show and tune the I/O of HPC applications.",
    )
    p.add_argument("--version", action="version", version=f"iopilot {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        if only is None or _command_of(command) == only:
            command.add_parser(sub)
    p.set_defaults(cli_main=main)  # for commands that run others (demo)
    _describe(p)
    return p


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _describe(p: argparse.ArgumentParser, path: str = "") -> None:
    """Give every command a description and examples (kernels get theirs from the catalog)."""
    for name, sp in _subparsers(p).items():
        key = f"{path} {name}".strip()
        what, example = _ABOUT.get(key, (sp.description or "", f"iopilot {key} --ranks 2"))
        sp.description = what
        sp.epilog = f"example:\n  {example}"
        sp.formatter_class = argparse.RawDescriptionHelpFormatter
        _describe(sp, key)


def _chosen(p: argparse.ArgumentParser, args: argparse.Namespace,
            first: str | None) -> argparse.ArgumentParser:
    """The (sub)command parser the command line chose, for its usage line."""
    for dest in ("command", "export", "bench", "advise"):
        name = getattr(args, dest, None)
        if dest == "command":  # `run` and `tune` keep their program under that name too
            name = first
        sp = _subparsers(p).get(name) if isinstance(name, str) else None
        if sp is not None:
            p = sp
    return p


def run() -> NoReturn:
    """The program's entry point (``iopilot``, ``python -m iopilot``): ``main()``,
    then, after a report, a quick exit."""
    from .._child import release

    try:
        code = main()
    finally:
        release()  # a child the program started and nothing used (--help, usage errors)
    _leave(code, quick=_quick_exit)


# Set by main() for the commands that leave nothing to finish once they
# return: reports, except those that hand work to Dask or write Parquet.
_quick_exit = False


def _leave(code: int, quick: bool) -> NoReturn:
    """Exit with ``code``.  With ``quick``, skip the interpreter's shutdown
    (about 10 ms, 5 % of a one-log report whose work ran in a child), but only
    when this process is all that is left: no other thread and no child."""
    threading = sys.modules.get("threading")  # not loaded: no thread was started through it
    mp = sys.modules.get("multiprocessing")
    if not quick or (threading and threading.active_count() > 1) or (mp and mp.active_children()):
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # the reader has gone, or the stream is closed
            pass
        except OSError:  # a full disk or the like: let the orderly exit say so
            sys.exit(code)
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    from .._alloc import keep_freed_memory, quiet_start, single_threaded_blas

    program = argv is None  # the program itself, not a caller that imported iopilot
    if program:
        quiet_start()
    single_threaded_blas()
    argv = list(sys.argv[1:] if argv is None else argv)
    first = argv[0] if argv else None
    if first != "report":  # a report sets it for each big input (cli/report.py)
        keep_freed_memory()
    parser = build_parser(first if first in {_command_of(m) for m in COMMANDS} else None)
    args, extra = parser.parse_known_args(argv)
    # Options `iopilot bench KERNEL` does not know belong to the kernel.
    from ..bench.catalog import KERNELS

    if getattr(args, "bench", None) in KERNELS:
        args.kernel_args = extra
    elif extra:
        _chosen(parser, args, first).error(f"unrecognized arguments: {' '.join(extra)}")
    if program:  # not a nested call (demo runs report) nor a caller's
        global _quick_exit
        _quick_exit = first in {"report", "checks"} and not (
            getattr(args, "scheduler", None) or getattr(args, "parquet", None))
    if args.command != "report":  # the report turns it on once its modules are in
        from .._alloc import settled

        settled()
    try:
        return args.func(args)
    except InputError as e:
        print(f"iopilot: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
