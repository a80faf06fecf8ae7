"""A flat CSV table of findings: one row per finding, for spreadsheets and scripts."""

from __future__ import annotations

import csv
import io
from typing import Any

COLUMNS = ("source", "check", "drishti", "layer", "level", "message", "files_total",
           "top_file", "recommendation")  # fmt: skip


def render(reports: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    wr = csv.writer(out, lineterminator="\n")
    wr.writerow(COLUMNS)
    for r in reports:
        # Incomplete data must show in every output, the flat table included.
        for w in r["warnings"]:
            wr.writerow([r["source"], "incomplete-data", "", "DATA", "WARN", w, 0, "", ""])
        for f in r["findings"]:
            wr.writerow(
                [
                    r["source"],
                    f["check"],
                    f["drishti"] or "",
                    f["layer"],
                    f["level"],
                    f["message"],
                    f["files_total"],
                    f["files"][0]["path"] if f["files"] else "",
                    f["recommendation"] or "",
                ]
            )
    return out.getvalue()
