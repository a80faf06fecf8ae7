"""Reading files a traced program could have tampered with: regular files
only (never a FIFO, device or link), within a size limit, and JSON fields
checked for type and range, so that damage is an :class:`InputError` naming
the file and the reason, never a hang or a traceback."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .. import userfiles
from ..errors import InputError
from ..model.trace import safe_name

INT64 = (-(2**63), 2**63 - 1)

# ---------------------------------------------------------------------------
# Opening files safely
# ---------------------------------------------------------------------------


def where(p: str | Path) -> str:
    return safe_name(str(p))


def open_regular(p: str | Path, limit: int | None, *,
                 follow_links: bool = False) -> tuple[int, int]:  # fmt: skip
    """A descriptor on ``p`` and its size, if it is a regular file within
    ``limit`` bytes; never waits on a FIFO, and follows a link only with
    ``follow_links`` (then the file it names must be regular)."""
    hint = "more records than the record limit; set IOPILOT_MAX_RECORDS to read it" if (
        Path(p).suffix == ".rec") else ""  # fmt: skip
    return userfiles.open_regular(p, limit, follow_links=follow_links, name=where(p), hint=hint)


def read_bytes(p: Path, limit: int) -> bytes:
    fd, size = open_regular(p, limit)
    return userfiles.read_opened(fd, size, limit, where(p))


def load_json(p: Path, limit: int, what: str) -> dict[str, Any]:
    """A JSON object; bytes that are not UTF-8 become surrogate escapes."""
    text = read_bytes(p, limit).decode("utf-8", "surrogateescape")
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise InputError(where(p), f"damaged {what} ({e})") from None
    if not isinstance(obj, dict):
        raise InputError(where(p), f"damaged {what} (not a JSON object)")
    return obj


# ---------------------------------------------------------------------------
# Checked fields
# ---------------------------------------------------------------------------

REQUIRED = object()


def json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    return {int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(v), type(v).__name__)  # fmt: skip


def is_int64(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and INT64[0] <= v <= INT64[1]


def is_number(v: Any) -> bool:
    return (is_int64(v) or isinstance(v, float)) and math.isfinite(v)


# kind -> (test, what the value should be)
KINDS = {
    "int": (is_int64, "an integer"),
    "count": (lambda v: is_int64(v) and v >= 0, "a non-negative integer"),
    "int?": (lambda v: v is None or is_int64(v), "an integer or null"),
    "number": (is_number, "a finite number"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "strs": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
             "an array of strings"),
    "dict": (lambda v: isinstance(v, dict), "an object"),
    "list": (lambda v: isinstance(v, list), "an array"),
    "strmap": (lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
               "an object of strings"),
    "counts": (lambda v: isinstance(v, dict) and all(is_int64(x) and x >= 0 for x in v.values()),
               "an object of non-negative integers"),
    "mounts": (lambda v: isinstance(v, list) and all(
        isinstance(x, list) and len(x) == 2 and all(isinstance(y, str) for y in x) for x in v),
        "an array of [mount point, type]"),
}  # fmt: skip


class Fields:
    """Typed access to one JSON object: a missing or wrong field is an
    InputError naming the file and the field."""

    def __init__(self, obj: dict[str, Any], path: Path, what: str) -> None:
        self.obj, self.path, self.what = obj, path, what

    def bad(self, why: str) -> InputError:
        return InputError(where(self.path), f"damaged {self.what}: {why}")

    def get(self, key: str, kind: str, default: Any = REQUIRED) -> Any:
        if key not in self.obj or (self.obj[key] is None and default is not REQUIRED):
            if default is REQUIRED:
                raise self.bad(f"{key!r} is missing")
            return default
        v = self.obj[key]
        test, what = KINDS[kind]
        if not test(v):
            raise self.bad(f"{key!r} should be {what}, not {json_type(v)}")
        return v


def clock_samples(value: Any) -> list[tuple[float, float, float]] | None:
    """A process summary's ``clock`` samples; None when they are not a list of
    [time, offset, uncertainty] of finite numbers with uncertainty >= 0."""
    ok = isinstance(value, list) and all(
        isinstance(s, list) and len(s) == 3
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                for x in s) and s[2] >= 0
        for s in value)  # fmt: skip
    return [(float(a), float(b), float(c)) for a, b, c in value] if ok else None


def parse_file_id(v: Any) -> int | None:
    if isinstance(v, str) and v.isascii() and v.isdigit():
        v = int(v)
    ok = isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**64
    return v if ok else None
