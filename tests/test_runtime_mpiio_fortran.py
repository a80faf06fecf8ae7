"""MPI-IO called from Fortran, end to end: the MPI-IO layer sees it as C calls.

runtime/tests/mpiio_fortran.F90 is built three ways (``use mpi``, ``use
mpi_f08``, ``include 'mpif.h'``) with mpifort, run on 4 ranks with the
library preloaded, and the per-process trace files are checked for exact
counts; the same program untraced writes the same file and prints the same
checksum.  runtime/tests/behind_mpi_fortran.f90 checks that Fortran MPI
messages and barriers publish write-behind's deferred writes, as C ones do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from iopilot.sources import load
from rawtrace import RawProc

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "src" / "iopilot" / "_lib" / "libiopilot.so"
SOURCES = ROOT / "runtime" / "tests"
NP = 4
TIMEOUT = 180
N, K = 5, 4096  # independent blocks; bytes per block

COLL, NB = 0x1, 0x2
OP_READ, OP_WRITE = 0, 1

pytestmark = [
    pytest.mark.skipif(
        not (shutil.which("mpifort") and shutil.which("mpirun")), reason="mpifort/mpirun missing"
    ),
    pytest.mark.skipif(not LIB.exists(), reason=f"{LIB} not built (make -C runtime)"),
]

VARIANTS = {"use-mpi": [], "mpi-f08": ["-DF08"], "mpif.h": ["-DMPIFH"]}


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Path]:
    if b"ompi_file_write_at_f" not in LIB.read_bytes():
        pytest.skip("libiopilot.so was built without MPI-IO")
    out = tmp_path_factory.mktemp("mpiio-fortran-bin")
    progs = {}
    for name, flags in VARIANTS.items():
        exe = out / name.replace(".", "-")
        r = subprocess.run(
            ["mpifort", "-cpp", *flags, "-O1", "-o", str(exe), str(SOURCES / "mpiio_fortran.F90")],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        if r.returncode == 0:
            progs[name] = exe
        elif name != "mpi-f08":  # mpi_f08 needs a recent compiler; the others must build
            raise AssertionError(r.stderr)
    return progs


def mpirun(exe: Path, args: list[str], cwd: Path, np: int = NP, env_x: tuple = ()):
    env = {
        k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("IOPILOT_")
    }
    env.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMPI_MCA_rmaps_base_oversubscribe="1",
    )
    cmd = ["mpirun", "-np", str(np)]
    for kv in env_x:
        cmd += ["-x", kv]
    cmd += [str(exe), *args]
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stdout}\n{r.stderr}"
    return r


def traced(exe: Path, args: list[str], cwd: Path, trace: Path, np: int = NP, extra=()):
    trace.mkdir(exist_ok=True)
    env_x = (f"LD_PRELOAD={LIB}", f"IOPILOT_TRACE_DIR={trace}", *extra)
    return mpirun(exe, args, cwd, np, env_x)


def test_fortran_names_are_one_function_each():
    """mpi_file_write_at_, ..._, MPI_FILE_WRITE_AT, ompi_file_write_at_f: one
    address, so a call is counted once whatever name it came in under."""
    if not shutil.which("nm"):
        pytest.skip("nm not installed")
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(LIB)], capture_output=True, text=True, check=True
    ).stdout
    addr = {ln.split()[-1]: ln.split()[0] for ln in out.splitlines() if len(ln.split()) == 3}
    for low, up in (("file_write_at", "FILE_WRITE_AT"), ("file_open", "FILE_OPEN"),
                    ("file_write_all_end", "FILE_WRITE_ALL_END"), ("send", "SEND")):  # fmt: skip
        names = [f"ompi_{low}_f", f"mpi_{low}_", f"mpi_{low}__", f"mpi_{low}", f"MPI_{up}"]
        assert len({addr[n] for n in names}) == 1, names
    # The C wrapper is another function.
    assert addr["MPI_File_write_at"] != addr["mpi_file_write_at_"]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_fortran_calls_counted_as_c_calls(programs, tmp_path, variant):
    if variant not in programs:
        pytest.skip(f"mpifort cannot build the {variant} program here")
    exe = programs[variant]
    plain_dir, data, trace = tmp_path / "plain", tmp_path / "data", tmp_path / "trace"
    plain_dir.mkdir()
    data.mkdir()
    plain = mpirun(exe, [str(plain_dir / "s.dat"), str(N), str(K)], plain_dir)
    shared = data / "s.dat"
    run = traced(exe, [str(shared), str(N), str(K)], data, trace)
    # The program's own behaviour is the library's: same output, same file.
    assert run.stdout == plain.stdout and run.stdout.startswith(f"bytes {(N + 4) * NP * K} ")
    assert shared.read_bytes() == (plain_dir / "s.dat").read_bytes()

    procs = {p.rank: p for p in (RawProc(f) for f in sorted(trace.glob("p*.json")))}
    assert sorted(procs) == list(range(NP))
    expected = {
        "COLL_OPENS": 1,
        "HINTS": 1,
        "INDEP_WRITES": N,
        "COLL_WRITES": 2,
        "SPLIT_WRITES": 1,
        "NB_WRITES": 1,
        "INDEP_READS": 1,
        "SYNCS": 1,
        "VIEWS": 1,
        "WRITES": N + 4,
        "READS": 1,
        "BYTES_WRITTEN": (N + 4) * K,
        "BYTES_READ": K,
        "MODE": 1 | 8,  # MPI_MODE_CREATE | MPI_MODE_RDWR in Open MPI
    }
    for rank, p in procs.items():
        assert p.json["rank_source"] == "mpi" and p.json["mpi"], "MPI_INIT from Fortran"
        c = p.get("MPIIO", shared)
        assert {k: c.get(k, 0) for k in expected} == expected, f"rank {rank}"
        assert c.get("INDEP_OPENS", 0) == 0 and c.get("COLL_READS", 0) == 0
        # Offsets through the view (block b of rank r at (b * NP + r) * K),
        # bytes from MPI_INTEGER and MPI_BYTE counts alike.
        writes = p.records_of("MPIIO", shared, OP_WRITE)
        assert [w[2] for w in writes] == [(b * NP + rank) * K for b in range(N + 4)]
        assert [w[3] for w in writes] == [K] * (N + 4)
        assert [w[8] for w in writes] == [0] * N + [COLL, COLL, COLL, NB]
        reads = p.records_of("MPIIO", shared, OP_READ)
        assert [(r[2], r[3], r[8]) for r in reads] == [(((N - 1) * NP + rank) * K, K, 0)]
        assert p.notes_of("mpiio_hint_passed")[str(shared)] == {"access_style": "write_once"}
    # The MPI library's own system calls are still counted beneath.
    posix = [p.get("POSIX", shared) for p in procs.values()]
    assert sum(c.get("BYTES_WRITTEN", 0) for c in posix) >= (N + 4) * K * NP

    # And the trace reader sees a Fortran program's MPI-IO like a C one's.
    t = load(str(trace))
    rows = t.counters["MPIIO"]
    fid = next(i for i, name in t.names.items() if name == str(shared))
    rows = rows.select(rows.file_id == fid)
    assert rows.total("MPIIO_INDEP_WRITES") == N * NP
    assert rows.total("MPIIO_COLL_WRITES") == 2 * NP


def test_settings_hints_reach_a_fortran_open(programs, tmp_path):
    """[mpiio] hints are added to a copy of the program's info at a Fortran
    MPI_FILE_OPEN too; the program's own hint stays, its output does not change."""
    settings = tmp_path / "s.toml"
    settings.write_text("[mpiio]\ncb_nodes = 1\n")
    shared, trace = tmp_path / "s.dat", tmp_path / "trace"
    run = traced(programs["use-mpi"], [str(shared), "2", "1024"], tmp_path, trace,
                 extra=(f"IOPILOT_SETTINGS={settings}",))  # fmt: skip
    assert run.stdout.startswith(f"bytes {6 * NP * 1024} ")
    st = load(str(trace)).settings
    assert st and st["errors"] == []
    got = {(e["setting"], e["value"], e["file"], e["outcome"]): e["count"] for e in st["outcomes"]}
    assert got == {("mpiio.cb_nodes", "1", str(shared), "applied"): NP}
    for f in trace.glob("p*.json"):
        p = RawProc(f)
        assert p.notes_of("mpiio_hint")[str(shared)] == {
            "cb_nodes": "1",
            "access_style": "write_once",
        }
        assert p.notes_of("mpiio_hint_passed")[str(shared)] == {"access_style": "write_once"}


def test_fortran_calls_pass_through_untraced(programs, tmp_path):
    """Preloaded without a trace directory: nothing recorded, same file."""
    exe = programs["use-mpi"]
    env_x = (f"LD_PRELOAD={LIB}",)
    run = mpirun(exe, [str(tmp_path / "s.dat"), "2", "1024"], tmp_path, NP, env_x)
    assert run.stdout.startswith(f"bytes {6 * NP * 1024} ")
    assert not list(tmp_path.glob("p*.json"))


@pytest.mark.parametrize("mode", ["plain", "async"])
def test_fortran_mpi_messages_publish_pending_writes(tmp_path, mode):
    exe = tmp_path / "behind_mpi_fortran"
    subprocess.run(["mpifort", "-O1", "-o", str(exe), str(SOURCES / "behind_mpi_fortran.f90")],
                   check=True, timeout=TIMEOUT)  # fmt: skip
    data = tmp_path / "data"
    data.mkdir()
    if mode == "async":
        trace = tmp_path / "trace"
        r = traced(exe, [str(data)], tmp_path, tmp_path / "trace", 2, ("IOPILOT_ASYNC=1",))
        wb = load(str(trace)).write_behind
        assert wb is not None and wb["writes"] >= 4, "the writes were deferred"
    else:
        r = mpirun(exe, [str(data)], tmp_path, 2)
    assert sorted(r.stdout.split("\n")[:-1]) == [
        f"{k}: rank 1 sees {32 * 2**20}" for k in ("allreduce", "barrier", "bcast", "send")
    ]
