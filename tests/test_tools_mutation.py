"""The mutation-score helpers (tools/mutation_score.py, tools/mutation_sample.py)
on hand-made mutmut result files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import mutation_sample
import mutation_score


def _meta(base: Path, rel: str, codes: dict[str, int | None]) -> None:
    path = base / "src" / "iopilot" / f"{rel}.py.meta"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"exit_code_by_key": codes}))


def test_wilson_interval_holds_the_share_and_narrows_with_more_mutants():
    lo, hi = mutation_score.wilson(86, 100)
    assert lo < 0.86 < hi
    lo2, hi2 = mutation_score.wilson(860, 1000)
    assert lo < lo2 < 0.86 < hi2 < hi
    assert mutation_score.wilson(0, 0) == (0.0, 1.0)
    assert mutation_score.wilson(10, 10)[1] == 1.0 and mutation_score.wilson(0, 10)[0] == 0.0


def test_sample_is_stratified_by_folder_seeded_and_without_repeats(tmp_path):
    _meta(tmp_path, "checks/a", {f"checks.a.x__mutmut_{i}": None for i in range(300)})
    _meta(tmp_path, "sources/b", {f"sources.b.y__mutmut_{i}": None for i in range(100)})
    by = mutation_sample.names_by_folder(tmp_path / "src" / "iopilot")
    picked = mutation_sample.sample(by, 40, seed=3)
    assert len(picked) == len(set(picked)) == 40
    assert sum(n.startswith("checks.") for n in picked) == 30  # 3:1, as the folders
    assert picked == mutation_sample.sample(by, 40, seed=3)
    assert picked != mutation_sample.sample(by, 40, seed=4)
    assert len(mutation_sample.sample(by, 10_000, seed=1)) == 400  # never more than exist
    even = mutation_sample.sample(by, 40, seed=3, equal=True)
    assert sum(n.startswith("checks.") for n in even) == 20 and len(set(even)) == 40
    assert len(mutation_sample.sample(by, 400, seed=1, equal=True)) == 300  # sources: its 100


def test_score_counts_caught_missed_and_not_run_and_shows_an_interval_for_a_sample(
        tmp_path, capsys):  # fmt: skip
    _meta(tmp_path, "checks/a", {"k1": 1, "k2": 0, "k3": None, "k4": 3, "k5": 33})
    _meta(tmp_path, "sources/b", {"s1": 1, "s2": 1})
    assert mutation_score.main(str(tmp_path)) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    checks = rows["checks"].split()
    assert checks[1:6] == ["5", "2", "2", "0", "1"] and checks[6] == "50.0"
    assert "interval" in rows["checks"]  # one mutant not run: a sample
    assert "100.0" in rows["sources"] and "interval" not in rows["sources"]


@pytest.mark.parametrize("args", [[], ["x"]])
def test_sample_usage_errors(args, tmp_path, capsys):
    assert mutation_sample.main(*args) == 2
    assert "Usage" in capsys.readouterr().err


C_SNIPPET = """#include <stdio.h>
#define LIMIT 4 /* < 5 */
static int table[8] = {1, 2};
int f(int a, int b) {
    /* a < b && never */
    if (a < b && b >= 2) log_it("x<y", 'c');
    a = a + 10;
    return 0;
}
"""


def test_c_mutants_flip_operators_in_code_only():
    import mutate_c

    ms = mutate_c.mutants_of("x.c", C_SNIPPET)
    ops = {(m.op, m.old) for m in ms}
    assert ("<-><=", "<") in ops and (">=->>", ">=") in ops and ("&&->||", "&&") in ops
    assert ("+1", "10") in ops and ("-1", "10") in ops and ("+1", "2") in ops
    assert ("return 0->-1", "0") in ops and ("delete log_it()", "log_it(\"x<y\", 'c');") in ops
    assert ("negate if", "a < b && b >= 2") in ops
    # never in a comment, a string, a character constant, a preprocessor line
    # or an array's size
    for m in ms:
        line = C_SNIPPET.splitlines()[m.line - 1]
        assert not line.startswith("#") and "/*" not in line, m
        assert m.old != "8"
        assert C_SNIPPET[m.start : m.end] == m.old
    assert sum(m.op == "<-><=" for m in ms) == 1  # the '<' inside "x<y" is text
    assert all(m.apply(C_SNIPPET) != C_SNIPPET for m in ms)


def test_c_sample_is_stratified_by_file_and_seeded():
    import mutate_c

    ms = mutate_c.mutants_of("a.c", C_SNIPPET * 3) + mutate_c.mutants_of("b.c", C_SNIPPET)
    picked = mutate_c.sample(ms, 20, seed=5)
    assert len(picked) == len(set(picked)) == 20
    assert sum(m.file == "a.c" for m in picked) == 15
    assert picked == mutate_c.sample(ms, 20, seed=5) != mutate_c.sample(ms, 20, seed=6)


def test_score_shows_the_c_runtime_as_its_own_folder(tmp_path, capsys):
    results = tmp_path / "results.json"
    results.write_text(json.dumps({
        "": {"generated": 10},
        "k1": {"file": "behind.c", "status": "killed"},
        "k2": {"file": "behind.c", "status": "survived"},
        "k3": {"file": "records.c", "status": "timeout"},
        "k4": {"file": "records.c", "status": "compile"},
        "k5": {"file": "records.c", "status": "error"},
    }))
    assert mutation_score.main(str(tmp_path / "none"), "--by-file", "--c-results",
                               str(results)) == 0  # fmt: skip
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines()}
    # 3 scored, 1 not compiled and 1 whose tests never ran (out of the score), 5 not run
    assert rows["runtime"][1:6] == ["8", "2", "1", "0", "5"] and rows["runtime"][6] == "66.7"
    assert rows["runtime/behind.c"][1:3] == ["2", "1"]
    assert "1 timed out" in out and "1 did not compile and 1 stopped the tests" in out


@pytest.mark.parametrize(("code", "status"), [(0, "survived"), (1, "killed"), (2, "error"),
                                              (4, "error"), (5, "error")])  # fmt: skip
def test_a_mutant_is_killed_only_by_a_failed_test(code, status):
    """pytest's exit 1 is a failed test; an interrupted run, a usage error or
    nothing collected (2 to 5) says nothing of the mutant."""
    import mutate_c

    assert mutate_c.pytest_status(code) == status


@pytest.mark.parametrize("option", ["PARTS=python", "SAMPLE=3", "CSAMPLE=2", "SEED=5", "JOBS=1"])
@pytest.mark.parametrize("sub", ["kernels", "runtime"])
def test_options_of_make_mutation_leave_the_builds_it_sets_up_unchanged(sub, option, tmp_path):
    """``make mutation PARTS=python`` hands its options to every sub-make
    (MAKEFLAGS): a Makefile below with a variable of the same name would
    build something else (the kernels once tried to link a part alone)."""
    root = Path(__file__).resolve().parents[1]
    base = ["make", "-n", "-B", "-C", str(root / sub)]
    if sub == "kernels":
        base.append(f"OUT={tmp_path}")
    plain = subprocess.run(base, capture_output=True, text=True, check=True).stdout
    given = subprocess.run([*base, option], capture_output=True, text=True, check=True).stdout
    assert "-o" in plain
    assert given == plain


def test_mutmut_copies_every_folder_its_tests_read():
    """mutmut runs the selected tests in a copy of the project: a top folder
    or file one of them reads (tools/build_darshan_ffi.py, the Makefile) must be copied, or
    the run before the mutants fails and no mutant is tried."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    cfg = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["mutmut"]
    copied = {p.rstrip("/") for p in cfg["also_copy"]} | {"src", "pyproject.toml"}
    tops = {p.name for p in root.iterdir() if not p.name.startswith(".")}
    tops -= {"mutants", "mutants-c"}
    tests = [a for a in cfg["pytest_add_cli_args_test_selection"] if a.startswith("tests/")]
    assert len(tests) > 10
    for t in tests:
        text = (root / t.split("::")[0]).read_text()
        read = {d for d in tops if re.search(rf'/ "{re.escape(d)}"|"{re.escape(d)}/', text)}
        assert read <= copied, (t, read - copied)
