"""Settings applied by the runtime to real programs (IOPILOT_SETTINGS,
``iopilot run --settings``): MPI-IO hints at MPI_File_open, STDIO buffers,
Lustre striping, and what the trace and the report say became of them
(HDF5: test_settings_hdf5.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iopilot import api
from iopilot.sources import load

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "src" / "iopilot" / "_lib" / "libiopilot.so"
SOURCES = ROOT / "runtime" / "tests"
TIMEOUT = 120
HAVE_MPI = bool(shutil.which("mpicc") and shutil.which("mpirun"))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]

pytestmark = pytest.mark.skipif(not LIB.exists(), reason="runtime not built (make -C runtime)")
need_mpi = pytest.mark.skipif(not HAVE_MPI, reason="mpicc/mpirun not installed")


@pytest.fixture(scope="module")
def mpi_prog(tmp_path_factory) -> Path:
    if not HAVE_MPI:
        pytest.skip("mpicc/mpirun not installed")
    exe = tmp_path_factory.mktemp("settings-bin") / "mpiio_settings"
    subprocess.run(["mpicc", "-O1", "-Wall", "-o", str(exe), str(SOURCES / "mpiio_settings.c")],
                   check=True, timeout=TIMEOUT)  # fmt: skip
    return exe


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("IOPILOT_", "OMPI_MCA_io")) and k != "LD_PRELOAD"}  # fmt: skip
    env.update(extra)
    return env


def traced_mpi(exe: Path, out: Path, trace: Path, settings: Path | None, *keys: str,
               **env: str) -> subprocess.CompletedProcess:  # fmt: skip
    trace.mkdir()
    xs = ["-x", f"LD_PRELOAD={LIB}", "-x", f"IOPILOT_TRACE_DIR={trace}"]
    if settings:
        xs += ["-x", f"IOPILOT_SETTINGS={settings}"]
    return subprocess.run([*MPIRUN, *xs, str(exe), str(out), *keys], env=clean_env(**env),
                          capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip


def iopilot(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "iopilot", *args], cwd=cwd, env=clean_env(),
                          capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip


@need_mpi
def test_hints_reach_a_program_that_passes_mpi_info_null(mpi_prog: Path, tmp_path: Path) -> None:
    s = tmp_path / "s.toml"
    s.write_text('[mpiio]\ncb_nodes = 1\nromio_cb_write = "disable"\n'
                 '[mpiio.files."*.h5"]\ncb_nodes = 2\nstriping_factor = 4\n')  # fmt: skip
    r = traced_mpi(mpi_prog, tmp_path, tmp_path / "t", s, "cb_nodes", "romio_cb_write",
                   "striping_factor")  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert "null-info cb_nodes=1" in out
    assert "null-info striping_factor unset" in out  # the pattern matched only *.h5
    assert "own-info cb_nodes=2" in out  # the more specific table wins
    assert "own-info striping_factor=4" in out
    assert "caller info: 1 key(s), access_style=write_once -> unchanged" in out

    st = load(str(tmp_path / "t")).settings
    assert st and st["errors"] == []
    got = {(e["setting"], e["value"], Path(e["file"]).name, e["outcome"]): e["count"]
           for e in st["outcomes"]}  # fmt: skip
    assert got[("mpiio.cb_nodes", "1", "null-info.dat", "applied")] == 2  # both ranks
    assert got[("mpiio.cb_nodes", "2", "own-info.h5", "applied")] == 2
    assert got[("mpiio.striping_factor", "4", "own-info.h5", "applied")] == 2
    # OMPIO (Open MPI's default) echoes the key but does not read ROMIO hints.
    assert got[("mpiio.romio_cb_write", "disable", "null-info.dat", "ignored")] == 2

    doc = api.report(tmp_path / "t", "json")
    doc = json.loads(doc) if isinstance(doc, str) else doc
    rep = doc["reports"][0] if "reports" in doc else doc
    assert any(e["setting"] == "mpiio.romio_cb_write" and e["outcome"] == "ignored"
               for e in rep["settings"]["outcomes"])  # fmt: skip
    text = api.report(tmp_path / "t", "terminal", color=False)
    assert "Settings applied" in text
    assert "mpiio.romio_cb_write = disable: ignored" in text
    assert "did not take mpiio.romio_cb_write" in text


@need_mpi
@pytest.mark.parametrize(("glob", "cb_nodes"), [
    ("[o-z]wn-info.h5", "2"), ("[a-o]wn-info.h5", "2"),  # both ends of a range are in it
    ("[p-z]wn-info.h5", "1"), ("[a-n]wn-info.h5", "1"),  # a letter just outside is not
])  # fmt: skip
def test_a_file_pattern_with_a_character_range(mpi_prog: Path, tmp_path: Path, glob: str,
                                                cb_nodes: str) -> None:  # fmt: skip
    s = tmp_path / "s.toml"
    s.write_text(f'[mpiio]\ncb_nodes = 1\n[mpiio.files."{glob}"]\ncb_nodes = 2\n')
    r = traced_mpi(mpi_prog, tmp_path, tmp_path / "t", s, "cb_nodes")
    assert r.returncode == 0, r.stderr
    assert f"own-info cb_nodes={cb_nodes}" in r.stdout.splitlines()
    assert "null-info cb_nodes=1" in r.stdout.splitlines()


@need_mpi
def test_sizes_with_a_unit_reach_the_hints_in_bytes(mpi_prog: Path, tmp_path: Path) -> None:
    s = tmp_path / "s.toml"
    s.write_text('[mpiio]\ncb_buffer_size = "1g"\nstriping_unit = "2 MiB"\n')
    r = traced_mpi(mpi_prog, tmp_path, tmp_path / "t", s, "cb_buffer_size", "striping_unit")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert f"null-info cb_buffer_size={1 << 30}" in out, r.stdout
    assert f"null-info striping_unit={2 << 20}" in out


@need_mpi
def test_unicode_escapes_in_a_string_setting(mpi_prog: Path, tmp_path: Path) -> None:
    s = tmp_path / "s.toml"
    # every end of the hexadecimal digits: 0 9 a f A F, in \\u and \\U escapes;
    # characters of 2, 3 and 4 bytes in UTF-8
    s.write_text('[mpiio]\naccess_style = "x\\u0039\\u004A\\u006a\\u004f\\u004F\\U0000004B'
                 '\\u00e9\\u20ac\\U0001F600"\n')  # fmt: skip
    r = traced_mpi(mpi_prog, tmp_path, tmp_path / "t", s, "access_style")
    assert r.returncode == 0, r.stderr
    assert "null-info access_style=x9JjOOK\u00e9\u20ac\U0001f600" in r.stdout.splitlines(), r.stdout


@need_mpi
def test_romio_hint_applied_under_romio_via_iopilot_run(mpi_prog: Path, tmp_path: Path) -> None:
    s = tmp_path / "s.toml"
    s.write_text('[ompi]\nio = "romio321"\n[mpiio]\nromio_cb_write = "disable"\ncb_nodes = 1\n')
    r = iopilot("run", "--trace-dir", "t", "--settings", "s.toml", "--", *MPIRUN, str(mpi_prog),
                str(tmp_path), "romio_cb_write", "cb_nodes", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "null-info romio_cb_write=disable" in r.stdout
    assert "null-info cb_nodes=1" in r.stdout
    st = load(str(tmp_path / "t")).settings
    outcomes = {(e["setting"], e["outcome"]) for e in st["outcomes"]}
    assert ("mpiio.romio_cb_write", "applied") in outcomes
    assert ("ompi.io", "applied") in outcomes  # OMPI_MCA_io reached the ranks
    assert "Settings applied" in r.stdout


# Several [mpiio.files] patterns matching one file: key by key, the most
# specific pattern (the most characters that are not wildcards) wins; of
# equally specific ones, the one whose table comes later in the file.  Each
# case: the tables in file order, then the hints own-info.h5 must get.
PATTERN_CASES = {
    "two, specific last": ([("*.h5", 2), ("own-*.h5", 3)], {"cb_nodes": "3"}),
    "two, specific first": ([("own-*.h5", 3), ("*.h5", 2)], {"cb_nodes": "3"}),
    "three": ([("own-*.h5", 3, 3), ("*/own-info.h5", 4), ("*.h5", 2, 2, 65536)],
              {"cb_nodes": "4", "striping_factor": "3", "striping_unit": "65536"}),
    "equal, own-* last": ([("*info.h5", 6), ("own-*.h5", 5)], {"cb_nodes": "5"}),
    "equal, *info last": ([("own-*.h5", 5), ("*info.h5", 6)], {"cb_nodes": "6"}),
}  # fmt: skip
PATTERN_KEYS = ("cb_nodes", "striping_factor", "striping_unit")


@need_mpi
@pytest.mark.parametrize("case", sorted(PATTERN_CASES))
def test_the_most_specific_of_overlapping_patterns_wins(mpi_prog: Path, tmp_path: Path,
                                                         case: str) -> None:  # fmt: skip
    tables, want = PATTERN_CASES[case]
    text = "[mpiio]\nromio_ds_write = \"disable\"\n"
    for glob, *values in tables:
        text += f'[mpiio.files."{glob}"]\n'
        text += "".join(f"{k} = {v}\n" for k, v in zip(PATTERN_KEYS, values, strict=False))
    s = tmp_path / "s.toml"
    s.write_text(text)
    r = traced_mpi(mpi_prog, tmp_path, tmp_path / "t", s, *PATTERN_KEYS)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    for key in PATTERN_KEYS:  # the hints the file was opened with
        assert (f"own-info {key}={want[key]}" if key in want else f"own-info {key} unset") in out
        assert f"null-info {key} unset" in out  # no pattern matches null-info.dat
    st = load(str(tmp_path / "t")).settings
    assert st and st["errors"] == []
    applied = {(e["setting"], e["value"]) for e in st["outcomes"]
               if Path(e["file"]).name == "own-info.h5"}  # fmt: skip
    assert applied == {(f"mpiio.{k}", v) for k, v in want.items()} | {
        ("mpiio.romio_ds_write", "disable")}  # fmt: skip


def test_bad_settings_stop_iopilot_run_before_the_program(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    for text, key in (('[mpiio]\ncb_nodez = 1\n', "[mpiio] cb_nodez"),
                      ('[hdf5]\nalignment = "big"\n', "[hdf5] alignment"),
                      ('[stdio]\nbuffer_size = true\n', "[stdio] buffer_size")):  # fmt: skip
        (tmp_path / "s.toml").write_text(text)
        r = iopilot("run", "--trace-dir", "t", "--settings", "s.toml", "--", "touch", str(marker),
                    cwd=tmp_path)  # fmt: skip
        assert r.returncode == 2
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and key in lines[0], r.stderr
        assert not marker.exists() and not (tmp_path / "t").exists()


PY_PROG = "import sys; print('out', open(sys.argv[1]).read()); sys.exit(3)"


@pytest.mark.parametrize("text", [
    "[mpiio\ncb_nodes = 1\n",                # broken TOML
    "[mpiio]\ncb_nodes = \"many\"\n",        # wrong type
    "[hdf5]\nfill_time = \"sometimes\"\n",   # bad value
    "\x00\x01binary",
    '[mpiio.files.""]\ncb_nodes = 2\n',          # a pattern of no character
    '[posix]\ndirect = true\n[mpiio.files.""]\n',  # the same, with nothing under it
    "[hdf5]\nchunk = [4, 0]\n",                   # a chunk dimension of 0
    # good lines, then one with more after its value: none of it applies
    '[posix]\ndirect = true\ndirect_min_size = "4k" and more\n',
    "[posix]\ndirect = true\ndirect_min_size = -4096\n",  # a size below 0
    "[hdf5]\nchunk = []\n",                        # a chunk of no dimension
])  # fmt: skip
def test_broken_settings_file_changes_nothing_in_the_program(tmp_path: Path, text: str) -> None:
    data = tmp_path / "in.txt"
    data.write_text("hello")
    s = tmp_path / "s.toml"
    s.write_text(text)
    cmd = [sys.executable, "-c", PY_PROG, str(data)]
    plain = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=60)
    (tmp_path / "t").mkdir()
    traced = subprocess.run(cmd, env=clean_env(LD_PRELOAD=str(LIB), IOPILOT_SETTINGS=str(s),
                                               IOPILOT_TRACE_DIR=str(tmp_path / "t")),
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (traced.stdout, traced.stderr, traced.returncode) == (
        plain.stdout, plain.stderr, plain.returncode) == ("out hello\n", "", 3)  # fmt: skip
    st = load(str(tmp_path / "t")).settings
    assert st and st["errors"] and st["outcomes"] == []
    assert "not used" in api.report(tmp_path / "t", "terminal", color=False)


def chunk_of_text_length(n: int) -> str:
    """A ``chunk`` array whose canonical text ("[a, b, ...]") is ``n`` characters."""
    dims = ["9" * 18] * 11  # 11 elements of 18 digits and 2 of the rest: 12 ", " between
    rest = n - len("[]") - 11 * 18 - 12 * len(", ")
    dims += ["1" * (rest // 2), "2" * (rest - rest // 2)]
    text = "[" + ", ".join(dims) + "]"
    assert len(text) == n
    return text


# The value's text (an MPI_Info value and the trace's) holds 255 characters;
# an array is refused from 255 on, its closing "]" and end included.
@pytest.mark.parametrize("length, refused", [(254, False), (255, True)])
def test_the_longest_array_a_setting_can_hold(tmp_path: Path, length: int, refused: bool) -> None:
    s = tmp_path / "s.toml"
    s.write_text(f"[hdf5]\nchunk = {chunk_of_text_length(length)}\n")
    (tmp_path / "t").mkdir()
    r = subprocess.run(["true"], env=clean_env(LD_PRELOAD=str(LIB), IOPILOT_SETTINGS=str(s),
                                               IOPILOT_TRACE_DIR=str(tmp_path / "t")),
                       timeout=60)  # fmt: skip
    assert r.returncode == 0
    errors = load(str(tmp_path / "t")).settings["errors"]
    assert errors == (["line 2: [hdf5] chunk: too long"] if refused else []), errors


@need_mpi
def test_a_bare_files_table_is_no_error(mpi_prog: Path, tmp_path: Path) -> None:
    s = tmp_path / "s.toml"
    s.write_text('[mpiio.files]\n[mpiio.files."*.h5"]\ncb_nodes = 2\n')
    r = traced_mpi(mpi_prog, tmp_path, tmp_path / "t", s, "cb_nodes")
    assert r.returncode == 0, r.stderr
    assert "own-info cb_nodes=2" in r.stdout.splitlines(), r.stdout
    st = load(str(tmp_path / "t")).settings
    assert st and st["errors"] == []


def test_missing_settings_file_is_recorded(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    r = subprocess.run(["true"], env=clean_env(LD_PRELOAD=str(LIB), IOPILOT_SETTINGS="/nonexistent",
                                               IOPILOT_TRACE_DIR=str(tmp_path / "t")),
                       timeout=60)  # fmt: skip
    assert r.returncode == 0
    st = load(str(tmp_path / "t")).settings
    assert st["errors"] == ["cannot be read"]


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_settings_path_that_is_no_file_never_holds_the_program(tmp_path: Path, kind: str) -> None:
    (tmp_path / "t").mkdir()
    odd = tmp_path / "settings.toml"
    os.mkfifo(odd) if kind == "fifo" else odd.mkdir()
    r = subprocess.run(["true"], env=clean_env(LD_PRELOAD=str(LIB), IOPILOT_SETTINGS=str(odd),
                                               IOPILOT_TRACE_DIR=str(tmp_path / "t")),
                       timeout=60)  # fmt: skip
    assert r.returncode == 0
    st = load(str(tmp_path / "t")).settings
    assert st["errors"] == ["is not a regular file"]


def build_c(tmp_path_factory, name: str) -> Path:
    """runtime/tests/NAME.c built as a plain program (no MPI)."""
    exe = tmp_path_factory.mktemp("settings-bin") / name
    subprocess.run(["cc", "-O1", "-Wall", "-Werror", "-o", str(exe),
                    str(SOURCES / f"{name}.c")], check=True, timeout=TIMEOUT)  # fmt: skip
    return exe


@pytest.fixture(scope="module")
def stdio_prog(tmp_path_factory) -> Path:
    return build_c(tmp_path_factory, "stdio_buffer")


def run_stdio(exe: Path, out: Path, settings: str | None) -> tuple[str, int]:
    """Run the STDIO program traced: its stdout and its write system calls."""
    trace = out.with_suffix(".trace")
    trace.mkdir()
    env = clean_env(LD_PRELOAD=str(LIB), IOPILOT_TRACE_DIR=str(trace))
    if settings is not None:
        s = out.with_suffix(".toml")
        s.write_text(settings)
        env["IOPILOT_SETTINGS"] = str(s)
    r = subprocess.run([str(exe), str(out)], env=env, capture_output=True, text=True,
                       timeout=TIMEOUT)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r.stdout, int(r.stderr.split("write calls ")[1].split()[0])


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="no /proc/self/io")
def test_stdio_buffer_size_means_fewer_writes_same_bytes(stdio_prog: Path, tmp_path: Path) -> None:
    plain_out, plain_writes = run_stdio(stdio_prog, tmp_path / "plain.txt", None)
    out, writes = run_stdio(stdio_prog, tmp_path / "big.txt", '[stdio]\nbuffer_size = "1m"\n')
    assert out == plain_out == "bytes 1000000 first 000000000\n"
    assert (tmp_path / "big.txt").read_bytes() == (tmp_path / "plain.txt").read_bytes()
    # glibc's 4 KiB buffer: ~245 writes of 1 MB; with 1 MiB, one (plus the runtime's own).
    assert plain_writes > 200 and writes < plain_writes / 4, (plain_writes, writes)
    st = load(str(tmp_path / "big.trace")).settings
    got = {(e["outcome"], e["detail"]): e["count"] for e in st["outcomes"]
           if Path(e["file"] or "").name == "big.txt"}  # fmt: skip
    # fopen, fdopen, freopen, and 64 of the 80 streams open at once.
    assert got == {("applied", None): 3 + 64, ("not_applicable", "buffer pool full"): 16}


def test_stdio_unbuffered(stdio_prog: Path, tmp_path: Path) -> None:
    plain_out, _ = run_stdio(stdio_prog, tmp_path / "plain.txt", None)
    out, writes = run_stdio(stdio_prog, tmp_path / "none.txt", "[stdio]\nbuffer_size = 0\n")
    assert out == plain_out
    assert (tmp_path / "none.txt").read_bytes() == (tmp_path / "plain.txt").read_bytes()
    assert writes >= 100000  # one write per fwrite


@need_mpi
def test_lustre_striping_not_applicable_off_lustre(mpi_prog: Path, tmp_path: Path) -> None:
    if _on_lustre(tmp_path):
        pytest.skip("this directory is on Lustre")
    s = tmp_path / "s.toml"
    s.write_text('[lustre]\nstripe_count = 4\nstripe_size = "1m"\n')
    r = traced_mpi(mpi_prog, tmp_path, tmp_path / "t", s, "striping_factor", "striping_unit")
    assert r.returncode == 0, r.stderr
    assert "null-info striping_factor unset" in r.stdout.splitlines()  # no hint was added
    st = load(str(tmp_path / "t")).settings
    got = {(e["setting"], Path(e["file"]).name, e["outcome"], e["detail"]): e["count"]
           for e in st["outcomes"]}  # fmt: skip
    for name in ("lustre.stripe_count", "lustre.stripe_size"):
        for f in ("null-info.dat", "own-info.h5"):
            assert got[(name, f, "not_applicable", "not a Lustre file system")] == 2


def _on_lustre(path: Path) -> bool:
    r = subprocess.run(["stat", "-f", "-c", "%t", str(path)], capture_output=True, text=True,
                       timeout=TIMEOUT)  # fmt: skip
    return r.stdout.strip().lower() == "bd00bd0"


# -- [posix] direct -------------------------------------------------------------

@pytest.fixture(scope="module")
def direct_prog(tmp_path_factory) -> Path:
    return build_c(tmp_path_factory, "posix_direct")


def run_direct(exe: Path, where: Path, settings: str | None) -> tuple[str, dict[str, int]]:
    """Run the direct-I/O program (traced when ``settings`` is given): its
    stdout, and the figures it prints on stderr."""
    where.mkdir()
    env = clean_env()
    if settings is not None:
        (where.parent / f"{where.name}.toml").write_text(settings)
        (where.parent / f"{where.name}.trace").mkdir()
        env.update(LD_PRELOAD=str(LIB), IOPILOT_TRACE_DIR=str(where.parent / f"{where.name}.trace"),
                   IOPILOT_SETTINGS=str(where.parent / f"{where.name}.toml"))  # fmt: skip
    r = subprocess.run([str(exe), str(where)], env=env, capture_output=True, text=True,
                       timeout=TIMEOUT)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    words = r.stderr.split()
    figures = {"resident": int(words[words.index("resident") + 1]),
               "pages": int(words[words.index("of") + 1]),
               "odirect": int(words[words.index("odirect") + 1]),
               "cloexec": int(words[words.index("cloexec") + 1])}  # fmt: skip
    return r.stdout, figures


def direct_outcomes(trace: Path) -> dict[tuple[str, str, str], int]:
    st = load(str(trace)).settings
    return {(Path(e["file"]).name, e["outcome"], e["detail"]): e["count"]
            for e in st["outcomes"] if e["setting"] == "posix.direct"}  # fmt: skip


def test_posix_direct_bypasses_the_page_cache_and_changes_nothing_the_program_sees(
        direct_prog: Path, tmp_path: Path) -> None:  # fmt: skip
    plain_out, plain = run_direct(direct_prog, tmp_path / "plain", None)
    out, direct = run_direct(direct_prog, tmp_path / "direct", "[posix]\ndirect = true\n")
    # Same results, same bytes, and the program's descriptor never shows O_DIRECT.
    assert out == plain_out and "WRONG" not in out
    assert "flags have O_DIRECT: 0" in out
    assert ((tmp_path / "direct" / "data.bin").read_bytes()
            == (tmp_path / "plain" / "data.bin").read_bytes())  # fmt: skip
    # The 7 MiB written with large aligned requests left the page cache alone.
    assert plain["pages"] == direct["pages"] == 1792
    assert plain["resident"] > 0.9 * 1792 and direct["resident"] < 0.1 * 1792, (plain, direct)
    # One twin open beside the program's descriptor, gone at exec.
    assert plain["odirect"] == 0 and direct["odirect"] == direct["cloexec"] == 1
    got = direct_outcomes(tmp_path / "direct.trace")
    assert got == {
        # the program's open, and the one it uses to look at the page cache
        ("data.bin", "applied", "opened with O_DIRECT beside the program's descriptor"): 2,
        # aligned 1 MiB, misaligned buffer 1 MiB, misaligned buffer 5 MiB (in pieces)
        ("data.bin", "applied", "write with O_DIRECT"): 3,
        # read 2 MiB, pread 5 MiB into a misaligned buffer, pread past the end
        ("data.bin", "applied", "read with O_DIRECT"): 3,
        ("data.bin", "ignored", "offset or length not a multiple of 4096: page cache"): 1,
        ("data.bin", "rejected", "the O_DIRECT descriptor was closed under us: page cache"): 1,
        ("log.txt", "not_applicable", "opened with O_APPEND: each write goes to the end"): 1,
    }


@pytest.mark.parametrize(("min_size", "writes"), [("1m", 3), ("1048577", 1), ("5m", 1),
                                                  ("5242881", 0)])  # fmt: skip
def test_posix_direct_min_size_both_sides(direct_prog: Path, tmp_path: Path, min_size: str,
                                          writes: int) -> None:  # fmt: skip
    """Writes of 1, 1 and 5 MiB: the smallest size sent with O_DIRECT decides."""
    out, _ = run_direct(direct_prog, tmp_path / "d",
                        f'[posix]\ndirect = true\ndirect_min_size = "{min_size}"\n')
    assert "WRONG" not in out
    got = direct_outcomes(tmp_path / "d.trace")
    assert got.get(("data.bin", "applied", "write with O_DIRECT"), 0) == writes


def test_posix_direct_off_opens_no_twin(direct_prog: Path, tmp_path: Path) -> None:
    out, figures = run_direct(direct_prog, tmp_path / "d", "[posix]\ndirect = false\n")
    assert "WRONG" not in out and figures["odirect"] == 0
    assert figures["resident"] > 0.9 * figures["pages"]
    assert direct_outcomes(tmp_path / "d.trace") == {}


def test_open_mpi_components_outside_an_open_mpi_job_say_so(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    s = tmp_path / "s.toml"
    s.write_text('[ompi]\nio = "romio321"\n')
    r = subprocess.run(["true"], env=clean_env(LD_PRELOAD=str(LIB), IOPILOT_SETTINGS=str(s),
                                               IOPILOT_TRACE_DIR=str(tmp_path / "t")),
                       timeout=60)  # fmt: skip
    assert r.returncode == 0
    st = load(str(tmp_path / "t")).settings
    got = [(e["setting"], e["value"], e["outcome"], e["detail"]) for e in st["outcomes"]]
    assert got == [("ompi.io", "romio321", "not_applicable", "not an Open MPI job")]


def test_a_program_started_without_standard_input_reads_its_settings(tmp_path: Path) -> None:
    """The settings file may be opened as descriptor 0."""
    (tmp_path / "t").mkdir()
    s = tmp_path / "s.toml"
    s.write_text('[ompi]\nio = "romio321"\n')
    env = clean_env(LD_PRELOAD=str(LIB), IOPILOT_SETTINGS=str(s),
                    IOPILOT_TRACE_DIR=str(tmp_path / "t"))  # fmt: skip
    r = subprocess.run(["sh", "-c", "exec 0<&- true"], env=env, timeout=60)
    assert r.returncode == 0
    st = load(str(tmp_path / "t")).settings
    assert st["errors"] == [] and {e["setting"] for e in st["outcomes"]} == {"ompi.io"}
