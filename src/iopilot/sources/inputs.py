"""What ``iopilot report`` is pointed at -> the list of logs and traces.

Centre staff run it over piles of other people's logs: directories are
searched recursively (an iopilot trace directory counts as one log),
``@list.txt`` names a manifest of paths, ``.darshan.gz`` logs are read
through a temporary copy, and iopilot's own output files get a pointer to
what to pass instead.  Only regular files are read: a FIFO, socket or
device found here stays in the list and the reader refuses it without
opening it, so it is one error row and the others are reported.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import InputError
from .checked import open_regular
from .iopilot_trace import is_trace_dir

LOG_SUFFIXES = (".darshan", ".darshan.gz")


def is_log_name(name: str) -> bool:
    return name.endswith(LOG_SUFFIXES)


def expand_inputs(items: Sequence[str]) -> list[str]:
    """Files as given; trace directories as given; other directories become
    the Darshan logs and trace directories anywhere below them; ``@FILE``
    becomes the paths FILE lists (one a line, ``#`` comments, relative to
    FILE's directory)."""
    out: list[str] = []
    for item in items:
        if item.startswith("@") and len(item) > 1:
            # Entries of a list are paths, never further lists: no loops.
            for entry in _manifest(item[1:]):
                out.extend(_expand_path(entry))
        else:
            out.extend(_expand_path(item))
    return out


def _expand_path(item: str) -> list[str]:
    p = Path(item)
    if not p.is_dir() or is_trace_dir(p):
        return [item]
    found = _walk(p)
    if not found:
        raise InputError(item, "directory holds no Darshan logs (*.darshan, *.darshan.gz) "
                         "and no iopilot trace directories",
                         "pass a trace directory or Darshan logs")  # fmt: skip
    return found


def _walk(top: Path) -> list[str]:
    found: list[str] = []
    # Links are not followed: a link loop in someone's job directory must not hang.
    for root, dirs, files in os.walk(top, onerror=None, followlinks=False):
        keep = []
        for d in sorted(dirs):
            sub = Path(root) / d
            if is_trace_dir(sub):
                found.append(str(sub))
            else:
                keep.append(d)
        dirs[:] = keep
        found.extend(str(Path(root) / f) for f in files if is_log_name(f))
    return sorted(found)


def _manifest(name: str) -> list[str]:
    p = Path(name)
    try:  # a regular file only: a FIFO would wait for a writer forever
        fd, _ = open_regular(name, None, follow_links=True)
        with os.fdopen(fd, "rb") as f:
            text = f.read().decode("utf-8", "surrogateescape")
    except InputError as e:
        why = e.reason.removeprefix("cannot read: ")
        raise InputError(name, f"cannot read the list of logs: {why}") from None
    except OSError as e:
        raise InputError(name, f"cannot read the list of logs: {e.strerror}") from None
    base = p.parent
    paths = []
    for line in text.splitlines():
        entry = line.strip()
        if entry and not entry.startswith("#"):
            paths.append(str(base / entry) if not os.path.isabs(entry) else entry)
    if not paths:
        raise InputError(name, "the list of logs names no path")
    return paths
