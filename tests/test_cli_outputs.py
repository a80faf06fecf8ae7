"""``--json [PATH]`` and ``--html [PATH]`` behave the same in every command:
alone, --json writes to standard output (and the terminal text is left
out); with a path, to that file; ``-`` is standard output for both."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from iopilot import cli
from iopilot.cli import advise, optimize, tune
from iopilot.demo import example_dir

DXT = str(example_dir() / "dxt.darshan")
DOC = {"best": {"settings": {"stdio.buffer_size": "1m"}}, "speedup": 2.0}


@pytest.fixture
def stubs(monkeypatch):
    """The work of tune, optimize and advise async replaced by a document:
    what is tested here is where the command line writes it."""
    said = []

    def fake_tune(opts, quiet=False):
        said.extend([] if quiet else ["table"])
        return None, DOC

    def fake_optimize(opts, quiet=False):
        opts.out.mkdir(parents=True, exist_ok=True)  # as optimize does: its page goes there
        said.extend([] if quiet else ["summary"])
        return DOC

    advice = SimpleNamespace(as_dict=lambda: DOC)
    monkeypatch.setattr(tune, "tune", fake_tune)
    monkeypatch.setattr(optimize, "optimize", fake_optimize)
    monkeypatch.setattr(optimize, "page", lambda doc: "<html>optimize</html>\n")
    monkeypatch.setattr(tune.output, "page", lambda doc: "<html>tune</html>\n")
    monkeypatch.setattr(advise.api, "advise_async", lambda *a, **k: advice)
    monkeypatch.setattr(advise, "render_html", lambda a: "<html>advice</html>\n")
    monkeypatch.setattr(advise, "render_text", lambda a: "advice as text")
    return said


def _argv(tmp_path, command, *options):
    """The command line of ``command`` with ``options`` (before the program's ``--``)."""
    return {
        "report": ["report", DXT, *options],
        "tune": ["tune", "--out", str(tmp_path / "t"), *options, "--", "true"],
        "optimize": ["optimize", "--out", str(tmp_path / "o"), *options, "--", "true"],
        "advise async": ["advise", "async", DXT, *options],
    }[command]


@pytest.mark.parametrize("command", ["report", "tune", "optimize", "advise async"])
def test_json_alone_goes_to_standard_output(command, stubs, tmp_path, capsys):
    assert cli.main(_argv(tmp_path, command, "--json")) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)  # all of standard output is the document
    assert isinstance(doc, dict) and doc
    assert stubs == []  # no table or summary mixed into it


@pytest.mark.parametrize("command", ["report", "tune", "optimize", "advise async"])
def test_json_with_a_path_writes_that_file(command, stubs, tmp_path, capsys):
    target = tmp_path / "out.json"
    assert cli.main(_argv(tmp_path, command, "--json", str(target))) == 0
    doc = json.loads(target.read_text())
    assert isinstance(doc, dict) and doc
    out = capsys.readouterr().out
    assert not out.lstrip().startswith("{")  # the terminal text instead
    assert stubs or out.strip()


@pytest.mark.parametrize("command", ["tune", "optimize", "advise async"])
def test_html_with_a_path_or_standard_output(command, stubs, tmp_path, capsys):
    page = tmp_path / "page.html"
    assert cli.main(_argv(tmp_path, command, "--html", str(page))) == 0
    assert page.read_text().startswith("<html>")
    capsys.readouterr()
    assert cli.main(_argv(tmp_path, command, "--html", "-")) == 0
    assert capsys.readouterr().out.startswith("<html>")


@pytest.mark.parametrize("command", ["report", "tune", "optimize", "advise"])
def test_html_alone_writes_the_commands_default_page(command, tmp_path, monkeypatch):
    parser = cli.build_parser(command)
    name = "advise async" if command == "advise" else command
    args = parser.parse_args(_argv(tmp_path, name, "--html"))
    assert args.html == f"iopilot-{'advice' if command == 'advise' else command}.html"
    assert parser.parse_args(_argv(tmp_path, name, "--json")).json == "-"


def test_a_report_page_to_standard_output(capsys):
    assert cli.main(["report", DXT, "--html", "-"]) == 0
    out = capsys.readouterr().out
    assert out.lstrip().lower().startswith("<!doctype html>") and out.rstrip().endswith("</html>")


@pytest.mark.parametrize("argv", [["bench", "ior"], ["bench", "h5bench", "c.json"],
                                  ["bench", "async"], ["bench", "accuracy"],
                                  ["bench", "tune-efficiency"]])  # fmt: skip
def test_the_benches_take_the_same_json_option(argv):
    parser = cli.build_parser("bench")
    assert parser.parse_args([*argv, "--json"]).json == "-"
    assert parser.parse_args([*argv, "--json", "out.json"]).json == "out.json"
    assert parser.parse_args(argv).json is None
