"""``iopilot bench runtime``: what tracing costs a program.

(a) the worst case: many one-byte writes to /dev/null, where the system call
    is as cheap as it gets and the runtime's own work shows most;
(b) a kernel: write a file in blocks, fsync, read it back (``--block-kib 4``
    gives IOR-style 4 KiB POSIX transfers);
(c) call sites: (a) with the runtime's call sites on and off (IOPILOT_SITES=0),
    from one call site, and from 4,096 call sites in turn (each call from
    another site than the last);
(d) a Python program (unbuffered writes, numpy's tofile and fromfile), whose
    call sites are its Python lines: the whole run, traced and untraced.

Each variant runs several times, alternating traced and untraced (and which
of the two goes first), and the best time of each is compared: noise only
ever adds time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..runtime_lib import library_path


def _probe() -> Path:
    exe = library_path().parent / "iop-overhead"
    if not exe.exists():
        raise SystemExit(f"iopilot bench runtime: {exe} is missing; run `make` first")
    return exe


# (d): the I/O a Python program makes, through the interpreter and numpy
PYTHON_PROGRAM = """
import os, sys, time
import numpy as np
t = time.perf_counter()
with open("rows.bin", "wb", buffering=0) as f:
    for i in range(20000):
        f.write(b"%08d" % i)
a = np.arange(4096.0)
for step in range(200):
    a.tofile("step.bin")
    b = np.fromfile("step.bin")
os.unlink("rows.bin"); os.unlink("step.bin")
print(time.perf_counter() - t)
"""


def _time(argv: list[str], traced: bool, trace_root: Path,
          extra: dict[str, str] | None = None, wall: bool = False) -> float:  # fmt: skip
    """Seconds the probe prints (``wall``: of the whole process, start-up too)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "IOPILOT_TRACE_DIR")}
    env.update(extra or {})
    tdir = None
    if traced:
        tdir = Path(tempfile.mkdtemp(dir=trace_root))
        env["LD_PRELOAD"] = str(library_path())
        env["IOPILOT_TRACE_DIR"] = str(tdir)
        # /dev/null is a character device under /dev: traced only when asked
        env["IOPILOT_TRACE_SPECIAL"] = "1"
        env["IOPILOT_EXCLUDE"] = "/proc/:/sys/"
    t = time.perf_counter()
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True,
                         cwd=trace_root).stdout  # fmt: skip
    t = time.perf_counter() - t
    if tdir is not None:
        shutil.rmtree(tdir, ignore_errors=True)
    return t if wall else float(out.strip())


def best(argv: list[str], repeat: int, trace_root: Path) -> tuple[float, float]:
    plain, traced = [], []
    for i in range(repeat):
        # Alternate which goes first: the disk favours whichever follows a rest.
        for is_traced in ((False, True) if i % 2 == 0 else (True, False)):
            (traced if is_traced else plain).append(_time(argv, is_traced, trace_root))
    return min(plain), min(traced)


def best_sites(argv: list[str], repeat: int, trace_root: Path) -> tuple[float, float]:
    """Best traced times with call sites off and on, alternating."""
    off, on = [], []
    for i in range(repeat):
        for sites in ((False, True) if i % 2 == 0 else (True, False)):
            extra = None if sites else {"IOPILOT_SITES": "0"}
            (on if sites else off).append(_time(argv, True, trace_root, extra))
    return min(off), min(on)


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
        print(f"(c) call sites, {n:,} one-byte writes traced, best of {repeat}, sites off / on:")
        for mode, what in (("tiny", "one call site"), ("sites", "4,096 call sites in turn")):
            off, on = best_sites([str(exe), mode, str(n)], repeat, work)
            print(f"    {what:<26} {off / n * 1e9:.0f} / {on / n * 1e9:.0f} ns per call: "
                  f"{(on - off) / n * 1e9:+.0f} ns per call")
        prog = work / "io_program.py"
        prog.write_text(PYTHON_PROGRAM)
        argv = [sys.executable, str(prog)]
        plain = min(_time(argv, False, work, wall=True) for _ in range(repeat))
        traced = min(_time(argv, True, work, wall=True) for _ in range(repeat))
        print(f"(d) a Python program (20,000 unbuffered writes, 200 numpy tofile/fromfile), "
              f"whole run, best of {repeat}:")
        print(f"    untraced {plain:.3f} s, traced with its Python lines {traced:.3f} s: "
              f"{traced / plain:.3f}x")
    finally:
        if not dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0
