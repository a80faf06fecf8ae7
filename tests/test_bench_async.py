"""`iopilot bench async`, small but real: every layer of the epochs kernel
under two mpirun bindings, two scenarios each, read back from the kernel's
own results (the work units each run did, whether it ran asynchronously).
No timing is asserted: the machine is shared."""

from __future__ import annotations

import functools
import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iopilot.bench import overlap
from iopilot.bench.kernels import KERNEL_APIS
from iopilot.errors import InputError
from iopilot.overlap import calibrate

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS, BINDINGS = ("equal", "overhead"), ("default", "none")


@pytest.fixture(scope="module")
def doc(tmp_path_factory) -> dict:
    """One bench run: 1 rank, 2 steps of 4 MiB, every layer (40 s at load 2.7)."""
    if shutil.which("mpicc") is None:
        pytest.skip("mpicc not installed")
    done = subprocess.run(["make", "-C", str(ROOT / "kernels")], capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = tmp_path_factory.mktemp("bench-async")
    plan = overlap.Plan(ranks=1, steps=2, size="4m", scenarios=SCENARIOS, bindings=BINDINGS,
                        apis=KERNEL_APIS, dir=str(out / "runs"))  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        # the advisor calibrates the machine per call (about a second): once is enough here
        mp.setattr(calibrate, "measure", functools.cache(calibrate.measure))
        assert overlap.main(plan, str(out / "async.json")) == 0
    return json.loads((out / "async.json").read_text())


def test_the_data_files_are_rewritten_in_place_and_removed_at_the_end(doc):
    # every run rewrote its layer's file (one more for "overhead") in place,
    # from a buffer filled once
    assert all(r["in_place"] and r["fill_once"] for r in doc["scenarios"])
    runs = Path(doc["dir"])
    assert list(runs.glob("*.dat")) == [] and len(list(runs.glob("*.trace"))) > 1


def test_every_layer_binding_and_scenario_has_its_row(doc):
    rows = doc["scenarios"]
    assert [r for r in rows if "failed" in r] == []
    assert sorted((r["api"], r["binding"], r["scenario"]) for r in rows) == sorted(
        itertools.product(KERNEL_APIS, BINDINGS, SCENARIOS))
    assert doc["apis"] == list(KERNEL_APIS) and set(doc["io_per_step_s"]) == set(KERNEL_APIS)
    text = overlap.render(doc)
    for r in rows:
        assert any(line.split()[:3] == [r["api"], r["scenario"], r["binding"]]
                   for line in text.splitlines()), (r, text)  # fmt: skip
    # "overhead" at the layers where async is not the engine says what it measures
    notes = {r["api"] for r in rows if r.get("note")}
    assert notes == set(overlap.OVERHEAD_NOTES) and "posix" not in notes
    assert all(r["scenario"] == "overhead" for r in rows if r.get("note"))


def test_all_runs_of_a_scenario_do_the_same_work(doc):
    work: dict[tuple[str, str], set[int]] = {}
    for r in doc["scenarios"]:
        work.setdefault((r["api"], r["scenario"]), set()).update((r["units"], r["async_units"]))
    assert all(len(units) == 1 for units in work.values()), work
    for api_name in KERNEL_APIS:
        # the reference run calibrated some work; "overhead" has none
        assert work[(api_name, "equal")].pop() > 0
        assert work[(api_name, "overhead")] == {0}
    # each row keeps the computation its own synchronous run measured
    assert all(r["compute_per_step_s"] >= 0 for r in doc["scenarios"])
    # only the probe calibrated: no measured run spent its start-up on it
    assert not any(r["calibrated"] for r in doc["scenarios"])


def test_the_steps_error_leaves_out_the_synchronous_run_s_start_up(doc):
    for r in doc["scenarios"]:
        outside = r["traced_sync_run_s"] - r["sync_total_s"]
        assert outside > 0  # the launcher's start-up at least
        assert r["predicted_async_steps_s"] == pytest.approx(r["predicted_async_run_s"] - outside)
        assert r["steps_error"] == pytest.approx(
            (r["predicted_async_steps_s"] - r["async_total_s"]) / r["async_total_s"])


def test_the_async_run_of_every_row_ran_async_and_the_sync_run_did_not(doc):
    for r in doc["scenarios"]:
        assert r["async_ran_async"] is True and r["sync_ran_async"] is False, r


def test_the_ideal_hides_only_what_the_layer_s_async_form_takes():
    from types import SimpleNamespace as P

    # all of the I/O moves: 4 steps of c = 2, io = 1: 4 x 2 + 1
    assert overlap._ideal(4, 2.0, 1.0, [P(io_seconds=1.0, own_seconds=0.0)]) == 9.0
    # a quarter stays (a blocking sync): each step 2 + 0.25, the last 0.75 not hidden
    assert overlap._ideal(4, 2.0, 1.0, [P(io_seconds=0.75, own_seconds=0.25)]) == 9.75
    # computation shorter than what moves: the I/O sets the pace
    assert overlap._ideal(4, 0.5, 1.0, [P(io_seconds=0.75, own_seconds=0.25)]) == 4 + 0.5
    assert overlap._ideal(4, 2.0, 1.0, []) == 9.0


def test_ran_async_needs_the_flag_and_the_waits():
    its = [{"wait_s": 0.0}, {"wait_s": 0.1}]
    assert overlap._ran_async({"params": {"async": 1}, "iterations": its})
    assert not overlap._ran_async({"params": {"async": 0}, "iterations": its})
    assert not overlap._ran_async({"params": {"async": 1}, "iterations": [{}, *its]})


@pytest.mark.parametrize("field, value, words", [
    ("apis", ("stdio",), "--apis: unknown stdio"),
    ("apis", ("posix", "netcdf"), "--apis: unknown netcdf"),
    ("apis", (), "--apis: unknown (none given)"),
    ("bindings", ("loose",), "--bindings: unknown loose"),
    ("scenarios", ("huge",), "--scenarios: unknown huge"),
    ("scenarios", (), "--scenarios: unknown (none given)"),
    ("steps", 1, "--steps: at least 2"),
    ("ranks", 0, "--ranks: at least 1"),
    ("repeat", 0, "--repeat: at least 1"),
])  # fmt: skip
def test_bad_options_are_refused_before_anything_runs(tmp_path, field, value, words):
    plan = overlap.Plan(dir=str(tmp_path / "runs"), **{field: value})
    with pytest.raises(InputError) as e:
        overlap.main(plan)
    assert str(e.value).startswith(words) and "\n" not in str(e.value)
    assert not (tmp_path / "runs").exists()


def test_the_known_layers_and_the_edge_values_pass_validation(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(overlap, "run", lambda plan: seen.append(plan) or {"scenarios": []})
    plan = overlap.Plan(apis=KERNEL_APIS, steps=2, ranks=1, repeat=1, dir=str(tmp_path))
    assert overlap.main(plan, "-") == 0 and seen == [plan]


def test_the_command_line_takes_apis_and_refuses_an_unknown_one():
    done = subprocess.run([sys.executable, "-m", "iopilot", "bench", "async", "--apis",
                           "posix,stdio"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == ("iopilot: error: --apis: unknown stdio "
                                   f"(known: {', '.join(KERNEL_APIS)})")  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "iopilot", "bench", "async", "--help"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and "--apis API[,API...]" in done.stdout


def test_a_scenario_whose_reference_run_failed_is_said_not_run_under_the_others(tmp_path,
                                                                                monkeypatch):
    """The first binding's synchronous run sets a scenario's work: when it
    fails, the other bindings' rows say so (no run without that work); when
    the failing binding is mpirun's default, the bench stops with its error."""
    probe = {"params": {"units": 0, "units_per_s": 1e6, "async": 0}, "total_s": 0.1,
             "iterations": [{"open_s": 0.0, "write_s": 0.01, "close_s": 0.0}] * 2}  # fmt: skip

    def epochs(workdir, trace, plan, api_name, work, asynchronous, small=False,
               binding="default"):  # fmt: skip
        if trace.name.endswith(("first.trace", "probe.trace")):
            return probe, 0.2
        raise InputError("iopilot bench async", f"the epochs kernel failed ({binding})")

    monkeypatch.setattr(overlap, "_epochs", epochs)
    plan = overlap.Plan(steps=2, scenarios=("equal",), bindings=("none", "default"),
                        apis=("posix",), dir=str(tmp_path))  # fmt: skip
    rows = overlap.run(plan)["scenarios"]
    assert [(r["binding"], r["failed"]) for r in rows] == [
        ("none", "the epochs kernel failed (none)"),
        ("default", "its run under the none binding, which sets its work, failed")]
    assert "could not run: its run under the none binding" in overlap.render(
        {"scenarios": rows})
    with pytest.raises(InputError, match=r"failed \(default\)"):
        overlap.run(overlap.Plan(steps=2, scenarios=("equal",), bindings=("default", "none"),
                                 apis=("posix",), dir=str(tmp_path)))  # fmt: skip



def sample(**figures) -> dict:
    """A repeat's figures: every median figure 1.0 unless given."""
    base = {key: 1.0 for key in overlap.MEDIAN}
    flags = {"sync_ran_async": False, "async_ran_async": True, "in_place": True,
             "fill_once": True, "calibrated": False, "recommendation": "on"}  # fmt: skip
    return {**base, **flags, **figures}


def test_a_row_holds_the_median_of_its_repeats_and_the_advice_most_gave():
    row = overlap._median_row([sample(async_total_s=3.0, prediction_error=None),
                               sample(async_total_s=1.0, prediction_error=-0.2,
                                      recommendation="off"),
                               sample(async_total_s=2.0, prediction_error=0.1,
                                      recommendation="off")])  # fmt: skip
    assert row["async_total_s"] == 2.0  # odd: the middle one
    assert row["prediction_error"] == pytest.approx(-0.05)  # over the two that have one
    assert row["recommendation"] == "off" and len(row["repeats"]) == 3
    assert [r["async_total_s"] for r in row["repeats"]] == [3.0, 1.0, 2.0]
    # even: the mean of the middle two; a tie of advice goes to the first
    row = overlap._median_row([sample(sync_total_s=4.0, recommendation="off"),
                               sample(sync_total_s=1.0)])  # fmt: skip
    assert row["sync_total_s"] == 2.5 and row["recommendation"] == "off"
    # a flag holds only when every repeat has it; calibration when any did
    row = overlap._median_row([sample(), sample(in_place=False, calibrated=True)])
    assert row["in_place"] is False and row["calibrated"] is True
    assert row["async_ran_async"] is True and row["fill_once"] is True
    # one repeat: its own figures and no list
    row = overlap._median_row([sample(prediction_error=0.3)])
    assert row["prediction_error"] == 0.3 and "repeats" not in row


def test_repeats_run_sync_advice_and_async_again_with_the_same_work(tmp_path):
    """--repeat 2, one row for real: two synchronous and two async runs with
    the same units, and the row's figures the medians of the two."""
    if shutil.which("mpicc") is None:
        pytest.skip("mpicc not installed")
    plan = overlap.Plan(ranks=1, steps=2, size="1m", scenarios=("equal",),
                        bindings=("none",), apis=("posix",), repeat=2,
                        dir=str(tmp_path))  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(calibrate, "measure", functools.cache(calibrate.measure))
        doc = overlap.run(plan)
    (row,) = doc["scenarios"]
    assert doc["repeat"] == 2 and len(row["repeats"]) == 2
    assert row["units"] == row["async_units"] > 0 and not row["calibrated"]
    names = sorted(p.name for p in tmp_path.glob("posix-equal-none-*.trace"))
    assert [n for n in names if "async" in n] == ["posix-equal-none-async-1.trace",
                                                  "posix-equal-none-async.trace"]
    assert "posix-equal-none-sync-1.trace" in names
    for key in ("async_total_s", "sync_total_s", "prediction_error"):
        values = [r[key] for r in row["repeats"]]
        assert row[key] == pytest.approx(sum(values) / 2)
