"""Darshan logs made from real ones for damage tests: uncompressed copies
(no checksum, so the library sees damaged bytes) and added module regions."""

from __future__ import annotations

import struct
import zlib

import numpy as np

# Fixed header sizes and where the region map starts, by format.
_LAYOUT = {True: (1328, 32, 64), False: (360, 24, 16)}  # 3.41 or older
MOD_VER_AT = 1072  # 3.41: uint32 version of each module after the map


def _inflate_all(data: bytes) -> bytes:
    out = b""
    while data:
        d = zlib.decompressobj()
        out += d.decompress(data)
        data = d.unused_data
    return out


def layout(data: bytes) -> tuple[int, int, int]:
    """(header bytes, offset of the map, module slots) of a little-endian log."""
    return _LAYOUT[data[:4] == b"3.41"]


def regions(data: bytes) -> list[tuple[int, int]]:
    """(offset, length) of the name table and each module slot."""
    _, first, n = layout(data)
    return [struct.unpack_from("<QQ", data, first + 16 * i) for i in range(n + 1)]


def uncompressed(data: bytes) -> bytes:
    """The same log with compression type 2 (none): every region inflated."""
    hdr, first, _ = layout(data)
    maps = regions(data)
    start = min(o for o, n in maps if n)
    body = _inflate_all(data[hdr:start])
    new = []
    for off, n in maps:
        raw = _inflate_all(data[off:off + n]) if n else b""
        new.append((hdr + len(body), len(raw)) if n else (0, 0))
        body += raw
    head = bytearray(data[:hdr])
    head[16] = 2
    for i, (off, n) in enumerate(new):
        struct.pack_into("<QQ", head, first + 16 * i, off, n)
    return bytes(head) + body


def with_module(data: bytes, slot: int, version: int, records: bytes) -> bytes:
    """An uncompressed 3.41 log with ``records`` as module ``slot``'s region."""
    _, first, _ = layout(data)
    out = bytearray(data)
    struct.pack_into("<QQ", out, first + 16 * (slot + 1), len(data), len(records))
    struct.pack_into("<I", out, MOD_VER_AT + 4 * slot, version)
    return bytes(out) + records


def record(file_id: int, rank: int, ints: dict[int, int], n_ints: int, n_floats: int,
           tail: int) -> bytes:  # fmt: skip
    """One counter record: base record, int64 counters, doubles, ``tail`` zero bytes."""
    c = np.zeros(n_ints, np.int64)
    for i, v in ints.items():
        c[i] = v
    return (struct.pack("<Qq", file_id, rank) + c.tobytes() + np.zeros(n_floats).tobytes()
            + bytes(tail))  # fmt: skip
