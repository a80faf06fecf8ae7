"""Errors a user can act on: they carry the file and the reason, never a traceback."""

from __future__ import annotations


class InputError(Exception):
    """An input file iopilot cannot read; ``str()`` is the one-line message."""

    def __init__(self, path: str, reason: str, hint: str = "") -> None:
        self.path, self.reason, self.hint = path, reason, hint
        msg = f"{path}: {reason}"
        if hint:
            msg += f" ({hint})"
        super().__init__(msg)
