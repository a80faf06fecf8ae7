"""Real programs with one I/O mistake each, traced by the runtime and
diagnosed: the first WARN/HIGH finding names the mistake, its advice is in
the program's language, and the fixed program draws no such warning.

C programs are built against the shared serial HDF5 (``h5cc -shlib``: a
statically linked HDF5 cannot be interposed); Python ones run on h5py's.
Timings vary between runs, so tests assert what the diagnosis names, never
how many seconds it finds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import iopilot
from iopilot.api import diagnose
from iopilot.checks import Level

H5CC = shutil.which("h5cc")
need_h5cc = pytest.mark.skipif(H5CC is None, reason="h5cc not installed")
TIMEOUT = 300

# A 3-D field grown by one 64^3 slab per step: argv steps, chunk edge,
# H5Fflush every step (1/0), dataset created at full size (1/0).
GROW_C = r"""
#include <hdf5.h>
#include <stdlib.h>
#define N 64
int main(int argc, char **argv) {
    int steps = atoi(argv[1]), flush = atoi(argv[3]), full = atoi(argv[4]);
    hsize_t c = (hsize_t)atoi(argv[2]);
    double *slab = malloc(sizeof(double) * N * N * N);
    hid_t file = H5Fcreate("grow.h5", H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[3] = {full ? (hsize_t)steps * N : 0, N, N};
    hsize_t maxdims[3] = {H5S_UNLIMITED, N, N}, chunk[3] = {c, c, c};
    hid_t space = H5Screate_simple(3, dims, maxdims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 3, chunk);
    hid_t dset = H5Dcreate2(file, "field", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl,
                            H5P_DEFAULT);
    for (int step = 0; step < steps; step++) {
        for (size_t i = 0; i < (size_t)N * N * N; i++) slab[i] = step + 1e-6 * (double)i;
        if (!full) {
            hsize_t nd[3] = {(hsize_t)(step + 1) * N, N, N};
            H5Dset_extent(dset, nd);
        }
        hid_t fs = H5Dget_space(dset);
        hsize_t start[3] = {(hsize_t)step * N, 0, 0}, count[3] = {N, N, N};
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
        hid_t ms = H5Screate_simple(3, count, NULL);
        H5Dwrite(dset, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, slab);
        H5Sclose(ms);
        H5Sclose(fs);
        if (flush) H5Fflush(file, H5F_SCOPE_LOCAL);
    }
    H5Sclose(space); H5Pclose(dcpl); H5Dclose(dset); H5Fclose(file); free(slab);
    return 0;
}
"""

# A table of 16 doubles per row: argv rows, per_row (1: one H5Dwrite per row
# after an H5Dset_extent, read back one row per H5Dread; 0: one call each way),
# rows per chunk.
ROWS_C = r"""
#include <hdf5.h>
#include <stdlib.h>
#define W 16
static void rw(hid_t dset, hsize_t first, hsize_t n, double *buf, int write) {
    hid_t fs = H5Dget_space(dset);
    hsize_t start[2] = {first, 0}, count[2] = {n, W};
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t ms = H5Screate_simple(2, count, NULL);
    if (write) H5Dwrite(dset, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, buf);
    else H5Dread(dset, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, buf);
    H5Sclose(ms);
    H5Sclose(fs);
}
int main(int argc, char **argv) {
    hsize_t rows = (hsize_t)atoi(argv[1]);
    int per_row = atoi(argv[2]);
    hsize_t chunk_rows = (hsize_t)atoi(argv[3]);
    double *data = malloc(sizeof(double) * rows * W);
    for (hsize_t i = 0; i < rows * W; i++) data[i] = (double)i;
    hid_t file = H5Fcreate("table.h5", H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[2] = {0, W}, maxdims[2] = {H5S_UNLIMITED, W}, chunk[2] = {chunk_rows, W};
    hid_t space = H5Screate_simple(2, dims, maxdims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    hid_t dset = H5Dcreate2(file, "rows", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl,
                            H5P_DEFAULT);
    if (per_row) {
        for (hsize_t i = 0; i < rows; i++) {
            hsize_t nd[2] = {i + 1, W};
            H5Dset_extent(dset, nd);
            rw(dset, i, 1, data + i * W, 1);
        }
        for (hsize_t i = 0; i < rows; i++) rw(dset, i, 1, data + i * W, 0);
    } else {
        hsize_t nd[2] = {rows, W};
        H5Dset_extent(dset, nd);
        rw(dset, 0, rows, data, 1);
        rw(dset, 0, rows, data, 0);
    }
    H5Sclose(space); H5Pclose(dcpl); H5Dclose(dset); H5Fclose(file); free(data);
    return 0;
}
"""

# A step's 256 KiB written with write(); argv steps, fsync every step (1) or
# once at the end (0).
FSYNC_C = r"""
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    int steps = atoi(argv[1]), every = atoi(argv[2]);
    size_t n = 256 * 1024;
    char *buf = malloc(n);
    memset(buf, 'x', n);
    int fd = open("out.bin", O_CREAT | O_TRUNC | O_WRONLY, 0644);
    for (int s = 0; s < steps; s++) {
        if (write(fd, buf, n) != (ssize_t)n) return 1;
        if (every) fsync(fd);
    }
    if (!every) fsync(fd);
    close(fd);
    free(buf);
    return 0;
}
"""

FSYNC_PY = """
import os, sys
every = sys.argv[1] == "mistake"
with open("log.bin", "wb") as f:
    for step in range(60):
        f.write(bytes(64 * 1024))
        if every:
            f.flush()
            os.fsync(f.fileno())
    f.flush()
    os.fsync(f.fileno())
"""

ROWS_PY = """
import sys
import h5py
import numpy as np
ROWS, WIDTH = 5000, 16
rows = np.arange(ROWS * WIDTH, dtype="f8").reshape(ROWS, WIDTH)
with h5py.File("table.h5", "w") as f:
    dset = f.create_dataset("rows", shape=(0, WIDTH), maxshape=(None, WIDTH), dtype="f8",
                            chunks=True)
    if sys.argv[1] == "mistake":
        for i in range(ROWS):
            dset.resize(i + 1, axis=0)
            dset[i] = rows[i]
    else:
        dset.resize(ROWS, axis=0)
        dset[:] = rows
with h5py.File("table.h5", "r") as f:
    dset = f["rows"]
    if sys.argv[1] == "mistake":
        back = np.empty_like(rows)
        for i in range(ROWS):
            back[i] = dset[i]
    else:
        back = dset[:]
assert np.array_equal(back, rows)
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("IOPILOT_") and k != "LD_PRELOAD"}  # fmt: skip
    env["PYTHONPATH"] = str(Path(iopilot.__file__).resolve().parents[1])
    return env


def _build(tmp: Path, name: str, source: str) -> Path:
    src = tmp / f"{name}.c"
    src.write_text(source)
    exe = tmp / name
    r = subprocess.run([H5CC, "-shlib", "-O2", "-o", str(exe), str(src)], cwd=tmp,
                       capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return exe


def _traced(tmp: Path, tag: str, *argv: str):
    """Run ``argv`` traced in a fresh directory and diagnose the trace."""
    work = tmp / tag
    work.mkdir()
    r = subprocess.run([sys.executable, "-m", "iopilot", "run", "--trace-only", "--trace-dir",
                        str(work / "trace"), "--", *argv], cwd=work, env=_env(),
                       capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return diagnose(str(work / "trace")).findings


def _first_warning(fs):
    return next(f for f in fs if f.level >= Level.WARN)


def _warned(fs, check: str):
    return [f for f in fs if f.check == check and f.level >= Level.WARN]


@need_h5cc
def test_grown_dataset_with_small_chunks_and_a_flush_per_step(tmp_path):
    exe = _build(tmp_path, "grow", GROW_C)
    fs = _traced(tmp_path, "mistake", str(exe), "60", "8", "1", "0")
    first = _first_warning(fs)
    assert first.check in ("hdf5-chunking", "flush-per-step"), [f.check for f in fs]
    chunking = _warned(fs, "hdf5-chunking")[0]
    assert "it grew as it was written" in chunking.message
    assert chunking.evidence["suggested_dims"] == "[64, 64, 64]"
    assert "H5Pset_chunk" in chunking.snippet and chunking.snippet_lang == "c"
    flush = _warned(fs, "flush-per-step")[0]
    assert flush.evidence["calls"] == 60 and flush.layer == "H5F"
    assert flush.message.startswith("60 H5Fflush calls on ")
    assert "1 per write" in flush.message and "H5Fflush" in flush.snippet
    # Misaligned offsets on a local disk cost next to nothing: never first.
    for check in ("posix-misaligned-file", "hdf5-alignment"):
        assert all((f.cost_seconds or 0) < 0.5 * (first.cost_seconds or 0)
                   for f in fs if f.check == check)  # fmt: skip
    # Serial HDF5: no MPI-IO property in any advice.
    assert not [f.check for f in fs if "mpio" in f.snippet or "coll_metadata" in f.snippet]


@need_h5cc
def test_dataset_created_at_full_size_is_still_judged(tmp_path):
    exe = _build(tmp_path, "grow", GROW_C)
    fs = _traced(tmp_path, "full", str(exe), "20", "8", "0", "1")
    chunking = _warned(fs, "hdf5-chunking")[0]
    assert "grew" not in chunking.message and chunking.evidence["chunks_per_access"] == 512
    assert not _warned(fs, "flush-per-step")


@need_h5cc
def test_grown_dataset_fixed_draws_neither_warning(tmp_path):
    exe = _build(tmp_path, "grow", GROW_C)
    fs = _traced(tmp_path, "fixed", str(exe), "60", "64", "0", "0")
    assert not _warned(fs, "hdf5-chunking") and not _warned(fs, "flush-per-step")


@need_h5cc
def test_c_rows_one_call_each(tmp_path):
    exe = _build(tmp_path, "rows", ROWS_C)
    fs = _traced(tmp_path, "mistake", str(exe), "3000", "1", "1024")
    first = _first_warning(fs)
    assert first.check == "hdf5-small-dataset-access", [(f.check, f.cost_seconds) for f in fs]
    assert first.snippet_lang == "c" and "H5Sselect_hyperslab" in first.snippet
    assert not _warned(fs, "hdf5-chunking")  # 128 KiB chunks: the calls are the mistake
    fixed = _traced(tmp_path, "fixed", str(exe), "3000", "0", "1024")
    assert not _warned(fixed, "hdf5-small-dataset-access")


@need_h5cc
def test_c_rows_in_one_row_chunks(tmp_path):
    exe = _build(tmp_path, "rows", ROWS_C)
    fs = _traced(tmp_path, "mistake", str(exe), "3000", "1", "1")
    assert _first_warning(fs).check == "hdf5-small-dataset-access"
    chunking = _warned(fs, "hdf5-chunking")[0]
    assert "it grew as it was written" in chunking.message
    # Many rows x the full row: 64 KiB of 128-byte rows.
    assert chunking.evidence["suggested_dims"] == "[512, 16]"
    assert "hsize_t chunk[2] = {512, 16};" in chunking.snippet


def test_h5py_rows_one_call_each(tmp_path):
    pytest.importorskip("h5py")
    script = tmp_path / "rows.py"
    script.write_text(ROWS_PY)
    fs = _traced(tmp_path, "mistake", sys.executable, str(script), "mistake")
    first = _first_warning(fs)
    assert first.check == "hdf5-small-dataset-access", [(f.check, f.cost_seconds) for f in fs]
    assert first.snippet_lang == "python" and "dset.resize" in first.snippet
    # The per-call work between the calls is in the cost, beyond the calls' own time.
    assert first.evidence["between_calls_seconds"] > 0
    assert first.cost_seconds > first.evidence["between_calls_seconds"]
    for f in _warned(fs, "hdf5-chunking"):
        assert f.snippet_lang == "python" and "chunks=(" in f.snippet
        assert f.evidence["suggested_dims"].endswith(", 16]")
    fixed = _traced(tmp_path, "fixed", sys.executable, str(script), "fixed")
    assert not _warned(fixed, "hdf5-small-dataset-access")


def test_c_fsync_per_step(tmp_path):
    src = tmp_path / "fsyncs.c"
    src.write_text(FSYNC_C)
    exe = tmp_path / "fsyncs"
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(src)],
                   check=True, timeout=TIMEOUT)  # fmt: skip
    fs = _traced(tmp_path, "mistake", str(exe), "60", "1")
    first = _first_warning(fs)
    assert first.check == "flush-per-step" and first.evidence["calls"] == 60
    assert first.evidence["time_from"] == "records" and "fsync(fd);" in first.snippet
    assert not _warned(_traced(tmp_path, "fixed", str(exe), "60", "0"), "flush-per-step")


def test_python_fsync_per_step(tmp_path):
    script = tmp_path / "log.py"
    script.write_text(FSYNC_PY)
    fs = _traced(tmp_path, "mistake", sys.executable, str(script), "mistake")
    first = _first_warning(fs)
    assert first.check == "flush-per-step" and first.evidence["calls"] == 61
    assert first.snippet_lang == "python" and "os.fsync" in first.snippet
    fixed = _traced(tmp_path, "fixed", sys.executable, str(script), "fixed")
    assert not _warned(fixed, "flush-per-step")
