"""The ior kernel of `iopilot bench`: layout, data, checking, IOR's options and summary.

The kernel is built once with `make -C kernels` and run at tiny sizes on 1
or 2 ranks.  Files it leaves with --keep are compared byte by byte with the
data convention of kernels/ior.c, recomputed here with numpy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from iopilot.bench.kernels import MiB, hdf5_breakdown, ior_json, render, summarise

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "kernels"
TIMEOUT = 120
KIB = 1024
K_MUL = 0x9E3779B97F4A7C15


@pytest.fixture(scope="module")
def ior() -> Path:
    if shutil.which("mpicc") is None:
        pytest.skip("mpicc not installed")
    done = subprocess.run(
        ["make", "-C", str(ROOT / "kernels")], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return BUILD / "ior"


def mpirun(np_: int) -> list[str]:
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return ["mpirun", *root, "--oversubscribe", "-np", str(np_)]


def run(
    ior: Path, args: str | list[str], np_: int, cwd: Path, status: int = 0, env=None
) -> tuple[dict | None, subprocess.CompletedProcess]:
    """Run the kernel; return its parsed result (None when it printed none)."""
    argv = args.split() if isinstance(args, str) else args
    done = subprocess.run(
        [*mpirun(np_), str(ior), *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
    )
    assert done.returncode == status, done.stdout + done.stderr
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("IOPILOT-RESULT ")]
    result = json.loads(lines[-1].split(" ", 1)[1]) if lines else None
    if result is not None:
        assert result["kernel"] == "ior" and result["ranks"] == np_
        assert done.stdout.strip() == lines[-1], done.stdout
        result["summary"] = summarise(result)
    return result, done


def k_pattern(offsets: np.ndarray, seed: int) -> np.ndarray:
    x = offsets.astype(np.uint64) * np.uint64(K_MUL) + np.uint64(seed)
    return (x >> np.uint64(56)).astype(np.uint8)


def logical_offsets(nranks: int, segs: int, block: int, rank: int | None) -> np.ndarray:
    """Shared-file offsets of the bytes of one file (rank None: the shared file)."""
    if rank is None:
        return np.arange(nranks * segs * block, dtype=np.uint64)
    seg = np.arange(segs, dtype=np.uint64)[:, None]
    j = np.arange(block, dtype=np.uint64)[None, :]
    return ((seg * np.uint64(nranks) + np.uint64(rank)) * np.uint64(block) + j).ravel()


def expected(L: np.ndarray, nranks: int, block: int, transfer: int, seed: int, packet: str):
    """The bytes at logical offsets L, as kernels/ior.c describes them."""
    owner = (L // np.uint64(block)) % np.uint64(nranks)
    j = L % np.uint64(transfer)
    out = k_pattern(owner * np.uint64(transfer) + j, seed)
    if packet != "timestamp":
        m = j % np.uint64(4096)
        word = j - m
        stamped = (m < 8) & (word + np.uint64(8) <= np.uint64(transfer))
        w = (L - j + word) * np.uint64(K_MUL) + np.uint64(seed)
        byte = ((w >> (np.uint64(8) * m)) & np.uint64(0xFF)).astype(np.uint8)
        out[stamped] = byte[stamped]
    return out


def file_bytes(path: Path, api: str) -> np.ndarray:
    if api == "hdf5":
        import h5py

        with h5py.File(path, "r") as f:
            return f["data"][...]
    return np.fromfile(path, dtype=np.uint8)


def flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


BLOCK, XFER, SEGS, ITERS = 64 * KIB, 16 * KIB, 3, 2
SMALL = f"--block 64k --transfer 16k --segments {SEGS}"


def check_counts(result: dict, np_: int, write: bool = True, read: bool = True) -> None:
    total = np_ * SEGS * BLOCK
    for it in result["iterations"]:
        assert it["bytes_written"] == (total if write else 0)
        assert it["bytes_read"] == (total if read else 0)
        assert it["write_ops"] == (total // XFER if write else 0)
        assert it["read_ops"] == (total // XFER if read else 0)
        assert it["verified"] is (True if read else None)
        if write:
            assert it["write_total_s"] >= it["write_s"] > 0
            assert it["write_total_s"] >= max(it["write_open_s"], it["write_close_s"])


# --------------------------------------------------------------------------
# Layout and data


@pytest.mark.parametrize("fpp", [False, True], ids=["shared", "fpp"])
@pytest.mark.parametrize(
    "api, packet",
    [("posix", "timestamp"), ("posix", "i"), ("posix", "offset"), ("mpiio", "offset"),
     ("hdf5", "offset")],
)  # fmt: skip
def test_layout_and_data_convention(ior, tmp_path, api, fpp, packet):
    np_ = 2
    args = f"--api {api} {SMALL} --iterations {ITERS} --file t.dat --keep -l {packet}"
    result, _ = run(ior, args.split() + (["--fpp"] if fpp else []), np_, tmp_path)
    assert len(result["iterations"]) == ITERS
    check_counts(result, np_)
    long_name = {"i": "incompressible"}.get(packet, packet)
    assert result["params"]["data_packet_type"] == long_name
    seed = ITERS - 1  # the kept file is the last iteration's
    ranks = range(np_) if fpp else [None]
    for r in ranks:
        path = tmp_path / (f"t.dat.{r:08d}" if fpp else "t.dat")
        data = file_bytes(path, api)
        L = logical_offsets(np_, SEGS, BLOCK, r)
        assert data.shape == L.shape
        assert np.array_equal(data, expected(L, np_, BLOCK, XFER, seed, long_name))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"t.dat.{r:08d}" if fpp else "t.dat" for r in ranks
    )


def test_packets_differ_only_in_the_stamped_words(ior, tmp_path):
    run(ior, f"{SMALL} --file t.dat --keep --write -l t", 1, tmp_path)
    plain = np.fromfile(tmp_path / "t.dat", dtype=np.uint8)
    run(ior, f"{SMALL} --file t.dat --keep --write -l offset", 1, tmp_path)
    stamped = np.fromfile(tmp_path / "t.dat", dtype=np.uint8)
    differ = np.flatnonzero(plain != stamped)
    assert len(differ) > 0 and set(differ % 4096) <= set(range(8))
    # timestamp: every transfer of a rank is the same bytes
    assert np.array_equal(plain[:XFER], plain[XFER : 2 * XFER])


def test_removes_its_files_without_keep(ior, tmp_path):
    result, _ = run(ior, "--block 32k --transfer 8k --fpp", 2, tmp_path)
    assert result["iterations"][0]["bytes_read"] == 2 * 32 * KIB
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("api", ["mpiio", "hdf5"])
def test_collective_fsync_and_hints(ior, tmp_path, api):
    args = f"--api {api} {SMALL} --iterations {ITERS} --collective --fsync --hint cb_nodes=1"
    result, _ = run(ior, args, 2, tmp_path)
    check_counts(result, 2)
    p = result["params"]
    assert p["collective"] == 1 and p["fsync"] == 1 and p["hints"] == "cb_nodes=1"
    # the hints read back after an open, and the MPI-IO component
    assert "cb_nodes=1" in p["hints_in_effect"] and p["mpiio_component"]
    # open + sync + close in the write phase, open + close in the read phase;
    # the untimed check pass is not counted
    per_rank = {"mpiio": 5, "hdf5": 2 + 1 + 2 + 2 + 2}[api]
    assert all(it["meta_ops"] == 2 * per_rank for it in result["iterations"])
    text = render(result)
    assert "MPI-IO component:" in text and "cb_nodes=1" in text


def test_component_named_by_the_environment(ior, tmp_path):
    env = {**os.environ, "OMPI_MCA_io": "ompio"}
    result, _ = run(ior, "--api mpiio --block 32k --transfer 8k", 1, tmp_path, env=env)
    assert result["params"]["mpiio_component"] == "ompio"
    posix, _ = run(ior, "--block 32k --transfer 8k", 1, tmp_path)
    assert "mpiio_component" not in posix["params"]
    assert "MPI-IO component" not in render(posix)


# --------------------------------------------------------------------------
# Checking


@pytest.mark.parametrize("api", ["posix", "mpiio", "hdf5"])
def test_check_names_file_and_offset_and_no_check_skips_it(ior, tmp_path, api):
    base = f"--api {api} --block 64k --transfer 16k --file t.dat".split()
    result, _ = run(ior, [*base, "--write", "--keep"], 2, tmp_path)
    assert result["iterations"][0]["verified"] is None
    result, _ = run(ior, [*base, "--read"], 2, tmp_path)
    assert result["iterations"][0]["verified"] is True
    assert result["iterations"][0]["check_s"] > 0
    start = 0
    if api == "hdf5":
        import h5py

        with h5py.File(tmp_path / "t.dat", "r") as f:
            start = f["data"].id.get_offset()
    flip_byte(tmp_path / "t.dat", start + BLOCK + 1000)  # rank 1's block
    result, done = run(ior, [*base, "--read"], 2, tmp_path, status=3)
    assert result is None
    assert "verification failed (rank 1)" in done.stderr, done.stderr
    assert f"t.dat: byte at offset {BLOCK + 1000} is" in done.stderr
    # Without checking the same read succeeds and says nothing was checked.
    result, _ = run(ior, [*base, "--read", "--no-check"], 2, tmp_path)
    it = result["iterations"][0]
    assert it["verified"] is None and it["check_s"] == 0
    assert it["bytes_read"] == 2 * BLOCK
    assert result["summary"]["verified"] is None
    assert result["params"]["check_read"] == 0


def test_check_write_reads_back_after_the_write(ior, tmp_path):
    result, _ = run(ior, f"{SMALL} --write -W", 2, tmp_path)
    it = result["iterations"][0]
    assert it["verified"] is True and it["check_s"] > 0 and it["bytes_read"] == 0
    assert result["params"]["check_write"] == 1
    result, _ = run(ior, f"{SMALL} --write --check", 2, tmp_path)
    assert result["iterations"][0]["verified"] is True
    result, _ = run(ior, f"{SMALL} --write", 2, tmp_path)
    assert result["iterations"][0]["verified"] is None


def test_short_file_is_a_verification_failure(ior, tmp_path):
    base = "--block 64k --transfer 16k --file t.dat".split()
    run(ior, [*base, "--write", "--keep"], 2, tmp_path)
    os.truncate(tmp_path / "t.dat", BLOCK + 100)
    _, done = run(ior, [*base, "--read"], 2, tmp_path, status=3)
    assert "file too short" in done.stderr, done.stderr


@pytest.mark.parametrize("flag", ["--reorder", "-C", "--read-cache shift"])
def test_reorder_reads_the_next_ranks_data(ior, tmp_path, flag):
    base = f"{SMALL} --file t.dat --fpp".split()
    result, _ = run(ior, [*base, *flag.split()], 2, tmp_path)
    assert result["params"]["reorder"] == 1 and result["params"]["read_cache"] == "shift"
    assert result["iterations"][0]["verified"] is True
    run(ior, [*base, "--write", "--keep"], 2, tmp_path)
    flip_byte(tmp_path / "t.dat.00000001", BLOCK + 5)
    _, done = run(ior, [*base, "--read", *flag.split()], 2, tmp_path, status=3)
    assert "verification failed (rank 0)" in done.stderr and "rank 1's data" in done.stderr
    _, done = run(ior, [*base, "--read"], 2, tmp_path, status=3)
    assert "verification failed (rank 1)" in done.stderr


def test_random_task_reorder_and_drop_cache(ior, tmp_path):
    result, _ = run(ior, f"{SMALL} --fpp -Z --read-cache drop -g -i 2", 2, tmp_path)
    p = result["params"]
    assert p["reorder_random"] == 1 and p["read_cache"] == "drop"
    assert p["intra_test_barriers"] == 1
    check_counts(result, 2)
    assert "reads measured with read cache: drop" in render(result)


# --------------------------------------------------------------------------
# IOR's options


def test_random_offset_writes_every_transfer_once(ior, tmp_path):
    args = f"{SMALL} --file t.dat --keep -l o -z --fpp".split()
    result, _ = run(ior, args, 2, tmp_path)
    check_counts(result, 2)
    assert result["params"]["random_offset"] == 1
    for r in range(2):
        data = np.fromfile(tmp_path / f"t.dat.{r:08d}", dtype=np.uint8)
        L = logical_offsets(2, SEGS, BLOCK, r)
        assert np.array_equal(data, expected(L, 2, BLOCK, XFER, 0, "offset"))


@pytest.mark.parametrize("random", [False, True], ids=["sequential", "random"])
def test_stonewall_stops_early_and_reports_the_bytes_moved(ior, tmp_path, random):
    # A deadline shorter than any transfer: each rank stops after its first one.
    args = "--block 128k --transfer 16k --fpp --file t.dat --keep -l o -D 1e-9"
    args += " -z" if random else ""
    result, _ = run(ior, args, 2, tmp_path)
    it = result["iterations"][0]
    assert it["bytes_written"] == it["write_ops"] * XFER == 2 * XFER
    assert it["write_stonewalled"] == 2
    # the read stops at what was written, and checks just that
    assert it["bytes_read"] == 2 * XFER and it["verified"] is True
    assert result["params"]["stonewall_s"] == 1e-9
    data = np.fromfile(tmp_path / "t.dat.00000000", dtype=np.uint8)
    written = [k for k in range(len(data) // XFER) if data[k * XFER : (k + 1) * XFER].any()]
    assert len(written) == 1 and (written[0] != 0) == random
    k = written[0]
    L = logical_offsets(2, 1, 128 * KIB, 0)[k * XFER : (k + 1) * XFER]
    assert np.array_equal(data[k * XFER :], expected(L, 2, 128 * KIB, XFER, 0, "offset"))
    assert result["summary"]["write"]["bytes"] == 2 * XFER


def test_fsync_per_write_syncs_every_transfer(ior, tmp_path):
    result, _ = run(ior, "--block 64k --transfer 16k -Y", 1, tmp_path)
    # open + 4 syncs + close, then open + close
    assert result["iterations"][0]["meta_ops"] == 1 + 4 + 1 + 2
    assert result["params"]["fsync_per_write"] == 1


@pytest.mark.parametrize("existing", [False, True], ids=["fresh", "existing"])
def test_use_existing_file_is_not_removed_first(ior, tmp_path, existing):
    path = tmp_path / "t.dat"
    path.write_bytes(b"\xab" * (3 * BLOCK))
    inode = path.stat().st_ino
    args = "--block 64k --transfer 16k --file t.dat --keep --write".split()
    result, _ = run(ior, [*args, *(["-E"] if existing else [])], 1, tmp_path)
    assert result["params"]["use_existing_file"] == int(existing)
    data = np.fromfile(path, dtype=np.uint8)
    head = expected(logical_offsets(1, 1, BLOCK, None), 1, BLOCK, XFER, 0, "timestamp")
    assert np.array_equal(data[:BLOCK], head)
    if existing:
        assert path.stat().st_ino == inode and len(data) == 3 * BLOCK
        assert (data[BLOCK:] == 0xAB).all()
    else:
        assert len(data) == BLOCK


def test_unique_dir_gives_each_rank_a_directory(ior, tmp_path):
    (tmp_path / "d").mkdir()
    args = "--block 32k --transfer 8k --fpp -u --file d/t.dat"
    result, _ = run(ior, f"{args} --keep", 2, tmp_path)
    assert result["params"]["unique_dir"] == 1
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == [
        "d", "d/0", "d/0/t.dat.00000000", "d/1", "d/1/t.dat.00000001"
    ]  # fmt: skip
    shutil.rmtree(tmp_path / "d")
    (tmp_path / "d").mkdir()
    run(ior, args, 2, tmp_path)  # without --keep: files and directories go
    assert list((tmp_path / "d").iterdir()) == []


def test_multi_file_writes_one_file_per_repetition(ior, tmp_path):
    args = "--block 32k --transfer 8k --file t.dat -m -i 3 -l o"
    result, _ = run(ior, f"{args} --keep", 1, tmp_path)
    assert result["params"]["multi_file"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.dat.0", "t.dat.1", "t.dat.2"]
    for i in range(3):
        data = np.fromfile(tmp_path / f"t.dat.{i}", dtype=np.uint8)
        L = logical_offsets(1, 1, 32 * KIB, None)
        assert np.array_equal(data, expected(L, 1, 32 * KIB, 8 * KIB, i, "offset"))
    # a read-only run reads repetition i's file with seed i
    result, _ = run(ior, f"{args} --read", 1, tmp_path)
    assert [it["verified"] for it in result["iterations"]] == [True] * 3
    run(ior, args, 1, tmp_path)  # without --keep each repetition removes its file
    assert list(tmp_path.iterdir()) == []


def test_ior_spellings_mean_the_same(ior, tmp_path):
    long, _ = run(ior, f"--api mpiio {SMALL} --fpp --fsync --iterations 2 --keep "
                       "--file t.dat --reorder-tasks", 2, tmp_path)  # fmt: skip
    short, _ = run(ior, "-a MPIIO -b 64k -t 16k -s 3 -F -e -i 2 -k -o t.dat -C -w -r", 2, tmp_path)
    skip = {"command_line", "began", "finished"}
    assert {k: v for k, v in long["params"].items() if k not in skip} == {
        k: v for k, v in short["params"].items() if k not in skip
    }
    run(ior, "--inter-test-delay 0.01 -d 0.01 --block 32k --transfer 8k", 1, tmp_path)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--bogus"], "unknown option '--bogus'"),
        (["--block", "100k", "--transfer", "64k"], "multiple of --transfer"),
        (["--api", "nfs"], "--api must be"),
        (["--block"], "needs a value"),
        (["--collective"], "--collective needs"),
        (["--api", "mpiio", "--odirect"], "--odirect needs"),
        (["--api", "mpiio", "--hint", "novalue"], "KEY=VALUE"),
        (["--read-cache", "disk"], "--read-cache must be"),
        (["-l", "x"], "--data-packet-type must be"),
        (["--no-check", "-W"], "--no-check cannot"),
        (["-u"], "--unique-dir needs --fpp"),
        (["-C", "-Z"], "choose one of"),
        (["-D", "-1"], "must be >= 0"),
        (["--read", "-E"], "--use-existing-file needs"),
    ],
)
def test_bad_options(ior, tmp_path, args, message):
    result, done = run(ior, args, 1, tmp_path, status=2)
    assert result is None
    assert message in done.stderr and "usage: ior" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_odirect(ior, tmp_path):
    cmd = [*mpirun(2), str(ior), *"--odirect --fsync --block 1m --transfer 256k".split()]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    if done.returncode == 2 and "O_DIRECT" in done.stderr:
        pytest.skip(f"file system of {tmp_path} refuses O_DIRECT")
    assert done.returncode == 0, done.stderr
    it = json.loads(done.stdout.strip().split(" ", 1)[1])["iterations"][0]
    assert it["bytes_written"] == it["bytes_read"] == 2 * 1024 * KIB and it["verified"] is True


# --------------------------------------------------------------------------
# Summary, table and IOR's JSON


def test_headline_is_bytes_over_open_to_close_time(ior, tmp_path):
    result, _ = run(ior, f"{SMALL} --fsync -i 3", 2, tmp_path)
    s = result["summary"]
    for phase, b in (("write", "bytes_written"), ("read", "bytes_read")):
        bw = [it[b] / MiB / it[f"{phase}_total_s"] for it in result["iterations"]]
        xfer = [it[b] / MiB / it[f"{phase}_s"] for it in result["iterations"]]
        assert s[phase]["max_mib_s"] == pytest.approx(max(bw))
        assert s[phase]["min_mib_s"] == pytest.approx(min(bw))
        assert s[phase]["mean_mib_s"] == pytest.approx(sum(bw) / 3)
        assert s[phase]["std_mib_s"] == pytest.approx(np.std(bw))
        assert s[phase]["max_mib_s_transfer"] == pytest.approx(max(xfer))
        assert s[phase]["max_mib_s_with_open_close"] == s[phase]["max_mib_s"]
        ops = [it[f"{phase}_ops"] / it[f"{phase}_total_s"] for it in result["iterations"]]
        assert s[phase]["max_ops_s"] == pytest.approx(max(ops))
        assert s[phase]["mean_s"] == pytest.approx(
            np.mean([it[f"{phase}_total_s"] for it in result["iterations"]])
        )
    text = render(result)
    assert "Operation" in text and "Max(MiB)" in text and "Mean(s)" in text
    assert text.count("\nwrite ") == 3 and text.count("\nread ") == 3
    assert f"Max Write {s['write']['max_mib_s']:>10.2f} MiB/s" in text


@pytest.mark.parametrize("api", ["posix", "mpiio"])
def test_phase_total_spans_open_to_close(ior, tmp_path, api):
    # One rank and no barrier inside a phase: the phase is t0 open t1, t2
    # transfers + fsync t3, t4 close t5, with t1 = t2 and t3 = t4 but for two
    # clock reads, so by definition open_s + xfer_s + close_s <= total_s =
    # t5 - t0, the difference being those reads alone.  A total that ends at
    # the transfers' end or starts at their start misses the close or the
    # open, which take a system call each (MPI_File_open: milliseconds).
    result, _ = run(ior, f"--api {api} {SMALL} --fsync -i 4", 1, tmp_path)
    rounding = 4e-9  # four figures printed with 9 decimals
    for it in result["iterations"]:
        for phase, moved in (("write", "bytes_written"), ("read", "bytes_read")):
            total = it[f"{phase}_total_s"]
            parts = it[f"{phase}_open_s"] + it[f"{phase}_s"] + it[f"{phase}_close_s"]
            assert parts <= total + rounding, (phase, it)
            assert it[moved] == SEGS * BLOCK
    s = result["summary"]
    doc = ior_json(result)
    for phase, moved in (("write", "bytes_written"), ("read", "bytes_read")):
        totals = [it[f"{phase}_total_s"] for it in result["iterations"]]
        bw = [it[moved] / MiB / t for it, t in zip(result["iterations"], totals, strict=True)]
        assert s[phase]["max_mib_s"] == max(bw) and s[phase]["min_mib_s"] == min(bw)
        assert s[phase]["mean_s"] == pytest.approx(sum(totals) / len(totals), rel=1e-12)
        rows = [r for r in doc["tests"][0]["Results"] if r["access"] == phase]
        assert [r["totalTime"] for r in rows] == totals
        assert [r["bwMiB"] for r in rows] == bw


def test_summary_falls_back_to_open_plus_close_for_other_kernels():
    res = {"iterations": [
        {"iteration": 0, "open_s": 0.5, "write_s": 1.0, "read_s": 0.0, "close_s": 0.5,
         "bytes_written": 100 * MiB, "bytes_read": 0, "write_ops": 100, "read_ops": 0,
         "meta_ops": 2, "verified": None}]}  # fmt: skip
    s = summarise(res)
    assert s["write"]["max_mib_s"] == 50.0 and s["write"]["max_mib_s_transfer"] == 100.0
    assert s["write"]["std_mib_s"] == 0.0 and s["write"]["max_ops_s"] == 50.0
    assert "read" not in s and s["verified"] is None


# Field names of IOR 4.1's -O summaryFormat=JSON output.
IOR_TOP = ["Version", "Began", "Command line", "Machine", "tests", "summary", "Finished"]
IOR_SUMMARY = [
    "operation", "API", "TestID", "ReferenceNumber", "segmentCount", "blockSize",
    "transferSize", "numTasks", "tasksPerNode", "repetitions", "filePerProc", "reorderTasks",
    "taskPerNodeOffset", "reorderTasksRandom", "reorderTasksRandomSeed", "bwMaxMIB",
    "bwMinMIB", "bwMeanMIB", "bwStdMIB", "OPsMax", "OPsMin", "OPsMean", "OPsSD", "MeanTime",
    "xsizeMiB",
]  # fmt: skip
IOR_RESULT = ["access", "bwMiB", "blockKiB", "xferKiB", "iops", "latency", "openTime",
              "wrRdTime", "closeTime", "totalTime"]  # fmt: skip


@pytest.mark.parametrize("iters", [1, 3])
def test_ior_json_has_iors_fields_and_consistent_values(ior, tmp_path, iters):
    result, _ = run(ior, f"--api mpiio {SMALL} --fpp -e -i {iters}", 2, tmp_path)
    doc = json.loads(json.dumps(ior_json(result)))
    assert list(doc) == IOR_TOP
    test = doc["tests"][0]
    assert list(test)[:4] == ["TestID", "StartTime", "Path", "Parameters"]
    assert test["Path"] == "iopilot-ior.dat.00000000"
    assert test["Parameters"]["api"] == "MPIIO" and test["Parameters"]["filePerProc"] == 1
    assert test["Parameters"]["repetitions"] == iters and test["Parameters"]["fsync"] == 1
    assert test["Options"]["access"] == "file-per-process"
    assert test["Options"]["aggregate filesize"] == "384 KiB"
    assert [r["access"] for r in test["Results"]] == ["write", "read"] * iters
    for r in test["Results"]:
        assert list(r) == IOR_RESULT
        assert r["bwMiB"] == pytest.approx(2 * SEGS * BLOCK / MiB / r["totalTime"])
    assert [s["operation"] for s in doc["summary"]] == ["write", "read"]
    for s in doc["summary"]:
        assert list(s) == IOR_SUMMARY
        assert s["numTasks"] == 2 and s["transferSize"] == XFER and s["segmentCount"] == SEGS
        assert s["bwMinMIB"] <= s["bwMeanMIB"] <= s["bwMaxMIB"]
        assert s["OPsMax"] == pytest.approx(s["bwMaxMIB"] * MiB / XFER)
        assert s["xsizeMiB"] == pytest.approx(2 * SEGS * BLOCK / MiB)
        assert s["bwMaxMIB"] == pytest.approx(result["summary"][s["operation"]]["max_mib_s"])
        if iters == 1:
            assert s["bwStdMIB"] == 0 and s["OPsSD"] == 0
            assert s["bwMaxMIB"] == s["bwMinMIB"]
    assert doc["Command line"].endswith(f"-e -i {iters}") and doc["Finished"]


@pytest.mark.parametrize("collective", [True, False])
def test_hdf5_phases_say_what_was_mpiio(ior, tmp_path, collective):
    args = "--api hdf5 --block 256k --transfer 64k --iterations 2" + (
        " --collective" if collective else "")  # fmt: skip
    result, _ = run(ior, args, 2, tmp_path)
    for it in result["iterations"]:
        for phase, ops in (("write", "write_ops"), ("read", "read_ops")):
            # every H5Dwrite/H5Dread reaches MPI-IO at least once, on every rank
            assert it[f"{phase}_mpiio_calls"] >= it[ops] == 2 * 4
            assert 0 < it[f"{phase}_mpiio_s"] <= it[f"{phase}_total_s"]
            # collective transfers go through a file view; independent ones here do not
            assert (it[f"{phase}_mpiio_views"] > 0) == collective
    text = render(result)
    assert "HDF5 write: " in text and "inside MPI-IO" in text and "in HDF5 itself" in text


def test_other_apis_have_no_hdf5_breakdown(ior, tmp_path):
    result, _ = run(ior, "--api mpiio --collective --block 256k --transfer 64k", 2, tmp_path)
    assert not any("mpiio_calls" in k for k in result["iterations"][0])
    assert "HDF5 write" not in render(result)


def test_hdf5_breakdown_figures():
    its = [{"write_total_s": 2.0, "write_mpiio_s": 1.5, "write_mpiio_calls": 30,
            "write_mpiio_views": 20, "write_ops": 10},
           {"write_total_s": 2.0, "write_mpiio_s": 0.5, "write_mpiio_calls": 30,
            "write_mpiio_views": 20, "write_ops": 10}]  # fmt: skip
    (line,) = hdf5_breakdown({"iterations": its})
    assert line == ("HDF5 write: 2.0000 s of 4.0000 s inside MPI-IO (60 calls for 20 H5Dwrite "
                    "calls, 40 of them file views); 2.0000 s (50 %) in HDF5 itself")  # fmt: skip
    # MPI-IO time measured on one rank can exceed the phase by clock noise: capped
    its[0]["write_mpiio_s"] = 9.0
    assert hdf5_breakdown({"iterations": its})[0].endswith("0.0000 s (0 %) in HDF5 itself")
    assert hdf5_breakdown({"iterations": [{"write_total_s": 1.0, "write_ops": 3}]}) == []


def test_tracing_still_sees_the_mpiio_calls_under_hdf5(tmp_path):
    trace = tmp_path / "t"
    p = subprocess.run([sys.executable, "-m", "iopilot", "bench", "ior", "--ranks", "2", "--api",
                        "hdf5", "--collective", "--block", "256k", "--transfer", "64k",
                        "--trace", str(trace), "--dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    assert p.returncode == 0, p.stderr
    p = subprocess.run([sys.executable, "-m", "iopilot", "report", str(trace), "--json"],
                       capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    layers = {x["layer"]: x for x in json.loads(p.stdout)["reports"][0]["layers"]}
    assert layers["MPI-IO"]["writes"] >= layers["H5D"]["writes"] == 8


@pytest.mark.parametrize("asynchronous", [0, 1])
def test_async_runs_say_their_bandwidth_is_the_wait_not_the_transfer(asynchronous):
    it = {"iteration": 0, "open_s": 0.0, "close_s": 0.0, "write_s": 0.001, "read_s": 0.0,
          "bytes_written": 128 * MiB, "bytes_read": 0, "write_ops": 1, "read_ops": 0,
          "verified": None}  # fmt: skip
    result = {"kernel": "epochs", "ranks": 1, "params": {"async": asynchronous},
              "iterations": [it]}
    result["summary"] = summarise(result)
    text = render(result)
    assert ("async: the MiB/s above divide by the time the program waited" in text) \
        == bool(asynchronous)
