"""What every finding promises, whatever the check: on the logs that, between
them, make every check speak (at every level it has), with the default
thresholds and with the cap on HIGH findings lifted.

A check that leaves out a file table, names its columns or evidence in
another style, gives a snippet no language, or words its message and advice
other than as sentences breaks one of these."""

from __future__ import annotations

import pytest

from iopilot import api
from iopilot.demo import example_dir
from kit import SHARED, keeps_contract, shared_logs

# Between them these make all 84 (check, level) pairs the corpus has appear.
EXAMPLES = ["ior_hdf5_example.darshan", "dxt.darshan", "sample-badost.darshan",
            "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan"]
CORPUS = {"jlbez_8a_benchmark_write_parallel_id1322696_8-21-14519-8141979180909667175_12.darshan",
          "hdf5_diagonal_write_1_byte_dxt.darshan", "partial_data_stdio.darshan",
          "partial_data_dxt.darshan", "nonmpi_dxt_anonymized.darshan",
          "shane_ior-PNETCDF_id438100-438100_11-9-41525-10280033558448664385_1.darshan",
          "shane_ior-HDF5_id438090-438090_11-9-41522-17417065676046418211_1.darshan",
          "snyder_python3_id3116902-2110365_12-19-66957-188958432683465822_1.darshan"}
LOGS = [str(example_dir() / n) for n in EXAMPLES] + [
    str(SHARED / n) if isinstance(n, str) else n for n in shared_logs(keep=CORPUS.__contains__)]
ANY_TIME = ["high_min_io_seconds=0", "high_min_io_share=0"]

def _findings(path: str, lifted: bool):
    return api.diagnose(path, thresholds=api.thresholds(None, ANY_TIME if lifted else [])).findings


def test_the_chosen_corpus_logs_are_all_there():
    if SHARED.is_dir():  # (without the corpus, one skipped parameter stands for them)
        assert len(LOGS) == len(EXAMPLES) + len(CORPUS)


@pytest.mark.parametrize("lifted", [False, True], ids=["defaults", "any-time"])
@pytest.mark.parametrize("log", LOGS)
def test_every_finding_keeps_the_contract(log, lifted):
    findings = _findings(log, lifted)
    assert findings
    for f in findings:
        keeps_contract(f)
