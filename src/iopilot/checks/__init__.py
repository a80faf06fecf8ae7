"""The diagnosis engine: checks, one file per layer, registered on import.

Adding a check is adding one class decorated with ``@check`` to the file of
its layer (or a new file listed in ``_LAYERS``).
"""

from importlib import import_module

from .base import REGISTRY, Check, Context, FileEvidence, Finding, Level, check
from .engine import Diagnosis, diagnose

_LAYERS = ("stdio", "posix", "mpiio", "hdf5", "pnetcdf", "lustre", "ranks", "phases", "overlaps",
           "reopen", "tinyfiles", "mpiio_time", "rmw", "stdio_time", "background", "program",
           "flushes", "fortran")
for _name in _LAYERS:
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
