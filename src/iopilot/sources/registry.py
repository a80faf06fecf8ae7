"""The formats iopilot reads, each registered by its own module.

A format is one module of :mod:`iopilot.sources` that ends with
``register(Source(name, probe, load))``, as an IOR backend fills its table at
the bottom of its file:

* ``probe(path) -> bool`` says whether a path is in that format from its name
  and kind alone (the reader checks the bytes, and refuses what is not a
  regular file without opening it);
* ``load(path) -> Trace`` reads it, or raises :class:`~iopilot.errors.InputError`
  with a one-line reason (a format may be a known mistake, an iopilot file
  given instead of its trace, whose ``load`` only says what to pass instead).

One format is the ``fallback``: a file no probe claims is read by it, so a
renamed Darshan log still reads and any other file gets the Darshan reader's
precise reason.  The package imports every module it holds, so a new format
is one new file (and its test).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .._record import record
from ..model import Trace


@record(frozen=True)
class Source:
    """One format: how to recognise a path in it and how to read it."""

    name: str  # what it is, as a user calls it ("Darshan log")
    probe: Callable[[Path], bool]
    load: Callable[[str], Trace]
    fallback: bool = False  # reads every file no other format claims


SOURCES: list[Source] = []


def register(source: Source) -> Source:
    """Add a format (at the bottom of its module)."""
    if any(s.name == source.name for s in SOURCES):
        raise ValueError(f"a format named {source.name!r} is registered already")
    if source.fallback and any(s.fallback for s in SOURCES):
        raise ValueError(f"{source.name!r}: a fallback format is registered already")
    SOURCES.append(source)
    return source


def find(path: Path) -> Source | None:
    """The format of ``path``: the first whose probe claims it (the fallback's
    probe last), else the fallback for a file; None when nothing reads it."""
    for s in sorted(SOURCES, key=lambda s: s.fallback):
        if s.probe(path):
            return s
    if path.is_dir():
        return None
    return next((s for s in SOURCES if s.fallback), None)
