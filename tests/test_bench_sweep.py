"""`iopilot bench sweep`: typed settings, checks before the first run, the
recommendation and its noise rule, progress, outputs."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys

import pytest

from iopilot.bench import sweep
from iopilot.errors import InputError

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")


def iopilot(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "iopilot", *args], capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def test_values_are_typed_by_the_kernels_own_table():
    # 0 and 1 are values for valued options, truth values for flags.
    assert sweep.kernel_args("ior", {"iterations": "1", "segments": "0"}) == [
        "--iterations", "1", "--segments", "0"]  # fmt: skip
    assert sweep.kernel_args("vpicio", {"compute": "0"}) == ["--compute", "0"]
    assert sweep.kernel_args("ior", {"fsync": "1", "keep": "0", "fpp": "true", "ranks": "2"}) == [
        "--fsync", "--fpp"]  # fmt: skip
    assert sweep.kernel_args("ior", {"collective": "off", "reorder": "YES"}) == ["--reorder"]


@pytest.mark.parametrize("point, words", [
    ({"trasfer": "1m"}, "ior has no option --trasfer"),
    ({"fsync": "2"}, "fsync is a flag of ior: give 1 or 0, not '2'"),
    ({"ranks": "0"}, "ranks must be a whole number >= 1, not '0'"),
    ({"ranks": "two"}, "ranks must be a whole number"),
])  # fmt: skip
def test_bad_settings_are_refused_by_name(point, words):
    with pytest.raises(InputError, match=words):
        sweep.check_point("ior", point, "--set")


def test_good_settings_pass():
    point = {"ranks": "1", "fsync": "0", "transfer": "4k", "api": "mpiio"}
    sweep.check_point("ior", point, "--set")


def test_parse_axes_refuses_repeats_and_empties():
    assert sweep.parse_axes(["a=1,2", "b=x"]) == [("a", ["1", "2"]), ("b", ["x"])]
    for bad in (["a"], ["=1"], ["a="], ["a=1", "a=2"]):
        with pytest.raises(InputError):
            sweep.parse_axes(bad)
    with pytest.raises(InputError, match="one value only"):
        sweep.parse_axes(["a=1,2"], single=True)


def test_mechanisms_are_flags_and_words():
    axes = [("transfer", ["4k", "1m"]), ("api", ["posix", "mpiio"]), ("fpp", ["0", "1"]),
            ("ranks", ["1", "2"]), ("block", ["1.5m", "2g"])]  # fmt: skip
    assert sweep.mechanism_axes("ior", axes) == ["api", "fpp"]


def row(transfer, api, write, read=None):
    r = {"transfer": transfer, "api": api, "write_mib_s_runs": write}
    if read:
        r["read_mib_s_runs"] = read
    return r


AXES = [("transfer", ["4k", "1m"]), ("api", ["posix", "mpiio"])]


def test_recommendation_per_size_with_margin_and_noise_rule():
    rows = [row("4k", "posix", [100, 110, 90]), row("4k", "mpiio", [200, 190, 210]),
            row("1m", "posix", [500, 400, 450]), row("1m", "mpiio", [440, 420, 430]),
            {"transfer": "1m", "api": "hdf5", "error": "crashed"}]  # fmt: skip
    recs = sweep.recommend(rows, AXES, ["api"], repeat=3)
    assert [(r["sizes"], r["phase"], r["best"]) for r in recs] == [
        ({"transfer": "1m"}, "write", {"api": "posix"}),
        ({"transfer": "4k"}, "write", {"api": "mpiio"})]  # fmt: skip
    one_m, four_k = recs
    assert four_k["margin"] == pytest.approx(1.0) and four_k["runner_up"] == {"api": "posix"}
    assert four_k["verdict"].startswith("win")
    assert four_k["mib_s"] == {"median": 200, "min": 190, "max": 210}
    # 450 beats 430 by median, but the runs overlap (400 < 440): no win claimed.
    assert one_m["margin"] == pytest.approx(20 / 430) and one_m["verdict"].startswith("within")
    line = sweep.describe(four_k)
    assert "transfer=4k: write best with api=mpiio: 200.0 MiB/s" in line and "+100 %" in line


def test_the_edge_of_the_noise_rule():
    # The best's slowest run equal to the runner-up's fastest: not a win.
    rows = [row("4k", "posix", [100, 120]), row("4k", "mpiio", [90, 100])]
    assert sweep.recommend(rows, AXES, ["api"], 2)[0]["verdict"].startswith("within")
    rows = [row("4k", "posix", [101, 120]), row("4k", "mpiio", [90, 100])]
    assert sweep.recommend(rows, AXES, ["api"], 2)[0]["verdict"].startswith("win")


def test_one_run_makes_no_claim_and_reads_are_ranked_apart():
    rows = [row("4k", "posix", [100], [900]), row("4k", "mpiio", [200], [300])]
    recs = sweep.recommend(rows, AXES, ["api"], repeat=1)
    assert [(r["phase"], r["best"]["api"]) for r in recs] == [("write", "mpiio"),
                                                              ("read", "posix")]  # fmt: skip
    assert all("noise unknown" in r["verdict"] for r in recs)


def test_without_a_mechanism_axis_the_best_point_is_named():
    axes = [("transfer", ["4k", "1m"])]
    rows = [{"transfer": "4k", "write_mib_s_runs": [10]},
            {"transfer": "1m", "write_mib_s_runs": [30]}]
    (rec,) = sweep.recommend(rows, axes, [], repeat=1)
    assert rec["sizes"] == {} and rec["best"] == {"transfer": "1m"} and rec["margin"] == 2.0
    assert sweep.describe(rec).startswith("all points: write best with transfer=1m")


def test_a_lone_candidate_has_no_margin():
    (rec,) = sweep.recommend([row("4k", "posix", [5])], AXES, ["api"], repeat=1)
    assert "runner_up" not in rec and "over" not in sweep.describe(rec)


def test_line_styles_differ():
    styles = [sweep.line_style(k) for k in range(100)]
    assert len(set(styles)) == 100
    assert len({s[0] for s in styles[:10]}) == 10 and len({s[1] for s in styles[:10]}) == 10


def test_sweep_records_settings_reports_eta_and_recommends(tmp_path):
    out = tmp_path / "out"
    p = iopilot("bench", "sweep", "ior", "--grid", "api=posix,mpiio", "--set", "iterations=1",
                "--set", "block=64k", "--set", "transfer=16k", "--set", "fsync=1",
                "--repeat", "2", "--out", str(out))  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "[2/2] ior api=mpiio" in p.stderr and "ETA" in p.stderr
    rows = list(csv.DictReader(open(out / "sweep.csv")))
    assert [r["api"] for r in rows] == ["posix", "mpiio"]
    assert all(r["set:iterations"] == "1" and r["set:fsync"] == "1" for r in rows)
    assert all(float(r["write_mib_s_min"]) <= float(r["write_mib_s"]) <= float(r["write_mib_s_max"])
               for r in rows)  # fmt: skip
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["fixed"] == {"iterations": "1", "block": "64k", "transfer": "16k", "fsync": "1"}
    assert doc["mechanisms"] == ["api"] and doc["repeat"] == 2
    assert all(len(r["write_mib_s_runs"]) == 2 for r in doc["rows"])
    assert {r["phase"] for r in doc["recommendations"]} == {"write", "read"}
    assert "all points: write best with api=" in p.stdout


def test_sweep_refuses_a_bad_setting_before_running(tmp_path):
    p = iopilot("bench", "sweep", "ior", "--grid", "api=posix", "--set", "fsync=2",
                "--out", str(tmp_path / "o"))  # fmt: skip
    assert p.returncode == 2 and "fsync is a flag of ior" in p.stderr and "[1/1]" not in p.stderr
    p = iopilot("bench", "sweep", "ior", "--grid", "api=posix", "--set", "api=mpiio",
                "--out", str(tmp_path / "o"))  # fmt: skip
    assert p.returncode == 2 and "also a --grid axis: api" in p.stderr
