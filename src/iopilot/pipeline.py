"""The one path from a log to a diagnosis: load, keep the program's own
files (:class:`~iopilot.model.scope.FileScope`), check.  ``iopilot report``
and ``iopilot run`` both go through :func:`diagnose_path`."""

from __future__ import annotations

from typing import Any

from .checks import Diagnosis, diagnose
from .model.scope import FileScope
from .sources import load


def diagnose_path(path: str, thresholds: dict[str, Any], only: set[str] | None = None,
                  scope: FileScope | None = None) -> Diagnosis:  # fmt: skip
    """Load ``path``, set the runtime and library files aside, run the checks."""
    trace = load(path)
    return diagnose((scope or FileScope.build()).apply(trace), thresholds, only)
