"""The checks of a Darshan log's bytes before the library sees them.

The library reports every problem as "failed to open" and returns partial
data from truncated files without a word: here the fixed header, the region
map and (zlib logs) every compressed region are checked, so a damaged log
is an InputError with the real reason, and a damaged optional module is
left out with a warning.
"""

from __future__ import annotations

import os
import struct
import zlib
from itertools import pairwise
from pathlib import Path
from typing import BinaryIO

from .._record import record
from ..errors import InputError
from ..vocabulary import MODULES
from .checked import open_regular

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


def check_header(path: str) -> LogHeader:
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


def left_out(module: str, why: str) -> str:
    """The warning for an optional module whose region is damaged."""
    what = "per-operation records" if module in DXT_MODULES else "data"
    return f"the {module} region is damaged ({why}): its {what} are left out; " \
        "the counters are complete"  # fmt: skip
