"""The diagnosis engine: checks, one file per layer or concern, registered on
import.  The package imports every module it holds, so a new check file is
found by itself (how to add a check: :mod:`iopilot.checks.base`).
"""

import pkgutil
from importlib import import_module

from .base import REGISTRY, Check, Context, FileEvidence, Finding, Level, check
from .engine import Diagnosis, diagnose

# The checks run in this order (findings of one cause merge into the first),
# then those of any other module, by name.
_FIRST = ("stdio", "posix", "mpiio", "hdf5", "pnetcdf", "lustre", "ranks", "phases", "overlaps",
          "reopen", "tinyfiles", "mpiio_time", "rmw", "stdio_time", "background", "program",
          "flushes", "fortran")
_OTHERS = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _FIRST)
for _name in (*_FIRST, *_OTHERS):
    import_module(f"{__name__}.{_name}")

__all__ = [
    "REGISTRY",
    "Check",
    "Context",
    "Diagnosis",
    "FileEvidence",
    "Finding",
    "Level",
    "check",
    "diagnose",
]
