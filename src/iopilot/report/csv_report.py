"""A flat CSV table of findings: one row per finding, for spreadsheets and scripts."""

from __future__ import annotations

import csv
import io
from typing import Any

from ..model.trace import safe_name

COLUMNS = ("source", "check", "drishti", "layer", "level", "message", "files_total",
           "top_file", "recommendation", "cost_seconds")  # fmt: skip


def render(reports: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    wr = csv.writer(out, lineterminator="\n")
    wr.writerow(COLUMNS)
    for r in reports:
        # Incomplete data, and how the program and its processes ended, must
        # show in every output, the flat table included.
        procs = r.get("processes") or {}
        notes = [("WARN", r["job"].get("status")), ("INFO", procs.get("summary"))]
        notes += [("WARN", w) for w in r["warnings"]] + [("INFO", procs.get("not_seen"))]
        for level, text in notes:
            if text:
                wr.writerow(_safe([r["source"], "incomplete-data", "", "DATA", level, text, 0,
                                   "", "", ""]))  # fmt: skip
        for f in r["findings"]:
            wr.writerow(
                _safe([
                    r["source"],
                    f["check"],
                    f["drishti"] or "",
                    f["layer"],
                    f["level"],
                    f["message"],
                    f["files_total"],
                    f["files"][0]["path"] if f["files"] else "",
                    f["recommendation"] or "",
                    "" if f["cost_seconds"] is None else f["cost_seconds"],
                ])
            )  # fmt: skip
    return out.getvalue()


def _safe(row: list[Any]) -> list[Any]:
    """Cells without control characters or undecodable bytes (see safe_name)."""
    return [safe_name(c) if isinstance(c, str) else c for c in row]
