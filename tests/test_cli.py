"""``iopilot report`` as a user runs it: outputs, exit codes, errors, thresholds."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest

from iopilot.cli import main
from iopilot.demo import example_dir
from kit import SHARED

EXAMPLES = example_dir()
IOR = str(EXAMPLES / "ior_hdf5_example.darshan")
DXT = str(EXAMPLES / "dxt.darshan")
needs_shared = pytest.mark.skipif(not SHARED.exists(), reason="shared log corpus not present")


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


# The example IOR run spends 0.01 s in I/O, too little for a HIGH finding;
# these tests show how HIGH findings look, so they lift that cap.
ANY_TIME = ("--set", "high_min_io_seconds=0", "--set", "high_min_io_share=0")


def test_terminal_report(capsys):
    rc, out, _err = run(capsys, "report", IOR, "--color", "never", *ANY_TIME)
    assert rc == 0
    assert "iopilot report:" in out and "ranks     4" in out
    assert "critical issue(s)" in out
    assert "[HIGH]" in out and "Drishti P08" in out
    assert "\x1b[" not in out  # no colour codes when asked for none


def test_json_schema(capsys):
    rc, out, _ = run(capsys, "report", IOR, "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["schema"] == "iopilot-report" and doc["version"] == 1
    (r,) = doc["reports"]
    assert r["job"]["nprocs"] == 4
    assert r["counts"]["HIGH"] == sum(f["level"] == "HIGH" for f in r["findings"])
    costs = [f["cost_seconds"] for f in r["findings"]]
    known = [c for c in costs if c is not None]
    assert known == sorted(known, reverse=True), "most costly first"
    assert costs == known + [None] * (len(costs) - len(known)), "unknown costs last"
    assert r["io_time"]["slowest_rank_seconds"] > 0
    for f in r["findings"]:
        assert set(f) >= {"check", "layer", "level", "drishti", "message", "evidence",
                          "files", "recommendation", "thresholds"}  # fmt: skip
    fired = r["thresholds_fired"]
    assert fired.get("misaligned_ratio") == 0.1
    assert doc["errors"] == []


def test_csv_has_one_row_per_finding(capsys):
    rc, out, _ = run(capsys, "report", IOR, "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    rc2, js, _ = run(capsys, "report", IOR, "--json")
    assert rc == rc2 == 0
    assert len(rows) == len(json.loads(js)["reports"][0]["findings"])
    # Misaligned POSIX offsets of an HDF5 file are one finding with HDF5's alignment.
    assert {r["check"] for r in rows} >= {"hdf5-alignment"}


def test_many_logs_summary_and_bad_input_exit_2(capsys, tmp_path):
    empty = tmp_path / "empty.darshan"
    empty.write_bytes(b"")
    rc, out, err = run(capsys, "report", IOR, DXT, str(empty), "--color", "never", "-j", "2")
    assert rc == 2
    assert out.count("iopilot report:") == 2
    assert "summary" in out and "empty.darshan" in out
    assert err.strip() == f"iopilot: error: {empty}: empty file (0 bytes), not a Darshan log"


def test_fail_on_critical(capsys):
    assert run(capsys, "report", IOR, *ANY_TIME)[0] == 0
    assert run(capsys, "report", IOR, "--fail-on-critical", *ANY_TIME)[0] == 1
    # 0.01 s of I/O is nothing critical.
    assert run(capsys, "report", IOR, "--fail-on-critical")[0] == 0


def test_thresholds_from_toml_and_command_line(capsys, tmp_path):
    cfg = tmp_path / "t.toml"
    cfg.write_text("[thresholds]\nmisaligned_ratio = 0.99\n")
    _, out, _ = run(capsys, "report", IOR, "--json", "--config", str(cfg))
    checks = {f["check"] for f in json.loads(out)["reports"][0]["findings"]}
    assert "posix-misaligned-file" not in checks
    _, out, _ = run(capsys, "report", IOR, "--json", "--set", "misaligned_ratio=0.5",
                    "--checks", "posix-misaligned-file", *ANY_TIME)
    f = [f for f in json.loads(out)["reports"][0]["findings"]
         if f["check"] == "posix-misaligned-file"]  # fmt: skip
    assert f and f[0]["thresholds"] == {"misaligned_ratio": 0.5}


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--set", "nonsense=1"], "unknown threshold 'nonsense'"),
        (["--set", "misaligned_ratio=abc"], "must be a number"),
        (["--checks", "no-such-check"], "unknown check(s): no-such-check"),
    ],
)
def test_bad_options_are_one_line_errors(capsys, argv, needle):
    rc, _, err = run(capsys, "report", IOR, *argv)
    assert rc == 2 and needle in err and err.count("\n") == 1


def test_bad_toml(capsys, tmp_path):
    cfg = tmp_path / "t.toml"
    cfg.write_text("[thresholds\n")
    rc, _, err = run(capsys, "report", IOR, "--config", str(cfg))
    assert rc == 2 and f"{cfg}: not valid TOML" in err


def test_checks_listing(capsys):
    rc, out, _ = run(capsys, "checks")
    assert rc == 0 and "posix-small-writes" in out and "P06" in out


def test_no_traceback_from_a_real_process(tmp_path):
    bad = tmp_path / "text.darshan"
    bad.write_text("not a log\n" * 50)
    p = subprocess.run([sys.executable, "-m", "iopilot", "report", str(bad)],
                       capture_output=True, text=True)  # fmt: skip
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    assert p.stderr.strip() == f"iopilot: error: {bad}: a text file, not a binary Darshan log"


@needs_shared
def test_damaged_corpus_exit_2_one_line_each():
    damaged = sorted(str(p) for p in (SHARED / "damaged").iterdir())
    p = subprocess.run([sys.executable, "-m", "iopilot", "report", *damaged],
                       capture_output=True, text=True)  # fmt: skip
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == len(damaged)
    assert all(line.startswith("iopilot: error: ") for line in lines)
    assert "Traceback" not in p.stderr


@needs_shared
def test_whole_corpus_in_one_run(capsys):
    # Directories recurse: the damaged logs below are one error each, the rest reports.
    rc, out, err = run(capsys, "report", str(SHARED), "--json")
    doc = json.loads(out)
    assert rc == 2 and err.count("iopilot: error:") == len(doc["errors"])
    assert sorted(e["path"] for e in doc["errors"]) == sorted(
        str(p) for p in (SHARED / "damaged").glob("*.darshan"))  # fmt: skip
    assert len(doc["reports"]) == len(list(SHARED.glob("*.darshan")))
    for r in doc["reports"]:
        assert not [w for w in r["warnings"] if "failed" in w], (r["source"], r["warnings"])


def test_bench_diagnose_times_a_synthetic_trace(capsys):
    assert main(["bench", "diagnose", "--synthetic", "2000", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if line.startswith("synthetic-2000")]
    kib, secs, mib = row.split()[1:4]
    assert int(kib) >= 2000 * 48 // 1024  # the trace's records are all counted
    assert float(secs) > 0 and float(mib) > 0
    assert "1 logs: iopilot" in out


def test_bench_diagnose_without_logs_is_an_error(capsys):
    assert main(["bench", "diagnose"]) == 2
    assert "no logs given" in capsys.readouterr().err


def _all_parsers(p, path=()):
    from iopilot.cli import _subparsers

    for name, sp in _subparsers(p).items():
        yield (*path, name), sp
        yield from _all_parsers(sp, (*path, name))


def test_every_command_has_a_description_and_an_example():
    from iopilot.cli import build_parser

    seen = 0
    for path, sp in _all_parsers(build_parser()):
        text = sp.format_help()
        assert sp.description and len(sp.description) > 20, path
        assert f"example:\n  iopilot {' '.join(path)}" in text, path
        seen += 1
    assert seen >= 15  # report, run, export counters, bench and its kernels ...


@pytest.mark.parametrize(("argv", "command", "bad"), [
    (["report", "x.darshan", "--jsno"], "report", "--jsno"),
    (["export", "counters", "x", "--bad"], "export counters", "--bad"),
    (["bench", "diagnose", "--repeats", "2"], "bench diagnose", "--repeats"),  # 2: a log
    # run's own positional is named "command" too: it must not be taken for a subcommand
    (["run", "-o", "t1", "--", "true"], "run", "-o"),
    (["tune", "--trails", "3", "--", "true"], "tune", "--trails"),
])  # fmt: skip
def test_a_mistyped_option_gets_the_subcommands_usage(capsys, argv, command, bad):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert err.startswith(f"usage: iopilot {command} ")
    assert f"iopilot {command}: error: unrecognized arguments: {bad}" in err


def test_html_prints_a_summary_not_the_whole_report(capsys, tmp_path):
    page = tmp_path / "p.html"
    rc, out, _ = run(capsys, "report", IOR, "--html", str(page))
    assert rc in (0, 1) and page.exists()
    assert "summary" in out and out.count("\n") < 8  # one line per log
    rc, full, _ = run(capsys, "report", IOR)
    assert full.count("\n") > 8 and len(full) > 2 * len(out)


def test_a_command_builds_only_its_own_options():
    from iopilot.cli import _subparsers, build_parser

    assert set(_subparsers(build_parser("report"))) == {"report"}
    assert set(_subparsers(build_parser())) == {"report", "checks", "run", "cc", "export", "demo",
                                                "bench", "tune", "optimize", "advise"}  # fmt: skip


def test_a_mistyped_command_lists_every_command(capsys):
    with pytest.raises(SystemExit) as e:
        main(["reprot", "x.darshan"])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert "invalid choice: 'reprot'" in err
    for name in ("report", "checks", "run", "export", "demo", "bench"):
        assert f"'{name}'" in err
