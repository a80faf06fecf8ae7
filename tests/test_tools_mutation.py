"""The mutation-score helpers (tools/mutation_score.py, tools/mutation_sample.py)
on hand-made mutmut result files."""

from __future__ import annotations

import json
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
