"""The convergence plot of the tune and optimize pages (report/tuning.py),
from their JSON documents."""

from __future__ import annotations

import pytest

from iopilot.report.tuning import convergence

TRIALS = [
    {"phase": "default", "status": "ok", "runs": [4.0, 6.0, 5.0], "point": {}},
    {"status": "ok", "runs": [3.0, 3.0, 3.0], "point": {"ompi.io": "ompio"}},
    {"status": "failed", "runs": [], "point": {"ompi.io": "<x>"}, "reason": "exit status 3"},
    {"status": "ok", "runs": [1.0], "point": {"stdio.buffer_size": "1m"}},  # one run: not best
    {"status": "ok", "runs": [2.0, 9.0, 2.5], "point": {"ompi.fcoll": "vulcan"}},
    {"status": "ok", "runs": [7.0, 7.0, 7.0], "point": {"ompi.fcoll": "two_phase"}},
]


def test_the_best_so_far_counts_only_trials_with_the_defaults_runs():
    c = convergence({"unit": "s", "direction": "minimize", "trials": TRIALS})
    assert (c["x"], c["y"]) == ([1, 2, 4, 5, 6], [5.0, 3.0, 1.0, 2.5, 7.0])
    # trial 4's median (1.0) is the lowest, but from one run of three
    assert (c["best_x"], c["best_y"]) == ([1, 2, 3, 4, 5, 6], [5.0, 3.0, 3.0, 3.0, 2.5, 2.5])
    assert c["failed_x"] == [3] and c["failed_y"] == [7.0]  # drawn at the top
    assert c["failed_text"] == ["ompi.io=&lt;x&gt;: exit status 3"]
    assert c["text"][0] == "(default)" and c["text"][2] == "stdio.buffer_size=1m"
    assert c["unit"] == "s"


def test_a_maximized_objective_keeps_the_highest():
    c = convergence({"unit": "MiB/s", "direction": "maximize", "trials": TRIALS})
    assert c["best_y"] == [5.0, 5.0, 5.0, 5.0, 5.0, 7.0]


@pytest.mark.parametrize(("runs", "counted"), [([8.0, 0.5], False), ([8.0, 0.5, 0.5], True)])
def test_a_trial_counts_from_as_many_runs_as_the_default(runs, counted):
    trials = [{"phase": "default", "status": "ok", "runs": [2.0, 2.0, 2.0], "point": {}},
              {"status": "ok", "runs": runs, "point": {"a.b": 1}}]  # fmt: skip
    c = convergence({"direction": "minimize", "trials": trials})
    assert c["best_y"] == [2.0, 0.5 if counted else 2.0]


def test_no_trial_yet_draws_nothing():
    c = convergence({"trials": [{"status": "failed", "runs": [], "point": {}, "reason": "x"}]})
    assert (c["x"], c["best_x"], c["failed_x"], c["failed_y"]) == ([], [], [1], [1.0])


def test_a_failed_trial_with_runs_is_drawn_as_failed():
    trials = [{"phase": "default", "status": "ok", "runs": [2.0], "point": {}},
              {"status": "failed", "runs": [0.1], "point": {"a.b": 1}, "reason": "verify failed"}]
    c = convergence({"direction": "minimize", "trials": trials})
    assert (c["x"], c["failed_x"], c["best_y"]) == ([1], [2], [2.0, 2.0])
