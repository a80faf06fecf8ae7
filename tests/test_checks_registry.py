"""Check registration and summaries; which records count at their file's
highest traced layer; rank lists cut at their limit."""

from __future__ import annotations

import numpy as np
import pytest

from iopilot.checks.base import REGISTRY, Check, check
from iopilot.checks.recordtools import _app_mask, _rank_list
from iopilot.model import Records
from kit import records


def test_a_check_registers_once_under_its_id(monkeypatch):
    monkeypatch.setattr("iopilot.checks.base.REGISTRY", dict(REGISTRY))
    from iopilot.checks import base

    class Mine(Check):
        """First line.

        More."""

        id = "test-mine"

    assert check(Mine) is Mine and base.REGISTRY["test-mine"] is Mine
    assert Mine.summary() == "First line."
    with pytest.raises(ValueError, match="duplicate check id test-mine"):
        check(Mine)

    class Bare(Check):
        id = "test-bare"

    Bare.__doc__ = None
    assert Bare.summary() == "test-bare"


def test_records_of_the_highest_layer_of_each_file():
    mpiio = records([(0, "w", 1, 0, 100, 0.0, 1.0)], layer="MPIIO")
    posix = records([(0, "w", 1, 0, 100, 0.1, 0.9), (0, "w", 2, 0, 10, 0.0, 0.1)])
    both = Records.concat([posix, mpiio])
    assert _app_mask(both).tolist() == [False, True, True]
    same = _app_mask(posix)
    assert same.dtype == bool and same.tolist() == [True, True]


def test_rank_list_limit():
    assert _rank_list(np.arange(10), 10) == "0, 1, 2, 3, 4, 5, 6, 7, 8, 9"
    assert _rank_list(np.arange(12), 10) == "0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 2 more"
    assert _rank_list(np.array([7, 3]), 1) == "7 and 1 more"
