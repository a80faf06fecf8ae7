"""The call sites of a trace: where in the program's own code its I/O calls
were made, one row per distinct site over all processes.

A record's ``site`` column is a row of this table; row 0 is "unknown" (a
record written before the runtime knew its site, a process killed before
its summary, a version 2 trace).  Two ranks' calls from the same line are
one row: a native site is (module path, offset), a Python site (file, line,
function), and two native sites on the same source line of one module are
one row too (``offset`` is then the first's).  ``count``, ``bytes`` and
``time`` are the runtime's exact sums of the operations made from the site
(records may be fewer: the record limit), summed over processes.
"""

from __future__ import annotations

import os

import numpy as np

from .._record import record


@record
class Sites:
    """Distinct call sites of a trace, one row each; row 0 is "unknown"."""

    file: np.ndarray  # object (str): source file, "" when unknown (no debug info / no binary)
    line: np.ndarray  # int32, 0 when unknown
    function: np.ndarray  # object (str): function name, "" when unknown
    module: np.ndarray  # object (str): executable / library path, "" for Python sites
    # the return address's offset in the module (its address when the module
    # is unknown; -1 for Python sites)
    offset: np.ndarray  # int64
    lang: np.ndarray  # object (str): "python" | "native" | "" (unknown)
    note: np.ndarray  # object (str): why the site is degraded, "" when it is not
    count: np.ndarray  # int64 calls
    bytes: np.ndarray  # int64 bytes moved by data operations
    time: np.ndarray  # float64 seconds inside the calls
    # no frame of the program was found: the row is the innermost frame in a
    # library (the I/O library's own function)
    library: np.ndarray | None = None  # bool
    # the callers of the site, innermost first ("main.c:88 main"), "" when unknown
    caller: np.ndarray | None = None  # object (str)

    def __post_init__(self) -> None:
        n = len(self.file)
        if self.library is None:
            self.library = np.zeros(n, bool)
        if self.caller is None:
            self.caller = np.full(n, "", object)

    def __len__(self) -> int:
        return int(self.file.shape[0])

    def label(self, i: int) -> str:
        """The site as a reader names it: ``analysis.py:42 save_rows``,
        ``main.c:17 write_rows``, ``write_rows (prog+0x1234)`` without
        debug information, ``H5FD__sec2_write in libhdf5.so`` for a site in
        a library, ``prog+0x1234`` when nothing better is known."""
        i = int(i)
        if not self.lang[i]:
            return "unknown call site"
        file, line, function = self.file[i], int(self.line[i]), self.function[i]
        module = os.path.basename(self.module[i])
        if self.library[i] and function:
            return f"{function} in {module}"
        if file and line:
            where = f"{os.path.basename(file)}:{line}"
            return f"{where} {function}" if function else where
        offset = int(self.offset[i]) & 0xFFFF_FFFF_FFFF_FFFF
        place = f"{module}+{offset:#x}" if module else f"{offset:#x}"
        return f"{function} ({place})" if function else place

    @staticmethod
    def unknown() -> Sites:
        """A table of row 0 alone."""
        return Sites.of([("", 0, "", "", -1, "", "", 0, 0, 0.0, False, "")])

    @staticmethod
    def of(rows: list[tuple]) -> Sites:
        """A table from rows (file, line, function, module, offset, lang,
        note, count, bytes, time, library, caller)."""
        cols = list(zip(*rows, strict=True)) if rows else [()] * 12
        text = [np.array(c, object) if len(c) else np.zeros(0, object) for c in cols]
        return Sites(
            file=text[0],
            line=np.array(cols[1], np.int32),
            function=text[2],
            module=text[3],
            offset=np.array(cols[4], np.int64),
            lang=text[5],
            note=text[6],
            count=np.array(cols[7], np.int64),
            bytes=np.array(cols[8], np.int64),
            time=np.array(cols[9], np.float64),
            library=np.array(cols[10], bool),
            caller=text[11],
        )
