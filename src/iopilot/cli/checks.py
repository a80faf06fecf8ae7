"""``iopilot checks``: the checks, their Drishti codes and thresholds."""

from __future__ import annotations

import argparse

from .. import api
from .common import EXIT_OK

# What the command does and how it is called, shown by its --help.
ABOUT: dict[str, tuple[str, str]] = {
    "checks": ("List the checks, the Drishti codes they match and the thresholds they read.",
               "iopilot checks -v"),
}  # fmt: skip


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``checks`` subcommand."""
    c = sub.add_parser("checks", help="list the checks, their Drishti codes and thresholds")
    c.add_argument("-v", "--verbose", action="store_true", help="also list thresholds")
    c.set_defaults(func=cmd_checks)  # fmt: skip


def cmd_checks(args: argparse.Namespace) -> int:
    REGISTRY, DEFAULTS = api.checks(), api.threshold_defaults()
    for cls in sorted(REGISTRY.values(), key=lambda c: (c.layer, c.id)):
        alias = cls.drishti or "-"
        print(f"{cls.id:<34} {cls.layer:<13} {alias:<4} {cls.summary()}")
        if args.verbose and cls.uses:
            for u in cls.uses:
                print(f"{'':<34} {u} = {DEFAULTS[u][0]}  ({DEFAULTS[u][1]})")
    if args.verbose:  # thresholds of the report as a whole (severity, listing)
        used = {u for cls in REGISTRY.values() for u in cls.uses}
        print("all checks")
        for u in (u for u in DEFAULTS if u not in used):
            print(f"{'':<34} {u} = {DEFAULTS[u][0]}  ({DEFAULTS[u][1]})")
    return EXIT_OK
