"""A real trace of 200,000 records (the program ``iopilot bench bigtrace``
builds, in bursts, one file written once and one written over and over):
the reader's chunks and the checks' steps give the same records and the
same report whatever their size, with a seam exactly at, one record before
and one after the first record of an I/O phase."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from iopilot import api
from iopilot.bench import bigtrace
from iopilot.checks import callsites, recordtools
from iopilot.checks.phases import phases
from iopilot.model import Records
from iopilot.sources import trace_records

N, BURST = 200_000, 50_000
FIELDS = ("rank", "layer", "op", "file_id", "offset", "length", "start", "end", "site", "thread")

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="no C compiler")  # fmt: skip


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("bigtrace")
    return bigtrace.trace_program(bigtrace.build_program(work), work, N, BURST)


@pytest.fixture(scope="module")
def whole(trace) -> tuple[Records, dict[str, Any]]:
    """Records read in one chunk and the report made in one step."""
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(trace_records, "CHUNK", 1 << 30)
        mp.setattr(recordtools, "STEP", 1 << 30)
        mp.setattr(callsites, "STEP", 1 << 30)
        t = api.load(str(trace))
        return t.records, api.render(api.diagnose(t), "dict")
    finally:
        mp.undo()


def _seam(records: Records) -> int:
    """The place of the first record of the second I/O phase."""
    table = phases(records)
    assert len(table["start"]) >= 2  # the program pauses between bursts
    return int(np.searchsorted(records.start, table["start"][1]))


def _same(a: Any, b: Any, where: str = "") -> None:
    """Equal, floats to 1e-9 (sums in other steps round otherwise)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and not isinstance(b, bool):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (where, a, b)
    else:
        assert a == b, (where, a, b)


def test_the_trace_holds_every_write_and_the_rewrites(whole):
    records, doc = whole
    assert len(records) == N and int(records.length.sum()) == N
    assert records.site.dtype == np.uint16 and not records.rank.any()
    assert doc["layers"][0]["writes"] == N and doc["layers"][0]["bytes_written"] == N
    rewrites = [f for f in doc["findings"] if f["check"] == "overlapping-writes"]
    # every tenth write goes over the same 1,000 bytes of the second file
    assert rewrites and rewrites[0]["evidence"]["rewritten_bytes"] == N // 10 - 1000


@pytest.mark.parametrize("shift", [-1, 0, 1])
def test_chunks_of_the_reader_give_the_same_records(trace, whole, shift, monkeypatch):
    records, _ = whole
    monkeypatch.setattr(trace_records, "CHUNK", _seam(records) + shift)
    got = api.load(str(trace)).records
    for f in FIELDS:
        assert np.array_equal(getattr(got, f), getattr(records, f)), f


@pytest.mark.parametrize("shift", [-1, 0, 1])
def test_steps_of_the_checks_give_the_same_report(trace, whole, shift, monkeypatch):
    records, doc = whole
    step = _seam(records) + shift
    monkeypatch.setattr(recordtools, "STEP", step)
    monkeypatch.setattr(callsites, "STEP", step)
    t = api.load(str(trace))
    assert phases(t.records)["ops"].tolist() == phases(records)["ops"].tolist()
    got = api.render(api.diagnose(t), "dict")
    _same(got["findings"], doc["findings"], "findings")
    _same(got["io_time"], doc["io_time"], "io_time")
    _same(got["layers"], doc["layers"], "layers")


def test_record_counts_are_read_with_their_unit():
    assert [bigtrace.parse_count(x) for x in ("5m", "200k", "1,000", "2.5M", "1g")] == [
        5_000_000, 200_000, 1000, 2_500_000, 10**9]
    for bad in ("", "m", "5x", "0", "1.5", "-3k"):
        with pytest.raises(ValueError, match="not a record count"):
            bigtrace.parse_count(bad)


def test_a_trace_the_disk_cannot_hold_is_refused_before_anything_runs(tmp_path, capsys):
    free = shutil.disk_usage(tmp_path).free
    too_many = free // bigtrace.RECORD_BYTES + 1
    assert bigtrace.main([too_many], dir=str(tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("iopilot: error: ") and "GiB of disk" in err and "\n" not in err
    assert list(tmp_path.iterdir()) == []  # nothing built, nothing left
