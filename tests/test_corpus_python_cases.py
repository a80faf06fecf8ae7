"""The Python programs of the corpus are self-describing and labelled the way
they are written: a docstring naming the mistake and the fix, the venv's
interpreter as the launcher, `uses` naming exactly the libraries the program
imports, a rank count exactly when it is an mpi4py program, both modes
handled, and an expected check that exists.  Static checks only: running the
programs is test_corpus_programs.py's.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import iopilot.checks  # noqa: F401  (registers every check)
from iopilot.bench.corpus import CORPUS_DIR, USES, Case, load_corpus
from iopilot.checks.base import REGISTRY

CASES, _ = load_corpus(CORPUS_DIR)
PYTHON = [c for c in CASES if c.language == "python"]
IDS = [c.name for c in PYTHON]

# the `uses` entries that name a Python library, by the module they import
LIBRARY_USES = {module: use for use, module in USES.items() if module}


def imported_modules(source: str) -> set[str]:
    """Top-level names of the modules a program imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def library_uses(source: str) -> set[str]:
    """The `uses` entries a program needs for the libraries it imports."""
    return {LIBRARY_USES[m] for m in imported_modules(source) if m in LIBRARY_USES}


def test_library_uses_follow_the_imports():
    src = "import sys\nimport h5py\nfrom mpi4py import MPI\nimport numpy as np\n"
    assert library_uses(src) == {"h5py", "mpi4py", "numpy"}
    assert library_uses("import os, struct\nfrom . import local\n") == set()
    assert library_uses("import netCDF4\nimport pandas.io\n") == {"netcdf4", "pandas"}


def test_the_corpus_has_python_cases():
    assert len(PYTHON) >= 11, IDS
    used = {u for c in PYTHON for u in c.uses}
    assert {"h5py", "numpy", "pandas", "mpi4py"} <= used, used


@pytest.mark.parametrize("case", PYTHON, ids=IDS)
def test_docstring_says_the_mistake_and_the_fix(case: Case):
    doc = ast.get_docstring(ast.parse(case.source.read_text())) or ""
    assert "Mistake:" in doc, f"{case.source}: no 'Mistake:' in the docstring"
    assert "Fix:" in doc, f"{case.source}: no 'Fix:' in the docstring"


@pytest.mark.parametrize("case", PYTHON, ids=IDS)
def test_run_by_the_venv_interpreter(case: Case):
    assert case.source.name == "main.py"
    assert case.build is None, case.build
    assert case.run.split() == ["{python}", "{src}", "{mode}"], case.run


@pytest.mark.parametrize("case", PYTHON, ids=IDS)
def test_uses_name_exactly_the_imported_libraries(case: Case):
    declared = set(case.uses) & set(LIBRARY_USES.values())
    assert declared == library_uses(case.source.read_text()), (case.uses, case.source)


@pytest.mark.parametrize("case", PYTHON, ids=IDS)
def test_ranks_exactly_for_mpi4py_programs(case: Case):
    mpi = "mpi4py" in case.uses
    assert (case.ranks is not None) == mpi, (case.ranks, case.uses)
    assert ("mpi" in case.uses) == mpi, case.uses


@pytest.mark.parametrize("case", PYTHON, ids=IDS)
def test_both_modes_are_handled(case: Case):
    text = case.source.read_text()
    assert "sys.argv[1]" in text, case.source
    # one mode is tested by name; the other is the else branch
    assert '"mistake"' in text or '"fixed"' in text, case.source


@pytest.mark.parametrize("case", PYTHON, ids=IDS)
def test_expects_a_registered_check(case: Case):
    assert case.expect in REGISTRY, f"{case.name}: no check {case.expect!r}"


def test_program_size_stays_readable():
    sizes = {c.name: len(Path(c.source).read_text().splitlines()) for c in PYTHON}
    assert all(20 <= n <= 80 for n in sizes.values()), sizes
