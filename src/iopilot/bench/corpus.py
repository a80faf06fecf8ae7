"""The labelled corpus of I/O mistakes (``corpus/<case>/case.toml``): read
the cases, build them once, run them traced and untraced, diagnose them.

``iopilot bench accuracy`` scores what this module measures, and
``tests/test_corpus_programs.py`` asserts its deterministic part.  The case
format is described in ``corpus/README.md``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import api
from .._record import field, record
from ..errors import InputError
from ..kernel_results import REPO
from .kernels import mpirun_command

CORPUS_DIR = REPO / "corpus"
BUILD_DIR = REPO / "build" / "corpus"
LANGUAGES = ("c", "c++", "fortran", "python")
# What a case may use: the Python modules it imports are asked of this interpreter.
USES = {"hdf5": None, "hdf5-static": None, "mpi": None, "mpiio": None, "h5py": "h5py",
        "numpy": "numpy", "pandas": "pandas", "mpi4py": "mpi4py", "netcdf4": "netCDF4"}
SOURCES = ("main.c", "main.cpp", "main.f90", "main.py")
MODES = ("mistake", "fixed")
_REQUIRED = ("title", "language", "run", "expect")
_TEXT_KEYS = ("title", "language", "source", "build", "build_fixed", "run", "expect", "advice",
              "mistake", "fix")
_PLACEHOLDERS = {"build": {"exe", "src"}, "build_fixed": {"exe", "src"},
                 "run": {"exe", "python", "src", "mode"}}  # fmt: skip
_PLACEHOLDER = re.compile(r"\{(\w*)\}")
RUN_TIMEOUT = 300.0  # seconds; a mode runs in a few seconds, a hang fails the case


class CaseError(InputError):
    """A case that cannot be read, built or run: ``str()`` is one line."""


@record
class Case:
    """One program of the corpus and its label."""

    name: str
    dir: Path
    source: Path
    title: str
    language: str
    run: str
    expect: str
    build: str | None = None
    # The fixed mode built another way (a link line is the fix): None, as ``build``.
    build_fixed: str | None = None
    uses: list[str] = field(default_factory=list)
    ranks: int | None = None
    advice: str | None = None
    line: int | None = None  # the line of ``source`` where the mistake's I/O call is
    mistake: str = ""
    fix: str = ""

    def needs(self) -> list[str]:
        """What this machine lacks to build and run the case (empty: nothing)."""
        tools: list[str] = []
        for line in (self.build, self.build_fixed):
            if line:
                tools.append(shlex.split(line)[0])
        head = shlex.split(self.run)[0]
        if not _PLACEHOLDER.fullmatch(head):
            tools.append(head)
        if self.ranks or {"mpi", "mpiio", "mpi4py"} & set(self.uses):
            tools.append("mpirun")
        out = [t for t in dict.fromkeys(tools) if shutil.which(t) is None]
        for use in self.uses:
            module = USES[use]
            if module and importlib.util.find_spec(module) is None:
                out.append(f"the Python module {module}")
        return out


def load_case(path: Path) -> Case:
    """The case whose label is ``path`` (a ``case.toml``); :class:`CaseError`
    naming the file and the reason when it is not a valid case."""
    where = str(path)
    try:
        doc = tomllib.loads(path.read_text())
    except OSError as e:
        raise CaseError(where, f"cannot read: {e.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise CaseError(where, f"not TOML: {e}") from None
    if missing := [k for k in _REQUIRED if k not in doc]:
        raise CaseError(where, f"missing key(s): {', '.join(missing)}")
    if unknown := sorted(set(doc) - {*_TEXT_KEYS, "uses", "ranks", "line"}):
        raise CaseError(where, f"unknown key(s): {', '.join(unknown)}")
    if bad := [k for k in _TEXT_KEYS if k in doc and not isinstance(doc[k], str)]:
        raise CaseError(where, f"not a string: {', '.join(bad)}")
    if doc["language"] not in LANGUAGES:
        raise CaseError(where, f"unknown language {doc['language']!r} "
                               f"(known: {', '.join(LANGUAGES)})")  # fmt: skip
    uses = doc.get("uses", [])
    if not isinstance(uses, list) or not all(isinstance(u, str) for u in uses):
        raise CaseError(where, "uses: not a list of strings")
    if bad := [u for u in uses if u not in USES]:
        raise CaseError(where, f"unknown uses {', '.join(bad)} (known: {', '.join(USES)})")
    ranks = doc.get("ranks")
    if ranks is not None and (isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1):
        raise CaseError(where, f"ranks: {ranks!r} is not a number of ranks >= 1")
    if doc["language"] != "python" and "build" not in doc:
        raise CaseError(where, f"missing key: build (a {doc['language']} program is compiled)")
    for key, allowed in _PLACEHOLDERS.items():
        for name in _PLACEHOLDER.findall(doc.get(key, "")):
            if name not in allowed:
                raise CaseError(where, f"{key}: unknown placeholder {{{name}}} "
                                       f"(known: {', '.join(sorted(allowed))})")  # fmt: skip
    if "build_fixed" in doc and "build" not in doc:
        raise CaseError(where, "build_fixed without build")
    for key in ("build", "build_fixed", "run"):
        try:
            if key in doc and not shlex.split(doc[key]):
                raise CaseError(where, f"{key}: empty command")
        except ValueError as e:
            raise CaseError(where, f"{key}: {e}") from None
    sources = [path.parent / s for s in SOURCES if (path.parent / s).is_file()]
    if "source" in doc:  # another case's program, built or run otherwise
        shared = (path.parent / doc["source"]).resolve()
        if sources:
            raise CaseError(where, f"source: names {doc['source']} but the case has its own "
                                   f"{sources[0].name}")  # fmt: skip
        if shared.name not in SOURCES or not shared.is_file():
            raise CaseError(where, f"source: {doc['source']} is not a program source "
                                   f"({' or '.join(SOURCES)})")  # fmt: skip
        sources = [shared]
    if len(sources) != 1:
        found = ", ".join(s.name for s in sources) or "none"
        raise CaseError(where, f"needs one program source ({' or '.join(SOURCES)}); found {found}")
    line = doc.get("line")
    if line is not None:
        if isinstance(line, bool) or not isinstance(line, int) or line < 1:
            raise CaseError(where, f"line: {line!r} is not a line number >= 1")
        if line > len(sources[0].read_text(errors="replace").splitlines()):
            raise CaseError(where, f"line: {line} is past the end of {sources[0].name}")
    return Case(name=path.parent.name, dir=path.parent, source=sources[0], title=doc["title"],
                language=doc["language"], run=doc["run"], expect=doc["expect"],
                build=doc.get("build"), build_fixed=doc.get("build_fixed"), uses=list(uses),
                ranks=ranks, advice=doc.get("advice"), line=line,
                mistake=doc.get("mistake", ""), fix=doc.get("fix", ""))  # fmt: skip


def case_files(corpus: Path = CORPUS_DIR) -> list[Path]:
    """Every ``case.toml`` of the corpus, by case name."""
    return sorted(corpus.glob("*/case.toml"))


def load_corpus(corpus: Path = CORPUS_DIR,
                patterns: Sequence[str] = ()) -> tuple[list[Case], list[CaseError]]:  # fmt: skip
    """The valid cases whose names match one of ``patterns`` (globs; all when
    none), and one error per bad case file: a bad file stops no other."""
    cases: list[Case] = []
    errors: list[CaseError] = []
    for path in case_files(corpus):
        if patterns and not any(fnmatch.fnmatchcase(path.parent.name, p) for p in patterns):
            continue
        try:
            cases.append(load_case(path))
        except CaseError as e:
            errors.append(e)
    return cases, errors


# ---------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------


def build_line(case: Case, mode: str = "mistake") -> str | None:
    """The command that builds the program of ``mode`` (None: not compiled)."""
    return case.build_fixed if mode == "fixed" and case.build_fixed else case.build


def build_key(case: Case, mode: str = "mistake") -> str:
    """What the built program depends on: the case's files but its label, and
    the build command."""
    h = hashlib.sha256((build_line(case, mode) or "").encode())
    files = {p for p in case.dir.iterdir() if p.is_file() and p.name != "case.toml"}
    for f in sorted(files | {case.source}):
        h.update(f"\0{f.name}\0".encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def build(case: Case, root: Path = BUILD_DIR, mode: str = "mistake") -> Path | None:
    """The case's program for ``mode``, built once into ``root/<case>-<key>/``
    (None for a program that is not compiled); :class:`CaseError` with the
    compiler's last lines when the build fails."""
    line = build_line(case, mode)
    if not line:
        return None
    out = root / f"{case.name}-{build_key(case, mode)}"
    exe = out / case.name
    if exe.is_file():
        return exe
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{case.name}-", dir=root))
    try:
        cmd = line.replace("{exe}", shlex.quote(str(work / case.name)))
        cmd = cmd.replace("{src}", shlex.quote(str(case.source)))
        p = subprocess.run(cmd, shell=True, cwd=work, capture_output=True, text=True,
                           timeout=RUN_TIMEOUT)  # fmt: skip
        if p.returncode != 0 or not (work / case.name).is_file():
            tail = " | ".join((p.stderr or p.stdout).strip().splitlines()[-3:])
            raise CaseError(case.name, f"build failed (exit {p.returncode}): {tail}")
        try:
            os.rename(work, out)  # whole or not at all, even with two builds at once
        except OSError:
            if not exe.is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return exe


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------


def command(case: Case, exe: Path | None, mode: str) -> list[str]:
    """The case's command line in ``mode``, under mpirun when it has ranks."""
    values = {"{exe}": str(exe or ""), "{python}": sys.executable, "{src}": str(case.source),
              "{mode}": mode}  # fmt: skip
    argv = []
    for token in shlex.split(case.run):
        for k, v in values.items():
            token = token.replace(k, v)
        argv.append(token)
    return [*mpirun_command(case.ranks), *argv] if case.ranks else argv


def _run(case: Case, argv: list[str], cwd: Path, what: str) -> float:
    """Wall seconds of one run in ``cwd``; :class:`CaseError` when it fails."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise CaseError(case.name, f"{what}: still running after {RUN_TIMEOUT:.0f} s") from None
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        tail = " | ".join(p.stderr.strip().splitlines()[-3:])
        raise CaseError(case.name, f"{what} failed (exit {p.returncode}): {tail}")
    return wall


def time_mode(case: Case, exe: Path | None, mode: str, repeat: int) -> float:
    """Best wall seconds of ``repeat`` untraced runs, each in a fresh directory."""
    best = float("inf")
    for _ in range(max(1, repeat)):
        with tempfile.TemporaryDirectory(prefix=f"iopilot-corpus-{case.name}-") as cwd:
            best = min(best, _run(case, command(case, exe, mode), Path(cwd), f"{mode} run"))
    return best


def traced_diagnosis(case: Case, exe: Path | None, mode: str) -> dict[str, Any]:
    """Run ``mode`` under ``iopilot run --trace-only`` in a fresh directory and
    diagnose the trace through the one pipeline: the report as plain data."""
    with tempfile.TemporaryDirectory(prefix=f"iopilot-corpus-{case.name}-") as tmp:
        cwd, trace = Path(tmp) / "work", Path(tmp) / "trace"
        cwd.mkdir()
        argv = [sys.executable, "-m", "iopilot", "run", "--trace-only", "--trace-dir",
                str(trace), "--", *command(case, exe, mode)]  # fmt: skip
        _run(case, argv, cwd, f"traced {mode} run")
        return api.render(api.diagnose(trace), "dict")


def first_finding(report: dict[str, Any]) -> dict[str, Any] | None:
    """The first WARN or HIGH finding (findings come most costly first): what
    a user reads first."""
    return next((f for f in report["findings"] if f["level"] in ("WARN", "HIGH")), None)


def raised(report: dict[str, Any], check: str) -> bool:
    """Whether ``check`` is among the WARN or HIGH findings."""
    return any(f["check"] == check and f["level"] in ("WARN", "HIGH")
               for f in report["findings"])  # fmt: skip
