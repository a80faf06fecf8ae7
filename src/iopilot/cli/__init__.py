"""The ``iopilot`` command line: one module per subcommand, assembled here.

Each subcommand is the module ``iopilot.cli.<name>``, with ``add_parser(sub)``
(its options and the function that runs it) and ``ABOUT`` (its description
and examples for ``--help``).  That function turns the options into typed
parameters and calls the package that does the work (``api``, ``capture``,
``tune``, ``bench``): ``argparse`` stays in this package.  Adding a command
is adding its module and its name to ``COMMANDS``; only the command asked for
is imported, so each module imports what it uses at its top.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from .. import __version__
from .._alloc import keep_freed_memory, quiet_start, settled, single_threaded_blas
from ..bench.catalog import KERNELS
from ..errors import InputError
from .common import EXIT_BAD_INPUT, EXIT_OK

# The subcommands, in the order ``iopilot --help`` lists them.
COMMANDS = ("report", "checks", "run", "cc", "export", "demo", "bench", "tune", "optimize",
            "advise")


def command_module(name: str) -> ModuleType:
    """The module of command ``name``, imported now: the lazy-loading point of
    the command line.  A report does not load the tuner, nor the tuner the
    checks: the report's options take 4 ms to build, every command's (as
    ``iopilot --help`` builds them) 0.16 s and 350 modules."""
    return importlib.import_module(f"{__name__}.{name}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with ``only`` just that command's part (the
    empty string: none, for ``--version``): building every subcommand's
    options imports every command's modules."""
    p = argparse.ArgumentParser(
        prog="iopilot",
        description="Capture, diagnose, show and tune the I/O of HPC applications.",
    )
    p.add_argument("--version", action="version", version=f"iopilot {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if only == "":
        return p
    modules = [command_module(c) for c in COMMANDS if only is None or c == only]
    for module in modules:
        module.add_parser(sub)
    p.set_defaults(cli_main=main)  # for commands that run others (demo)
    _describe(p, {k: v for m in modules for k, v in m.ABOUT.items()})
    return p


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _describe(p: argparse.ArgumentParser, about: dict[str, tuple[str, str]],
              path: str = "") -> None:
    """Give every command a description and examples (kernels get theirs from the catalog)."""
    for name, sp in _subparsers(p).items():
        key = f"{path} {name}".strip()
        what, example = about.get(key, (sp.description or "", f"iopilot {key} --ranks 2"))
        sp.description = what
        sp.epilog = f"example:\n  {example}"
        sp.formatter_class = argparse.RawDescriptionHelpFormatter
        _describe(sp, about, key)


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
    code = main()
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
    program = argv is None  # the program itself, not a caller that imported iopilot
    if program:
        quiet_start()
    single_threaded_blas()
    argv = list(sys.argv[1:] if argv is None else argv)
    first = argv[0] if argv else None
    if first != "report":  # a report sets it for each big input (cli/report.py)
        keep_freed_memory()
    parser = build_parser(first if first in COMMANDS else "" if first == "--version" else None)
    args, extra = parser.parse_known_args(argv)
    # Options `iopilot bench KERNEL` does not know belong to the kernel.
    if getattr(args, "bench", None) in KERNELS:
        args.kernel_args = extra
    elif extra:
        _chosen(parser, args, first).error(f"unrecognized arguments: {' '.join(extra)}")
    if program:  # not a nested call (demo runs report) nor a caller's
        global _quick_exit
        _quick_exit = first in {"report", "checks"} and not (
            getattr(args, "scheduler", None) or getattr(args, "parquet", None))
    if args.command != "report":  # the report turns it on once its modules are in
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
