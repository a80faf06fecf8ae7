"""``iopilot bench bigtrace``: time and peak memory of ``iopilot report`` on
real traces of millions of records.

A small C program makes N one-byte ``write`` calls to one file; it runs
under ``iopilot run --trace-only``, and ``iopilot report TRACE`` (the
command a user runs, terminal report) is timed in a fresh process, several
times.  Peak memory is the report process's maximum resident set size
(``wait4``), the interpreter and NumPy included; the same command on a
trace of 10 records gives that floor.  A benchmark prints figures; nothing
here asserts a limit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .diagnose_speed import _ENV, report_command

# N one-byte writes to PATH.  With BURST, a pause of 20 ms after every BURST
# writes (I/O phases), and every tenth write goes to PATH.again instead, at
# one of 1,000 offsets in turn (the same bytes written again and again).
PROGRAM = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s PATH N [BURST]\n", argv[0]);
        return 2;
    }
    long n = atol(argv[2]), burst = argc > 3 ? atol(argv[3]) : 0;
    char again[4096];
    snprintf(again, sizeof again, "%s.again", argv[1]);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int fd2 = burst > 0 ? open(again, O_WRONLY | O_CREAT | O_TRUNC, 0600) : -1;
    if (fd < 0 || (burst > 0 && fd2 < 0)) {
        perror("open");
        return 1;
    }
    const struct timespec pause = {0, 20 * 1000 * 1000};
    for (long i = 0; i < n; i++) {
        if (burst > 0 && i % 10 == 9) {
            if (pwrite(fd2, "y", 1, i / 10 % 1000) != 1) {
                perror("pwrite");
                return 1;
            }
        } else if (write(fd, "x", 1) != 1) {
            perror("write");
            return 1;
        }
        if (burst > 0 && (i + 1) % burst == 0 && i + 1 < n)
            nanosleep(&pause, NULL);
    }
    if (close(fd) || (fd2 >= 0 && close(fd2))) {
        perror("close");
        return 1;
    }
    return 0;
}
"""


RECORD_BYTES = 56  # one operation in a trace's record file (docs/trace-format.md)

# Runs a command and prints its wall seconds, peak RSS (KiB) and exit status.
# The measured process is started by this small interpreter, not by the
# bench: a child's peak starts at what its parent held when it was started.
_MEASURE = """
import os, resource, sys, time
t = time.perf_counter()
pid = os.posix_spawnp(sys.argv[1], sys.argv[1:], os.environ, file_actions=[
    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)])
_, status = os.waitpid(pid, 0)
wall = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(wall, peak, os.waitstatus_to_exitcode(status))
"""


def measure(cmd: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MiB, exit status) of ``cmd``, its output discarded."""
    out = subprocess.run([sys.executable, "-I", "-S", "-c", _MEASURE, *cmd], env=_ENV,
                         check=True, capture_output=True, text=True).stdout.split()  # fmt: skip
    return float(out[0]), int(out[1]) / 1024, int(out[2])


def build_program(where: Path) -> Path:
    """Compile :data:`PROGRAM` into ``where``; its path."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("iopilot bench bigtrace: no C compiler (cc or gcc) found")
    src, exe = where / "writes.c", where / "writes"
    src.write_text(PROGRAM)
    subprocess.run([cc, "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(src)],
                   check=True)  # fmt: skip
    return exe


def trace_program(exe: Path, work: Path, records: int, burst: int = 0) -> Path:
    """Run the program under ``iopilot run --trace-only`` (``records``
    writes, into ``work``); the trace directory."""
    trace = work / f"trace-{records}"
    cmd = [sys.executable, "-m", "iopilot", "run", "--trace-only", "--trace-dir", str(trace),
           "--max-records", str(records + 16), "--", str(exe), str(work / f"data-{records}"),
           str(records), *([str(burst)] if burst else [])]  # fmt: skip
    done = subprocess.run(cmd, env=_ENV, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"iopilot bench bigtrace: tracing failed (exit {done.returncode}): "
                         f"{done.stderr.strip()}")  # fmt: skip
    return trace


def disk_needed(records: int) -> int:
    """Bytes a trace of ``records`` writes and the file they write take."""
    return RECORD_BYTES * (records + 2) + records + (1 << 20)  # + the header and summaries


def parse_count(text: str) -> int:
    """"5m" -> 5,000,000 ("k", "m", "g": thousands, millions, billions)."""
    t = text.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 10**3, "m": 10**6, "g": 10**9}.get(t[-1:], 1)
    digits = t[:-1] if scale > 1 else t
    try:
        value = float(digits) * scale
    except ValueError:
        raise ValueError(f"not a record count: {text!r} (e.g. 5m, 200k, 5000000)") from None
    if value < 1 or value != int(value):
        raise ValueError(f"not a record count: {text!r} (e.g. 5m, 200k, 5000000)")
    return int(value)


def main(counts: list[int], *, repeat: int = 3, html: bool = False,
         dir: str | None = None) -> int:  # fmt: skip
    """Trace the program at each of ``counts`` records and time ``iopilot
    report`` on it ``repeat`` times (also ``--html`` when asked)."""
    work = Path(tempfile.mkdtemp(prefix="iopilot-bench-bigtrace-", dir=dir))
    try:
        return _main(counts, repeat, html, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _main(counts: list[int], repeat: int, html: bool, work: Path) -> int:
    free = shutil.disk_usage(work).free
    for n in counts:
        if disk_needed(n) > free:
            print(f"iopilot: error: {work}: {n:,} records need {disk_needed(n) / 2**30:.1f} "
                  f"GiB of disk, {free / 2**30:.1f} GiB free", file=sys.stderr)  # fmt: skip
            return 2
    exe = build_program(work)
    load_before = os.getloadavg()[0]
    floor = trace_program(exe, work, 10)
    runs = [measure(report_command(str(floor))) for _ in range(max(1, repeat))]
    base = max(r[1] for r in runs)
    print(f"{'records':>12} {'trace MiB':>9} {'report':>7} {'s min':>6} {'s max':>6} "
          f"{'peak MiB':>8} {'bytes/record':>12}")  # fmt: skip
    print(f"{10:>12,} {'':>9} {'':>7} {min(r[0] for r in runs):>6.2f} "
          f"{max(r[0] for r in runs):>6.2f} {base:>8.0f} {'':>12}  (the floor: interpreter, "
          f"NumPy, iopilot)", flush=True)  # fmt: skip
    for n in counts:
        print(f"tracing {n:,} one-byte writes ...", file=sys.stderr, flush=True)
        trace = trace_program(exe, work, n)
        size = sum(f.stat().st_size for f in trace.iterdir()) / 2**20
        (work / f"data-{n}").unlink(missing_ok=True)
        kinds = [("terminal", ())] + ([("html", ("--html", str(work / "page.html")))]
                                      if html else [])  # fmt: skip
        for kind, extra in kinds:
            runs = [measure(report_command(str(trace), *extra)) for _ in range(max(1, repeat))]
            peak = max(r[1] for r in runs)
            flag = "".join(f"  (exit {r[2]})" for r in runs if r[2] not in (0, 1))
            print(f"{n:>12,} {size:>9.0f} {kind:>7} {min(r[0] for r in runs):>6.2f} "
                  f"{max(r[0] for r in runs):>6.2f} {peak:>8.0f} "
                  f"{peak * 2**20 / n:>12.1f}{flag}", flush=True)  # fmt: skip
        shutil.rmtree(trace, ignore_errors=True)
    print(f"\n{os.cpu_count()} cores; load average {load_before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after; {max(1, repeat)} runs each, peak the largest")
    return 0
