"""The job by node: ranks, collective-buffering aggregators and I/O per host,
and how the hosts' clocks were aligned."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model import RECORD_LAYERS, Counters, Trace
from ..model.aggregate import unique
from ..vocabulary import MPIIO_COLLECTIVE, mpiio_counters

_MOVED = ("POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN")
_POSIX, _MPIIO = RECORD_LAYERS.index("POSIX"), RECORD_LAYERS.index("MPIIO")
_SECONDS = ("POSIX_F_READ_TIME", "POSIX_F_WRITE_TIME", "POSIX_F_META_TIME")


def _sum(c: Counters, names: tuple[str, ...]) -> np.ndarray:
    """Per row, the sum of those of ``names`` the table has."""
    out = np.zeros(len(c))
    for n in names:
        if c.has(n):
            out = out + c[n]
    return out


def aggregators(trace: Trace) -> set[int] | None:
    """The collective-buffering aggregators: on a file the job read or wrote
    with collective MPI-IO calls, the ranks whose POSIX calls moved at least
    the bytes of their own MPI-IO calls (the others handed their data to
    them).  None without collective calls, or without per-operation records
    (a shared file's counters are reduced over ranks and cannot tell)."""
    m, r = trace.layer("MPIIO"), trace.records
    if m is None or not len(m) or not len(r):
        return None
    coll = [c for d in ("READ", "WRITE") for c in mpiio_counters(d, MPIIO_COLLECTIVE)]
    files = unique(m.file_id[_sum(m, tuple(coll)) > 0])
    if not len(files):
        return None
    on = np.isin(r.file_id, files) & (r.length > 0)
    rank, layer, length = r.rank[on].astype(np.int64), r.layer[on], r.length[on]
    if not len(rank):
        return set()
    # one pass: bytes per (file, rank), through POSIX and through MPI-IO
    n = int(rank.max()) + 1
    key = np.searchsorted(files, r.file_id[on]) * n + rank
    size = len(files) * n
    posix = np.bincount(key, weights=np.where(layer == _POSIX, length, 0), minlength=size)
    mpiio = np.bincount(key, weights=np.where(layer == _MPIIO, length, 0), minlength=size)
    return {int(k) % n for k in np.flatnonzero((posix > 0) & (posix >= mpiio))}


def _per_rank(trace: Trace) -> tuple[dict[int, float], dict[int, float]]:
    """POSIX bytes and seconds per rank: from the records when the source has
    them, else from the counters' per-rank rows."""
    r = trace.records
    if len(r):
        on = r.layer == _POSIX
        ranks = r.rank[on]
        n = int(ranks.max()) + 1 if len(ranks) else 0
        b = np.bincount(ranks, weights=r.length[on], minlength=n)
        s = np.bincount(ranks, weights=r.end[on] - r.start[on], minlength=n)
        return ({k: float(b[k]) for k in range(n)}, {k: float(s[k]) for k in range(n)})
    p = trace.layer("POSIX")
    moved: dict[int, float] = {}
    seconds: dict[int, float] = {}
    if p is not None and len(p):
        b, s = _sum(p, _MOVED), _sum(p, _SECONDS)
        for k in unique(p.rank[p.rank >= 0]):
            on = p.rank == k
            moved[int(k)], seconds[int(k)] = float(b[on].sum()), float(s[on].sum())
    return moved, seconds


def nodes_summary(trace: Trace) -> list[dict[str, Any]] | None:
    """Per host, in order of its lowest rank: its ranks, the aggregators among
    them (None when unknown), the POSIX bytes its ranks moved and the seconds
    they spent in those calls.  None when the job ran on fewer than two hosts."""
    hosts = trace.job.hosts
    if len(set(hosts.values())) < 2:
        return None
    agg = aggregators(trace)
    moved, seconds = _per_rank(trace)
    out: dict[str, dict[str, Any]] = {}
    for rank in sorted(hosts):
        node = out.setdefault(hosts[rank], {"host": hosts[rank], "ranks": [],
                                            "aggregators": None if agg is None else [],
                                            "bytes": 0, "io_seconds": 0.0})  # fmt: skip
        node["ranks"].append(rank)
        if agg is not None and rank in agg:
            node["aggregators"].append(rank)
        node["bytes"] += int(moved.get(rank, 0))
        node["io_seconds"] += seconds.get(rank, 0.0)
    for node in out.values():
        node["io_seconds"] = round(node["io_seconds"], 6)
    return list(out.values())


def clock_summary(trace: Trace) -> dict[str, Any] | None:
    """How the hosts' clocks were put on rank 0's, or None (one host)."""
    c = trace.job.clock
    if c is None:
        return None
    u = None if c.uncertainty is None else round(c.uncertainty, 9)
    return {"hosts": c.hosts, "aligned": c.aligned,
            "largest_shift_s": round(c.largest_shift, 9), "uncertainty_s": u}  # fmt: skip


def nodes_line(nodes: list[dict[str, Any]]) -> str:
    """``4 (node-a: ranks 0-1, 1 aggregator; ...)`` for the terminal."""
    parts = []
    for n in nodes:
        r = n["ranks"]
        ranks = f"rank {r[0]}" if len(r) == 1 else f"{len(r)} ranks"
        agg = n["aggregators"]
        if agg is not None:
            ranks += f", {len(agg)} aggregator{'' if len(agg) == 1 else 's'}"
        parts.append(f"{n['host']} {ranks}")
    return f"{len(nodes)}: " + "; ".join(parts)


def clock_line(c: dict[str, Any]) -> str:
    """The clocks' alignment in one line, in milliseconds."""
    if not c["aligned"]:
        return (f"{c['hosts']} hosts, each process on its own host's clock: not measured "
                "(MPI jobs measure them unless IOPILOT_CLOCK_SYNC=0)")  # fmt: skip
    missing = c["hosts"] - c["aligned"]
    line = (f"{c['aligned']} host(s) put on rank 0's clock (moved by up to "
            f"{c['largest_shift_s'] * 1e3:.3g} ms); timelines within "
            f"{c['uncertainty_s'] * 1e3:.2g} ms of each other")  # fmt: skip
    if missing:
        line += f"; {missing} host(s) not measured, left on their own clocks"
    return line
