"""iopilot.api is the one pipeline: every front end goes through it, and its
one-call form gives what the command line prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iopilot import api
from iopilot.cli import main
from iopilot.demo import example_dir
from iopilot.errors import InputError

IOR = str(example_dir() / "ior_hdf5_example.darshan")


@pytest.fixture
def calls(monkeypatch):
    """Every api.diagnose call, in this process (IOPILOT_DEBUG: no workers)."""
    seen: list[str] = []
    real = api.diagnose

    def spy(source, **kw):
        seen.append(str(source))
        return real(source, **kw)

    monkeypatch.setattr(api, "diagnose", spy)
    monkeypatch.setenv("IOPILOT_DEBUG", "1")
    return seen


def test_report_command_goes_through_api(calls, capsys):
    assert main(["report", IOR, "--json"]) == 0
    assert calls == [IOR]
    assert json.loads(capsys.readouterr().out)["reports"][0]["source"] == IOR


def test_fleet_summary_goes_through_api(calls, capsys):
    assert main(["report", IOR, IOR, "--summary", "--json"]) == 0
    assert calls == [IOR, IOR]
    assert json.loads(capsys.readouterr().out)["logs"] == 2


def test_run_diagnosis_goes_through_api(calls, capsys):
    from iopilot.capture.run import diagnose

    diagnose(Path(IOR), "never")
    assert calls == [IOR]
    assert "iopilot report:" in capsys.readouterr().out


def test_benches_time_the_report_command_which_goes_through_api(calls, capsys):
    from iopilot.bench.diagnose_speed import report_command

    cmd = report_command(IOR, "--json", "-")
    assert cmd[1:4] == ["-m", "iopilot", "report"]
    assert main(cmd[3:]) == 0  # what the bench's child process runs
    assert calls == [IOR]


def test_one_call_report_matches_the_command_line(capsys):
    assert main(["report", IOR, "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    ours = json.loads(api.report(IOR, "json"))
    assert ours["reports"] == cli["reports"]
    assert api.report(IOR, "dict") == cli["reports"][0]


def test_formats():
    d = api.diagnose(IOR)
    assert api.render(d, "terminal").startswith(api.render(d, "terminal", color=False)[:20])
    assert "\x1b[" in api.render(d, "terminal", color=True)
    assert api.render(d, "csv").splitlines()[0].startswith("source,check,")
    assert api.render(d, "html").startswith("<!DOCTYPE html>")
    with pytest.raises(ValueError, match="unknown format"):
        api.render(d, "yaml")


def test_diagnose_takes_a_loaded_trace_and_sets_noise_aside():
    from iopilot.model.scope import FileScope

    trace = api.load(IOR)
    by_path = api.render(api.diagnose(IOR), "dict")
    by_trace = api.render(api.diagnose(trace), "dict")
    assert by_trace == by_path
    assert by_path["set_aside"]["scope"] == FileScope.build().describe()
    nothing = api.diagnose(trace, scope=FileScope.build(include_only=["/no/such/dir/*"]))
    assert nothing.trace.set_aside["files"] > 0 and not nothing.findings
    # A derived trace keeps what its own scope set aside.
    narrow = api.derive(trace, FileScope.build(include_only=["/no/such/dir/*"]))
    again = api.diagnose(narrow).trace.set_aside
    assert again == narrow.set_aside and again["files"] > 0
    only = api.diagnose(trace, only={"hdf5-alignment"})
    assert [f.check for f in only.findings] == ["hdf5-alignment"]


def test_thresholds_and_bad_input():
    assert api.thresholds(overrides=["small_request_size=7"])["small_request_size"] == 7
    assert api.thresholds()["small_request_size"] == api.threshold_defaults()[
        "small_request_size"][0]  # fmt: skip
    with pytest.raises(InputError, match=r"nope\.darshan"):
        api.diagnose("/nonexistent/nope.darshan")
