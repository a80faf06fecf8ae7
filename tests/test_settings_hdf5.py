"""The [hdf5] settings applied by the runtime to real HDF5 programs: the
values HDF5 used (read back by the program from H5Fget_access_plist and
H5Dget_create_plist), the program's own lists left alone, what the trace
records, and a rejected value that leaves the program's call as it was.

runtime/tests/h5_settings.c is built twice: against parallel HDF5 (h5pcc,
run under mpirun with the MPI-IO driver) and against serial HDF5
(pkg-config hdf5-serial)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from iopilot import settings as st
from iopilot.sources import load
from test_settings_runtime import LIB, MPIRUN, SOURCES, TIMEOUT, clean_env

H5PCC = shutil.which("h5pcc")
H5DUMP = shutil.which("h5dump")


def serial_flags() -> list[str] | None:
    r = subprocess.run(["pkg-config", "--cflags", "--libs", "hdf5-serial"], capture_output=True,
                       text=True, timeout=TIMEOUT)  # fmt: skip
    return r.stdout.split() if r.returncode == 0 else None


pytestmark = pytest.mark.skipif(not LIB.exists(), reason="runtime not built (make -C runtime)")

ALL = """[hdf5]
alignment = "64k"
alignment_threshold = 1024
sieve_buf_size = "256k"
meta_block_size = "8k"
coll_metadata_ops = true
coll_metadata_write = true
page_buffer_size = "64k"
chunk_cache_size = "4m"
chunk = [4, 16]
fill_time = "never"
transfer = "collective"
"""
# HDF5's own defaults: a traced run with these must look like an untraced one.
DEFAULTS = """[hdf5]
alignment = 1
alignment_threshold = 1
sieve_buf_size = "64k"
meta_block_size = 2048
coll_metadata_ops = false
coll_metadata_write = false
chunk_cache_size = "1m"
fill_time = "ifset"
transfer = "independent"
"""


@pytest.fixture(scope="module")
def parallel(tmp_path_factory) -> Path:
    if not (H5PCC and shutil.which("mpirun")):
        pytest.skip("h5pcc/mpirun not installed")
    out = tmp_path_factory.mktemp("h5set-par")
    subprocess.run([H5PCC, "-shlib", "-O1", "-Wall", "-o", "h5_settings",
                    str(SOURCES / "h5_settings.c")], cwd=out, check=True,
                   capture_output=True, timeout=TIMEOUT)  # fmt: skip
    return out / "h5_settings"


@pytest.fixture(scope="module")
def serial(tmp_path_factory) -> Path:
    flags = serial_flags()
    if flags is None:
        pytest.skip("serial HDF5 not installed (libhdf5-dev)")
    out = tmp_path_factory.mktemp("h5set-ser")
    exe = out / "h5_settings"
    subprocess.run(["cc", "-O1", "-Wall", "-o", str(exe), str(SOURCES / "h5_settings.c"),
                    *flags], check=True, capture_output=True, timeout=TIMEOUT)  # fmt: skip
    return exe


def run(exe: Path, h5: Path, trace: Path | None, settings: str | None, np: int = 0):
    """Run the program (under mpirun with ``np`` processes); stdout, stderr."""
    env: dict[str, str] = {}
    if trace is not None:
        trace.mkdir()
        env = {"LD_PRELOAD": str(LIB), "IOPILOT_TRACE_DIR": str(trace)}
    if settings is not None:
        s = h5.with_suffix(".toml")
        s.write_text(settings)
        env["IOPILOT_SETTINGS"] = str(s)
    cmd = [str(exe), str(h5)]
    if np:
        cmd = [*MPIRUN[:-1], str(np), *(x for k, v in env.items() for x in ("-x", f"{k}={v}")),
               *cmd]  # fmt: skip
    r = subprocess.run(cmd, env=clean_env(**({} if np else env)), capture_output=True, text=True,
                       timeout=TIMEOUT)  # fmt: skip
    assert r.returncode == 0, f"{cmd}\n{r.stdout}\n{r.stderr}"
    return r.stdout, r.stderr


def values(stdout: str) -> dict[str, str]:
    out = {}
    for line in stdout.splitlines():
        words = line.split()
        k = 2 if words[0] == "read" else 3  # "used /a chunk 2 8", "read back ok"
        out[" ".join(words[:k])] = " ".join(words[k:])
    return out


def outcomes(trace: Path) -> dict[tuple[str, str | None], tuple[str, str | None, int]]:
    """(setting, dataset) -> (outcome, detail, count) from the trace."""
    st = load(str(trace)).settings
    assert st and st["errors"] == []
    got = {}
    for e in st["outcomes"]:
        key = (e["setting"].removeprefix("hdf5."), e["object"])
        assert key not in got, f"two outcomes for {key}: {got[key]}, {e}"
        got[key] = (e["outcome"], e["detail"], e["count"])
    return got


DEFAULT_VALUES = {
    "used file alignment": "1 1", "used file sieve_buf_size": "65536",
    "used file meta_block_size": "2048", "used file page_buffer_size": "0",
    "used file chunk_cache_size": "1048576", "used /a chunk": "2 8",
    "used /a fill_time": "ifset", "used /b layout": "contiguous",
    "used /b fill_time": "ifset", "used /c layout": "contiguous",
}  # fmt: skip
CALLER = {
    "caller fapl alignment": "1 1", "caller fapl sieve_buf_size": "65536",
    "caller fapl meta_block_size": "2048", "caller fapl chunk_cache_size": "1048576",
    "caller dcpl chunk": "2 8",
    "caller dcpl fill_time": "ifset", "read back": "ok",
}  # fmt: skip


def test_parallel_hdf5_uses_the_settings(parallel: Path, tmp_path: Path) -> None:
    plain, _ = run(parallel, tmp_path / "plain.h5", None, None, np=2)
    assert values(plain).items() >= {**DEFAULT_VALUES, **CALLER,
                                     "used file coll_metadata_ops": "0"}.items()  # fmt: skip
    out, err = run(parallel, tmp_path / "set.h5", tmp_path / "t", ALL, np=2)
    v = values(out)
    assert v.items() >= {
        "used file alignment": "1024 65536", "used file sieve_buf_size": "262144",
        "used file meta_block_size": "8192", "used file coll_metadata_ops": "1",
        "used file coll_metadata_write": "1", "used file page_buffer_size": "0",
        "used file chunk_cache_size": "4194304",
        "used /a chunk": "4 16", "used /a fill_time": "never", "used /b layout": "chunked",
        "used /b chunk": "4 16", "used /b fill_time": "never", "used /c layout": "contiguous",
        "used /c fill_time": "never", "caller fapl coll_metadata_ops": "0",
        "caller dxpl mpio": "independent", **CALLER,
    }.items(), out  # fmt: skip
    assert err == ""
    got = outcomes(tmp_path / "t")
    for name in ("alignment", "alignment_threshold", "sieve_buf_size", "meta_block_size",
                 "coll_metadata_ops", "coll_metadata_write", "chunk_cache_size"):  # fmt: skip
        assert got[(name, None)] == ("applied", None, 2), name  # one file, two processes
    assert got[("page_buffer_size", None)][0] == "not_applicable"
    assert "MPI-IO" in got[("page_buffer_size", None)][1]
    assert got[("chunk", "/a")] == got[("chunk", "/b")] == ("applied", None, 2)
    assert got[("chunk", "/c")] == ("not_applicable", "the dataset has rank 1, the chunk 2", 2)
    assert got[("fill_time", "/c")] == ("applied", None, 2)
    # /a: one write and one read per process; /b, /c: one write.
    assert got[("transfer", "/a")] == ("applied", None, 4)
    assert got[("transfer", "/b")] == ("applied", None, 2)
    # The trace sees collective transfers where the program asked for none.
    t = load(str(tmp_path / "t"))
    c = t.counters["H5D"]
    by_name = {t.names[int(c.file_id[k])]: k for k in range(len(c))}
    row = next(k for n, k in by_name.items() if n.endswith("set.h5:/a"))
    assert int(c["H5D_USE_MPIIO_COLLECTIVE"][row]) == 1


def test_serial_hdf5_applies_what_it_can(serial: Path, tmp_path: Path) -> None:
    plain, _ = run(serial, tmp_path / "plain.h5", None, None)
    assert values(plain).items() >= {**DEFAULT_VALUES, **CALLER}.items()
    out, err = run(serial, tmp_path / "set.h5", tmp_path / "t", ALL)
    assert values(out).items() >= {
        "used file alignment": "1024 65536", "used file sieve_buf_size": "262144",
        "used file meta_block_size": "8192", "used file page_buffer_size": "65536",
        "used file chunk_cache_size": "4194304",
        "used /a chunk": "4 16", "used /b chunk": "4 16", "used /b fill_time": "never",
        **CALLER,
    }.items(), out  # fmt: skip
    assert err == ""
    got = outcomes(tmp_path / "t")
    for name in ("alignment", "sieve_buf_size", "meta_block_size", "page_buffer_size",
                 "chunk_cache_size"):  # fmt: skip
        assert got[(name, None)] == ("applied", None, 1), name
    for name in ("coll_metadata_ops", "coll_metadata_write"):
        assert got[(name, None)][0] == "not_applicable"
        assert "not a parallel build" in got[(name, None)][1]
    assert got[("transfer", "/a")][0] == "not_applicable"
    assert got[("chunk", "/b")] == ("applied", None, 1)
    # each outcome names the value as the file spelled it
    spelled = {e["setting"]: e["value"] for e in load(str(tmp_path / "t")).settings["outcomes"]}
    assert spelled["hdf5.chunk"] == "[4, 16]", spelled


def test_rejected_chunk_leaves_the_program_call_alone(serial: Path, tmp_path: Path) -> None:
    plain, _ = run(serial, tmp_path / "plain.h5", None, None)
    out, err = run(serial, tmp_path / "rej.h5", tmp_path / "t", "[hdf5]\nchunk = [64, 64]\n")
    assert out == plain and err == ""  # no HDF5 error stack printed
    got = outcomes(tmp_path / "t")
    for ds in ("/a", "/b"):
        outcome, detail, count = got[("chunk", ds)]
        assert (outcome, count) == ("rejected", 1)
        assert detail.startswith("H5Dcreate failed with it: chunk size must be <=")
    assert got[("chunk", "/c")][0] == "not_applicable"


@pytest.mark.skipif(H5DUMP is None, reason="h5dump not installed")
@pytest.mark.parametrize("kind", ["serial", "parallel"])
def test_settings_equal_to_defaults_change_nothing(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    exe = request.getfixturevalue(kind)
    np = 2 if kind == "parallel" else 0
    plain_out, plain_err = run(exe, tmp_path / "x.h5", None, None, np=np)
    plain_dump = subprocess.run([H5DUMP, "x.h5"], cwd=tmp_path, capture_output=True,
                                check=True, timeout=TIMEOUT).stdout  # fmt: skip
    (tmp_path / "x.h5").unlink()
    out, err = run(exe, tmp_path / "x.h5", tmp_path / "t", DEFAULTS, np=np)
    dump = subprocess.run([H5DUMP, "x.h5"], cwd=tmp_path, capture_output=True, check=True,
                          timeout=TIMEOUT).stdout  # fmt: skip
    assert (out, err) == (plain_out, plain_err)
    assert dump == plain_dump
    got = outcomes(tmp_path / "t")
    assert got[("alignment", None)][0] == "applied"


@pytest.mark.skipif(H5DUMP is None, reason="h5dump not installed")
def test_page_buffer_at_open_needs_a_paged_file(serial: Path, tmp_path: Path) -> None:
    run(serial, tmp_path / "plain.h5", None, None)  # HDF5's default: not paged
    run(serial, tmp_path / "paged.h5", tmp_path / "t0", ALL)  # created paged
    s = tmp_path / "page.toml"
    s.write_text('[hdf5]\npage_buffer_size = "64k"\n')
    for name, expected in (("paged.h5", "applied"), ("plain.h5", "not_applicable")):
        trace = tmp_path / f"t-{name}"
        trace.mkdir()
        env = clean_env(LD_PRELOAD=str(LIB), IOPILOT_TRACE_DIR=str(trace),
                        IOPILOT_SETTINGS=str(s))  # fmt: skip
        plain = subprocess.run([H5DUMP, "-H", name], cwd=tmp_path, capture_output=True,
                               env=clean_env(), timeout=TIMEOUT)  # fmt: skip
        r = subprocess.run([H5DUMP, "-H", name], cwd=tmp_path, capture_output=True, env=env,
                           timeout=TIMEOUT)  # fmt: skip
        assert (r.returncode, r.stdout, r.stderr) == (0, plain.stdout, plain.stderr)
        (outcome, detail, count), = outcomes(trace).values()  # fmt: skip
        assert (outcome, count) == (expected, 1)
        if expected == "not_applicable":
            assert detail.startswith("the file is not paged")


def example_value(s: st.Setting) -> str:
    """A TOML value of the setting's kind that HDF5 takes for the test program."""
    return {"size": '"64k"', "int": "4", "bool": "true", "ints": "[4, 16]",
            "enum": f'"{s.choices[0]}"' if s.choices else '""'}[s.kind]  # fmt: skip


HDF5_SETTINGS = [s for s in st.SETTINGS if s.table == "hdf5"]


@pytest.mark.parametrize("setting", HDF5_SETTINGS, ids=lambda s: s.name)
def test_every_hdf5_setting_is_applied_or_says_why_not(
    setting: st.Setting, serial: Path, tmp_path: Path
) -> None:
    """Every [hdf5] name of the vocabulary reaches its applier: alone in a
    settings file, it has an outcome (a setting with none was skipped)."""
    text = f"[hdf5]\n{setting.name} = {example_value(setting)}\n"
    run(serial, tmp_path / "x.h5", tmp_path / "t", text)
    got = {(name, obj): o for (name, obj), o in outcomes(tmp_path / "t").items()}
    mine = {k: o for k, o in got.items() if k[0] == setting.name}
    assert mine, f"{setting.name}: no outcome recorded ({got})"
    assert all(o[0] in st.OUTCOMES and o[0] != "ignored" for o in mine.values()), mine


def test_an_hdf5_setting_without_its_applier_does_not_build(tmp_path: Path) -> None:
    """The appliers' table is made from the vocabulary: a new [hdf5] name
    with no h5_apply_<ID> in hdf5_settings.c stops the build."""
    if not shutil.which("cc"):
        pytest.skip("no C compiler")
    src = Path(__file__).resolve().parents[1] / "runtime"
    shutil.copytree(src / "src", tmp_path / "src")
    shutil.copytree(src / "include", tmp_path / "include")

    def compile_settings() -> subprocess.CompletedProcess:
        return subprocess.run(["cc", "-std=gnu11", "-fsyntax-only", "-Wall", "-Werror",
                               "src/hdf5_settings.c"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=TIMEOUT)  # fmt: skip

    assert compile_settings().returncode == 0
    header = tmp_path / "include" / "iopilot_settings.h"
    text = header.read_text()
    row = '    X(HDF5_TRANSFER, IOP_ST_HDF5, "transfer",'
    assert row in text
    header.write_text(text.replace(row, '    X(HDF5_NEW_KNOB, IOP_ST_HDF5, "new_knob", '
                                        'IOP_SK_SIZE, "", 0) \\\n' + row))  # fmt: skip
    r = compile_settings()
    assert r.returncode != 0 and "h5_apply_HDF5_NEW_KNOB" in r.stderr, r.stderr
