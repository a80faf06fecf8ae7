"""``iopilot report`` never hangs on what it is pointed at: FIFOs, sockets
and devices are refused before anything opens them, each with one line on
stderr, and every other input is still reported."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from iopilot.cli import build_parser
from iopilot.demo import example_dir

ROOT = Path(__file__).resolve().parents[1]
LOG = example_dir() / "dxt.darshan"
# A guard, not a wait: a report that blocks on an input fails the test here.
GUARD = 20


def _report(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "iopilot", "report", *args],
                          capture_output=True, text=True, env=env or base, timeout=GUARD,
                          stdin=subprocess.DEVNULL)  # fmt: skip


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
    d = Path(tempfile.mkdtemp(prefix="iop-"))
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
