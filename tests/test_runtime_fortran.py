"""The FORTRAN layer of libiopilot.so (runtime/src/fortran.c), end to end.

runtime/tests/fortran_io.f90 is built with gfortran and run with the library
preloaded: element-by-element unformatted WRITEs of 2 M values, 500 k
formatted lines written and read back, one whole-array WRITE and READ, a
unit without OPEN and a scratch file, and internal I/O only.  The counters
are read from the per-process .json directly, then through iopilot's reader
and checks.  Skipped only when gfortran is missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iopilot.capture.run import library_path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "runtime" / "tests" / "fortran_io.f90"
TIMEOUT = 120
pytestmark = pytest.mark.skipif(shutil.which("gfortran") is None, reason="gfortran not installed")


def _line(pattern: str) -> int:
    """Line number of the first statement of fortran_io.f90 matching ``pattern``."""
    for i, text in enumerate(SOURCE.read_text().splitlines(), 1):
        if re.search(pattern, text):
            return i
    raise AssertionError(pattern)


@pytest.fixture(scope="module")
def fio(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("build") / "fortran_io"
    subprocess.run(["gfortran", "-O2", "-g", "-fopenmp", "-o", str(exe), str(SOURCE)], check=True,
                   timeout=TIMEOUT)  # fmt: skip
    return exe


def _run(exe: Path, where: Path, *args: str, traced: bool = True
         ) -> tuple[subprocess.CompletedProcess, Path]:  # fmt: skip
    where.mkdir(parents=True, exist_ok=True)
    trace = where / "trace"
    env = dict(os.environ)
    if traced:
        trace.mkdir()
        env.update(LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(trace))
    p = subprocess.run([str(exe), *args], cwd=where, env=env, capture_output=True,
                       timeout=TIMEOUT)  # fmt: skip
    return p, trace


def _rows(trace: Path, layer: str = "FORTRAN") -> dict[str, dict[str, float]]:
    """{file name: {counter: value}} of ``layer`` in the one process summary."""
    (path,) = trace.glob("p*.json")
    s = json.loads(path.read_text())
    ci, cf = s["counter_names"], s["fcounter_names"]
    out = {}
    for code, fid, ints, floats in s["counters"]:
        if s["layers"][code] == layer:
            row = {ci[int(k)]: v for k, v in ints.items()}
            row.update({cf[int(k)]: v for k, v in floats.items()})
            src = row.get("SITE_SOURCE")
            if src is not None:
                row["site_source"] = s["names"][str(src & (2**64 - 1))]
            out[s["names"][fid]] = row
    return out


def _counts(row: dict[str, float], **expected: int) -> None:
    """``row`` has these counts (a counter not written is 0)."""
    assert {k: row.get(k, 0) for k in expected} == expected


def _diagnose(trace: Path, **overrides: float):
    from iopilot.checks import diagnose
    from iopilot.checks.thresholds import defaults
    from iopilot.sources import load

    values = defaults()
    values.update(overrides)
    tr = load(str(trace))
    return tr, diagnose(tr, values, only={"fortran-element-io", "fortran-formatted-io"})


def test_element_by_element_unformatted_writes(fio, tmp_path):
    p, trace = _run(fio, tmp_path, "element", "2000000")
    assert p.returncode == 0, p.stderr
    rows = _rows(trace)
    f = rows[str(tmp_path / "element.bin")]
    n = 2_000_000
    _counts(f, WRITES=n, UNFORMATTED_WRITES=n, FORMATTED_WRITES=0, ITEMS_WRITTEN=n,
            BYTES_WRITTEN=8 * n, SIZE_WRITE_0_100=n, OPENS=1, READS=0, ARRAYS_UNSIZED=0)
    # the one statement site of the file: its line, its source, all its statements
    assert f["SITE_LINE"] == _line(r"^\s+write\(u\) a\(i\)")
    assert f["site_source"] == str(SOURCE)
    assert f["SITE_STATEMENTS"] == n and f["SITE_BYTES"] == 8 * n
    assert 0 < f["F_SITE_TIME"] <= f["F_WRITE_TIME"] and f["F_META_TIME"] > 0
    # the library's own buffered writes are POSIX's, as before
    posix = _rows(trace, "POSIX")[str(tmp_path / "element.bin")]
    assert posix["BYTES_WRITTEN"] == 8 * n and posix["WRITES"] < n // 100
    # through the reader: the layer, and the check naming the line
    tr, d = _diagnose(trace, fortran_min_time=0)
    c = tr.counters["FORTRAN"]
    assert c.total("FORTRAN_WRITES") == n + 1  # and the final PRINT
    (finding,) = [x for x in d.findings if x.check == "fortran-element-io"]
    assert f"line {f['SITE_LINE']} of {SOURCE}" in finding.message
    assert finding.snippet_lang == "fortran" and "write(u) a" in finding.snippet
    assert not [x for x in d.findings if x.check == "fortran-formatted-io"]


def test_formatted_lines_written_and_read_back(fio, tmp_path):
    p, trace = _run(fio, tmp_path, "lines", "500000")
    assert p.returncode == 0, p.stderr
    f = _rows(trace)[str(tmp_path / "lines.txt")]
    n = 500_000
    _counts(f, WRITES=n, FORMATTED_WRITES=n, UNFORMATTED_WRITES=0, ITEMS_WRITTEN=2 * n,
            BYTES_WRITTEN=12 * n, READS=n, FORMATTED_READS=n, ITEMS_READ=2 * n,
            BYTES_READ=12 * n, OPENS=2)
    assert f["SITE_LINE"] in (_line(r"write\(20, '\(I8"), _line(r"read\(21, \*"))
    _, d = _diagnose(trace, fortran_min_time=0)
    (finding,) = [x for x in d.findings if x.check == "fortran-formatted-io"]
    assert "access='stream', form='unformatted'" in finding.snippet
    assert finding.evidence["statements"] == n  # of the costlier direction
    assert not [x for x in d.findings if x.check == "fortran-element-io"]


def test_whole_array_write_and_read(fio, tmp_path):
    p, trace = _run(fio, tmp_path, "whole", "2000000")
    assert p.returncode == 0, p.stderr
    f = _rows(trace)[str(tmp_path / "whole.bin")]
    n = 2_000_000
    _counts(f, WRITES=1, READS=1, ITEMS_WRITTEN=n, ITEMS_READ=n, BYTES_WRITTEN=8 * n,
            BYTES_READ=8 * n, SIZE_WRITE_10M_100M=1, UNFORMATTED_READS=1, ARRAYS_UNSIZED=0,
            OPENS=2)
    assert f["SITE_LINE"] in (_line(r"^\s+write\(u\) a$"), _line(r"^\s+read\(u\) b$"))
    _, d = _diagnose(trace, fortran_min_time=0)
    assert d.findings == []  # one statement each way: nothing to fix


def test_unit_without_open_and_scratch_file(fio, tmp_path):
    p, trace = _run(fio, tmp_path, "implicit", "100")
    assert p.returncode == 0, p.stderr
    rows = _rows(trace)
    assert rows[str(tmp_path / "fort.12")]["BYTES_WRITTEN"] == 800
    (scratch,) = [k for k in rows if k.startswith("<Fortran unit ")]
    assert rows[scratch]["WRITES"] == rows[scratch]["READS"] == 1
    assert rows[scratch]["OPENS"] == 1 and rows[scratch]["BYTES_READ"] == 800


def test_threads_writing_their_own_units_are_each_counted_exactly(fio, tmp_path):
    p, trace = _run(fio, tmp_path, "threads", "50000")
    assert p.returncode == 0, p.stderr
    rows = _rows(trace)
    for k in range(4):
        _counts(rows[str(tmp_path / f"thread{k}.bin")], WRITES=50_000, ITEMS_WRITTEN=50_000,
                BYTES_WRITTEN=200_000, OPENS=1, SITE_STATEMENTS=50_000)


def test_internal_io_is_not_file_io(fio, tmp_path):
    p, trace = _run(fio, tmp_path, "none", "1000")
    assert p.returncode == 0, p.stderr
    rows = _rows(trace)
    assert list(rows) == ["<STDOUT>"]  # 1,000 internal WRITEs: not counted
    assert rows["<STDOUT>"]["FORMATTED_WRITES"] == 1


def test_reports_of_a_fortran_trace(fio, tmp_path):
    """Text, JSON and HTML reports hold the layer, whatever counters it lacks
    (no READ statements here)."""
    _, trace = _run(fio, tmp_path, "element", "20000")
    p = subprocess.run([sys.executable, "-m", "iopilot", "report", str(trace), "--set",
                        "fortran_min_time=0", "--json", str(tmp_path / "r.json"), "--html",
                        str(tmp_path / "p.html")], capture_output=True, text=True,
                       timeout=TIMEOUT)  # fmt: skip
    assert p.returncode == 0, p.stderr
    (report,) = json.loads((tmp_path / "r.json").read_text())["reports"]
    checks = [f["check"] for f in report["findings"]]
    assert checks[0] == "fortran-element-io", checks
    assert "Fortran" in (tmp_path / "p.html").read_text()


def test_a_library_of_another_layout_is_counted_without_names(tmp_path):
    """Calls served by a library that is not libgfortran.so.5, with parameter
    blocks whose fields past the common part point to unmapped memory: no
    crash, the unit unnamed, the array unsized (runtime/tests/fortran_unknown.c)."""
    src = ROOT / "runtime" / "tests" / "fortran_unknown.c"
    lib, exe = tmp_path / "libfakefortran.so", tmp_path / "unknown"
    subprocess.run(["cc", "-shared", "-fPIC", "-DFAKE_LIBRARY", "-o", str(lib), str(src)],
                   check=True, timeout=TIMEOUT)  # fmt: skip
    subprocess.run(["cc", "-o", str(exe), str(src), f"-L{tmp_path}", "-lfakefortran",
                    f"-Wl,-rpath,{tmp_path}"], check=True, timeout=TIMEOUT)  # fmt: skip
    p, trace = _run(exe, tmp_path / "run")
    assert p.returncode == 0, p.stderr
    rows = _rows(trace)
    assert list(rows) == ["<Fortran unit 7>"]
    _counts(rows["<Fortran unit 7>"], OPENS=1, WRITES=1, ITEMS_WRITTEN=1, BYTES_WRITTEN=8,
            ARRAYS_UNSIZED=1, SITE_LINE=3)


def test_a_program_without_fortran_has_no_fortran_rows(tmp_path):
    target = tmp_path / "c.txt"
    _, trace = _run(Path("/bin/sh"), tmp_path, "-c", f"echo hello > {target}")
    assert _rows(trace) == {}
    assert str(target) in _rows(trace, "POSIX")


@pytest.mark.parametrize("args", [("element", "300000"), ("lines", "20000"),
                                  ("whole", "100000"), ("implicit", "1000"),
                                  ("threads", "20000"), ("bogus",)])
def test_traced_and_untraced_runs_write_the_same(fio, tmp_path, args):
    plain, _ = _run(fio, tmp_path / "plain", *args, traced=False)
    traced, _ = _run(fio, tmp_path / "traced", *args)
    assert (plain.returncode, plain.stdout, plain.stderr) == (
        traced.returncode, traced.stdout, traced.stderr)
    assert plain.returncode == (2 if args[0] == "bogus" else 0)
    written = sorted(p.name for p in (tmp_path / "plain").iterdir() if p.is_file())
    assert written == sorted(p.name for p in (tmp_path / "traced").iterdir() if p.is_file())
    for name in written:
        assert (tmp_path / "plain" / name).read_bytes() == (
            tmp_path / "traced" / name).read_bytes(), name


def test_the_layer_switch_leaves_fortran_out(fio, tmp_path):
    where = tmp_path / "w"
    where.mkdir()
    trace = where / "trace"
    trace.mkdir()
    env = dict(os.environ, LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(trace),
               IOPILOT_LAYERS="POSIX")  # fmt: skip
    subprocess.run([str(fio), "element", "1000"], cwd=where, env=env, check=True,
                   timeout=TIMEOUT)  # fmt: skip
    assert _rows(trace) == {}
    assert _rows(trace, "POSIX")[str(where / "element.bin")]["BYTES_WRITTEN"] == 8000
