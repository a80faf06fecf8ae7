"""What a check declares is all there is to register it: README's table of
checks and the thresholds come from the check classes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from iopilot.checks import base, thresholds
from iopilot.checks.base import REGISTRY, Check, check

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_table_of_checks_is_current():
    r = subprocess.run([sys.executable, str(ROOT / "tools/gen_checks_table.py"), "--check"],
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr


def test_the_table_has_a_row_per_check_that_says_what_it_finds():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gen_checks_table
    finally:
        sys.path.remove(str(ROOT / "tools"))
    table = gen_checks_table.render()
    listed = [c for c in REGISTRY.values() if c.finds]
    assert len(listed) >= 11 and all(c.cost for c in listed)
    for c in listed:
        assert f"| `{c.id}`" in table and c.finds in table
    assert "`static-layers` (layer `BUILD`)" in table


def test_a_check_brings_its_own_thresholds(monkeypatch):
    monkeypatch.setattr(base, "REGISTRY", dict(REGISTRY))
    monkeypatch.setattr(thresholds, "DEFAULTS", dict(thresholds.DEFAULTS))

    class Mine(Check):
        """A check of a test."""

        id = "test-own-thresholds"
        layer = "POSIX"
        uses = ("metadata_time_share",)
        defaults = (("test_own_limit", 7, "a limit of the test"),)

    check(Mine)
    assert thresholds.defaults()["test_own_limit"] == 7
    assert thresholds.load(None, ["test_own_limit=9"])["test_own_limit"] == 9
    assert Mine.uses == ("metadata_time_share", "test_own_limit")

    class Clash(Check):
        id = "test-clash"
        layer = "POSIX"
        defaults = (("metadata_time_share", 0.9, "another meaning"),)

    with pytest.raises(ValueError, match="threshold metadata_time_share is already defined"):
        check(Clash)
