"""What several subcommands share: exit statuses, the file-scope options,
writing an output to a file or standard output."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError

if TYPE_CHECKING:
    from ..model.scope import FileScope

EXIT_OK, EXIT_CRITICAL, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def file_scope(args: argparse.Namespace) -> FileScope:
    """The files to analyse, from --exclude, --include-only, --no-default-excludes
    and IOPILOT_EXCLUDE."""
    from ..model.scope import scope_args

    return scope_args(args.exclude, args.include_only, args.no_default_excludes)


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


def emit(target: str, text: str) -> None:
    """``text`` to ``target``: a file, or standard output for ``-``."""
    if target == "-":
        sys.stdout.write(text)
        return
    try:
        Path(target).write_text(text)
    except OSError as e:
        raise InputError(target, f"cannot write: {e.strerror}") from None
    print(f"iopilot: wrote {target}", file=sys.stderr)
