"""The Darshan header check on hand-made headers: each way a file can fail
to be a readable log gets its own one-line reason; a good header gives its
format version, partial flag and compression type."""

from __future__ import annotations

import gzip
import struct

import pytest

from iopilot.errors import InputError
from iopilot.sources.darshan_header import MAGIC, check_header


def _header(version: bytes = b"3.41", comp: int = 2, partial: int = 0, end: str = "<",
            size: int | None = None) -> bytes:  # fmt: skip
    """A header with no regions: version, magic, compression, partial flag."""
    v341 = version >= b"3.41"
    head = bytearray(size if size is not None else (1328 if v341 else 360))
    head[:8] = version.ljust(8, b"\0")
    struct.pack_into(end + "q", head, 8, MAGIC)
    head[16] = comp
    if v341:
        struct.pack_into(end + "Q", head, 24, partial)
    else:
        struct.pack_into(end + "I", head, 20, partial)
    return bytes(head)


def _fails(tmp_path, data: bytes) -> InputError:
    p = tmp_path / "x.darshan"
    p.write_bytes(data)
    with pytest.raises(InputError) as e:
        check_header(str(p))
    assert e.value.path == str(p)
    return e.value


def _summary(p) -> tuple:
    h = check_header(str(p))
    return h.version, h.partial, h.compression, h.skip


def test_good_headers_give_version_partial_flag_and_compression(tmp_path):
    p = tmp_path / "ok.darshan"
    p.write_bytes(_header(b"3.41"))
    assert _summary(p) == ("3.41", False, 2, {})
    assert not check_header(str(p)).big_endian
    # 3.41 keeps the flag in 8 bytes at 24: its lowest and a high byte count
    p.write_bytes(_header(b"3.41", partial=1))
    assert check_header(str(p)).partial is True
    p.write_bytes(_header(b"3.41", partial=1 << 32))
    assert check_header(str(p)).partial is True
    # older formats keep it in 4 bytes at 20
    p.write_bytes(_header(b"3.21", partial=1))
    assert _summary(p) == ("3.21", True, 2, {})
    p.write_bytes(_header(b"3.21"))
    assert _summary(p) == ("3.21", False, 2, {})
    # a big-endian log is read too, its region map in the same order: a name
    # table of 16 bytes right after the header
    head = bytearray(_header(b"3.41", end=">", partial=1))
    struct.pack_into(">QQ", head, 32, 1328, 16)
    p.write_bytes(bytes(head) + bytes(16))
    assert _summary(p) == ("3.41", True, 2, {})
    assert check_header(str(p)).big_endian


def test_module_regions_and_versions_come_from_the_map(tmp_path):
    # 3.41: slot 15 (HEATMAP) at 32 + 16 * 16, its version at 1072 + 4 * 15
    head = bytearray(_header(b"3.41"))
    struct.pack_into("<QQ", head, 32 + 16 * 16, 1328, 8)
    struct.pack_into("<I", head, 1072 + 4 * 15, 7)
    p = tmp_path / "m.darshan"
    p.write_bytes(bytes(head) + bytes(8))
    h = check_header(str(p))
    assert h.regions == {"HEATMAP": (1328, 8)} and h.module_versions == {"HEATMAP": 7}
    # 3.21: 16 slots, APMPI is slot 13 there, versions after the map at 296
    head = bytearray(_header(b"3.21"))
    struct.pack_into("<QQ", head, 24 + 16 * 14, 360, 8)
    struct.pack_into("<I", head, 296 + 4 * 13, 1)
    p.write_bytes(bytes(head) + bytes(8))
    h = check_header(str(p))
    assert h.regions == {"APMPI": (360, 8)} and h.module_versions == {"APMPI": 1}


def test_missing_directory_and_empty(tmp_path):
    with pytest.raises(InputError) as e:
        check_header(str(tmp_path / "none"))
    assert e.value.reason == "no such file" and e.value.path == str(tmp_path / "none")
    with pytest.raises(InputError) as e:
        check_header(str(tmp_path))
    assert e.value.reason == "is a directory, not a Darshan log"
    assert _fails(tmp_path, b"").reason == "empty file (0 bytes), not a Darshan log"


def test_compressed_files(tmp_path):
    e = _fails(tmp_path, b"BZh91AY&SY" + bytes(100))
    assert (e.reason, e.hint) == ("bzip2-compressed file, not a Darshan log", "bunzip2 it first")
    e = _fails(tmp_path, gzip.compress(bytes(range(256)) * 4))
    assert (e.reason, e.hint) == ("gzip-compressed file, not a Darshan log", "gunzip it first")
    # Darshan 2 logs are gzip files whose first bytes are the version
    e = _fails(tmp_path, gzip.compress(b"2.06\0\0\0\0" + bytes(range(256)) * 4))
    assert e.reason == "Darshan 2.x log (format 2.06), which Darshan 3 tools cannot read"
    assert e.hint == "read it with darshan-util 2.x"


def test_darshan2_version_uncompressed(tmp_path):
    e = _fails(tmp_path, b"2.05\0\0\0\0" + bytes(range(256)) * 2)
    assert e.reason == "Darshan 2.x log (format 2.05), which Darshan 3 tools cannot read"
    assert e.hint == "read it with darshan-util 2.x"


def test_text_files(tmp_path):
    e = _fails(tmp_path, b"# darshan log version: 3.41\n# exe: ./a.out\n" * 10)
    assert e.reason == "darshan-parser text output, not a binary Darshan log"
    e = _fails(tmp_path, b"hello, this is a plain text file\n" * 10)
    assert e.reason == "a text file, not a binary Darshan log"


def test_short_files_and_bad_magic(tmp_path):
    # 23 bytes: too short for version, magic and compression
    e = _fails(tmp_path, b"3.41\0\0\0\0" + bytes([0xFF] * 15))
    assert e.reason == "truncated: 23 bytes, too short for a Darshan header"
    # 24 bytes are enough to tell the magic number is wrong
    e = _fails(tmp_path, b"3.41\0\0\0\0" + bytes([0xFF] * 16))
    assert e.reason == "not a Darshan log (bad magic number)"


def test_header_cut_short(tmp_path):
    e = _fails(tmp_path, _header(b"3.41", size=1327))
    assert e.reason == "truncated: the file ends inside the header (1327 of 1328 bytes)"
    assert e.hint == "copy the log again from where the job wrote it"
    e = _fails(tmp_path, _header(b"3.21", size=359))
    assert e.reason == "truncated: the file ends inside the header (359 of 360 bytes)"


def test_unknown_version_and_compression(tmp_path):
    e = _fails(tmp_path, _header(b"3.99"))
    assert e.reason == "unsupported Darshan log format '3.99' (this reader knows 3.00-3.41)"
    # the version is the first 8 bytes at most
    e = _fails(tmp_path, _header(b"3.999999"))
    assert e.reason.startswith("unsupported Darshan log format '3.999999' ")
    e = _fails(tmp_path, _header(b"3.41", comp=1))
    assert e.reason == "log is bzip2-compressed, which PyDarshan's library cannot decompress"
    assert e.hint == "re-compress it with zlib: darshan-convert IN OUT"
    e = _fails(tmp_path, _header(b"3.41", comp=3))
    assert e.reason == "corrupt: unknown compression type 3 in the header"
