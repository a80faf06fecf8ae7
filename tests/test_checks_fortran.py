"""fortran-element-io and fortran-formatted-io on hand-made FORTRAN counters:
both sides of every threshold, the cost estimate, the source line and the
snippets (serial and parallel)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pytest

from iopilot.model import Counters
from iopilot.vocabulary import COUNTERS, FCOUNTERS
from kit import findings, only, trace

SRC = 77  # the id of the source file name in the trace's name table
ELEMENT, FORMATTED = "fortran-element-io", "fortran-formatted-io"


def fortran(rows: Iterable[Mapping[str, float]]) -> Counters:
    """A FORTRAN counters table: each row has ``file``, ``rank`` and counters
    named without the FORTRAN_ prefix (the rest are zero)."""
    rows = list(rows)
    inames = tuple(f"FORTRAN_{n}" for n in COUNTERS)
    fnames = tuple(f"FORTRAN_{n}" for n in FCOUNTERS)
    ints = np.zeros((len(rows), len(inames)), np.int64)
    floats = np.zeros((len(rows), len(fnames)), np.float64)
    for i, r in enumerate(rows):
        for k, v in r.items():
            if k in ("file", "rank"):
                continue
            if f"FORTRAN_{k}" in inames:
                ints[i, inames.index(f"FORTRAN_{k}")] = v
            else:
                floats[i, fnames.index(f"FORTRAN_{k}")] = v
    return Counters("FORTRAN", np.array([r.get("file", 1) for r in rows], np.uint64),
                    np.array([r.get("rank", 0) for r in rows], np.int64), ints, floats,
                    inames, fnames)  # fmt: skip


def element_row(n: int = 20_000, each: int = 8, seconds: float = 0.5, **kw: float) -> dict:
    return {"file": 1, "rank": 0, "WRITES": n, "UNFORMATTED_WRITES": n, "ITEMS_WRITTEN": n,
            "BYTES_WRITTEN": n * each, "F_WRITE_TIME": seconds, "SITE_SOURCE": SRC,
            "SITE_LINE": 42, "SITE_STATEMENTS": n, "F_SITE_TIME": seconds, **kw}  # fmt: skip


def formatted_row(n: int = 100_000, nbytes: int = 1 << 20, seconds: float = 0.2,
                  **kw: float) -> dict:  # fmt: skip
    return {"file": 1, "rank": 0, "WRITES": n, "FORMATTED_WRITES": n, "ITEMS_WRITTEN": n,
            "BYTES_WRITTEN": nbytes, "F_WRITE_TIME": seconds, "SITE_SOURCE": SRC,
            "SITE_LINE": 9, "SITE_STATEMENTS": n, "F_SITE_TIME": seconds, **kw}  # fmt: skip


def run(*rows: dict, check: str, nprocs: int = 1, posix: Counters | None = None, **th: float):
    tables = [fortran(rows)] + ([posix] if posix is not None else [])
    tr = trace(*tables, nprocs=nprocs, names={SRC: "solver.f90", 1: "/data/out.bin"})
    return findings(tr, check, **th)


def test_element_io_names_the_line_and_prices_the_saving():
    f = only(run(element_row(), check=ELEMENT))
    assert "20,000 unformatted WRITE statements" in f.message
    assert "line 42 of solver.f90" in f.message and "line 42 of solver.f90" in f.recommendation
    assert f.snippet_lang == "fortran" and "write(u) a" in f.snippet
    assert "MPI_File_write_at_all" not in f.snippet  # a serial job
    # 160 kB at the default bandwidth (1 GiB/s) take ~0.15 ms: almost all is saved
    fixed = 20_000 * 8 / (1024 * 1024 * 1024)
    assert f.cost_seconds == pytest.approx(0.5 - fixed, abs=1e-6)
    assert f.evidence["source_line"] == 42 and f.evidence["statements"] == 20_000


def test_element_io_takes_the_file_systems_bandwidth_for_the_fixed_form():
    from kit import counters

    posix = counters("POSIX", [{"file": 1, "rank": 0, "POSIX_WRITES": 10,
                                "POSIX_BYTES_WRITTEN": 160_000,
                                "POSIX_F_WRITE_TIME": 0.1}])  # fmt: skip
    f = only(run(element_row(), check=ELEMENT, posix=posix))
    assert f.cost_seconds == pytest.approx(0.4, abs=1e-6)  # 0.5 s minus POSIX's 0.1 s
    assert f.evidence["fixed_seconds"] == pytest.approx(0.1)


@pytest.mark.parametrize("n, fires", [(10_000, True), (9_999, False)])
def test_element_io_statement_count_threshold(n, fires):
    assert bool(run(element_row(n=n), check=ELEMENT)) is fires


@pytest.mark.parametrize("each, fires", [(512, True), (513, False)])
def test_element_io_bytes_per_statement_threshold(each, fires):
    assert bool(run(element_row(each=each), check=ELEMENT)) is fires


@pytest.mark.parametrize("min_time, fires", [(0.49, True), (0.51, False)])
def test_element_io_min_time_threshold(min_time, fires):
    assert bool(run(element_row(), check=ELEMENT, fortran_min_time=min_time)) is fires


def test_element_io_is_for_unformatted_statements():
    row = element_row()
    row.update(UNFORMATTED_WRITES=0, FORMATTED_WRITES=20_000)
    assert run(row, check=ELEMENT) == []


@pytest.mark.parametrize("nbytes, fires", [(1 << 20, True), ((1 << 20) - 1, False)])
def test_formatted_io_bytes_threshold(nbytes, fires):
    assert bool(run(formatted_row(nbytes=nbytes), check=FORMATTED)) is fires


@pytest.mark.parametrize("min_time, fires", [(0.19, True), (0.21, False)])
def test_formatted_io_min_time_threshold(min_time, fires):
    assert bool(run(formatted_row(), check=FORMATTED, fortran_min_time=min_time)) is fires


def test_formatted_io_adds_both_directions_of_a_file():
    row = formatted_row(READS=50_000, FORMATTED_READS=50_000, BYTES_READ=1 << 20,
                        F_READ_TIME=0.1)  # fmt: skip
    f = only(run(row, check=FORMATTED))
    assert "100,000 formatted WRITE statements" in f.message
    assert "50,000 formatted READ statements" in f.message
    assert f.cost_seconds == pytest.approx(0.3 - 2 * (1 << 20) / (1 << 30), abs=1e-6)
    assert "form='unformatted'" in f.snippet and "line 9 of solver.f90" in f.message


def test_formatted_io_is_for_formatted_statements():
    row = formatted_row()
    row.update(FORMATTED_WRITES=0, UNFORMATTED_WRITES=100_000)
    assert run(row, check=FORMATTED) == []


def test_parallel_jobs_get_mpiio_and_hdf5_forms_and_the_slowest_rank():
    rows = [element_row(rank=0, seconds=0.3), element_row(rank=1, seconds=0.6, file=2)]
    f = only(run(*rows, check=ELEMENT, nprocs=2))
    assert "MPI_File_write_at_all" in f.snippet and "h5dwrite_f" in f.snippet
    assert "on rank 1" in f.message and f.evidence["rank"] == 1
    assert f.cost_seconds == pytest.approx(0.6, abs=1e-3)


def test_no_fortran_layer_no_finding():
    from kit import counters

    posix = counters("POSIX", [{"file": 1, "rank": 0, "POSIX_WRITES": 10 ** 6,
                                "POSIX_BYTES_WRITTEN": 10 ** 6, "POSIX_F_WRITE_TIME": 5.0}])
    tr = trace(posix)
    assert findings(tr, ELEMENT) == [] and findings(tr, FORMATTED) == []
