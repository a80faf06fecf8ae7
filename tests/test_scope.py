"""Runtime and library files are set aside before the checks: each default
pattern on both sides, --exclude / --include-only / IOPILOT_EXCLUDE, the
summary reports show, and a real traced ``python -c pass``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import iopilot
from iopilot.checks import diagnose
from iopilot.model.scope import ENV, FileScope, matches, split_patterns
from kit import counters, records, trace

DEFAULTS = FileScope.build(env={})

# (set aside, kept): each default pattern with a look-alike the user owns.
PAIRS = [
    ("/home/u/x.pyc", "/home/u/x.py"),
    ("/home/u/__pycache__/m.cpython-311.pyo", "/home/u/m.pyx"),
    ("/opt/venv/lib/python3.11/site-packages/pandas/io/csv.py", "/home/u/packages/data.csv"),
    ("/usr/lib/python3/dist-packages/numpy/core.py", "/home/u/dist/packages.txt"),
    ("/opt/conda/envs/a/lib/python3.12/json/decoder.py", "/home/u/lib/pythonic.txt"),
    ("/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/x.pth", "/home/u/x.pthx"),
    ("/opt/venv/pyvenv.cfg", "/home/u/pyvenv.cfg.bak"),
    ("/opt/prefix/lib/python311.zip", "/home/u/python311.zip.d/a"),
    ("/home/u/build/libfoo.so", "/home/u/build/foo.sol"),
    ("/opt/x/libhdf5.so.103.3.0", "/home/u/results.so.csv"),
    ("/usr/lib/x86_64-linux-gnu/gconv/gconv-modules", "/home/u/usr/lib/data"),
    ("/etc/openmpi/openmpi-mca-params.conf", "/home/u/etc/params.conf"),
    ("/usr/share/zoneinfo/UTC", "/usr/sharedata/run.dat"),
    ("/tmp/ompi.host.0/jf.1234/0/debugger_attach_fifo", "/tmp/run/ompi.out"),
    ("/proc/self/maps", "/home/u/proc/self"),
    ("/sys/devices/system/cpu/online", "/home/u/sys.log"),
    ("/dev/shm/vader_segment.host.0", "/home/u/dev/out.dat"),
    ("/opt/venv/bin/python3.11", "/home/u/bin/python_script.py"),
]


@pytest.mark.parametrize(("noise", "mine"), PAIRS)
def test_default_patterns_both_sides(noise: str, mine: str) -> None:
    assert DEFAULTS.reason(noise) is not None, noise
    assert DEFAULTS.reason(mine) is None, mine


def test_bytecode_reason_wins_over_its_directory() -> None:
    assert DEFAULTS.reason("/p/lib/python3.11/site-packages/a/__pycache__/b.pyc") == (
        "Python bytecode"
    )


def test_no_defaults_keeps_everything() -> None:
    scope = FileScope.build(defaults=False, env={})
    assert scope.everything
    assert all(scope.reason(n) is None for n, _ in PAIRS)


def test_pattern_semantics() -> None:
    assert matches("/scratch/tmp/a/b.dat", "/scratch/tmp")  # a directory covers its files
    assert matches("/scratch/tmp/a/b.dat", "/scratch/tmp/")
    assert not matches("/scratch/tmpx/b.dat", "/scratch/tmp")
    assert matches("/a/b/run.log", "*.log")  # no slash: any component
    assert matches("/home/u/.cache/fontconfig/x", ".cache")
    assert not matches("/home/u/cache/x", ".cache")
    assert not matches("/a/b/run.log.gz", "*.log")
    assert split_patterns("a:b, c,,:d ") == ["a", "b", "c", "d"]


def test_exclude_include_only_and_environment() -> None:
    s = FileScope.build(exclude=["*.log"], env={ENV: "/scratch/tmp:*.bak,/x/y"})
    assert s.reason("/home/u/run.log") == "--exclude *.log"
    assert s.reason("/scratch/tmp/a") == f"{ENV} /scratch/tmp"
    assert s.reason("/home/u/a.bak") == f"{ENV} *.bak"
    assert s.reason("/home/u/a.pyc") == "Python bytecode"  # the environment adds, not replaces
    assert s.reason("/home/u/a.dat") is None
    inc = FileScope.build(include_only=["/data/*.h5"], env={})
    assert inc.reason("/data/a.h5") is None
    assert inc.reason("/data/a.nc") == "outside --include-only"
    # The defaults still apply inside --include-only.
    assert FileScope.build(include_only=["/data"], env={}).reason("/data/x.pyc") == (
        "Python bytecode"
    )
    assert inc.reason("/data/sub/lib.so") == "outside --include-only"
    off = FileScope.build(exclude=["*.log"], defaults=False, env={ENV: "*.bak"})
    assert off.reason("/a.pyc") is None and off.reason("/a.bak") and off.reason("/a.log")


NAMES = {1: "/home/u/out.csv", 2: "/opt/venv/lib/python3.11/site-packages/pd/x.py",
         3: "/opt/venv/lib/python3.11/site-packages/pd/__pycache__/x.cpython-311.pyc",
         4: "/usr/lib/libc.so.6"}  # fmt: skip


def _noisy_trace():
    posix = counters("POSIX", [
        {"file": 1, "POSIX_OPENS": 2, "POSIX_WRITES": 10, "POSIX_BYTES_WRITTEN": 1000,
         "POSIX_F_WRITE_TIME": 0.5},
        {"file": 2, "POSIX_OPENS": 1, "POSIX_READS": 2, "POSIX_BYTES_READ": 300,
         "POSIX_F_READ_TIME": 0.01, "POSIX_F_META_TIME": 0.02},
        {"file": 3, "POSIX_OPENS": 1, "POSIX_READS": 3, "POSIX_BYTES_READ": 5000,
         "POSIX_F_READ_TIME": 0.1},
        {"file": 4, "POSIX_OPENS": 1, "POSIX_READS": 1, "POSIX_BYTES_READ": 832},
    ])  # fmt: skip
    recs = records([(0, "w", 1, 0, 100, 0.0, 0.1), (0, "r", 3, 0, 5000, 0.2, 0.3),
                    (0, "r", 2, 0, 300, 0.4, 0.5), (0, "w", 1, 100, 100, 0.6, 0.7)])  # fmt: skip
    return trace(posix, recs=recs, names=NAMES)


def test_apply_drops_rows_and_records_and_summarises() -> None:
    t = DEFAULTS.apply(_noisy_trace())
    assert list(t.counters["POSIX"].file_id) == [1]
    assert set(t.records.file_id.tolist()) == {1} and len(t.records) == 2
    a = t.set_aside
    assert a["files"] == 3
    assert a["bytes_read"] == 300 + 5000 + 832 and a["bytes_written"] == 0
    assert a["operations"] == (1 + 2) + (1 + 3) + (1 + 1)
    assert a["seconds"] == pytest.approx(0.13)
    reasons = {r["reason"]: r["files"] for r in a["reasons"]}
    assert reasons == {"Python packages and standard library": 1, "Python bytecode": 1,
                       "shared libraries": 1}  # fmt: skip
    assert a["listed"][0]["path"] == NAMES[3]  # the most bytes first
    assert a["scope"]["defaults"] is True


def test_nothing_set_aside_keeps_the_same_arrays() -> None:
    tr = _noisy_trace()
    t = FileScope.build(defaults=False, env={}).apply(tr)
    assert t.counters["POSIX"] is tr.counters["POSIX"] and t.records is tr.records
    assert t.set_aside["files"] == 0


def test_checks_no_longer_see_library_files() -> None:
    tr = _noisy_trace()
    before = diagnose(tr).layers[0]
    after = diagnose(DEFAULTS.apply(tr)).layers[0]
    assert before.files == 4 and after.files == 1
    assert before.bytes_read == 6132 and after.bytes_read == 0


def test_unnamed_files_are_kept() -> None:
    c = counters("POSIX", [{"file": 9, "POSIX_OPENS": 1}])
    tr = trace(c)
    tr.names.clear()
    assert len(DEFAULTS.apply(tr).counters["POSIX"]) == 1


def test_datasets_go_with_their_file() -> None:
    h5d = counters("H5D", [{"file": 11, "parent": 3, "H5D_READS": 1},
                           {"file": 12, "parent": 1, "H5D_READS": 1}])  # fmt: skip
    tr = trace(h5d, names={3: "/opt/venv/lib/python3.11/site-packages/a.h5",
                           1: "/home/u/b.h5", 11: "/a", 12: "/b"})  # fmt: skip
    assert np.array_equal(DEFAULTS.apply(tr).counters["H5D"].file_id, [12])


# ------------------------------------------------------------- real programs


def _run(tmp: Path, *args: str, env: dict[str, str] | None = None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_")}
    # The package under test, wherever the working directory is.
    e["PYTHONPATH"] = str(Path(iopilot.__file__).resolve().parents[1])
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "iopilot", *args], capture_output=True,
                          text=True, timeout=120, cwd=tmp, env=e)  # fmt: skip


# The interpreter on PATH (a pyenv shim here, whose python reads ~1 MiB of
# bytecode at start-up) and the test's own.
@pytest.fixture(scope="module", params=sorted({shutil.which("python3") or sys.executable,
                                               sys.executable}))  # fmt: skip
def pass_trace(request: pytest.FixtureRequest,
               tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:  # fmt: skip
    tmp = tmp_path_factory.mktemp("pass")
    p = _run(tmp, "run", "--trace-dir", str(tmp / "t"), "--", request.param, "-c", "pass")
    assert p.returncode == 0, p.stderr
    return tmp / "t", p.stdout


def test_traced_python_pass_has_no_finding(pass_trace: tuple[Path, str]) -> None:
    path, out = pass_trace
    assert "0 critical issue(s), 0 warning(s), 0 note(s), 0 ok" in out
    assert "runtime and library file(s)" in out
    doc = json.loads(_run(path.parent, "report", str(path), "--json").stdout)["reports"][0]
    assert doc["findings"] == []
    assert doc["set_aside"]["files"] > 20
    assert doc["set_aside"]["bytes_read"] > 10_000  # the interpreter's own modules


def test_no_default_excludes_shows_the_noise(pass_trace: tuple[Path, str]) -> None:
    path, _ = pass_trace
    p = _run(path.parent, "report", str(path), "--json", "--no-default-excludes")
    doc = json.loads(p.stdout)["reports"][0]
    assert doc["findings"] and doc["set_aside"]["files"] == 0
    assert doc["set_aside"]["scope"]["defaults"] is False


def test_options_and_environment_on_a_real_trace(tmp_path: Path) -> None:
    script = ("import os\n"
              "for n in ('keep.dat', 'skip.log'):\n"
              "    with open(n, 'wb') as f: f.write(b'x' * 100)\n")  # fmt: skip
    p = _run(tmp_path, "run", "--trace-only", "--trace-dir", str(tmp_path / "t"), "--",
             sys.executable, "-c", script)  # fmt: skip
    assert p.returncode == 0, p.stderr

    def kept(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, int]]:
        """Bytes written to the files analysed, and files set aside per reason."""
        q = _run(tmp_path, "report", str(tmp_path / "t"), "--json", *args, env=env)
        assert q.returncode == 0, q.stderr
        doc = json.loads(q.stdout)["reports"][0]
        written = sum(x["bytes_written"] for x in doc["layers"] if x["layer"] == "POSIX")
        return written, {r["reason"]: r["files"] for r in doc["set_aside"]["reasons"]}

    written, why = kept()
    assert written == 200 and "Python bytecode" in why
    written, why = kept("--exclude", "*.log")
    assert written == 100 and why["--exclude *.log"] == 1
    written, why = kept(env={ENV: "*.pyc:*.log"})
    assert written == 100 and why[f"{ENV} *.log"] == 1 and why[f"{ENV} *.pyc"] >= 1
    written, why = kept("--include-only", "*.log")
    assert written == 100 and why["outside --include-only"] >= 1
    written, why = kept("--include-only", str(tmp_path))
    assert written == 200
    written, why = kept("--no-default-excludes")
    assert written == 200 and why == {}


def test_runs_of_one_file_give_the_same_verdict_as_isin() -> None:
    from iopilot.model.scope import _isin_runs

    rng = np.random.default_rng(1)
    runs = rng.integers(1, 50, 400).astype(np.uint64)  # long runs: the run path
    file_id = np.repeat(runs, rng.integers(1, 30, len(runs)))
    ids = np.array([3, 7, 11, 49], np.uint64)
    assert np.array_equal(_isin_runs(file_id, ids), np.isin(file_id, ids))
    mixed = rng.integers(1, 50, 1000).astype(np.uint64)  # short runs: plain isin
    assert np.array_equal(_isin_runs(mixed, ids), np.isin(mixed, ids))
    assert _isin_runs(np.zeros(0, np.uint64), ids).shape == (0,)


def test_run_takes_the_same_options(tmp_path: Path) -> None:
    script = "open('a.log', 'w').write('x' * 10)\nopen('b.dat', 'w').write('y' * 10)\n"
    p = _run(tmp_path, "run", "--exclude", "*.log", "--trace-dir", str(tmp_path / "t"), "--",
             sys.executable, "-c", script, env={ENV: "*.dat"})  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "--exclude *.log 1" in p.stdout and f"{ENV} *.dat 1" in p.stdout
    p = _run(tmp_path, "run", "--no-default-excludes", "--trace-dir", str(tmp_path / "u"),
             "--", sys.executable, "-c", script)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "runtime and library file(s)" not in p.stdout
