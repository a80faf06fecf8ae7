"""Gzip-compressed Darshan logs (``*.darshan.gz``), read through a temporary copy."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError
from ..model import Trace
from .checked import open_regular
from .darshan_log import read_darshan
from .registry import Source, register

# A decompressed log larger than this is refused (a "zip bomb" in a pile of
# other people's files must not fill the disk); the largest real logs are
# well below.
GZ_LIMIT = 16 << 30


def _gz_limit() -> int:
    raw = os.environ.get("IOPILOT_GZ_LIMIT", "")
    return int(raw) if raw.isdigit() else GZ_LIMIT


def read_gzipped(path: str) -> Trace:
    """A gzip-compressed Darshan log, read through a temporary copy."""
    # Here, not at the top: tempfile brings shutil and random into every
    # report, and few logs are gzipped.
    import gzip
    import tempfile
    import zlib

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


register(Source("gzip-compressed Darshan log", lambda p: p.suffix == ".gz", read_gzipped))
