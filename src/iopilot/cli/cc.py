"""``iopilot cc``: build a program with the runtime linked in."""

from __future__ import annotations

import argparse
import shlex

from ..capture import link
from .common import EXIT_OK, command_after

# What the command does and how it is called, shown by its --help.
ABOUT: dict[str, tuple[str, str]] = {
    "cc": ("Compile and link a program with the iopilot runtime inside it, for libraries it "
           "links statically (Debian's h5cc links libhdf5.a), whose calls a preloaded runtime "
           "cannot see. `iopilot run` then traces it as it traces any program; run without "
           "it, the program behaves as if nothing were linked in. --flags prints the options "
           "to add at the end of a link line instead (a Makefile's LDLIBS).",
           "iopilot cc -- h5cc -O2 -o prog prog.c && iopilot run -- ./prog\n"
           "  make LDLIBS=\"$(iopilot cc --flags)\""),
}  # fmt: skip


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``cc`` subcommand and its options."""
    c = sub.add_parser("cc", help="build a program with the runtime linked in (static HDF5)")
    c.add_argument("--flags", action="store_true",
                   help="print the options to add at the end of a link line, and stop")
    c.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMPILER ARGS...")
    c.set_defaults(func=cmd_cc)  # fmt: skip


def cmd_cc(args: argparse.Namespace) -> int:
    if args.flags:
        print(shlex.join(link.link_flags()))
        return EXIT_OK
    return link.compile_and_link(command_after(args.command))
