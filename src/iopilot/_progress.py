"""A live progress line on standard error, for work over many items: the logs
of a fleet summary, the trials of a tuning study.

On a terminal: a bar with the count, the pace, the time left and a note (the
best trial so far), redrawn at most five times a second, with the lines the
caller gives printed above it.  Elsewhere (a file, a pipe, a batch job's
output): only those lines, each with the note, so a log file gets a line per
item and no carriage returns.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

_WIDTH = 30  # characters of the bar
_REDRAW = 0.2  # seconds between redraws of the bar


class Progress:
    """Progress of ``total`` items (``unit``: "logs", "trials")."""

    def __init__(self, total: int, unit: str = "logs", stream: TextIO | None = None) -> None:
        self.total, self.unit, self.done = total, unit, 0
        self.stream = stream or sys.stderr
        self.on = self.stream.isatty() and total > 1  # a bar for one item is noise
        self.t0 = self.last = time.monotonic()
        self.note = ""
        self.drawn = False  # a bar is on the screen without its newline

    def step(self, n: int = 1, line: str | None = None, note: str | None = None) -> None:
        """``n`` more items done; ``line`` says what the last one did."""
        self.update(self.done + n, line, note)

    def update(self, done: int, line: str | None = None, note: str | None = None) -> None:
        """``done`` items done in all; ``note`` replaces the note when given."""
        self.done = done
        if note is not None:
            self.note = note
        if not self.on:
            if line is not None:
                self.stream.write(f"{line}; {self.note}\n" if self.note else f"{line}\n")
                self.stream.flush()
            return
        now = time.monotonic()
        if line is None and now - self.last < _REDRAW and done < self.total:
            return
        self.last = now
        if line is not None:
            self.stream.write(f"\r{line}\033[K\n")
        rate = done / max(now - self.t0, 1e-9)
        pace = f"{rate:.0f}/s" if rate >= 1 else f"{1 / rate:.0f} s each" if rate > 0 else ""
        eta = (self.total - done) / rate if rate > 0 else float("inf")
        fill = _WIDTH * min(done, self.total) // max(self.total, 1)
        bar = (f"\r[{'#' * fill}{'.' * (_WIDTH - fill)}] {done:,}/{self.total:,} {self.unit}"
               f"  {pace}  ETA {eta:.0f} s")  # fmt: skip
        self.stream.write(f"{bar}  {self.note}\033[K" if self.note else f"{bar}\033[K")
        self.drawn = done < self.total
        if not self.drawn:
            self.stream.write("\n")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line if the items stopped before the total."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False
