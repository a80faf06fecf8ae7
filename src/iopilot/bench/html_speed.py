"""``iopilot bench html``: time, peak memory and size of the HTML report.

Each target runs as ``iopilot report TARGET --html`` in a fresh process (so
loading, diagnosis and rendering all count, as a user sees them).  Synthetic
traces of the requested sizes are written first into a temporary directory.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from .diagnose_speed import report_command, run_once
from .synthetic import write_trace

LARGE_SHARED_LOGS = (
    "jlbez_8a_benchmark_write_parallel_id1322696_8-21-14519-8141979180909667175_12.darshan",
    "partial_data_dxt.darshan",
    "nonmpi_dxt_anonymized.darshan",
    "e3sm_io_heatmap_only.darshan",
)


def main(logs: list[str], *, synthetic: list[int]) -> int:
    work = Path(tempfile.mkdtemp(prefix="iopilot-bench-html-"))
    try:
        targets: list[tuple[str, str]] = []
        shared = Path(__file__).resolve().parents[3].parent / "shared" / "darshan-logs"
        logs = logs or [str(shared / n) for n in LARGE_SHARED_LOGS if (shared / n).exists()]
        targets += [(Path(p).name, p) for p in logs]
        for n in synthetic:
            print(f"writing a synthetic trace of {n:,} records ...", file=sys.stderr, flush=True)
            targets.append((f"synthetic {n:,} records", str(write_trace(work / f"s{n}", n))))
        width = max(len(t[0]) for t in targets) if targets else 10
        print(f"{'input':<{width}}  {'wall s':>7}  {'peak MiB':>8}  {'HTML MiB':>8}")
        for label, path in targets:
            page = work / "page.html"
            cmd = report_command(path, "--html", str(page), "--json", str(work / "r.json"),
                                 "-j", "1")  # fmt: skip
            wall, mem, rc = run_once(cmd)
            size = page.stat().st_size / 2**20 if page.exists() else float("nan")
            flag = f"  (exit {rc})" if rc not in (0, 1) else ""
            print(f"{label:<{width}}  {wall:>7.2f}  {mem:>8.0f}  {size:>8.1f}{flag}", flush=True)
            page.unlink(missing_ok=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0
