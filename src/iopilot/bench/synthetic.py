"""Synthetic iopilot traces of any size, for benchmarks of the readers and reports.

The trace looks like a bulk-synchronous application: every rank writes (and
then reads) its share of a few files in bursts, with a few request sizes,
and counters that agree exactly with the records.  Each (operation, size)
is a call site of its own, the same in every rank (format 3).  Everything is built with
whole-array NumPy operations, so 10 M records take seconds.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from ..model import SIZE_BIN_UPPER, SIZE_BINS
from ..sources.trace_procs import HEADER, MAGIC, RECORD
from ..vocabulary import COUNTERS, FCOUNTERS, RUNTIME_LAYERS

# The runtime's layers and counter names, as its summaries list them.
LAYERS, INT_NAMES, FLOAT_NAMES = RUNTIME_LAYERS, COUNTERS, FCOUNTERS


def write_trace(out: Path, records: int, *, ranks: int = 64, files: int = 8,
                bursts: int = 10, seed: int = 1) -> Path:  # fmt: skip
    """Write a trace directory with ``records`` POSIX records; return its path."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    per_rank = np.full(ranks, records // ranks, np.int64)
    per_rank[: records % ranks] += 1
    sizes = np.array([4096, 65536, 1 << 20], np.int64)
    for rank in range(ranks):
        n = int(per_rank[rank])
        if n == 0:
            continue
        burst = np.minimum(np.arange(n) * bursts // n, bursts - 1)
        op = (burst % 2).astype(np.uint8)  # even bursts write, odd bursts read
        length = sizes[rng.integers(0, len(sizes), n)]
        fid = (burst // 2 % files + 1).astype(np.uint64)
        # Each rank owns a region of each file; requests advance through it.
        offset = np.cumsum(length) - length + rank * (1 << 34)
        dur = rng.gamma(2.0, 2e-5, n) * (1 + length / 65536)
        gap = rng.exponential(5e-6, n)
        gap[np.r_[True, burst[1:] != burst[:-1]]] += 0.5  # compute between bursts
        start = np.cumsum(gap + dur) - dur
        rec = np.zeros(n, RECORD)
        rec["start"], rec["end"] = start, start + dur
        rec["offset"], rec["length"] = offset, length
        rec["file_id"], rec["op"], rec["layer"] = fid, op, 0
        rec["site"] = 1 + op * len(sizes) + np.searchsorted(sizes, length)
        head = np.zeros(1, HEADER)
        head["magic"], head["version"], head["record_size"] = MAGIC, 3, RECORD.itemsize
        head["rank"], head["pid"], head["t0"] = rank, 10_000 + rank, t0
        head["ppid"] = 1
        stem = f"psynth-{10_000 + rank}-0"
        (out / f"{stem}.rec").write_bytes(head.tobytes() + rec.tobytes())
        meta = _process_json(rank, ranks, t0, float(rec["end"].max()), rec, files)
        meta["modules"] = [{"path": "/opt/synthetic/bin/app", "base": 0x555555554000,
                            "build_id": ""}]  # fmt: skip
        meta["sites"] = _sites(rec, 2 * len(sizes))
        (out / f"{stem}.json").write_text(json.dumps(meta))
    (out / "job.json").write_text(json.dumps({
        "format": "iopilot-job", "version": 1, "command": ["synthetic", str(records)],
        "start": t0, "end": t0 + 1, "mounts": [["/", "ext4"]]}))  # fmt: skip
    return out


def _sites(rec: np.ndarray, n: int) -> list[dict]:
    """The call sites of the records: site k at offset 0x1000 + 16 k."""
    ids = rec["site"].astype(np.int64)
    count = np.bincount(ids, minlength=n + 1)
    nbytes = np.bincount(ids, rec["length"], minlength=n + 1)
    time = np.bincount(ids, rec["end"] - rec["start"], minlength=n + 1)
    return [{"id": k, "frames": [[0, 0x1000 + 16 * k]], "count": int(count[k]),
             "bytes": int(nbytes[k]), "time": float(time[k])}
            for k in range(1, n + 1) if count[k]]  # fmt: skip


def _process_json(rank: int, ranks: int, t0: float, t_end: float, rec: np.ndarray,
                  files: int) -> dict:  # fmt: skip
    counters = []
    bins = np.searchsorted(np.array(SIZE_BIN_UPPER), rec["length"], side="left")  # edges inclusive
    for fid in range(1, files + 1):
        m = rec["file_id"] == fid
        if not m.any():
            continue
        ints: dict[str, int] = {}
        floats: dict[str, float] = {}
        for op, kind, past in ((1, "WRITE", "WRITTEN"), (0, "READ", "READ")):
            sel = m & (rec["op"] == op)
            if not sel.any():
                continue
            ln = rec["length"][sel]
            ints[f"{kind}S"] = int(sel.sum())
            ints[f"BYTES_{past}"] = int(ln.sum())
            ints[f"MAX_BYTE_{past}"] = int((rec["offset"][sel] + ln - 1).max())
            ints[f"CONSEC_{kind}S"] = ints[f"SEQ_{kind}S"] = int(sel.sum())
            for b, count in zip(*np.unique(bins[sel], return_counts=True), strict=True):
                ints[f"SIZE_{kind}_{SIZE_BINS[b]}"] = int(count)
            floats[f"F_{kind}_TIME"] = float((rec["end"][sel] - rec["start"][sel]).sum())
            floats[f"F_{kind}_START_TIMESTAMP"] = float(rec["start"][sel].min())
            floats[f"F_{kind}_END_TIMESTAMP"] = float(rec["end"][sel].max())
        ints["OPENS"] = 1
        counters.append([0, str(fid),
                         {str(INT_NAMES.index(k)): v for k, v in ints.items()},
                         {str(FLOAT_NAMES.index(k)): v for k, v in floats.items()}])  # fmt: skip
    return {
        "format": "iopilot-process", "version": 3, "rank": rank, "nprocs": ranks,
        "pid": 10_000 + rank, "ppid": 1, "host": f"node{rank // 32}", "t0": t0,
        "t_end": t_end, "ended_by": "exit", "exe": "synthetic", "cmdline": ["synthetic"],
        "records": len(rec), "records_dropped": 0, "max_records": len(rec),
        "stats_missing": 0, "threads": 1, "execs": 0, "env": {}, "layers": LAYERS,
        "counter_names": INT_NAMES, "fcounter_names": FLOAT_NAMES, "counters": counters,
        "names": {str(f): f"/scratch/synthetic/out{f}.dat" for f in range(1, files + 1)},
        "notes": [],
    }  # fmt: skip
