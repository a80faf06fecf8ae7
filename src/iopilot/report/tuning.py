"""The HTML pages of ``iopilot tune --html`` and ``iopilot optimize``.

Both are built from the commands' JSON documents alone (plain data, no
trace), so a page can be made again from a saved JSON file.  Like the
report's page they are self-contained: plotly.js is embedded and the data
travels in the page.  The convergence plot is interactive: the best median
so far against the trial, every trial's median as a point (hover: its
settings), failed trials as crosses.
"""

from __future__ import annotations

import html
import statistics
from typing import Any

from .. import __version__
from .html import _json, _plotly_js

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1100px;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ddd;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.gone{color:#2a7d2a}.remain{color:#a15c00}.new{color:#b22}.muted{color:#777}
.big{font-size:1.3em;font-weight:600}
"""

_SCRIPT = """
(function(){
  var d = JSON.parse(document.getElementById('conv-data').textContent);
  var traces = [
    {x: d.best_x, y: d.best_y, mode: 'lines', line: {shape: 'hv', color: '#1f77b4'},
     name: 'best so far (median)'},
    {x: d.x, y: d.y, mode: 'markers', marker: {color: '#7f7f7f', size: 8},
     name: 'trial median', text: d.text, hovertemplate: 'trial %{x}: %{y:.4g} ' + d.unit +
     '<br>%{text}<extra></extra>'}
  ];
  if (d.failed_x.length) {
    traces.push({x: d.failed_x, y: d.failed_y, mode: 'markers',
      marker: {symbol: 'x', color: '#d62728', size: 10}, name: 'failed',
      text: d.failed_text, hovertemplate: 'trial %{x} failed<br>%{text}<extra></extra>'});
  }
  Plotly.newPlot('convergence', traces, {
    title: 'Convergence', xaxis: {title: 'trial', dtick: 1},
    yaxis: {title: d.unit, rangemode: 'tozero'}, margin: {t: 40},
    legend: {orientation: 'h'}}, {displaylogo: false, responsive: true});
})();
"""


def _label(point: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in point.items()) or "(default)"


def convergence(tune: dict[str, Any]) -> dict[str, Any]:
    """What the convergence plot draws, from a tune JSON document: trials are
    numbered from 1 in the order they ran; a trial counts towards the best
    only with as many runs as the default (the study's rule)."""
    maximize = tune.get("direction") == "maximize"
    trials = tune.get("trials", [])
    default_runs = next((len(t["runs"]) for t in trials if t.get("phase") == "default"), 1)
    out: dict[str, Any] = {"unit": tune.get("unit", ""), "x": [], "y": [], "text": [],
                           "best_x": [], "best_y": [], "failed_x": [], "failed_y": [],
                           "failed_text": []}  # fmt: skip
    best: float | None = None
    for i, t in enumerate(trials, 1):
        if t.get("status") == "ok" and t.get("runs"):
            v = statistics.median(t["runs"])
            out["x"].append(i)
            out["y"].append(v)
            out["text"].append(html.escape(_label(t.get("point") or {})))
            if len(t["runs"]) >= default_runs and (
                    best is None or (v > best if maximize else v < best)):
                best = v
        else:
            out["failed_x"].append(i)
            out["failed_text"].append(html.escape(f"{_label(t.get('point') or {})}: "
                                                  f"{t.get('reason', '')}"))
        if best is not None:
            out["best_x"].append(i)
            out["best_y"].append(best)
    top = max(out["y"], default=1.0)
    out["failed_y"] = [top] * len(out["failed_x"])  # drawn at the top: they have no value
    return out


def _fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return html.escape(str(v))


def _page(title: str, body: list[str], tune: dict[str, Any]) -> str:
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        f"<meta name=\"generator\" content=\"iopilot {html.escape(__version__)}\">\n",
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n<script>\n",
        _plotly_js(),
        "\n</script>\n</head>\n<body>\n",
        f"<h1>{html.escape(title)}</h1>\n",
        *body,
        "<h2>Tuning convergence</h2>\n<div id=\"convergence\" style=\"height:420px\"></div>\n",
        "<script id=\"conv-data\" type=\"application/json\">",
        _json(convergence(tune)),
        "</script>\n<script>",
        _SCRIPT,
        "</script>\n</body>\n</html>\n",
    ])  # fmt: skip


def _tune_summary(tune: dict[str, Any]) -> list[str]:
    unit = html.escape(tune.get("unit", ""))
    d, b = tune["default"], tune["best"]
    sp = tune.get("speedup")
    rows = [("command", html.escape(" ".join(tune.get("command", [])))),
            ("objective", html.escape(f"{tune.get('objective')} ({tune.get('direction')})")),
            ("strategy", html.escape(f"{tune.get('strategy')}, seed {tune.get('seed')}")),
            ("trials", f"{len(tune.get('trials', []))} ({html.escape(str(tune.get('stopped')))})"),
            ("noise", f"{100 * float(tune.get('noise') or 0):.1f} % (the default's spread)"),
            ("default", f"{_fmt(d['objective'])} {unit}"),
            ("best", f"{_fmt(b['objective'])} {unit}: {html.escape(_label(_flat(b)))}"),
            ("verdict", html.escape(str(tune.get("verdict")))),
            ("speedup", f"{sp:.2f}x" if sp else "-")]  # fmt: skip
    return ["<table>\n", *(f"<tr><th>{k}</th><td>{v}</td></tr>\n" for k, v in rows),
            "</table>\n"]


def _flat(point: dict[str, Any]) -> dict[str, Any]:
    """A trial's settings document as ``table.key = value`` pairs."""
    out: dict[str, Any] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}.{k}" if path else str(k))
        else:
            out[path] = node

    walk(point.get("settings") or {}, "")
    return out


def render_tune_page(tune: dict[str, Any]) -> str:
    """The page of ``iopilot tune --html``."""
    return _page("iopilot tune", _tune_summary(tune), tune)


def render_optimize_page(doc: dict[str, Any]) -> str:
    """The page of ``iopilot optimize``: the before and after reports' key
    figures side by side, what changed, the findings, and the convergence."""
    before, after = doc["before"], doc["after"]
    sp = doc.get("speedup")
    body = [f"<p class=\"big\">Slowest-rank I/O {_fmt(before['io_time'])} s &rarr; "
            f"{_fmt(after['io_time'])} s" + (f" ({sp:.2f}x)" if sp else "") + "</p>\n",
            f"<p class=\"muted\">{html.escape(' '.join(doc.get('command', [])))}</p>\n",
            "<h2>Key figures</h2>\n<table>\n<tr><th></th><th>before (default)</th>"
            "<th>after (best settings)</th></tr>\n"]  # fmt: skip
    for key, what in (("io_time", "slowest rank's I/O (s)"), ("run_seconds", "run (s)"),
                      ("share", "I/O share of the run"), ("nprocs", "processes"),
                      ("findings_count", "findings (WARN and above)"),
                      ("findings_cost", "seconds at stake in the findings")):  # fmt: skip
        def cell(side: dict[str, Any], key: str = key) -> str:
            v = side.get(key)
            if key == "share" and v is not None:
                return f"{100 * v:.1f} %"
            return _fmt(v)

        body.append(f"<tr><th>{what}</th><td class=\"num\">{cell(before)}</td>"
                    f"<td class=\"num\">{cell(after)}</td></tr>\n")
    body.append("</table>\n<h2>What changed</h2>\n")
    if doc.get("changes"):
        body.append("<table>\n<tr><th>setting</th><th>value</th><th>outcome in the after "
                    "run</th></tr>\n")
        for c in doc["changes"]:
            body.append(f"<tr><td>{html.escape(c['setting'])}</td><td>{_fmt(c['value'])}</td>"
                        f"<td>{html.escape(c['outcome'])}</td></tr>\n")
        body.append("</table>\n")
    else:
        body.append("<p>Nothing: no setting beat the default beyond the noise.</p>\n")
    body.append("<h2>Findings</h2>\n<table>\n<tr><th>check</th><th>layer</th><th>level</th>"
                "<th>cost before (s)</th><th>cost after (s)</th><th></th></tr>\n")
    for f in doc.get("findings_diff", []):
        body.append(f"<tr class=\"{f['state']}\"><td>{html.escape(f['check'])}</td>"
                    f"<td>{html.escape(str(f['layer']))}</td>"
                    f"<td>{html.escape(str(f['level']))}</td>"
                    f"<td class=\"num\">{_fmt(f['cost_before'], 3)}</td>"
                    f"<td class=\"num\">{_fmt(f['cost_after'], 3)}</td>"
                    f"<td>{html.escape(f['state'])}</td></tr>\n")
    body.append("</table>\n<h2>Tuning</h2>\n")
    body += _tune_summary(doc["tuning"])
    return _page("iopilot optimize", body, doc["tuning"])
