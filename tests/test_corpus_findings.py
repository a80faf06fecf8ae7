"""Concrete findings on real logs whose behaviour is known (shared corpus, present in CI)."""

from __future__ import annotations

import json

import pytest

from iopilot.checks import Level, diagnose
from iopilot.checks.engine import drishti_codes
from iopilot.cli import main
from iopilot.sources import load
from kit import SHARED, shared_logs

pytestmark = pytest.mark.skipif(not SHARED.exists(), reason="shared log corpus not present")


def run(name: str):
    return diagnose(load(str(SHARED / name)))


def by_check(d, check_id):
    found = [f for f in d.findings if f.check == check_id]
    assert found, f"{check_id} not in {[f.check for f in d.findings]}"
    return found[0]


def test_partial_stdio_is_stdio_heavy_and_flagged_partial():
    # One finding with stdio-time (the same calls), its Drishti code kept.
    assert "S01" in drishti_codes(run("partial_data_stdio.darshan").findings)
    d = diagnose(load(str(SHARED / "partial_data_stdio.darshan")), merge=False)
    f = by_check(d, "stdio-share")
    assert f.level == Level.HIGH and f.drishti == "S01"
    assert f.evidence["stdio_bytes"] / f.evidence["total_bytes"] > 0.99
    assert f.files_total == 1022
    assert any("STDIO is partial" in w for w in d.warnings)


def test_partial_logs_warn_in_every_output(capsys):
    # Drishti crashes on these logs (their hints field is "no").
    log = str(SHARED / "partial_data_dxt.darshan")
    assert main(["report", log, "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert "DXT_POSIX (partial)" in out and "65,536 of the 1,000,000" in out
    assert main(["report", log, "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["reports"][0]
    assert r["partial"] is True and len(r["warnings"]) >= 3
    assert main(["report", log, "--csv"]) == 0
    assert "incomplete-data" in capsys.readouterr().out


def test_collective_mpiio_log_is_recognised():
    d = run("LOCAL_mpi-io-test_coll_4p_dxt_v3.5.0.darshan")
    for check_id, code in (("mpiio-collective-writes", "M05"), ("mpiio-collective-reads", "M04")):
        f = by_check(d, check_id)
        assert f.level == Level.OK and f.drishti == code
        assert f.evidence["collective"] == 16 and f.evidence["independent"] == 0


def test_treddy_mpiio_is_independent_and_large():
    # 32 ranks, 4 x 16 MiB independent writes and reads each: below the point
    # where missing collectives matter, which the finding must say.
    d = run("treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan")
    f = by_check(d, "mpiio-collective-writes")
    assert f.level == Level.INFO
    assert f.evidence == {"collective": 0, "independent": 128, "nonblocking": 0}
    assert "16.0 MiB each" in f.message


def test_hdf5_one_byte_writes_are_tiny():
    d = run("hdf5_diagonal_write_1_byte_dxt.darshan")
    f = by_check(d, "hdf5-small-dataset-access")
    assert f.level >= Level.WARN
    assert "1 B per call" in f.message


def test_e3sm_small_requests_under_collective_io_get_buffer_advice():
    d = run("e3sm_io_heatmap_only.darshan")
    f = by_check(d, "posix-small-writes")
    # 306,777 writes fall in bins up to 100K_1M; 36,500 of them are exactly 1 MiB
    # (the log's second most common access size), which is not small
    assert f.level == Level.HIGH and f.evidence["small_writes"] == 270_277
    assert f.evidence["writes"] == 306_777
    assert "cb_buffer_size" in f.snippet and "already in use" in f.recommendation
    assert by_check(d, "mpiio-collective-writes").level == Level.OK


def test_empty_log_has_nothing_to_say():
    d = run("empty_log.darshan")
    assert d.findings == [] and d.layers == []


def test_pnetcdf_and_lustre_logs():
    d = run("shane_ior-PNETCDF_id438100-438100_11-9-41525-10280033558448664385_1.darshan")
    assert by_check(d, "pnetcdf-independent").level == Level.WARN
    d = run("snyder_python3_id3116902-2110365_12-19-66957-188958432683465822_1.darshan")
    f = by_check(d, "lustre-ost-imbalance")
    assert f.level == Level.WARN


@pytest.mark.parametrize("name", shared_logs())
def test_merged_findings_keep_every_drishti_warning(name):
    # One finding per root cause must not hide a Drishti code: the codes of
    # the findings merged away stay in the one kept (drishti_codes reads them).
    trace = load(str(SHARED / name))
    apart = {f.drishti for f in diagnose(trace, merge=False).findings
             if f.level >= Level.WARN and f.drishti}  # fmt: skip
    merged = diagnose(load(str(SHARED / name))).findings
    assert drishti_codes(merged) >= apart
    assert len(merged) <= len(diagnose(load(str(SHARED / name)), merge=False).findings)
