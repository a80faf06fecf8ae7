"""The advisor's page: the slowest rank's run as traced and as predicted
with asynchronous I/O, drawn as two timelines on one time axis.

One self-contained HTML file with inline SVG: no script, no fonts, nothing
fetched from anywhere; each bar's tooltip gives its phase and seconds.
"""

from __future__ import annotations

from html import escape

from .advise import Advice

WIDTH, LANE, GAP, LEFT = 1100, 26, 10, 190
COLOURS = {"compute": "#9db4d3", "io": "#d9822b", "own": "#7a7a7a", "wait": "#d64545"}
LABELS = {("sync", ""): "without async: program",
          ("async", ""): "with async: program",
          ("thread", ""): "with async: I/O thread"}  # fmt: skip
KIND_WORDS = {"compute": "computation", "io": "I/O", "own": "its own part of the phase and "
              "the copies", "wait": "waiting for the I/O thread"}  # fmt: skip


def _svg(a: Advice) -> str:
    end = max([e for *_, e in a.lanes] + [a.sync_seconds, a.async_seconds, 1e-9])
    scale = (WIDTH - LEFT - 20) / end
    lanes = ("sync", "async", "thread")
    height = len(lanes) * (LANE + GAP) + 50
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           'font-family="sans-serif" font-size="12">']  # fmt: skip
    for i, lane in enumerate(lanes):
        y = 10 + i * (LANE + GAP)
        out.append(f'<text x="4" y="{y + LANE * 0.7:.1f}">{escape(LABELS[(lane, "")])}</text>')
        for ln, kind, phase, s, e in a.lanes:
            if ln != lane or e <= s:
                continue
            x, w = LEFT + s * scale, max((e - s) * scale, 0.5)
            tip = f"phase {phase}: {KIND_WORDS[kind]}, {e - s:.3f} s ({s:.3f}-{e:.3f} s)"
            out.append(f'<rect class="{kind}" x="{x:.2f}" y="{y}" width="{w:.2f}" '
                       f'height="{LANE}" fill="{COLOURS[kind]}"><title>{escape(tip)}</title>'
                       "</rect>")  # fmt: skip
    axis_y = 10 + len(lanes) * (LANE + GAP) + 5
    out.append(f'<line x1="{LEFT}" y1="{axis_y}" x2="{WIDTH - 20}" y2="{axis_y}" stroke="#333"/>')
    for k in range(6):
        t = end * k / 5
        x = LEFT + t * scale
        out.append(f'<line x1="{x:.1f}" y1="{axis_y}" x2="{x:.1f}" y2="{axis_y + 5}" '
                   f'stroke="#333"/><text x="{x:.1f}" y="{axis_y + 18}" text-anchor="middle">'
                   f"{t:.2f} s</text>")  # fmt: skip
    out.append("</svg>")
    return "\n".join(out)


def render_html(a: Advice) -> str:
    """The page for ``a``."""
    legend = " ".join(f'<span style="background:{c};padding:0 8px">&nbsp;</span> '
                      f"{escape(KIND_WORDS[k])}" for k, c in COLOURS.items())  # fmt: skip
    rows = "".join(f"<tr><td>{p.index}</td><td>{p.compute_before_seconds:.3f}</td>"
                   f"<td>{p.io_seconds:.3f}</td><td>{p.overhead_seconds:.4f}</td>"
                   f"<td>{p.stall_seconds:.3f}</td><td>{p.hidden_seconds:.3f}</td></tr>"
                   for p in a.phases)  # fmt: skip
    conflicts = ""
    if a.conflicts_total:
        items = "".join(f"<li>{escape(k.file)}: rank {k.first_rank} {k.first_op} then rank "
                        f"{k.second_rank} {k.second_op}, {k.bytes} bytes at {k.offset}</li>"
                        for k in a.conflicts)  # fmt: skip
        conflicts = (f"<h2>Unsafe to reorder ({a.conflicts_total})</h2><ul>{items}</ul>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>iopilot advise async: {escape(a.source)}</title>
<style>body{{font-family:sans-serif;margin:20px}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}</style></head>
<body>
<h1>Asynchronous I/O for {escape(a.source)}</h1>
<p id="verdict"><b>{escape(a.recommendation.upper())}</b>: {escape(a.reason)}</p>
<p>Predicted run of rank {a.slowest_rank}: {a.sync_seconds:.3f} s without async,
{a.async_seconds:.3f} s with it ({a.saved_seconds:+.3f} s saved).</p>
{_write_behind(a)}
{_svg(a)}
<p>{legend}</p>
<h2>Phases</h2>
<table><tr><th>phase</th><th>computation before (s)</th><th>I/O (s)</th>
<th>overhead (s)</th><th>wait (s)</th><th>hidden (s)</th></tr>{rows}</table>
{conflicts}
</body></html>
"""


def _write_behind(a: Advice) -> str:
    wb = a.write_behind
    if not wb or not a.phases:
        return ""
    return (f'<p id="write-behind">Write-behind (<code>iopilot run --async</code>, no change to '
            f"the program): {wb['strict_seconds']:.3f} s; it waits in "
            f"{wb['phases_waiting_strict']} of {len(a.phases)} phase(s), where the rank syncs or "
            f"closes a file it wrote. With <code>--async-relaxed</code>: "
            f"{wb['relaxed_seconds']:.3f} s.</p>")
