"""The runtime's files depend on each other in one direction: modules on the core.

A unit is a C file with the header of the same name (``behind.c`` and
``behind.h``); a module in several files is one unit, its files those that
include its private header (``hdf5_io.c`` includes ``hdf5_private.h``: unit
``hdf5``); the core is one unit (``core.c``, ``process.c``, ``tables.c``,
``records.c``, ``output.c``, ``files.c``, ``modules.c``, ``cpu.c`` and their
``core.h``, ``core_private.h``, ``access.h``), and no other file includes
``core_private.h``.  Unit A depends on unit B when one of A's
files includes one of B's headers, or when A's object refers to a symbol
that B's object defines inside the library (hidden visibility: the
wrappers the library exports, ``mmap`` or ``fopen``, stand for the C
library's functions and count for no one).  The core calls the modules
only through the hooks of their ``iop_module`` (``modules.c`` lists them),
so it depends on none of them, and no circle runs through the runtime.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

from test_structure import cycles as structure_cycles

SRC = Path(__file__).resolve().parents[1] / "runtime" / "src"
CORE_FILES = {"core.c", "core.h", "core_private.h", "process.c", "cpu.c", "tables.c", "records.c",
              "output.c", "files.c", "modules.c", "sites.c", "access.h"}  # fmt: skip
CC = shutil.which("cc") or shutil.which("gcc")
READELF = shutil.which("readelf")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
NOT_RUNTIME = {"async.c"}  # the asynchronous I/O engine: a library of its own

pytestmark = pytest.mark.skipif(CC is None or READELF is None, reason="no cc or readelf")


def runtime_files(src: Path) -> list[Path]:
    return sorted(p for p in src.iterdir()
                  if p.suffix in (".c", ".h") and p.name not in NOT_RUNTIME)  # fmt: skip


def units(src: Path) -> dict[str, str]:
    """The unit of each file of runtime/src: "core", a private header's
    module, or the file's stem."""
    found = {}
    for path in runtime_files(src):
        private = [t[: -len("_private.h")] for t in INCLUDE.findall(path.read_text())
                   if t.endswith("_private.h")]  # fmt: skip
        stem = path.stem[: -len("_private")] if path.stem.endswith("_private") else path.stem
        found[path.name] = "core" if path.name in CORE_FILES else (private or [stem])[0]
    return found


def include_edges(src: Path) -> set[tuple[str, str, str]]:
    """(from unit, to unit, why) for each #include of a runtime header."""
    unit_of = units(src)
    edges = set()
    for path in runtime_files(src):
        for target in INCLUDE.findall(path.read_text()):
            if "/" in target or not (src / target).exists():
                continue  # ../include/*.h: generated tables, no runtime code
            a, b = unit_of[path.name], unit_of[target]
            if a != b:
                edges.add((a, b, f"{path.name} includes {target}"))
    return edges


def mpi_flags() -> list[str] | None:
    """-I flags for mpi.h, None when there is no MPI to build against."""
    try:
        out = subprocess.run(["mpicc", "--showme:incdirs"], capture_output=True, text=True,
                             check=True).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    return [f"-I{d}" for d in out.split()]


def symbols(obj: Path) -> tuple[set[str], set[str]]:
    """(hidden symbols defined, symbols referred to but undefined) of an object."""
    out = subprocess.run([READELF, "-sW", str(obj)], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    defined, undefined = set(), set()
    for line in out.splitlines():
        cols = line.split()
        if len(cols) < 8 or not cols[0].endswith(":") or cols[4] not in ("GLOBAL", "WEAK"):
            continue
        vis, ndx, name = cols[5], cols[6], cols[7]
        if ndx == "UND":
            undefined.add(name)
        elif vis == "HIDDEN":
            defined.add(name)
    return defined, undefined


def symbol_tables(src: Path, build: Path) -> dict[str, tuple[set[str], set[str]]]:
    """Each C file's (hidden symbols defined, symbols used) from its object."""
    mpi = mpi_flags()
    tables = {}
    for path in runtime_files(src):
        if path.suffix != ".c":
            continue
        if "<mpi.h>" in path.read_text() and mpi is None:
            continue
        obj = build / (path.stem + ".o")
        subprocess.run([CC, "-std=gnu11", "-fPIC", "-fvisibility=hidden", "-pthread", "-O0",
                        "-w", *(mpi or []), "-c", str(path), "-o", str(obj)],
                       check=True)  # fmt: skip
        tables[path.name] = symbols(obj)
    return tables


def symbol_edges(tables: dict[str, tuple[set[str], set[str]]],
                 unit_of: dict[str, str]) -> set[tuple[str, str, str]]:  # fmt: skip
    """(from unit, to unit, why) for each symbol one file takes from another."""
    owner = {sym: name for name, (defined, _) in tables.items() for sym in defined}
    edges = set()
    for name, (_, undefined) in tables.items():
        for sym in undefined:
            if sym in owner and unit_of[owner[sym]] != unit_of[name]:
                why = f"{name} uses {sym} of {owner[sym]}"
                edges.add((unit_of[name], unit_of[owner[sym]], why))
    return edges


def cycles(edges: Iterable[tuple[str, str, str]]) -> list[list[str]]:
    """The circles (strongly connected components) of the units' graph."""
    graph: dict[str, set[str]] = {}
    for a, b, _ in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    return sorted(structure_cycles(graph))


def registry_refs(why: str) -> bool:
    """modules.c naming a module's ``iop_*_module``: the one list of modules."""
    return re.match(r"modules\.c uses iop_\w+_module of ", why) is not None


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, tuple[set[str], set[str]]]:
    return symbol_tables(SRC, tmp_path_factory.mktemp("objects"))


@pytest.fixture(scope="module")
def edges(tables) -> set[tuple[str, str, str]]:
    return include_edges(SRC) | symbol_edges(tables, units(SRC))


def test_no_circle_among_runtime_units(edges):
    """Found on the runtime of the first version: core, behind, settings,
    direct, stdio and signals in one circle."""
    acyclic = {e for e in edges if not registry_refs(e[2])}
    found = cycles(acyclic)
    detail = {tuple(c): sorted(why for a, b, why in acyclic if a in c and b in c) for c in found}
    assert not found, detail


def test_core_names_no_module(edges):
    """The core includes no module's header and calls no module's function:
    it reaches them through their hooks in modules.c's list."""
    leaks = sorted(why for a, b, why in edges if a == "core" and not registry_refs(why))
    assert not leaks, leaks


def test_core_files_form_no_circle(tables):
    """Inside the core too, each file calls only those below it: process.c
    (the state every file knows), files.c, tables.c, records.c, output.c,
    core.c (start-up, fork, exec, exit) on top; modules.c is the list."""
    core = {name: name for name in tables if name in CORE_FILES}
    inside = symbol_edges({n: t for n, t in tables.items() if n in core}, core)
    found = cycles(inside)
    detail = {tuple(c): sorted(w for a, b, w in inside if a in c and b in c) for c in found}
    assert not found, detail
    assert ("core.c", "process.c") in {(a, b) for a, b, _ in inside}  # the graph is drawn


def test_core_private_is_the_cores():
    """core_private.h is shared by the core's own files; modules use core.h."""
    users = {p.name for p in runtime_files(SRC)
             if "core_private.h" in INCLUDE.findall(p.read_text())}  # fmt: skip
    assert users and users <= CORE_FILES, users - CORE_FILES


def test_every_module_is_registered():
    """A file that defines an ``iop_module`` is in modules.c's list, and the
    list names no module that does not exist."""
    declared = re.compile(r"^const iop_module (iop_\w+_module)\b", re.M)
    defined = {m for p in runtime_files(SRC) if p.suffix == ".c"
               for m in declared.findall(p.read_text())}  # fmt: skip
    listed = set(re.findall(r"&(iop_\w+_module)", (SRC / "modules.c").read_text()))
    assert defined == listed
    assert {"iop_settings_module", "iop_behind_module", "iop_direct_module"} <= defined


def test_cycle_finder_sees_a_circle():
    edges = {("a", "b", ""), ("b", "c", ""), ("c", "a", ""), ("c", "d", "")}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({("a", "b", ""), ("b", "c", "")}) == []
