"""Who the traced program is: its language and the I/O libraries it carries
inside itself.

An ``LD_PRELOAD`` runtime sees a library's calls only when they cross a
shared-library boundary: HDF5 linked statically into the executable (Debian's
plain ``h5cc`` does so) is invisible, and its I/O shows up only as the POSIX
calls beneath it.  This module reads the executable's ELF file (pyelftools
for the headers; the symbol tables as NumPy arrays, so that a binary with a
million symbols is scanned in milliseconds) to say which layers it defines
itself, and which language runtime it needs (``libgfortran``, ``libstdc++``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..model.command import is_launcher, is_python

# A layer is carried inside a file when the file defines (not merely calls)
# one of these functions.
LAYER_SYMBOLS: dict[str, tuple[str, ...]] = {
    "HDF5": ("H5Fopen", "H5Fcreate", "H5Dwrite"),
    "MPI-IO": ("MPI_File_open", "PMPI_File_open"),
    "NetCDF": ("nc_open", "nc_create"),
    "PnetCDF": ("ncmpi_open", "ncmpi_create"),
}
# A program linked with the runtime (`iopilot cc`) defines this marker, and
# sees a layer it carries when it has the layer's wrapped entry points
# ("*": a prefix), or, for MPI-IO, always: the runtime defines MPI_File_open
# itself, in front of the shared libmpi.
LINKED_MARKER = "iopilot_linked_runtime"
SEEN_WHEN_LINKED: dict[str, str] = {"HDF5": "__wrap_H5*", "MPI-IO": LINKED_MARKER}
# The Fortran runtime linked statically (-static-libgfortran) still defines these.
_FORTRAN_SYMBOLS = ("_gfortran_st_write", "_gfortran_st_read")
_FORTRAN_LIBS = re.compile(r"lib(gfortran|ifcore|ifport|flang|FortranRuntime|pgf90)")
_CPP_LIBS = re.compile(r"lib(stdc\+\+|c\+\+)\.")
_HEAD = 64 << 10  # a process summary names its executable in its first lines


# ---------------------------------------------------------------------------
# ELF files
# ---------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _inspect(path: str, mtime_ns: int, size: int
             ) -> tuple[tuple[str, ...], tuple[str, ...], bool] | None:  # fmt: skip
    """(DT_NEEDED libraries, layers defined inside, defines the Fortran
    runtime) of one ELF file; keyed by its time and size so a rebuilt file
    is read again."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    wanted = {name: layer for layer, names in LAYER_SYMBOLS.items() for name in names}
    wanted.update(dict.fromkeys(_FORTRAN_SYMBOLS, "FORTRAN"))
    wanted.update({name: "seen " + layer for layer, name in SEEN_WHEN_LINKED.items()})
    needed: list[str] = []
    found: set[str] = set()
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            for sec in sections(elf, ("SHT_DYNAMIC", "SHT_SYMTAB", "SHT_DYNSYM")):
                if sec["sh_type"] == "SHT_DYNAMIC":
                    needed += [t.needed for t in sec.iter_tags("DT_NEEDED")]
                else:
                    found |= _defined(elf, sec, wanted)
    except (OSError, ELFError, ValueError, KeyError, AttributeError):
        return None  # not an ELF file (a script), or a damaged one
    layers = tuple(layer for layer in LAYER_SYMBOLS
                   if layer in found and "seen " + layer not in found)  # fmt: skip
    return tuple(needed), layers, "FORTRAN" in found


def sections(elf: object, types: tuple[str, ...]) -> list[object]:
    """The sections of these types, built from their headers alone: building
    every section parses hash tables too (0.2 s of 0.3 s on a 100 MB binary)."""
    from elftools.common.exceptions import ELFError

    out = []
    for i in range(elf.num_sections()):  # type: ignore[attr-defined]
        try:
            out.append(elf.get_section(i, type=types))  # type: ignore[attr-defined]
        except ELFError:  # another type: not built
            continue
    return out


def symbol_table(elf: object, sec: object) -> tuple[np.ndarray, np.ndarray]:
    """A symbol table section as one structured array (name offset, info,
    section index, value, size), and its string table's bytes."""
    e = "<" if elf.little_endian else ">"  # type: ignore[attr-defined]
    if elf.elfclass == 64:  # type: ignore[attr-defined]
        dt = np.dtype([("name", e + "u4"), ("info", "u1"), ("other", "u1"),
                       ("shndx", e + "u2"), ("value", e + "u8"), ("size", e + "u8")])  # fmt: skip
    else:
        dt = np.dtype([("name", e + "u4"), ("value", e + "u4"), ("size", e + "u4"),
                       ("info", "u1"), ("other", "u1"), ("shndx", e + "u2")])  # fmt: skip
    data = sec.data()  # type: ignore[attr-defined]
    syms = np.frombuffer(data, dt, len(data) // dt.itemsize)
    strtab = np.frombuffer(elf.get_section(sec["sh_link"]).data(), np.uint8)  # type: ignore[attr-defined]
    return syms, strtab


def functions(syms: np.ndarray) -> np.ndarray:
    """Which symbols are defined (not SHN_UNDEF) functions, plain or GNU indirect."""
    kind = syms["info"] & 0xF
    return (syms["shndx"] != 0) & ((kind == 2) | (kind == 10))


def _defined(elf: object, sec: object, wanted: dict[str, str]) -> set[str]:
    """Which of ``wanted``'s layers a symbol table defines (functions, and
    the linked runtime's marker); a wanted name ending in ``*`` is a prefix.

    Only the names of defined functions are read, each as its first bytes
    in one array (symbols x width), compared with every wanted name plus its
    terminating NUL: no pass over the whole string table, whose C++ names
    run to tens of MB."""
    syms, strtab = symbol_table(elf, sec)
    data = (syms["shndx"] != 0) & ((syms["info"] & 0xF) == 1)  # STT_OBJECT: the marker
    at = syms["name"][functions(syms) | data].astype(np.int64)
    if not len(at) or not len(strtab):
        return set()
    width = max(len(n) for n in wanted) + 1
    padded = np.append(strtab, np.zeros(width, np.uint8))
    at = np.minimum(at, len(strtab))
    # first the names' first two bytes ("H5", "MP", "nc" ...): most symbols go
    pairs = {n.encode()[0] << 8 | n.encode()[1] for n in wanted}
    at = at[np.isin(padded[at].astype(np.int32) << 8 | padded[at + 1], list(pairs))]
    heads = padded[at[:, None] + np.arange(width)]
    found = set()
    for name, layer in wanted.items():
        key = np.frombuffer(name.removesuffix("*").encode()
                            + (b"" if name.endswith("*") else b"\0"), np.uint8)  # fmt: skip
        if layer not in found and (heads[:, : len(key)] == key).all(axis=1).any():
            found.add(layer)
    return found


def inspect(path: str) -> tuple[tuple[str, ...], tuple[str, ...], bool] | None:
    """(needed libraries, layers carried inside, Fortran runtime inside) of
    the file at ``path``; None when it is gone, not a regular file or not ELF."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not os.path.isfile(path):
        return None
    return _inspect(path, st.st_mtime_ns, st.st_size)


def elf_language(path: str) -> str:
    """"fortran", "c++" or "c" from what the executable needs; "" when it
    cannot be read."""
    facts = inspect(path)
    if facts is None:
        return ""
    needed, _layers, fortran = facts
    if fortran or any(_FORTRAN_LIBS.match(n) for n in needed):
        return "fortran"
    if any(_CPP_LIBS.match(n) for n in needed):
        return "c++"
    return "c"


def static_layers(paths: Iterable[str]) -> dict[str, str]:
    """{layer: file} for the layers these executables carry inside
    themselves; files that are gone say nothing."""
    out: dict[str, str] = {}
    for path in paths:
        facts = inspect(path)
        for layer in facts[1] if facts else ():
            out.setdefault(layer, path)
    return out


# ---------------------------------------------------------------------------
# The program's processes in a trace directory, before it is read
# ---------------------------------------------------------------------------


def trace_executables(trace_dir: str | Path) -> list[str]:
    """The executables of the processes in a trace directory that are not
    launchers, from the first lines of each process summary (the whole file
    may be large); used by ``iopilot run`` to record what it links."""
    exes: dict[str, None] = {}
    dec = json.JSONDecoder()
    for p in sorted(Path(trace_dir).glob("p*.json")):
        try:
            with open(p, "rb") as f:
                head = f.read(_HEAD).decode("utf-8", "surrogateescape")
        except OSError:
            continue
        m = re.search(r'"exe"\s*:\s*', head)
        if not m:
            continue
        try:
            exe, _ = dec.raw_decode(head, m.end())
        except ValueError:
            continue
        if isinstance(exe, str) and exe and not is_launcher(exe):
            exes[exe] = None
    return list(exes)


def program_facts(exes: Iterable[str]) -> dict[str, object]:
    """What job.json keeps about the program's executables, so that a report
    on another machine (where they are not) still knows: ``static_layers``
    ({layer: file}) and ``exe_languages`` ({file: language})."""
    exes = list(exes)
    langs = {e: lang for e in exes if not is_python(e) and (lang := elf_language(e))}
    return {"static_layers": static_layers(exes), "exe_languages": langs}
