"""iopilot bench tune-efficiency: the replay of strategies on a measured table."""

import subprocess
import sys
import tomllib

import pytest

from iopilot.tune import efficiency as te
from iopilot.tune.space import from_dict

SPACE = """\
[ompi.fcoll]
values = ["a", "b", "c", "d"]
[mpiio.cb_nodes]
values = [1, 2, 4]
"""


def cost(point):
    """A known function: best at fcoll=a or d with cb_nodes=4; unset is slow."""
    return (1.0 + "abcdx".index(point.get("ompi.fcoll", "x")) % 3
            + {1: 0.5, 2: 0.2, 4: 0.0, None: 5.0}[point.get("mpiio.cb_nodes")])


def table(repeats=1):
    space = from_dict(tomllib.loads(SPACE))
    points = te.all_points(space)  # unset parameters too: guided leaves them so
    return {"case": "synthetic", "space": SPACE, "repeats": repeats, "objective": "io",
            "observed": {"findings": [], "layers": ["MPIIO"], "nprocs": 4},
            "points": [{"point": p, "runs": [cost(p)] * repeats, "median": cost(p),
                        "status": "ok", "reason": ""} for p in points]}


def test_grid_replay_proposes_the_grid_in_order_and_scores_it():
    t = table()
    grid = from_dict(tomllib.loads(SPACE)).grid()
    proposed = te.replay(t, "grid", seed=0)
    assert [p["point"] for p in proposed] == [{}, *grid]
    best = te.best_value(t)
    assert best == 1.0  # fcoll=a, cb_nodes=4 and fcoll=d, cb_nodes=4 (index 3 % 3 == 0)
    # the default is trial 1; the grid's third point (a, 4) is the first within 5 %
    first = next(i for i, p in enumerate([{}, *grid], 1) if cost(p) <= best * 1.05)
    assert first == 4
    assert te.trials_to_best(proposed, best) == first
    # a looser margin counts an earlier trial; a point worth 1.2 is within 25 %
    assert te.trials_to_best(proposed, best, within=0.25) == 3


def test_the_noise_rule_sees_the_measured_runs():
    t = table(repeats=3)
    for r in t["points"]:  # a spread of 20 %: the default's noise
        r["runs"] = [r["median"] * 0.9, r["median"], r["median"] * 1.1]
    proposed = te.replay(t, "grid", seed=0)
    grid = from_dict(tomllib.loads(SPACE)).grid()
    assert [p["point"] for p in proposed] == [{}, *grid]  # each once, whatever the repeats
    assert te.trials_to_best(proposed, te.best_value(t)) == 4


def test_median_over_seeds_counts_a_miss_as_never():
    assert te.median_trials([3, 5, 4]) == 4
    assert te.median_trials([3, None, 4, 9, None]) == 9
    assert te.median_trials([None, None, 2]) is None


def test_every_strategy_replays_and_the_results_table_prints():
    res = te.evaluate(table(), ["grid", "random", "guided"], seeds=2)
    assert res["strategies"]["grid"]["per_seed"] == [4, 4]
    assert res["strategies"]["grid"]["median"] == 4
    for s in ("random", "guided"):
        counts = res["strategies"][s]["per_seed"]
        assert all(c is None or 1 <= c <= res["points"] for c in counts)
    text = te.format_results([res], ["grid", "random", "guided"])
    assert text.splitlines()[0].split()[:3] == ["case", "points", "best"]
    assert "synthetic" in text


def test_failed_points_never_count():
    t = table()
    for r in t["points"]:
        if r["point"].get("ompi.fcoll") == "a":
            r.update(status="failed", reason="timed out", median=None, runs=[])
    best = te.best_value(t)
    assert best == 1.0  # d, 4 still works
    proposed = te.replay(t, "grid", seed=0)
    assert te.trials_to_best(proposed, best) == 1 + 3 * 3 + 3  # after a's, b's, c's: d,4


@pytest.mark.parametrize("case", te.CASES)
def test_built_in_cases_have_small_spaces(case):
    space = from_dict(tomllib.loads(te.CASES[case].space))
    assert 20 <= len(te.all_points(space)) <= 60


def test_the_cli_refuses_unknown_cases(tmp_path):
    p = subprocess.run([sys.executable, "-m", "iopilot", "bench", "tune-efficiency", "--case",
                        "nope", "--out", str(tmp_path)], capture_output=True, text=True)
    assert p.returncode == 2 and "unknown case 'nope'" in p.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_warm_replay_starts_from_what_guided_found_on_the_source_case():
    source = table(repeats=3)
    source["command"] = ["mpirun", "-np", "4", "/nowhere/prog"]
    target = table(repeats=3)
    target.update(case="synthetic2", command=["mpirun", "-np", "2", "/nowhere/prog"])
    for r in target["points"]:  # the same landscape, twice as slow
        r["runs"] = [2 * v for v in r["runs"]]
        r["median"] = 2 * r["median"]
    res = te.evaluate(target, ["guided"], seeds=2, source=source)
    cold, warm = res["strategies"]["guided"], res["strategies"]["warm"]
    assert warm["from"] == "synthetic"
    assert warm["per_seed"] == [2, 2]  # the default, then the source's winner
    assert cold["median"] > 2
    # another program learns nothing from it
    target["command"] = ["mpirun", "-np", "2", "/nowhere/other"]
    res = te.evaluate(target, ["guided"], seeds=1, source=source)
    assert res["strategies"]["warm"]["per_seed"] == res["strategies"]["guided"]["per_seed"]
    text = te.format_results([res], ["guided", "warm"])
    assert text.splitlines()[0].split()[-2:] == ["guided", "warm"]
