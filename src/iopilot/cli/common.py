"""What several subcommands share: exit statuses, the file-scope options, the
``--json``/``--html`` options (``iopilot.outfile`` writes them).

This module imports nothing heavy: the one-log report's parent process uses it."""

from __future__ import annotations

import argparse

EXIT_OK, EXIT_CRITICAL, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def add_scope_options(p: argparse.ArgumentParser) -> None:
    """Options that choose the files the diagnosis is about."""
    p.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                   help="leave out files matching PATTERN (repeatable; shell-style: "
                   "'*.log', '/scratch/tmp'); IOPILOT_EXCLUDE adds more (':' or ',' "
                   "separated)")
    p.add_argument("--include-only", action="append", default=[], metavar="PATTERN",
                   help="analyse only files matching PATTERN (repeatable)")
    p.add_argument("--no-default-excludes", action="store_true",
                   help="also analyse runtime and library files (.pyc, site-packages, "
                   "*.so, /etc, /usr/share, /tmp/ompi*, /proc, /sys, /dev)")  # fmt: skip


def add_output_options(p: argparse.ArgumentParser, json_what: str, html_what: str,
                       command: str) -> None:
    """``--json [PATH]`` and ``--html [PATH]``, the same in every command: PATH
    ``-`` is standard output (then the terminal text is left out); ``--json``
    alone writes to standard output, ``--html`` alone to iopilot-COMMAND.html."""
    add_json_option(p, json_what)
    p.add_argument("--html", nargs="?", const=f"iopilot-{command}.html", metavar="PATH",
                   help=f"write {html_what} to PATH ('-': standard output; default: "
                   f"iopilot-{command}.html)")


def add_json_option(p: argparse.ArgumentParser, what: str) -> None:
    """``--json [PATH]``: ``what`` as JSON to PATH, alone or ``-`` to standard output."""
    p.add_argument("--json", nargs="?", const="-", metavar="PATH",
                   help=f"write {what} as JSON to PATH (default: standard output)")


def to_stdout(args: argparse.Namespace) -> bool:
    """Whether an output of ``add_output_options`` (or --csv) goes to standard output."""
    return "-" in (getattr(args, "json", None), getattr(args, "html", None),
                   getattr(args, "csv", None))


def command_after(words: list[str]) -> list[str]:
    """The program's command line of ``-- COMMAND...`` (argparse keeps the ``--``)."""
    return words[1:] if words[:1] == ["--"] else list(words)


