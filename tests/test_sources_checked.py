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
