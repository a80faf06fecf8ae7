"""``iopilot demo``: diagnose a built-in example."""

from __future__ import annotations

import argparse

from .. import demo

# What the command does and how it is called, shown by its --help.
ABOUT: dict[str, tuple[str, str]] = {
    "demo": ("Diagnose a built-in example and write its reports.", "iopilot demo"),
}  # fmt: skip


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``demo`` subcommand."""
    m = sub.add_parser("demo", help="diagnose a built-in example")
    m.add_argument("--out", default="demo-output", help="where to write the reports")
    m.add_argument("--darshan", action="store_true",
                   help="diagnose a Darshan log shipped with PyDarshan instead")
    m.set_defaults(func=cmd_demo)  # fmt: skip


def cmd_demo(args: argparse.Namespace) -> int:
    # The entry point comes through the parser's defaults: importing it here
    # would make a cycle with the package that lists this module.
    return demo.main(args.cli_main, args.out, darshan=args.darshan)
