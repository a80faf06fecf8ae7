"""Writing an output the user named: a file, or standard output for ``-``
(the ``--json [PATH]`` and ``--html [PATH]`` of every command)."""

from __future__ import annotations

import sys
from pathlib import Path

from .errors import InputError


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
