"""Trace sources: a path in, a :class:`~iopilot.model.Trace` out.

Each source is one module with a ``probe(path) -> bool`` and a
``load(path) -> Trace``; :func:`load` asks them in turn.  Adding a source is
adding a module and one line in ``SOURCES``.
"""

from __future__ import annotations

import os
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
    if p.suffix in (".json", ".rec") and is_trace_dir(p.parent):
        raise InputError(path, "a file inside an iopilot trace, not a trace",
                         f"pass the trace directory: iopilot report {p.parent}")  # fmt: skip
    if p.suffix in (".json", ".rec"):
        what = "a JSON file" if p.suffix == ".json" else "an iopilot record file"
        raise InputError(path, f"{what}, not a trace or a Darshan log",
                         "pass an iopilot trace directory or a Darshan log")  # fmt: skip
    if p.suffix == ".gz":
        return read_gzipped(path)
    # Darshan logs are the only source for now; any other suffix is still
    # tried as a log, so a renamed log reads and a wrong file gets a precise reason.
    reader = SOURCES.get(p.suffix, read_darshan)
    return reader(path)


# A decompressed log larger than this is refused (a "zip bomb" in a pile of
# other people's files must not fill the disk); the largest real logs are
# well below.
GZ_LIMIT = 16 << 30


def _gz_limit() -> int:
    raw = os.environ.get("IOPILOT_GZ_LIMIT", "")
    return int(raw) if raw.isdigit() else GZ_LIMIT


def read_gzipped(path: str) -> Trace:
    """A gzip-compressed Darshan log, read through a temporary copy."""
    import gzip
    import tempfile
    import zlib

    from .checked import open_regular

    limit = _gz_limit()
    fd, _ = open_regular(Path(path), None)
    with os.fdopen(fd, "rb") as raw, tempfile.NamedTemporaryFile(suffix=".darshan") as tmp:
        try:
            with gzip.GzipFile(fileobj=raw) as gz:
                while chunk := gz.read(1 << 22):
                    tmp.write(chunk)
                    if tmp.tell() > limit:
                        raise InputError(path, f"decompresses to more than {limit:,} bytes",
                                         "set IOPILOT_GZ_LIMIT to read it")  # fmt: skip
        except (OSError, EOFError, zlib.error) as e:
            raise InputError(path, f"damaged gzip file ({e})") from None
        tmp.flush()
        try:
            trace = read_darshan(tmp.name)
        except InputError as e:
            raise InputError(path, f"{e.reason} (after decompressing)", e.hint) from None
    trace.source = path
    return trace


__all__ = ["is_trace_dir", "load"]
