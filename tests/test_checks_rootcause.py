"""Checks that name the root cause: storms by share, re-reads behind rank 0,
collective buffering, independent and blocking MPI-IO, one finding per cause."""

from __future__ import annotations

import pytest

from iopilot.checks import Level, advice, diagnose
from iopilot.checks.engine import cap_costs, drishti_codes, merge_same_cause
from iopilot.checks.thresholds import defaults
from kit import counters, findings, only, records, trace

T = defaults()
MiB = 1024 * 1024
ANY_TIME = {"high_min_io_seconds": 0, "high_min_io_share": 0}


def _values(**kw):
    v = defaults()
    v.update(ANY_TIME, **kw)
    return v


def _with_language(tr, lang: str):
    tr.job.language = lang
    return tr


# ------------------------------------------------------------ tiny-file storms


def _storm(n: int, meta: float, other_write_time: float, ranks: int = 1):
    """``n`` tiny files (4 KiB) on rank 0, each ``meta`` seconds of metadata,
    and one big file taking ``other_write_time`` to write."""
    rows = [{"file": 100 + i, "rank": 0, "POSIX_OPENS": 1, "POSIX_WRITES": 1,
             "POSIX_BYTES_WRITTEN": 4096, "POSIX_MAX_BYTE_WRITTEN": 4095,
             "POSIX_F_META_TIME": meta, "POSIX_F_WRITE_TIME": 1e-5} for i in range(n)]
    rows.append({"file": 1, "rank": 0, "POSIX_OPENS": 1, "POSIX_WRITES": 100,
                 "POSIX_BYTES_WRITTEN": 100 * MiB, "POSIX_MAX_BYTE_WRITTEN": 100 * MiB - 1,
                 "POSIX_F_WRITE_TIME": other_write_time})  # fmt: skip
    return trace(counters("POSIX", rows), nprocs=ranks)


def test_tiny_files_are_judged_by_their_share_of_the_io_time():
    share = T["tiny_files_share"]
    n = 800  # below the absolute count, above the floor
    meta = n * 0.001
    # Metadata just above the share of the rank's I/O time: a storm.
    big = meta / share - meta - n * 1e-5 - 0.01
    f = only(findings(_storm(n, 0.001, big), "tiny-files"))
    assert f.evidence["tiny_files_written"] == n
    assert f.evidence["slowest_rank_metadata_seconds"] == pytest.approx(meta)
    assert f.cost_seconds == pytest.approx(meta)
    # Just below it: the same files are not worth a finding.
    assert findings(_storm(n, 0.001, meta / share - meta - n * 1e-5 + 0.01), "tiny-files") == []
    # Above the absolute count they are one, whatever their share.
    count = T["tiny_files_count"] + 1
    assert only(findings(_storm(count, 0.001, 1000.0), "tiny-files"))


def test_tiny_file_storm_advice_per_language_in_mpi_programs():
    tr = _storm(800, 0.001, 0.0, ranks=4)
    c = only(findings(tr, "tiny-files"))
    assert c.snippet == advice.C_ONE_FILE_PER_RANK and c.snippet_lang == "c"
    assert "MPI_File_write_at_all" in c.recommendation and "h5py" in c.recommendation
    py = only(findings(_with_language(_storm(800, 0.001, 0.0, ranks=4), "python"), "tiny-files"))
    assert py.snippet_lang == "python" and "h5py" in py.snippet
    ftn = only(findings(_with_language(_storm(800, 0.001, 0.0, ranks=4), "fortran"),
                        "tiny-files"))  # fmt: skip
    assert ftn.snippet == advice.FORTRAN_ONE_CONTAINER and ftn.snippet_lang == "fortran"


# ------------------------------------------------------- random access order


def test_files_written_once_from_offset_zero_are_not_random():
    # 1,200 files, each written once at offset 0: no write goes backwards.
    rows = [{"file": 100 + i, "rank": 0, "POSIX_WRITES": 1, "POSIX_BYTES_WRITTEN": 4096,
             "POSIX_F_WRITE_TIME": 1e-4} for i in range(1200)]
    f = only(findings(trace(counters("POSIX", rows)), "posix-random-writes"), Level.OK)
    assert f.evidence["random"] == 0 and f.evidence["first_accesses"] == 1200
    # Each written sequentially from 0 (four writes, three of them sequential).
    rows = [{"file": 100 + i, "rank": 0, "POSIX_WRITES": 4, "POSIX_SEQ_WRITES": 3,
             "POSIX_CONSEC_WRITES": 3} for i in range(1200)]
    assert only(findings(trace(counters("POSIX", rows)), "posix-random-writes"), Level.OK)
    # Two accesses each, the second going back: random again.
    rows = [{"file": 100 + i, "rank": 0, "POSIX_WRITES": 2} for i in range(1200)]
    f = only(findings(trace(counters("POSIX", rows)), "posix-random-writes"), Level.HIGH)
    assert f.evidence["random"] == 1200


def test_random_read_advice_per_language():
    row = {"POSIX_READS": 5000, "POSIX_SEQ_READS": 1000, "POSIX_F_READ_TIME": 1.0}
    for lang, snippet in (("c", advice.C_SORTED_READS), ("python", advice.PY_SORTED_READS),
                          ("fortran", advice.FORTRAN_SORTED_READS)):
        tr = _with_language(trace(counters("POSIX", [row])), lang)
        f = only(findings(tr, "posix-random-reads"), Level.HIGH)
        assert (f.snippet, f.snippet_lang) == (snippet, lang)


# ------------------------------------------------- rank 0 and its re-reads


def _config_job(reread_opens: int, funnel: bool = False):
    """4 ranks each writing 200 small files' worth; rank 0 also reads a
    20 KiB config ``reread_opens`` times (or, ``funnel``, writes everything)."""
    extent = 20_000
    rows = [{"file": 10 + r, "rank": r, "POSIX_OPENS": 1, "POSIX_WRITES": 200,
             "POSIX_BYTES_WRITTEN": 200 * 4096, "POSIX_MAX_BYTE_WRITTEN": 200 * 4096 - 1,
             "POSIX_F_WRITE_TIME": 0.01, "POSIX_F_META_TIME": 0.001}
            for r in range(4) if not (funnel and r)]
    if funnel:
        rows[0].update(POSIX_WRITES=3200, POSIX_BYTES_WRITTEN=3200 * 4096,
                       POSIX_MAX_BYTE_WRITTEN=3200 * 4096 - 1, POSIX_F_WRITE_TIME=0.2)
    else:
        rows.append({"file": 1, "rank": 0, "POSIX_OPENS": reread_opens,
                     "POSIX_READS": reread_opens * 5, "POSIX_BYTES_READ": reread_opens * extent,
                     "POSIX_MAX_BYTE_READ": extent - 1, "POSIX_F_READ_TIME": 0.05,
                     "POSIX_F_META_TIME": 0.01})  # fmt: skip
    return trace(counters("POSIX", rows), nprocs=4, names={1: "/run/config.txt"})


def test_rank_zero_heavy_from_config_rereads_points_at_reopened_files():
    d = diagnose(_config_job(200), _values())
    first = next(f for f in d.findings if f.level >= Level.WARN)
    assert first.check == "reopened-files"
    assert "MPI_Bcast" in first.recommendation and "MPI_Bcast" in first.snippet
    assert first.snippet_lang == "c"
    # rank-zero-heavy says what rank 0 does and is merged into it.
    assert all(f.check != "rank-zero-heavy" for f in d.findings)
    assert "rank-zero-heavy (Drishti D01)" in first.evidence["also_seen_as"]
    assert "config.txt" in first.evidence["also_seen_as"]
    # Without merging it is a note with no cost, never the funnel advice.
    raw = diagnose(_config_job(200), _values(), merge=False)
    heavy = next(f for f in raw.findings if f.check == "rank-zero-heavy")
    assert heavy.level == Level.INFO and heavy.cost_seconds == 0.0 and not heavy.snippet
    assert heavy.evidence["cause"] == "re-reads"


def test_input_every_rank_rereads_is_judged_per_rank():
    # All 4 ranks read a 5,000-byte params file 40 times: one reduced row.
    def job(opens):
        row = {"file": 1, "rank": -1, "POSIX_OPENS": opens, "POSIX_WRITES": 1,
               "POSIX_BYTES_WRITTEN": 5000, "POSIX_READS": opens,
               "POSIX_BYTES_READ": opens * 5000, "POSIX_MAX_BYTE_READ": 4999,
               "POSIX_MAX_BYTE_WRITTEN": 4999, "POSIX_F_META_TIME": 0.01,
               "POSIX_F_READ_TIME": 0.01}  # fmt: skip
        return trace(counters("POSIX", [row]), nprocs=4)

    f = only(findings(job(4 * T["reread_opens"]), "reopened-files"))
    assert f.evidence["files_read"] == 1 and "MPI_Bcast" in f.snippet
    assert findings(job(4 * T["reread_opens"] - 1), "reopened-files") == []


@pytest.mark.parametrize(("lang", "needle"), [("python", "comm.bcast"),
                                              ("fortran", "call MPI_Bcast")])
def test_reread_advice_per_language(lang, needle):
    tr = _with_language(_config_job(200), lang)
    f = only(findings(tr, "reopened-files"))
    assert needle in f.snippet and f.snippet_lang == lang


def test_reread_opens_both_sides():
    n = T["reread_opens"]
    assert findings(_config_job(n - 1), "reopened-files") == []
    f = only(findings(_config_job(n), "reopened-files"))
    assert f.evidence["files_read"] == 1 and f.evidence["bytes_read_again"] == (n - 1) * 20_000
    # metadata and the reads beyond the first pass
    assert f.cost_seconds == pytest.approx(0.01 + 0.05 * (n - 1) / n)


@pytest.mark.parametrize(("lang", "needle", "snippet_lang"), [
    ("c", "MPI_File_write_at_all", "c"), ("python", "Write_at_all", "python"),
    ("fortran", "MPI_File_write_at_all", "fortran")])  # fmt: skip
def test_funnel_keeps_rank_zero_heavy_with_collective_advice(lang, needle, snippet_lang):
    tr = _with_language(_config_job(0, funnel=True), lang)
    f = only(findings(tr, "rank-zero-heavy"), Level.HIGH)
    assert needle in f.snippet and f.snippet_lang == snippet_lang
    assert "collectively" in f.recommendation and f.cost_seconds > 0


def test_rank_zero_heavy_is_a_note_when_rank_zero_is_not_the_slowest():
    rows = [{"file": 10, "rank": 0, "POSIX_WRITES": 100, "POSIX_BYTES_WRITTEN": 100 * MiB,
             "POSIX_F_WRITE_TIME": 0.1},
            {"file": 11, "rank": 2, "POSIX_WRITES": 1, "POSIX_BYTES_WRITTEN": 1,
             "POSIX_F_WRITE_TIME": 5.0}]  # fmt: skip
    f = only(findings(trace(counters("POSIX", rows), nprocs=4), "rank-zero-heavy"))
    assert f.level == Level.INFO and f.cost_seconds == 0.0
    rows[1]["POSIX_F_WRITE_TIME"] = 0.01  # now rank 0 sets the job's I/O time
    f = only(findings(trace(counters("POSIX", rows), nprocs=4), "rank-zero-heavy"))
    assert f.level == Level.HIGH and f.cost_seconds > 0


# ---------------------------------------------------- collective buffering


def _aggregated(coll_writes: int, indep: int = 0, hints=None, mpiio_fast=4 * MiB):
    """A shared file written through MPI-IO by 4 ranks, 4 MiB each at the
    MPI-IO level (``mpiio_fast``: the fastest rank's); at the POSIX level
    rank 0 (the aggregator) wrote it all."""
    m = counters("MPIIO", [{"file": 7, "rank": -1, "MPIIO_COLL_WRITES": coll_writes,
                            "MPIIO_INDEP_WRITES": indep, "MPIIO_BYTES_WRITTEN": 16 * MiB,
                            "MPIIO_SLOWEST_RANK_BYTES": 4 * MiB,
                            "MPIIO_FASTEST_RANK_BYTES": mpiio_fast,
                            "MPIIO_F_WRITE_TIME": 1.0}])  # fmt: skip
    p = counters("POSIX", [{"file": 7, "rank": -1, "POSIX_WRITES": 16,
                            "POSIX_BYTES_WRITTEN": 16 * MiB, "POSIX_F_WRITE_TIME": 0.4,
                            "POSIX_SLOWEST_RANK_BYTES": 16 * MiB, "POSIX_FASTEST_RANK_BYTES": 0,
                            "POSIX_F_SLOWEST_RANK_TIME": 0.4}])  # fmt: skip
    return trace(m, p, nprocs=4, hints=hints)


def test_aggregator_imbalance_under_collective_buffering_is_a_note():
    f = only(findings(_aggregated(400), "posix-shared-data-imbalance"), Level.INFO)
    assert "expected effect of collective buffering" in f.message
    assert f.cost_seconds == 0.0 and f.evidence["drishti_warns"] == "P18"
    assert "P18" in drishti_codes([f])  # Drishti's warning stays accounted for


@pytest.mark.parametrize("case", ["independent", "unbalanced", "cb disabled"])
def test_aggregator_imbalance_without_collective_buffering_warns(case):
    tr = {"independent": _aggregated(0, indep=400),
          "unbalanced": _aggregated(400, mpiio_fast=1 * MiB),
          "cb disabled": _aggregated(400, hints={"romio_cb_write": "disable"})}[case]
    only(findings(tr, "posix-shared-data-imbalance"), Level.HIGH)


# ------------------------------------------------ independent MPI-IO writes


def _independent(records_=None, lang=""):
    m = counters("MPIIO", [{"file": 7, "rank": r, "MPIIO_INDEP_WRITES": 2000,
                            "MPIIO_BYTES_WRITTEN": 2000 * 1024,
                            "MPIIO_F_WRITE_TIME": 0.5} for r in range(4)])  # fmt: skip
    p = counters("POSIX", [{"file": 7, "rank": r, "POSIX_WRITES": 2000,
                            "POSIX_BYTES_WRITTEN": 2000 * 1024,
                            "POSIX_SIZE_WRITE_100_1K": 2000,
                            "POSIX_F_WRITE_TIME": 0.3} for r in range(4)])  # fmt: skip
    tr = trace(m, p, nprocs=4, recs=records_)
    return _with_language(tr, lang)


def test_independent_small_writes_name_the_missing_collective_first():
    d = diagnose(_independent(), _values())
    first = next(f for f in d.findings if f.level >= Level.WARN)
    assert first.check == "mpiio-collective-writes"
    # MPI-IO time above what a collective write of the same bytes would take:
    # one aggregator (one node) writing all 4 ranks' bytes.
    ideal = 4 * 2000 * 1024 / T["default_bandwidth"]
    assert first.cost_seconds == pytest.approx(0.5 - ideal)
    assert first.snippet == advice.C_MPIIO_COLLECTIVE_STEP
    # The small POSIX writes beneath (on shared files and on all files) are
    # the same calls' pieces: one finding, their Drishti codes kept.
    checks = [f.check for f in d.findings]
    assert "posix-small-writes" not in checks and "posix-shared-small-writes" not in checks
    assert first.evidence["drishti_also"] == "P16 P06"
    # POSIX small writes on files that MPI-IO did not write stay apart.
    other = counters("POSIX", [{"file": 8, "rank": 0, "POSIX_WRITES": 5000,
                                "POSIX_SIZE_WRITE_100_1K": 5000, "POSIX_F_WRITE_TIME": 0.2}])
    tr = _independent()
    tr.counters["POSIX"] = other
    tr.names[8] = "/data/file8"
    checks = [f.check for f in diagnose(tr, _values()).findings]
    assert "posix-small-writes" in checks and "mpiio-collective-writes" in checks


@pytest.mark.parametrize(("lang", "needle"), [("python", "fh.Write_at_all"),
                                              ("fortran", "call MPI_File_write_at_all")])
def test_collective_write_advice_per_language(lang, needle):
    f = only(findings(_independent(lang=lang), "mpiio-collective-writes"))
    assert needle in f.snippet and f.snippet_lang == lang


def _calls(gap: float, calls: int = 10):
    """Each rank: ``calls`` MPI-IO writes of 1 ms, ``gap`` seconds apart."""
    rows = []
    for r in range(4):
        t = 0.0
        for _ in range(calls):
            rows.append((r, "w", 7, 0, 1024, t, t + 0.001))
            t += 0.001 + gap
    return records(rows, layer="MPIIO")


def test_blocking_writes_are_a_note_without_computation_between_them():
    gap = T["compute_gap_min"]
    f = only(findings(_independent(_calls(gap * 0.5)), "mpiio-blocking-writes"), Level.INFO)
    assert f.cost_seconds == 0.0 and not f.snippet and f.evidence["drishti_warns"] == "M07"
    f = only(findings(_independent(_calls(gap * 2), "python"), "mpiio-blocking-writes"),
             Level.WARN)  # fmt: skip
    # 9 gaps of 2 ms per rank; the hideable part is at most the calls' 10 ms.
    assert f.evidence["compute_seconds"] == pytest.approx(9 * gap * 2)
    assert f.cost_seconds == pytest.approx(0.01)
    assert "Iwrite_at_all" in f.snippet and f.snippet_lang == "python"
    # Computation must recur: four gaps (five calls) are a rank descheduled.
    assert only(findings(_independent(_calls(gap * 2, 5)), "mpiio-blocking-writes")
                ).level == Level.INFO
    assert only(findings(_independent(_calls(gap * 2, 6)), "mpiio-blocking-writes")
                ).level == Level.WARN
    # Without records nothing says whether there is computation: unknown.
    f = only(findings(_independent(), "mpiio-blocking-writes"), Level.WARN)
    assert f.cost_seconds is None and "at most the 0.5 s" in f.evidence["cost_unknown"]


def test_other_io_between_calls_is_not_computation():
    calls = _calls(0.01)
    # STDIO reads fill each 10 ms gap but for 0.2 ms: no computation left
    rows = [(r, "r", 9, 0, 100, 0.0011 + k * 0.011, 0.0109 + k * 0.011)
            for r in range(4) for k in range(9)]  # fmt: skip
    io = records(rows, layer="STDIO")
    recs = type(calls).concat([calls, io])
    f = only(findings(_independent(recs), "mpiio-blocking-writes"), Level.INFO)
    assert f.evidence["compute_seconds"] == 0.0


# ------------------------------------------------------- cb disabled


def _cb(hint: str | None, posix_writes: int):
    m = counters("MPIIO", [{"file": 7, "rank": -1, "MPIIO_COLL_WRITES": 8000,
                            "MPIIO_BYTES_WRITTEN": 8000 * 1024, "MPIIO_F_WRITE_TIME": 2.0}])
    p = counters("POSIX", [{"file": 7, "rank": -1, "POSIX_WRITES": posix_writes,
                            "POSIX_BYTES_WRITTEN": 8000 * 1024, "POSIX_F_WRITE_TIME": 0.5}])
    hints = {"romio_cb_write": hint} if hint else None
    return trace(m, p, nprocs=4, hints=hints)


def test_cb_disabled_both_sides():
    f = only(findings(_cb("disable", 8000), "mpiio-cb-disabled"), Level.WARN)
    assert f.evidence["hint"] == "romio_cb_write=disable"
    assert f.evidence["posix_bytes_per_request"] == 1024.0
    assert 'MPI_Info_set(info, "romio_cb_write", "enable")' in f.snippet
    assert f.cost_seconds == pytest.approx(2.0 / 4 - 8000 * 1024 / T["default_bandwidth"])
    # buffering on, or the pieces merged anyway: nothing to say
    assert findings(_cb(None, 8000), "mpiio-cb-disabled") == []
    assert findings(_cb("enable", 8000), "mpiio-cb-disabled") == []
    assert findings(_cb("disable", 2000), "mpiio-cb-disabled") == []  # 4 KiB: merged
    # POSIX requests as large as the small-request size: nothing lost either.
    big = _cb("disable", 8000)
    assert findings(big, "mpiio-cb-disabled", small_request_size=1024) == []
    assert only(findings(big, "mpiio-cb-disabled", small_request_size=1025))
    py = only(findings(_with_language(_cb("disable", 8000), "python"), "mpiio-cb-disabled"))
    assert "info.Set" in py.snippet and py.snippet_lang == "python"


# --------------------------------------------------- one finding per cause


def _f(check, cost, level=Level.WARN, drishti=None, **evidence):
    from iopilot.checks.base import Finding

    return Finding(check=check, layer="POSIX", level=level, message=f"{check}. At stake: "
                   f"{cost:.3g} s (slowest rank).", drishti=drishti, evidence=dict(evidence),
                   cost_seconds=cost)  # fmt: skip


def _listing(f, path):
    from iopilot.checks.base import FileEvidence

    f.files = [FileEvidence(path, {"seconds": 1.0})]
    return f


class _Ctx:
    def __init__(self, hdf5: bool, mpiio: str = ""):
        self._hdf5 = hdf5
        self._mpiio = (counters("MPIIO", [{"file": 7, "rank": -1}]) if mpiio else None)
        self.trace = trace(*([self._mpiio] if mpiio else []))

    def layer(self, name):
        if name == "MPIIO":
            return self._mpiio
        return object() if self._hdf5 and name in ("H5F", "H5D") else None


@pytest.mark.parametrize(("keep", "merged", "kw"), [
    (_f("posix-small-writes", 1.0, Level.HIGH, "P06"), _f("posix-shared-small-writes", 1.0,
                                                          drishti="P16"), {}),
    (_f("posix-small-reads", 1.0, drishti="P05"), _f("posix-shared-small-reads", 1.0,
                                                     drishti="P15"), {}),
    (_f("hdf5-alignment", 0.5), _f("posix-misaligned-file", 0.5, drishti="P08"),
     {"hdf5": True}),
    (_f("posix-redundant-reads", 0.3, drishti="P09"), _f("overlapping-reads", 0.3), {}),
    (_f("reopened-files", 0.4), _f("rank-zero-heavy", 0.0, Level.INFO, "D01",
                                   cause="re-reads"), {}),
    (_f("reopened-files", 0.4), _f("unbalanced-ranks", 0.0, Level.INFO, "D02",
                                   cause="re-reads"), {}),
    (_f("posix-random-reads", 0.2, Level.HIGH, "P11"), _f("posix-small-reads", 0.6,
                                                          drishti="P05"), {}),
    (_f("reopened-files", 0.4), _f("posix-redundant-reads", 0.1, drishti="P09"), {}),
    (_f("stdio-time", 1.0), _f("stdio-share", 1.0, Level.HIGH, "S01"), {}),
    (_f("mpiio-collective-writes", 0.5, drishti="M03"),
     _listing(_f("posix-shared-time-imbalance", 0.1, Level.HIGH, "P19"), "/data/file7"),
     {"mpiio": "/data/file7"}),
    (_listing(_f("reopened-files", 0.4), "/run/params.txt"),
     _listing(_f("stdio-time", 0.4), "/run/params.txt"), {}),
    (_listing(_f("posix-redundant-reads", 0.4, drishti="P09"), "/run/mesh.bin"),
     _listing(_f("stdio-time", 0.3), "/run/mesh.bin"), {}),
    (_f("reopened-files", 0.6, slowest_rank=0), _f("phase-stragglers", 0.5, worst_rank=0),
     {}),
    (_f("reopened-files", 0.6, slowest_rank=0, others_wait_seconds=0.3),
     _f("phase-stragglers", 0.5, worst_rank=2), {}),
    (_f("tiny-files", 0.9), _f("posix-metadata-share", 1.0), {}),
    (_f("reopened-files", 0.5), _f("posix-metadata-share", 1.0), {}),
])  # fmt: skip
def test_same_cause_pairs_become_one_finding(keep, merged, kw):
    out = merge_same_cause([merged, keep], _Ctx(kw.get("hdf5", False), kw.get("mpiio", "")))
    assert out == [keep]
    assert keep.evidence["also_seen_as"].startswith(merged.check)
    assert keep.level == max(keep.level, merged.level)
    assert keep.cost_seconds == max(keep.cost_seconds, merged.cost_seconds)
    if merged.drishti and merged.level >= Level.WARN:
        assert merged.drishti in drishti_codes(out)
        assert f"Drishti {merged.drishti}" in keep.drishti_note


def test_small_writes_beneath_cb_disabled_collectives_are_one_finding():
    p = counters("POSIX", [{"file": 7, "rank": -1, "POSIX_WRITES": 8000,
                            "POSIX_SIZE_WRITE_100_1K": 8000, "POSIX_BYTES_WRITTEN": 8000 * 1024,
                            "POSIX_F_WRITE_TIME": 0.5}])  # fmt: skip
    tr = _cb("disable", 8000)
    tr.counters["POSIX"] = p
    d = diagnose(tr, _values())
    first = next(f for f in d.findings if f.level >= Level.WARN)
    assert first.check == "mpiio-cb-disabled" and "P06" in first.evidence["drishti_also"]
    assert "posix-small-writes" not in [f.check for f in d.findings]


def test_pairs_stay_apart_when_their_condition_fails():
    # Misaligned offsets without HDF5 traced are POSIX's own.
    a, b = _f("hdf5-alignment", 0.5), _f("posix-misaligned-file", 0.5, drishti="P08")
    assert len(merge_same_cause([a, b], _Ctx(False))) == 2
    # Rank 0 heavy for another reason than re-reads.
    a, b = _f("reopened-files", 0.4), _f("rank-zero-heavy", 1.0, drishti="D01")
    assert len(merge_same_cause([a, b], _Ctx(False))) == 2
    # Metadata time mostly elsewhere than in the tiny files.
    a, b = _f("tiny-files", 0.4), _f("posix-metadata-share", 1.0)
    assert len(merge_same_cause([a, b], _Ctx(False))) == 2
    # STDIO time on other files than the re-read ones.
    a = _listing(_f("reopened-files", 0.4), "/run/params.txt")
    b = _listing(_f("stdio-time", 0.9), "/run/log.txt")
    assert len(merge_same_cause([a, b], _Ctx(False))) == 2
    # A straggler other than the re-reading rank.
    a, b = _f("reopened-files", 0.4, slowest_rank=0), _f("phase-stragglers", 0.5, worst_rank=3)
    assert len(merge_same_cause([a, b], _Ctx(False))) == 2
    # STDIO bytes that are not mostly re-reads.
    a = _f("posix-redundant-reads", 0.3, repeated_bytes=10)
    b = _f("stdio-share", 0.9, Level.HIGH, "S01", stdio_bytes=1000)
    assert len(merge_same_cause([a, b], _Ctx(False))) == 2
    # An OK verdict is nothing to merge.
    a, b = _f("posix-random-reads", 0.0, Level.OK, "P12"), _f("posix-small-reads", 0.6)
    assert len(merge_same_cause([a, b], _Ctx(False))) == 2


def test_costs_never_add_up_to_more_than_the_io_time():
    class _Times:
        slowest_seconds = 1.0

        def share_text(self, s):
            return f"{s:.3g} s"

    fs = [_f("a", 0.7), _f("b", 0.5), _f("c", 0.2), _f("d", 0.0)]
    fs.append(_f("e", 0.1))
    fs[-1].cost_seconds = None
    cap_costs(fs, _Times())
    assert [f.cost_seconds for f in fs] == [0.7, pytest.approx(0.3), 0.0, 0.0, None]
    assert fs[1].evidence["cost_before_cap"] == 0.5
    assert "At stake: 0.3 s (slowest rank)." in fs[1].message
    assert "cost_before_cap" not in fs[0].evidence
    assert sum(f.cost_seconds or 0 for f in fs) <= 1.0


def test_diagnosis_costs_sum_within_the_io_time():
    d = diagnose(_independent(), _values())
    known = sum(f.cost_seconds or 0.0 for f in d.findings)
    assert known <= d.io_time.slowest_seconds + 1e-9
    assert any("cost_before_cap" in f.evidence for f in d.findings)


# ------------------------------------------------------ advice per language

_SMALL_W = {"file": 3, "rank": 0, "POSIX_WRITES": 5000, "POSIX_SIZE_WRITE_0_100": 5000,
            "POSIX_BYTES_WRITTEN": 5000, "POSIX_F_WRITE_TIME": 1.0}
_SMALL_R = {"file": 3, "rank": 0, "POSIX_READS": 5000, "POSIX_SIZE_READ_0_100": 5000,
            "POSIX_BYTES_READ": 5000, "POSIX_F_READ_TIME": 1.0, "POSIX_SEQ_READS": 4999,
            "POSIX_CONSEC_READS": 4999}  # fmt: skip
_REREAD = {"file": 3, "rank": 0, "POSIX_READS": 100, "POSIX_BYTES_READ": 100 * MiB,
           "POSIX_MAX_BYTE_READ": MiB - 1, "POSIX_F_READ_TIME": 1.0}  # fmt: skip


@pytest.mark.parametrize(("check", "row", "want"), [
    ("posix-small-writes", _SMALL_W, {"c": advice.POSIX_AGGREGATE, "python": advice.PY_AGGREGATE,
                                      "fortran": advice.FORTRAN_AGGREGATE}),
    ("posix-small-reads", _SMALL_R, {"c": advice.POSIX_AGGREGATE_READ,
                                     "python": advice.PY_AGGREGATE_READ,
                                     "fortran": advice.FORTRAN_AGGREGATE_READ}),
    ("posix-redundant-reads", _REREAD, {"c": advice.C_READ_ONCE, "python": advice.PY_READ_ONCE,
                                        "fortran": advice.FORTRAN_READ_ONCE}),
])  # fmt: skip
@pytest.mark.parametrize("lang", ["c", "python", "fortran"])
def test_posix_advice_is_in_the_programs_language(check, row, want, lang):
    tr = _with_language(trace(counters("POSIX", [row])), lang)
    f = only(findings(tr, check))
    assert (f.snippet, f.snippet_lang) == (want[lang], lang)


@pytest.mark.parametrize(("lang", "needle"), [("c", "MPI_Bcast(cfg"),
                                              ("python", "comm.bcast"),
                                              ("fortran", "call MPI_Bcast")])
def test_redundant_reads_in_mpi_programs_read_once_and_broadcast(lang, needle):
    tr = _with_language(trace(counters("POSIX", [_REREAD]), nprocs=4), lang)
    f = only(findings(tr, "posix-redundant-reads"))
    assert needle in f.snippet and f.snippet_lang == lang


def test_redundant_reads_through_stdio_count():
    # np.fromfile and fread re-read through STDIO: the same mistake.
    row = {"file": 3, "rank": 0, "STDIO_READS": 100, "STDIO_BYTES_READ": 100 * MiB,
           "STDIO_MAX_BYTE_READ": MiB - 1, "STDIO_F_READ_TIME": 2.0}
    f = only(findings(trace(counters("STDIO", [row])), "posix-redundant-reads"))
    assert f.evidence["repeated_bytes"] == 99 * MiB
    assert f.cost_seconds == pytest.approx(2.0 * 99 / 100)


@pytest.mark.parametrize(("moved", "want"), [(8 * MiB, advice.C_STDIO_BINARY),
                                             (8 * MiB - 1, advice.C_LOG_LESS)])
def test_stdio_time_advice_for_bulk_text_and_for_logs(moved, want):
    row = {"file": 3, "rank": 0, "STDIO_WRITES": 100000, "STDIO_BYTES_WRITTEN": moved,
           "STDIO_F_WRITE_TIME": 5.0}
    f = only(findings(trace(counters("STDIO", [row])), "stdio-time"))
    assert f.snippet == want and f.snippet_lang == "c"
    ftn = only(findings(_with_language(trace(counters("STDIO", [row])), "fortran"),
                        "stdio-time"))  # fmt: skip
    assert ftn.snippet_lang == "fortran"


def test_bulk_text_matters_from_a_shorter_time_than_a_log():
    def job(moved, seconds):
        row = {"file": 3, "rank": 0, "STDIO_WRITES": 100000, "STDIO_BYTES_WRITTEN": moved,
               "STDIO_F_WRITE_TIME": seconds}
        tr = trace(counters("STDIO", [row]))
        tr.job.runtime = 1.0
        return findings(tr, "stdio-time")

    bulk, least = T["stdio_bulk_bytes"], T["stdio_bulk_min_time"]
    assert only(job(bulk, least + 0.01)).snippet == advice.C_STDIO_BINARY
    assert job(bulk, least) == []
    assert job(bulk - 1, T["stdio_min_time"]) == []  # a log: the longer time applies
    assert only(job(bulk - 1, T["stdio_min_time"] + 0.01)).snippet == advice.C_LOG_LESS


def test_a_stragglers_wait_is_no_cost_of_the_cause():
    # The straggler's seconds are the others waiting: not what reading once saves.
    a = _f("reopened-files", 0.4, slowest_rank=0, others_wait_seconds=1.3)
    (kept,) = merge_same_cause([a, _f("phase-stragglers", 1.3, worst_rank=2)], _Ctx(False))
    assert kept.cost_seconds == 0.4 and "phase-stragglers" in kept.evidence["also_seen_as"]


def _open_close_records(opens: int, stay: float):
    """Open and close records of file 1 on rank 0: each open stays ``stay`` s."""
    import numpy as np

    from iopilot.model import Records
    from iopilot.vocabulary import OP_NAMES, RECORD_LAYERS

    t0 = np.arange(opens) * 0.1
    n = 2 * opens
    return Records(rank=np.zeros(n, np.int32),
                   layer=np.full(n, RECORD_LAYERS.index("POSIX"), np.uint8),
                   op=np.array([OP_NAMES.index("open")] * opens + [OP_NAMES.index("close")]
                               * opens, np.uint8),
                   file_id=np.full(n, 1, np.uint64), offset=np.zeros(n, np.int64),
                   length=np.zeros(n, np.int64),
                   start=np.concatenate([t0, t0 + stay]),
                   end=np.concatenate([t0 + 1e-5, t0 + stay + 1e-5]))  # fmt: skip


# the job's other I/O: room under the I/O time for the cost
_OTHER = {"file": 2, "rank": 0, "POSIX_WRITES": 1, "POSIX_BYTES_WRITTEN": 1,
          "POSIX_F_WRITE_TIME": 1.0}


def test_an_input_parsed_at_every_open_costs_the_time_it_stays_open():
    opens = 20
    # rank 0: each open of the 661-byte input stays open 10 ms (parsing).
    row = {"file": 1, "rank": 0, "POSIX_OPENS": opens, "POSIX_READS": 3 * opens,
           "POSIX_BYTES_READ": 661 * opens, "POSIX_MAX_BYTE_READ": 660,
           "POSIX_F_META_TIME": 0.001, "POSIX_F_READ_TIME": 0.001}
    tr = trace(counters("POSIX", [row, _OTHER]))
    tr.meta_records = _open_close_records(opens, 0.01)
    f = only(findings(tr, "reopened-files"))
    spans = opens * (0.01 + 1e-5)
    assert f.evidence["open_seconds"] == pytest.approx(spans)
    assert f.cost_seconds == pytest.approx(spans * (1 - 1 / opens))
    # The calls' own time is I/O time; the rest of the spans (parsing) is not.
    calls = 0.001 + 0.001 * (opens - 1) / opens
    assert f.evidence["outside_io_seconds"] == pytest.approx(spans * (1 - 1 / opens) - calls)
    # Without the records, the calls' own time.
    tr.meta_records = type(tr.meta_records).empty()
    f = only(findings(tr, "reopened-files"))
    assert f.cost_seconds == pytest.approx(calls)


def test_a_file_appended_a_row_per_open_costs_the_time_it_stays_open():
    opens = 120  # above reopen_count (100)
    # each open appends one row, formatted while the file is open (10 ms)
    row = {"file": 1, "rank": 0, "POSIX_OPENS": opens, "POSIX_WRITES": opens,
           "POSIX_BYTES_WRITTEN": 40 * opens, "POSIX_MAX_BYTE_WRITTEN": 40 * opens - 1,
           "POSIX_F_META_TIME": 0.001, "POSIX_F_WRITE_TIME": 0.001}
    tr = trace(counters("POSIX", [row, _OTHER]))
    tr.meta_records = _open_close_records(opens, 0.01)
    f = only(findings(tr, "reopened-files"))
    spans = opens * (0.01 + 1e-5)
    assert f.cost_seconds == pytest.approx(spans * (1 - 1 / opens))
    assert f.evidence["outside_io_seconds"] > 0
    # Many writes per open: the span is mostly those calls, already counted.
    many = {**row, "POSIX_WRITES": 100 * opens}
    tr = trace(counters("POSIX", [many, _OTHER]))
    tr.meta_records = _open_close_records(opens, 0.01)
    f = only(findings(tr, "reopened-files"))
    assert f.cost_seconds < 0.01 and "outside_io_seconds" not in f.evidence


@pytest.mark.parametrize(("lang", "snippet"), [("c", advice.C_ALIGN_OFFSETS),
                                               ("python", advice.PY_ALIGN_OFFSETS),
                                               ("fortran", advice.FORTRAN_ALIGN_OFFSETS)])
def test_misaligned_offsets_advice_per_language(lang, snippet):
    row = {"POSIX_WRITES": 100, "POSIX_FILE_NOT_ALIGNED": 90, "POSIX_FILE_ALIGNMENT": 4096,
           "POSIX_F_WRITE_TIME": 1.0}
    tr = _with_language(trace(counters("POSIX", [row])), lang)
    f = only(findings(tr, "posix-misaligned-file"))
    assert (f.snippet, f.snippet_lang) == (snippet, lang)


def test_cpp_small_writes_say_newline_not_endl():
    tr = _with_language(trace(counters("POSIX", [_SMALL_W])), "c++")
    f = only(findings(tr, "posix-small-writes"))
    assert f.snippet == advice.CPP_AGGREGATE and f.snippet_lang == "c++"
    assert "'\\n'" in f.snippet and "std::endl" in f.snippet


def test_fortran_collective_write_advice_has_the_view_and_write_all():
    f = only(findings(_independent(lang="fortran"), "mpiio-collective-writes"))
    assert "call MPI_File_write_all" in f.snippet and "call MPI_File_set_view" in f.snippet


def test_collective_time_uses_the_rate_the_file_system_showed_if_faster():
    tr = _independent()
    # POSIX moved the 4 x 2000 KiB in 4 ms: 2 GB/s, faster than the default.
    c = tr.counters["POSIX"]
    c.floats[:, c.float_names.index("POSIX_F_WRITE_TIME")] = 0.001
    f = only(findings(tr, "mpiio-collective-writes"))
    assert f.cost_seconds == pytest.approx(0.5 - 0.004)


def test_covered_seconds_of_intervals():
    import numpy as np

    from iopilot.checks.mpiio import _covered

    start, end = np.array([0.0, 1.0, 1.5, 5.0]), np.array([0.5, 2.0, 3.0, 6.0])
    got = _covered(start, end, np.array([0.0, 0.25, 2.5, 3.0, 4.0]),
                   np.array([10.0, 1.25, 5.5, 4.0, 4.5]))  # fmt: skip
    assert got == pytest.approx([3.5, 0.5, 1.0, 0.0, 0.0])


def test_waiting_for_another_ranks_reads_is_not_computation():
    calls = _calls(0.01)
    # Rank 0 reads its input while the others wait between their calls.
    rows = [(0, "r", 9, 0, 100, 0.0011 + k * 0.011, 0.0109 + k * 0.011) for k in range(9)]
    recs = type(calls).concat([calls, records(rows, layer="STDIO")])
    f = only(findings(_independent(recs), "mpiio-blocking-writes"), Level.INFO)
    assert f.evidence["compute_seconds"] == 0.0
