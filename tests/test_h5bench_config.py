"""h5bench JSON setups turned into vpicio/bdcats runs (iopilot.bench.h5bench_config).

A setup written here maps to exact kernel arguments, and those arguments run
through the real kernels; every setting the kernels cannot honour is an
InputError that names the key and its value.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from iopilot.bench.h5bench_config import kernel_runs
from iopilot.errors import InputError
from test_kernels_hdf5 import kernels, result, run  # noqa: F401  (kernels is a fixture)

WRITE = {
    "MEM_PATTERN": "CONTIG", "FILE_PATTERN": "CONTIG", "TIMESTEPS": "3",
    "DELAYED_CLOSE_TIMESTEPS": "1", "COLLECTIVE_DATA": "YES", "COLLECTIVE_METADATA": "NO",
    "EMULATED_COMPUTE_TIME_PER_TIMESTEP": "20 ms", "NUM_DIMS": "1", "DIM_1": "300",
    "DIM_2": "1", "DIM_3": "1", "CSV_FILE": "out.csv", "MODE": "SYNC",
    "ALIGN": "YES", "ALIGN_THRESHOLD": "0", "ALIGN_LEN": "4 K",
}  # fmt: skip
READ_FULL = {
    "MEM_PATTERN": "CONTIG", "FILE_PATTERN": "CONTIG", "READ_OPTION": "FULL", "TIMESTEPS": 3,
    "COLLECTIVE_METADATA": "YES", "NUM_DIMS": 1, "DIM_1": 300, "DIM_2": 1, "DIM_3": 1,
    "MODE": "SYNC", "DELAYED_CLOSE_TIMESTEPS": 2,
}  # fmt: skip
READ_PARTIAL = {
    "READ_OPTION": "PARTIAL",
    "TIMESTEPS": "2",
    "TO_READ_NUM_PARTICLES": "120",
    "DELAYED_CLOSE_TIMESTEPS": "0",
}
READ_STRIDED = {
    "FILE_PATTERN": "STRIDED",
    "READ_OPTION": "STRIDED",
    "TIMESTEPS": "1",
    "STRIDE_SIZE": "5",
    "BLOCK_SIZE": "2",
    "BLOCK_CNT": "60",
    "EMULATED_COMPUTE_TIME_PER_TIMESTEP": "1 s",
}

SETUP = {
    "mpi": {"command": "mpirun", "ranks": "8", "configuration": "--oversubscribe -np 2"},
    "vol": {}, "file-system": {}, "directory": "out",
    "benchmarks": [
        {"benchmark": "write", "file": "p.h5", "configuration": WRITE},
        {"benchmark": "read", "file": "p.h5", "configuration": READ_FULL},
        {"benchmark": "read", "file": "p.h5", "configuration": READ_PARTIAL},
        {"benchmark": "read", "file": "p.h5", "configuration": READ_STRIDED},
    ],
}  # fmt: skip

EXPECTED = [
    ("vpicio", 2, ["--file", "out/p.h5", "--steps", "3", "--collective", "--compute", "0.02",
                   "--delay-close", "1", "--particles", "300", "--align", "0:4096"]),
    ("bdcats", 2, ["--file", "out/p.h5", "--steps", "3", "--coll-metadata", "--delay-close",
                   "2", "--mode", "full", "--particles", "300"]),
    ("bdcats", 2, ["--file", "out/p.h5", "--steps", "2", "--mode", "partial", "--particles",
                   "120"]),
    ("bdcats", 2, ["--file", "out/p.h5", "--steps", "1", "--compute", "1", "--mode", "strided",
                   "--stride", "5", "--block", "2", "--blocks", "60"]),
]  # fmt: skip


def write(tmp_path: Path, setup: dict) -> str:
    path = tmp_path / "setup.json"
    path.write_text(json.dumps(setup))
    return str(path)


def test_setup_maps_to_kernel_arguments(tmp_path):
    assert kernel_runs(write(tmp_path, SETUP)) == EXPECTED


def test_ranks_without_launcher_configuration(tmp_path):
    setup = copy.deepcopy(SETUP)
    setup["mpi"] = {"command": "mpirun", "ranks": 3}
    setup["directory"] = ""
    runs = kernel_runs(write(tmp_path, setup))
    assert [r[1] for r in runs] == [3] * 4
    assert runs[0][2][:2] == ["--file", "p.h5"]


@pytest.mark.parametrize(
    "value,seconds",
    [("2 s", "2"), ("250ms", "0.25"), ("500 us", "0.0005"), ("1 min", "60"), ("3", "3")],
)
def test_compute_time_units(tmp_path, value, seconds):
    setup = copy.deepcopy(SETUP)
    setup["benchmarks"] = [
        {
            "benchmark": "write",
            "file": "a.h5",
            "configuration": {**WRITE, "EMULATED_COMPUTE_TIME_PER_TIMESTEP": value},
        }
    ]
    args = kernel_runs(write(tmp_path, setup))[0][2]
    assert args[args.index("--compute") + 1] == seconds


def test_runs_through_the_kernels(kernels, tmp_path):  # noqa: F811
    setup = copy.deepcopy(SETUP)
    setup["benchmarks"][3]["configuration"]["EMULATED_COMPUTE_TIME_PER_TIMESTEP"] = "10 ms"
    runs = kernel_runs(write(tmp_path, setup))
    (tmp_path / "out").mkdir()
    reads = []
    for kernel, ranks, args in runs:
        res = result(run(kernels, ranks, kernel, *args, cwd=tmp_path).stdout)
        assert res["kernel"] == kernel and res["ranks"] == ranks == 2
        if kernel == "bdcats":
            reads.append([it["bytes_read"] for it in res["iterations"]])
            assert all(it["verified"] is True for it in res["iterations"])
        else:
            assert [it["bytes_written"] for it in res["iterations"]] == [2 * 300 * 32] * 3
    # Full: 300 per rank; partial: 120 per rank; strided: 60 blocks of 2 per rank.
    assert reads == [[2 * 300 * 32] * 3, [2 * 120 * 32] * 2, [2 * 120 * 32]]


def bad(key_path: tuple, value) -> dict:
    setup = copy.deepcopy(SETUP)
    node = setup
    for k in key_path[:-1]:
        node = node[k]
    if value is KeyError:
        del node[key_path[-1]]
    else:
        node[key_path[-1]] = value
    return setup


W, R, P, S = (("benchmarks", i, "configuration") for i in range(4))
UNSUPPORTED = [
    ((*W, "MEM_PATTERN"), "INTERLEAVED", "MEM_PATTERN = \"INTERLEAVED\""),
    ((*W, "FILE_PATTERN"), "INTERLEAVED", "FILE_PATTERN = \"INTERLEAVED\""),
    ((*W, "FILE_PATTERN"), "STRIDED", "FILE_PATTERN = \"STRIDED\""),
    ((*R, "FILE_PATTERN"), "STRIDED", "FILE_PATTERN = \"STRIDED\""),
    ((*S, "FILE_PATTERN"), "CONTIG", "FILE_PATTERN = \"CONTIG\""),
    ((*W, "MODE"), "ASYNC", "MODE = \"ASYNC\""),
    ((*W, "NUM_DIMS"), "2", "NUM_DIMS = \"2\""),
    ((*R, "DIM_2"), 4, "DIM_2 = 4"),
    ((*W, "DIM_3"), "8", "DIM_3 = \"8\""),
    ((*R, "READ_OPTION"), "PRL", "READ_OPTION = \"PRL\""),
    ((*W, "COMPRESS"), "YES", "COMPRESS = \"YES\""),
    ((*W, "SUBFILING"), "YES", "SUBFILING = \"YES\""),
    ((*W, "FILE_PER_PROC"), "YES", "FILE_PER_PROC = \"YES\""),
    ((*W, "IO_MEM_LIMIT"), "1 G", "IO_MEM_LIMIT = \"1 G\""),
    ((*W, "CHUNK_DIM_1"), "64", "CHUNK_DIM_1 = \"64\""),
    ((*W, "STDEV_DIM_1"), "10", "STDEV_DIM_1 = \"10\""),
    ((*R, "ALIGN"), "YES", "ALIGN = \"YES\""),
    ((*W, "COLLECTIVE_DATA"), "MAYBE", "COLLECTIVE_DATA = \"MAYBE\""),
    ((*W, "EMULATED_COMPUTE_TIME_PER_TIMESTEP"), "1 h",
     "EMULATED_COMPUTE_TIME_PER_TIMESTEP = \"1 h\""),
    ((*W, "DIM_1"), "many", "DIM_1 = \"many\""),
    ((*W, "NUM_PARTICLES"), "301", "NUM_PARTICLES = \"301\" but DIM_1 = 300"),
    ((*W, "TIMESTEPS"), KeyError, "TIMESTEPS: missing"),
    ((*W, "ALIGN_LEN"), "0", "ALIGN_LEN = \"0\""),
    ((*P, "TO_READ_NUM_PARTICLES"), KeyError, "TO_READ_NUM_PARTICLES: missing"),
    ((*S, "BLOCK_SIZE"), "6", "BLOCK_SIZE = 6, STRIDE_SIZE = 5"),
    ((*S, "BLOCK_CNT"), KeyError, "BLOCK_CNT: missing"),
    ((*R, "STRIDE_SIZE"), "2", "STRIDE_SIZE: only with READ_OPTION = STRIDED"),
    (("benchmarks", 1, "benchmark"), "metadata", "benchmark = \"metadata\""),
    (("benchmarks", 0, "benchmark"), "write-unlimited", "benchmark = \"write-unlimited\""),
    (("benchmarks", 0, "extra"), 1, "benchmarks[0].extra: unknown key"),
    (("vol",), {"connector": "async under_vol=0"}, "vol = {\"connector\""),
    (("file-system",), {"lustre": {"stripe-count": "4"}}, "file-system = {\"lustre\""),
    (("mpi", "configuration"), "-np 2 --map-by node", "launcher option '--map-by'"),
    (("mpi", "configuration"), "--oversubscribe", "sets no process count"),
    (("mpi", "configuration"), "-np 0", "0 ranks"),
    (("directory",), KeyError, "no 'directory'"),
    (("results",), [], "unknown top-level key 'results'"),
]  # fmt: skip


@pytest.mark.parametrize(
    "key_path,value,message",
    UNSUPPORTED,
    ids=[f"{'.'.join(map(str, k[-2:]))}={v}" for k, v, _ in UNSUPPORTED],
)
def test_unsupported_settings_are_errors(tmp_path, key_path, value, message):
    path = write(tmp_path, bad(key_path, value))
    with pytest.raises(InputError) as e:
        kernel_runs(path)
    assert e.value.path == path
    assert message in str(e.value), str(e.value)


def test_supported_values_of_the_same_keys(tmp_path):
    # The other side of the errors above: NO, SYNC, 1, 0 and matching counts pass.
    setup = copy.deepcopy(SETUP)
    w = setup["benchmarks"][0]["configuration"]
    w.update(
        COMPRESS="NO",
        SUBFILING="no",
        FILE_PER_PROC="NO",
        IO_MEM_LIMIT="0",
        NUM_PARTICLES="300",
        ALIGN="NO",
        DELAYED_CLOSE_TIMESTEPS="0",
    )
    del w["ALIGN_THRESHOLD"], w["ALIGN_LEN"]
    s = setup["benchmarks"][3]["configuration"]
    s["BLOCK_SIZE"] = s["STRIDE_SIZE"]
    runs = kernel_runs(write(tmp_path, setup))
    assert "--align" not in runs[0][2] and "--delay-close" not in runs[0][2]
    assert runs[3][2][-4:] == ["--block", "5", "--blocks", "60"]


def test_not_json(tmp_path):
    path = tmp_path / "setup.json"
    path.write_text("{mpi: 2")
    with pytest.raises(InputError, match="not JSON"):
        kernel_runs(str(path))
    with pytest.raises(InputError, match="cannot read"):
        kernel_runs(str(tmp_path / "missing.json"))
