"""Trace sources: a path in, a :class:`~iopilot.model.Trace` out.

Each format is one module of this package that registers a
:class:`~iopilot.sources.registry.Source` at its bottom: ``probe(path) ->
bool`` and ``load(path) -> Trace``.  :func:`load` asks the registry which
format a path is in and reads it with that format's ``load``.  The package
imports every module it holds, so adding a format is adding one module (and
its test); :mod:`iopilot.sources.registry` says what the two functions must do.
"""

from __future__ import annotations

import pkgutil
from importlib import import_module
from pathlib import Path

from ..errors import InputError
from ..model import Trace
from .iopilot_trace import is_trace_dir
from .registry import SOURCES, Source, find

for _module in pkgutil.iter_modules(__path__):
    import_module(f"{__name__}.{_module.name}")


def load(path: str) -> Trace:
    """Load any supported trace; raise InputError with a one-line reason otherwise."""
    p = Path(path)
    source = find(p)
    if source is None:
        raise InputError(path, "is a directory, not a trace" if p.is_dir() else
                         "not in a format iopilot reads")  # fmt: skip
    return source.load(path)


__all__ = ["SOURCES", "Source", "is_trace_dir", "load"]
