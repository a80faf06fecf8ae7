"""Warm start: a study keeps the features of the job it tuned and what won;
a new tuning of a similar job measures those settings right after its default."""

import json
import subprocess
import sys
import textwrap

import optuna
import pytest

from iopilot.tune import search
from iopilot.tune.generate import rank
from iopilot.tune.search import Context, Record
from iopilot.tune.space import from_dict, point_key
from iopilot.tune.study import store
from iopilot.tune.warm import JOB, RESULT, SIMILAR, fit, job_of, learnt, program_of, similarity

SPACE = {
    "ompi": {"io": {"values": ["ompio", "romio321"], "default": "ompio"}},
    "mpiio": {
        "romio_cb_write": {"values": ["enable", "disable", "automatic"], "default": "automatic",
                           "when": {"ompi.io": "romio321"}},
        "cb_nodes": {"low": 1, "high": 2, "log": True, "when": {"ompi.io": "romio321"}},
    },
}
WINNER = {"ompi.io": "romio321", "mpiio.romio_cb_write": "disable"}


def test_the_program_is_found_past_launchers_and_interpreters(tmp_path):
    exe = tmp_path / "ior"
    exe.write_text("")
    script = tmp_path / "sim.py"
    script.write_text("")
    assert program_of(["mpirun", "-np", "4", str(exe), "--api", "mpiio"]) == "ior"
    assert program_of(["srun", "-n", "2", "python3", str(script), "x.h5"]) == "sim.py"
    assert program_of(["/usr/bin/env", sys.executable, str(script)]) == "sim.py"
    assert program_of(["nowhere-to-be-found", "a"]) == "nowhere-to-be-found"
    assert program_of(["mpirun", "-np", "2", "/not/here/prog", "x"]) == "prog"
    assert program_of(["mpirun", "-np", "2"]) == ""


def test_job_features_keep_only_warnings():
    observed = {"nprocs": 4, "layers": ["POSIX", "MPIIO"],
                "findings": [{"check": "a", "level": "WARN"}, {"check": "b", "level": "INFO"},
                             {"check": "c", "level": "HIGH"}]}
    job = job_of(["/bin/true"], observed)
    assert job == {"program": "true", "nprocs": 4, "layers": ["MPIIO", "POSIX"],
                   "checks": ["a", "c"]}


def _job(program, checks, layers=("MPIIO", "POSIX"), nprocs=4):
    return {"program": program, "checks": list(checks), "layers": list(layers), "nprocs": nprocs}


def test_the_same_program_is_similar_whatever_its_size():
    got = similarity(_job("ior", ["a"], nprocs=2), _job("ior", ["b"], layers=["POSIX"]))
    assert got is not None and got[0] >= 2.0
    assert "the same program ior" in got[1] and "4 processes there, 2 here" in got[1]


def test_another_program_is_similar_from_half_of_its_warnings_alike():
    assert SIMILAR == 0.5
    half = similarity(_job("a", ["x", "y"]), _job("b", ["x"]))  # 1 of 2 alike: at the edge
    assert half is not None and half[0] == pytest.approx(0.5) and "1 of 2" in half[1]
    third = similarity(_job("a", ["x", "y"]), _job("b", ["x", "z"]))  # 1 of 3: below
    assert third is None
    other_layers = similarity(_job("a", ["x"]), _job("b", ["x"], layers=["POSIX"]))
    assert other_layers is None
    assert similarity(_job("a", []), _job("b", [])) is None  # nothing to go by


def test_a_winner_is_fitted_to_the_new_space():
    s = from_dict(SPACE)
    # cb_nodes 8 (a job of 8 processes) comes into the range 1..2; a parameter
    # this space lacks and a value it does not offer are dropped
    assert fit(s, {**WINNER, "mpiio.cb_nodes": 8, "ompi.fcoll": "vulcan"}) == {
        **WINNER, "mpiio.cb_nodes": 2}
    assert fit(s, {"ompi.io": "romio321", "mpiio.romio_cb_write": "sometimes"}) == {
        "ompi.io": "romio321"}
    # a hint whose condition the point does not set is not applied, and the
    # default's own values are no change
    assert fit(s, {"mpiio.romio_cb_write": "disable"}) == {}
    assert fit(s, {"ompi.io": "ompio"}) == {}


def _study(storage, name, job, result):
    st = optuna.create_study(storage=storage, study_name=name)
    if job is not None:
        st.set_user_attr(JOB, job)
    if result is not None:
        st.set_user_attr(RESULT, result)


def test_learnt_takes_the_wins_of_similar_jobs_closest_first(tmp_path):
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    here = _job("ior", ["x"], nprocs=2)
    s = from_dict(SPACE)
    _study(storage, "own", here, {"verdict": "win", "point": {"ompi.io": "romio321"}})
    _study(storage, "same-program", _job("ior", ["x"]),
           {"verdict": "win", "point": WINNER, "speedup": 8.0})
    _study(storage, "same-program-no-win", _job("ior", ["x"]),
           {"verdict": "within noise", "point": {}, "speedup": None})
    _study(storage, "other-program", _job("hacc", ["x"]),
           {"verdict": "win", "point": {"ompi.io": "romio321", "mpiio.cb_nodes": 1},
            "speedup": 20.0})
    _study(storage, "unlike", _job("vpic", ["q"]),
           {"verdict": "win", "point": {"ompi.io": "romio321", "mpiio.cb_nodes": 2}})
    _study(storage, "unfinished", here, None)
    warm = learnt(storage, "own", here, s)
    assert [w.study for w in warm] == ["same-program", "other-program"]
    assert warm[0].point == WINNER and warm[0].speedup == 8.0
    assert "the same program ior" in warm[0].why
    assert warm[1].point == {"ompi.io": "romio321", "mpiio.cb_nodes": 1}
    assert learnt(f"sqlite:///{tmp_path / 'empty.db'}", "own", here, s) == []


def test_guided_sweeps_from_a_warm_winner_that_beats_the_default():
    s = from_dict(SPACE)
    study = optuna.create_study(direction="minimize")

    def rec(point, loss, phase):
        return store(study, s, Record(0, point, [loss], loss, "ok", phase=phase), None)

    history = [rec({}, 10.0, "default"), rec(WINNER, 2.0, search.WARM)]
    ctx = Context(s, history, 0, 20, 0.0, study, rank(s, []), lambda v: v)
    p = search.make("guided").next(ctx)
    # the next change is made to the warm winner (its hint tried otherwise),
    # not to the default (which would try ompi.io first)
    assert p.point == {"ompi.io": "romio321", "mpiio.romio_cb_write": "enable"}
    # a warm point that lost to the default is not where the sweep starts
    history[1] = rec({"ompi.io": "romio321", "mpiio.romio_cb_write": "enable"}, 11.0,
                     search.WARM)
    p = search.make("guided").next(Context(s, history, 0, 20, 0.0, study, rank(s, []),
                                           lambda v: v))
    assert p.point == {"ompi.io": "romio321"}


# A program whose I/O depends on OMPI_MCA_fcoll (exported from the [ompi] table).
PROGRAM = textwrap.dedent("""\
    import os
    with open("out.dat", "wb", buffering=0) as f:
        for _ in range(2000 if os.environ.get("OMPI_MCA_fcoll") == "fast" else 30000):
            f.write(b"x")
""")


def _tune(cwd, *args):
    p = subprocess.run([sys.executable, "-m", "iopilot", "tune", *args], cwd=cwd,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p


def test_a_second_tuning_of_the_same_program_starts_from_what_won(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "space.toml").write_text('[ompi.fcoll]\nvalues = ["a", "b", "fast"]\n')
    common = ["--space", "space.toml", "--repeats", "2", "--out", "out"]
    first = _tune(tmp_path, *common, "--trials", "4", "--json", "first.json", "--",
                  "python3", "prog.py")
    assert json.loads((tmp_path / "first.json").read_text())["verdict"] == "win"
    assert "starting from" not in first.stderr
    # the same program with another argument: another study in the same store
    second = _tune(tmp_path, *common, "--trials", "2", "--json", "second.json", "--",
                   "python3", "prog.py", "again")
    doc = json.loads((tmp_path / "second.json").read_text())
    assert doc["trials"][1]["phase"] == search.WARM
    assert doc["trials"][1]["point"] == {"ompi.fcoll": "fast"}
    assert doc["verdict"] == "win" and doc["best"]["settings"] == {"ompi": {"fcoll": "fast"}}
    assert doc["warm_start"][0]["settings"] == {"ompi.fcoll": "fast"}
    assert "the same program prog.py" in doc["warm_start"][0]["why"]
    assert "starting from settings that won a similar tuning" in second.stderr
    assert "ompi.fcoll=fast" in second.stderr
    assert "started from settings that won" in second.stdout
    # told not to, it starts from the default alone
    third = _tune(tmp_path, *common, "--trials", "2", "--no-warm", "--json", "third.json",
                  "--", "python3", "prog.py", "once more")
    doc = json.loads((tmp_path / "third.json").read_text())
    assert doc["warm_start"] == [] and doc["trials"][1]["phase"] != search.WARM
    assert doc["trials"][1]["point"] == {"ompi.fcoll": "a"}
    assert "starting from" not in third.stderr


def test_after_the_warm_winners_sweep_the_defaults_sweep_follows():
    """A winner of another job may be a local best here: once its sweep is
    done, guided sweeps from the default as it would have without it, and
    follows points measured once (not promising beside the winner)."""
    s = from_dict(SPACE)
    study = optuna.create_study(direction="minimize")

    def rec(point, runs, phase):
        return store(study, s, Record(0, point, runs, min(runs), "ok", phase=phase), None)

    history = [rec({}, [10.0, 10.0], "default"), rec(WINNER, [2.0, 2.0], search.WARM),
               rec({"ompi.io": "romio321", "mpiio.romio_cb_write": "enable"}, [11.0], "x"),
               rec({**WINNER, "mpiio.cb_nodes": 1}, [3.0], "x"),
               rec({**WINNER, "mpiio.cb_nodes": 2}, [3.0], "x")]
    ctx = Context(s, history, 0, 20, 0.0, study, rank(s, []), lambda v: v, 2)
    assert search.make("guided").next(ctx).point == {"ompi.io": "romio321"}
    # measured once at 5 s (not promising beside 2 s): followed all the same
    history.append(rec({"ompi.io": "romio321"}, [5.0], "x"))
    ctx = Context(s, history, 0, 20, 0.0, study, rank(s, []), lambda v: v, 2)
    p = search.make("guided").next(ctx).point
    assert p["ompi.io"] == "romio321" and p != {"ompi.io": "romio321"}  # on from it
    assert point_key(p) not in {r.key for r in history}
