"""The data model shared by every layer of iopilot (see :mod:`.trace`)."""

from .trace import (
    COUNTER_LAYERS,
    OP_NAMES,
    OP_READ,
    OP_WRITE,
    RECORD_LAYERS,
    SIZE_BIN_UPPER,
    SIZE_BINS,
    Counters,
    Job,
    ModuleInfo,
    Records,
    Striping,
    Trace,
    display,
)

__all__ = [
    "COUNTER_LAYERS",
    "OP_NAMES",
    "OP_READ",
    "OP_WRITE",
    "RECORD_LAYERS",
    "SIZE_BINS",
    "SIZE_BIN_UPPER",
    "Counters",
    "Job",
    "ModuleInfo",
    "Records",
    "Striping",
    "Trace",
    "display",
]
