"""``iopilot cc``: link the runtime into a program, for the libraries it links
statically.

A preloaded ``libiopilot.so`` sees a library's calls only when they cross a
shared-library boundary; Debian's plain ``h5cc`` links ``libhdf5.a`` into
the program, so its HDF5 calls never do.  ``libiopilot_link.a`` (built by
runtime/Makefile from the same sources) goes into the program instead:

* the HDF5 entry points are wrapped by the linker (``--wrap=H5Dwrite``: the
  program's calls go to ``__wrap_H5Dwrite``, which enters the runtime's
  wrapper; the real function is ``__real_H5Dwrite``);
* the libc, MPI and Fortran-runtime entry points are defined by the program
  itself and exported (``--dynamic-list``), so that it sees the calls of
  every shared library too (Open MPI's own ``pwrite``), as preloading does;
* ``-u iopilot_linked_runtime`` brings the runtime out of the archive; the
  program then exports that marker, and a preloaded copy stands aside.

The lists of wrapped and exported functions are written beside the archive
when it is built, from its own symbol table.  Without ``IOPILOT_TRACE_DIR``
(``iopilot run`` sets it) the program runs as if nothing were linked in.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import InputError
from ..runtime_lib import library_path

ARCHIVE = "libiopilot_link.a"
MARKER = "iopilot_linked_runtime"
# Options after which the compiler does not link.
_NO_LINK = frozenset({"-c", "-S", "-E", "-M", "-MM", "-shared", "-r"})
_UNDEFINED_WRAP = re.compile(r"undefined reference to `__wrap_(\w+)'")


def _beside_library(name: str) -> Path:
    path = library_path().parent / name
    if not path.exists():
        raise InputError(str(path), "the iopilot link archive is not built",
                         "run `make -C runtime` first")  # fmt: skip
    return path


def wrapped_functions() -> list[str]:
    """The functions the linker wraps (``--wrap``), as the archive was built."""
    return _beside_library(ARCHIVE.replace(".a", ".wraps")).read_text().split()


def link_flags() -> list[str]:
    """What to add at the end of a program's link line."""
    archive = _beside_library(ARCHIVE)
    exports = _beside_library(ARCHIVE.replace(".a", ".exports"))
    return [f"-Wl,-u,{MARKER}", f"-Wl,--dynamic-list={exports}",
            *(f"-Wl,--wrap={name}" for name in wrapped_functions()),
            str(archive), "-ldl", "-pthread"]  # fmt: skip


def links(command: Sequence[str]) -> bool:
    """Whether a compiler command links an executable (not ``-c``, ``-shared`` ...)."""
    return not any(arg in _NO_LINK for arg in command[1:])


def compile_command(command: Sequence[str]) -> list[str]:
    """The command with the runtime's link options, when it links an executable."""
    return [*command, *link_flags()] if links(command) else list(command)


def compile_and_link(command: Sequence[str]) -> int:
    """Run the compiler command with the runtime linked in; its exit status.

    A library linked after the archive (``libhdf5_hl.a`` calling
    ``H5Dwrite`` when the program does not) asks for a ``__wrap_`` entry
    point once the archive was passed: the link is made once more with
    those entry points asked for from the start (``-u __wrap_NAME``)."""
    if not command:
        raise InputError("iopilot cc", "no compiler command", "iopilot cc -- h5cc -o prog prog.c")
    argv = compile_command(command)
    if argv == list(command):
        return _call(argv)[0]
    status, err = _call(argv, capture=True)
    late = sorted(set(_UNDEFINED_WRAP.findall(err)))
    if status == 0 or not late:
        sys.stderr.write(err)
        return status
    return _call([*argv, *(f"-Wl,-u,__wrap_{name}" for name in late)])[0]


def _call(argv: Sequence[str], capture: bool = False) -> tuple[int, str]:
    """Exit status and (``capture``) standard error of a command."""
    try:
        p = subprocess.run(argv, stderr=subprocess.PIPE if capture else None, text=True)
    except OSError as e:
        raise InputError(argv[0], f"cannot run the compiler: {e.strerror or e}") from None
    return p.returncode, p.stderr or ""
