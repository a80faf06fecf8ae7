"""`iopilot tune` against real services: Optuna studies shared through a real
PostgreSQL server, and trials run by a real single-node Slurm
(``tests/services.py`` starts and stops both)."""

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from iopilot.errors import InputError
from iopilot.tune.launch import TrialRun, launcher
from services import pid_alive, postgres_server, processes_using, slurm_cluster

PY = sys.executable


@pytest.fixture(scope="module")
def postgres():
    pytest.importorskip("optuna")
    pytest.importorskip("psycopg", reason="psycopg (PostgreSQL driver) is not installed")
    with postgres_server() as server:
        yield server


@pytest.fixture(scope="module")
def slurm():
    with slurm_cluster() as cluster:
        yield cluster


@pytest.fixture
def slurm_env(slurm, monkeypatch):
    """This process pointed at the test cluster, outside any allocation."""
    for key in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    # Open MPI on one node: shared memory only, no TCP listeners.
    monkeypatch.setenv("OMPI_MCA_btl", "self,vader")
    return slurm


# --------------------------------------------------------------------------- the fixtures


def test_services_start_quickly_and_leave_nothing_running():
    t0 = time.monotonic()
    with postgres_server() as pg:
        pg_started = time.monotonic() - t0
        pg_pid, pg_dir = pg.pid, pg.dir
        assert pid_alive(pg_pid)
        assert len(processes_using(pg_dir)) > 1  # the postmaster and its helpers
    assert not pid_alive(pg_pid) and not pg_dir.exists()
    assert processes_using(pg_dir) == []

    t0 = time.monotonic()
    with slurm_cluster() as sl:
        sl_started = time.monotonic() - t0
        sl_pids, sl_dir = list(sl.pids), sl.dir
        assert len(sl_pids) == 2 and all(pid_alive(p) for p in sl_pids)
        # A job still running when the block ends is cancelled, not orphaned.
        r = sl.run("sbatch", "--parsable", "--wrap", "sleep 60")
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 15
        while "R" not in sl.run("squeue", "-h", "-o", "%t").stdout.split():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert len(processes_using(sl_dir)) > 2  # the daemons, slurmstepd, sleep
    assert not any(pid_alive(p) for p in sl_pids) and not sl_dir.exists()
    assert processes_using(sl_dir) == []
    assert pg_started < 15 and sl_started < 15


# --------------------------------------------------------------------------- PostgreSQL

WORKER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import optuna
    url, name, tag, trials, barrier = sys.argv[1:6]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=name, storage=url)
    # Start together with the other worker, so that their trials interleave.
    Path(barrier, tag).touch()
    deadline = time.monotonic() + 20
    while len(list(Path(barrier).iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    def objective(trial):
        trial.set_user_attr("worker", tag)
        x = trial.suggest_float("x", -10, 10)
        time.sleep(0.1)
        return (x - 2) ** 2
    study.optimize(objective, n_trials=int(trials))
""")


def _worker(url, name, tag, trials, barrier):
    return subprocess.Popen([PY, "-c", WORKER, url, name, tag, str(trials), str(barrier)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_processes_share_one_study_and_a_third_resumes_it(postgres, tmp_path):
    import optuna

    url = postgres.create_database("shared_study")
    # Create the schema and the study first: two processes creating optuna's
    # tables at the same moment race.
    optuna.create_study(study_name="s", storage=url, direction="minimize")
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    workers = [_worker(url, "s", tag, 5, barrier) for tag in ("a", "b")]
    for w in workers:
        _, err = w.communicate(timeout=60)
        assert w.returncode == 0, err

    study = optuna.load_study(study_name="s", storage=url)
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 10
    assert sorted(t.number for t in trials) == list(range(10))
    assert len({t._trial_id for t in trials}) == 10
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    by_worker = {tag: [t for t in trials if t.user_attrs["worker"] == tag] for tag in "ab"}
    assert [len(v) for v in by_worker.values()] == [5, 5]
    # They ran at the same time: each started before the other finished.
    spans = {tag: (min(t.datetime_start for t in v), max(t.datetime_complete for t in v))
             for tag, v in by_worker.items()}
    assert spans["a"][0] < spans["b"][1] and spans["b"][0] < spans["a"][1]

    # A third process carries on where they stopped.
    (barrier / "c").touch()
    third = _worker(url, "s", "c", 3, barrier)
    _, err = third.communicate(timeout=60)
    assert third.returncode == 0, err
    study = optuna.load_study(study_name="s", storage=url)
    trials = study.get_trials(deepcopy=False)
    assert sorted(t.number for t in trials) == list(range(13))
    assert sum(t.user_attrs["worker"] == "c" for t in trials) == 3
    assert study.best_value == min(t.value for t in trials)


# --------------------------------------------------------------------------- Slurm


def test_slurm_trial_runs_with_its_environment_and_directory(slurm_env, tmp_path):
    run = launcher("slurm")
    code = ("import os, pathlib; pathlib.Path('made.txt').write_text(os.environ['IOP_X']);"
            "print('hello from', os.environ['SLURM_JOB_ID'])")
    result = run([PY, "-c", code], {"IOP_X": "42"}, tmp_path, 30)
    assert isinstance(result, TrialRun)
    assert result.returncode == 0, result.stderr
    assert not result.timed_out
    assert result.stdout.startswith("hello from ")
    assert (tmp_path / "made.txt").read_text() == "42"
    assert 0 < result.seconds < 30


def test_slurm_mpi_trial_runs_every_rank(slurm_env, tmp_path):
    pytest.importorskip("mpi4py")
    run = launcher("slurm", ranks=2)
    # One write per rank: two ranks' print() calls can interleave mid-line.
    code = ("import os; from mpi4py import MPI; c = MPI.COMM_WORLD;"
            "os.write(1, f'{c.Get_rank()} {c.allreduce(1)}\\n'.encode())")
    result = run([PY, "-c", code], {}, tmp_path, 60)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.split("\n")[:2]) == ["0 2", "1 2"]


def test_slurm_runs_an_mpirun_command_once_in_a_job_of_its_ranks(slurm_env, tmp_path):
    """`iopilot run ... -- mpirun -np 2 app` is one job of two tasks, in which
    mpirun starts both ranks (srun would start one mpirun per task)."""
    pytest.importorskip("mpi4py")
    run = launcher("slurm")
    code = ("import os; from mpi4py import MPI; c = MPI.COMM_WORLD;"
            "n = os.environ['SLURM_NTASKS'];"
            "os.write(1, f'{c.Get_rank()} {c.Get_size()} {n}\\n'.encode())")
    result = run(["mpirun", "-np", "2", PY, "-c", code],
                 {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"},
                 tmp_path, 60)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["0 2 2", "1 2 2"]


def test_mpi_launcher_ranks():
    from iopilot.tune.launch import mpi_launcher_ranks

    assert mpi_launcher_ranks(["./app", "-n", "4"]) is None
    assert mpi_launcher_ranks(["mpirun", "-np", "4", "./app"]) == 4
    assert mpi_launcher_ranks(["/usr/bin/mpiexec", "--oversubscribe", "-n", "3", "x"]) == 3
    assert mpi_launcher_ranks(["mpirun", "--np=6", "x"]) == 6
    assert mpi_launcher_ranks(["mpirun", "x"]) == 1
    wrapped = [PY, "-m", "iopilot", "run", "--trace-dir", "t", "--", "mpirun", "-np", "2", "a"]
    assert mpi_launcher_ranks(wrapped) == 2
    assert mpi_launcher_ranks([PY, "-m", "iopilot", "run", "--", "./a", "mpirun"]) is None


def test_slurm_trial_failure_is_reported(slurm_env, tmp_path):
    run = launcher("slurm")
    result = run([PY, "-c", "import sys; print('partial'); sys.exit(3)"], {}, tmp_path, 30)
    assert result.returncode == 3
    assert result.stdout == "partial\n"
    assert not result.timed_out
    assert "exit code 3" in result.stderr


def test_slurm_trial_past_its_timeout_is_cancelled(slurm_env, tmp_path):
    run = launcher("slurm")
    result = run([PY, "-c", "import time; time.sleep(120)"], {}, tmp_path, 2)
    assert result.timed_out
    assert result.returncode != 0
    assert "timed out after 2 s" in result.stderr
    assert 2 <= result.seconds < 20
    # Cancelled in Slurm too, not only the local srun process.
    _wait_for_queue(slurm_env, empty=True)


def _wait_for_queue(slurm, empty: bool, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while bool(slurm.run("squeue", "-h", "-t", "PD,R,CG", "-o", "%i").stdout.strip()) == empty:
        assert time.monotonic() < deadline, slurm.run("squeue").stdout
        time.sleep(0.1)


@pytest.mark.parametrize("mode", ["srun", "sbatch"])
def test_interrupted_slurm_trial_is_cancelled(slurm_env, tmp_path, mode):
    """Ctrl-C on the tuner while a trial runs cancels the trial's job too."""
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from iopilot.tune.launch import launcher
        launcher("slurm", mode={mode!r})([sys.executable, "-c", "import time; time.sleep(120)"],
                                         {{}}, Path({str(tmp_path)!r}), 300)
    """)
    tuner = subprocess.Popen([PY, "-c", code], stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_queue(slurm_env, empty=False)
        time.sleep(0.3)
        tuner.send_signal(signal.SIGINT)
        _, err = tuner.communicate(timeout=90)
        assert "KeyboardInterrupt" in err
        _wait_for_queue(slurm_env, empty=True)
    finally:
        tuner.kill()
        tuner.wait()


@pytest.mark.parametrize("mode", ["srun", "sbatch"])
def test_slurm_queue_wait_is_not_run_time(slurm_env, tmp_path, mode):
    """A trial queued behind another job is not timed out for its wait, and
    its time is its run's."""
    blocker = slurm_env.run("sbatch", "--parsable", "-n2", "--wrap", "sleep 4")
    assert blocker.returncode == 0, blocker.stderr
    _wait_for_queue(slurm_env, empty=False)
    t0 = time.monotonic()
    run = launcher("slurm", mode=mode)
    result = run([PY, "-c", "import time; time.sleep(0.3)"], {}, tmp_path, 2.5)
    waited = time.monotonic() - t0
    assert (result.returncode, result.timed_out) == (0, False), result.stderr
    assert waited > 3 and result.seconds < 2.5
    _wait_for_queue(slurm_env, empty=True)


def test_slurm_batch_jobs(slurm_env, tmp_path):
    run = launcher("slurm", mode="sbatch")
    done = run([PY, "-c", "import sys; print('out'); sys.exit(4)"], {"A": "1"}, tmp_path, 30)
    assert (done.returncode, done.stdout, done.timed_out) == (4, "out\n", False)
    late = run([PY, "-c", "import time; time.sleep(120)"], {}, tmp_path, 2)
    assert late.timed_out and late.returncode != 0 and late.seconds < 20
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".iopilot-sbatch-")]


def test_slurm_step_inside_an_allocation(slurm_env, tmp_path):
    """Under salloc (SLURM_JOB_ID set) each trial is a step of that job."""
    code = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from iopilot.tune.launch import launcher
        run = launcher("slurm")
        r = run([sys.executable, "-c",
                 "import os; print(os.environ['SLURM_JOB_ID'], os.environ['SLURM_STEP_ID'])"],
                {{}}, Path({str(tmp_path)!r}), 30)
        print(os.environ["SLURM_JOB_ID"], r.stdout.strip(), r.returncode)
    """)
    r = subprocess.run(["salloc", "-N1", "-n1", PY, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    job, step_job, step, rc = r.stdout.split()
    assert step_job == job and step == "0" and rc == "0"


def test_unreachable_slurm_is_an_input_error(slurm_env, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "absent.conf"))
    with pytest.raises(InputError, match="does not exist"):
        launcher("slurm")
    # A valid configuration whose controller is not running.
    conf = tmp_path / "slurm.conf"
    text = Path(slurm_env.env["SLURM_CONF"]).read_text()
    conf.write_text("\n".join(
        "SlurmctldPort=1" if line.startswith("SlurmctldPort=") else line
        for line in text.splitlines()) + "\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    with pytest.raises(InputError, match=r"cannot reach the Slurm controller: .* DOWN"):
        launcher("slurm")
    # The command says so in one line, before any trial.
    r = subprocess.run([PY, "-m", "iopilot", "tune", "--launcher", "slurm", "--trials", "2",
                        "--out", str(tmp_path / "out"), "--", "true"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "error: --launcher slurm: cannot reach the Slurm controller" in r.stderr
    assert "Traceback" not in r.stderr


def test_unknown_launcher_is_an_input_error():
    with pytest.raises(InputError, match="unknown launcher 'pbs'"):
        launcher("pbs")


def test_local_launcher(tmp_path):
    run = launcher("local")
    ok = run([PY, "-c", "import os; print(os.environ['IOP_Y'], os.getcwd())"],
             {"IOP_Y": "7"}, tmp_path, 30)
    assert (ok.returncode, ok.stdout.split(), ok.timed_out) == (0, ["7", str(tmp_path)], False)
    late = run([PY, "-c", "import time; time.sleep(60)"], {}, tmp_path, 0.5)
    assert late.timed_out and late.returncode != 0 and late.seconds < 10
    with pytest.raises(InputError, match="no such program"):
        run(["/nonexistent/prog"], {}, tmp_path, 5)


# --------------------------------------------------------------------------- end to end


def test_tune_cli_with_a_shared_study_and_slurm_trials(postgres, slurm_env, tmp_path):
    """`iopilot tune --study postgresql://... --launcher slurm`: every trial is a
    Slurm job and the study lives in PostgreSQL, under the URL a user types."""
    import optuna

    url = postgres.create_database("cli_study").replace("postgresql+psycopg://", "postgresql://")
    # three distinct settings: the default, romio321, a stdio buffer (ompio
    # alone is the default's own point, never measured twice)
    (tmp_path / "space.toml").write_text(
        '[ompi.io]\nvalues = ["ompio", "romio321"]\ndefault = "ompio"\n'
        '[stdio.buffer_size]\nvalues = ["64k", "1m"]\n')
    before = _slurm_jobs(slurm_env)
    r = subprocess.run(
        [PY, "-m", "iopilot", "tune", "--study", url, "--launcher", "slurm", "--trials", "3",
         "--repeats", "1", "--objective", "wall", "--space", "space.toml", "--out", "out",
         "--", PY, "-c", "open('data.bin', 'wb').write(b'x' * 4096)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "3 trial(s)" in r.stderr
    assert (tmp_path / "out" / "best.toml").is_file()
    jobs = {j: s for j, s in _slurm_jobs(slurm_env).items() if j not in before}
    assert len(jobs) >= 3 and set(jobs.values()) == {"COMPLETED"}, jobs
    (summary,) = optuna.get_all_study_summaries(storage=url)
    assert summary.n_trials >= 3


def test_two_tune_workers_share_a_study_through_postgresql(postgres, slurm_env, tmp_path):
    """A second `iopilot tune` on the same study (another machine's, say) runs
    its trials beside the first's; the study holds both workers' trials."""
    import optuna

    url = postgres.create_database("workers").replace("postgresql+psycopg://", "postgresql://")
    # Long enough that the first worker is still busy when the second starts.
    trial = "import time; open('data.bin', 'wb').write(b'x' * 4096); time.sleep(0.5)"
    (tmp_path / "space.toml").write_text(
        '[ompi.io]\nvalues = ["ompio", "romio321"]\ndefault = "ompio"\n'
        "[mpiio.cb_nodes]\nvalues = [1, 2, 4]\n")

    def worker(out: str) -> subprocess.Popen:
        return subprocess.Popen(
            [PY, "-m", "iopilot", "tune", "--study", url, "--launcher", "slurm", "--trials", "4",
             "--repeats", "1", "--objective", "wall", "--space", "space.toml", "--out", out,
             "--", PY, "-c", trial],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    before = _slurm_jobs(slurm_env, names=True)
    first = worker("one")
    # The second joins once the first has made the study (Optuna's tables
    # cannot be created by two processes at the same moment).
    deadline = time.monotonic() + 30
    while True:
        try:
            if optuna.get_all_study_summaries(storage=url):
                break
        except Exception:  # the tables are not there yet
            pass
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.1)
    second = worker("two")
    for w in (first, second):
        _, err = w.communicate(timeout=90)
        assert w.returncode == 0, err
        assert "4 trials done" in err  # the study's budget, shared by both
    (summary,) = optuna.get_all_study_summaries(storage=url)
    study = optuna.load_study(study_name=summary.study_name, storage=url)
    trials = study.get_trials(deepcopy=False)
    # --trials counts the study's trials in all (as a resumed study does), and
    # the budget is part of each claim: never one more.
    assert len(trials) == 4
    assert len({t.number for t in trials}) == len(trials)
    points = [json.dumps(t.user_attrs["iopilot"]["point"], sort_keys=True) for t in trials]
    assert len(set(points)) == len(points)  # no point measured by both workers
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    assert (tmp_path / "one" / "best.toml").is_file() and (tmp_path / "two" / "best.toml").is_file()
    # Both ran trials as Slurm jobs (a job's name carries its tuner's PID).
    tuners = {j.split("-")[1] for j in _slurm_jobs(slurm_env, names=True) if j not in before}
    assert tuners == {str(first.pid), str(second.pid)}


def _slurm_jobs(slurm, names: bool = False) -> dict[str, str]:
    """Job id (or name) -> state of the trials' jobs the controller remembers."""
    out = slurm.run("scontrol", "show", "job", "-o").stdout
    jobs = {}
    for line in out.splitlines():
        info = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        if info.get("JobName", "").startswith("iopilot-"):
            jobs[info["JobName" if names else "JobId"]] = info["JobState"]
    return jobs


def test_tune_workers_started_together_on_an_empty_database(postgres, tmp_path):
    """Workers launched at the same moment race to create Optuna's tables and
    the study: the one that loses loads what the other made instead of failing."""
    url = postgres.create_database("together").replace("postgresql+psycopg://", "postgresql://")
    (tmp_path / "space.toml").write_text('[ompi.io]\nvalues = ["ompio", "romio321"]\n')
    workers = [subprocess.Popen(
        [PY, "-m", "iopilot", "tune", "--study", url, "--trials", "2", "--repeats", "1",
         "--objective", "wall", "--space", "space.toml", "--out", f"w{i}", "--", PY, "-c", "0"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(3)]  # fmt: skip
    for w in workers:
        _, err = w.communicate(timeout=120)
        assert w.returncode == 0, err


# --------------------------------------------------------------------------- contention

CONTENDED_SPACE = {"ompi": {"io": {"values": ["ompio", "romio321"], "default": "ompio"}},
                   "mpiio": {"cb_nodes": {"values": [1, 2, 4]}}}


def _contended_worker(url: str, study: str, work: Path, log: Path, seed: str,
                      start_at: float, trials: int = 7, seed_of_points: int = 0) -> None:
    """One worker of a shared study, in a forked process: it measures points
    (a short pause, no program run) and writes each point it measures to
    ``log``.  Its database reads come back late now and then, as on a loaded
    machine: what it read may be stale by the time it acts on it."""
    import random

    import sqlalchemy

    from iopilot.tune.objective import Run
    from iopilot.tune.space import from_dict, point_key
    from iopilot.tune.study import Options, Study

    rng = random.Random(seed)

    def late(conn, cursor, statement, *_args) -> None:
        if statement.lstrip().upper().startswith("SELECT") and rng.random() < 0.15:
            time.sleep(rng.uniform(0.2, 0.6))

    sqlalchemy.event.listen(sqlalchemy.engine.Engine, "after_cursor_execute", late)
    space = from_dict(CONTENDED_SPACE)

    class Worker(Study):
        def _measure_point(self, point, n, runs, timeout, keep_findings=False, more=None):
            with open(log, "a") as f:
                f.write(point_key(point) + "\n")
            time.sleep(0.05)
            return [Run(1.0 + len(point_key(point)) % 5 / 10, 0.05) for _ in range(runs)], ""

    time.sleep(max(0.0, start_at - time.time()))
    # Workers with seeds of their own choose different points at once; with
    # one seed (and the grid) they mostly choose the same point.
    strategy = "random" if seed_of_points else "grid"
    Worker(Options(command=["app"], objective="wall", strategy=strategy, trials=trials, repeats=1,
                   seed=seed_of_points, storage=url, study_name=study, work=work),
           lambda _observed: space, None).run()  # fmt: skip


def _contend(url: str, tmp_path: Path, batches: int, trials: int = 7,
             own_seeds: bool = False) -> dict[int, list[str]]:
    """Four workers per study started at the same moment, five studies at a
    time, ``batches`` times: the points each study's workers measured."""
    import multiprocessing

    import optuna

    fork = multiprocessing.get_context("fork")
    measured: dict[int, list[str]] = {}
    for batch in range(batches):
        reps = range(5 * batch, 5 * batch + 5)
        for rep in reps:
            optuna.create_study(storage=url, study_name=f"s{rep}", direction="minimize")
        start_at = time.time() + 0.3
        workers = [fork.Process(target=_contended_worker,
                                args=(url, f"s{rep}", tmp_path / f"w{rep}-{i}",
                                      tmp_path / f"log{rep}", f"{rep}/{i}", start_at, trials,
                                      i + 1 if own_seeds else 0))
                   for rep in reps for i in range(4)]  # fmt: skip
        try:
            for w in workers:
                w.start()
            for w in workers:
                w.join(60)
                assert w.exitcode == 0, f"worker {w.pid}: exit status {w.exitcode}"
        finally:
            for w in workers:
                if w.is_alive():
                    w.kill()
        for rep in reps:
            measured[rep] = (tmp_path / f"log{rep}").read_text().split()
    return measured


def test_workers_started_at_once_never_measure_a_point_twice(postgres, tmp_path):
    """Four workers of one study start at the same moment, twenty times over
    (five studies at a time), their reads of the database now and then late:
    every point, the default included, is measured by one worker only."""
    # Twenty studies: with the claim made by a read then a write (put back by
    # hand), 10 of 25 studies measured a point twice; twenty miss that with a
    # chance of 0.6^20, about 4e-5 (0.5 % at 23 %, that rate's lower 95 %
    # bound; fifteen would at 2 %).
    measured = _contend(postgres.create_database("contended"), tmp_path, 4)
    repeated = {rep: points for rep, points in measured.items() if len(points) != len(set(points))}
    # the default and the six points of the grid, each once
    missed = [rep for rep, points in measured.items() if len(set(points)) != 7]
    assert repeated == {}
    assert missed == []


def test_workers_started_at_once_keep_to_the_budget(postgres, tmp_path):
    """`--trials 3` on a study of four workers started at the same moment,
    fifteen times over, reads late now and then: never a fourth trial (the
    budget is checked in the claim itself, not by a read before it), and the
    budget is used in full."""
    import optuna

    # Fifteen studies, and no fewer: with the budget checked only by the read
    # before the claim (put back by hand), 4 of 40 studies went over it
    # (nice 19, load 2-3), so fifteen catch that in 1 - 0.9^15, about 79 % of
    # runs; ten would in 65 %.
    url = postgres.create_database("budget")
    measured = _contend(url, tmp_path, 3, trials=3, own_seeds=True)
    trials = {rep: len(optuna.load_study(study_name=f"s{rep}", storage=url).get_trials())
              for rep in measured}  # fmt: skip
    assert {rep: len(points) for rep, points in measured.items()} == dict.fromkeys(measured, 3)
    assert trials == dict.fromkeys(measured, 3)


def _open_and_hold(url: str, work: Path, opened: Path, start_at: float) -> None:
    """One worker, in a forked process: it opens the study at ``start_at``,
    writes how that went to a file of ``opened``, and keeps the study open
    until the file ``done`` is there."""
    from iopilot.tune.study import Options, Study

    time.sleep(max(0.0, start_at - time.time()))
    try:
        Study(Options(command=["app"], storage=url, study_name="s", work=work),
              lambda _observed: None, None)  # fmt: skip
        said = "ok"
    except Exception as e:  # what went wrong is the test's output
        said = f"{type(e).__name__}: {e}"
    (opened / str(os.getpid())).write_text(said)
    deadline = time.monotonic() + 120
    while not (opened.parent / "done").exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def test_forty_workers_open_one_study_at_once_on_an_empty_database(postgres, tmp_path):
    """Forty workers open one study at the same moment on a database without
    Optuna's tables, and stay: every one opens it, and together they hold one
    connection each (a server's 100 connections were used up by three a
    worker, and a worker that could not connect failed inside Optuna)."""
    import multiprocessing

    import optuna
    import psycopg  # noqa: F401 - imported once here, not forty times in the workers

    fork = multiprocessing.get_context("fork")
    url = postgres.create_database("forty")
    opened = tmp_path / "opened"
    opened.mkdir()
    start_at = time.time() + 1.0
    workers = [fork.Process(target=_open_and_hold, args=(url, tmp_path / f"w{i}", opened, start_at))
               for i in range(40)]  # fmt: skip
    try:
        for w in workers:
            w.start()
        deadline = time.monotonic() + 120
        while len(list(opened.iterdir())) < 40:
            assert time.monotonic() < deadline and all(w.is_alive() for w in workers)
            time.sleep(0.1)
        said = sorted(f.read_text() for f in opened.iterdir())
        assert [s for s in said if s != "ok"] == []
        held = postgres.query("forty", "select count(*) from pg_stat_activity "
                                       "where datname = 'forty' and pid <> pg_backend_pid()")
        assert int(held) <= 40
    finally:
        (tmp_path / "done").touch()
        for w in workers:
            w.join(60)
            if w.is_alive():
                w.kill()
    assert [s.study_name for s in optuna.get_all_study_summaries(storage=url)] == ["s"]


def _open_and_say(url: str, name: str, said: Path) -> None:
    """One worker, in a forked process: it opens study ``name`` and says so in ``said``."""
    import optuna

    from iopilot.tune.study import _open_study

    _open_study(optuna, url, name, "minimize")
    said.write_text("opened")


def test_a_made_study_opens_while_another_worker_makes_one(postgres, tmp_path):
    """Workers make Optuna's tables and a new study one at a time, under the
    server's lock; a worker joining a study that is made already only reads,
    and opens it without waiting for that lock (twenty workers joining made
    studies waited for each other in that line)."""
    import multiprocessing

    import optuna

    from iopilot.tune.study import _one_at_a_time

    url = postgres.create_database("made")
    optuna.create_study(storage=url, study_name="made", direction="minimize")
    fork = multiprocessing.get_context("fork")
    made = fork.Process(target=_open_and_say, args=(url, "made", tmp_path / "made"))
    new = fork.Process(target=_open_and_say, args=(url, "new", tmp_path / "new"))
    try:
        with _one_at_a_time(url):  # another worker making its study
            new.start()
            made.start()
            made.join(60)
            assert made.exitcode == 0 and (tmp_path / "made").read_text() == "opened"
            assert new.is_alive() and not (tmp_path / "new").exists()
        new.join(60)
        assert new.exitcode == 0 and (tmp_path / "new").read_text() == "opened"
    finally:
        for w in (made, new):
            if w.is_alive():
                w.kill()
    assert sorted(s.study_name for s in optuna.get_all_study_summaries(storage=url)) \
        == ["made", "new"]  # fmt: skip


_databases = itertools.count()


@pytest.fixture(params=["sqlite", "postgresql"])
def study_url(request, tmp_path):
    """The URL of an empty database of either kind."""
    if request.param == "sqlite":
        pytest.importorskip("optuna")
        return f"sqlite:///{tmp_path / 'study.db'}"
    return request.getfixturevalue("postgres").create_database(f"beat{next(_databases)}")


ELSEWHERE = "node-that-is-not-this-one:4242"  # a worker of another host


def _claimed_elsewhere(claims, point, age: float, done: bool = False) -> None:
    """``point`` claimed by a worker of another host, its last beat ``age``
    seconds ago (measured already when ``done``)."""
    from iopilot.tune.claims import TAKEN
    from iopilot.tune.space import point_key

    key, t = point_key(point), claims.table
    assert claims.take(key, point, ELSEWHERE) == TAKEN
    claims._stop_beating(key)  # that worker is not this process
    with claims.engine.begin() as conn:
        conn.execute(t.update().where(t.c.point_key == key).values(beat=t.c.beat - age))
    if done:
        claims.finish(key, ELSEWHERE)


def test_a_claim_whose_worker_stopped_saying_it_is_alive_is_taken_over(study_url, tmp_path):
    """A point claimed by a worker of another host (whose process cannot be
    looked at from here): taken over once its beat is older than the stale
    limit, left alone while it is younger; and a takeover read before the
    owner's next beat fails."""
    from iopilot.tune.claims import HELD, TAKEN
    from iopilot.tune.search import owner
    from iopilot.tune.space import point_key
    from iopilot.tune.study import Options, Study

    study = Study(Options(command=["app"], storage=study_url, study_name="s", work=tmp_path),
                  lambda _observed: None, None)  # fmt: skip
    claims, t = study.claims, study.claims.table

    def claimed_by_elsewhere(point, age: float) -> None:
        _claimed_elsewhere(claims, point, age)

    def holder(point):
        return next(c for c in claims.all() if c.key == point_key(point))

    young, old = {"x": 1}, {"x": 2}
    claimed_by_elsewhere(young, 10.0)
    claimed_by_elsewhere(old, 10.0)
    assert 10.0 <= holder(young).age < 20.0
    claims.stale = 20.0  # the beat is younger than the limit: the point stays the other's
    assert study._take(young) == HELD
    assert holder(young).owner == ELSEWHERE
    assert [r.point for r in study._claimed(set())] == [young, old]  # both being measured
    claims.stale = 5.0  # older than the limit: the worker is gone, the point is free
    assert [r.point for r in study._claimed(set())] == []
    assert study._take(old) == TAKEN
    assert holder(old).owner == owner() and holder(old).age < 5.0  # its beat is this worker's now

    # A takeover decided on a read from before the owner's latest beat fails.
    seen = holder(young)
    with claims.engine.begin() as conn:
        conn.execute(t.update().where(t.c.point_key == point_key(young)).values(beat=t.c.beat + 1))
    assert claims.take(seen.key, young, owner(), replacing=seen) == HELD
    assert holder(young).owner == ELSEWHERE
    assert claims.take(seen.key, young, owner(), replacing=holder(young)) == TAKEN


def test_a_measuring_worker_renews_its_claim_until_it_finishes(study_url):
    from iopilot.tune.claims import DONE, TAKEN, Claims

    claims = Claims(study_url, "s#1", beat=0.05)
    assert claims.take("k", {"x": 1}, "here:1") == TAKEN
    first = claims.all()[0].beat
    deadline = time.monotonic() + 30
    while claims.all()[0].beat == first:  # renewed by the claim's thread
        assert time.monotonic() < deadline
        time.sleep(0.05)
    claims.finish("k", "here:1")
    assert claims.beating == {}
    assert [c.state for c in claims.all()] == [DONE]


def test_reading_the_wins_of_other_studies_keeps_no_connection(postgres):
    """A worker reads the other studies of its database once, for their wins:
    the connections of that read are closed, not kept until Python's cycle
    collector runs (forty workers would keep two each)."""
    import gc

    import optuna

    from iopilot.tune.study import _open_study
    from iopilot.tune.warm import learnt

    url = postgres.create_database("learnt")
    _open_study(optuna, url, "s", "minimize")

    def held() -> int:
        return int(postgres.query("learnt", "select count(*) from pg_stat_activity "
                                            "where datname = 'learnt' and pid <> pg_backend_pid()"))

    before = held()
    gc.disable()
    try:
        assert learnt(url, "s", {}, None) == []
        deadline = time.monotonic() + 20  # a server process ends a moment after its client
        while held() > before:
            assert time.monotonic() < deadline, f"{held()} connections, {before} before"
            time.sleep(0.1)
    finally:
        gc.enable()


def test_the_claim_of_a_worker_that_is_gone_gives_its_room_in_the_budget_back(study_url, tmp_path):
    """A budget of 3 used by the default and a point measured, and a point
    claimed by a worker of another host: while that worker is alive a fourth
    point is refused; once it is gone its claim is dropped (its point free
    again) and the fourth point is claimed in its place."""
    from iopilot.tune.claims import FULL, TAKEN
    from iopilot.tune.search import owner
    from iopilot.tune.space import point_key
    from iopilot.tune.study import Options, Study

    study = Study(Options(command=["app"], storage=study_url, study_name="s", work=tmp_path),
                  lambda _observed: None, None)  # fmt: skip
    claims = study.claims
    _claimed_elsewhere(claims, {}, 0.0, done=True)
    _claimed_elsewhere(claims, {"x": 1}, 0.0, done=True)
    _claimed_elsewhere(claims, {"x": 2}, 10.0)
    claims.stale = 20.0
    assert study._take({"x": 3}, budget=3) == FULL
    assert sorted(c.key for c in claims.all()) == sorted(point_key(p) for p in ({}, {"x": 1},
                                                                                {"x": 2}))
    claims.stale = 5.0
    assert study._take({"x": 3}, budget=3) == TAKEN
    assert sorted(c.key for c in claims.all()) == sorted(point_key(p) for p in ({}, {"x": 1},
                                                                                {"x": 3}))
    mine = next(c for c in claims.all() if c.key == point_key({"x": 3}))
    assert mine.owner == owner()
    claims.release(mine.key, owner())
