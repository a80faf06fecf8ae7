"""unused-opens: many files opened and closed with nothing read or written."""

from __future__ import annotations

import pytest

from iopilot.checks import REGISTRY
from iopilot.checks.thresholds import defaults
from kit import counters, findings, trace


def opened(n, meta=0.01, io_elsewhere=0.0, exe="", rank=0, read=False):
    """``n`` files each opened once (read once when ``read``), ``meta``
    seconds of opening and closing each, and one data file taking
    ``io_elsewhere`` seconds of reads."""
    rows = [{"file": 100 + i, "rank": rank, "POSIX_OPENS": 1, "POSIX_F_META_TIME": meta,
             **({"POSIX_READS": 1, "POSIX_BYTES_READ": 10, "POSIX_MAX_BYTE_READ": 9}
                if read else {})} for i in range(n)]  # fmt: skip
    rows.append({"file": 1, "rank": rank, "POSIX_OPENS": 1, "POSIX_READS": 100,
                 "POSIX_BYTES_READ": 10**8, "POSIX_MAX_BYTE_READ": 10**8 - 1,
                 "POSIX_F_READ_TIME": io_elsewhere})  # fmt: skip
    tr = trace(counters("POSIX", rows))
    tr.job.executable = exe
    return findings(tr, "unused-opens")


def test_it_registers_its_own_thresholds():
    t = defaults()
    assert t["unused_opens_min"] == 20 and t["unused_opens_share"] == 0.1
    assert {"unused_opens_min", "unused_opens_share"} <= set(REGISTRY["unused-opens"].uses)


def test_many_files_opened_for_nothing_are_found_and_priced():
    (f,) = opened(50, meta=0.01, io_elsewhere=1.0)
    assert f.check == "unused-opens" and f.evidence["files"] == 50
    assert f.evidence["opens"] == 50 and f.evidence["slowest_rank"] == 0
    assert f.cost_seconds == pytest.approx(0.5)
    assert "stat" in f.recommendation and f.snippet_lang == "c" and "stat(" in f.snippet
    assert f.files and f.files_total == 50


def test_python_programs_get_python_advice():
    (f,) = opened(50, exe="/usr/bin/python3 run.py")
    assert f.snippet_lang == "python" and "os.path.exists" in f.snippet


def test_few_files_or_a_small_share_are_not_a_problem():
    assert opened(20) == []  # at most unused_opens_min files
    assert len(opened(21)) == 1
    # 50 x 1 ms of opens next to 10 s of reads: 0.5 % of the I/O time
    assert opened(50, meta=0.001, io_elsewhere=10.0) == []


def test_files_read_or_written_are_not_unused():
    assert opened(50, read=True) == []
