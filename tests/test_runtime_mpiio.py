"""The MPI-IO layer of libiopilot.so, end to end.

The C programs in runtime/tests/ are built with mpicc, run on 4 ranks under
mpirun with the library preloaded, once with Open MPI's OMPIO and once with
its ROMIO component, and the per-process trace files are checked for exact
counts.  The .json files are parsed here directly, so these tests do not
depend on the Python trace reader; when the reader can load the directory,
one more test checks the same numbers through it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from iopilot.sources import is_trace_dir, load
from rawtrace import RawProc

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "src" / "iopilot" / "_lib" / "libiopilot.so"
SOURCES = ROOT / "runtime" / "tests"
NP = 4
TIMEOUT = 120

HAVE_MPI = bool(shutil.which("mpicc") and shutil.which("mpirun"))
need_lib = pytest.mark.skipif(not LIB.exists(), reason=f"{LIB} not built (make -C runtime)")
need_mpi = pytest.mark.skipif(not HAVE_MPI, reason="mpicc/mpirun not installed")

IO_COMPONENTS = ["ompio", "romio321"]

# Record flags (runtime/include/iopilot_format.h).
COLL, NB = 0x1, 0x2
LAYER_MPIIO = 2
OP_READ, OP_WRITE = 0, 1


# --------------------------------------------------------------------------
# Reading a trace directory without the Python reader.


def read_trace(trace: Path) -> dict[int, RawProc]:
    procs = [RawProc(p) for p in sorted(trace.glob("p*.json"))]
    by_rank = {p.rank: p for p in procs}
    assert len(procs) == NP, [p.json["cmdline"] for p in procs]
    assert sorted(by_rank) == list(range(NP))
    assert all(p.nprocs == NP for p in procs)
    return by_rank


# --------------------------------------------------------------------------
# Building and running.


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Path]:
    if not HAVE_MPI:
        pytest.skip("mpicc/mpirun not installed")
    if not LIB.exists():
        pytest.skip(f"{LIB} not built (make -C runtime)")
    if b"MPI_File_write_at_all" not in LIB.read_bytes():
        pytest.skip("libiopilot.so was built without src/mpiio.c (no MPI headers then)")
    out = tmp_path_factory.mktemp("mpiio-bin")
    progs = {}
    for name in ("mpiio_basic", "mpiio_flavours"):
        exe = out / name
        subprocess.run(
            ["mpicc", "-O1", "-Wall", "-o", str(exe), str(SOURCES / f"{name}.c")],
            check=True,
            timeout=TIMEOUT,
        )
        progs[name] = exe
    return progs


def mpi_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "IOPILOT_TRACE_DIR")}
    env.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMPI_MCA_rmaps_base_oversubscribe="1",
    )
    return env


def mpirun(
    exe: Path, args: list[str], io: str, cwd: Path, trace: Path | None, extra: tuple = ()
) -> subprocess.CompletedProcess:
    """Run ``exe`` on NP ranks; the preload goes to the ranks only, not mpirun."""
    cmd = ["mpirun", "-np", str(NP), "--mca", "io", io, "-x", f"LD_PRELOAD={LIB}"]
    if trace is not None:
        cmd += ["-x", f"IOPILOT_TRACE_DIR={trace}"]
    for kv in extra:
        cmd += ["-x", kv]
    cmd += [str(exe), *args]
    r = subprocess.run(cmd, cwd=cwd, env=mpi_env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, f"{' '.join(cmd)}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


# --------------------------------------------------------------------------
# No MPI needed.


@need_lib
def test_library_does_not_depend_on_mpi():
    if not shutil.which("nm"):
        pytest.skip("nm not installed")
    undefined = subprocess.run(
        ["nm", "-D", "--undefined-only", str(LIB)],
        capture_output=True,
        text=True,
        check=True,
        timeout=TIMEOUT,
    ).stdout
    bad = [ln for ln in undefined.splitlines() if "mpi" in ln.lower()]
    assert not bad, f"libiopilot.so needs MPI symbols at load time: {bad}"


@need_lib
@pytest.mark.parametrize("argv", [["/bin/true"], ["ls", "/"]])
def test_plain_programs_run_under_the_preload(tmp_path, argv):
    if not shutil.which(argv[0]):
        pytest.skip(f"{argv[0]} not installed")
    env = dict(os.environ, LD_PRELOAD=str(LIB), IOPILOT_TRACE_DIR=str(tmp_path))
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert "iopilot runtime" not in r.stderr
    assert list(tmp_path.glob("p*.json")), "no trace written"


# --------------------------------------------------------------------------
# mpiio_basic: N write_at_all, N + 2 read_at, one iwrite_at, one split write.

N, K = 8, 4096


@need_mpi
@need_lib
@pytest.mark.parametrize("io", IO_COMPONENTS)
def test_basic_counts(programs, tmp_path, io):
    data, trace = tmp_path / "data", tmp_path / "trace"
    data.mkdir()
    trace.mkdir()
    shared = data / "shared.dat"
    mpirun(programs["mpiio_basic"], [str(shared), str(N), str(K)], io, data, trace)
    procs = read_trace(trace)
    expected = {
        "COLL_OPENS": 1,
        "COLL_WRITES": N,
        "NB_WRITES": 1,
        "SPLIT_WRITES": 1,
        "INDEP_READS": N + 2,
        "SYNCS": 1,
        "WRITES": N + 2,
        "READS": N + 2,
        "BYTES_WRITTEN": (N + 2) * K,
        "BYTES_READ": (N + 2) * K,
        "MODE": 1 | 8,  # MPI_MODE_CREATE | MPI_MODE_RDWR in Open MPI
    }
    for rank, p in procs.items():
        c = p.get("MPIIO", shared)
        got = {k: c.get(k, 0) for k in expected}
        assert got == expected, f"rank {rank} ({io})"
        for absent in ("INDEP_WRITES", "COLL_READS", "INDEP_OPENS", "HINTS", "VIEWS"):
            assert c.get(absent, 0) == 0, (rank, absent)
        # Offsets through the file view: block b of rank r at (b * NP + r) * K.
        writes = p.records_of("MPIIO", shared, OP_WRITE)
        assert [w[2] for w in writes] == [(b * NP + rank) * K for b in range(N + 2)]
        assert all(w[3] == K for w in writes)
        assert [w[8] for w in writes] == [COLL] * N + [NB, COLL]
        reads = p.records_of("MPIIO", shared, OP_READ)
        assert [r[2] for r in reads] == [(b * NP + rank) * K for b in range(N + 2)]
        assert all(r[8] == 0 for r in reads)
        # The split collective is timed from begin to end.
        assert writes[-1][1] >= writes[-1][0]

    # The MPI library's own system calls show up in the POSIX layer.
    posix = [p.get("POSIX", shared) for p in procs.values()]
    assert sum(c.get("WRITES", 0) for c in posix) > 0
    # All the data reaches the file system: ROMIO with pwrite, OMPIO partly
    # with aio_write/aio_read (non-blocking and split collectives).
    assert sum(c.get("BYTES_WRITTEN", 0) for c in posix) >= (N + 2) * K * NP
    assert sum(c.get("BYTES_READ", 0) for c in posix) >= (N + 2) * K * NP


@need_mpi
@need_lib
def test_basic_through_the_reader(programs, tmp_path):
    data, trace = tmp_path / "data", tmp_path / "trace"
    data.mkdir()
    trace.mkdir()
    shared = data / "shared.dat"
    mpirun(programs["mpiio_basic"], [str(shared), str(N), str(K)], "ompio", data, trace)
    assert is_trace_dir(trace)
    t = load(str(trace))
    c = t.counters["MPIIO"]
    fid = next(i for i, name in t.names.items() if name == str(shared))
    rows = c.select(c.file_id == fid)
    assert rows.total("MPIIO_COLL_OPENS") == NP
    assert rows.total("MPIIO_COLL_WRITES") == N * NP
    assert rows.total("MPIIO_NB_WRITES") == NP
    assert rows.total("MPIIO_SPLIT_WRITES") == NP
    assert rows.total("MPIIO_INDEP_READS") == (N + 2) * NP
    assert rows.total("MPIIO_BYTES_WRITTEN") == (N + 2) * K * NP
    assert rows.total("MPIIO_BYTES_READ") == (N + 2) * K * NP
    if (rows.rank >= 0).all():
        assert sorted(rows.rank.tolist()) == list(range(NP))
        assert rows["MPIIO_COLL_WRITES"].tolist() == [N] * NP


@need_mpi
@need_lib
@pytest.mark.parametrize("io", IO_COMPONENTS)
def test_file_system_prefix(programs, tmp_path, io):
    """ "ufs:name": ROMIO opens "name", Open MPI 4.1's OMPIO a file called
    "ufs:name".  The MPI-IO layer must name the file that was opened, the
    one the POSIX layer saw."""
    data, trace = tmp_path / "data", tmp_path / "trace"
    data.mkdir()
    trace.mkdir()
    mpirun(programs["mpiio_basic"], ["ufs:pref.dat", "2", "512"], io, data, trace)
    for p in read_trace(trace).values():
        names = [Path(path) for layer, path in p.counters if layer == "MPIIO"]
        assert len(names) == 1
        name = names[0]
        assert name.parent == data and name.exists(), name
        assert name.name in ("pref.dat", "ufs:pref.dat")
        assert p.get("MPIIO", name)["COLL_WRITES"] == 2
        assert p.get("POSIX", name).get("BYTES_READ", 0) > 0


@need_mpi
@need_lib
def test_mpi_program_untraced_without_trace_dir(programs, tmp_path):
    """Preloaded but not asked to trace: every call passes straight through."""
    shared = tmp_path / "shared.dat"
    mpirun(programs["mpiio_basic"], [str(shared), "4", "1024"], "ompio", tmp_path, None)
    assert shared.stat().st_size == (4 + 2) * 1024 * NP
    assert not list(tmp_path.glob("p*.json"))


# --------------------------------------------------------------------------
# mpiio_flavours: every wrapped read/write call once.

M = 256  # ints per block
BLOCK = M * 4


@need_mpi
@need_lib
@pytest.mark.parametrize("io", IO_COMPONENTS)
def test_every_flavour(programs, tmp_path, io):
    data, trace = tmp_path / "data", tmp_path / "trace"
    data.mkdir()
    trace.mkdir()
    hints = tmp_path / "romio-hints"
    hints.write_text("# comment\ncb_buffer_size 4194304\nromio_no_indep_rw false\n")
    args = [str(data / "f"), str(M)]
    # ROMIO 3.2.1 in Open MPI 4.1 crashes in MPI_File_iwrite_at_all on ufs
    # (with or without iopilot): use the independent forms there.
    nb_coll = io != "romio321"
    if not nb_coll:
        args.append("no-nb-coll")
    mpirun(programs["mpiio_flavours"], args, io, data, trace, (f"ROMIO_HINTS={hints}",))
    procs = read_trace(trace)
    fa, fb = data / "f.a", data / "f.b"
    each = {"INDEP_READS": 2, "INDEP_WRITES": 2, "COLL_READS": 2, "COLL_WRITES": 2}
    each |= {"SPLIT_READS": 2, "SPLIT_WRITES": 2, "NB_READS": 4, "NB_WRITES": 4}
    expect_a = each | {
        "COLL_OPENS": 1,
        "HINTS": 2,
        "VIEWS": 1,
        "SYNCS": 1,
        "READS": 10,
        "WRITES": 10,
        "BYTES_READ": 10 * BLOCK,
        "BYTES_WRITTEN": 10 * BLOCK,
        "MODE": 1 | 8,
    }
    expect_b = {k: 1 for k in each} | {
        "COLL_OPENS": 1,
        "READS": 4,
        "WRITES": 4,
        "BYTES_READ": 4 * BLOCK,
        "BYTES_WRITTEN": 4 * BLOCK,
        "MODE": 1 | 8,
    }
    # Slot flavours: at, at_all, iat, iat_all, at_all split, then the same
    # at the individual file pointer.
    nbc = NB | COLL if nb_coll else NB
    slot_flags = [0, COLL, NB, nbc, COLL] * 2
    for rank, p in procs.items():
        a = p.get("MPIIO", fa)
        assert {k: a.get(k, 0) for k in expect_a} == expect_a, f"rank {rank} ({io}) f.a"
        b = p.get("MPIIO", fb)
        assert {k: b.get(k, 0) for k in expect_b} == expect_b, f"rank {rank} ({io}) f.b"
        for absent in ("HINTS", "VIEWS", "SYNCS", "INDEP_OPENS"):
            assert b.get(absent, 0) == 0, (rank, absent)
        c = p.get("MPIIO", data / f"f.c{rank}")
        want_c = {"INDEP_OPENS": 1, "INDEP_WRITES": 1, "WRITES": 1, "BYTES_WRITTEN": BLOCK}
        assert {k: c.get(k, 0) for k in want_c} == want_c
        assert c.get("COLL_OPENS", 0) == 0
        assert c.get("MODE") == 4 | 1  # MPI_MODE_WRONLY | MPI_MODE_CREATE

        # f.a: a view with displacement rank * 10 blocks; slot k at block k.
        for op in (OP_WRITE, OP_READ):
            recs = p.records_of("MPIIO", fa, op)
            assert [r[2] for r in recs] == [(rank * 10 + k) * BLOCK for k in range(10)]
            assert [r[3] for r in recs] == [BLOCK] * 10
            assert [r[8] for r in recs] == slot_flags, (rank, op)
        # f.b: shared file pointer, offsets unknown.
        for op in (OP_WRITE, OP_READ):
            recs = p.records_of("MPIIO", fb, op)
            assert [r[2] for r in recs] == [-1] * 4
            assert [r[8] for r in recs] == [0, COLL, NB, COLL]

        # Hints: the ones given at open and with MPI_File_set_info, what
        # MPI_File_get_info reported, and the ROMIO_HINTS file.
        fid = p.ids[str(fa)]
        notes = {(f, kind, k, v) for f, kind, k, v in p.notes}
        for kv in (("cb_buffer_size", "1048576"), ("access_style", "write_once")):
            assert (fid, "mpiio_hint_passed", *kv) in notes
            assert (fid, "mpiio_hint", *kv) in notes
        assert (fid, "mpiio_hint_passed", "cb_buffer_size", "2097152") in notes
        assert (0, "mpiio_romio_hints_file", "cb_buffer_size", "4194304") in notes
        assert (0, "mpiio_romio_hints_file", "romio_no_indep_rw", "false") in notes
        assert not [n for n in notes if n[0] == p.ids[str(fb)]], "f.b had no hints"
        assert p.json["env"].get("ROMIO_HINTS") == str(hints)
