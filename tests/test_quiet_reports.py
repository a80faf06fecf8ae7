"""Quieter reports: the MPI runtime's files and a Python job's own source set
aside, the interpreter's children not counted as the program's exits, lists
that end in plain words, CSV rows that are findings only, and ``--summary``
rows that tell two jobs of one program apart."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iopilot import api
from iopilot.capture.run import library_path
from iopilot.model.scope import PROGRAM_SOURCE, FileScope
from iopilot.report import csv_report, fleet, terminal
from iopilot.sources.trace_accounting import accounting
from iopilot.sources.trace_procs import Proc
from kit import counters, trace

IOPILOT = [sys.executable, "-m", "iopilot"]
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}  # fmt: skip
SCRIPT = """
import platform, sys
platform.processor()  # runs `uname -p` in a child process
rank = 0
if "--mpi" in sys.argv:
    from mpi4py import MPI
    rank = MPI.COMM_WORLD.Get_rank()
with open(f"data{rank}.bin", "wb") as f:
    for i in range(3000):
        f.write(b"y" * 100)
"""


def traced(tmp: Path, name: str, *command: str) -> Path:
    library_path()
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_")}
    env.update(MPI_ENV, IOPILOT_TRACE_ROOT=str(tmp / "traces"))
    d = tmp / name
    p = subprocess.run([*IOPILOT, "run", "--trace-only", "--trace-dir", str(d), "--", *command],
                       cwd=tmp, env=env, capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr
    return d


def _paths(f: dict) -> str:
    return json.dumps([f["message"], f["files"], f["evidence"]])


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_mpi_python_job_names_neither_its_script_nor_pmix_files(tmp_path):
    pytest.importorskip("mpi4py")
    (tmp_path / "job_script.py").write_text(SCRIPT)
    d = traced(tmp_path, "t", "mpirun", "-np", "2", sys.executable, "job_script.py", "--mpi")
    r = json.loads(api.report(str(d), "json"))["reports"][0]
    assert r["findings"], "the data files still get findings"
    for f in r["findings"]:
        assert "job_script.py" not in _paths(f), f["check"]
        assert ".pmix" not in _paths(f), f["check"]
    reasons = {x["reason"]: x["files"] for x in r["set_aside"]["reasons"]}
    assert reasons[PROGRAM_SOURCE] == 1
    assert any(e["path"].endswith("/job_script.py") for e in r["set_aside"]["listed"])
    assert "data0.bin" in json.dumps(r["findings"])  # the job's own files stay
    # the ranks' `uname -p` children are not the program's exits
    assert r["processes"]["exit_codes"] == {"0": 2}
    assert r["processes"]["children"] == {"uname": 2}


def test_the_interpreters_child_is_not_counted_as_an_exit(tmp_path):
    (tmp_path / "plat.py").write_text(SCRIPT)
    d = traced(tmp_path, "t", sys.executable, "plat.py")
    text = api.report(str(d), "terminal", color=False)
    assert "(exit 0: 1, 1 child process the program ran: uname)" in text
    assert "exit: 1" not in text
    p = json.loads(api.report(str(d), "json"))["reports"][0]["processes"]
    assert p["exit_codes"] == {"0": 1} and p["children"] == {"uname": 1}


def _proc(pid: int, ppid: int, rank: int | None, code: int | None, exe: str,
          image: int = 0) -> Proc:  # fmt: skip
    summary = {"ended_by": "exit", "exit_code": code, "exe": exe}
    return Proc(stem=f"h-{pid}-{image}", root=Path("/t"), version=2, pid=pid, ppid=ppid,
                 image=image, host="h", t0=0.0, t_end=1.0, written_rank=rank or 0,
                 known=rank is not None, summary=summary, rec_size=None, rank=rank)  # fmt: skip


def test_children_of_ranks_are_told_apart_from_ranks_and_launchers():
    procs = [_proc(10, 5, 0, 0, "/usr/bin/python3"), _proc(11, 5, 1, 3, "/usr/bin/python3"),
             _proc(12, 10, 0, None, "/usr/bin/uname"), _proc(13, 11, 1, 0, "/usr/bin/uname"),
             _proc(5, 1, None, 0, "/usr/bin/mpirun")]  # fmt: skip
    a = accounting(procs)
    # mpirun is a launcher (rank None): its exit is not a child's, it is counted
    assert a["exit_codes"] == {"0": 2, "3": 1}
    assert a["children"] == {"uname": 2}
    assert "2 child processes the program ran: uname ×2" in a["summary"]
    # a process whose parent is not a rank is a rank itself, and counts
    alone = accounting([_proc(20, 1, 0, 0, "/bin/app"), _proc(21, 1, 1, 4, "/bin/app")])
    assert alone["exit_codes"] == {"0": 1, "4": 1} and alone["children"] == {}


# --- scope ---------------------------------------------------------------------------------------


def _py_trace(names: dict[int, str], written: dict[int, int], command: str):
    rows = [{"file": i, "POSIX_BYTES_READ": 100, "POSIX_READS": 1,
             "POSIX_BYTES_WRITTEN": written.get(i, 0), "POSIX_WRITES": int(i in written)}
            for i in names]  # fmt: skip
    t = trace(counters("POSIX", rows), names=names)
    from iopilot._record import replace

    return replace(t, job=replace(t.job, executable=command))


def test_a_python_jobs_read_only_sources_are_set_aside_not_its_written_ones():
    names = {1: "/home/u/run.py", 2: "/home/u/helpers.py", 3: "/home/u/gen/out.py",
             4: "/home/u/data.bin", 5: "/home/u/.pmix/components"}  # fmt: skip
    t = _py_trace(names, {3: 10, 4: 100}, "mpirun -np 2 python3 run.py")
    scope = FileScope.build(env={})
    assert scope.program_source_ids(t) == {1: PROGRAM_SOURCE, 2: PROGRAM_SOURCE}
    kept = scope.apply(t)
    assert {kept.names[int(i)] for i in kept.counters["POSIX"].file_id} == {
        "/home/u/gen/out.py", "/home/u/data.bin"}  # fmt: skip
    reasons = {r["reason"] for r in kept.set_aside["reasons"]}
    assert reasons == {PROGRAM_SOURCE, "MPI runtime files"}
    # not a Python job: its .py files are its data; without defaults nothing goes
    assert scope.program_source_ids(_py_trace(names, {}, "./sim run.py")) == {}
    assert FileScope.build(defaults=False, env={}).program_source_ids(t) == {}


@pytest.mark.parametrize("path, gone", [
    ("/root/.pmix/components", True), ("/scratch/ompi.node1.1000/jf.0/1/sm", True),
    ("/tmp/prte.node1.0/dvm", True), ("/home/u/.openmpi/mca-params.conf", True),
    ("/home/u/pmix_study.h5", False), ("/home/u/ompi.results.txt", False),
    ("/scratch/run.1000/out", False),
])  # fmt: skip
def test_mpi_runtime_files_are_set_aside_by_default(path, gone):
    assert (FileScope.build(env={}).reason(path) == "MPI runtime files") is gone
    assert FileScope.build(defaults=False, env={}).reason(path) is None


# --- wording, CSV, summary -----------------------------------------------------------------------


def _report(findings: list[dict], **processes) -> dict:
    procs = {"summary": "2 process images: 2 ended normally (exit 0: 2)", "ended_abnormally": 0,
             "not_seen": "not seen by the runtime: data moved by sendfile", **processes}
    return {"source": "t", "job": {"executable": "python3 a.py", "nprocs": 1, "runtime": 1.0,
                                   "format": "iopilot 2", "writer": "", "status": None},
            "modules": [], "records": 0, "warnings": [], "processes": procs, "layers": [],
            "counts": {"HIGH": 0, "WARN": 1, "INFO": 0, "OK": 0}, "findings": findings,
            "thresholds_fired": {}}  # fmt: skip


def _finding(kind: str, listed: int, total: int) -> dict:
    files = [{"path": f"{kind} {i}", "bytes": i} for i in range(listed)]
    locs = [{"kind": kind, "path": f"{kind} {i}"} for i in range(listed)]
    return {"check": "io-phases", "layer": "PHASES", "level": "WARN", "drishti": None,
            "drishti_note": None, "message": "Phases.", "files": files, "files_total": total,
            "recommendation": None, "snippet": None, "locations": locs,
            "cost_seconds": 1.0, "evidence": {}}  # fmt: skip


@pytest.mark.parametrize("kind, listed, total, want", [
    ("phase", 5, 8, "and 3 other phases"),
    ("phase", 5, 6, "and 1 other phase"),
    ("file", 5, 7, "and 2 other files"),
    ("rank", 5, 6, "and 1 other rank"),
])  # fmt: skip
def test_lists_end_in_plain_words(kind, listed, total, want):
    text = terminal.render(_report([_finding(kind, listed, total)]), terminal.Style(False))
    assert want in text
    assert "more" not in text and "(s)" not in text.split("Phases.")[1]


def test_no_line_when_the_list_is_whole():
    text = terminal.render(_report([_finding("phase", 3, 3)]), terminal.Style(False))
    assert "other phase" not in text


def test_verbose_hint_only_when_verbose_would_show_more():
    f = _finding("file", 8, 20)
    short = terminal.render(_report([f]), terminal.Style(False), files_shown=5)
    assert "and 15 other files (--verbose lists them)" in short
    full = terminal.render(_report([f]), terminal.Style(False), verbose=True)
    assert "and 12 other files" in full and "--verbose" not in full


def test_csv_rows_are_findings_not_notices():
    rows = list(csv.DictReader(io.StringIO(csv_report.render([_report([_finding("file", 1, 1)])]))))
    assert [r["check"] for r in rows] == ["io-phases"]
    assert not any("not seen by the runtime" in r["message"] for r in rows)
    # processes that did not end normally, a failed program and incomplete
    # data still are rows: every finding is less sure then
    bad = _report([], ended_abnormally=1, summary="2 process images: 1 ended without a summary")
    bad["job"]["status"] = "program failed: exit status 3"
    bad["warnings"] = ["the trace is incomplete"]
    rows = list(csv.DictReader(io.StringIO(csv_report.render([bad]))))
    assert [(r["check"], r["level"]) for r in rows] == [("incomplete-data", "WARN")] * 3
    assert not any("not seen" in r["message"] for r in rows)


def _job_report(source: str, command: str) -> dict:
    r = _report([])
    r.update(source=source, io_time={"slowest_rank_seconds": 1.0, "slowest_rank": 0,
                                     "share": 0.1, "run_seconds": 10.0})  # fmt: skip
    r["job"]["executable"] = command
    return r


def test_summary_tells_two_python_jobs_apart_by_their_command():
    rows = [fleet.job_row(_job_report("python3-20260101-aaaa", "python3 train.py --epochs 3")),
            fleet.job_row(_job_report("python3-20260101-bbbb",
                                      "mpirun -np 4 /opt/venv/bin/python3 convert.py in.h5"))]
    assert rows[0]["command"] == "python3 train.py --epochs 3"
    text = fleet.render_terminal(rows)
    assert "python3-20260101-aaaa: python3 train.py --epochs 3" in text
    assert "python3-20260101-bbbb: mpirun … python3 convert.py in.h5" in text
    table = list(csv.DictReader(io.StringIO(fleet.render_csv(rows))))
    assert {r["command"] for r in table} == {"python3 train.py --epochs 3",
                                             "mpirun -np 4 /opt/venv/bin/python3 convert.py in.h5"}
    assert fleet.error_row("x", "corrupt")["command"] == ""
