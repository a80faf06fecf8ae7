"""Small parts of the Darshan reader: what a zlib stream header looks like,
and MPI-IO hints written as ``k=v;k=v``."""

from __future__ import annotations

import zlib

import pytest

from iopilot.sources.darshan_columns import parse_hints
from iopilot.sources.darshan_header import _is_zlib


@pytest.mark.parametrize("level", [0, 1, 6, 9])
@pytest.mark.parametrize("wbits", [9, 12, 15])
def test_real_zlib_headers(level, wbits):
    c = zlib.compressobj(level, zlib.DEFLATED, wbits)
    head = (c.compress(b"darshan") + c.flush())[:2]
    assert _is_zlib(head)


@pytest.mark.parametrize("two", [
    b"\x79\x18",  # check bits fine, but not deflate (method 9)
    b"\x88\x1c",  # deflate with a 64 KiB window: not zlib
    b"\x78\x00",  # deflate, 32 KiB, but the check fails
    b"\x78",      # too short
    b"\x78\x01\x00",  # too long
])  # fmt: skip
def test_not_zlib_headers(two):
    assert not _is_zlib(two)


def test_hints():
    assert parse_hints("cb_nodes=4; romio_cb_write = enable ;junk") == {
        "cb_nodes": "4", "romio_cb_write": "enable"}
    assert parse_hints("a=b=c") == {"a": "b=c"}
    for none in (None, "", "no", " NO ", "None", "junk;more"):
        assert parse_hints(none) is None
