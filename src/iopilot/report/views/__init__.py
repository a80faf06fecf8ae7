"""The views of the HTML report, registered in page order.

A view is a pair: a data function (Python, run once per page) and a view
script (JavaScript, inlined in the page).  The data function receives the one
shared :class:`PageContext` and returns a JSON-able dict, or None when the
view has nothing to show for this input (the page then does not offer it).
The script registers ``IOP.views[KEY] = { draw(sec, data, ui) {...} }``.

Adding a view: a module here with ``data(ctx)``, a script next to it, and one
line in :data:`VIEWS` (see docs/html-report.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..._record import record
from . import apmpi, background, fs, heatmap, phases, sizes, spatiality, summary, timeline
from .context import PageContext


@record(frozen=True)
class View:
    key: str  # its name in the URL hash: #view=KEY&finding=N
    title: str  # its tab
    data: Callable[[PageContext], dict[str, Any] | None]
    script: str  # the .js file in this package that draws it
    needs: str = "a per-operation trace"  # what the source lacks when data() gives None


VIEWS: list[View] = [
    View("summary", "Summary", summary.data, "summary.js"),
    View("timeline", "Timeline", timeline.data, "timeline.js"),
    View("sizes", "Request sizes", sizes.data, "sizes.js"),
    View("spatiality", "Spatiality", spatiality.data, "spatiality.js"),
    View("phases", "Phases & stragglers", phases.data, "phases.js"),
    View("fs", "File system, files & ranks", fs.data, "fs.js"),
    View("heatmap", "Heatmap", heatmap.data, "heatmap.js", needs="Darshan's HEATMAP module"),
    View("apmpi", "MPI time", apmpi.data, "apmpi.js", needs="AutoPerf's APMPI module"),
    View("background", "Background I/O", background.data, "background.js",
         needs="write-behind (iopilot run --async)"),
]

__all__ = ["VIEWS", "PageContext", "View"]
