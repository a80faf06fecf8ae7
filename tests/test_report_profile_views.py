"""The page data of the heatmap and MPI views, on hand-made models: rank
grouping at its edges, empty ranks, and the parts of each rank's MPI time."""

from __future__ import annotations

import numpy as np
import pytest

from iopilot.checks import thresholds as th
from iopilot.checks.engine import Diagnosis, summarize
from iopilot.model import Heatmap, MpiProfile
from iopilot.report.views import PageContext, apmpi, heatmap
from iopilot.report.views.apmpi import MPI_BARS
from iopilot.report.views.heatmap import HEAT_ROWS
from kit import trace
from test_report_html import _decode


def _ctx(t) -> PageContext:
    return PageContext(Diagnosis(t, [], summarize(t), th.defaults()), None)


def heatmap_data(t):
    return heatmap.data(_ctx(t))


def mpi_data(t):
    return apmpi.data(_ctx(t))


def _heat_trace(nprocs: int, ranks: np.ndarray, bins: int = 3):
    t = trace(nprocs=nprocs)
    read = np.outer(ranks + 1, np.arange(1, bins + 1)).astype(np.int64)
    t.heatmaps = {"POSIX": Heatmap("POSIX", 0.5, ranks.astype(np.int64), read,
                                   np.zeros_like(read))}  # fmt: skip
    return t


@pytest.mark.parametrize(("nprocs", "per_row", "rows"), [
    (1, 1, 1), (HEAT_ROWS, 1, HEAT_ROWS), (HEAT_ROWS + 1, 2, (HEAT_ROWS + 2) // 2),
    (3 * HEAT_ROWS, 3, HEAT_ROWS), (3 * HEAT_ROWS + 1, 4, -(-(3 * HEAT_ROWS + 1) // 4)),
])  # fmt: skip
def test_heatmap_rows_group_ranks_past_the_limit(nprocs, per_row, rows):
    t = _heat_trace(nprocs, np.arange(nprocs))
    d = _decode(heatmap_data(t))
    assert (d["nranks"], d["per_row"], d["rows"]) == (nprocs, per_row, rows)
    assert rows <= HEAT_ROWS
    lay = d["layers"][0]
    grid = lay["read"].reshape(rows, 3)
    h = t.heatmaps["POSIX"]
    assert grid.sum() == h.total("read") == lay["bytes_read"]  # nothing lost in grouping
    # row r holds ranks r*per_row ... r*per_row + per_row - 1
    want = np.zeros((rows, 3))
    np.add.at(want, h.rank // per_row, h.read)
    assert np.array_equal(grid, want)
    assert lay["write"] is None  # nothing written: no grid sent
    assert lay["bin_seconds"] == 0.5 and lay["label"] == "POSIX"


def test_ranks_without_a_record_are_empty_rows_and_rows_cover_the_job():
    t = _heat_trace(40, np.array([1, 5, 39]))  # 40 ranks, three did I/O
    d = _decode(heatmap_data(t))
    grid = d["layers"][0]["read"].reshape(d["rows"], 3)
    assert d["rows"] == 40 and d["layers"][0]["ranks"] == 3
    assert set(np.flatnonzero(grid.sum(axis=1))) == {1, 5, 39}
    # a record beyond nprocs (a job whose size was written wrong) still gets its row
    t = _heat_trace(2, np.array([0, 3]))
    assert _decode(heatmap_data(t))["nranks"] == 4


def test_no_heatmap_and_empty_heatmaps_give_no_view():
    t = trace(nprocs=2)
    assert heatmap_data(t) is None
    t.heatmaps = {"POSIX": Heatmap("POSIX", 1.0, np.zeros(0, np.int64),
                                   np.zeros((0, 4), np.int64), np.zeros((0, 4), np.int64))}
    assert heatmap_data(t) is None


def _mpi_trace(nprocs: int, sync: bool):
    t = trace(nprocs=nprocs)
    n = nprocs
    ops = tuple(f"MPI_OP{k}" for k in range(8))
    seconds = np.tile(np.arange(8, 0, -1, dtype=np.float64), (n, 1))  # OP0 costs most
    sync_s = np.full((n, 1), 0.5 if sync else 0.0)
    comm = seconds.sum(axis=1) + sync_s[:, 0]
    t.mpi = MpiProfile(rank=np.arange(n), host=("h",) * n, ops=ops, calls=np.ones((n, 8), np.int64),
                       seconds=seconds, max_seconds=seconds, bytes=np.zeros((n, 8), np.int64),
                       sync_ops=("MPI_OP0",), sync_seconds=sync_s, comm_seconds=comm,
                       sync_measured=sync)  # fmt: skip
    return t


@pytest.mark.parametrize("sync", [True, False])
def test_mpi_bars_split_each_ranks_time_without_loss(sync):
    t = _mpi_trace(4, sync)
    d = _decode(mpi_data(t))
    assert [s["operation"] for s in d["stacked"]] == ["MPI_OP0", "MPI_OP1", "MPI_OP2", "MPI_OP3",
                                                      "MPI_OP4"]  # fmt: skip
    parts = sum(s["seconds"] for s in d["stacked"]) + d["other"]
    if sync:
        assert np.allclose(d["sync"], 0.5)
        parts = parts + d["sync"]
    else:
        assert d["sync"] is None
    assert np.allclose(parts, d["total"]) and np.allclose(d["total"], t.mpi.comm_seconds)
    assert np.allclose(d["other"], 3 + 2 + 1)  # OP5-OP7: the operations not drawn one by one
    assert d["mean_rank_seconds"]["MPI_OP0"] == 8.0


@pytest.mark.parametrize(("nprocs", "per_bar"), [(MPI_BARS, 1), (MPI_BARS + 1, 2)])
def test_mpi_bars_group_ranks_past_the_limit(nprocs, per_bar):
    d = _decode(mpi_data(_mpi_trace(nprocs, False)))
    assert d["per_bar"] == per_bar and d["bars"] == -(-nprocs // per_bar)
    assert np.isclose(d["total"].sum(), 36.0 * nprocs)


def test_no_mpi_profile_gives_no_view():
    assert mpi_data(trace(nprocs=2)) is None
