"""The compiled programs of the corpus (C, C++, Fortran; serial and MPI) are
self-describing and built the way their labels say: a comment at the top
naming the mistake and the fix, the compiler of the labelled language, a
shared HDF5 link unless the case is about static linking, and a rank count
exactly when the program is an MPI program.  Static checks only: building
and running the programs is test_corpus_programs.py's.
"""

from __future__ import annotations

import re

import pytest

from iopilot.bench.corpus import CORPUS_DIR, Case, load_corpus

CASES, _ = load_corpus(CORPUS_DIR)
COMPILED = [c for c in CASES if c.language in ("c", "c++", "fortran")]

# the compilers that build each language (wrappers included)
COMPILERS = {
    "c": {"gcc", "mpicc", "h5cc", "h5pcc"},
    "c++": {"g++", "mpicxx"},
    "fortran": {"gfortran", "mpifort", "h5fc", "h5pfc"},
}
MPI_COMPILERS = {"mpicc", "mpicxx", "mpifort", "h5pcc", "h5pfc"}
HDF5_COMPILERS = {"h5cc", "h5pcc", "h5fc", "h5pfc"}


def compiler(case: Case) -> str:
    return (case.build or "").split()[0]


def header(case: Case) -> str:
    """The comment block the source starts with, markers stripped."""
    lines = case.source.read_text().splitlines()
    kept = []
    for line in lines:
        s = line.strip()
        if not s.startswith(("/*", "*", "//", "!")):
            break
        kept.append(s.lstrip("/*!").strip())
    return " ".join(kept)


def test_the_corpus_has_compiled_cases():
    langs = {c.language for c in COMPILED}
    assert {"c", "c++", "fortran"} <= langs, langs


@pytest.mark.parametrize("case", COMPILED, ids=[c.name for c in COMPILED])
def test_source_says_the_mistake_and_the_fix(case: Case):
    text = header(case)
    assert re.search(r"\bMistake:", text), f"{case.source}: no 'Mistake:' in the top comment"
    assert re.search(r"\bFix:", text), f"{case.source}: no 'Fix:' in the top comment"
    assert "mistake|fixed" in text, f"{case.source}: the usage line is missing"


@pytest.mark.parametrize("case", COMPILED, ids=[c.name for c in COMPILED])
def test_built_by_the_compiler_of_its_language(case: Case):
    assert compiler(case) in COMPILERS[case.language], (case.build, case.language)
    suffix = {"c": ".c", "c++": ".cpp", "fortran": ".f90"}[case.language]
    assert case.source.suffix == suffix


@pytest.mark.parametrize("case", COMPILED, ids=[c.name for c in COMPILED])
def test_ranks_exactly_for_mpi_programs(case: Case):
    mpi = compiler(case) in MPI_COMPILERS
    assert ("mpi" in case.uses) == mpi, (case.uses, case.build)
    assert (case.ranks is not None) == mpi, (case.ranks, case.build)


@pytest.mark.parametrize("case", COMPILED, ids=[c.name for c in COMPILED])
def test_hdf5_linked_shared_unless_the_case_is_static(case: Case):
    if compiler(case) not in HDF5_COMPILERS:
        assert not {"hdf5", "hdf5-static"} & set(case.uses), case.uses
        return
    static = "hdf5-static" in case.uses
    # Debian's h5cc/h5pcc/h5fc link HDF5 statically unless told -shlib
    assert ("-shlib" not in (case.build or "").split()) == static, (case.build, case.uses)
