"""The live progress line of fleet summaries and tuning studies (src/iopilot/_progress.py)."""

from __future__ import annotations

import io

from iopilot._progress import Progress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal():
    out = Tty()
    p = Progress(3, "logs", out)
    for _ in range(3):
        p.step()
    assert "3/3 logs" in out.getvalue() and "ETA" in out.getvalue()
    assert out.getvalue().endswith("\n")  # the finished bar keeps its line
    quiet = io.StringIO()
    p = Progress(3, "logs", quiet)
    p.step(3)
    assert quiet.getvalue() == ""


def test_lines_go_above_the_bar_on_a_terminal_and_alone_elsewhere():
    out = Tty()
    p = Progress(4, "trials", out)
    p.update(1, line="[1/4] (default): 2 s", note="best 2 s")
    p.close()  # stopped before the total: the bar's line still ends
    text = out.getvalue()
    assert text.index("[1/4] (default): 2 s") < text.index("1/4 trials") < text.index("best 2 s")
    assert text.endswith("\n")
    plain = io.StringIO()
    p = Progress(4, "trials", plain)
    p.update(1, line="[1/4] (default): 2 s", note="best 2 s")
    p.update(2, line="[2/4] x=1: 3 s")  # the note stays until replaced
    p.close()
    assert plain.getvalue() == "[1/4] (default): 2 s; best 2 s\n[2/4] x=1: 3 s; best 2 s\n"
