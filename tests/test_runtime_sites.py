"""The runtime's call sites: each record names the line of the program that
made the call, counts per site are exact, and the ways a site is found (the
caller's return address, an upper layer's scope, the unwinder through a
library, the Python frames) each give the program's own line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from iopilot.capture.run import library_path
from iopilot.sources import load
from rawtrace import RawProc

CC = shutil.which("cc") or shutil.which("gcc")
CXX = shutil.which("c++") or shutil.which("g++")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")


def line_of(src: str, marker: str) -> int:
    """The line of ``marker`` in ``src`` (1-based): no hard-coded numbers."""
    text = textwrap.dedent(src).lstrip()  # as build() writes it
    lines = [i for i, text in enumerate(text.splitlines(), 1) if marker in text]
    assert len(lines) == 1, (marker, lines)
    return lines[0]


def traced(tmp: Path, argv: list[str], env: dict[str, str] | None = None) -> Path:
    out = tmp / "trace"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir()
    e = dict(os.environ, IOPILOT_TRACE_DIR=str(out), LD_PRELOAD=str(library_path()))
    e.update(env or {})
    subprocess.run(argv, cwd=tmp, env=e, check=True, timeout=120)
    return out


def procs(trace: Path) -> list[RawProc]:
    return [RawProc(p) for p in sorted(trace.glob("*.json")) if p.name != "job.json"]


def build(tmp: Path, name: str, src: str, *flags: str, cxx: bool = False) -> Path:
    path = tmp / name
    path.write_text(textwrap.dedent(src).lstrip())
    exe = tmp / path.stem
    subprocess.run([CXX if cxx else CC, *flags, "-o", str(exe), str(path)], check=True)
    return exe


C_PROGRAM = """
#include <fcntl.h>
#include <unistd.h>
static void rows(int fd, int n) {
    char b[8] = "abcdefg";
    for (int i = 0; i < n; i++)
        if (write(fd, b, 8) != 8) _exit(2); /* ROWS */
}
int main(int argc, char **argv) {
    int fd = open("out.dat", O_CREAT | O_WRONLY | O_TRUNC, 0644); /* OPEN */
    rows(fd, 300);
    for (int s = 0; s < 7; s++)
        fsync(fd); /* SYNC */
    close(fd);
    return 0;
}
"""


@pytest.mark.parametrize("flags", [("-O2", "-g"), ("-O2",), ("-O2", "-g", "-fomit-frame-pointer")],
                         ids=["g", "no-debug", "no-frame-pointer"])  # fmt: skip
def test_each_record_names_its_line_and_counts_are_exact(tmp_path, flags):
    exe = build(tmp_path, "prog.c", C_PROGRAM, *flags)
    trace = traced(tmp_path, [str(exe)])
    (p,) = procs(trace)
    sites = {s["id"]: s for s in p.json["sites"]}
    posix = [r for r in p.records if r.layer == 0]
    per_site = Counter(r.site for r in posix)
    assert 0 not in per_site  # every record has a site
    # exact counts: the site of the 300 writes holds 300 calls and 2,400 bytes
    writes = {r.site for r in posix if r.op == 1}
    assert len(writes) == 1
    (w,) = writes
    assert sites[w]["count"] == per_site[w] == 300 and sites[w]["bytes"] == 2400
    syncs = {r.site for r in posix if r.op not in (0, 1) and r.site != w}
    assert any(sites[s]["count"] == 7 for s in syncs)
    # the frames are in the program itself, and name the lines (with -g)
    mod = p.json["modules"][sites[w]["frames"][0][0]]
    assert Path(mod["path"]).resolve() == exe.resolve() and not mod["library"]
    tr = load(str(trace))
    labels = {tr.sites.label(i) for i in range(1, len(tr.sites))}
    src = C_PROGRAM
    if "-g" in flags:
        assert f"prog.c:{line_of(src, 'ROWS')} rows" in labels or \
            f"prog.c:{line_of(src, 'ROWS')} main" in labels, labels  # fmt: skip
        assert any(lab.startswith(f"prog.c:{line_of(src, 'SYNC')} ") for lab in labels), labels
        assert any(lab.startswith(f"prog.c:{line_of(src, 'OPEN')} ") for lab in labels), labels
    else:  # the symbol table names the function, no line
        assert not any("prog.c:" in lab for lab in labels), labels
        assert any(lab.startswith("main ") or lab.startswith("rows ") for lab in labels), labels


def test_sites_off_leave_records_without_sites(tmp_path):
    exe = build(tmp_path, "prog.c", C_PROGRAM, "-O2")
    (p,) = procs(traced(tmp_path, [str(exe)], {"IOPILOT_SITES": "0"}))
    assert "sites" not in p.json and "modules" not in p.json
    assert p.records and {r.site for r in p.records} == {0}


MANY = """
#include <fcntl.h>
#include <unistd.h>
int main(void) {
    int fd = open("many.dat", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    char c = 'x';
#define W1 if (write(fd, &c, 1) != 1) return 1;
#define W8 W1 W1 W1 W1 W1 W1 W1 W1
#define W64 W8 W8 W8 W8 W8 W8 W8 W8
#define W512 W64 W64 W64 W64 W64 W64 W64 W64
    for (int round = 0; round < 3; round++) {
        W512 W512 W512 W512 W512 W512 W512 W512 W512 W512 W512 W512
    }
    close(fd);
    return 0;
}
"""


def test_thousands_of_sites_each_counted_exactly(tmp_path):
    """6,144 call sites, more than a thread's cache holds, each called 3
    times: every one is its own site with exactly 3 calls."""
    exe = build(tmp_path, "many.c", MANY, "-O1")
    (p,) = procs(traced(tmp_path, [str(exe)]))
    writes = [r for r in p.records if r.layer == 0 and r.op == 1]
    assert len(writes) == 3 * 6144
    per_site = Counter(r.site for r in writes)
    assert len(per_site) == 6144 and set(per_site.values()) == {3}
    sites = {s["id"]: s for s in p.json["sites"]}
    assert all(sites[s]["count"] == 3 and sites[s]["bytes"] == 3 for s in per_site)


THREADS = """
#include <fcntl.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
static int fd;
static void *work(void *arg) {
    for (int i = 0; i < 5000; i++)
        if (write(fd, "ab", 2) != 2) return arg; /* THREAD */
    return NULL;
}
int main(void) {
    fd = open("t.dat", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, work, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 11; i++) write(fd, "c", 1); /* CHILD */
        _exit(0);
    }
    waitpid(pid, NULL, 0); /* the child's summary is there when we end */
    close(fd);
    return 0;
}
"""


def test_threads_share_a_site_and_a_forked_child_counts_its_own(tmp_path):
    exe = build(tmp_path, "thr.c", THREADS, "-O2", "-g", "-pthread")
    trace = traced(tmp_path, [str(exe)])
    by_pid = {p.json["pid"]: p for p in procs(trace)}
    child = next(p for p in by_pid.values() if p.json["ppid"] in by_pid)
    parent = by_pid[child.json["ppid"]]
    counts = {s["count"] for s in parent.json["sites"]}
    assert 20000 in counts  # 4 threads x 5,000 writes, one site
    child_counts = sorted(s["count"] for s in child.json["sites"])
    assert 11 in child_counts and 20000 not in child_counts  # fresh figures in the child


CPP = """
#include <fstream>
int main() {
    std::ofstream out("cpp.dat", std::ios::binary);
    for (int i = 0; i < 200; i++) {
        out.write("12345678", 8);
        out.flush(); // FLUSH
    }
    return 0;
}
"""


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
@pytest.mark.parametrize("flags", [("-O2", "-g"), ("-O2", "-g", "-fomit-frame-pointer")],
                         ids=["g", "no-frame-pointer"])  # fmt: skip
def test_writes_inside_libstdcxx_are_placed_at_the_programs_line(tmp_path, flags):
    """std::ofstream's writes are made by libstdc++: the unwinder finds the
    program's frame behind it, with or without frame pointers."""
    exe = build(tmp_path, "prog.cpp", CPP, *flags, cxx=True)
    trace = traced(tmp_path, [str(exe)])
    (p,) = procs(trace)
    writes = [r for r in p.records if r.layer == 0 and r.op == 1]
    assert len(writes) == 200
    tr = load(str(trace))
    (site,) = {r.site for r in writes}
    sites = {s["id"]: s for s in p.json["sites"]}
    assert not sites[site].get("library")
    labels = {tr.sites.label(i) for i in range(1, len(tr.sites))}
    assert any(lab.startswith(f"prog.cpp:{line_of(CPP, 'FLUSH')} ") for lab in labels), labels


PY = """
import numpy as np

def save_rows(path):
    f = open(path, "wb", buffering=0)
    for i in range(40):
        f.write(b"12345678")  # ROWS
    f.close()

def main():
    save_rows("a.bin")
    a = np.arange(1000.0)
    for i in range(5):
        a.tofile("n.bin")  # TOFILE
main()
"""


def test_python_lines_also_through_numpy_and_with_the_lock_released(tmp_path):
    """A raw file's write and numpy's tofile run with the interpreter's lock
    released: the site is still the program's line."""
    (tmp_path / "prog.py").write_text(textwrap.dedent(PY).lstrip())  # as line_of reads it
    trace = traced(tmp_path, [sys.executable, "prog.py"])
    procs_ = procs(trace)
    tr = load(str(trace))
    rows, tofile = line_of(PY, "ROWS"), line_of(PY, "TOFILE")
    found = {}
    for p in procs_:
        for s in p.json["sites"]:
            if "python" in s:
                file, line, func = s["python"][0]
                if file.endswith("prog.py"):
                    found[(line, func)] = found.get((line, func), 0) + s["count"]
    assert found.get((rows, "save_rows"), 0) >= 40, found
    assert found.get((tofile, "main"), 0) >= 5, found
    labels = {tr.sites.label(i) for i in range(1, len(tr.sites))}
    assert f"prog.py:{rows} save_rows" in labels and f"prog.py:{tofile} main" in labels, labels


def test_summary_lists_modules_with_build_ids(tmp_path):
    exe = build(tmp_path, "prog.c", C_PROGRAM, "-O2", "-Wl,--build-id")
    (p,) = procs(traced(tmp_path, [str(exe)]))
    mods = {Path(m["path"]).name: m for m in p.json["modules"]}
    assert mods[exe.name]["build_id"] and not mods[exe.name]["library"]
    libc = next(m for name, m in mods.items() if name.startswith("libc.so"))
    assert libc["library"]
    json.dumps(p.json)  # plain data


CHURN = """
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static int fd;
static void *work(void *arg) {
    for (int i = 0; i < 50; i++)
        if (write(fd, "ab", 2) != 2) return arg; /* CHURN */
    return NULL;
}
int main(void) {
    fd = open("c.dat", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (int i = 0; i < 300; i++) { /* one thread after another */
        pthread_t t;
        pthread_create(&t, NULL, work, NULL);
        pthread_join(t, NULL);
    }
    FILE *m = fopen("/proc/self/status", "r");
    char line[512];
    long kib = 0;
    while (fgets(line, sizeof line, m))
        if (sscanf(line, "VmSize: %ld", &kib) == 1) break;
    fclose(m);
    printf("%ld\\n", kib);
    close(fd);
    return 0;
}
"""


def test_threads_that_end_give_their_figures_and_their_cache(tmp_path):
    """300 threads one after another, 50 writes each from one line: the site
    counts all 15,000 (each thread's figures given back when it ends), and
    the process does not keep one site cache per thread that ever ran."""
    exe = build(tmp_path, "churn.c", CHURN, "-O2", "-pthread")
    size = {}
    for sites in ("0", "1"):
        out = tmp_path / f"trace{sites}"
        out.mkdir()
        env = dict(os.environ, IOPILOT_TRACE_DIR=str(out), LD_PRELOAD=str(library_path()),
                   IOPILOT_SITES=sites)  # fmt: skip
        run = subprocess.run([str(exe)], cwd=tmp_path, env=env, capture_output=True,
                             text=True, check=True)  # fmt: skip
        size[sites] = int(run.stdout)
    (p,) = procs(tmp_path / "trace1")
    writes = [r for r in p.records if r.layer == 0 and r.op == 1]
    (site,) = {r.site for r in writes}
    sites = {s["id"]: s for s in p.json["sites"]}
    assert sites[site]["count"] == 15000 and sites[site]["bytes"] == 30000
    # with call sites: the site table (reserved, not touched) and one cache
    # of 160 KiB per live thread; one per thread that ran would be 48 MiB
    table = (65536 * 64 + 131072 * 4) // 1024
    assert size["1"] - size["0"] < table + 8 * 1024, size
