"""The HDF5 benchmark kernels (kernels/vpicio.c, bdcats.c, hacc.c), end to end.

Each kernel runs with 1 and 4 ranks under ``mpirun``; its IOPILOT-RESULT line
is parsed, and the files it wrote are opened with h5py (or read as raw bytes)
and compared value by value with the writer's pattern, re-computed here.
Reported bytes must be exactly the data sizes.  Skipped only without mpicc.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "kernels"
KERNELS = ("vpicio", "bdcats", "hacc")
TIMEOUT = 180

pytestmark = pytest.mark.skipif(shutil.which("mpicc") is None, reason="mpicc not installed")


# --------------------------------------------------------------------------
# The writers' value patterns (must match vpic_hash/hacc_hash in the kernels).

M64 = (1 << 64) - 1
A, B, C = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0xD6E8FEB86659FD93


def mix(g: np.ndarray, var: int, salt: int) -> np.ndarray:
    """32 bits per global index, as the C kernels compute them (mod 2**64)."""
    x = np.asarray(g, dtype=np.uint64) * np.uint64(A)
    x += np.uint64(((var + 1) * B + salt) & M64)
    x ^= x >> np.uint64(31)
    x *= np.uint64(C)
    x ^= x >> np.uint64(32)
    return (x & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def as_float(h: np.ndarray) -> np.ndarray:
    return (h >> np.uint32(8)).astype(np.float32) / np.float32(256)


# h5bench's VPIC-IO datasets (h5bench_patterns/h5bench_write.c), in its order:
# all float32 but id_1, an int32.
VPIC_VARS = ("x", "y", "z", "px", "py", "pz", "id_1", "id_2")
VPIC_INT = {"id_1"}


def vpic_expected(g: np.ndarray, name: str, step: int) -> np.ndarray:
    h = mix(g, VPIC_VARS.index(name), ((step + 1) * 0x94D049BB133111EB) & M64)
    return h.view(np.int32) if name in VPIC_INT else as_float(h)


HACC_VARS = (("xx", "<f4"), ("yy", "<f4"), ("zz", "<f4"), ("vx", "<f4"), ("vy", "<f4"),
             ("vz", "<f4"), ("phi", "<f4"), ("pid", "<i8"), ("mask", "<u2"))  # fmt: skip
PARTICLE = 38


def hacc_expected(g: np.ndarray, v: int) -> np.ndarray:
    if v == 7:
        return np.asarray(g, dtype=np.int64)
    h = mix(g, v, 0x48414343)
    return as_float(h) if v < 7 else (h & np.uint32(0xFFFF)).astype(np.uint16)


# --------------------------------------------------------------------------
# Building and running.


@pytest.fixture(scope="module")
def kernels() -> Path:
    # Only these three targets of kernels/Makefile: a kernel someone else is
    # editing must not break these tests.
    targets = [f"../build/kernels/{k}" for k in KERNELS]
    r = subprocess.run(["make", "-C", str(ROOT / "kernels"), *targets], capture_output=True,
                       text=True, timeout=TIMEOUT)  # fmt: skip
    assert r.returncode == 0, f"make -C kernels failed:\n{r.stdout}\n{r.stderr}"
    return BUILD


def mpirun_argv(np_: int) -> list[str]:
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return ["mpirun", *root, "--oversubscribe", "-np", str(np_)]


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "IOPILOT_TRACE_DIR")}


def run(kdir: Path, np_: int, kernel: str, *args: str, cwd: Path,
        status: int = 0) -> subprocess.CompletedProcess:  # fmt: skip
    cmd = [*mpirun_argv(np_), str(kdir / kernel), *args]
    r = subprocess.run(cmd, cwd=cwd, env=clean_env(), capture_output=True, text=True,
                       timeout=TIMEOUT)  # fmt: skip
    assert r.returncode == status, f"{' '.join(cmd)}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def result(stdout: str) -> dict:
    """The IOPILOT-RESULT line, which must be the last line on stdout."""
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("IOPILOT-RESULT "), stdout
    return json.loads(last.removeprefix("IOPILOT-RESULT "))


def kernel_result(kdir: Path, np_: int, kernel: str, *args: str, cwd: Path) -> dict:
    res = result(run(kdir, np_, kernel, *args, cwd=cwd).stdout)
    assert res["kernel"] == kernel and res["ranks"] == np_
    return res


# --------------------------------------------------------------------------
# VPIC-IO


def check_vpic_file(path: Path, total: int, steps: int, chunk: int | None = None) -> None:
    """h5bench's layout exactly: groups, names, dtypes, shapes, no attributes."""
    g = np.arange(total)
    with h5py.File(path, "r") as f:
        assert sorted(f) == sorted(f"Timestep_{s}" for s in range(steps))
        assert list(f.attrs) == []
        for s in range(steps):
            grp = f[f"Timestep_{s}"]
            assert isinstance(grp, h5py.Group) and list(grp.attrs) == []
            assert sorted(grp) == sorted(VPIC_VARS)
            for name in VPIC_VARS:
                ds = grp[name]
                assert ds.shape == (total,)
                assert ds.chunks == (None if chunk is None else (chunk,)), name
                assert ds.dtype == np.dtype("<i4" if name in VPIC_INT else "<f4"), name
                np.testing.assert_array_equal(ds[...], vpic_expected(g, name, s), err_msg=name)


@pytest.mark.parametrize("np_", [1, 4])
def test_vpicio_writes_what_it_reports(kernels, tmp_path, np_):
    path = tmp_path / "vpic.h5"
    n = 1000
    res = kernel_result(kernels, np_, "vpicio", "--file", str(path), "--particles", str(n),
                        "--steps", "2", cwd=tmp_path)  # fmt: skip
    assert res["params"]["total_particles"] == np_ * n
    assert len(res["iterations"]) == 2
    for it in res["iterations"]:
        # 8 variables x 4 bytes per particle, one H5Dwrite per variable and rank.
        assert it["bytes_written"] == np_ * n * 32
        assert it["write_ops"] == np_ * 8
        assert it["bytes_read"] == 0 and it["read_ops"] == 0
        assert it["verified"] is None
        assert it["open_s"] > 0 and it["write_s"] > 0 and it["close_s"] > 0
        assert "compute_s" not in it and "check_s" not in it
    check_vpic_file(path, np_ * n, 2)


def test_vpicio_collective_metadata_alignment(kernels, tmp_path):
    path = tmp_path / "aligned.h5"
    res = kernel_result(kernels, 4, "vpicio", "--file", str(path), "--particles", "700",
                        "--collective", "--coll-metadata", "--align", "0:64k",
                        cwd=tmp_path)  # fmt: skip
    assert res["params"]["collective"] == 1 and res["params"]["coll_metadata"] == 1
    assert res["iterations"][0]["bytes_written"] == 4 * 700 * 32
    check_vpic_file(path, 2800, 1)
    with h5py.File(path, "r") as f:
        for name in VPIC_VARS:
            assert f["Timestep_0"][name].id.get_offset() % 65536 == 0, name


def test_vpicio_chunked_with_compute(kernels, tmp_path):
    path = tmp_path / "chunked.h5"
    res = kernel_result(kernels, 4, "vpicio", "--file", str(path), "--particles", "500",
                        "--chunk", "300", "--steps", "3", "--compute", "0.05",
                        "--delay-close", "2", cwd=tmp_path)  # fmt: skip
    assert [it["bytes_written"] for it in res["iterations"]] == [4 * 500 * 32] * 3
    assert any("emulated compute" in note for note in res["notes"])
    assert res["params"]["delay_close"] == 2
    # A sleep after each step but the last, measured (never the target copied).
    comp = [it["compute_s"] for it in res["iterations"]]
    assert all(0.05 <= c < 5 for c in comp[:2]) and comp[2] == 0
    assert len({c for c in comp[:2]}) == 2
    check_vpic_file(path, 2000, 3, chunk=300)


# --------------------------------------------------------------------------
# BD-CATS-IO: reads the file VPIC-IO wrote, with other rank counts.

VPIC_RANKS, VPIC_N, VPIC_STEPS = 4, 1001, 2
VPIC_TOTAL = VPIC_RANKS * VPIC_N


@pytest.fixture(scope="module")
def vpic_file(kernels, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("vpic")
    path = out / "particles.h5"
    run(kernels, VPIC_RANKS, "vpicio", "--file", str(path), "--particles", str(VPIC_N),
        "--steps", str(VPIC_STEPS), cwd=out)  # fmt: skip
    return path


def blocks(total: int, ranks: int) -> list[int]:
    """Particles per reader rank: an even split, the first total % ranks get one more."""
    base, extra = divmod(total, ranks)
    return [base + (r < extra) for r in range(ranks)]


BDCATS_MODES = {
    "full": ["full"], "partial": ["partial", "--fraction", "0.3"],
    "strided": ["strided", "--stride", "3"], "full-coll": ["full", "--collective"],
    "strided-coll": ["strided", "--stride", "7", "--collective"],
    "full-n": ["full", "--particles", "333"], "partial-n": ["partial", "--particles", "17"],
    "blocks": ["strided", "--stride", "5", "--block", "2"],
    "blocks-k": ["strided", "--stride", "4", "--block", "3", "--blocks", "10", "--collective"],
}  # fmt: skip


def bdcats_per_rank(mode: list[str], counts: list[int]) -> list[int]:
    """Particles each reader rank reads, as the usage of bdcats defines them."""
    opt = dict(zip(mode[1::2], mode[2::2], strict=False))
    if "--particles" in opt:
        return [int(opt["--particles"])] * len(counts)
    if mode[0] == "full":
        return counts
    if mode[0] == "partial":
        return [int(c * float(opt["--fraction"])) for c in counts]
    stride, block = int(opt["--stride"]), int(opt.get("--block", 1))
    if "--blocks" in opt:
        return [int(opt["--blocks"]) * block] * len(counts)
    return [((c - block) // stride + 1) * block for c in counts]


def test_bdcats_per_rank_counts():
    # The expectations above, by hand: 10 particles, stride 4, block 3 -> 0-2, 4-6.
    assert bdcats_per_rank(["strided", "--stride", "4", "--block", "3"], [10, 9, 6]) == [6, 6, 3]
    assert bdcats_per_rank(["strided", "--stride", "3"], [10, 9]) == [4, 3]


@pytest.mark.parametrize("np_", [1, 3, 4])
@pytest.mark.parametrize("mode", list(BDCATS_MODES.values()), ids=list(BDCATS_MODES))
def test_bdcats_reads_and_verifies(kernels, vpic_file, tmp_path, np_, mode):
    res = kernel_result(kernels, np_, "bdcats", "--file", str(vpic_file), "--steps",
                        str(VPIC_STEPS), "--mode", *mode, cwd=tmp_path)  # fmt: skip
    per_rank = bdcats_per_rank(mode, blocks(VPIC_TOTAL, np_))
    assert res["params"]["total_particles"] == VPIC_TOTAL
    assert len(res["iterations"]) == VPIC_STEPS
    for it in res["iterations"]:
        assert it["bytes_read"] == sum(per_rank) * 32
        assert it["read_ops"] == 8 * sum(1 for c in per_rank if c)
        assert it["bytes_written"] == 0
        assert it["verified"] is True
        # The check is timed on its own, never inside read_s.
        assert 0 <= it["check_s"] < 30 and "compute_s" not in it


@pytest.mark.parametrize("args,message", [
    (["--mode", "full", "--particles", "1002"], "has only 1001 of the 4004"),
    (["--mode", "strided", "--stride", "2", "--block", "3"], "block <= stride"),
    (["--mode", "strided", "--stride", "4", "--blocks", "252"], "only 251 blocks"),
    (["--mode", "partial", "--particles", "5", "--fraction", "0.5"], "give one"),
    (["--mode", "strided", "--particles", "5"], "--particles"),
])  # fmt: skip
def test_bdcats_bad_selection(kernels, vpic_file, tmp_path, args, message):
    r = run(kernels, 4, "bdcats", "--file", str(vpic_file), *args, cwd=tmp_path, status=2)
    assert message in r.stderr


def test_bdcats_largest_selection_fits(kernels, vpic_file, tmp_path):
    # The other side of the limits above: exactly the block, exactly 251 blocks.
    for args in (["--mode", "full", "--particles", "1001"],
                 ["--mode", "strided", "--stride", "4", "--blocks", "251"]):  # fmt: skip
        res = kernel_result(kernels, 4, "bdcats", "--file", str(vpic_file), *args,
                            cwd=tmp_path)  # fmt: skip
        assert res["iterations"][0]["verified"] is True


def test_bdcats_detects_a_wrong_byte(kernels, vpic_file, tmp_path):
    bad = tmp_path / "bad.h5"
    shutil.copy(vpic_file, bad)
    particle = 2500
    with h5py.File(bad, "r") as f:
        where = f["Timestep_1/py"].id.get_offset() + 4 * particle + 1
    with open(bad, "r+b") as fh:
        fh.seek(where)
        byte = fh.read(1)[0]
        fh.seek(where)
        fh.write(bytes([byte ^ 0xFF]))
    r = run(kernels, 2, "bdcats", "--file", str(bad), "--steps", "2", cwd=tmp_path, status=3)
    assert "verification failed" in r.stderr
    assert f"Timestep_1/py[{particle}]" in r.stderr


def test_bdcats_missing_step(kernels, vpic_file, tmp_path):
    r = run(kernels, 2, "bdcats", "--file", str(vpic_file), "--steps", "3", cwd=tmp_path,
            status=2)  # fmt: skip
    assert "no group Timestep_2" in r.stderr


# --------------------------------------------------------------------------
# HACC-IO


def hacc_counts(np_: int, n: int, vary: bool) -> list[int]:
    return [(r + 1) * n if vary else n for r in range(np_)]


def check_raw(path: Path, first: int, total: int) -> None:
    """Variable v is one region of total * size(v) bytes, in order."""
    data = path.read_bytes()
    assert len(data) == total * PARTICLE
    g = np.arange(first, first + total)
    at = 0
    for v, (name, dtype) in enumerate(HACC_VARS):
        size = np.dtype(dtype).itemsize
        col = np.frombuffer(data, dtype=dtype, count=total, offset=at)
        np.testing.assert_array_equal(col, hacc_expected(g, v), err_msg=name)
        at += total * size


def check_h5(path: Path, layout: str, first: int, total: int) -> None:
    g = np.arange(first, first + total)
    with h5py.File(path, "r") as f:
        if layout == "hdf5-datasets":
            assert sorted(f) == sorted(name for name, _ in HACC_VARS)
            for v, (name, dtype) in enumerate(HACC_VARS):
                assert f[name].shape == (total,) and f[name].dtype == np.dtype(dtype)
                np.testing.assert_array_equal(f[name][...], hacc_expected(g, v), err_msg=name)
        else:
            ds = f["particles"]
            assert list(f) == ["particles"] and ds.shape == (total,)
            assert ds.dtype.itemsize == PARTICLE  # packed, no padding
            assert list(ds.dtype.names) == [name for name, _ in HACC_VARS]
            offsets = [ds.dtype.fields[name][1] for name, _ in HACC_VARS]
            assert offsets == [0, 4, 8, 12, 16, 20, 24, 28, 36]
            rows = ds[...]
            for v, (name, dtype) in enumerate(HACC_VARS):
                assert ds.dtype.fields[name][0] == np.dtype(dtype)
                np.testing.assert_array_equal(rows[name], hacc_expected(g, v), err_msg=name)


LAYOUTS = ["mpiio", "hdf5-datasets", "hdf5-compound"]


@pytest.mark.parametrize("np_", [1, 4])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("extra", [[], ["--collective", "--vary"]], ids=["indep", "coll-vary"])
def test_hacc_shared_file(kernels, tmp_path, np_, layout, extra):
    path = tmp_path / "hacc.out"
    n = 1000
    res = kernel_result(kernels, np_, "hacc", "--layout", layout, "--file", str(path),
                        "--particles", str(n), "--read", *extra, cwd=tmp_path)  # fmt: skip
    total = sum(hacc_counts(np_, n, "--vary" in extra))
    assert res["params"]["total_particles"] == total
    (it,) = res["iterations"]
    assert it["bytes_written"] == it["bytes_read"] == total * PARTICLE
    calls = 1 if layout == "hdf5-compound" else 9
    assert it["write_ops"] == it["read_ops"] == np_ * calls
    assert it["verified"] is True
    if layout == "mpiio":
        check_raw(path, 0, total)
    else:
        check_h5(path, layout, 0, total)


@pytest.mark.parametrize("np_", [1, 4])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_hacc_file_per_process(kernels, tmp_path, np_, layout):
    path = tmp_path / "fpp"
    n = 600
    res = kernel_result(kernels, np_, "hacc", "--layout", layout, "--file", str(path),
                        "--particles", str(n), "--vary", "--fpp", cwd=tmp_path)  # fmt: skip
    counts = hacc_counts(np_, n, True)
    (it,) = res["iterations"]
    assert it["bytes_written"] == sum(counts) * PARTICLE and it["bytes_read"] == 0
    assert it["verified"] is None
    assert not path.exists()
    # Each file holds one rank's particles; pid keeps the global numbering.
    first = 0
    for rank, count in enumerate(counts):
        mine = Path(f"{path}.{rank}")
        if layout == "mpiio":
            check_raw(mine, first, count)
        else:
            check_h5(mine, layout, first, count)
        first += count


def hdf5_version() -> tuple[int, ...]:
    """The parallel HDF5 the kernels are built with."""
    r = subprocess.run(["pkg-config", "--modversion", "hdf5-openmpi"], capture_output=True,
                       text=True, timeout=TIMEOUT)  # fmt: skip
    if r.returncode != 0:
        pytest.skip("pkg-config does not know hdf5-openmpi")
    return tuple(int(p) for p in r.stdout.strip().split(".")[:3] if p.isdigit())


def test_hacc_multi_dataset_write(kernels, tmp_path):
    version = hdf5_version()
    args = ["--layout", "hdf5-multi", "--file", str(tmp_path / "multi.h5"), "--particles", "100",
            "--read"]  # fmt: skip
    if version >= (1, 14):
        res = kernel_result(kernels, 4, "hacc", *args, cwd=tmp_path)
        assert res["iterations"][0]["bytes_written"] == 4 * 100 * PARTICLE
        assert res["iterations"][0]["verified"] is True
        return
    # Not faked: a plain message, a note in the result, exit status 4.
    r = run(kernels, 4, "hacc", *args, cwd=tmp_path, status=4)
    text = ".".join(map(str, version))
    msg = f"not available in HDF5 {text}"
    assert sum(msg in line for line in r.stderr.splitlines()) == 1, r.stderr
    res = result(r.stdout)
    assert res["iterations"] == []
    assert any(msg in note for note in res["notes"])
    assert not (tmp_path / "multi.h5").exists()


# --------------------------------------------------------------------------
# Every kernel: usage and exit status 2 on a bad option.


@pytest.mark.parametrize("kernel,args", [
    ("vpicio", ["--bogus"]), ("vpicio", ["--align", "4k"]), ("bdcats", ["--mode", "random"]),
    ("bdcats", ["--steps"]), ("hacc", ["--layout", "netcdf"]), ("hacc", ["--particles", "x"]),
])  # fmt: skip
def test_bad_options(kernels, tmp_path, kernel, args):
    r = run(kernels, 1, kernel, *args, cwd=tmp_path, status=2)
    assert f"{kernel}: error" in r.stderr


def test_usage_on_unknown_option(kernels, tmp_path):
    for kernel in KERNELS:
        r = run(kernels, 1, kernel, "--nope", cwd=tmp_path, status=2)
        assert r.stderr.count("usage:") == 1 and "unknown option '--nope'" in r.stderr


# --------------------------------------------------------------------------
# VPIC-IO under the iopilot runtime: the HDF5 layer sees the same bytes.


def test_vpicio_traced_by_iopilot(kernels, tmp_path):
    from iopilot.capture.run import library_path
    from iopilot.sources import load

    library_path()  # a clear error when the runtime is not built
    trace = tmp_path / "trace"
    path = tmp_path / "traced.h5"
    cmd = [sys.executable, "-m", "iopilot", "run", "--trace-only", "--trace-dir", str(trace),
           "--", *mpirun_argv(4), str(kernels / "vpicio"), "--file", str(path),
           "--particles", "800", "--steps", "2", "--collective"]  # fmt: skip
    r = subprocess.run(cmd, cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
                       timeout=TIMEOUT)  # fmt: skip
    assert r.returncode == 0, f"{' '.join(cmd)}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    res = result(r.stdout)
    written = sum(it["bytes_written"] for it in res["iterations"])
    assert written == 2 * 4 * 800 * 32
    t = load(str(trace))
    c = t.counters["H5D"]
    ids = {i for i, name in t.names.items() if name.startswith(f"{path}:/")}
    rows = np.isin(c.file_id, np.array(sorted(ids), dtype=np.uint64))
    assert int(np.asarray(c["H5D_BYTES_WRITTEN"])[rows].sum()) == written
    assert int(np.asarray(c["H5D_WRITES"])[rows].sum()) == sum(
        it["write_ops"] for it in res["iterations"]
    )
    check_vpic_file(path, 4 * 800, 2)
