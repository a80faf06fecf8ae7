"""Typed finding locations: files, ranks and phases each check names, and
their form in the JSON report."""

from __future__ import annotations

import json

import pytest

from iopilot import api
from iopilot.checks.base import (
    FileEvidence,
    FileLocation,
    Finding,
    Level,
    PhaseLocation,
    RankLocation,
    SourceLocation,
    location_dict,
)
from iopilot.cli import main
from iopilot.demo import example_dir
from kit import SHARED, counters, findings, records, shared_logs, trace

MiB = 1 << 20

IOR = str(example_dir() / "ior_hdf5_example.darshan")

# The fields each kind carries, with their JSON types.
SCHEMA = {"file": {"path": str}, "rank": {"rank": int},
          "phase": {"start_s": (int, float), "end_s": (int, float)},
          "source": {"file": str, "line": int, "function": str, "calls": int,
                     "seconds": (int, float), "label": str, "module": str, "offset": int,
                     "note": str, "caller": str}}  # fmt: skip


def _bursts(slow_rank: int | None = None):
    rows = []
    for burst, t0 in enumerate((0.0, 4.0, 8.0)):
        for r in range(4):
            d = 1.0 if r == slow_rank else 0.1
            rows.append((r, "w", 1, 1000 * (4 * burst + r), 1000, t0, t0 + d))
    return records(rows)


def _ranks(f: Finding) -> list[int]:
    return [loc.rank for loc in f.locations if isinstance(loc, RankLocation)]


def test_locations_in_the_json_report_follow_the_schema(capsys):
    assert main(["report", IOR, "--json"]) == 0
    (r,) = json.loads(capsys.readouterr().out)["reports"]
    kinds = set()
    for f in r["findings"]:
        assert isinstance(f["locations"], list)
        for loc in f["locations"]:
            fields = SCHEMA[loc["kind"]]
            assert set(loc) == {"kind", *fields}
            for name, typ in fields.items():
                assert isinstance(loc[name], typ)
            kinds.add(loc["kind"])
        # A finding's files (or the ranks and phases listed there) come first, in order.
        for loc, e in zip(f["locations"], f["files"], strict=False):
            assert loc.get("path", e["path"]) == e["path"]
            if e["path"].startswith("phase "):
                assert loc["kind"] == "phase" and loc["start_s"] == e["start s"]
    assert {"file", "phase", "rank"} <= kinds


def test_location_dicts_carry_their_kind():
    assert location_dict(FileLocation("/a")) == {"kind": "file", "path": "/a"}
    assert location_dict(RankLocation(3)) == {"kind": "rank", "rank": 3}
    assert location_dict(PhaseLocation(1.5, 2.0)) == {"kind": "phase", "start_s": 1.5,
                                                       "end_s": 2.0}  # fmt: skip
    assert location_dict(SourceLocation("io.c", 42, "dump", 7, 0.5, "io.c:42 dump")) == {
        "kind": "source", "file": "io.c", "line": 42, "function": "dump", "calls": 7,
        "seconds": 0.5, "label": "io.c:42 dump", "module": "", "offset": -1,
        "note": "", "caller": ""}  # fmt: skip


def test_files_come_first_then_named_ranks_without_duplicates():
    f = Finding("x", "POSIX", Level.WARN, "m",
                files=[FileEvidence("/a", {}), FileEvidence("rank 2", {}, RankLocation(2))],
                locations=[RankLocation(2), RankLocation(5)])  # fmt: skip
    assert f.locations == [FileLocation("/a"), RankLocation(2), RankLocation(5)]


def test_io_phases_locate_each_phase():
    (f,) = findings(trace(recs=_bursts(), nprocs=4), "io-phases")
    phases = [loc for loc in f.locations if isinstance(loc, PhaseLocation)]
    assert [(p.start_s, p.end_s) for p in phases] == [(0.0, 0.1), (4.0, 4.1), (8.0, 8.1)]
    assert len(f.locations) == len(phases)  # phases, not files named "phase 1"


def test_phase_stragglers_locate_phases_and_the_straggler():
    (f,) = findings(trace(recs=_bursts(slow_rank=3), nprocs=4), "phase-stragglers")
    assert _ranks(f) == [3]
    # Worst phase first, as the files list them.
    starts = [loc.start_s for loc in f.locations if isinstance(loc, PhaseLocation)]
    assert sorted(starts) == [0.0, 4.0, 8.0]
    assert starts[0] == f.files[0].numbers["start s"]


def test_phase_stragglers_from_counters_locate_ranks():
    rows = [{"file": 1 + r, "rank": r, "POSIX_WRITES": 10, "POSIX_BYTES_WRITTEN": MiB,
             "POSIX_F_WRITE_TIME": 30.0 if r == 2 else 1.0} for r in range(4)]  # fmt: skip
    (f,) = findings(trace(counters("POSIX", rows), nprocs=4), "phase-stragglers")
    assert f.locations == [RankLocation(2)]


def test_rank_zero_heavy_locates_rank_zero():
    rows = [(0, "w", 1, 1000 * i, 1000, 0.1 * i, 0.1 * i + 0.05) for i in range(10)]
    rows += [(r, "w", 1, 20000 + 100 * r, 100, 0.0, 0.05) for r in (1, 2, 3)]
    (f,) = findings(trace(recs=records(rows), nprocs=4), "rank-zero-heavy")
    assert f.locations == [RankLocation(0)]


def test_unbalanced_ranks_locate_the_heavy_ranks():
    rows = [(r, "w", 1, 10000 * r, 100, 0.0, 0.1) for r in range(8)]
    rows += [(r, "w", 2, 1000 * i, 1000, 0.1 * i, 0.1 * i + 0.1) for r in (8, 9) for i in range(5)]
    (f,) = findings(trace(recs=records(rows), nprocs=10), "unbalanced-ranks")
    assert f.locations == [RankLocation(8), RankLocation(9)]


def test_overlapping_writes_locate_the_file_and_both_ranks():
    rows = [(0, "w", 1, 0, 100, 0.0, 0.1), (1, "w", 1, 0, 100, 0.2, 0.3)]
    (f,) = findings(trace(recs=records(rows), nprocs=2), "overlapping-writes")
    assert f.locations == [FileLocation("/data/file1"), RankLocation(0), RankLocation(1)]


# Evidence keys under which checks name one rank.
_RANK_KEYS = ("slowest_rank", "worst_rank", "rank")


@pytest.mark.parametrize("log", shared_logs())
def test_every_check_locates_the_files_and_ranks_it_names(log):
    low = api.thresholds(overrides=["high_min_io_seconds=0", "high_min_io_share=0"])
    for f in api.diagnose(SHARED / log, thresholds=low).findings:
        listed = [e.location or FileLocation(e.path) for e in f.files]
        assert f.locations[: len(listed)] == listed, f.check
        named = [int(f.evidence[k]) for k in _RANK_KEYS if k in f.evidence]
        if "top_pair" in f.evidence:
            named += [int(x) for x in str(f.evidence["top_pair"]).split("-")]
        assert set(named) <= set(_ranks(f)), f.check
        for e in f.files:  # rank and phase rows are typed, never files named "rank 3"
            if e.path.startswith(("rank ", "phase ")):
                assert not isinstance(e.location or FileLocation(e.path), FileLocation)
