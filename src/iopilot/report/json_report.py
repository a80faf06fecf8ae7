"""The JSON report: a stable, versioned document for other tools.

The schema is described in ``docs/json-report.md``; ``SCHEMA_VERSION`` changes
only when a field is removed or changes meaning (new fields may be added).
"""

from __future__ import annotations

import json
import signal
from typing import Any

import numpy as np

from .. import __version__
from ..checks import Diagnosis, Level
from ..checks.base import location_dict
from ..model.background import background_summary
from .nodes import clock_summary, nodes_summary
from .profiles import heatmap_summary, mpi_summary

SCHEMA = "iopilot-report"
SCHEMA_VERSION = 1


def diagnosis_dict(d: Diagnosis) -> dict[str, Any]:
    """One log's report as plain data."""
    t = d.trace
    job = t.job
    return {
        "source": t.source,
        "job": {
            "executable": job.executable,
            "nprocs": job.nprocs,
            "rank_source": job.rank_source or None,
            "jobid": job.jobid,
            "start": job.start,
            "end": job.end,
            "runtime": job.runtime,
            "format": job.format,
            "writer": job.writer,
            "hints": job.hints,
            "mounts": [{"path": p, "type": k} for p, k in job.mounts],
            "hosts": len(set(job.hosts.values())) or None,
            "nodes": nodes_summary(t),
            "clock": clock_summary(t),
            "exit_status": job.exit_status,
            "signal": job.signal,
            "status": program_status(job.exit_status, job.signal),
            "language": job.language or None,
            "static_layers": dict(job.static_layers),
        },
        "processes": t.processes,
        "settings": t.settings,
        "write_behind": t.write_behind,
        "background_io": background_summary(t),
        "modules": [
            {"name": m.name, "partial": m.partial, "rows": m.rows, "used": m.read}
            for m in t.modules
        ],
        "partial": t.partial or bool(d.warnings),
        "warnings": d.warnings,
        "io_time": d.io_time.as_dict(),
        "layers": [vars(s) for s in d.layers],
        "set_aside": t.set_aside,
        "records": len(t.records),
        "heatmap": heatmap_summary(t),
        "mpi": mpi_summary(t),
        "counts": {lvl.name: d.count(lvl) for lvl in sorted(Level, reverse=True)},
        "findings": [
            {
                "check": f.check,
                "layer": f.layer,
                "level": f.level.name,
                "cost_seconds": f.cost_seconds,
                "drishti": f.drishti,
                "drishti_note": f.drishti_note or None,
                "message": f.message,
                "evidence": f.evidence,
                "files": [{"path": e.path, **e.numbers} for e in f.files],
                "files_total": f.files_total,
                "recommendation": f.recommendation or None,
                "snippet": f.snippet or None,
                "snippet_lang": f.snippet_lang or None,
                "thresholds": f.thresholds,
                "locations": [location_dict(loc) for loc in f.locations],
            }
            for f in d.findings
        ],
        "thresholds_fired": d.fired_thresholds,
    }


def program_status(status: int | None, sig: int | None) -> str | None:
    """"program killed by SIGTERM", "program failed: exit status 3", or None
    when the program exited with 0 or its status is unknown."""
    if sig:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"program killed by {name}"
    if not status:
        return None
    text = f"program failed: exit status {status}"
    if 128 < status < 128 + 65:
        try:  # how shells report a child killed by a signal
            text += f" (128+{status - 128}: killed by {signal.Signals(status - 128).name}?)"
        except ValueError:
            pass
    return text


def document(reports: list[dict[str, Any]], errors: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "generator": f"iopilot {__version__}",
        "reports": reports,
        "errors": errors,
    }


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, default=_default) + "\n"


def _default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    raise TypeError(f"cannot serialise {type(o).__name__}")
