"""Native call sites -> source file, line and function, from the binaries
(at report time: the runtime records module and offset only)."""

from __future__ import annotations

import os


class Symbolizer:
    """Collects (module, build-id, offset) triples, then looks them up."""

    def __init__(self) -> None:
        self.wanted: dict[tuple[str, str], set[int]] = {}
        self.found: dict[tuple[str, str, int], tuple[str, int, str, str]] = {}

    def want(self, path: str, build_id: str, offset: int) -> None:
        self.wanted.setdefault((path, build_id), set()).add(offset)

    def resolve(self) -> None:
        """Look up every wanted offset."""

    def get(self, path: str, build_id: str, offset: int) -> tuple[str, int, str, str]:
        """(file, line, function, note) of one offset."""
        return self.found.get((path, build_id, offset), ("", 0, "", ""))

    def label(self, path: str, build_id: str, offset: int) -> str:
        file, line, function, _ = self.get(path, build_id, offset)
        if file and line:
            return f"{os.path.basename(file)}:{line} {function}".rstrip()
        place = f"{os.path.basename(path)}+{offset:#x}"
        return f"{function} ({place})" if function else place
