"""The runtime linked into programs (``iopilot cc``, runtime/link/), for the
HDF5 that Debian's plain ``h5cc`` links statically.

The same C programs (runtime/tests/h5_serial.c, h5_parallel.c) are built
twice: relinked through ``iopilot cc`` with the static HDF5, and against the
shared HDF5 (``-shlib``), which the preloaded runtime sees.  Both are traced
by ``iopilot run``; every H5F, H5D, MPI-IO and POSIX integer counter of the
data file must be the same, and so must the HDF5 notes (driver, library
version, properties).  What truly differs: the executable, the file's name,
and timing (the times, and which call was the slowest: MAX_*_TIME_SIZE).

A test is skipped only when its tool is missing (h5cc, h5pcc, mpirun).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iopilot import api
from iopilot.capture import link
from iopilot.sources import program
from iopilot.sources.iopilot_trace import read_trace
from rawtrace import RawProc

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "runtime" / "tests"
IOPILOT = [sys.executable, "-m", "iopilot"]
TIMEOUT = 180
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}  # fmt: skip
need_h5cc = pytest.mark.skipif(shutil.which("h5cc") is None, reason="h5cc not installed")
need_h5pcc = pytest.mark.skipif(shutil.which("h5pcc") is None or shutil.which("mpirun") is None,
                                reason="h5pcc or mpirun not installed")  # fmt: skip


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("IOPILOT_") and k != "LD_PRELOAD"}  # fmt: skip
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return {**env, **MPI_ENV, **extra}


def iopilot(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*IOPILOT, *args], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=TIMEOUT)  # fmt: skip


def build(cwd: Path, *command: str) -> None:
    p = subprocess.run(command, cwd=cwd, env=_env(), capture_output=True, text=True,
                       timeout=TIMEOUT)  # fmt: skip
    assert p.returncode == 0, f"{' '.join(command)}\n{p.stderr}"


def traced(cwd: Path, name: str, *command: str) -> Path:
    """``iopilot run`` of ``command`` into ``cwd/name``; the trace directory."""
    p = iopilot("run", "--trace-only", "--trace-dir", name, "--", *command, cwd=cwd)
    assert p.returncode == 0, p.stdout + p.stderr
    return cwd / name


# The size of the slowest read or write: which call was slowest is timing,
# not counting (the times themselves are floating-point counters, left out).
TIMING = ("MAX_READ_TIME_SIZE", "MAX_WRITE_TIME_SIZE")


def counters(trace: Path, data: Path) -> dict[tuple[int, str, str], dict[str, int]]:
    """{(rank, layer, path with the data file named X): integer counters} of a
    trace, but those of timing."""
    out = {}
    for f in sorted(trace.glob("p*.json")):
        p = RawProc(f)
        for (layer, path), c in p.counters.items():
            if path.startswith(str(data)):
                kept = {k: v for k, v in c.items() if k not in TIMING}
                out[(p.rank, layer, "X" + path[len(str(data)):])] = kept
    return out


def notes(trace: Path, data: Path) -> list[tuple[str, ...]]:
    """The HDF5 notes of a trace, the data file named X."""
    out = []
    for f in sorted(trace.glob("p*.json")):
        p = RawProc(f)
        names = {i: n for n, i in p.ids.items()}
        for fid, *text in p.notes:
            name = names.get(fid, "")
            if name.startswith(str(data)):
                out.append(("X" + name[len(str(data)):], *text))
    return sorted(out)


# --------------------------------------------------------------------------
# Serial HDF5: h5cc (static) relinked, against h5cc -shlib preloaded.


@pytest.fixture(scope="module")
def serial(tmp_path_factory) -> dict[str, Path]:
    if shutil.which("h5cc") is None:
        pytest.skip("h5cc not installed")
    d = tmp_path_factory.mktemp("serial")
    src = str(SOURCES / "h5_serial.c")
    build(d, *IOPILOT, "cc", "--", "h5cc", "-O1", "-o", "h5_linked", src)
    build(d, "h5cc", "-shlib", "-O1", "-o", "h5_shared", src)
    build(d, "h5cc", "-O1", "-o", "h5_static", src)
    out = {"dir": d}
    for v in ("linked", "shared"):
        out[f"{v}.h5"] = d / f"{v}.h5"
        out[v] = traced(d, f"trace-{v}", f"./h5_{v}", f"{v}.h5")
    return out


@need_h5cc
def test_relinked_static_hdf5_counts_what_preloading_counts_of_shared_hdf5(serial):
    linked = counters(serial["linked"], serial["linked.h5"])
    shared = counters(serial["shared"], serial["shared.h5"])
    layers = {layer for _, layer, _ in linked}
    assert layers == {"H5F", "H5D", "POSIX"}, layers
    assert {k[2] for k in linked if k[1] == "H5D"} == {"X:/x", "X:/g/grid"}
    assert linked == shared
    # the counts runtime/tests/h5_serial.c promises, so that equal is right
    x = next(v for k, v in linked.items() if k[1:] == ("H5D", "X:/x"))
    assert (x["OPENS"], x["CREATES"], x["WRITES"], x["BYTES_WRITTEN"], x["READS"]) == (
        3, 1, 10, 800_000, 4)
    assert notes(serial["linked"], serial["linked.h5"]) == \
        notes(serial["shared"], serial["shared.h5"])  # fmt: skip


@need_h5cc
def test_the_relinked_program_is_traced_once(serial):
    """``iopilot run`` preloads libiopilot.so into every program: in one that
    carries the runtime, the preloaded copy stands aside."""
    summaries = list(serial["linked"].glob("p*.json"))
    assert len(summaries) == 1
    s = json.loads(summaries[0].read_text())
    assert s["exe"] == str(serial["dir"] / "h5_linked") and not s["warnings"]
    # traced without any preloading, by the copy it carries: the same counts
    d = serial["dir"]
    (d / "own").mkdir()
    p = subprocess.run(["./h5_linked", "own.h5"], cwd=d, env=_env(IOPILOT_TRACE_DIR=str(d / "own")),
                       capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    assert p.returncode == 0 and p.stdout == "ok\n", p.stderr
    assert counters(d / "own", d / "own.h5") == counters(serial["shared"], serial["shared.h5"])


@need_h5cc
def test_untraced_the_relinked_program_writes_nothing_and_does_what_the_plain_one_does(serial):
    d = serial["dir"]
    results = {}
    for v in ("linked", "static"):
        box = d / f"untraced-{v}"
        for sub in ("cwd", "home", "tmp"):
            (box / sub).mkdir(parents=True)
        p = subprocess.run([str(d / f"h5_{v}"), "out.h5"], cwd=box / "cwd",
                           env=_env(HOME=str(box / "home"), TMPDIR=str(box / "tmp")),
                           capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
        files = sorted(str(f.relative_to(box)) for f in box.rglob("*") if f.is_file())
        results[v] = (p.returncode, p.stdout, p.stderr, files)
        assert files == ["cwd/out.h5"]  # nothing but the program's own file
    assert results["linked"] == results["static"]
    a, b = (d / f"untraced-{v}" / "cwd" / "out.h5" for v in ("linked", "static"))
    if shutil.which("h5dump"):
        dump = [subprocess.run(["h5dump", f.name], cwd=f.parent, capture_output=True,
                               text=True, timeout=TIMEOUT).stdout for f in (a, b)]  # fmt: skip
        assert dump[0] == dump[1] and "DATASET" in dump[0]
    assert a.stat().st_size == b.stat().st_size


@need_h5cc
def test_relinked_programs_are_not_said_to_hide_hdf5(serial):
    d = serial["dir"]
    assert program.static_layers([str(d / "h5_static")]) == {"HDF5": str(d / "h5_static")}
    assert program.static_layers([str(d / "h5_linked")]) == {}
    job = json.loads((serial["linked"] / "job.json").read_text())
    assert job["static_layers"] == {}
    diagnosis = api.diagnose(str(serial["linked"]))
    assert not [f for f in diagnosis.findings if f.check == "static-layers"]
    assert read_trace(str(serial["linked"])).job.static_layers == {}


# --------------------------------------------------------------------------
# Programs without HDF5, and libraries that call HDF5 for the program.

PLAIN_C = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "w");
    for (int i = 0; i < 100; i++) fprintf(f, "line %d\n", i);
    fclose(f);
    char buf[4096];
    int fd = open(argv[1], O_RDONLY);
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    printf("%zd\n", n);
    return 0;
}
"""

# Every HDF5 call is made by the high-level library, which h5cc links after
# the program's own options: its calls need entry points the linker had
# passed by then.
HL_ONLY_C = r"""
#include <hdf5.h>
#include <hdf5_hl.h>
#include <stdio.h>
int main(void) {
    hsize_t n = 4;
    int d[4] = {1, 2, 3, 4};
    printf("%d\n", H5LTmake_dataset_int(-1, "/d", 1, &n, d) < 0);
    return 0;
}
"""


def test_a_program_without_hdf5_links_and_is_traced_as_preloading_traces_it(tmp_path):
    (tmp_path / "plain.c").write_text(PLAIN_C)
    build(tmp_path, *IOPILOT, "cc", "--", "cc", "-O1", "-o", "linked", "plain.c")
    build(tmp_path, "cc", "-O1", "-o", "plain", "plain.c")
    assert program.inspect(str(tmp_path / "linked"))[1] == ()  # nor MPI-IO: libmpi is shared
    assert link.MARKER.encode() in (tmp_path / "linked").read_bytes()
    assert b"H5Dwrite" not in (tmp_path / "linked").read_bytes()  # the HDF5 layer stays out
    a = traced(tmp_path, "t-linked", "./linked", "a.txt")
    b = traced(tmp_path, "t-plain", "./plain", "b.txt")
    ca, cb = counters(a, tmp_path / "a.txt"), counters(b, tmp_path / "b.txt")
    assert {k[1] for k in ca} == {"POSIX", "STDIO"} and ca == cb


@need_h5cc
def test_entry_points_a_late_library_asks_for_are_linked_on_a_second_try(tmp_path):
    (tmp_path / "hl.c").write_text(HL_ONLY_C)
    plain = subprocess.run(["h5cc", "-o", "hl_plain", "hl.c", *link.link_flags()], cwd=tmp_path,
                           capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    assert plain.returncode != 0 and "undefined reference to `__wrap_H5Dwrite'" in plain.stderr
    build(tmp_path, *IOPILOT, "cc", "--", "h5cc", "-o", "hl", "hl.c")
    p = subprocess.run(["./hl"], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0 and p.stdout == "1\n"


# --------------------------------------------------------------------------
# Parallel HDF5: h5pcc (static) relinked, mpirun of 2 ranks.


@need_h5pcc
def test_relinked_parallel_hdf5_under_mpirun_counts_what_preloading_counts(tmp_path):
    src = str(SOURCES / "h5_parallel.c")
    build(tmp_path, *IOPILOT, "cc", "--", "h5pcc", "-O1", "-o", "p_linked", src)
    build(tmp_path, "h5pcc", "-shlib", "-O1", "-o", "p_shared", src)
    got = {}
    for v in ("linked", "shared"):
        trace = traced(tmp_path, f"t-{v}", "mpirun", "-np", "2", f"./p_{v}", f"{v}.h5", "65536")
        assert len(list(trace.glob("p*.json"))) == 2
        got[v] = counters(trace, tmp_path / f"{v}.h5")
    assert {k[1] for k in got["linked"]} == {"H5F", "H5D", "MPIIO", "POSIX"}
    assert {k[0] for k in got["linked"]} == {0, 1}
    assert got["linked"] == got["shared"]
    job = json.loads((tmp_path / "t-linked" / "job.json").read_text())
    assert job["static_layers"] == {}


# --------------------------------------------------------------------------
# The link build with ASan and UBSan (make -C runtime sanitize).


@need_h5cc
def test_sanitizer_build_of_the_link_mode(sanitized, tmp_path):
    exe = sanitized / "h5link-asan"
    assert exe.exists(), "make -C runtime sanitize builds h5link-asan where h5cc is"
    (tmp_path / "t").mkdir()
    p = subprocess.run([str(exe), "s.h5"], cwd=tmp_path,
                       env=_env(IOPILOT_TRACE_DIR=str(tmp_path / "t"),
                                ASAN_OPTIONS="detect_leaks=0"),
                       capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    assert p.returncode == 0 and p.stdout == "ok\n", p.stderr
    c = counters(tmp_path / "t", tmp_path / "s.h5")
    grid = next(v for k, v in c.items() if k[1:] == ("H5D", "X:/g/grid"))
    assert (grid["WRITES"], grid["BYTES_WRITTEN"], grid["READS"], grid["BYTES_READ"]) == (
        1, 240_000, 3, 258_020)


# --------------------------------------------------------------------------
# The command line.


def test_flags_name_the_archive_the_wrapped_functions_and_the_marker(tmp_path):
    p = iopilot("cc", "--flags", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    words = p.stdout.split()
    assert words[0] == f"-Wl,-u,{link.MARKER}"
    assert "-Wl,--wrap=H5Dwrite" in words and "-Wl,--wrap=H5Fcreate" in words
    assert not any("--wrap=pwrite" in w for w in words)  # libc's: defined and exported instead
    archive = next(w for w in words if w.endswith(link.ARCHIVE))
    assert Path(archive).exists()
    exports = next(w for w in words if w.startswith("-Wl,--dynamic-list="))
    listed = Path(exports.split("=", 1)[1]).read_text()
    assert "  pwrite;" in listed and f"  {link.MARKER};" in listed and "H5" not in listed


def test_compiling_without_linking_is_left_alone():
    assert link.compile_command(["cc", "-c", "a.c"]) == ["cc", "-c", "a.c"]
    assert link.compile_command(["cc", "-shared", "-o", "l.so", "a.o"])[-1] == "a.o"
    assert link.compile_command(["cc", "-o", "a", "a.c"])[-1] == "-pthread"


@pytest.mark.parametrize("args, says", [
    ([], "no compiler command"),
    (["--", "/no/such/compiler", "-o", "x", "x.c"], "cannot run the compiler"),
])  # fmt: skip
def test_bad_commands_are_one_line_errors(tmp_path, args, says):
    p = iopilot("cc", *args, cwd=tmp_path)
    assert p.returncode == 2 and says in p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
