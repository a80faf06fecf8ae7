"""A flat CSV table of findings: one row per finding, for spreadsheets and scripts."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from ..model.trace import safe_name

COLUMNS = ("source", "check", "drishti", "layer", "level", "message", "files_total",
           "top_file", "recommendation", "cost_seconds", "top_site")  # fmt: skip


def render(reports: list[dict[str, Any]], errors: Sequence[dict[str, str]] = ()) -> str:
    """The table; each log that could not be read is one ``read-error`` row."""
    out = io.StringIO()
    wr = csv.writer(out, lineterminator="\n")
    wr.writerow(COLUMNS)
    for e in errors:
        wr.writerow(_safe([e["path"], "read-error", "", "DATA", "ERROR", e["reason"], 0, "", "",
                           "", ""]))  # fmt: skip
    for r in reports:
        # Incomplete data, a program that failed and processes that did not
        # end normally must show in every output, the flat table included;
        # notes that hold for every trace ("not seen by the runtime", how
        # many processes ended well) are not rows: rows are findings.
        procs = r.get("processes") or {}
        notes = [("WARN", r["job"].get("status"))]
        if procs.get("ended_abnormally"):
            notes.append(("WARN", procs.get("summary")))
        notes += [("WARN", w) for w in r["warnings"]]
        for level, text in notes:
            if text:
                wr.writerow(_safe([r["source"], "incomplete-data", "", "DATA", level, text, 0,
                                   "", "", "", ""]))  # fmt: skip
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
                    top_site(f),
                ])
            )  # fmt: skip
    return out.getvalue()


def top_site(f: dict[str, Any]) -> str:
    """The finding's first call site as ``file:line`` (its label without a
    line: ``prog+0x1234``), or "" when it names none."""
    for loc in f.get("locations") or []:
        if loc["kind"] == "source":
            return f"{loc['file']}:{loc['line']}" if loc["file"] and loc["line"] else loc["label"]
    return ""


# A spreadsheet runs a cell that starts with one of these as a formula
# (=HYPERLINK(...), +cmd|...), and file names come from other people's jobs.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _safe(row: list[Any]) -> list[Any]:
    """Cells without control characters or undecodable bytes (see safe_name),
    and never read as a formula: such text gets a leading apostrophe, which
    spreadsheets show as text (OWASP's advice for CSV injection)."""
    return [_cell(c) if isinstance(c, str) else c for c in row]


def _cell(text: str) -> str:
    # Checked before escaping: a leading tab or CR is what the spreadsheet sees.
    if text.startswith(_FORMULA_START):
        return "'" + safe_name(text)
    return safe_name(text)
