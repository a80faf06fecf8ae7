"""Darshan logs (formats 3.00-3.41) -> :class:`~iopilot.model.Trace`.

Reading goes through PyDarshan's bundled ``libdarshan-util`` and its C
declarations, but not through ``darshan.DarshanReport``: that imports pandas
(a third of a second) and builds one Python dict per DXT segment.  Here each
record is copied as raw bytes and the columns are made with one
``np.frombuffer`` per module.

Before the library sees a file, ``darshan_header`` checks its bytes, because
the library reports every problem as "failed to open" and returns partial
data from truncated files without a word.  This module reads the log
(uncompressed ones in a child: no checksum guards them), adds the modules
read from the bytes (HEATMAP, APMPI) and registers the format;
``darshan_library`` is the C library, ``darshan_columns`` builds the model's
columns from it.
"""

from __future__ import annotations

import os
import zlib
from typing import Any

from .._child import run_in_child, signal_name
from ..errors import InputError
from ..model import Trace
from .darshan_columns import read_open_log
from .darshan_header import LogHeader, check_header, left_out, open_log
from .darshan_library import APMPI_TABLES, CapturedStderr, counter_names, library
from .darshan_profiles import (
    APMPI_VERSION,
    HEATMAP_VERSION,
    RegionError,
    apmpi_dtypes,
    heatmap_limit,
    inflate,
    read_apmpi,
    read_heatmaps,
)
from .registry import Source, register


def read_darshan(path: str, *, with_records: bool = True) -> Trace:
    """Read a Darshan log into the model; raise InputError if it is damaged."""
    head = check_header(path)
    version, skip = head.version, head.skip
    if head.compression == 2:
        trace = _read_in_child(path, version, with_records, skip)
    else:
        trace = _read_checked(path, version, with_records, skip)
    _add_profiles(trace, path, head)
    if head.partial and not any(m.partial for m in trace.modules):
        trace.warnings.append("the log header marks some data as partial")
    return trace


def _read_checked(path: str, version: str, with_records: bool, skip: dict[str, str],
                  open_as: str = "") -> Trace:  # fmt: skip
    if not open_as and os.path.isdir("/proc/self/fd"):
        # The library opens by name: through /proc it opens the regular file
        # this descriptor holds, never a FIFO put in its place since the checks.
        with open_log(path) as f:
            return _read_checked(path, version, with_records, skip, f"/proc/self/fd/{f.fileno()}")
    ffi, lib = library()
    with CapturedStderr() as err:
        handle = lib.darshan_log_open(os.fsencode(open_as or path))
    if handle == ffi.NULL:
        reason = err.text.splitlines()[-1] if err.text else "the Darshan library cannot open it"
        if open_as:  # the library names the file as it was given
            reason = reason.replace(open_as, path)
        raise InputError(path, f"damaged log: {reason.removeprefix('Error: ').rstrip('.')}")
    try:
        with CapturedStderr() as err:
            trace = read_open_log(ffi, lib, handle, path, version, with_records, skip)
        if err.text:
            trace.warnings.append(
                "the Darshan library reported problems while reading: "
                + "; ".join(line.removeprefix("Error: ") for line in err.text.splitlines()[:3])
            )
    finally:
        lib.darshan_log_close(handle)
    return trace


CHILD_SECONDS = 600  # a log the library reads for longer than this is taken as hung


def _read_in_child(path: str, version: str, with_records: bool, skip: dict[str, str]) -> Trace:
    """Read an uncompressed log in a forked child and receive the model.

    Its regions have no checksum, and the library aborts, crashes or corrupts
    its own memory on some damaged ones (a bad name-table length, a bad
    record count; even its close may then crash): the parent never touches
    such a log through the library, so a crash is an InputError here, never
    the end of the process.  Costs one fork and one pickle of the model;
    only for uncompressed logs (Darshan writes zlib by default).
    """
    out = run_in_child(_read_or_why, (path, version, with_records, skip), CHILD_SECONDS)
    if out.late:
        raise InputError(path, f"corrupt: the Darshan library did not finish reading it in"
                         f" {CHILD_SECONDS} s (uncompressed data, damaged)")  # fmt: skip
    if out.code < 0:
        raise InputError(path, f"corrupt: the Darshan library crashes on it with "
                         f"{signal_name(-out.code)} (uncompressed data, damaged)")  # fmt: skip
    if not out.ok:
        raise InputError(path, "corrupt: reading it ended without a result "
                         "(uncompressed data, damaged)")  # fmt: skip
    if out.value[0] == "error":
        raise InputError(path, out.value[1], out.value[2])
    return out.value[1]  # type: ignore[no-any-return]


def _read_or_why(path: str, version: str, with_records: bool,
                 skip: dict[str, str]) -> tuple[str, Any, str]:  # fmt: skip
    """In the child: ("ok", the model, "") or ("error", reason, hint)."""
    # Through /proc: a library whose memory a damaged log corrupted may take
    # the log for one it writes and unlink it on close.
    try:
        f = open_log(path)
        via = f"/proc/self/fd/{f.fileno()}" if os.path.isdir("/proc/self/fd") else ""
        return ("ok", _read_checked(path, version, with_records, skip, via), "")
    except InputError as e:
        return ("error", e.reason, e.hint)
    except Exception as e:
        return ("error", f"damaged log: {type(e).__name__}: {e}", "")


# Modules read from the log's bytes (see :mod:`.darshan_profiles`), with the
# record format version this reader knows.
RAW_MODULES = {"HEATMAP": HEATMAP_VERSION, "APMPI": APMPI_VERSION}


def _add_profiles(trace: Trace, path: str, head: LogHeader) -> None:
    """Read HEATMAP and APMPI; a damaged one is a warning and is left out."""
    for name, version in RAW_MODULES.items():
        info = next((m for m in trace.modules if m.name == name), None)
        if info is None or name in head.skip or name not in head.regions:
            continue
        try:
            ver = head.module_versions.get(name, 0)
            if ver != version:
                raise RegionError(f"record format version {ver}, this reader knows {version}")
            nprocs = trace.job.nprocs
            if name == "HEATMAP":
                raw = _region_bytes(path, head, name, heatmap_limit(nprocs))
                heatmaps, more = read_heatmaps(raw, trace.names, nprocs, head.big_endian)
                trace.heatmaps = heatmaps or None
                trace.warnings.extend(more)
                info.rows = sum(len(h) for h in heatmaps.values())
            else:
                names = {k: counter_names(f"apmpi{t}") for k, t in APMPI_TABLES.items()}
                header_t, perf_t = apmpi_dtypes(names, head.big_endian)
                limit = header_t.itemsize + max(nprocs, 1) * perf_t.itemsize
                trace.mpi = read_apmpi(_region_bytes(path, head, name, limit), names,
                                       head.big_endian, nprocs)  # fmt: skip
                info.rows = len(trace.mpi)
        except (RegionError, zlib.error) as e:
            info.read, info.partial = False, True
            trace.warnings.append(left_out(name, str(e)))
            continue
        except (AttributeError, OSError) as e:  # no APMPI names in this library; file gone
            info.read = False
            trace.warnings.append(f"{name} was not read: {e}")
            continue
        info.read = True


def _region_bytes(path: str, head: LogHeader, name: str, limit: int) -> bytes:
    """A module region's records: inflated by the header checks, or read now."""
    if name in head.inflated:
        raw = head.inflated[name]
        if len(raw) > limit:
            raise RegionError(f"it inflates to more than the {limit:,} bytes it can hold")
        return raw
    off, length = head.regions[name]
    with open_log(path) as f:
        f.seek(off)
        raw = f.read(length)
    return inflate(raw, limit) if head.compression == 0 else raw


register(Source("Darshan log", lambda p: p.suffix == ".darshan" and not p.is_dir(), read_darshan,
                fallback=True))  # fmt: skip
