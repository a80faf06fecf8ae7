"""The HDF5 layer of libiopilot.so (runtime/src/hdf5.c), end to end.

The C programs in runtime/tests/h5_*.c are built against the shared HDF5
library (``h5pcc -shlib``: a statically linked HDF5 cannot be interposed)
and run with the library preloaded; an h5py script runs on the HDF5 copy
bundled in the h5py wheel.  The per-process .json files are parsed here
directly, and once more through ``iopilot.sources.load``.

A test is skipped only when its tool is missing (h5pcc, mpirun, h5py).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iopilot.capture.run import library_path
from rawtrace import RawProc

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "runtime" / "tests"
TIMEOUT = 120
NP = 4

H5PCC = shutil.which("h5pcc")
need_h5pcc = pytest.mark.skipif(H5PCC is None, reason="h5pcc not installed")
need_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed")

# runtime/include/iopilot_format.h
LAYER_H5D = 4
OP_READ, OP_WRITE = 0, 1
FLAG_COLLECTIVE = 0x1


# --------------------------------------------------------------------------
# Reading a trace directory without the Python reader.


def procs_with(trace: Path, layer: str, path: str | Path) -> list[RawProc]:
    """The traced processes that have a row of ``layer`` for ``path``."""
    procs = [RawProc(p) for p in sorted(trace.glob("p*.json"))]
    found = [p for p in procs if p.get(layer, path)]
    assert found, f"no {layer} row for {path} in {[p.json['cmdline'] for p in procs]}"
    return found


def subset(row: dict[str, int], expected: dict[str, int]) -> dict[str, int]:
    """The entries of ``row`` named in ``expected`` (0 when absent)."""
    return {k: row.get(k, 0) for k in expected}


def through_reader(trace: Path):
    """The trace as iopilot's reader sees it."""
    from iopilot.sources import load

    return load(str(trace))


def reader_value(t, layer: str, path: str | Path, counter: str) -> int:
    """One counter of the (single, possibly rank-reduced) row of ``path``."""
    c = t.counters[layer]
    ids = {i for i, n in t.names.items() if n == str(path)}
    rows = [k for k in range(len(c)) if int(c.file_id[k]) in ids]
    assert len(rows) == 1, f"{layer} rows for {path}: {len(rows)}"
    return int(c[counter][rows[0]])


# --------------------------------------------------------------------------
# Building and running.


@pytest.fixture(scope="module")
def lib() -> Path:
    path = library_path()  # a clear error when the runtime is not built
    assert b"H5Dwrite" in path.read_bytes(), (
        f"{path} has no HDF5 layer: rebuild it (make -C runtime) with src/hdf5.c"
    )
    return path


def build(out: Path, name: str, *extra: str) -> Path:
    exe = out / name
    cmd = [H5PCC, "-shlib", "-O1", "-o", str(exe), str(SOURCES / f"{name}.c"), *extra]
    # h5pcc leaves object files in the working directory: keep them in ``out``.
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd=out)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
    return exe


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "IOPILOT_TRACE_DIR")}


def run(argv: list[str], lib: Path | None, trace: Path | None, cwd: Path) -> str:
    env = clean_env()
    if lib is not None:
        env["LD_PRELOAD"] = str(lib)
    if trace is not None:
        env["IOPILOT_TRACE_DIR"] = str(trace)
    r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, f"{argv}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "iopilot runtime" not in r.stderr, r.stderr
    return r.stdout


# --------------------------------------------------------------------------
# The library itself.


def test_library_needs_no_hdf5_symbols(lib):
    if not shutil.which("nm"):
        pytest.skip("nm not installed")
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(lib)], capture_output=True,
                               text=True, check=True, timeout=TIMEOUT).stdout  # fmt: skip
    bad = [ln for ln in undefined.splitlines() if " H5" in ln or "hdf5" in ln.lower()]
    assert not bad, f"libiopilot.so needs HDF5 symbols at load time: {bad}"


# --------------------------------------------------------------------------
# h5_serial: known counts of two datasets, one contiguous, one chunked.

N = 100_000


@pytest.fixture(scope="module")
def serial(lib, tmp_path_factory):
    if H5PCC is None:
        pytest.skip("h5pcc not installed")
    out = tmp_path_factory.mktemp("h5-serial")
    exe = build(out, "h5_serial")
    # The program alone, the preload without tracing, and traced.
    assert run([str(exe), str(out / "plain.h5")], None, None, out) == "ok\n"
    assert run([str(exe), str(out / "untraced.h5")], lib, None, out) == "ok\n"
    trace = out / "trace"
    trace.mkdir()
    path = out / "serial.h5"
    assert run([str(exe), str(path)], lib, trace, out) == "ok\n"
    return trace, path


def test_serial_dataset_counts(serial):
    trace, path = serial
    (p,) = procs_with(trace, "H5D", f"{path}:/x")
    x = {"OPENS": 3, "CREATES": 1, "WRITES": 10, "BYTES_WRITTEN": 800_000, "READS": 4,
         "BYTES_READ": 800_000, "REGULAR_HYPERSLAB_SELECTS": 14, "IRREGULAR_HYPERSLAB_SELECTS": 0,
         "POINT_SELECTS": 0, "DATATYPE_SIZE": 8, "DATASPACE_NDIMS": 1,
         "DATASPACE_NPOINTS": N, "CHUNK_SIZE_D1": 0, "SIZE_WRITE_10K_100K": 10,
         "SIZE_READ_100K_1M": 4}  # fmt: skip
    assert subset(p.get("H5D", f"{path}:/x"), x) == x
    grid = {"OPENS": 2, "CREATES": 1, "WRITES": 1, "BYTES_WRITTEN": 240_000, "READS": 3,
            "BYTES_READ": 240_000 + 20 + 18_000, "POINT_SELECTS": 1,
            "IRREGULAR_HYPERSLAB_SELECTS": 1, "REGULAR_HYPERSLAB_SELECTS": 0,
            "DATATYPE_SIZE": 4, "DATASPACE_NDIMS": 2, "DATASPACE_NPOINTS": 60_000,
            "CHUNK_SIZE_D1": 60, "CHUNK_SIZE_D2": 50, "CHUNK_SIZE_D3": 0}  # fmt: skip
    assert subset(p.get("H5D", f"{path}:/g/grid"), grid) == grid
    # One record per H5Dwrite/H5Dread, offset unknown (-1), bytes as counted.
    writes = p.records_of("H5D", f"{path}:/x", OP_WRITE)
    assert [(r[2], r[3]) for r in writes] == [(-1, 80_000)] * 10
    reads = sorted(r[3] for r in p.records_of("H5D", f"{path}:/g/grid", OP_READ))
    assert reads == [20, 18_000, 240_000]


def test_serial_file_counts_and_properties(serial):
    trace, path = serial
    (p,) = procs_with(trace, "H5F", path)
    f = {"CREATES": 1, "OPENS": 1, "FLUSHES": 1, "ALIGNMENT_THRESHOLD": 4096,
         "ALIGNMENT": 65536, "USE_MPIIO": 0}  # fmt: skip
    assert subset(p.get("H5F", path), f) == f
    notes = p.notes_of("hdf5_property")[str(path)]
    assert notes["driver"] == "sec2"
    assert notes["alignment"] == "threshold=4096 alignment=65536"
    assert notes["mdc_config"] == (
        "set_initial_size=1 initial_size=4194304 min_size=1048576 max_size=16777216"
    )
    assert notes["library_version"].count(".") == 2
    ds = p.notes_of("hdf5_property")[f"{path}:/g/grid"]
    assert ds["layout"] == "chunked" and ds["chunk_dims"] == "50x60" and ds["dims"] == "200x300"
    assert ds["filters"].startswith("shuffle")
    assert p.notes_of("hdf5_property")[f"{path}:/x"]["layout"] == "contiguous"
    # HDF5's own file I/O is traced below it, by the POSIX layer.
    posix = p.get("POSIX", path)
    assert posix.get("WRITES", 0) > 0
    assert posix.get("BYTES_WRITTEN", 0) >= 800_000 + 240_000
    assert posix.get("BYTES_READ", 0) >= 800_000 + 240_000


def test_serial_through_the_reader(serial):
    trace, path = serial
    t = through_reader(trace)
    assert reader_value(t, "H5D", f"{path}:/x", "H5D_BYTES_WRITTEN") == 800_000
    assert reader_value(t, "H5D", f"{path}:/x", "H5D_WRITES") == 10
    assert reader_value(t, "H5D", f"{path}:/x", "H5D_OPENS") == 3
    assert reader_value(t, "H5D", f"{path}:/g/grid", "H5D_BYTES_READ") == 258_020
    assert reader_value(t, "H5D", f"{path}:/g/grid", "H5D_CHUNK_SIZE_D1") == 60
    # The reader counts H5Fcreate among the opens, as Darshan does.
    assert reader_value(t, "H5F", path, "H5F_OPENS") == 2
    assert reader_value(t, "H5F", path, "H5F_FLUSHES") == 1


# --------------------------------------------------------------------------
# h5_parallel: 4 ranks, MPI-IO driver, collective and independent writes.

M = 65_536


def mpi_env() -> dict[str, str]:
    env = clean_env()
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")  # fmt: skip
    return env


@pytest.fixture(scope="module")
def parallel(lib, tmp_path_factory):
    return mpi_program_traced(lib, tmp_path_factory, "h5_parallel", NP, str(M))


def mpi_program_traced(lib: Path, tmp_path_factory, name: str, nprocs: int,
                       *args: str) -> tuple[Path, Path]:  # fmt: skip
    """Build runtime/tests/NAME.c, run it on ``nprocs`` ranks traced with the
    path of its HDF5 file (and ``args``); it must print "ok".  The trace
    directory and the file's path."""
    if H5PCC is None or shutil.which("mpirun") is None:
        pytest.skip("h5pcc or mpirun not installed")
    out = tmp_path_factory.mktemp(name)
    exe = build(out, name)
    path = out / f"{name}.h5"
    trace = out / "trace"
    trace.mkdir()
    # The preload goes to the ranks only (-x), not to mpirun itself.
    cmd = ["mpirun", "-np", str(nprocs), "-x", f"LD_PRELOAD={lib}", "-x",
           f"IOPILOT_TRACE_DIR={trace}", str(exe), str(path), *args]  # fmt: skip
    r = subprocess.run(cmd, cwd=out, env=mpi_env(), capture_output=True, text=True,
                       timeout=TIMEOUT)  # fmt: skip
    assert r.returncode == 0, f"{' '.join(cmd)}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert r.stdout == "ok\n"
    return trace, path


@need_h5pcc
@need_mpirun
def test_parallel_counts_per_rank(parallel):
    trace, path = parallel
    procs = procs_with(trace, "H5F", path)
    assert sorted(p.rank for p in procs) == list(range(NP))
    for p in procs:
        f = {"CREATES": 1, "OPENS": 0, "USE_MPIIO": 1}
        assert subset(p.get("H5F", path), f) == f, p.rank
        coll = {"WRITES": 1, "BYTES_WRITTEN": 8 * M, "READS": 1, "BYTES_READ": 8 * M,
                "USE_MPIIO_COLLECTIVE": 1, "DATATYPE_SIZE": 8, "DATASPACE_NPOINTS": NP * M,
                "REGULAR_HYPERSLAB_SELECTS": 2}  # fmt: skip
        assert subset(p.get("H5D", f"{path}:/coll"), coll) == coll, p.rank
        indep = {"WRITES": 1, "BYTES_WRITTEN": 8 * M, "USE_MPIIO_COLLECTIVE": 0}
        assert subset(p.get("H5D", f"{path}:/indep"), indep) == indep, p.rank
        # As in Darshan, bytes are elements times the size of the dataset's
        # type (double), not of the memory type (int): what the file holds.
        conv = {"WRITES": 1, "BYTES_WRITTEN": 8 * M, "USE_MPIIO_COLLECTIVE": 1,
                "DATATYPE_SIZE": 8}  # fmt: skip
        assert subset(p.get("H5D", f"{path}:/conv"), conv) == conv, p.rank
        # The records carry the collective flag of each transfer.
        (w,) = p.records_of("H5D", f"{path}:/coll", OP_WRITE)
        assert w[8] & FLAG_COLLECTIVE and w[3] == 8 * M
        (w,) = p.records_of("H5D", f"{path}:/indep", OP_WRITE)
        assert not w[8] & FLAG_COLLECTIVE


@need_h5pcc
@need_mpirun
def test_parallel_properties(parallel):
    trace, path = parallel
    for p in procs_with(trace, "H5F", path):
        notes = p.notes_of("hdf5_property")[str(path)]
        assert notes["driver"] == "mpio"
        assert notes["all_coll_metadata_ops"] == "1"
        assert notes["coll_metadata_write"] == "1"
        if notes["library_version"].startswith(("1.10.", "1.12.")):
            # These versions do no collective I/O with a type conversion.
            why = p.notes_of("hdf5_property")[f"{path}:/conv"]["write_not_collective"]
            assert "datatype_conversion" in why
        assert "write_not_collective" not in p.notes_of("hdf5_property")[f"{path}:/coll"]


@need_h5pcc
@need_mpirun
def test_parallel_through_the_reader(parallel):
    trace, path = parallel
    t = through_reader(trace)
    # Every rank wrote the shared datasets: one reduced row, summed.
    assert reader_value(t, "H5D", f"{path}:/coll", "H5D_BYTES_WRITTEN") == NP * 8 * M
    assert reader_value(t, "H5D", f"{path}:/coll", "H5D_USE_MPIIO_COLLECTIVE") == 1
    assert reader_value(t, "H5D", f"{path}:/indep", "H5D_USE_MPIIO_COLLECTIVE") == 0
    assert reader_value(t, "H5F", path, "H5F_USE_MPIIO") == 1
    assert reader_value(t, "H5F", path, "H5F_OPENS") == NP


# --------------------------------------------------------------------------
# h5_access: datasets counted as Darshan 3.5's HDF5 module counts them; the
# values are worked out in runtime/tests/h5_access.c (and were checked
# against Darshan 3.5.0 built with --enable-hdf5-mod).


def tuple_of(row: dict[str, int], k: int) -> tuple[int, list[int], list[int], int]:
    """ACCESSk of a raw row: size, lengths D1..D5, strides D1..D5, count."""
    return (row.get(f"ACCESS{k}_ACCESS", 0),
            [row.get(f"ACCESS{k}_LENGTH_D{d}", 0) for d in range(1, 6)],
            [row.get(f"ACCESS{k}_STRIDE_D{d}", 0) for d in range(1, 6)],
            row.get(f"ACCESS{k}_COUNT", 0))  # fmt: skip


@pytest.fixture(scope="module")
def access(lib, tmp_path_factory):
    return mpi_program_traced(lib, tmp_path_factory, "h5_access", 2)


@need_h5pcc
@need_mpirun
def test_access_opens_and_bytes_are_counted_as_darshan(access):
    trace, path = access
    for p in procs_with(trace, "H5D", f"{path}.0:/t") + procs_with(trace, "H5D", f"{path}.1:/t"):
        t = p.get("H5D", f"{path}.{p.rank}:/t")
        # H5Dcreate1, H5Dopen2, H5Oopen_by_idx, H5Oopen_by_addr (or _by_token)
        assert t["OPENS"] == 4
        # six writes of 100 doubles, one of them from a buffer of ints
        assert (t["WRITES"], t["BYTES_WRITTEN"]) == (6, 4800)
        assert [r[3] for r in p.records_of("H5D", f"{path}.{p.rank}:/t", OP_WRITE)] == [800] * 6
        assert t["READS"] == 6 and t["BYTES_READ"] == 2 * 24 + 8000 + 3 * 80
        sel = {"REGULAR_HYPERSLAB_SELECTS": 7, "IRREGULAR_HYPERSLAB_SELECTS": 2,
               "POINT_SELECTS": 2}  # fmt: skip
        assert subset(t, sel) == sel


@need_h5pcc
@need_mpirun
def test_access_tuples_in_darshans_order(access):
    trace, path = access
    for rank in (0, 1):
        (p,) = procs_with(trace, "H5D", f"{path}.{rank}:/t")
        t = p.get("H5D", f"{path}.{rank}:/t")
        # count first, then size; on a full tie the tuple counted last first
        assert [tuple_of(t, k) for k in range(1, 5)] == [
            (80, [0, 0, 0, 0, 10], [0, 0, 0, 0, 1], 3),    # F
            (800, [0] * 5, [0] * 5, 2),                      # C, irregular: no shape
            (800, [0, 0, 0, 0, 100], [0, 0, 0, 0, 4], 2),  # B
            (800, [0, 0, 0, 0, 100], [0, 0, 0, 0, 1], 2),  # A
        ]  # fmt: skip


@need_h5pcc
@need_mpirun
def test_access_tuple_dimensions(access):
    trace, path = access
    (p,) = procs_with(trace, "H5D", f"{path}.0:/cube")
    # D5 is dimension 0 whatever the rank: a 3-D read fills D5, D4 and D3
    cube = p.get("H5D", f"{path}.0:/cube")
    assert tuple_of(cube, 1) == (2000, [0, 0, 10, 20, 5], [0, 0, 3, 1, 2], 1)
    # and a 6-D write dimensions 0 to 4 only
    six = p.get("H5D", f"{path}.0:/six")
    assert tuple_of(six, 1) == (5760, [5, 4, 3, 2, 1], [1] * 5, 1)


@need_h5pcc
@need_mpirun
def test_use_deprecated_follows_the_last_open(access):
    trace, path = access
    (p,) = procs_with(trace, "H5D", f"{path}.0:/t")
    # H5Dcreate1, H5Dopen2 and H5Oopen_by_*: 0; H5Dcreate2 then H5Dopen1: 1
    assert p.get("H5D", f"{path}.0:/t").get("USE_DEPRECATED", 0) == 0
    assert p.get("H5D", f"{path}.0:/cube").get("USE_DEPRECATED", 0) == 1


@need_h5pcc
@need_mpirun
def test_use_mpiio_follows_the_last_open(access):
    trace, path = access
    use = {p.rank: p.get("H5F", path).get("USE_MPIIO", 0) for p in procs_with(trace, "H5F", path)}
    assert use == {0: 0, 1: 1}  # rank 0 reopened the file without MPI-IO at the end


@need_h5pcc
@need_mpirun
def test_access_tuples_of_ranks_combined_and_exported(access):
    from iopilot.report.counters_text import counter_lines

    trace, path = access
    # rank 0 wrote X then Y, rank 1 Y then X: Darshan's reduction lists X first
    t = through_reader(trace)
    got = {}
    for line in counter_lines(t):
        module, rank, _id, name, value, fname = line.split("\t")[:6]
        if module == "H5D" and fname == f"{path}:/s" and "_ACCESS" in name and value != "0":
            assert rank == "-1"
            got[name] = int(value)
    assert got == {"H5D_ACCESS1_ACCESS": 800, "H5D_ACCESS1_LENGTH_D5": 100,
                   "H5D_ACCESS1_STRIDE_D5": 1, "H5D_ACCESS1_COUNT": 2,
                   "H5D_ACCESS2_ACCESS": 800, "H5D_ACCESS2_LENGTH_D5": 100,
                   "H5D_ACCESS2_STRIDE_D5": 2, "H5D_ACCESS2_COUNT": 2}  # fmt: skip
    assert reader_value(t, "H5D", f"{path}.0:/cube", "H5D_USE_DEPRECATED") == 1
    assert reader_value(t, "H5D", f"{path}.1:/t", "H5D_ACCESS3_STRIDE_D5") == 4


@need_h5pcc
def test_more_access_tuples_than_the_tables_hold(lib, tmp_path):
    exe = build(tmp_path, "h5_many_tuples")
    trace = tmp_path / "trace"
    trace.mkdir()
    path = tmp_path / "many.h5"
    assert run([str(exe), str(path)], lib, trace, tmp_path) == "ok\n"
    (p,) = procs_with(trace, "H5D", f"{path}:/d0")
    notes = p.notes_of("hdf5_property")
    full = [d for d in range(1100) if "access_tuples" in notes.get(f"{path}:/d{d}", {})]
    assert full and full[0] > 0 and full == list(range(full[0], 1100))
    # 32 tuples of count 1 each: the four largest, the last counted first
    top = [(8 * c, [0, 0, 0, 0, c], [0, 0, 0, 0, 1], 1) for c in (32, 31, 30, 29)]
    assert [tuple_of(p.get("H5D", f"{path}:/d0"), k) for k in range(1, 5)] == top
    # beyond: the sizes without shapes, never a crash
    sizes = [(s, [0] * 5, [0] * 5, n) for s, _, _, n in top]
    assert [tuple_of(p.get("H5D", f"{path}:/d1099"), k) for k in range(1, 5)] == sizes
    assert notes[f"{path}:/d1099"]["access_tuples"].startswith("incomplete")


# --------------------------------------------------------------------------
# Two copies of HDF5 in one process: calls go to the copy of their caller.


def serial_hdf5_library() -> str | None:
    """A second HDF5 library next to h5pcc's (Debian: libhdf5_serial)."""
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
        found = sorted(glob.glob(f"{d}/libhdf5_serial.so.*[0-9]"))
        if found:
            return found[0]
    return None


@need_h5pcc
def test_two_hdf5_copies_in_one_process(lib, tmp_path):
    other = serial_hdf5_library()
    if other is None:
        pytest.skip("no second HDF5 library (libhdf5_serial) installed")
    plugin = tmp_path / "plugin.so"
    # h5pcc would link its own libhdf5: build the plugin with h5pcc's compiler
    # and headers, linked with the other library only.
    show = subprocess.run([H5PCC, "-shlib", "-show"], capture_output=True, text=True,
                          timeout=TIMEOUT).stdout.split()  # fmt: skip
    compiler = show[0]
    incs = [a for a in show if a.startswith("-I")]
    cmd = [compiler, "-shared", "-fPIC", "-O1", *incs, "-o", str(plugin),
           str(SOURCES / "h5_twolibs_plugin.c"), other]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
    exe = build(tmp_path, "h5_twolibs", "-ldl")
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    argv = [str(exe), str(plugin), str(a), str(b)]
    assert run(argv, None, None, tmp_path) == "ok\n"
    trace = tmp_path / "trace"
    trace.mkdir()
    assert run(argv, lib, trace, tmp_path) == "ok\n"
    (p,) = procs_with(trace, "H5D", f"{a}:/a")
    da = {"WRITES": 1, "BYTES_WRITTEN": 8000, "READS": 1, "BYTES_READ": 8000, "DATATYPE_SIZE": 8}
    db = {"WRITES": 2, "BYTES_WRITTEN": 8000, "READS": 1, "BYTES_READ": 8000, "DATATYPE_SIZE": 4}
    assert subset(p.get("H5D", f"{a}:/a"), da) == da
    assert subset(p.get("H5D", f"{b}:/b"), db) == db
    assert p.get("H5F", a)["CREATES"] == 1 and p.get("H5F", b)["CREATES"] == 1


# --------------------------------------------------------------------------
# h5py (serial, with the HDF5 its wheel bundles).

H5PY_SCRIPT = """
import sys, h5py, numpy as np
path = sys.argv[1]
with h5py.File(path, "w") as f:
    f.create_dataset("x", data=np.arange(100000, dtype="f8"))
    y = f.create_dataset("y", shape=(1000, 100), dtype="f4", chunks=(50, 100))
    for i in range(10):
        y[i * 100:(i + 1) * 100, :] = np.full((100, 100), i, dtype="f4")
with h5py.File(path, "r") as f:
    assert (f["x"][...] == np.arange(100000)).all()
    assert (f["y"][...][::100, 0] == np.arange(10)).all()
    # Failures keep their message: the runtime makes no HDF5 call after one.
    try:
        f["x"][0:2] = np.zeros(2)
    except OSError as e:
        print("write:", e)
    try:
        f["missing"]
    except KeyError as e:
        print("open:", e)
print("ok", h5py.version.hdf5_version)
"""


@pytest.fixture(scope="module")
def h5py_run(lib, tmp_path_factory):
    out = tmp_path_factory.mktemp("h5py")
    script = out / "write.py"
    script.write_text(H5PY_SCRIPT)
    # sys.executable is the interpreter itself (a pyenv shim would be a
    # shell script starting other processes).
    argv = [sys.executable, str(script)]
    plain = run([*argv, str(out / "plain.h5")], None, None, out)
    trace = out / "trace"
    trace.mkdir()
    path = out / "py.h5"
    traced = run([*argv, str(path)], lib, trace, out)
    return trace, path, plain, traced


def test_h5py_counts(h5py_run):
    trace, path, _, _ = h5py_run
    (p,) = procs_with(trace, "H5D", f"{path}:/x")
    x = {"WRITES": 1, "BYTES_WRITTEN": 800_000, "READS": 1, "BYTES_READ": 800_000,
         "DATATYPE_SIZE": 8, "DATASPACE_NPOINTS": 100_000, "CREATES": 1,
         "OPENS": 3}  # create, f["x"] to read, f["x"] for the failing write  # fmt: skip
    assert subset(p.get("H5D", f"{path}:/x"), x) == x
    y = {"WRITES": 10, "BYTES_WRITTEN": 400_000, "READS": 1, "BYTES_READ": 400_000,
         "DATATYPE_SIZE": 4, "DATASPACE_NDIMS": 2, "CHUNK_SIZE_D1": 100, "CHUNK_SIZE_D2": 50,
         "REGULAR_HYPERSLAB_SELECTS": 10}  # fmt: skip
    assert subset(p.get("H5D", f"{path}:/y"), y) == y
    f = {"CREATES": 1, "OPENS": 1}
    assert subset(p.get("H5F", path), f) == f
    # The bundled HDF5 writes with pwrite64, seen by the POSIX layer.
    posix = p.get("POSIX", path)
    assert posix.get("BYTES_WRITTEN", 0) >= 800_000 + 400_000
    assert posix.get("BYTES_READ", 0) >= 800_000 + 400_000
    assert p.notes_of("hdf5_property")[str(path)]["driver"] == "sec2"
    assert p.notes_of("hdf5_property")[f"{path}:/y"]["chunk_dims"] == "50x100"


def test_h5py_behaviour_is_unchanged(h5py_run):
    _, _, plain, traced = h5py_run
    assert traced == plain
    assert "no write intent" in traced and "doesn't exist" in traced


def test_h5py_through_the_reader(h5py_run):
    trace, path, _, _ = h5py_run
    t = through_reader(trace)
    assert reader_value(t, "H5D", f"{path}:/y", "H5D_BYTES_WRITTEN") == 400_000
    assert reader_value(t, "H5D", f"{path}:/x", "H5D_READS") == 1
    assert reader_value(t, "H5F", path, "H5F_OPENS") == 2


# --------------------------------------------------------------------------
# H5Dwrite_multi / H5Dread_multi (HDF5 >= 1.14), on h5py's bundled HDF5.


def test_multi_dataset_calls(lib, tmp_path):
    import h5py
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    libs = Path(h5py.__file__).resolve().parent.parent / "h5py.libs"
    found = [p for p in sorted(libs.glob("libhdf5-*.so*")) if "_hl" not in p.name]
    if not found or b"H5Dwrite_multi" not in found[0].read_bytes():
        pytest.skip("h5py does not bundle an HDF5 >= 1.14")
    exe = tmp_path / "h5_multi"
    cmd = [cc, "-O1", "-o", str(exe), str(SOURCES / "h5_multi.c"), str(found[0]),
           f"-Wl,-rpath,{found[0].parent}"]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
    trace = tmp_path / "trace"
    trace.mkdir()
    path = tmp_path / "multi.h5"
    assert run([str(exe), str(path)], lib, trace, tmp_path) == "ok\n"
    (p,) = procs_with(trace, "H5D", f"{path}:/a")
    for name, nbytes in (("a", 8000), ("b", 2000)):
        want = {"WRITES": 1, "BYTES_WRITTEN": nbytes, "READS": 1, "BYTES_READ": nbytes}
        assert subset(p.get("H5D", f"{path}:/{name}"), want) == want
