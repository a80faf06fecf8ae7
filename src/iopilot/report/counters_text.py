"""``iopilot export counters``: every counter of a trace or Darshan log as
darshan-parser prints it, one tab-separated line per counter::

    <module> <rank> <record id> <counter> <value> <file name> <mount point> <fs type>

Integers print as integers, floating-point counters with six decimals, so
an iopilot trace and a Darshan log of the same run can be compared with
``diff`` or ``join`` against what centres already keep.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..model import COUNTER_LAYERS, Trace, display
from ..model.trace import safe_name


def _mount_of(name: str, mounts: list[tuple[str, str]]) -> tuple[str, str]:
    """The longest mount point that holds ``name``, and its file-system type."""
    best = ("UNKNOWN", "UNKNOWN")
    for point, fstype in mounts:
        inside = name == point or name.startswith(point.rstrip("/") + "/")
        if inside and (best[0] == "UNKNOWN" or len(point) > len(best[0])):
            best = (point, fstype)
    return best


def counter_lines(trace: Trace) -> Iterator[str]:
    """darshan-parser's counter lines for every layer with counters, in order."""
    mounts = list(trace.job.mounts)
    for layer in COUNTER_LAYERS:
        c = trace.counters.get(layer)
        if c is None or not len(c):
            continue
        module = display(layer)
        order = np.lexsort((c.file_id, c.rank))  # by rank, then record id, like the log
        for row in order:
            fid, rank = int(c.file_id[row]), int(c.rank[row])
            name = safe_name(trace.names.get(fid, f"<record {fid}>"))
            point, fstype = _mount_of(name, mounts)
            tail = f"\t{name}\t{point}\t{fstype}"
            head = f"{module}\t{rank}\t{fid}\t"
            for n, v in zip(c.int_names, c.ints[row].tolist(), strict=True):
                yield f"{head}{n}\t{v}{tail}"
            for n, v in zip(c.float_names, c.floats[row].tolist(), strict=True):
                yield f"{head}{n}\t{v:.6f}{tail}"
            if c.parent_id is not None:  # datasets and variables name their file's record
                yield f"{head}{layer}_FILE_REC_ID\t{int(c.parent_id[row])}{tail}"


# Modules whose records are not counter lines here: traces (DXT), time bins
# (HEATMAP) and layouts (LUSTRE; the model keeps stripe size, count and OSTs).
_NOT_EXPORTED = ("DXT", "HEATMAP", "LUSTRE", "BG/Q")


def header(trace: Trace) -> list[str]:
    j = trace.job
    left = sorted({m.name for m in trace.modules
                   if any(m.name.upper().startswith(x) for x in _NOT_EXPORTED)})  # fmt: skip
    note = [f"# not exported as counters: {', '.join(left)}"] if left else []
    return [f"# source: {safe_name(trace.source)}", *note,
            f"# format: {j.format}",
            f"# exe: {safe_name(j.executable)}",
            f"# nprocs: {j.nprocs}",
            f"# run time: {j.runtime:.4f}",
            "# <module>\t<rank>\t<record id>\t<counter>\t<value>\t<file name>\t<mount pt>"
            "\t<fs type>"]  # fmt: skip
