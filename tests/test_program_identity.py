"""Who the traced program is: its language (Python behind any launcher, Fortran,
C++, C) and the I/O layers linked statically into it, from command lines,
from real executables built here, and from real traced runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iopilot import api
from iopilot.capture.run import library_path
from iopilot.model.command import command_language, program_start, short_command
from iopilot.sources import program
from iopilot.sources.iopilot_trace import read_trace

IOPILOT = [sys.executable, "-m", "iopilot"]
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}  # fmt: skip
HDF5_C = r"""
#include <hdf5.h>
int main(void) {
    hsize_t n[1] = {1024};
    int buf[1024] = {0};
    hid_t f = H5Fcreate("out.h5", H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t s = H5Screate_simple(1, n, NULL);
    hid_t d = H5Dcreate2(f, "x", H5T_NATIVE_INT, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    for (int i = 0; i < 20; i++) H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    H5Dclose(d); H5Sclose(s); H5Fclose(f);
    return 0;
}
"""
WRITE_C = r"""
#include <stdio.h>
int main(void) {
    FILE *f = fopen("out.dat", "w");
    for (int i = 0; i < 100; i++) fprintf(f, "%d\n", i);
    fclose(f);
    return 0;
}
"""
WRITE_CPP = r"""
#include <fstream>
int main() {
    std::ofstream f("out.dat");
    for (int i = 0; i < 100; i++) f << i << "\n";
    return 0;
}
"""
WRITE_F90 = """
program w
  integer :: i
  open(10, file='out.dat', form='unformatted', access='stream')
  do i = 1, 100
    write(10) i
  end do
  close(10)
end program w
"""
WRITE_PY = """
import sys
with open("out.dat", "wb") as f:
    for i in range(100):
        f.write(b"x" * 64)
"""


# --- command lines -------------------------------------------------------------------------


@pytest.mark.parametrize("command", [
    "python3 x.py",
    "/usr/bin/python3.11 x.py --steps 3",
    "mpirun -np 4 python3 x.py",
    "mpirun -np 4 --oversubscribe --allow-run-as-root python3 x.py",
    "mpirun --hostfile hosts -np 2 python x.py",
    "mpiexec -n 2 -x LD_PRELOAD=/l.so python3 -m mypkg.run",
    "srun -n 2 --mpi=pmix python x.py",
    "srun python x.py",
    "python -m pkg",
    "/usr/bin/env python3 x.py",
    "env OMP_NUM_THREADS=2 pypy3 x.py",
    "sh -c python3",
    "./analysis.py input.h5",
    "mpirun -np 2 ./analysis.py",
])  # fmt: skip
def test_python_behind_any_launcher(command):
    assert command_language(command) == "python"
    assert command_language(command.split()) == "python"


@pytest.mark.parametrize("command", [
    "./a.out", "mpirun -np 4 ./a.out", "srun -n 2 ./writer data.py", "mpirun -np 4 a.out in.py",
    "env X=1 ./prog", "mpirun", "", "/usr/bin/env ./sim --python 3",
])  # fmt: skip
def test_other_programs_and_launchers_alone_are_not_python(command):
    # the program is found first: its arguments never decide
    assert command_language(command) == ""


def test_program_start_skips_launchers_options_and_their_values():
    assert program_start("mpirun -np 4 --map-by slot ./a.out -n 3".split()) == 5
    assert program_start(["srun", "-N", "2", "-n", "8", "./a.out"]) == 5
    assert program_start(["./a.out", "-np", "4"]) == 0
    assert program_start(["mpirun", "-np", "4"]) == 3


def test_short_command_keeps_the_program_and_its_arguments():
    assert short_command("mpirun -np 4 --oversubscribe /home/u/venv/bin/python3 run.py --case a"
                         ) == "mpirun … python3 run.py --case a"  # fmt: skip
    assert short_command(["/opt/app/bin/sim", "in.cfg"]) == "sim in.cfg"
    long = short_command("python3 " + " ".join(f"--opt{i} {i}" for i in range(30)), 40)
    assert len(long) == 40 and long.startswith("python3 --opt0") and long.endswith("--opt29 29")
    assert "…" in long
    assert short_command("") == ""


# --- executables built here ------------------------------------------------------------------


def _build(tmp: Path, name: str, source: str, *cmd: str) -> Path | None:
    """Build ``source`` with ``cmd`` (compiler and flags); None when the compiler is missing."""
    if shutil.which(cmd[0]) is None:
        return None
    src = tmp / name
    src.write_text(source)
    exe = tmp / src.stem
    subprocess.run([*cmd, "-o", str(exe), str(src)], check=True, cwd=tmp, capture_output=True)
    return exe


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("built")
    out = {}
    for key, name, source, cmd in (
        ("c", "w_c.c", WRITE_C, ("gcc",)),
        ("c++", "w_cpp.cpp", WRITE_CPP, ("g++",)),
        ("fortran", "w_f.f90", WRITE_F90, ("gfortran",)),
        ("h5static", "h5_static.c", HDF5_C, ("h5cc",)),
        ("h5shared", "h5_shared.c", HDF5_C, ("h5cc", "-shlib")),
    ):
        exe = _build(tmp, name, source, *cmd)
        if exe is not None:
            out[key] = exe
    return out


def _need(built: dict[str, Path], *keys: str) -> None:
    missing = [k for k in keys if k not in built]
    if missing:
        pytest.skip(f"no compiler for {', '.join(missing)}")


def test_language_from_the_libraries_an_executable_needs(built):
    _need(built, "c", "c++", "fortran")
    assert program.elf_language(str(built["c"])) == "c"
    assert program.elf_language(str(built["c++"])) == "c++"
    assert program.elf_language(str(built["fortran"])) == "fortran"
    assert program.elf_language(str(built["c"]) + ".gone") == ""
    assert program.elf_language(__file__) == ""  # not an ELF file


def test_static_hdf5_is_found_shared_hdf5_is_not(built):
    _need(built, "h5static", "h5shared")
    static, shared = str(built["h5static"]), str(built["h5shared"])
    assert program.static_layers([static]) == {"HDF5": static}
    assert program.static_layers([shared]) == {}
    # calling H5Fopen (an undefined symbol) is not carrying HDF5
    needed, layers, _ = program.inspect(shared)
    assert layers == () and any(n.startswith("libhdf5") for n in needed)
    assert program.static_layers([static + ".gone"]) == {}


def test_a_rebuilt_file_is_read_again(built, tmp_path):
    _need(built, "h5static", "c")
    exe = tmp_path / "prog"
    shutil.copy(built["h5static"], exe)
    assert program.static_layers([str(exe)]) == {"HDF5": str(exe)}
    shutil.copy(built["c"], exe)
    os.utime(exe, ns=(1, 1))  # another time and size: not the cached answer
    assert program.static_layers([str(exe)]) == {}


# --- real traced runs ------------------------------------------------------------------------


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_")}
    env["IOPILOT_TRACE_ROOT"] = str(tmp / "traces")
    return {**env, **MPI_ENV}


def traced(tmp: Path, name: str, *command: str) -> Path:
    """Trace ``command`` in ``tmp`` into ``tmp/name``; the trace directory."""
    library_path()
    d = tmp / name
    p = subprocess.run([*IOPILOT, "run", "--trace-only", "--trace-dir", str(d), "--", *command],
                       cwd=tmp, env=_env(tmp), capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr
    return d


@pytest.fixture(scope="module")
def runs(built, tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("runs")
    (tmp / "w.py").write_text(WRITE_PY)
    out = {key: traced(tmp, key, str(exe)) for key, exe in built.items()}
    out["python"] = traced(tmp, "python", sys.executable, "w.py")
    if shutil.which("mpirun"):
        out["mpi-python"] = traced(tmp, "mpi-python", "mpirun", "-np", "2", sys.executable, "w.py")
        if "c" in built:
            out["mpi-c"] = traced(tmp, "mpi-c", "mpirun", "-np", "2", str(built["c"]))
    return out


@pytest.mark.parametrize("key, want", [("c", "c"), ("c++", "c++"), ("fortran", "fortran"),
                                       ("python", "python"), ("mpi-python", "python"),
                                       ("mpi-c", "c")])  # fmt: skip
def test_traced_programs_know_their_language(runs, key, want):
    if key not in runs:
        pytest.skip(f"{key} could not be built or launched here")
    assert read_trace(str(runs[key])).job.language == want


def test_the_report_advises_a_python_program_behind_mpirun_in_python(runs):
    if "mpi-python" not in runs:
        pytest.skip("no mpirun")
    d = api.diagnose(str(runs["mpi-python"]))
    from iopilot.checks.base import Context
    from iopilot.checks.language import language

    assert language(Context(d.trace, {})) == "python"


def test_static_hdf5_is_said_first_and_shared_hdf5_is_not(runs, built):
    if "h5static" not in runs or "h5shared" not in runs:
        pytest.skip("no h5cc")
    static = api.diagnose(str(runs["h5static"]))
    problems = [f for f in static.findings if f.level.name in ("WARN", "HIGH")]
    first = problems[0]
    assert first.check == "static-layers" and first.layer == "BUILD"
    assert "HDF5" in first.message and str(built["h5static"]) in first.message
    assert "only as the POSIX calls beneath it" in first.message
    assert "h5cc -shlib" in first.recommendation and "-lhdf5" in first.recommendation
    assert "h5cc -shlib" in first.snippet and first.snippet_lang == "sh"
    assert first.cost_seconds == pytest.approx(static.io_time.slowest_seconds, abs=1e-6)
    shared = api.diagnose(str(runs["h5shared"]))
    assert not [f for f in shared.findings if f.check == "static-layers"]
    assert shared.trace.job.static_layers == {}
    assert "H5D" in shared.trace.counters  # the runtime sees the shared library's calls


def test_static_layers_travel_in_job_json(runs, built, tmp_path):
    if "h5static" not in runs:
        pytest.skip("no h5cc")
    job = json.loads((runs["h5static"] / "job.json").read_text())
    exe = str(built["h5static"])
    assert job["static_layers"] == {"HDF5": exe}
    assert job["exe_languages"] == {exe: "c"}
    # on another machine the executable is not there: job.json still says it
    moved = tmp_path / "copy"
    shutil.copytree(runs["h5static"], moved)
    meta = json.loads((moved / "job.json").read_text())
    meta["static_layers"] = {"HDF5": "/elsewhere/h5static"}
    (moved / "job.json").write_text(json.dumps(meta))
    assert read_trace(str(moved)).job.static_layers == {"HDF5": "/elsewhere/h5static"}
    # without job.json's word and without the file: nothing is said
    del meta["static_layers"], meta["exe_languages"]
    (moved / "job.json").write_text(json.dumps(meta))
    for p in moved.glob("p*.json"):
        s = json.loads(p.read_text())
        s["exe"] = "/elsewhere/h5static"
        p.write_text(json.dumps(s))
    job = read_trace(str(moved)).job
    assert job.static_layers == {} and job.language == ""


def test_terminal_json_and_html_carry_the_build_finding(runs, built):
    if "h5static" not in runs:
        pytest.skip("no h5cc")
    trace = str(runs["h5static"])
    text = api.report(trace, "terminal", color=False)
    assert "unseen    HDF5 (linked statically into h5_static)" in text
    assert "BUILD · static-layers" in text
    doc = json.loads(api.report(trace, "json"))
    r = doc["reports"][0]
    assert r["job"]["static_layers"] == {"HDF5": str(built["h5static"])}
    assert r["job"]["language"] == "c"
    assert next(f for f in r["findings"] if f["check"] == "static-layers")["layer"] == "BUILD"
    page = api.report(trace, "html")
    assert "static-layers" in page


def test_the_layer_libraries_themselves_define_their_layer():
    # a library defines what a program that carries it statically defines
    libs = {"MPI-IO": "/usr/lib/x86_64-linux-gnu/libmpi.so.40",
            "HDF5": "/usr/lib/x86_64-linux-gnu/hdf5/serial/libhdf5.so"}  # fmt: skip
    present = {k: v for k, v in libs.items() if Path(v).exists()}
    if not present:
        pytest.skip("no system MPI or HDF5 library")
    for layer, path in present.items():
        assert program.static_layers([path]) == {layer: path}
    fortran = Path("/usr/lib/x86_64-linux-gnu/libgfortran.so.5")
    if fortran.exists():
        assert program.inspect(str(fortran))[2] is True  # the Fortran runtime's entry points
