"""Thresholds of the checks: defaults, a TOML file, and ``--set key=value``.

Defaults of the checks that Drishti also has are Drishti's, so both tools
agree where they should; the others are ours and documented here.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import InputError
from ..userfiles import load_toml, quote, short_errors, suggest

MiB = 1024 * 1024

# name -> (default, meaning)
DEFAULTS: dict[str, tuple[float | int, str]] = {
    "small_request_size": (MiB, "requests below this many bytes are small"),
    "small_requests_ratio": (0.1, "share of small requests that is a problem"),
    "small_requests_count": (1000, "...and at least this many small requests"),
    "misaligned_ratio": (0.1, "share of misaligned requests that is a problem"),
    "random_ratio": (0.2, "share of random (not sequential) requests that is a problem"),
    "random_count": (1000, "...and at least this many random requests"),
    "metadata_time_rank": (30.0, "seconds of metadata time per rank and file that is too long"),
    "metadata_time_share": (0.5, "share of I/O time spent in metadata that is too much"),
    "metadata_min_time": (1.0, "seconds of metadata time below which its share is ignored"),
    "shared_imbalance": (0.15, "(slowest - fastest rank) / total, bytes or time, on shared files"),
    "rank_size_imbalance": (0.3, "(max - min) / max bytes per rank on a file"),
    "stdio_share": (0.1, "share of bytes moved through STDIO that is a problem"),
    "intensity": (0.1, "|writes - reads| / (writes + reads) that makes a job read/write intensive"),
    "collective_ops": (1000, "MPI-IO operations above which no collective I/O is a problem"),
    "collective_share_low": (0.5, "collective share of MPI-IO operations below which to warn"),
    "hdf5_small_count": (100, "small HDF5 dataset accesses that are a problem"),
    "hdf5_tiny_access": (1024, "mean bytes per HDF5 dataset access below which they are tiny"),
    "hdf5_meta_read_share": (0.5, "share of a file's ranks doing small reads: per-rank metadata"),
    "chunk_min_bytes": (64 * 1024, "HDF5 chunks smaller than this are too small"),
    "chunk_access_ratio": (64, "typical access / chunk bytes above which chunks are too small"),
    "lustre_shared_ranks": (4, "ranks writing one file above which one stripe is too few"),
    "lustre_min_bytes": (64 * MiB, "bytes on a file below which its striping does not matter"),
    "ost_imbalance": (1.5, "busiest OST / mean OST load that is a problem"),
    "slow_ost_ratio": (3.0, "typical throughput / an OST's file throughput that marks it slow"),
    "slow_ost_min_time": (1.0, "seconds spent on a slow OST's files below which it is ignored"),
    "rank0_heavy": (2.0, "rank 0 load / mean load of the other ranks that is a problem"),
    "rank_excess": (0.1, "unbalanced ranks also move this share more bytes than the mean"),
    "straggler_ratio": (1.5, "slowest rank time / median rank time in a phase that is a straggler"),
    "straggler_min_time": (0.01, "seconds of phase time below which stragglers are ignored"),
    "phase_gap": (0.0, "join I/O intervals closer than this (seconds); 0 = the mean gap"),
    "overlap_count": (1, "overlapping accesses by different ranks that are a conflict"),
    "phase_min_gap_share": (0.01, "with phase_gap 0, gaps under this share of the I/O span join"),
    "reread_share": (0.5, "share of bytes read that were read before that is a problem"),
    "reread_min_bytes": (MiB, "...and at least this many bytes read again"),
    "background_exposed_share": (0.5, "share of a rank's background I/O time during its own I/O "
                                 "calls (it waited) above which to warn"),
    "background_min_time": (0.1, "seconds of background I/O waited for below which it is ignored"),
    "reopen_count": (100, "opens of one file by one rank above which it is reopened too often"),
    "seek_stat_count": (1000, "seeks + stats of one file by one rank beyond one per read or write"),
    "tiny_file_size": (64 * 1024, "files whose data ends below this many bytes are tiny"),
    "tiny_files_count": (1000, "tiny files read, or written, above which their opens matter"),
    "mpiio_overhead_ratio": (2.0, "MPI-IO time / POSIX time on the same files that is too much"),
    "mpiio_overhead_min_time": (1.0, "seconds of MPI-IO time above POSIX below which to ignore"),
    "rmw_share": (0.05, "bytes MPI-IO reads back while writing / bytes it writes: too many"),
    "stdio_time_share": (0.1, "share of the run one rank spends in STDIO that is too much"),
    "stdio_min_time": (0.5, "seconds of one rank's STDIO time below which it is ignored"),
    "max_files_listed": (10, "files listed per finding"),
    "default_bandwidth": (1024 * MiB, "bytes per second large requests are assumed to "
                          "reach when a job has none to measure"),
    "high_min_io_seconds": (1.0, "slowest rank's I/O seconds below which no finding is HIGH"),
    "high_min_io_share": (0.01, "share of the run in I/O (slowest rank) below which no "
                          "finding is HIGH"),
    "call_overhead_gap": (0.001, "seconds between consecutive calls on one dataset up to "
                          "which the gap is per-call work of a tight loop (h5py, resize)"),
    "flush_count": (10, "flushes/syncs of one file by one process (this many or more) that "
                    "are issued per step"),
    "flush_time_share": (0.1, "share of the slowest rank's I/O time in repeated "
                         "flushes/syncs (this much or more) that is a problem"),
    "compute_gap_min": (0.001, "seconds between a rank's blocking MPI-IO calls that count "
                        "as computation to overlap them with"),
    "tiny_files_min": (100, "tiny files read, or written, below which they are never a storm"),
    "tiny_files_share": (0.2, "share of the slowest rank's I/O time in opening, closing and "
                         "stat'ing tiny files that makes them a storm"),
    "reread_opens": (10, "opens of one file by one rank that re-read all of it each time "
                     "(a configuration re-read every step)"),
    "stdio_bulk_bytes": (8 * MiB, "bytes one rank writes through STDIO from which it is bulk "
                         "data (arrays as text), not a log"),
    "stdio_bulk_min_time": (0.1, "seconds of one rank's STDIO time below which bulk text "
                            "(stdio_bulk_bytes or more) is ignored"),
    "fortran_statements": (10000, "Fortran statements of one direction on one unit's file "
                           "below which their number does not matter"),
    "fortran_statement_bytes": (512, "mean bytes of values per Fortran statement at or below "
                                "which statements move an element or a few"),
    "fortran_formatted_bytes": (MiB, "bytes of values (kind x count) through formatted Fortran "
                                "statements on one file from which they are a big array"),
    "fortran_min_time": (0.1, "seconds a Fortran check's fix saves the slowest rank below "
                         "which it is not reported"),
}


def defaults() -> dict[str, Any]:
    return {k: v[0] for k, v in DEFAULTS.items()}


def _coerce(name: str, value: Any, origin: str) -> float | int:
    if name not in DEFAULTS:
        raise InputError(origin, f"unknown threshold {quote(name)}",
                         suggest(name, sorted(DEFAULTS), "'iopilot checks -v' lists them"))
    default = DEFAULTS[name][0]
    try:
        v = float(value) if isinstance(value, int | float | str) else None
    except ValueError:
        v = None
    if v is None or math.isnan(v):
        raise InputError(origin, f"threshold {name} must be a number, got {quote(value)}")
    if v < 0:
        raise InputError(origin, f"threshold {name} must not be negative, got {quote(value)}")
    return int(v) if isinstance(default, int) and v.is_integer() else v


def load(config: str | None = None, overrides: list[str] | None = None) -> dict[str, Any]:
    """Defaults, then a TOML file (``[thresholds]`` table or top level), then ``k=v``."""
    values = defaults()
    with short_errors():
        if config:
            data = load_toml(config)
            table = data.get("thresholds", data)
            if not isinstance(table, dict):
                raise InputError(config, "[thresholds] must be a table")
            for k, v in table.items():
                values[k] = _coerce(k, v, config)
        for item in overrides or []:
            if "=" not in item:
                raise InputError("--set", f"expected NAME=VALUE, got {quote(item)}")
            k, v = item.split("=", 1)
            values[k.strip()] = _coerce(k.strip(), v.strip(), "--set")
    return values
