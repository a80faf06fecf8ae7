"""Trace sources: a path in, a :class:`~iopilot.model.Trace` out.

Each source is one module with a ``probe(path) -> bool`` and a
``load(path) -> Trace``; :func:`load` asks them in turn.  Adding a source is
adding a module and one line in ``SOURCES``.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..model import Trace
from .darshan_log import read_darshan
from .iopilot_trace import is_trace_dir, read_trace

SOURCES = {".darshan": read_darshan}


def load(path: str) -> Trace:
    """Load any supported trace; raise InputError with a one-line reason otherwise."""
    p = Path(path)
    if p.is_dir():
        if is_trace_dir(p):
            return read_trace(path)
        raise InputError(path, "is a directory, not a trace")
    # Darshan logs are the only source for now; any other suffix is still
    # tried as a log, so a renamed log reads and a wrong file gets a precise reason.
    reader = SOURCES.get(p.suffix, read_darshan)
    return reader(path)


__all__ = ["is_trace_dir", "load"]
