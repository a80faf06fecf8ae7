"""``iopilot bench runtime``: what tracing costs a program.

(a) the worst case: many one-byte writes to /dev/null, where the system call
    is as cheap as it gets and the runtime's own work shows most;
(b) a kernel: write a file in blocks, fsync, read it back (``--block-kib 4``
    gives IOR-style 4 KiB POSIX transfers).

Each variant runs several times, alternating traced and untraced (and which
of the two goes first), and the best time of each is compared: noise only
ever adds time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..runtime_lib import library_path


def _probe() -> Path:
    exe = library_path().parent / "iop-overhead"
    if not exe.exists():
        raise SystemExit(f"iopilot bench runtime: {exe} is missing; run `make` first")
    return exe


def _time(argv: list[str], traced: bool, trace_root: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "IOPILOT_TRACE_DIR")}
    tdir = None
    if traced:
        tdir = Path(tempfile.mkdtemp(dir=trace_root))
        env["LD_PRELOAD"] = str(library_path())
        env["IOPILOT_TRACE_DIR"] = str(tdir)
        # /dev/null is a character device under /dev: traced only when asked
        env["IOPILOT_TRACE_SPECIAL"] = "1"
        env["IOPILOT_EXCLUDE"] = "/proc/:/sys/"
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    if tdir is not None:
        shutil.rmtree(tdir, ignore_errors=True)
    return float(out.strip())


def best(argv: list[str], repeat: int, trace_root: Path) -> tuple[float, float]:
    plain, traced = [], []
    for i in range(repeat):
        # Alternate which goes first: the disk favours whichever follows a rest.
        for is_traced in ((False, True) if i % 2 == 0 else (True, False)):
            (traced if is_traced else plain).append(_time(argv, is_traced, trace_root))
    return min(plain), min(traced)


def main(*, calls: int, mib: int, block_kib: int, repeat: int, dir: str | None) -> int:
    exe = _probe()
    work = Path(dir) if dir else Path(tempfile.mkdtemp(prefix="iopilot-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        n = calls
        plain, traced = best([str(exe), "tiny", str(n)], repeat, work)
        print(f"(a) {n:,} one-byte writes to /dev/null, best of {repeat}:")
        print(f"    untraced {plain:.3f} s ({plain / n * 1e9:.0f} ns/call), traced {traced:.3f} s "
              f"({traced / n * 1e9:.0f} ns/call): +{(traced - plain) / n * 1e9:.0f} ns per call")
        data = work / "kernel.dat"
        argv = [str(exe), "kernel", str(data), str(mib), str(block_kib)]
        plain, traced = best(argv, repeat, work)
        print(f"(b) write {mib} MiB in {block_kib} KiB blocks, fsync, read back, "
              f"best of {repeat}:")
        print(f"    untraced {plain:.3f} s, traced {traced:.3f} s: "
              f"{traced / plain:.3f}x ({100 * (traced - plain) / plain:+.2f} %)")
    finally:
        if not dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0
