"""``iopilot bench accuracy``: the scoring on both sides of each edge, reading
case files, building once, and the command on a small corpus of its own."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from iopilot.bench import accuracy as acc
from iopilot.bench import corpus as cp
from iopilot.cli import main


def finding(check="hdf5-chunking", snippet="H5Pset_chunk(dcpl, 3, dims);", lang="c",
            cost=1.0):  # fmt: skip
    return {"check": check, "level": "WARN", "snippet": snippet, "snippet_lang": lang,
            "cost_seconds": cost}  # fmt: skip


# ---------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------


def test_first_right_needs_the_expected_check():
    assert acc.first_right("hdf5-chunking", None, finding())
    assert not acc.first_right("flush-per-step", None, finding())
    assert not acc.first_right("hdf5-chunking", None, None)


def test_first_right_needs_the_advice_in_the_snippet():
    assert acc.first_right("hdf5-chunking", "H5Pset_chunk", finding())
    assert not acc.first_right("hdf5-chunking", "chunks=", finding())
    assert not acc.first_right("hdf5-chunking", "H5Pset_chunk", finding(snippet=None))


@pytest.mark.parametrize(("language", "snippet_lang", "right"), [
    ("c", "c", True), ("python", "python", True), ("fortran", "fortran", True),
    ("c++", "c++", True), ("c++", "cpp", True),
    ("python", "c", False), ("fortran", "c", False), ("c++", "c", False), ("c", "sh", False),
])  # fmt: skip
def test_language_right(language, snippet_lang, right):
    assert acc.language_right(language, finding(lang=snippet_lang)) is right


def test_a_link_line_is_right_only_for_a_finding_about_the_build():
    relink = {**finding(check="static-layers", snippet="h5cc -shlib -o app app.c", lang="sh"),
              "layer": "BUILD"}
    assert acc.language_right("c", relink) and acc.language_right("fortran", relink)
    assert not acc.language_right("c", {**relink, "layer": "POSIX"})
    assert not acc.language_right("c", {**relink, "snippet_lang": "python"})


def test_no_snippet_or_no_finding_is_not_in_the_language():
    assert not acc.language_right("c", finding(snippet="", lang=""))
    assert not acc.language_right("c", finding(snippet=None, lang=None))
    assert not acc.language_right("c", None)


@pytest.mark.parametrize(("ratio", "right"), [
    (0.5, True), (0.4999, False), (2.0, True), (2.0001, False), (1.0, True), (None, False),
])  # fmt: skip
def test_stake_within_2x_includes_both_ends(ratio, right):
    assert acc.stake_right(ratio) is right


def test_stake_ratio():
    assert acc.stake_ratio(1.0, 2.0) == 0.5
    assert acc.stake_ratio(4.0, 2.0) == 2.0
    assert acc.stake_ratio(None, 2.0) is None  # no cost_seconds: not within anything
    assert acc.stake_ratio(1.0, None) is None
    assert acc.stake_ratio(1.0, 0.0) is None
    assert acc.stake_ratio(1.0, -0.2) is None  # the fix was slower


@pytest.mark.parametrize(("saved", "counts"), [
    (0.1, True), (0.0999, False), (0.5, True), (None, False), (-1.0, False),
])  # fmt: skip
def test_stake_counts_only_savings_of_at_least_a_tenth_of_a_second(saved, counts):
    assert acc.stake_counts(saved) is counts


def site(file="/home/u/prog/main.c", line=19, function="write_all", seconds=1.0):
    return {"kind": "source", "file": file, "line": line, "function": function, "calls": 10,
            "seconds": seconds}  # fmt: skip


def located(*locations) -> dict:
    return {**finding(), "locations": list(locations)}


def test_line_right_on_the_mistakes_file_and_line():
    first = located({"kind": "file", "path": "/tmp/out.dat"}, site(), site(line=47))
    assert acc.line_right("/work/corpus/c-x/main.c", 19, first)  # the first source location
    assert acc.line_right(Path("main.c"), 19, first)  # compared by the file's name


@pytest.mark.parametrize(("first", "why"), [
    (located(site(line=20)), "the next line"),
    (located(site(line=18)), "the line before"),
    (located(site(line=47), site(line=19)), "the line second, not first"),
    (located(site(file="/home/u/prog/util.c")), "another file"),
    (located(site(file="/home/u/prog/main.cpp")), "another file, the same stem"),
    (located(site(file="", line=0)), "no debug information: a function only"),
    (located({"kind": "file", "path": "/tmp/out.dat"}), "no source location"),
    (finding(), "no locations at all"),
    (None, "no finding"),
])  # fmt: skip
def test_line_right_refuses(first, why):
    assert not acc.line_right("/work/corpus/c-x/main.c", 19, first), why


def test_line_right_needs_a_labelled_line():
    assert not acc.line_right("/work/corpus/c-x/main.c", None, located(site()))


def test_score_says_which_site_came_first():
    c = case(language="c", source=Path("/work/corpus/c-x/main.c"), line=19)
    r = acc.score(c, report(located(site(line=20, function="main"))), None, None, None)
    assert (r.line, r.site, r.line_ok) == (19, "main.c:20", False)
    r = acc.score(c, report(located(site())), None, None, None)
    assert (r.site, r.line_ok) == ("main.c:19", True)
    r = acc.score(c, report(located(site(file="", line=0))), None, None, None)
    assert (r.site, r.line_ok) == ("write_all", False)
    r = acc.score(case(), report(located(site())), None, None, None)  # a case without a line
    assert (r.line, r.line_ok) == (None, False)
    assert line_column(acc.render([r], acc.totals([r]))) == ["-"]


def line_column(text: str) -> list[str]:
    """The "line" column of the table (its rows up to the first blank line,
    without the lines that say why a case failed)."""
    rows = [row for row in text.split("\n\n")[0].splitlines() if not row.startswith("    !")]
    at = rows[0].index(" line ") + 1
    return [row[at:].split("  ")[0].strip() for row in rows[1:]]


def case(**kw) -> cp.Case:
    base = dict(name="x", dir=Path("/nonexistent"), source=Path("/nonexistent/main.py"),
                title="t", language="python", run="{python} {src} {mode}",
                expect="hdf5-chunking", advice="H5Pset_chunk")  # fmt: skip
    return cp.Case(**{**base, **kw})


def report(*findings) -> dict:
    return {"findings": list(findings), "io_time": {"slowest_rank_seconds": 2.0}}


def test_score_takes_the_first_warn_or_high_finding():
    info = {**finding("posix-small-writes"), "level": "INFO"}
    r = acc.score(case(language="c"), report(info, finding(cost=0.3)), report(info), 1.0, 0.5)
    assert (r.first, r.first_ok, r.language_ok) == ("hdf5-chunking", True, True)
    assert r.saved == pytest.approx(0.5) and r.ratio == pytest.approx(0.6)
    assert r.stake_ok and r.scored_stake and r.still_in_fixed is False
    assert r.io_seconds == 2.0 and r.expect_at == 1 and r.warned == ["hdf5-chunking"]


def test_score_says_where_the_expected_finding_came():
    r = acc.score(case(), report(finding("posix-small-writes"), finding()), None, None, None)
    assert not r.first_ok and r.expect_at == 2
    assert r.warned == ["posix-small-writes", "hdf5-chunking"]
    assert acc.score(case(), report(finding("x")), None, None, None).expect_at is None


def test_the_table_tells_a_missing_advice_from_a_wrong_check():
    right = acc.score(case(), report(finding(snippet="H5Pset_chunk")), None, None, None)
    advice = acc.score(case(), report(finding(snippet="chunks=(64,)")), None, None, None)
    wrong = acc.score(case(), report(finding("x")), None, None, None)
    rows = acc.render([right, advice, wrong], acc.totals([right, advice, wrong])).splitlines()
    assert [row.split()[4] for row in rows[1:4]] == ["yes", "advice", "NO"]


def test_score_a_missing_cost_counts_as_wrong_when_the_saving_counts():
    r = acc.score(case(), report(finding(cost=None)), None, 1.0, 0.5)
    assert r.scored_stake and not r.stake_ok and r.ratio is None
    assert r.still_in_fixed is None


def test_score_a_saving_below_the_edge_is_not_scored():
    r = acc.score(case(), report(finding(cost=0.05)), None, 1.0, 0.95)
    assert not r.scored_stake and not r.stake_ok


def test_score_says_when_the_expected_finding_survives_the_fix():
    r = acc.score(case(), report(finding()), report(finding()), None, None)
    assert r.still_in_fixed is True and r.saved is None and not r.scored_stake


def test_totals_and_their_lines():
    rs = [acc.Result("a", "c", "x", first="x", first_ok=True, language_ok=True, saved=1.0,
                     ratio=1.0, stake_ok=True, line=19, site="main.c:19", line_ok=True),
          acc.Result("b", "python", "y", first="z", saved=0.05, ratio=9.0, line=4),
          acc.Result("c", "python", "y", saved=0.5, error="traced mistake run failed")]
    t = acc.totals(rs)
    assert t == {"cases": 3, "first_right": 1, "language_right": 1, "line_cases": 2,
                 "line_right": 1, "timed": 3, "stake_cases": 2, "stake_right": 1,
                 "still_in_fixed": 0, "failed": 1}  # fmt: skip
    text = acc.render(rs, t)
    assert "first finding right: 1/3 (33 %)" in text
    assert "first call site on the mistake's line: 1/2 of the cases with a line (50 %)" in text
    assert line_column(text) == ["yes", "no (-)", "-"]
    assert "advice in the program's language: 1/3" in text
    assert "at stake within 2x: 1/2 of the cases saving >= 0.1 s" in text
    assert "! traced mistake run failed" in text


# ---------------------------------------------------------------------------
# Case files
# ---------------------------------------------------------------------------

GOOD = """\
title = "small writes"
language = "python"
uses = ["numpy"]
run = "{python} {src} {mode}"
expect = "posix-small-writes"
mistake = "one byte at a time"
fix = "one write"
"""


def write_case(root: Path, name: str, toml: str, source: str = "main.py",
               text: str = "import os\nos.write(1, b'x')\n") -> Path:  # fmt: skip
    d = root / name
    d.mkdir(parents=True)
    (d / "case.toml").write_text(toml)
    (d / source).write_text(text)
    return d / "case.toml"


def test_a_good_case_loads(tmp_path):
    c = cp.load_case(write_case(tmp_path, "ok", GOOD))
    assert (c.name, c.language, c.expect, c.uses, c.ranks) == (
        "ok", "python", "posix-small-writes", ["numpy"], None)
    assert c.source.name == "main.py" and c.build is None and c.line is None
    assert cp.load_case(write_case(tmp_path, "at", GOOD + "line = 2\n")).line == 2


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda s: s.replace('expect = "posix-small-writes"\n', ""), "missing key(s): expect"),
    (lambda s: s.replace('"python"', '"rust"', 1), "unknown language 'rust'"),
    (lambda s: s.replace('"python"', '"c"', 1), "missing key: build"),
    (lambda s: s.replace('["numpy"]', '["numpy", "zarr"]'), "unknown uses zarr"),
    (lambda s: s + "ranks = 0\n", "ranks: 0"),
    (lambda s: s + "colour = 1\n", "unknown key(s): colour"),
    (lambda s: s.replace("{mode}", "{mdoe}"), "unknown placeholder {mdoe}"),
    (lambda s: s.replace('run = "{python} {src} {mode}"', 'run = ""'), "run: empty command"),
    (lambda s: s + "[[oops", "not TOML"),
    (lambda s: s + "line = 0\n", "line: 0 is not a line number"),
    (lambda s: s + 'line = "19"\n', "line: '19' is not a line number"),
    (lambda s: s + "line = true\n", "line: True is not a line number"),
    (lambda s: s + "line = 3\n", "line: 3 is past the end of main.py"),
])  # fmt: skip
def test_a_bad_case_is_one_line_naming_the_file(tmp_path, edit, reason):
    path = write_case(tmp_path, "bad", edit(GOOD))
    with pytest.raises(cp.CaseError) as e:
        cp.load_case(path)
    assert str(e.value).startswith(f"{path}: ") and reason in str(e.value)
    assert "\n" not in str(e.value)


def test_a_case_needs_one_source(tmp_path):
    path = write_case(tmp_path, "two", GOOD)
    (path.parent / "main.c").write_text("")
    with pytest.raises(cp.CaseError, match=r"found main\.c, main\.py"):
        cp.load_case(path)


def test_a_bad_case_stops_no_other_and_globs_select(tmp_path):
    write_case(tmp_path, "a-one", GOOD)
    write_case(tmp_path, "b-bad", GOOD.replace("expect", "expected"))
    write_case(tmp_path, "c-two", GOOD)
    cases, bad = cp.load_corpus(tmp_path)
    assert [c.name for c in cases] == ["a-one", "c-two"]
    assert len(bad) == 1 and "b-bad" in bad[0].path
    cases, bad = cp.load_corpus(tmp_path, ["c-*"])
    assert [c.name for c in cases] == ["c-two"] and bad == []


def test_a_missing_compiler_or_module_is_said_per_case(tmp_path):
    c = cp.load_case(write_case(tmp_path, "f", GOOD.replace('"python"', '"fortran"', 1)
                                + 'build = "no-such-fc -o {exe} {src}"\n', "main.f90"))  # fmt: skip
    assert c.needs() == ["no-such-fc"]
    c = case(uses=["netcdf4"])
    assert c.needs() in ([], ["the Python module netCDF4"])
    assert case(uses=["numpy"]).needs() == []


def test_mpi_cases_run_under_mpirun():
    argv = cp.command(case(ranks=3), None, "fixed")
    assert argv[:3] == ["mpirun", "-np", "3"] and argv[-2:] == ["/nonexistent/main.py", "fixed"]


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_a_program_is_built_once_per_source_and_command(tmp_path):
    toml = GOOD.replace('"python"', '"c"', 1).replace("{python} {src}", "{exe}")
    path = write_case(tmp_path / "corpus", "w", toml + 'build = "cc -o {exe} {src}"\n', "main.c",
                      "int main(void) { return 0; }\n")  # fmt: skip
    c = cp.load_case(path)
    exe = cp.build(c, tmp_path / "build")
    assert exe is not None and exe.parent.name == f"w-{cp.build_key(c)}"
    stamp = exe.stat().st_mtime_ns
    assert cp.build(c, tmp_path / "build") == exe and exe.stat().st_mtime_ns == stamp
    c.source.write_text("int main(void) { return 1; }\n")  # a new source: a new build
    assert cp.build(c, tmp_path / "build") != exe
    c.source.write_text("int main(void) { return }\n")
    with pytest.raises(cp.CaseError, match="build failed"):
        cp.build(c, tmp_path / "build")
    assert [p.name for p in (tmp_path / "build").iterdir() if p.name.startswith(".")] == []


def test_a_case_may_run_another_cases_program(tmp_path):
    root = tmp_path / "corpus"
    write_case(root, "a", GOOD, "main.py", "print(1)\n")
    path = write_case(root, "b", GOOD + 'source = "../a/main.py"\n')
    (path.parent / "main.py").unlink()  # b has no program of its own
    c = cp.load_case(path)
    assert c.source == (root / "a" / "main.py").resolve()
    key = cp.build_key(c)
    c.source.write_text("print(2)\n")  # the shared program changes: so does the key
    assert cp.build_key(c) != key
    # its own program besides, or a file that is no program source: refused
    (path.parent / "main.py").write_text("")
    with pytest.raises(cp.CaseError, match=r"has its own main\.py"):
        cp.load_case(path)
    (path.parent / "main.py").unlink()
    path.write_text(GOOD + 'source = "../a/case.toml"\n')
    with pytest.raises(cp.CaseError, match="is not a program source"):
        cp.load_case(path)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_the_fixed_mode_may_be_built_another_way(tmp_path):
    toml = GOOD.replace('"python"', '"c"', 1).replace("{python} {src}", "{exe}")
    path = write_case(tmp_path / "corpus", "w", toml + 'build = "cc -o {exe} {src}"\n'
                      + 'build_fixed = "cc -DFIXED -o {exe} {src}"\n', "main.c",
                      "int main(void) {\n#ifdef FIXED\nreturn 7;\n#endif\nreturn 0; }\n")
    c = cp.load_case(path)
    mistake, fixed = cp.build(c, tmp_path / "b"), cp.build(c, tmp_path / "b", mode="fixed")
    assert mistake != fixed
    assert subprocess.run([str(mistake)]).returncode == 0
    assert subprocess.run([str(fixed)]).returncode == 7
    assert cp.build(c, tmp_path / "b", mode="mistake") == mistake  # the mistake is built as before
    bad = write_case(tmp_path / "c2", "v", GOOD + 'build_fixed = "cc -o {exe} {src}"\n',
                     "main.py", "")
    with pytest.raises(cp.CaseError, match="build_fixed without build"):
        cp.load_case(bad)


# ---------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------

PROGRAM = textwrap.dedent("""\
    import os, sys
    n = 2000 if sys.argv[1] == "mistake" else 1
    with open("out.bin", "wb", buffering=0) as f:
        for _ in range(n):
            f.write(b"x" * (4096 // n))
            os.fsync(f.fileno())
""")


def test_the_command_scores_a_small_corpus(tmp_path, capsys):
    write_case(tmp_path / "corpus", "py-fsync", GOOD.replace("uses = [\"numpy\"]\n", ""),
               text=PROGRAM)  # fmt: skip
    write_case(tmp_path / "corpus", "py-bad", "title = 1\n")
    write_case(tmp_path / "corpus", "py-fails", GOOD, text="import sys\nsys.exit(3)\n")
    out = tmp_path / "acc.json"
    rc = main(["bench", "accuracy", "--corpus", str(tmp_path / "corpus"), "--no-timing",
               "--json", str(out)])  # fmt: skip
    text, err = capsys.readouterr()
    assert rc == 0  # a benchmark: low scores are no failure
    assert "py-bad/case.toml: missing key(s)" in err
    assert "first finding right: " in text and "/2 (" in text
    assert "at stake within 2x: not measured (no untraced runs)" in text
    doc = json.loads(out.read_text())
    failed, r = doc["cases"]
    assert r["case"] == "py-fsync" and r["error"] is None and r["first"]
    assert r["t_mistake"] is None and r["saved"] is None  # --no-timing
    assert r["still_in_fixed"] in (True, False)
    assert failed["case"] == "py-fails" and "traced mistake run failed (exit 3)" in failed["error"]
    assert "! traced mistake run failed (exit 3)" in text  # one case's failure, not the run's
    assert doc["totals"]["cases"] == 2 and doc["totals"]["failed"] == 1
    assert len(doc["bad_cases"]) == 1


@pytest.mark.parametrize("argv", [
    ["--corpus", "/nonexistent/corpus"],
    ["--case", "no-such-case-*"],
    ["--repeat", "0"],
])  # fmt: skip
def test_bad_input_exits_2(capsys, argv):
    assert main(["bench", "accuracy", *argv]) == 2
    assert "iopilot: error: " in capsys.readouterr().err
