"""``iopilot bench export``: time, peak memory and size of ``iopilot export
perfetto``.

Each target runs as ``iopilot export perfetto TARGET -o FILE`` in a fresh
process (loading the trace and writing the file both count, as a user sees
them), once per format.  Synthetic traces of the requested sizes are written
first into a temporary directory; the loading alone is timed too, so the
exporter's own share of time and memory shows.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from .diagnose_speed import run_once
from .synthetic import write_trace

FORMATS = {"perfetto": "out.pftrace", "json": "out.json"}


def main(logs: list[str], *, synthetic: list[int], formats: list[str]) -> int:
    work = Path(tempfile.mkdtemp(prefix="iopilot-bench-export-"))
    try:
        targets = [(Path(p).name, p) for p in logs]
        for n in synthetic:
            print(f"writing a synthetic trace of {n:,} records ...", file=sys.stderr, flush=True)
            targets.append((f"synthetic {n:,} records", str(write_trace(work / f"s{n}", n))))
        width = max([len(t[0]) for t in targets] + [5])
        print(f"{'input':<{width}}  {'format':<8}  {'wall s':>7}  {'peak MiB':>8}  "
              f"{'file MiB':>8}")  # fmt: skip
        for label, path in targets:
            wall, mem, rc = run_once(_load_command(path))
            print(f"{label:<{width}}  {'(load)':<8}  {wall:>7.2f}  {mem:>8.0f}  {'':>8}"
                  + _flag(rc), flush=True)  # fmt: skip
            for fmt in formats:
                out = work / FORMATS[fmt]
                cmd = [sys.executable, "-m", "iopilot", "export", "perfetto", path,
                       "-o", str(out), "--format", fmt]  # fmt: skip
                wall, mem, rc = run_once(cmd)
                size = out.stat().st_size / 2**20 if out.exists() else float("nan")
                print(f"{label:<{width}}  {fmt:<8}  {wall:>7.2f}  {mem:>8.0f}  {size:>8.1f}"
                      + _flag(rc), flush=True)  # fmt: skip
                out.unlink(missing_ok=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _load_command(path: str) -> list[str]:
    """Loading alone, every column read: the floor under the export."""
    code = ("import sys; from iopilot import api; t = api.load(sys.argv[1]); "
            "[getattr(r, f).sum() for r in (t.records, t.meta_records) "
            "for f in ('rank', 'start', 'end', 'offset', 'length', 'file_id')]")  # fmt: skip
    return [sys.executable, "-c", code, path]


def _flag(rc: int) -> str:
    return f"  (exit {rc})" if rc else ""
