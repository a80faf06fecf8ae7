"""The interactive HTML report: one self-contained page per diagnosis.

The page is a set of registered views (:mod:`iopilot.report.views`): each
view's data function computes what it shows, in Python, from one shared
:class:`~iopilot.report.views.PageContext`; each view's script only decodes
and draws.  This module assembles the page: the shared data, every view's
data under ``views[KEY]``, the core script (``html_page.js``) and every
registered view script in order.  Large numeric arrays travel as base64 of
little-endian typed arrays, and plotly.js is embedded inline, so the page
opens from ``file://`` with no network and no server.

What the page holds, whatever the size of the trace:

* every operation when there are at most ``SAMPLE_CAP``, else a sample
  of that many (said on the page), plus per-layer (rank × time) bins whose
  sums are exact;
* exact totals: size histograms, per-rank, per-file and per-OST tables.
"""

from __future__ import annotations

import html
import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from ..checks import Diagnosis
from ..model import RECORD_LAYERS, SIZE_BIN_UPPER, SIZE_BINS, display
from ..model.trace import safe_name
from ..vocabulary import FS_LAYERS, MODULE, OP_NAMES, SIZE_BIN_LABELS
from .json_report import diagnosis_dict
from .views import VIEWS, PageContext
from .views.common import LABELS, PHASE_ROWS
from .views.context import BIN_CELLS, FILES_LISTED, SAMPLE_CAP, TABLE_FILES

__all__ = ["LABELS", "SAMPLE_CAP", "page_data", "render_html", "write_html"]


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def render_html(diagnosis: Diagnosis, *, phase_gap: float | None = None) -> str:
    """The whole page as one string."""
    return _render(diagnosis, phase_gap)[0]


def write_html(diagnosis: Diagnosis, path: str | Path, *, phase_gap: float | None = None) -> dict:
    """Write the page to ``path``; return where, its size and how records were drawn."""
    page, doc = _render(diagnosis, phase_gap)
    data = page.encode("utf-8")
    Path(path).write_bytes(data)
    rec = doc["records"] or {}
    return {
        "path": str(path),
        "bytes": len(data),
        "records": int(rec.get("total", 0)),
        "records_drawn": int(rec.get("drawn", 0)),
        "sampled": bool(rec.get("sampled", False)),
    }


def page_data(diagnosis: Diagnosis, *, phase_gap: float | None = None) -> dict[str, Any]:
    """The document the page embeds (arrays already base64-packed)."""
    return _build(PageContext(diagnosis, phase_gap))


# ---------------------------------------------------------------------------
# Page assembly
# ---------------------------------------------------------------------------


def _render(d: Diagnosis, phase_gap: float | None) -> tuple[str, dict[str, Any]]:
    doc = page_data(d, phase_gap=phase_gap)
    title = html.escape(safe_name(f"iopilot — {Path(d.trace.source).name or d.trace.source}"))
    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
        f"<meta name=\"generator\" content=\"iopilot {html.escape(__version__)}\">\n",
        f"<title>{title}</title>\n<style>\n",
        _asset("html_page.css"),
        "</style>\n<script>\n",
        _plotly_js(),
        "\n</script>\n</head>\n<body>\n",
        "<div id=\"app\"><noscript>This report needs JavaScript.</noscript></div>\n",
        "<script id=\"iopilot-data\" type=\"application/json\">",
        _json(doc),
        "</script>\n<script>\n",
        _asset("html_page.js"),
        *(_view_script(v.script) for v in VIEWS),
        "IOP.start();\n",
        "</script>\n</body>\n</html>\n",
    ]
    return "".join(parts), doc


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(*name.split("/")).read_text(encoding="utf-8")


_PLOTLY: list[str] = []


def _plotly_js() -> str:
    if not _PLOTLY:  # 4.8 MB: read once per process
        from plotly.offline import get_plotlyjs  # lazy: 0.08 s to import, for a page only

        js = get_plotlyjs()
        # The bundle sits inside a <script> element: it must not close it.
        _PLOTLY.append(js.replace("</script", "<\\/script"))
    return _PLOTLY[0]


def _json(doc: dict[str, Any]) -> str:
    text = json.dumps(_finite(doc), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    # Inside <script>: no "<" may start a tag; these escapes are valid JSON.
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _finite(o: Any, key: str = "") -> Any:
    """Plain JSON data: NumPy scalars to Python, NaN/inf to null (JSON has neither)."""
    if isinstance(o, dict):
        return {_finite(str(k)): _finite(v, str(k)) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_finite(v) for v in o]
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, float | np.floating):
        f = float(o)
        return f if math.isfinite(f) else None
    if isinstance(o, np.ndarray):
        return _finite(o.tolist())
    if isinstance(o, str):  # names from a trace may hold any byte: shown escaped
        return safe_name(o, multiline=key == "snippet")
    return o




# The view that shows what a finding is about (the page links each finding to it).
_VIEW_OF_CHECK = {"overlapping-writes": "spatiality", "overlapping-reads": "spatiality",
                  "posix-random-reads": "spatiality", "posix-random-writes": "spatiality"}
_VIEW_OF_LAYER = {"PHASES": "phases", "RANKS": "fs", "LUSTRE": "fs"}


def _finding_view(check: str, layer: str, records: bool, phases: bool) -> str:
    """The page view of a finding: its own, else where the layer's numbers are."""
    view = _VIEW_OF_CHECK.get(check) or _VIEW_OF_LAYER.get(layer, "sizes")
    if view == "spatiality" and not records:
        return "fs"
    if view == "phases" and not phases:
        return "fs"
    return view



def _view_script(name: str) -> str:
    return _asset("views/" + name) + "\n"


def _build(ctx: PageContext) -> dict[str, Any]:
    d, t = ctx.d, ctx.t
    views = {}
    for v in VIEWS:
        out = v.data(ctx)
        if out is not None:
            views[v.key] = out
    doc = {
        "schema": "iopilot-html",
        "version": 1,
        "generator": f"iopilot {__version__}",
        "report": diagnosis_dict(d),
        "labels": LABELS,
        "record_layers": list(RECORD_LAYERS),
        "size_bins": list(SIZE_BINS),
        "size_upper": list(SIZE_BIN_UPPER),  # inclusive upper edges, one list for all
        "size_labels": list(SIZE_BIN_LABELS),
        "op_names": list(OP_NAMES),  # by operation code
        # what the file system sees (layer names, and as report.layers names them)
        "fs_layers": list(FS_LAYERS),
        "fs_display": [display(n) for n in FS_LAYERS],
        # layers drawn above the file-system calls they make
        "stacks": [[n, FS_LAYERS[0]] for n in RECORD_LAYERS if MODULE[n].level > 1],
        "nranks": ctx.nranks,
        "runtime": float(t.job.runtime),
        "files": ctx.files_doc,
        # call sites the page names (the filter's list), most seconds first
        "sites": ctx.sites_doc,
        "records": ctx.records,
        # every registered view in page order; those with data are offered
        "view_list": [{"key": v.key, "title": v.title, "offered": v.key in views,
                       "needs": v.needs} for v in VIEWS],
        "views": views,
        "caps": {"sample": SAMPLE_CAP, "bin_cells": BIN_CELLS, "files": FILES_LISTED,
                 "table_files": TABLE_FILES, "phase_rows": PHASE_ROWS},
        "thresholds": {
            "straggler_ratio": float(d.thresholds.get("straggler_ratio", 1.5)),
            "straggler_min_time": float(d.thresholds.get("straggler_min_time", 0.0)),
        },
        "notes": ctx.notes,
    }
    doc["finding_sites"] = ctx.finding_sites()  # per finding, its sites in "sites"
    doc["finding_views"] = [_finding_view(f.check, f.layer, "spatiality" in views,
                                          "phases" in views)
                            for f in d.findings]  # fmt: skip
    return doc
