"""Findings name the lines that cause them, on real programs.

Each program of ``tests/programs/callsites/`` makes two I/O mistakes, each on
a line marked ``MISTAKE: <check> in <function>``.  The program runs the way a
user runs it (``iopilot run``, then ``iopilot report --json``), and for each
mistake the finding of that check names the marked file and line first among
its call sites.  C, C++ and Fortran programs are built three ways: with
``-g`` (file and line), without it (the function only, from the symbol
table: no line), and with ``-g -fomit-frame-pointer`` (file and line again,
found without frame pointers).  Python programs name the user's ``.py`` file
and line, also when the I/O is made inside h5py, NumPy or mpi4py.  The line
numbers come from the markers, never from the test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from iopilot.bench.kernels import mpirun_command

PROGRAMS = Path(__file__).parent / "programs" / "callsites"
TIMEOUT = 300
MARKER = re.compile(r"MISTAKE: ([a-z0-9-]+) in (\w+)")

# name: (source, compiler) for native programs, (source, ranks) for Python ones
NATIVE = {"c": ("two_mistakes.c", "gcc"), "c++": ("two_mistakes.cpp", "g++"),
          "fortran": ("two_mistakes.f90", "gfortran")}  # fmt: skip
PYTHON = {"python": ("plain.py", None), "h5py": ("h5py_prog.py", None),
          "numpy": ("numpy_prog.py", None), "mpi4py": ("mpi4py_prog.py", 2)}  # fmt: skip
# how a native program is built: with debug information, without, and
# without frame pointers (the unwinder's case)
FLAVOURS = {"-g": ["-O2", "-g"], "no -g": ["-O2"],
            "-g -fomit-frame-pointer": ["-O2", "-g", "-fomit-frame-pointer"]}  # fmt: skip


def mistakes(source: Path) -> list[tuple[str, int, str]]:
    """(check, line, function) of each marked line of ``source``."""
    out = []
    for n, text in enumerate(source.read_text().splitlines(), start=1):
        if m := MARKER.search(text):
            out.append((m.group(1), n, m.group(2)))
    return out


def test_every_program_marks_two_mistakes_of_distinct_checks():
    for source, _ in [*NATIVE.values(), *PYTHON.values()]:
        found = mistakes(PROGRAMS / source)
        assert len(found) == 2, f"{source}: {found}"
        assert len({check for check, _, _ in found}) == 2, f"{source}: {found}"


def test_the_marker_gives_check_line_and_function(tmp_path):
    src = tmp_path / "p.c"
    src.write_text("int x;\n\n    write(fd, p, 8); /* MISTAKE: posix-small-writes in put */\n")
    assert mistakes(src) == [("posix-small-writes", 3, "put")]
    src.write_text("/* MISTAKE: */\n")
    assert mistakes(src) == []


def names_function(function: str, name: str) -> bool:
    """``function`` (as the symbol table or a demangler gives it) is ``name``:
    ``put_value``, ``save_values(std::ofstream&)``, ``_ZL11save_valuesRSo``,
    ``__fields_MOD_write_elements``, not ``put_values`` nor ``__libc_start_main``."""
    if name in re.split(r"[^A-Za-z0-9_]+", function) or f"_MOD_{name}" == function[-len(name) - 5:]:
        return True
    return re.search(rf"(^|[^0-9]){len(name)}{re.escape(name)}", function) is not None


@pytest.mark.parametrize(("function", "name", "right"), [
    ("put_value", "put_value", True),
    ("save_values(std::basic_ofstream<char>&)", "save_values", True),
    ("_ZL11save_valuesRSt14basic_ofstreamIcSt11char_traitsIcEE", "save_values", True),
    ("__fields_MOD_write_elements", "write_elements", True), ("MAIN__", "MAIN__", True),
    ("main", "main", True), ("put_values", "put_value", False),
    ("__libc_start_main", "main", False), ("_ZL12save_valuesxRSo", "save_values", False),
    ("", "main", False),
])  # fmt: skip
def test_names_function(function, name, right):
    assert names_function(function, name) is right


def _iopilot(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "iopilot", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=TIMEOUT)  # fmt: skip


def traced_report(argv: list[str], work: Path) -> dict[str, Any]:
    """Run ``argv`` in ``work`` under ``iopilot run`` and read the JSON of
    ``iopilot report`` on its trace, as a user would."""
    run, trace, out = work / "run", work / "trace", work / "report.json"
    run.mkdir(parents=True)
    p = _iopilot(["run", "--trace-only", "--trace-dir", str(trace), "--", *argv], run)
    assert p.returncode == 0, f"{' '.join(argv)}: traced run failed:\n{p.stderr[-2000:]}"
    p = _iopilot(["report", "--json", str(out), str(trace)], work)
    assert p.returncode == 0, f"iopilot report failed:\n{p.stderr[-2000:]}"
    return json.loads(out.read_text())["reports"][0]


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> Callable[[str, str | None], dict[str, Any]]:
    """The report of a program (built in a flavour, for native ones), made once."""
    cache: dict[tuple[str, str | None], dict[str, Any]] = {}

    def get(program: str, flavour: str | None) -> dict[str, Any]:
        if (program, flavour) in cache:
            return cache[program, flavour]
        work = tmp_path_factory.mktemp("callsites")
        if program in NATIVE:
            source, compiler = NATIVE[program]
            assert shutil.which(compiler), f"{compiler} not installed (`make test` installs it)"
            exe = work / "prog"
            p = subprocess.run([compiler, *FLAVOURS[flavour or "-g"], "-o", str(exe),
                                str(PROGRAMS / source)], cwd=work, capture_output=True,
                               text=True, timeout=TIMEOUT)  # fmt: skip
            assert p.returncode == 0, f"{compiler} {source}: {p.stderr[-2000:]}"
            argv = [str(exe)]
        else:
            source, ranks = PYTHON[program]
            argv = [sys.executable, str(PROGRAMS / source)]
            if ranks:
                argv = [*mpirun_command(ranks), *argv]
        cache[program, flavour] = traced_report(argv, work)
        return cache[program, flavour]

    return get


def first_site(report: dict[str, Any], check: str) -> dict[str, Any]:
    """The first call site (``source`` location) of the finding of ``check``."""
    findings = [f for f in report["findings"] if f["check"] == check]
    raised = [f"{f['level']} {f['check']}" for f in report["findings"]]
    assert findings, f"no {check} finding; the report has: {', '.join(raised)}"
    sites = [loc for loc in findings[0]["locations"] if loc.get("kind") == "source"]
    assert sites, f"the {check} finding names no call site: {findings[0]['locations']}"
    return sites[0]


def assert_names_line(site: dict[str, Any], source: Path, line: int, check: str) -> None:
    where = f"{check}: first call site {site}, the mistake is {source.name}:{line}"
    file = site.get("file") or ""
    assert Path(file).name == source.name and site.get("line") == line, where
    if os.path.isabs(file):
        assert Path(file).resolve() == source.resolve(), where


CASES = [pytest.param(program, flavour, check, line, function,
                      id=f"{program}-{flavour}-{check}")
         for program, (source, _) in NATIVE.items() for flavour in FLAVOURS
         for check, line, function in mistakes(PROGRAMS / source)]  # fmt: skip


@pytest.mark.parametrize(("program", "flavour", "check", "line", "function"), CASES)
def test_native_finding_names_the_mistakes_line(traced, program, flavour, check, line, function):
    source = PROGRAMS / NATIVE[program][0]
    site = first_site(traced(program, flavour), check)
    if flavour == "no -g":  # the symbol table names the function; no line is known
        assert names_function(site.get("function") or "", function), \
            f"{check}: first call site {site}, the mistake is in {function}"
        assert not site.get("line"), f"{check}: a line without debug information: {site}"
    else:
        assert_names_line(site, source, line, check)


PY_CASES = [pytest.param(program, check, line, id=f"{program}-{check}")
            for program, (source, _) in PYTHON.items()
            for check, line, _ in mistakes(PROGRAMS / source)]  # fmt: skip


@pytest.mark.parametrize(("program", "check", "line"), PY_CASES)
def test_python_finding_names_the_mistakes_line(traced, program, check, line):
    source = PROGRAMS / PYTHON[program][0]
    assert_names_line(first_site(traced(program, None), check), source, line, check)
