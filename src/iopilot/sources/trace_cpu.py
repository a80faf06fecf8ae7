"""The processors of a traced process, from its summary: the ``cpu`` part
(affinity, online CPUs, launcher and binding, CPU times, the large data
calls' CPU time) and where the background I/O threads ran (``write_behind``
and ``async_engine``), checked (see ``docs/trace-format.md``), then one
:class:`~iopilot.model.cpu.ProcessCpu` per program process."""

from __future__ import annotations

from typing import Any

from ..model.cpu import BackgroundThread, ProcessCpu
from .checked import Fields, is_int64, is_number, json_type

MAX_CPU = 1 << 20  # CPU numbers beyond this are not a machine's
THREAD_PARTS = ("write_behind", "async_engine")


def _cpu_list(f: Fields, where: str, v: Any) -> list[int]:
    if not (isinstance(v, list) and all(is_int64(c) and 0 <= c < MAX_CPU for c in v)):
        raise f.bad(f"{where} should be an array of CPU numbers, not {_shown(v)}")
    return v


def _shown(v: Any) -> str:
    return json_type(v) if isinstance(v, list | dict) or v is None else repr(v)


def _number(f: Fields, where: str, v: Any, optional: bool = False) -> float | None:
    if v is None and optional:
        return None
    if not (is_number(v) and v >= 0):
        raise f.bad(f"{where} should be a non-negative number, not {_shown(v)}")
    return float(v)


def check_cpu(f: Fields, part: Any) -> dict[str, Any] | None:
    """The checked "cpu" part of a summary; None when it has none (a runtime
    before it, or an image killed before its summary)."""
    if part is None:
        return None
    if not isinstance(part, dict):
        raise f.bad(f"'cpu' should be an object, not {json_type(part)}")
    out: dict[str, Any] = {"allowed": _cpu_list(f, "'cpu' allowed", part.get("allowed"))}
    for key, low in (("online", 0), ("ran_on", -1), ("io_cpu_bytes", 0)):
        v = part.get(key)
        if not (is_int64(v) and v >= low):
            raise f.bad(f"'cpu' {key} should be an integer >= {low}, not {_shown(v)}")
        out[key] = v
    for key in ("user_s", "system_s", "io_cpu_s"):
        out[key] = _number(f, f"'cpu' {key}", part.get(key), optional=key != "io_cpu_s")
    # the syncs' CPU time, from runtimes that measure it
    syncs = part.get("io_syncs", 0)
    if not (is_int64(syncs) and syncs >= 0):
        raise f.bad(f"'cpu' io_syncs should be an integer >= 0, not {_shown(syncs)}")
    out["io_syncs"] = syncs
    out["io_sync_cpu_s"] = _number(f, "'cpu' io_sync_cpu_s", part.get("io_sync_cpu_s", 0.0))
    launcher = part.get("launcher")
    if not (isinstance(launcher, dict) and isinstance(launcher.get("name"), str)
            and isinstance(launcher.get("binding"), str)):  # fmt: skip
        raise f.bad("'cpu' launcher should be {\"name\": text, \"binding\": text}")
    out["launcher"], out["binding"] = launcher["name"], launcher["binding"]
    return out


def check_thread(f: Fields, key: str, part: dict[str, Any]) -> dict[str, Any] | None:
    """Where the background thread of summary part ``key`` ran, checked; None
    when the part does not say (write-behind off, an older runtime)."""
    if "thread_cpus" not in part:
        return None
    cpus = _cpu_list(f, f"'{key}' thread_cpus", part["thread_cpus"])
    shares, creator = part.get("shares_core"), part.get("creator_cpu", -1)
    if not isinstance(shares, bool):
        raise f.bad(f"'{key}' shares_core should be true or false, not {_shown(shares)}")
    if not (is_int64(creator) and creator >= -1):
        raise f.bad(f"'{key}' creator_cpu should be an integer >= -1, not {_shown(creator)}")
    threads = part.get("threads", 1)
    if not (is_int64(threads) and threads >= 0):
        raise f.bad(f"'{key}' threads should be a non-negative integer, not {_shown(threads)}")
    cpu_s = _number(f, f"'{key}' thread_cpu_s", part.get("thread_cpu_s"), optional=True)
    return {"kind": key, "cpus": tuple(cpus), "shares_core": shares, "cpu_s": cpu_s,
            "creator_cpu": creator if creator >= 0 else None, "threads": threads}  # fmt: skip


def process_cpu(summary: dict[str, Any], rank: int | None) -> ProcessCpu | None:
    """What a checked summary says of the process's processors; None when it
    has no "cpu" part."""
    c = summary.get("cpu")
    if c is None:
        return None
    threads = tuple(BackgroundThread(**t) for t in summary.get("threads", ()))
    return ProcessCpu(rank=rank, pid=summary["pid"], allowed=tuple(c["allowed"]),
                      online=c["online"], ran_on=c["ran_on"] if c["ran_on"] >= 0 else None,
                      user_s=c["user_s"], system_s=c["system_s"], io_cpu_s=c["io_cpu_s"],
                      io_cpu_bytes=c["io_cpu_bytes"], io_sync_cpu_s=c["io_sync_cpu_s"],
                      io_syncs=c["io_syncs"], launcher=c["launcher"],
                      binding=c["binding"], threads=threads)  # fmt: skip
