"""What ``iopilot report`` and the commands around it are given can neither
hang nor flood them: FIFOs, sockets and devices among the logs are refused
before anything opens them (one line each, the other logs reported), every
log has a time limit, settings files are bounded in size and depth with
one short line per error, and a report prints only itself and writes
nothing under $HOME."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from iopilot import userfiles
from iopilot.cli import build_parser, main
from iopilot.demo import example_dir
from iopilot.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
LOG = example_dir() / "dxt.darshan"
# A guard, not a wait: a report that blocks on an input fails the test here.
GUARD = 20


def _iopilot(*args: str, env: dict[str, str] | None = None,
             cwd: Path | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``python -m iopilot ARGS``; past GUARD seconds it and every process it
    started are killed and the test fails."""
    argv = [sys.executable, "-m", "iopilot", *args]
    env = env or {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, cwd=cwd, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = p.communicate(timeout=GUARD)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        pytest.fail(f"iopilot {' '.join(args)[:200]} did not end in {GUARD} s")
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def _report(*args: str) -> subprocess.CompletedProcess[str]:
    return _iopilot("report", *args)


def _special(path: Path, kind: str) -> tuple[Path, str]:
    """A FIFO or socket at ``path``, or a link to the null device; and its kind."""
    if kind == "FIFO":
        os.mkfifo(path)
        return path, "a FIFO"
    if kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()  # the socket file stays
        return path, "a socket"
    path.symlink_to("/dev/null")
    return path, "a character device"


@pytest.fixture
def pile():
    # A socket's path must fit in 108 bytes; pytest's temporary paths may not.
    d = Path(tempfile.mkdtemp(prefix="iop-inputs-"))
    shutil.copy(LOG, d / "good.darshan")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("iopilot: error:")]


@pytest.mark.parametrize("kind", ["FIFO", "socket", "device"])
def test_a_special_file_in_a_searched_directory_is_refused(pile, kind):
    bad, what = _special(pile / "x.darshan", kind)
    out = pile / "r.json"
    r = _report(str(pile), "--json", str(out))
    assert r.returncode == 2
    assert _errors(r.stderr) == [f"iopilot: error: {bad}: not a regular file ({what})"]
    assert "Traceback" not in r.stderr
    doc = json.loads(out.read_text())
    assert [e["path"] for e in doc["errors"]] == [str(bad)]
    assert len(doc["reports"]) == 1  # the good log is still reported


@pytest.mark.parametrize("alone", [True, False])
def test_a_fifo_named_on_the_command_line_is_refused(pile, alone):
    fifo, _ = _special(pile / "named.darshan", "FIFO")
    logs = [str(fifo)] if alone else [str(fifo), str(pile / "good.darshan")]
    out = pile / "r.json"
    r = _report(*logs, "--json", str(out))
    assert r.returncode == 2
    assert _errors(r.stderr) == [f"iopilot: error: {fifo}: not a regular file (a FIFO)"]
    assert len(json.loads(out.read_text())["reports"]) == (0 if alone else 1)


def test_a_fifo_listed_in_a_manifest_is_refused(pile):
    fifo, _ = _special(pile / "listed.darshan", "FIFO")
    (pile / "list.txt").write_text("listed.darshan\ngood.darshan\n")
    out = pile / "r.json"
    r = _report(f"@{pile / 'list.txt'}", "--json", str(out))
    assert r.returncode == 2
    assert _errors(r.stderr) == [f"iopilot: error: {fifo}: not a regular file (a FIFO)"]
    assert len(json.loads(out.read_text())["reports"]) == 1


def test_a_manifest_that_is_a_fifo_is_refused(pile):
    fifo, _ = _special(pile / "list.txt", "FIFO")
    r = _report(f"@{fifo}", "--json", str(pile / "r.json"))
    assert r.returncode == 2
    assert r.stderr == (f"iopilot: error: {fifo}: cannot read the list of logs: "
                        "not a regular file (a FIFO)\n")  # fmt: skip


def test_every_log_has_a_time_limit_by_default():
    args = build_parser("report").parse_args(["report", str(LOG)])
    assert args.timeout == 600
    r = _report("--help")
    assert r.returncode == 0 and "default: 600" in " ".join(r.stdout.split())


def test_a_negative_time_limit_is_refused(pile):
    r = _report(str(pile / "good.darshan"), "--timeout", "-1")
    assert r.returncode == 2
    assert r.stderr == "iopilot: error: --timeout: must be 0 (no limit) or more, not -1\n"


# ---------------------------------------------------------------------------
# Settings files: thresholds, settings, tuning spaces, h5bench set-ups are
# read within 1 MiB and 32 levels, and every error is one short line.

LIMIT, DEPTH = userfiles.SETTINGS_LIMIT, userfiles.MAX_DEPTH
BIG = 100 << 20  # a 100 MB file (sparse: written in no time)


def _toml_arrays(levels: int) -> str:
    """A document nesting ``levels`` levels deep (the document is level 1) in arrays."""
    return "x = " + "[" * (levels - 1) + "1" + "]" * (levels - 1) + "\n"


def _toml_tables(levels: int) -> str:
    return "[" + ".".join(["a"] * (levels - 1)) + "]\nx = 1\n"


def _json_arrays(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize(("load", "doc"), [
    (userfiles.load_toml, _toml_arrays), (userfiles.load_toml, _toml_tables),
    (userfiles.load_json, _json_arrays),
])  # fmt: skip
def test_nesting_at_the_limit_is_read_and_one_more_level_is_refused(tmp_path, load, doc):
    f = tmp_path / "s"
    f.write_text(doc(DEPTH))
    load(f)
    f.write_text(doc(DEPTH + 1))
    with pytest.raises(InputError) as e:
        load(f)
    assert e.value.reason.startswith("nested too deeply")
    assert f"more than {DEPTH} levels" in e.value.reason


@pytest.mark.parametrize("load", [userfiles.load_toml, userfiles.load_json])
def test_a_file_of_exactly_the_size_limit_is_read_and_one_byte_more_is_refused(tmp_path, load):
    f = tmp_path / "s"
    body = '{"a": 1}' if load is userfiles.load_json else "a = 1\n"
    pad = " " if load is userfiles.load_json else "#"
    f.write_text(body + pad * (LIMIT - len(body) - 1) + "\n")
    assert f.stat().st_size == LIMIT
    assert load(f) == {"a": 1}
    with f.open("a") as out:
        out.write(" ")
    with pytest.raises(InputError) as e:
        load(f)
    assert str(e.value) == (f"{f}: too large: {LIMIT + 1:,} bytes, limit {LIMIT:,} "
                            "(a settings file holds at most 1 MiB)")  # fmt: skip


def test_a_settings_file_that_is_a_fifo_is_refused_without_waiting(tmp_path):
    f = tmp_path / "t.toml"
    os.mkfifo(f)
    with pytest.raises(InputError) as e:
        userfiles.load_toml(f)
    assert e.value.reason == "not a regular file (a FIFO)"


# Per kind of file: (a valid start, a huge value, a huge key, the reason each gives).
KINDS = {
    "thresholds": ("[thresholds]\nreopen_count = 7\n",
                   'small_request_size = "{x}"\n', "{k} = 1\n",
                   ("must be a number, got 'x", "unknown threshold 'k")),
    "settings": ("[mpiio]\ncb_nodes = 2\n", 'cb_config_list = "{x}"\n', "{k} = 1\n",
                 ("[mpiio] cb_config_list: 'x", "[mpiio] k")),
    "space": ('[mpiio.cb_nodes]\nvalues = [1, 2]\n[mpiio.cb_config_list]\n',
              'values = ["{x}"]\n', '[mpiio.{k}]\nvalues = [1]\n',
              ("[mpiio.cb_config_list] values: 'x", "[mpiio.k")),
}  # fmt: skip
HUGE_VALUE, HUGE_KEY = 500_000, 1_000_000


def _bad_file(tmp_path: Path, kind: str, case: str) -> tuple[Path, str]:
    """A settings file of ``kind`` that is wrong in the way ``case`` says,
    and what its error says."""
    start, value, key, (value_says, key_says) = KINDS[kind]
    f = tmp_path / f"{kind}.toml"
    if case == "deep arrays":
        f.write_text(start + _toml_arrays(100_000).replace("x =", "[deep]\nx ="))
        return f, "nested too deeply: more than 32 levels"
    if case == "deep tables":
        f.write_text(start + _toml_tables(100_000))
        return f, "nested too deeply at a.a.a"
    if case == "long dotted key":  # the parser's time grows with the square of its parts
        f.write_text(start + "b." * 200_000 + "c = 1\n")
        return f, "nested too deeply at b.b.b"
    if case == "huge value":
        f.write_text(start + value.format(x="x" * HUGE_VALUE))
        return f, value_says
    if case == "huge key":
        f.write_text(start + key.format(k="k" * HUGE_KEY))
        return f, key_says
    f.write_text(start)
    os.truncate(f, BIG)
    return f, f"too large: {BIG:,} bytes, limit {LIMIT:,} (a settings file holds at most 1 MiB)"


CASES = ["deep arrays", "deep tables", "huge value", "huge key", "too big"]
# Run in a child with a time limit: a parser that reads this takes minutes.
SLOW = "long dotted key"


def _one_short_line(text: str, f: Path, says: str) -> None:
    assert text.endswith("\n") and text.count("\n") == 1, text[:300]
    assert len(text) <= 201 and "Traceback" not in text, text[:300]
    assert text.startswith(f"iopilot: error: {f}: ") and says in text, text
    piece = userfiles.QUOTE_CHARS + 1
    assert "x" * piece not in text and "k" * piece not in text


@pytest.mark.parametrize("case", CASES)
def test_a_bad_thresholds_file_is_one_short_line_and_status_2(tmp_path, capsys, case):
    f, says = _bad_file(tmp_path, "thresholds", case)
    rc = main(["report", str(LOG), "--config", str(f), "--json", os.devnull])
    err = capsys.readouterr().err
    assert rc == 2
    _one_short_line(err, f, says)


def test_a_thresholds_file_with_a_long_dotted_key_is_refused_before_parsing(tmp_path):
    f, says = _bad_file(tmp_path, "thresholds", SLOW)
    r = _report(str(LOG), "--config", str(f), "--json", os.devnull)
    assert r.returncode == 2
    _one_short_line(r.stderr, f, says)


def test_a_thresholds_file_of_exactly_the_limit_is_used(tmp_path, capsys):
    f = tmp_path / "t.toml"
    body = "[thresholds]\nreopen_count = 7\n"
    f.write_text(body + "#" * (LIMIT - len(body) - 1) + "\n")
    assert f.stat().st_size == LIMIT
    assert main(["report", str(LOG), "--config", str(f), "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["reports"]


@pytest.mark.parametrize("case", [*CASES, SLOW])
def test_a_bad_settings_file_is_one_short_line_and_nothing_runs(tmp_path, case):
    f, says = _bad_file(tmp_path, "settings", case)
    marker = tmp_path / "ran"
    r = _iopilot("run", "--settings", str(f), "--", "touch", str(marker))
    assert r.returncode == 2 and not marker.exists()
    _one_short_line(r.stderr, f, says)


@pytest.mark.parametrize("case", CASES)
def test_a_bad_tuning_space_is_one_short_line(tmp_path, case):
    from iopilot.tune import space

    f, says = _bad_file(tmp_path, "space", case)
    with pytest.raises(InputError) as e:
        space.load(f)
    _one_short_line(f"iopilot: error: {e.value}\n", f, says)


@pytest.mark.parametrize("case", CASES)
def test_a_bad_h5bench_setup_is_one_short_line(tmp_path, case):
    from iopilot.bench.h5bench_config import kernel_runs

    f = tmp_path / "setup.json"
    setup = {"mpi": {"ranks": 2}, "vol": {}, "file-system": {}, "directory": "d",
             "benchmarks": []}  # fmt: skip
    says = {"huge value": "launcher option 'x", "huge key": "unknown top-level key 'k",
            "deep arrays": "nested too deeply", "deep tables": "nested too deeply",
            "too big": f"too large: {BIG:,} bytes"}[case]  # fmt: skip
    if case == "huge value":
        setup["mpi"] = {"configuration": "x" * HUGE_VALUE}
    elif case == "huge key":
        setup["k" * HUGE_KEY] = 1
    elif case == "deep arrays":
        setup["benchmarks"] = json.loads(_json_arrays(100))
    text = json.dumps(setup)
    if case == "deep arrays":
        text = text.replace("[[", "[" * 50_000 + "[[", 1).replace("]]", "]]" + "]" * 50_000, 1)
    elif case == "deep tables":
        text = '{"a": ' * 100_000 + "1" + "}" * 100_000
    f.write_text(text)
    if case == "too big":
        os.truncate(f, BIG)
    with pytest.raises(InputError) as e:
        kernel_runs(str(f))
    _one_short_line(f"iopilot: error: {e.value}\n", f, says)


# ---------------------------------------------------------------------------
# A report writes its report and nothing else: no line before it on stdout,
# no cache under $HOME, no $HOME created.


def _files_below(top: Path) -> list[str]:
    return sorted(str(p.relative_to(top)) for p in top.rglob("*")) if top.exists() else []


@pytest.mark.parametrize("home", ["missing", "read-only", "empty"])
def test_a_first_report_prints_only_the_report_and_writes_nothing_in_home(tmp_path, home):
    h = tmp_path / "home"
    if home != "missing":
        h.mkdir()
    if home == "read-only":
        h.chmod(0o555)
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(HOME=str(h), PYTHONPATH=str(ROOT / "src"))
    work = tmp_path / "work"
    work.mkdir()
    log = work / "a.darshan"
    shutil.copy(LOG, log)
    r = _iopilot("report", str(log), "--json", "-", env=env, cwd=work)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["reports"][0]["source"] == str(log)
    assert r.stderr == ""
    assert h.exists() == (home != "missing") and _files_below(h) == []
    assert _files_below(work) == ["a.darshan"]
    r = _iopilot("report", str(log), "--csv", "-", env=env, cwd=work)
    assert r.stdout.splitlines()[0].startswith("source,check,")
    assert _files_below(h) == [] and _files_below(work) == ["a.darshan"]
