"""Thresholds from defaults, a TOML file and --set (checks/thresholds.py), and
the per-diagnosis cache and context the checks share (checks/base.py)."""

from __future__ import annotations

import numpy as np
import pytest

from iopilot.checks import thresholds
from iopilot.checks.base import AnalysisCache
from iopilot.errors import InputError


def test_overrides_are_typed_like_their_defaults():
    v = thresholds.load(None, ["reopen_count = 3", "shared_imbalance=1", "max_files_listed=2.5"])
    assert v["reopen_count"] == 3 and type(v["reopen_count"]) is int
    assert v["shared_imbalance"] == 1.0 and type(v["shared_imbalance"]) is float
    assert v["max_files_listed"] == 2.5  # a fraction stays one
    assert thresholds.load(None, []) == thresholds.load() == thresholds.defaults()


def test_a_file_then_overrides(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text("[thresholds]\nreopen_count = 7\nshared_imbalance = 0.3\n")
    v = thresholds.load(str(f), ["reopen_count=9"])
    assert (v["reopen_count"], v["shared_imbalance"]) == (9, 0.3)
    top = tmp_path / "top.toml"
    top.write_text("reopen_count = 4\n")  # a file without the table: top level
    assert thresholds.load(str(top))["reopen_count"] == 4


@pytest.mark.parametrize(("item", "says"), [
    ("reopen_count", "--set: expected NAME=VALUE, got 'reopen_count'"),
    ("nope=1", "--set: unknown threshold 'nope' ('iopilot checks -v' lists them)"),
    ("reopen_cont=1", "--set: unknown threshold 'reopen_cont' (did you mean reopen_count "),
    ("reopen_count=many", "--set: threshold reopen_count must be a number, got 'many'"),
    ("reopen_count=-1", "--set: threshold reopen_count must not be negative, got '-1'"),
])  # fmt: skip
def test_bad_overrides_name_the_option(item, says):
    with pytest.raises(InputError) as e:
        thresholds.load(None, [item])
    assert str(e.value).startswith(says)


def test_the_cache_counts_what_it_computed_and_reused():
    cache = AnalysisCache()
    calls = []
    assert cache.get(("phases", 1), lambda: calls.append(1) or "a") == "a"
    assert cache.get(("phases", 1), lambda: calls.append(2) or "b") == "a"
    assert cache.get(("phases", 1), lambda: calls.append(3) or "c") == "a"
    assert cache.get("layer:POSIX", lambda: calls.append(4) or "d") == "d"
    assert cache.get(("phases", 2), lambda: calls.append(5) or "e") == "e"
    assert calls == [1, 4, 5]
    assert cache.computed == {"phases": 2, "layer": 1} and cache.reused == {"phases": 2}


def test_the_context_lists_as_many_files_as_asked_and_shares_read_only_indexes():
    from iopilot.checks.base import Context
    from kit import counters, trace

    c = counters("POSIX", [{"file": f, "rank": 0, "POSIX_WRITES": f} for f in range(1, 6)])
    tr = trace(c)
    ctx = Context(tr, thresholds.load(None, ["max_files_listed=3"]))
    assert ctx.max_files == 3
    files, n = ctx.top_files(c.file_id, c["POSIX_WRITES"].astype(float),
                             {"writes": c["POSIX_WRITES"]})  # fmt: skip
    assert n == 5 and [e.numbers["writes"] for e in files] == [5, 4, 3]
    assert Context(tr, thresholds.defaults()).max_files == 10
    ids, per = ctx.per_file(c, {"w": c["POSIX_WRITES"]})
    assert ids.tolist() == [1, 2, 3, 4, 5] and per["w"].tolist() == [1, 2, 3, 4, 5]
    from iopilot.checks.base import _frozen_index

    _, ids, inv = _frozen_index(c)
    with pytest.raises(ValueError):
        ids[0] = 9
    with pytest.raises(ValueError):
        inv[0] = 9
    assert isinstance(inv, np.ndarray)
