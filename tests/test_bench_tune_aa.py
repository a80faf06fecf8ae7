"""iopilot bench tune-aa: tunings of programs no setting can change, and the
wins declared among them."""

import json
import subprocess
import sys

from iopilot.tune import aa


def iopilot(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "iopilot", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_tally_counts_each_verdict():
    assert aa.tally(["win", "within noise", "win", "the default was best"]) == {
        "win": 2,
        "within noise": 1,
        "the default was best": 1,
    }
    assert aa.tally([]) == {}


def test_every_case_names_a_space_outside_the_layers_its_program_uses():
    # The noisy program writes with os.write only; the POSIX IOR makes no MPI-IO call.
    assert "[stdio]" in aa.CASES["noisy"].space and "[ompi" not in aa.CASES["noisy"].space
    assert "--api" in aa.CASES["posix-mpi"].command
    assert (
        aa.CASES["posix-mpi"].command[aa.CASES["posix-mpi"].command.index("--api") + 1] == "posix"
    )
    assert "[stdio]" not in aa.CASES["posix-mpi"].space


def test_the_noisy_case_is_tuned_and_its_verdicts_counted(tmp_path):
    r = iopilot(
        "bench",
        "tune-aa",
        "--case",
        "noisy",
        "--tunings",
        "2",
        "--trials",
        "2",
        "--json",
        "aa.json",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "aa.json").read_text())
    assert doc["tunings"] == 2 and len(doc["runs"]) == 2
    assert [x["seed"] for x in doc["runs"]] == [0, 1]
    assert doc["wins"] == sum(x["verdict"] == "win" for x in doc["runs"])
    assert sum(doc["verdicts"].values()) == 2
    for run in doc["runs"]:
        assert run["verdict"] in ("win", "within noise", "the default was best")
        assert run["trials"] == 2
        # a tuning that is not a win reports no speedup
        assert run["verdict"] == "win" or run["speedup"] == 1.0
    assert f"wins declared where no setting can win: {doc['wins']} of 2 tunings" in r.stdout


def test_bad_options_are_one_line_errors(tmp_path):
    for args, word in (
        (("--case", "nope"), "unknown case 'nope'"),
        (("--tunings", "0"), "--tunings"),
    ):
        r = iopilot("bench", "tune-aa", *args, cwd=tmp_path)
        assert r.returncode != 0
        assert word in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
