"""Checked JSON fields of trace files: every kind accepts what it should and
names what it got otherwise, at the edges of the 64-bit range."""

from __future__ import annotations

from pathlib import Path

import pytest

from iopilot.errors import InputError
from iopilot.sources.checked import Fields, is_int64, is_number, json_type, parse_file_id

I64 = 2**63


@pytest.mark.parametrize(("v", "name"), [
    (None, "null"), (True, "a boolean"), (False, "a boolean"), (3, "an integer"),
    (3.5, "a number"), ("x", "a string"), ([1], "an array"), ({}, "an object"),
    ((1,), "tuple"),
])  # fmt: skip
def test_json_type_names(v, name):
    assert json_type(v) == name


def test_int64_edges():
    assert is_int64(I64 - 1) and is_int64(-I64)
    assert not is_int64(I64) and not is_int64(-I64 - 1)
    assert not is_int64(True) and not is_int64(1.0)
    assert is_number(1.5) and is_number(-I64) and not is_number(float("inf"))
    assert not is_number(float("nan")) and not is_number("1")


def test_file_ids_edges():
    assert parse_file_id("18446744073709551615") == 2**64 - 1
    assert parse_file_id(2**64) is None and parse_file_id(-1) is None
    assert parse_file_id(0) == 0 and parse_file_id("0") == 0
    assert parse_file_id(True) is None and parse_file_id("1e3") is None
    assert parse_file_id("１２") is None  # digits, but not ASCII ones


def _f(obj):
    return Fields(obj, Path("/t/job.json"), "job file")


@pytest.mark.parametrize(("kind", "good", "bad", "what"), [
    ("int", -5, 1.0, "an integer, not a number"),
    ("count", 0, -1, "a non-negative integer, not an integer"),
    ("int?", None, "1", "an integer or null, not a string"),
    ("number", 2, float("inf"), "a finite number, not a number"),
    ("str", "", 1, "a string, not an integer"),
    ("strs", ["a"], ["a", 1], "an array of strings, not an array"),
    ("dict", {}, [], "an object, not an array"),
    ("list", [], {}, "an array, not an object"),
    ("counts", {"a": 0}, {"a": -1}, "an object of non-negative integers, not an object"),
    ("mounts", [["/", "ext4"]], [["/"]], "an array of [mount point, type], not an array"),
])  # fmt: skip
def test_each_kind_accepts_and_names_what_it_got(kind, good, bad, what):
    assert _f({"k": good}).get("k", kind) == good
    with pytest.raises(InputError) as e:
        _f({"k": bad}).get("k", kind)
    assert str(e.value).endswith(f"damaged job file: 'k' should be {what}")
    assert e.value.path == "/t/job.json"


def test_missing_and_null_fields():
    with pytest.raises(InputError, match="'k' is missing"):
        _f({}).get("k", "int")
    assert _f({}).get("k", "int", 7) == 7
    assert _f({"k": None}).get("k", "int", 7) == 7  # null with a default: the default
    with pytest.raises(InputError, match="should be an integer, not null"):
        _f({"k": None}).get("k", "int")


def test_read_bytes_at_the_size_limit_and_one_past(tmp_path):
    from iopilot.sources.checked import read_bytes

    p = tmp_path / "a.json"
    for n in (0, 1, 5, 70_000):  # 70,000 spans several reads
        p.write_bytes(bytes(range(256)) * (n // 256) + b"x" * (n % 256))
        assert read_bytes(p, n) == p.read_bytes()
        assert read_bytes(p, n + 1) == p.read_bytes()
        if n:
            with pytest.raises(InputError, match=f"too large: {n:,} bytes, limit {n - 1:,}$"):
                read_bytes(p, n - 1)


def test_a_file_that_grows_past_the_limit_while_read_is_too_large(tmp_path):
    # The size seen at open is within the limit; more bytes arrive before the
    # read (a job still writing): the read stops one byte past the limit.
    import os

    from iopilot.sources import checked

    p = tmp_path / "grow.json"
    p.write_bytes(b"12345")
    real_open = checked.open_regular

    def open_then_grow(path, limit):
        fd, size = real_open(path, limit)
        with open(path, "ab") as f:
            f.write(b"6789")
        return fd, size

    checked.open_regular = open_then_grow
    try:
        with pytest.raises(InputError, match="too large: more than 7 bytes, limit 7"):
            checked.read_bytes(p, 7)
        p.write_bytes(b"12345")
        assert checked.read_bytes(p, 9) == b"123456789"  # grew, still within the limit
    finally:
        checked.open_regular = real_open
    assert os.path.getsize(p) == 9


def test_a_record_file_past_its_limit_says_which_variable_lifts_it(tmp_path):
    from iopilot.sources.checked import open_regular

    rec, other = tmp_path / "p.rec", tmp_path / "p.names"
    for f in (rec, other):
        f.write_bytes(b"x" * 10)
    with pytest.raises(InputError) as e:
        open_regular(rec, 9)
    assert e.value.hint == "more records than the record limit; set IOPILOT_MAX_RECORDS to read it"
    with pytest.raises(InputError) as e:
        open_regular(other, 9)
    assert not e.value.hint
    fd, size = open_regular(rec, 10)
    assert size == 10
    import os

    os.close(fd)
