"""Data checking of the kernels that read back (bdcats, hacc): a wrong value
in any variable stops the read with exit status 3 and a message naming the
variable and where it lies; the untouched file passes with verified true.

Files are written once per module, copied, and one element of one variable is
changed (h5py for HDF5 files, a byte edit for raw MPI-IO files); the reading
run must then fail.  Runs use 1-2 ranks: Open MPI's mpirun now and then
crashes while a larger job aborts, which is not what is tested here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from test_kernels_hdf5 import (  # noqa: F401  (kernels is a fixture)
    HACC_VARS,
    PARTICLE,
    VPIC_INT,
    VPIC_VARS,
    hacc_expected,
    hdf5_version,
    kernel_result,
    kernels,
    pytestmark,
    run,
    vpic_expected,
)

# --------------------------------------------------------------------------
# BD-CATS-IO reading VPIC-IO's file.

N, STEPS = 40, 2  # per writer rank; 2 writer ranks
TOTAL = 2 * N


@pytest.fixture(scope="module")
def vpic_file(kernels, tmp_path_factory) -> Path:  # noqa: F811
    out = tmp_path_factory.mktemp("vpic")
    path = out / "v.h5"
    run(kernels, 2, "vpicio", "--file", str(path), "--particles", str(N), "--steps",
        str(STEPS), cwd=out)  # fmt: skip
    return path


def changed(values: np.ndarray) -> np.ndarray:
    """Different values of the same type: the low bit of integers flipped,
    floats plus one (still exact, and still multiples of 1/256)."""
    if values.dtype.kind in "iu":
        return values ^ values.dtype.type(1)
    return values + values.dtype.type(1)


def corrupt_h5(src: Path, dst: Path, dataset: str, index: int, field: str | None = None) -> None:
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        ds = f[dataset]
        row = ds[index : index + 1]
        if field is None:
            row = changed(row)
        else:
            row[field] = changed(row[field])
        ds[index : index + 1] = row


def test_bdcats_clean_file_passes(kernels, vpic_file, tmp_path):  # noqa: F811
    res = kernel_result(kernels, 2, "bdcats", "--file", str(vpic_file), "--steps", str(STEPS),
                        cwd=tmp_path)  # fmt: skip
    assert [it["verified"] for it in res["iterations"]] == [True] * STEPS
    assert all(it["bytes_read"] == TOTAL * 32 for it in res["iterations"])


@pytest.mark.parametrize("var", VPIC_VARS)
def test_bdcats_finds_any_wrong_value(kernels, vpic_file, tmp_path, var):  # noqa: F811
    v = VPIC_VARS.index(var)
    step, index = v % STEPS, 3 + 9 * v  # both steps, both reader ranks' blocks
    bad = tmp_path / "bad.h5"
    corrupt_h5(vpic_file, bad, f"Timestep_{step}/{var}", index)
    with h5py.File(bad, "r") as f:  # the edit really happened, and only there
        got = f[f"Timestep_{step}/{var}"][...]
    want = vpic_expected(np.arange(TOTAL), var, step)
    assert np.flatnonzero(got != want).tolist() == [index]
    r = run(kernels, 2, "bdcats", "--file", str(bad), "--steps", str(STEPS), cwd=tmp_path,
            status=3)  # fmt: skip
    assert "verification failed" in r.stderr
    # The value read and the one expected, as the kernel prints them (%.9g for floats).
    show = str if var in VPIC_INT else (lambda x: f"{float(x):.9g}")
    msg = f"Timestep_{step}/{var}[{index}] = {show(got[index])}, expected {show(want[index])}"
    assert msg in r.stderr


def test_bdcats_checks_only_what_it_reads(kernels, vpic_file, tmp_path):  # noqa: F811
    # Stride 4: particle 1 is never read, particle 4 is.
    args = ["--mode", "strided", "--stride", "4", "--steps", str(STEPS)]
    skipped, read = tmp_path / "skipped.h5", tmp_path / "read.h5"
    corrupt_h5(vpic_file, skipped, "Timestep_1/id_1", 1)
    corrupt_h5(vpic_file, read, "Timestep_1/id_1", 4)
    res = kernel_result(kernels, 1, "bdcats", "--file", str(skipped), *args, cwd=tmp_path)
    assert res["iterations"][1]["verified"] is True
    r = run(kernels, 1, "bdcats", "--file", str(read), *args, cwd=tmp_path, status=3)
    assert "Timestep_1/id_1[4] = " in r.stderr


# --------------------------------------------------------------------------
# HACC-IO, every layout: write, change one value, --read-only.

HN = 12  # rank r writes (r + 1) * HN particles (--vary): 12 + 24
HTOTAL = 3 * HN
LAYOUTS = ["mpiio", "hdf5-datasets", "hdf5-compound", "hdf5-multi"]


def hacc_args(path: Path, layout: str) -> list[str]:
    return ["--layout", layout, "--file", str(path), "--particles", str(HN), "--vary"]


@pytest.fixture(scope="module")
def hacc_files(kernels, tmp_path_factory) -> dict[str, Path]:  # noqa: F811
    out = tmp_path_factory.mktemp("hacc")
    files = {}
    for layout in LAYOUTS:
        if layout == "hdf5-multi" and hdf5_version() < (1, 14):
            continue  # the kernel refuses it (exit 4), tested in test_kernels_hdf5.py
        path = out / f"{layout}.out"
        run(kernels, 2, "hacc", *hacc_args(path, layout), cwd=out)
        files[layout] = path
    return files


def hacc_file(hacc_files: dict[str, Path], layout: str) -> Path:
    if layout not in hacc_files:
        pytest.skip(f"{layout} needs HDF5 >= 1.14")
    return hacc_files[layout]


def raw_offset(v: int, particle: int) -> int:
    """Byte offset of variable v of a particle in the raw (mpiio) file."""
    before = sum(np.dtype(dt).itemsize for _, dt in HACC_VARS[:v])
    return before * HTOTAL + particle * np.dtype(HACC_VARS[v][1]).itemsize


@pytest.mark.parametrize("layout", LAYOUTS)
def test_hacc_clean_file_passes(kernels, hacc_files, tmp_path, layout):  # noqa: F811
    path = hacc_file(hacc_files, layout)
    res = kernel_result(kernels, 2, "hacc", *hacc_args(path, layout), "--read-only",
                        cwd=tmp_path)  # fmt: skip
    (it,) = res["iterations"]
    assert it["verified"] is True and res["params"]["read_only"] == 1
    assert it["bytes_written"] == 0 and it["write_ops"] == 0
    assert it["bytes_read"] == HTOTAL * PARTICLE
    assert it["check_s"] >= 0


def test_hacc_raw_offsets():
    # The layout by hand: 36 particles, xx at 0, yy at 144, ..., mask after pid.
    assert raw_offset(0, 0) == 0 and raw_offset(1, 2) == 144 + 8
    assert raw_offset(8, 1) == 7 * 4 * 36 + 8 * 36 + 2


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("var", [name for name, _ in HACC_VARS])
def test_hacc_finds_any_wrong_value(kernels, hacc_files, tmp_path, layout, var):  # noqa: F811
    path = hacc_file(hacc_files, layout)
    v = [name for name, _ in HACC_VARS].index(var)
    particle = (5 + 4 * v) % HTOTAL  # both ranks' particles across the variables
    bad = tmp_path / "bad.out"
    if layout == "mpiio":
        shutil.copy(path, bad)
        at = raw_offset(v, particle)
        with open(bad, "r+b") as fh:
            fh.seek(at)
            byte = fh.read(1)[0]
            fh.seek(at)
            fh.write(bytes([byte ^ 0x01]))
        where = f"element {particle}, byte offset {at}"
    elif layout == "hdf5-compound":
        corrupt_h5(path, bad, "particles", particle, field=var)
        where = f"particles[{particle}].{var}"
    else:
        corrupt_h5(path, bad, var, particle)
        where = f"/{var}[{particle}]"
    # The edit changed exactly that value.
    g = np.arange(HTOTAL)
    if layout == "mpiio":
        data = bad.read_bytes()
        col = np.frombuffer(data, dtype=HACC_VARS[v][1], count=HTOTAL, offset=raw_offset(v, 0))
    else:
        with h5py.File(bad, "r") as f:
            col = f["particles"][var] if layout == "hdf5-compound" else f[var][...]
    assert np.flatnonzero(col != hacc_expected(g, v)).tolist() == [particle]

    r = run(kernels, 2, "hacc", *hacc_args(bad, layout), "--read-only", cwd=tmp_path, status=3)
    assert "verification failed" in r.stderr
    assert f"{bad}: {var} of particle {particle} ({where}) = " in r.stderr


def test_hacc_file_per_process_read_only(kernels, tmp_path):  # noqa: F811
    # pid keeps the global numbering in rank 1's own file: particle 12 is its first.
    path = tmp_path / "fpp"
    args = [*hacc_args(path, "hdf5-datasets"), "--fpp"]
    run(kernels, 2, "hacc", *args, cwd=tmp_path)
    res = kernel_result(kernels, 2, "hacc", *args, "--read-only", cwd=tmp_path)
    assert res["iterations"][0]["verified"] is True
    with h5py.File(f"{path}.1", "r+") as f:
        f["pid"][0] = 999
    r = run(kernels, 2, "hacc", *args, "--read-only", cwd=tmp_path, status=3)
    assert f"{path}.1: pid of particle {HN} (/pid[0]) = 999, expected {HN}" in r.stderr


def test_hacc_read_options_exclusive(kernels, tmp_path):  # noqa: F811
    r = run(kernels, 1, "hacc", "--read", "--read-only", cwd=tmp_path, status=2)
    assert "give one" in r.stderr
