"""Darshan logs (formats 3.00-3.41) -> :class:`~iopilot.model.Trace`.

Reading goes through PyDarshan's bundled ``libdarshan-util`` and its C
declarations, but not through ``darshan.DarshanReport``: that imports pandas
(a third of a second) and builds one Python dict per DXT segment.  Here each
record is copied as raw bytes and the columns are made with one
``np.frombuffer`` per module.

Before the library sees a file, the header is checked here, because the
library reports every problem as "failed to open" and returns partial data
from truncated files without a word.
"""

from __future__ import annotations

import importlib.util
import os
import struct
import zlib
from functools import lru_cache
from itertools import pairwise
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .._child import run_in_child, signal_name
from .._record import record
from ..errors import InputError
from ..model import (
    OP_READ,
    OP_WRITE,
    RECORD_LAYERS,
    Counters,
    Job,
    ModuleInfo,
    Records,
    Striping,
    Trace,
    display,
)
from ..model.command import command_language
from ..vocabulary import DIRECTIONS, MODULE, MODULES
from .checked import open_regular
from .darshan_profiles import (
    APMPI_VERSION,
    HEATMAP_VERSION,
    RegionError,
    apmpi_dtypes,
    heatmap_limit,
    inflate,
    read_apmpi,
    read_heatmaps,
)
from .registry import Source, register

MAGIC = 6567223
# Module ids of the log format 3.41, in the library's order.
MODULE_IDS = (
    "NULL", "POSIX", "MPI-IO", "H5F", "H5D", "PNETCDF_FILE", "PNETCDF_VAR", "BG/Q",
    "LUSTRE", "STDIO", "DXT_POSIX", "DXT_MPIIO", "MDHIM", "APXC", "APMPI", "HEATMAP",
    "DFS", "DAOS",
)  # fmt: skip
# Older formats numbered their (16) header slots differently: 3.20 split HDF5
# into H5F and H5D, 3.41 split PnetCDF into file and variable modules.  Only
# the header's region names use these; the library maps old ids itself.
# 3.41 inserted PNETCDF_VAR after PNETCDF_FILE; before 3.20, HDF5 and
# PnetCDF were one module each.
_MODULE_IDS_3_20 = MODULE_IDS[:6] + MODULE_IDS[7:16]
_MODULE_IDS_3_00 = (*MODULE_IDS[:3], "HDF5", "PNETCDF", *MODULE_IDS[7:12])


def module_ids(version: str) -> tuple[str, ...]:
    """Names of the header's module slots in log format ``version``."""
    if version >= "3.41":
        return MODULE_IDS
    return _MODULE_IDS_3_20 if version >= "3.20" else _MODULE_IDS_3_00


# Counter modules read into the model: log module name -> (model layer, C struct).
COUNTER_MODULES = {m.darshan: (m.name, m.darshan_struct) for m in MODULES}
DXT_MODULES = {"DXT_POSIX": "POSIX", "DXT_MPIIO": "MPIIO"}
# Modules whose loss leaves the counters whole: a damaged or cut region of
# one of these is a warning, and the module is left out.
OPTIONAL_MODULES = frozenset({*DXT_MODULES, "HEATMAP", "APMPI", "APXC", "MDHIM", "BG/Q"})
# Formats the bundled library reads, with the size of their fixed header.
HEADER_BYTES = {"3.00": 360, "3.01": 360, "3.02": 360, "3.10": 360, "3.20": 360, "3.21": 360,
                "3.41": 1328}  # fmt: skip
COMPRESSION = {0: "zlib", 1: "bzip2", 2: "none"}
# libdarshan-util's APMPI counter name tables: apmpi<suffix>_counter_names.
APMPI_TABLES = {"counters": "", "times": "_f_mpiop_totaltime", "sync": "_f_mpiop_synctime",
                "total": "_f_mpi_global"}  # fmt: skip


# ----------------------------------------------------------------------------
# The library


# PyDarshan's C declarations as cffi's pre-built Python module, written at
# set-up (``make setup`` runs tools/build_darshan_ffi.py): parsing them takes
# pycparser ~40 ms per run, a fifth of a whole report.
BUILT_FFI = Path(__file__).resolve().parents[1] / "_lib" / "darshan_ffi.py"


@lru_cache(maxsize=1)
def _library() -> tuple[Any, Any]:
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
    ffi, lib = _library()
    return ffi.string(lib.darshan_log_get_lib_version()).decode()


@lru_cache(maxsize=32)
def _counter_names(prefix: str) -> tuple[str, ...]:
    ffi, lib = _library()
    table = getattr(lib, f"{prefix}_counter_names")
    names: list[str] = []
    while True:
        name = ffi.string(table[len(names)]).decode()
        if name.endswith("NUM_INDICES"):
            return tuple(names)
        names.append(name)


# ----------------------------------------------------------------------------
# Header checks


def open_log(path: str) -> BinaryIO:
    """``path`` opened for reading if it is a regular file (a link to one is
    followed); a FIFO, socket or device is an InputError before any read can
    wait on it."""
    fd, _ = open_regular(path, None, follow_links=True)
    return os.fdopen(fd, "rb")


@record
class LogHeader:
    """What the fixed header of a log says, once checked."""

    version: str  # log format, e.g. "3.41"
    partial: bool  # the header's any-module-partial flag
    compression: int  # COMPRESSION's key
    skip: dict[str, str]  # optional modules to leave out -> why
    big_endian: bool
    regions: dict[str, tuple[int, int]]  # module name -> (offset, length) in the file
    module_versions: dict[str, int]  # module name -> its record format version
    inflated: dict[str, bytes]  # module name -> region inflated by the checks (APMPI)


def _check_header(path: str) -> LogHeader:
    """Raise InputError with the real reason if ``path`` is not a readable log."""
    p = Path(path)
    if not p.exists():
        raise InputError(path, "no such file")
    if p.is_dir():
        raise InputError(path, "is a directory, not a Darshan log")
    try:
        with open_log(path) as f:
            head = f.read(HEADER_BYTES["3.41"] + 2)  # and the job record's first bytes
            size = os.fstat(f.fileno()).st_size
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror}") from None
    if size == 0:
        raise InputError(path, "empty file (0 bytes), not a Darshan log")
    if head[:2] == b"\x1f\x8b":
        inner = zlib.decompressobj(31).decompress(head[:512])
        if inner[:2] == b"2.":
            version = inner[:8].split(b"\0")[0].decode("ascii", "replace")
            raise InputError(
                path,
                f"Darshan 2.x log (format {version}), which Darshan 3 tools cannot read",
                "read it with darshan-util 2.x",
            )
        raise InputError(path, "gzip-compressed file, not a Darshan log", "gunzip it first")
    if head[:3] == b"BZh":
        raise InputError(path, "bzip2-compressed file, not a Darshan log", "bunzip2 it first")
    version = head[:8].split(b"\0")[0].decode("ascii", "replace")
    if version.startswith("2."):
        raise InputError(
            path,
            f"Darshan 2.x log (format {version}), which Darshan 3 tools cannot read",
            "read it with darshan-util 2.x",
        )
    if _looks_like_text(head):
        what = "darshan-parser text output" if b"darshan log version" in head else "a text file"
        raise InputError(path, f"{what}, not a binary Darshan log")
    if len(head) < 24:
        raise InputError(path, f"truncated: {size} bytes, too short for a Darshan header")
    little = struct.unpack_from("<q", head, 8)[0] == MAGIC
    big = struct.unpack_from(">q", head, 8)[0] == MAGIC
    if not (little or big):
        raise InputError(path, "not a Darshan log (bad magic number)")
    if version not in HEADER_BYTES:
        raise InputError(
            path, f"unsupported Darshan log format {version!r} (this reader knows 3.00-3.41)"
        )
    need = HEADER_BYTES[version]
    if size < need:
        raise InputError(
            path,
            f"truncated: the file ends inside the header ({size} of {need} bytes)",
            "copy the log again from where the job wrote it",
        )
    end = ">" if big and not little else "<"
    comp = head[16]
    if comp == 1:
        raise InputError(
            path,
            "log is bzip2-compressed, which PyDarshan's library cannot decompress",
            "re-compress it with zlib: darshan-convert IN OUT",
        )
    if comp not in COMPRESSION:
        raise InputError(path, f"corrupt: unknown compression type {comp} in the header")
    v341 = version >= "3.41"
    partial = struct.unpack_from(end + ("Q" if v341 else "I"), head, 24 if v341 else 20)[0]
    first_map = 32 if v341 else 24
    n_mods = 64 if v341 else 16
    regions = [("name table", *struct.unpack_from(end + "QQ", head, first_map))]
    regions = [r for r in regions if r[2]]
    ids = module_ids(version)
    versions_at = first_map + 16 * (n_mods + 1)  # one uint32 per module after the map
    mod_ver: dict[str, int] = {}
    for i in range(n_mods):
        off, length = struct.unpack_from(end + "QQ", head, first_map + 16 * (i + 1))
        if length:
            name = f"{ids[i]} module" if i < len(ids) else f"module {i}"
            regions.append((name, off, length))
            mod_ver[name] = struct.unpack_from(end + "I", head, versions_at + 4 * i)[0]
    skip = _check_regions(path, regions, need, size)
    kept = {f"{n} module": b"" for n in ("HEATMAP", "APMPI")}  # inflated below, if compressed
    if comp == 2:
        # An uncompressed region has no checksum: only a zlib stream where
        # raw data should be is told here; the rest is read in a child (_read_in_child).
        first = min((off for _, off, _ in regions), default=size)
        if first > need and _is_zlib(head[need:need + 2]):
            raise InputError(
                path,
                "corrupt: the header says the data is uncompressed, but it is zlib-compressed"
                " (a damaged compression field)",
                "copy the log again from where the job wrote it",
            )
    if comp == 0:
        # The library aborts the process on some corrupted streams, and reads
        # others as silently shorter data: inflate every region here first
        # (zlib's checksum catches any damaged byte).
        first = min((off for _, off, _ in regions), default=size)
        checked = [("job record", need, first - need), *(r for r in regions if r[0] not in skip)]
        skip.update(_verify_zlib(path, checked, kept))

    def bare(name: str) -> str:
        return name.removesuffix(" module")

    return LogHeader(version, bool(partial), comp, {bare(k): v for k, v in skip.items()},
                     end == ">", {bare(n): (o, ln) for n, o, ln in regions},
                     {bare(k): v for k, v in mod_ver.items()},
                     {bare(k): v for k, v in kept.items() if v})  # fmt: skip


def _is_zlib(two: bytes) -> bool:
    """A zlib stream header: deflate, a 32 KiB window or less, a valid check."""
    return len(two) == 2 and two[0] & 0x0F == 8 and two[0] >> 4 <= 7 and (
        (two[0] << 8 | two[1]) % 31 == 0)  # fmt: skip


def _check_regions(path: str, regions: list[tuple[str, int, int]], header: int,
                   size: int) -> dict[str, str]:  # fmt: skip
    """Truncation (the file ends inside a region) versus corruption (the map
    puts a region where it cannot be).  Darshan writes the regions back to
    back, so a consistent map whose last region passes the end is a cut copy.
    Returns the optional modules the end of the file cuts (-> why)."""
    for name, off, _ in regions:
        if off < header:
            raise InputError(path, f"corrupt: the header places the {name} at byte {off},"
                             f" inside the {header}-byte header")  # fmt: skip
    spans = sorted((off, off + length, name) for name, off, length in regions)
    if all(stop <= size for _, stop, _ in spans):  # not only the last: any length may be damaged
        return {}
    contiguous = all(a[1] == b[0] for a, b in pairwise(spans))
    if not contiguous:
        off, stop, name = next(x for x in spans if x[1] > size)
        raise InputError(path, f"corrupt: the header places the {name} at bytes {off}-{stop},"
                         f" beyond the end of the file ({size} bytes)")  # fmt: skip
    inside = next((n for o, e, n in spans if o <= size < e), spans[0][2])
    if size < spans[0][0]:
        inside = "job record"
    why = f"truncated: the file ends at byte {size} inside the {inside} (expects {spans[-1][1]})"
    cut = [n for _, e, n in spans if e > size]
    if all(n.removesuffix(" module") in OPTIONAL_MODULES for n in cut):
        return dict.fromkeys(cut, why.removeprefix("truncated: "))
    raise InputError(path, why, "copy the log again from where the job wrote it")


# Inflated regions read from the bytes (APMPI) are kept from the check below,
# up to this size, so they are not inflated twice.
KEEP_INFLATED = 64 << 20


def _verify_zlib(path: str, regions: list[tuple[str, int, int]],
                 keep: dict[str, bytes]) -> dict[str, str]:  # fmt: skip
    """Inflate every region; a damaged optional module is returned (-> why).
    Regions named in ``keep`` get their inflated bytes there, when small."""
    damaged: dict[str, str] = {}

    with open_log(path) as f:
        for name, off, length in regions:
            if length <= 0:
                continue
            f.seek(off)
            data = f.read(length)
            out: bytearray | None = bytearray() if name in keep else None
            try:
                # A region may hold several streams back to back; output is
                # dropped in 4 MiB pieces so memory stays bounded.
                while data:
                    d = zlib.decompressobj()
                    piece = d.decompress(data, 1 << 22)
                    while True:
                        if out is not None:
                            out += piece
                            out = out if len(out) <= KEEP_INFLATED else None
                        if not d.unconsumed_tail or d.eof:
                            break
                        piece = d.decompress(d.unconsumed_tail, 1 << 22)
                    if not d.eof:
                        raise zlib.error("the stream ends early")
                    data = d.unused_data
                if out is not None:
                    keep[name] = bytes(out)
            except zlib.error as e:
                if name.removesuffix(" module") in OPTIONAL_MODULES:
                    damaged[name] = f"it does not decompress: {e}"
                    continue
                raise InputError(
                    path,
                    f"corrupt: the {name} region does not decompress ({e})",
                    "copy the log again from where the job wrote it",
                ) from None
    return damaged


def _looks_like_text(head: bytes) -> bool:
    sample = head[:256]
    return bool(sample) and all(b in b"\t\n\r" or 32 <= b < 127 for b in sample)


class _CapturedStderr:
    """Collect what the C library prints on fd 2, so it never reaches the user raw."""

    def __enter__(self) -> _CapturedStderr:
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


# ----------------------------------------------------------------------------
# Reading


def read_darshan(path: str, *, with_records: bool = True) -> Trace:
    """Read a Darshan log into the model; raise InputError if it is damaged."""
    head = _check_header(path)
    version, skip = head.version, head.skip
    if head.compression == 2:
        trace = _read_in_child(path, version, with_records, skip)
    else:
        trace = _read_checked(path, version, with_records, skip)
    _add_profiles(trace, path, head)
    if head.partial and not any(m.partial for m in trace.modules):
        trace.warnings.append("the log header marks some data as partial")
    return trace


def _read_checked(path: str, version: str, with_records: bool, skip: dict[str, str],
                  open_as: str = "") -> Trace:  # fmt: skip
    if not open_as and os.path.isdir("/proc/self/fd"):
        # The library opens by name: through /proc it opens the regular file
        # this descriptor holds, never a FIFO put in its place since the checks.
        with open_log(path) as f:
            return _read_checked(path, version, with_records, skip, f"/proc/self/fd/{f.fileno()}")
    ffi, lib = _library()
    with _CapturedStderr() as err:
        handle = lib.darshan_log_open(os.fsencode(open_as or path))
    if handle == ffi.NULL:
        reason = err.text.splitlines()[-1] if err.text else "the Darshan library cannot open it"
        if open_as:  # the library names the file as it was given
            reason = reason.replace(open_as, path)
        raise InputError(path, f"damaged log: {reason.removeprefix('Error: ').rstrip('.')}")
    try:
        with _CapturedStderr() as err:
            trace = _read_open_log(ffi, lib, handle, path, version, with_records, skip)
        if err.text:
            trace.warnings.append(
                "the Darshan library reported problems while reading: "
                + "; ".join(line.removeprefix("Error: ") for line in err.text.splitlines()[:3])
            )
    finally:
        lib.darshan_log_close(handle)
    return trace


CHILD_SECONDS = 600  # a log the library reads for longer than this is taken as hung


def _read_in_child(path: str, version: str, with_records: bool, skip: dict[str, str]) -> Trace:
    """Read an uncompressed log in a forked child and receive the model.

    Its regions have no checksum, and the library aborts, crashes or corrupts
    its own memory on some damaged ones (a bad name-table length, a bad
    record count; even its close may then crash): the parent never touches
    such a log through the library, so a crash is an InputError here, never
    the end of the process.  Costs one fork and one pickle of the model;
    only for uncompressed logs (Darshan writes zlib by default).
    """
    out = run_in_child(_read_or_why, (path, version, with_records, skip), CHILD_SECONDS)
    if out.late:
        raise InputError(path, f"corrupt: the Darshan library did not finish reading it in"
                         f" {CHILD_SECONDS} s (uncompressed data, damaged)")  # fmt: skip
    if out.code < 0:
        raise InputError(path, f"corrupt: the Darshan library crashes on it with "
                         f"{signal_name(-out.code)} (uncompressed data, damaged)")  # fmt: skip
    if not out.ok:
        raise InputError(path, "corrupt: reading it ended without a result "
                         "(uncompressed data, damaged)")  # fmt: skip
    if out.value[0] == "error":
        raise InputError(path, out.value[1], out.value[2])
    return out.value[1]  # type: ignore[no-any-return]


def _read_or_why(path: str, version: str, with_records: bool,
                 skip: dict[str, str]) -> tuple[str, Any, str]:  # fmt: skip
    """In the child: ("ok", the model, "") or ("error", reason, hint)."""
    # Through /proc: a library whose memory a damaged log corrupted may take
    # the log for one it writes and unlink it on close.
    try:
        f = open_log(path)
        via = f"/proc/self/fd/{f.fileno()}" if os.path.isdir("/proc/self/fd") else ""
        return ("ok", _read_checked(path, version, with_records, skip, via), "")
    except InputError as e:
        return ("error", e.reason, e.hint)
    except Exception as e:
        return ("error", f"damaged log: {type(e).__name__}: {e}", "")


def _read_open_log(ffi: Any, lib: Any, handle: Any, path: str, version: str,
                   with_records: bool, skip: dict[str, str]) -> Trace:  # fmt: skip
    job = _read_job(ffi, lib, handle, version)
    names = _read_names(ffi, lib, handle)
    modules: list[ModuleInfo] = []
    counters: dict[str, Counters] = {}
    records: list[Records] = []
    warnings: list[str] = []
    lustre: Striping | None = None

    mods = ffi.new("struct darshan_mod_info **")
    cnt = ffi.new("int *")
    lib.darshan_log_get_modules(handle, mods, cnt)
    listed = [
        (_text(ffi, mods[0][i].name) or f"module {int(mods[0][i].idx)}", int(mods[0][i].idx),
         bool(mods[0][i].partial_flag))
        for i in range(cnt[0])
    ]  # fmt: skip
    lib.darshan_free(mods[0])

    for name, idx, partial in listed:
        info = ModuleInfo(name, partial=partial)
        modules.append(info)
        if name in skip:
            info.read, info.partial = False, True
            warnings.append(_left_out(name, skip[name]))
            continue
        try:
            if name in COUNTER_MODULES:
                layer, struct_name = COUNTER_MODULES[name]
                table = _read_counters(ffi, lib, handle, idx, layer, struct_name)
                warnings.extend(_clean_counters(table, names, job.nprocs))
                counters[layer] = table
                info.rows = len(table)
            elif name in DXT_MODULES and with_records:
                recs, hosts = _read_dxt(ffi, lib, handle, idx, DXT_MODULES[name])
                records.append(recs)
                job.hosts.update(hosts)
                info.rows = len(recs)
            elif name == "LUSTRE":
                lustre = _read_lustre(ffi, lib, handle, idx)
                info.rows = len(lustre)
            else:
                # not used by any analysis yet, or read from the bytes (_add_profiles)
                info.read = False
        except RegionError as e:
            info.partial = True
            warnings.append(f"{name} data is damaged and was read only in part ({e})")
            continue
        if info.partial and name not in ("HEATMAP",):
            warnings.append(
                f"{name} is partial: the Darshan runtime ran out of memory for its records, "
                "so figures that depend on it are lower bounds"
            )
    trace = Trace(
        source=path,
        job=job,
        names=names,
        counters=counters,
        records=Records.concat(records),
        lustre=lustre,
        modules=modules,
        warnings=warnings,
    )
    _cross_check_dxt(trace)
    return trace


def _left_out(module: str, why: str) -> str:
    """The warning for an optional module whose region is damaged."""
    what = "per-operation records" if module in DXT_MODULES else "data"
    return f"the {module} region is damaged ({why}): its {what} are left out; " \
        "the counters are complete"  # fmt: skip


# Modules read from the log's bytes (see :mod:`.darshan_profiles`), with the
# record format version this reader knows.
RAW_MODULES = {"HEATMAP": HEATMAP_VERSION, "APMPI": APMPI_VERSION}


def _add_profiles(trace: Trace, path: str, head: LogHeader) -> None:
    """Read HEATMAP and APMPI; a damaged one is a warning and is left out."""
    for name, version in RAW_MODULES.items():
        info = next((m for m in trace.modules if m.name == name), None)
        if info is None or name in head.skip or name not in head.regions:
            continue
        try:
            ver = head.module_versions.get(name, 0)
            if ver != version:
                raise RegionError(f"record format version {ver}, this reader knows {version}")
            nprocs = trace.job.nprocs
            if name == "HEATMAP":
                raw = _region_bytes(path, head, name, heatmap_limit(nprocs))
                heatmaps, more = read_heatmaps(raw, trace.names, nprocs, head.big_endian)
                trace.heatmaps = heatmaps or None
                trace.warnings.extend(more)
                info.rows = sum(len(h) for h in heatmaps.values())
            else:
                names = {k: _counter_names(f"apmpi{t}") for k, t in APMPI_TABLES.items()}
                header_t, perf_t = apmpi_dtypes(names, head.big_endian)
                limit = header_t.itemsize + max(nprocs, 1) * perf_t.itemsize
                trace.mpi = read_apmpi(_region_bytes(path, head, name, limit), names,
                                       head.big_endian, nprocs)  # fmt: skip
                info.rows = len(trace.mpi)
        except (RegionError, zlib.error) as e:
            info.read, info.partial = False, True
            trace.warnings.append(_left_out(name, str(e)))
            continue
        except (AttributeError, OSError) as e:  # no APMPI names in this library; file gone
            info.read = False
            trace.warnings.append(f"{name} was not read: {e}")
            continue
        info.read = True


def _region_bytes(path: str, head: LogHeader, name: str, limit: int) -> bytes:
    """A module region's records: inflated by the header checks, or read now."""
    if name in head.inflated:
        raw = head.inflated[name]
        if len(raw) > limit:
            raise RegionError(f"it inflates to more than the {limit:,} bytes it can hold")
        return raw
    off, length = head.regions[name]
    with open_log(path) as f:
        f.seek(off)
        raw = f.read(length)
    return inflate(raw, limit) if head.compression == 0 else raw


def _read_job(ffi: Any, lib: Any, handle: Any, version: str) -> Job:
    jobrec = ffi.new("struct darshan_job *")
    lib.darshan_log_get_job(handle, jobrec)
    runtime = ffi.new("double *")
    lib.darshan_log_get_job_runtime(handle, jobrec[0], runtime)
    meta: dict[str, str] = {}
    for line in _text(ffi, jobrec[0].metadata).split("\n"):
        if "=" in line:
            k, v = line.split("=", 1)
            meta[k] = v
    exe = ffi.new("char[]", 4096)
    lib.darshan_log_get_exe(handle, exe)
    mnts = ffi.new("struct darshan_mnt_info **")
    n = ffi.new("int *")
    lib.darshan_log_get_mounts(handle, mnts, n)
    mounts = [(_text(ffi, mnts[0][i].mnt_path), _text(ffi, mnts[0][i].mnt_type))
              for i in range(n[0])]  # fmt: skip
    if n[0]:
        lib.darshan_free(mnts[0])
    j = jobrec[0]
    return Job(
        nprocs=int(j.nprocs),
        jobid=int(j.jobid),
        uid=int(j.uid),
        start=j.start_time_sec + j.start_time_nsec * 1e-9,
        end=j.end_time_sec + j.end_time_nsec * 1e-9,
        runtime=float(runtime[0]),
        executable=_text(ffi, exe),
        # the log names the command line only: Python or unknown
        language=command_language(_text(ffi, exe)),
        metadata=meta,
        # ``h=`` holds the hints Darshan used to write this log file
        # (DARSHAN_LOGHINTS), not the application's: it stays in metadata only.
        hints=None,
        mounts=mounts,
        format=f"darshan {version}",
        writer=f"darshan-runtime {meta['lib_ver']}" if "lib_ver" in meta else "",
    )


def _text(ffi: Any, ptr: Any) -> str:
    """A C string from the log; damaged bytes become U+FFFD, NULL becomes ""."""
    if ptr == ffi.NULL:
        return ""
    return ffi.string(ptr).decode("utf-8", "replace")


def parse_hints(raw: str | None) -> dict[str, str] | None:
    """MPI-IO hints written as ``k=v;k=v`` (Darshan's ``h=`` field).

    Logs written without hints say ``no`` or nothing at all: that is
    "unknown", never an error.
    """
    if not raw or raw.strip().lower() in ("no", "none"):
        return None
    hints: dict[str, str] = {}
    for item in raw.split(";"):
        if "=" in item:
            k, v = item.split("=", 1)
            hints[k.strip()] = v.strip()
    return hints or None


def _read_names(ffi: Any, lib: Any, handle: Any) -> dict[int, str]:
    nrecs = ffi.new("struct darshan_name_record **")
    cnt = ffi.new("int *")
    lib.darshan_log_get_name_records(handle, nrecs, cnt)
    names = {}
    for i in range(cnt[0]):
        names[int(nrecs[0][i].id)] = _text(ffi, nrecs[0][i].name)
        lib.darshan_free(nrecs[0][i].name)
    if cnt[0]:
        lib.darshan_free(nrecs[0])
    return names


def _records(ffi: Any, lib: Any, handle: Any, idx: int):
    """Yield the raw record buffers of one module, freeing each after use."""
    buf = ffi.new("void **")
    while True:
        r = lib.darshan_log_get_record(handle, idx, buf)
        if r == 0:
            return
        if r < 0:
            raise RegionError("the library could not decode a record")
        try:
            yield buf[0]
        finally:
            # The library fills *buf only when it is NULL: never hand it a freed pointer.
            lib.darshan_free(buf[0])
            buf[0] = ffi.NULL


def _read_counters(ffi: Any, lib: Any, handle: Any, idx: int, layer: str,
                   struct_name: str) -> Counters:  # fmt: skip
    prefix = MODULE[layer].darshan_table
    int_names, float_names = _counter_names(prefix), _counter_names(prefix + "_f")
    ctype = f"struct {struct_name} *"
    size = ffi.sizeof(f"struct {struct_name}")
    has_parent = MODULE[layer].parent
    dtype = np.dtype(
        [("id", "<u8"), ("rank", "<i8")]
        + ([("parent", "<u8")] if has_parent else [])
        + [("ints", "<i8", (len(int_names),)), ("floats", "<f8", (len(float_names),))]
    )
    # Check our view of the C layout once, so a library upgrade fails loudly.
    probe = ffi.new(ctype)
    if ffi.offsetof(f"struct {struct_name}", "fcounters") != dtype.fields["floats"][1]:
        raise RuntimeError(f"unexpected layout of struct {struct_name}")
    del probe
    raw = bytearray()
    for rec in _records(ffi, lib, handle, idx):
        raw += ffi.buffer(rec, size)[: dtype.itemsize]
    arr = np.frombuffer(bytes(raw), dtype=dtype) if raw else np.zeros(0, dtype)
    return Counters(
        layer=layer,
        file_id=arr["id"].copy(),
        rank=arr["rank"].copy(),
        ints=arr["ints"].reshape(len(arr), len(int_names)).copy(),
        floats=arr["floats"].reshape(len(arr), len(float_names)).copy(),
        int_names=int_names,
        float_names=float_names,
        parent_id=arr["parent"].copy() if has_parent else None,
    )


# Integer counters that hold record ids (hashes), where any sign is valid.
_ID_COUNTERS = ("_RENAMED_FROM",)
_TINY = np.finfo(np.float64).tiny


def _clean_counters(table: Counters, names: dict[int, str], nprocs: int) -> list[str]:
    """Bad counter values -> one warning per counter; the values become 0.

    Darshan writes -1 where a counter is not monitored or did not exist in
    the log's format (MMAPS, DUPS, FDOPENS ... and -N in records reduced over
    N ranks; timestamps of old formats): those stay as they are, "unknown",
    never an error.  Other negative integers, and negative, infinite, NaN or
    denormal times (seen in real logs: clock steps, uninitialised memory) are
    set to 0 so checks sum only what was measured.
    """
    out: list[str] = []
    n = len(table)
    if not n:
        return out
    ints_ok = [not name.endswith(_ID_COUNTERS) for name in table.int_names]
    ints = table.ints[:, ints_ok]
    # -1 per rank the record covers: down to -nprocs in a record shared by
    # all ranks (rank -1), which sums the ranks' -1.
    floor = np.where(table.rank < 0, -max(nprocs, 1), -1)[:, None]
    bad_i = ints < floor
    f = table.floats
    with np.errstate(invalid="ignore"):
        bad_f = ~np.isfinite(f) | ((f < 0) & (f != -1)) | ((f != 0) & (np.abs(f) < _TINY))
    cols = np.flatnonzero(ints_ok)
    for kind, bad, values, col_names in (
        ("int", bad_i, ints, [table.int_names[c] for c in cols]),
        ("float", bad_f, f, table.float_names),
    ):
        if not bad.any():
            continue
        for j in np.flatnonzero(bad.any(axis=0)):
            rows = np.flatnonzero(bad[:, j])
            r = rows[0]
            what = f"{values[r, j]:.6g}" if kind == "float" else str(int(values[r, j]))
            path = names.get(int(table.file_id[r]), f"<file {int(table.file_id[r]):#x}>")
            more = f" and {len(rows) - 1} more record(s)" if len(rows) > 1 else ""
            out.append(f"{col_names[j]} has an impossible value ({what} in the record of "
                       f"{path}, rank {int(table.rank[r])}{more}): set to 0, the checks "
                       "ignore it")  # fmt: skip
            if kind == "int":
                table.ints[rows, cols[j]] = 0
            else:
                table.floats[rows, j] = 0.0
    return out


_SEGMENT = np.dtype([("offset", "<i8"), ("length", "<i8"), ("start", "<f8"), ("end", "<f8")])


def _read_dxt(ffi: Any, lib: Any, handle: Any, idx: int,
              layer: str) -> tuple[Records, dict[int, str]]:  # fmt: skip
    head_size = ffi.sizeof("struct dxt_file_record")
    seg_bytes = bytearray()
    ids: list[int] = []
    ranks: list[int] = []
    writes: list[int] = []
    reads: list[int] = []
    hosts: dict[int, str] = {}
    for rec in _records(ffi, lib, handle, idx):
        head = ffi.cast("struct dxt_file_record *", rec)
        w, r = int(head.write_count), int(head.read_count)
        rank = int(head.base_rec.rank)
        if w < 0 or r < 0 or not -1 <= rank < 2**31:
            # the rest of the region is no better: keep the counters, drop DXT
            raise RegionError(f"a record has rank {rank}, {w} writes and {r} reads")
        ids.append(int(head.base_rec.id))
        ranks.append(rank)
        writes.append(w)
        reads.append(r)
        if rank not in hosts:
            hosts[rank] = ffi.string(head.hostname).decode("utf-8", "replace")
        if w + r:
            seg_bytes += ffi.buffer(ffi.cast("char *", rec) + head_size, 32 * (w + r))
    seg = np.frombuffer(bytes(seg_bytes), dtype=_SEGMENT)
    per_block = np.asarray(writes, np.int64) + np.asarray(reads, np.int64)
    # Within a block the writes come first, then the reads.
    op = np.full(len(seg), OP_READ, np.uint8)
    starts = np.concatenate([[0], np.cumsum(per_block)[:-1]]) if len(per_block) else per_block
    if len(seg):
        is_write = np.zeros(len(seg) + 1, np.int64)
        np.add.at(is_write, starts, 1)
        np.add.at(is_write, starts + np.asarray(writes, np.int64), -1)
        op[np.cumsum(is_write[:-1]) > 0] = OP_WRITE
    recs = Records(
        rank=np.repeat(np.asarray(ranks, np.int32), per_block),
        layer=np.full(len(seg), RECORD_LAYERS.index(layer), np.uint8),
        op=op,
        file_id=np.repeat(np.asarray(ids, np.uint64), per_block),
        offset=seg["offset"].copy(),
        length=seg["length"].copy(),
        start=seg["start"].copy(),
        end=seg["end"].copy(),
    )
    return recs, hosts


def _read_lustre(ffi: Any, lib: Any, handle: Any, idx: int) -> Striping:
    comp_names = _counter_names("lustre_comp")
    i_size, i_count = comp_names.index("LUSTRE_COMP_STRIPE_SIZE"), comp_names.index(
        "LUSTRE_COMP_STRIPE_COUNT"
    )
    ids, sizes, counts, starts, osts = [], [], [], [], []
    seen: set[int] = set()
    for rec in _records(ffi, lib, handle, idx):
        lr = ffi.cast("struct darshan_lustre_record *", rec)
        # Each rank that opened a file writes its own record of the file's one
        # layout: keep one row per file, so files are counted once.
        if lr.num_comps < 1 or int(lr.base_rec.id) in seen:
            continue
        seen.add(int(lr.base_rec.id))
        # The first component describes the start of the file, where HPC
        # applications' layouts (single-component) live.
        comp = lr.comps[0]
        count = int(comp.counters[i_count])
        ids.append(int(lr.base_rec.id))
        sizes.append(int(comp.counters[i_size]))
        counts.append(count)
        starts.append(len(osts))
        osts.extend(int(lr.ost_ids[k]) for k in range(min(count, int(lr.num_stripes))))
    return Striping(
        file_id=np.asarray(ids, np.uint64),
        stripe_size=np.asarray(sizes, np.int64),
        stripe_count=np.asarray(counts, np.int64),
        ost_start=np.asarray(starts, np.int64),
        ost_ids=np.asarray(osts, np.int64),
    )


def _cross_check_dxt(trace: Trace) -> None:
    """Warn when the trace holds fewer operations than the counters say happened."""
    for log_name, layer in DXT_MODULES.items():
        mod = next((m for m in trace.modules if m.name == log_name), None)
        counters = trace.counters.get(layer)
        if mod is None or counters is None or not mod.read:
            continue
        m = MODULE[layer]
        expected = sum(counters.total(n) for d in DIRECTIONS for n in m.op_counters(d))
        got = int(np.count_nonzero(trace.records.layer == RECORD_LAYERS.index(layer)))
        if got < expected:
            trace.warnings.append(
                f"{log_name} holds {got:,} of the {expected:,} {display(layer)} operations"
                f" the counters report ({100 * got / expected:.1f} %): "
                "per-operation views and checks see only part of the run"
            )


register(Source("Darshan log", lambda p: p.suffix == ".darshan" and not p.is_dir(), read_darshan,
                fallback=True))  # fmt: skip
