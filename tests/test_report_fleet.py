"""``iopilot report --summary``: one row per job, ranked by I/O core-hours, on
worker processes or a real Dask cluster, with Parquet rows."""

from __future__ import annotations

import csv
import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iopilot.cli import main
from iopilot.demo import example_dir
from iopilot.report import fleet
from kit import CORPUS_ABSENT, SHARED


def _report(source, nprocs, io_s, run_s, findings, jobid=7):
    """A per-log report as json_report.diagnosis_dict writes it (the fields rows use)."""
    counts = {lvl: sum(f["level"] == lvl for f in findings) for lvl in ("HIGH", "WARN", "INFO")}
    return {
        "source": source,
        "job": {"nprocs": nprocs, "jobid": jobid, "runtime": run_s},
        "io_time": {"slowest_rank_seconds": io_s, "slowest_rank": 3, "share": io_s / run_s,
                    "run_seconds": run_s, "by_layer": {}},
        "counts": counts | {"OK": 0},
        "findings": findings,
    }


def _f(check, level, cost):
    return {"check": check, "level": level, "cost_seconds": cost}


def test_rows_rank_jobs_by_io_core_hours_and_checks_by_hours():
    small_many = _report("a.darshan", 1024, 36.0, 100.0,
                         [_f("small-writes", "HIGH", 30.0), _f("meta", "WARN", 2.0)])
    big_few = _report("b.darshan", 2, 3600.0, 7200.0, [_f("meta", "HIGH", 1800.0)])
    quiet = _report("c.darshan", 4, 0.5, 100.0, [_f("small-writes", "INFO", 0.1)])
    rows = [fleet.job_row(r) for r in (quiet, big_few, small_many)]
    rows.append(fleet.error_row("d.darshan", "truncated"))
    ranked = fleet.ranked(rows)
    # 36 s x 1024 ranks = 10.24 core-hours beats 3600 s x 2 ranks = 2 core-hours.
    assert [r["log"] for r in ranked] == ["a.darshan", "b.darshan", "c.darshan", "d.darshan"]
    assert ranked[0]["io_core_hours"] == pytest.approx(36 * 1024 / 3600)
    assert ranked[0]["top_check"] == "small-writes" and ranked[0]["top_cost_seconds"] == 30.0
    assert ranked[0]["io_share"] == pytest.approx(0.36)
    hours = {e["check"]: e for e in fleet.check_hours(ranked)}
    # meta: 1800 s x 2 + 2 s x 1024 = 1.5689 h; small-writes: 30 s x 1024 = 8.53 h.
    assert hours["meta"]["core_hours"] == pytest.approx((1800 * 2 + 2 * 1024) / 3600)
    assert hours["meta"]["jobs"] == 2
    assert hours["small-writes"]["jobs"] == 1  # an INFO finding is not a problem
    assert [e["check"] for e in fleet.check_hours(ranked)] == ["small-writes", "meta"]
    doc = fleet.document(rows)
    assert doc["logs"] == 4 and doc["failed"] == 1
    assert doc["io_core_hours"] == pytest.approx((36 * 1024 + 7200 + 2) / 3600)


def test_csv_has_a_row_per_job_and_neutralises_formulas():
    rows = [fleet.job_row(_report("=cmd|' /C calc'!A0.darshan", 2, 1.0, 10.0, [])),
            fleet.error_row("ok.darshan", "corrupt")]  # fmt: skip
    table = list(csv.reader(io.StringIO(fleet.render_csv(rows))))
    assert table[0] == list(fleet.COLUMNS)
    assert len(table) == 3
    assert not table[1][0].startswith("=")  # a spreadsheet would run it
    assert table[2][0] == "ok.darshan" and table[2][fleet.COLUMNS.index("error")] == "corrupt"


def test_parquet_rows_read_back_as_one_table(tmp_path):
    import pyarrow.dataset as ds

    rows = [fleet.job_row(_report(f"{i}.darshan", i + 1, float(i), 100.0, [])) for i in range(7)]
    rows.append(fleet.error_row("bad.darshan", "corrupt"))
    parts = fleet.write_parquet(rows, tmp_path / "rows", batch=3)
    assert len(parts) == 3 and len(set(parts)) == 3
    fleet.write_parquet(rows[:2], tmp_path / "rows")  # a later run adds parts
    table = ds.dataset(tmp_path / "rows", format="parquet").to_table()
    assert table.num_rows == 10
    assert table.column_names == list(fleet.COLUMNS)
    assert sorted(table.column("nprocs").to_pylist()) == sorted([*range(1, 8), 0, 1, 2])


def _logs(tmp_path: Path) -> Path:
    d = tmp_path / "logs"
    d.mkdir()
    for name in ("example.darshan", "dxt.darshan", "ior_hdf5_example.darshan"):
        (d / name).write_bytes((example_dir() / name).read_bytes())
    (d / "broken.darshan").write_bytes(b"not a darshan log at all" * 10)
    return d


def test_summary_over_a_directory(tmp_path, capsys):
    d = _logs(tmp_path)
    rc = main(["report", str(d), "--summary", "--json", str(tmp_path / "s.json"),
               "--parquet", str(tmp_path / "pq")])  # fmt: skip
    out = capsys.readouterr()
    assert rc == 2  # one log failed; the others are reported
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["logs"] == 4 and doc["failed"] == 1
    jobs = {Path(j["log"]).name: j for j in doc["jobs"]}
    assert jobs["broken.darshan"]["error"]
    assert all(jobs[n]["nprocs"] >= 1 for n in jobs if n != "broken.darshan")
    assert "checks by core-hours" in out.out and "broken.darshan" in out.err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def dask_cluster(tmp_path):
    """A real scheduler and two worker processes, started and stopped here."""
    port = _free_port()
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False")
    dask = str(Path(sys.executable).with_name("dask"))
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--dashboard-address", ":0"], env=env, cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]  # fmt: skip
    address = f"tcp://127.0.0.1:{port}"
    for _ in range(2):
        procs.append(subprocess.Popen([dask, "worker", address, "--nthreads", "1",
                                       "--dashboard-address", ":0"], env=env, cwd=tmp_path,
                                      stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))  # fmt: skip
    try:
        from dask.distributed import Client

        deadline = time.monotonic() + 60
        while True:
            try:
                with Client(address, timeout=5) as c:
                    c.wait_for_workers(2, timeout=30)
                break
            except (OSError, TimeoutError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        yield address
    finally:
        # the workers first: a worker whose scheduler is gone waits for it
        # a while before it stops
        for p in procs[:0:-1]:
            p.terminate()
        for p in procs[:0:-1]:
            p.wait(timeout=30)
        procs[0].terminate()
        procs[0].wait(timeout=30)


def test_summary_on_a_real_dask_cluster_matches_the_local_run(tmp_path, dask_cluster, capsys):
    d = _logs(tmp_path)
    rc = main(["report", str(d), "--summary", "--scheduler", dask_cluster,
               "--json", str(tmp_path / "dask.json")])  # fmt: skip
    assert rc == 2
    rc = main(["report", str(d), "--summary", "-j", "1", "--json", str(tmp_path / "local.json")])
    assert rc == 2
    capsys.readouterr()
    on_dask = json.loads((tmp_path / "dask.json").read_text())
    local = json.loads((tmp_path / "local.json").read_text())
    assert on_dask["jobs"] == local["jobs"]  # the same rows, in the same (ranked) order
    assert on_dask["checks"] == local["checks"]


def _parts(pq_dir: Path) -> dict[int, int]:
    """Rows per writing process, from each part's metadata (HOST-PID)."""
    import pyarrow.parquet as pq

    out: dict[int, int] = {}
    for f in pq_dir.glob("part-*.parquet"):
        meta = pq.read_metadata(f)
        pid = int(meta.metadata[b"iopilot.writer"].decode().rsplit("-", 1)[1])
        out[pid] = out.get(pid, 0) + meta.num_rows
    return out


def test_dask_workers_write_the_parquet_rows_themselves(tmp_path, dask_cluster, capsys):
    import pyarrow.dataset as ds

    d = _logs(tmp_path)
    pq_dir = tmp_path / "pq"
    rc = main(["report", str(d), "--summary", "--scheduler", dask_cluster,
               "--parquet", str(pq_dir), "--json", str(tmp_path / "s.json")])  # fmt: skip
    assert rc == 2
    capsys.readouterr()
    writers = _parts(pq_dir)
    assert sum(writers.values()) == 4 and os.getpid() not in writers
    table = ds.dataset(pq_dir, format="parquet").to_table()
    doc = json.loads((tmp_path / "s.json").read_text())
    assert sorted(table.column("log").to_pylist()) == sorted(j["log"] for j in doc["jobs"])
    assert not list(pq_dir.glob(".*"))  # no half-written part left behind


def _aborting(d: Path) -> str:
    """"3.00" made "3.10": the header checks pass and the library aborts."""
    data = bytearray((SHARED / "mpi-io-test-ppc64-3.0.0.darshan").read_bytes())
    data[2] = ord("1")
    (d / "aborts.darshan").write_bytes(bytes(data))
    return "aborts.darshan"


_NEEDS_300 = pytest.mark.skipif(not (SHARED / "mpi-io-test-ppc64-3.0.0.darshan").exists(),
                                reason=CORPUS_ABSENT)  # fmt: skip


@_NEEDS_300
def test_a_log_that_crashes_the_reader_on_dask_gives_the_local_row(tmp_path, dask_cluster,
                                                                   capsys):  # fmt: skip
    d = _logs(tmp_path)
    bad = _aborting(d)
    pq_dir = tmp_path / "pq"
    rc = main(["report", str(d), "--summary", "--scheduler", dask_cluster,
               "--parquet", str(pq_dir), "--json", str(tmp_path / "dask.json")])  # fmt: skip
    assert rc == 2
    rc = main(["report", str(d), "--summary", "-j", "1", "--json", str(tmp_path / "local.json")])
    capsys.readouterr()
    on_dask = json.loads((tmp_path / "dask.json").read_text())
    local = json.loads((tmp_path / "local.json").read_text())
    assert on_dask["jobs"] == local["jobs"] and len(on_dask["jobs"]) == 5
    jobs = {Path(j["log"]).name: j for j in on_dask["jobs"]}
    assert jobs[bad]["error"] == "crashed while reading: signal 6 (SIGABRT)"
    writers = _parts(pq_dir)
    assert sum(writers.values()) == 5 and os.getpid() not in writers


@_NEEDS_300
def test_a_log_that_kills_a_daemon_worker_costs_one_row(tmp_path):
    # Daemon workers (Dask's default) may not start processes: the log kills the
    # worker, its batch is sent again one log per task, and only it is lost.
    from dask.distributed import LocalCluster

    d = _logs(tmp_path)
    bad = _aborting(d)
    paths = sorted(str(p) for p in d.iterdir())
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:  # fmt: skip
        rows = list(fleet.rows_on_dask(paths, _row, cluster.scheduler_address,
                                       str(tmp_path / "pq")))  # fmt: skip
    by = {Path(r["log"]).name: r for r in rows}
    assert len(rows) == 5 and by[bad]["error"] == "failed on the cluster: KilledWorker"
    assert by["broken.darshan"]["error"] and "cluster" not in by["broken.darshan"]["error"]
    assert all(not by[n]["error"] and by[n]["nprocs"] >= 1
               for n in by if n not in (bad, "broken.darshan"))  # fmt: skip
    writers = _parts(tmp_path / "pq")
    assert sum(writers.values()) == 5 and writers.get(os.getpid()) == 1  # the lost row


def _row(path: str) -> dict:
    from iopilot.checks import thresholds
    from iopilot.cli.reporting import job_row

    return job_row(path, thresholds.defaults(), None)
