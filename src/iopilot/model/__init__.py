"""The data model shared by every layer of iopilot (see :mod:`.trace`), and the
names it shares with the runtime and the HTML page (:mod:`iopilot.vocabulary`)."""

from ..vocabulary import (
    COUNTER_LAYERS,
    OP_NAMES,
    OP_READ,
    OP_WRITE,
    RECORD_LAYERS,
    SIZE_BIN_UPPER,
    SIZE_BINS,
)
from .cpu import BackgroundThread, ProcessCpu
from .sites import Sites
from .trace import (
    BackgroundOps,
    ClockAlignment,
    Counters,
    Heatmap,
    Job,
    ModuleInfo,
    MpiProfile,
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
    "BackgroundOps",
    "BackgroundThread",
    "ClockAlignment",
    "Counters",
    "Heatmap",
    "Job",
    "ModuleInfo",
    "MpiProfile",
    "ProcessCpu",
    "Records",
    "Sites",
    "Striping",
    "Trace",
    "display",
]
