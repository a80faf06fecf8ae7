"""libdarshan-util, the C library PyDarshan ships, as this reader uses it: its
C declarations (pre-built at set-up), its counter name tables, its version,
and what it prints on file descriptor 2, caught."""

from __future__ import annotations

import importlib.util
import os
import zlib
from functools import lru_cache
from pathlib import Path
from typing import Any

# libdarshan-util's APMPI counter name tables: apmpi<suffix>counter_names.
APMPI_TABLES = {"counters": "", "times": "_f_mpiop_totaltime", "sync": "_f_mpiop_synctime",
                "total": "_f_mpi_global"}  # fmt: skip


# PyDarshan's C declarations as cffi's pre-built Python module, written at
# set-up (``make setup`` runs tools/build_darshan_ffi.py): parsing them takes
# pycparser ~40 ms per run, a fifth of a whole report.
BUILT_FFI = Path(__file__).resolve().parents[1] / "_lib" / "darshan_ffi.py"


@lru_cache(maxsize=1)
def library() -> tuple[Any, Any]:
    """(ffi, lib) for the libdarshan-util that ships with PyDarshan."""
    lib, api_file = _pydarshan_files()
    if lib is None:
        # Not a wheel layout (e.g. a source build): let PyDarshan find its library.
        from darshan.backend.cffi_backend import ffi, libdutil  # pragma: no cover

        return ffi, libdutil  # pragma: no cover
    ffi = _ffi_for(api_file)
    return ffi, ffi.dlopen(str(lib))


def _pydarshan_files() -> tuple[Path | None, Path]:
    """PyDarshan's libdarshan-util (None when not a wheel's layout) and its
    file of C declarations."""
    spec = importlib.util.find_spec("darshan")  # locates the package without running it
    if spec is None or spec.origin is None:
        raise RuntimeError("PyDarshan (the 'darshan' package) is not installed")
    pkg = Path(spec.origin).parent
    libs = sorted((pkg.parent / "darshan.libs").glob("libdarshan-util*.so*"))
    api_file = pkg / "backend" / "api_def_c.py"
    return (libs[0] if libs and api_file.exists() else None), api_file


def _ffi_for(api_file: Path, built: Path = BUILT_FFI) -> Any:
    """An FFI with PyDarshan's C declarations: the module ``built`` at
    set-up when it was made from these declarations, else parsed now, in
    memory.  Nothing is written and nothing printed either way."""
    header = _api_header(api_file)
    try:
        text = built.read_text(encoding="utf-8")
    except (OSError, ValueError):
        text = ""
    if text:
        names: dict[str, Any] = {}
        try:
            # Run as source, not imported: an import would write bytecode beside it.
            exec(compile(text, str(built), "exec"), names)
            if names.get("KEY") == _ffi_key(header):
                return names["ffi"]
        except Exception:  # damaged, or made by another cffi: parse below
            pass
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(header)
    return ffi


def _ffi_key(header: str) -> str:
    # Which declarations a built module holds; crc32 avoids loading OpenSSL for hashlib.
    return f"{zlib.crc32(header.encode()):08x}{len(header):x}"


def build_ffi(out: Path = BUILT_FFI) -> Path:
    """Write the installed PyDarshan's C declarations as cffi's pre-built
    Python module to ``out`` (at set-up), with the key :func:`_ffi_for` checks."""
    import cffi

    _, api_file = _pydarshan_files()
    header = _api_header(api_file)
    key = _ffi_key(header)
    builder = cffi.FFI()
    builder.cdef(header)
    builder.set_source(f"_iopilot_darshan_ffi_{key}", None, compiler_verbose=False)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        builder.emit_python_code(str(tmp))
        with open(tmp, "a", encoding="utf-8") as f:
            f.write(f"\nKEY = {key!r}\n")
        os.replace(tmp, out)  # atomic: a report running meanwhile never sees half a file
    finally:
        tmp.unlink(missing_ok=True)
    return out


def _api_header(api_file: Path) -> str:
    # Run as source, not imported: an import may write bytecode beside it.
    api: dict[str, Any] = {"__name__": "_iopilot_darshan_api", "__file__": str(api_file)}
    exec(compile(api_file.read_text(encoding="utf-8"), str(api_file), "exec"), api)
    # PyDarshan declares the APMPI name tables only in a module that loads
    # the library on import; the tables are in the library all the same.
    return api["load_darshan_header"]("".join(f"extern char *apmpi{t}_counter_names[];\n"
                                              for t in APMPI_TABLES.values()))  # fmt: skip


def library_version() -> str:
    ffi, lib = library()
    return ffi.string(lib.darshan_log_get_lib_version()).decode()


@lru_cache(maxsize=32)
def counter_names(prefix: str) -> tuple[str, ...]:
    ffi, lib = library()
    table = getattr(lib, f"{prefix}_counter_names")
    names: list[str] = []
    while True:
        name = ffi.string(table[len(names)]).decode()
        if name.endswith("NUM_INDICES"):
            return tuple(names)
        names.append(name)


class CapturedStderr:
    """Collect what the C library prints on fd 2, so it never reaches the user raw."""

    def __enter__(self) -> CapturedStderr:
        self.text = ""
        self._fd = _scratch_fd()
        self._saved = os.dup(2)
        os.dup2(self._fd, 2)
        return self

    def __exit__(self, *exc: object) -> None:
        os.dup2(self._saved, 2)
        os.close(self._saved)
        size = os.lseek(self._fd, 0, os.SEEK_END)
        data = os.pread(self._fd, size, 0) if size else b""
        os.close(self._fd)
        self.text = data.decode("utf-8", "replace").strip()


def _scratch_fd() -> int:
    """An anonymous file: in memory where the kernel offers it (no import of
    ``tempfile``, which brought ``shutil`` and ``random`` into every report)."""
    if hasattr(os, "memfd_create"):
        try:
            return os.memfd_create("iopilot-stderr", getattr(os, "MFD_CLOEXEC", 0))
        except OSError:
            pass
    import tempfile

    with tempfile.TemporaryFile() as f:  # closes its own descriptor, keeps the copy's file
        return os.dup(f.fileno())
