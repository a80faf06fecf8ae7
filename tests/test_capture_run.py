"""``iopilot run`` as a transparent wrapper: signals, exit status, inherited descriptors,
the trace directory and failed launches, with real processes."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import shutil
import signal
import stat
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from iopilot.capture.run import library_path

IOPILOT = [sys.executable, "-m", "iopilot", "run"]
PY = sys.executable  # a real interpreter (the venv's), traced like any program
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}  # fmt: skip


@pytest.fixture(autouse=True, scope="module")
def _runtime_built() -> None:
    library_path()  # a clear error when `make runtime` was not run


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """This environment without iopilot's variables; default traces under ``tmp/traces``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_")}
    env["IOPILOT_TRACE_ROOT"] = str(tmp / "traces")
    env.update(extra)
    return env


def iopilot(tmp: Path, *args: str, env: dict[str, str] | None = None, **kw):
    kw.setdefault("cwd", tmp)
    return subprocess.run([*IOPILOT, *args], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60, env=env or clean_env(tmp), **kw)  # fmt: skip


def start(tmp: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([*IOPILOT, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp,
                            env=clean_env(tmp))  # fmt: skip


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 15) -> None:
    """Until the program under the wrapper has written ``path`` (created is not
    enough: its content, a pid, may not be there yet)."""
    end = time.monotonic() + timeout
    while not (path.exists() and path.stat().st_size > 0):
        assert proc.poll() is None, f"ended early: {proc.returncode} {proc.communicate()}"
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.02)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def kill_if_alive(pid_file: Path) -> None:
    if pid_file.exists() and alive(pid := int(pid_file.read_text())):
        os.kill(pid, signal.SIGKILL)


# A program that counts SIGINT, treats the first as KeyboardInterrupt, takes a second
# to clean up, writes the count to argv[1] and exits 7.
CLEANS_UP = r"""
import os, signal, sys, time
out = sys.argv[1]
n = 0
def on_int(sig, frame):
    global n
    n += 1
    if n == 1:
        raise KeyboardInterrupt
signal.signal(signal.SIGINT, on_int)
open(out + ".pid", "w").write(str(os.getpid()))
try:
    time.sleep(30)
except KeyboardInterrupt:
    time.sleep(1)  # cleaning up; a second SIGINT would be counted
    open(out, "w").write(str(n))
    sys.exit(7)
sys.exit(1)
"""


def signal_the_wrapper(tmp: Path, program: str, sig: int) -> tuple[int, Path, bool]:
    """Run ``program OUT`` (it writes its pid to OUT.pid) under the wrapper and send
    ``sig`` to the wrapper; the wrapper's status, OUT, and whether the program outlived
    the wrapper."""
    out = tmp / "out"
    pid_file = Path(f"{out}.pid")
    p = start(tmp, "--trace-only", "--", PY, "-c", program, str(out))
    try:
        wait_for(pid_file, p)
        os.kill(p.pid, sig)
        p.communicate(timeout=15)
        return p.returncode, out, alive(int(pid_file.read_text()))
    finally:
        p.kill()
        kill_if_alive(pid_file)


def test_sigint_to_the_wrapper_reaches_the_program_once(tmp_path):
    status, out, _ = signal_the_wrapper(tmp_path, CLEANS_UP, signal.SIGINT)
    assert status == 7 and out.read_text() == "1"


SLEEPS = r"""
import os, sys, time
open(sys.argv[1] + ".pid", "w").write(str(os.getpid()))
for _ in range(300):
    time.sleep(0.1)
"""


def test_sigterm_to_the_wrapper_ends_the_program_and_leaves_no_orphan(tmp_path):
    status, _, orphan = signal_the_wrapper(tmp_path, SLEEPS, signal.SIGTERM)
    assert status == 143 and not orphan


COUNTS_USR1 = r"""
import os, signal, sys, time
got = []
signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
open(sys.argv[1] + ".pid", "w").write(str(os.getpid()))
end = time.monotonic() + 20
while not got and time.monotonic() < end:
    time.sleep(0.02)
time.sleep(0.3)  # a duplicate would arrive now
open(sys.argv[1], "w").write(str(len(got)))
"""


def test_sigusr1_is_forwarded(tmp_path):
    status, out, _ = signal_the_wrapper(tmp_path, COUNTS_USR1, signal.SIGUSR1)
    assert status == 0 and out.read_text() == "1"


# `cat` leaves a process summary, so the trace directory is kept whatever `sh` leaves.
# A program that dies of SIGINT makes the wrapper die of it too (a shell's $? is 130
# either way), so a calling script stops as it would without iopilot.
@pytest.mark.parametrize(("script", "returncode", "status", "sig", "line"), [
    ("cat /dev/null; kill -TERM $$", 143, 143, 15, "iopilot: the program was killed by SIGTERM"),
    ("cat /dev/null; kill -KILL $$", 137, 137, 9, "iopilot: the program was killed by SIGKILL"),
    ("cat /dev/null; kill -INT $$", -2, 130, 2, "iopilot: the program was killed by SIGINT"),
    ("cat /dev/null; exit 3", 3, 3, None, "iopilot: the program exited with status 3"),
    ("cat /dev/null", 0, 0, None, None),
])  # fmt: skip
def test_exit_status_is_the_programs_like_a_shell(tmp_path, script, returncode, status, sig,
                                                  line):  # fmt: skip
    d = tmp_path / "t"
    p = iopilot(tmp_path, "--trace-only", "--trace-dir", str(d), "--", "sh", "-c", script)
    assert p.returncode == returncode, p.stderr
    job = json.loads((d / "job.json").read_text())
    assert job["format"] == "iopilot-job" and job["version"] == 2
    assert job["exit_status"] == status and job["signal"] == sig
    assert job["command"] == ["sh", "-c", script] and job["end"] >= job["start"]
    if line:
        assert line in p.stderr.splitlines()
    else:
        assert "the program" not in p.stderr


class Pty:
    """The wrapper as a session leader with a pseudo-terminal as its controlling
    terminal, as in an interactive shell; what it writes to the terminal is drained."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.master, slave = pty.openpty()

        def controlling_terminal() -> None:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     cwd=cwd, start_new_session=True,
                                     preexec_fn=controlling_terminal)  # fmt: skip
        os.close(slave)
        self.output = bytearray()
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self.master, 4096):
                self.output += chunk
        except OSError:  # EIO once the last slave descriptor is closed
            pass

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(5)
        os.close(self.master)


def test_ctrl_c_on_a_terminal_reaches_the_program_once(tmp_path):
    out = tmp_path / "marker"
    t = Pty([*IOPILOT, "--trace-only", "--", PY, "-c", CLEANS_UP, str(out)],
            clean_env(tmp_path), tmp_path)
    try:
        wait_for(Path(f"{out}.pid"), t.proc)
        time.sleep(0.1)  # the program sits in time.sleep
        t.type(b"\x03")
        assert t.proc.wait(timeout=15) == 7, t.output.decode(errors="replace")
        assert out.read_text() == "1"
    finally:
        t.close()
        kill_if_alive(Path(f"{out}.pid"))


def test_ctrl_c_in_a_terminal_pipeline_reaches_the_program_once(tmp_path):
    """`iopilot run -- prog | reader`: the reader shares the wrapper's process group and
    keeps the terminal (as `less` needs), and Ctrl-C reaches the program once."""
    out, status, got = tmp_path / "marker", tmp_path / "status", tmp_path / "got"
    reader = (f'trap "" INT; while [ ! -e {out}.pid ]; do sleep 0.02; done; '
              f'read -r line < /dev/tty; echo "$line" > {got}; exec cat')  # fmt: skip
    script = f'"$@" | ({reader}); echo ${{PIPESTATUS[0]}} > {status}'
    t = Pty(["bash", "-c", script, "bash", *IOPILOT, "--trace-only", "--", PY, "-c", CLEANS_UP,
             str(out)], clean_env(tmp_path), tmp_path)  # fmt: skip
    try:
        wait_for(Path(f"{out}.pid"), t.proc)
        t.type(b"typed\n")
        wait_for(got, t.proc)
        t.type(b"\x03")
        assert t.proc.wait(timeout=15) == 0, t.output.decode(errors="replace")
        assert got.read_text() == "typed\n"
        assert out.read_text() == "1" and status.read_text() == "7\n"
    finally:
        t.close()
        kill_if_alive(Path(f"{out}.pid"))


WAITS_FOR_GO = r"""
import os, sys, time
open(sys.argv[1] + ".pid", "w").write(str(os.getpid()))
while not os.path.exists(sys.argv[1] + ".go"):
    time.sleep(0.02)
open(sys.argv[1], "w").write("done")
"""


def stops(pid: int, timeout: float = 10) -> bool:
    """Whether the child ``pid`` stops (as a job does) within ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
        if got:
            return os.WIFSTOPPED(status)
        time.sleep(0.02)
    return False


def process_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_ctrl_z_stops_the_job_and_fg_resumes_it(tmp_path):
    out = tmp_path / "marker"
    t = Pty([*IOPILOT, "--trace-only", "--", PY, "-c", WAITS_FOR_GO, str(out)],
            clean_env(tmp_path), tmp_path)
    pid_file = Path(f"{out}.pid")
    try:
        wait_for(pid_file, t.proc)
        program = int(pid_file.read_text())
        t.type(b"\x1a")
        assert stops(t.proc.pid)  # the wrapper stops too, so its shell sees a stopped job
        assert process_state(program) == "T"
        assert os.tcgetpgrp(t.master) == t.proc.pid  # the terminal is back with the wrapper
        Path(f"{out}.go").touch()
        os.kill(t.proc.pid, signal.SIGCONT)  # what `fg` does
        assert t.proc.wait(timeout=15) == 0, t.output.decode(errors="replace")
        assert out.read_text() == "done"
    finally:
        t.close()
        kill_if_alive(pid_file)


WRITES_FD = "import os, sys; os.write(int(sys.argv[1]), b'hi\\n')"


def test_inherited_descriptors_reach_the_program(tmp_path):
    target = tmp_path / "out"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        p = subprocess.run([*IOPILOT, "--trace-only", "--", PY, "-c", WRITES_FD, str(fd)],
                           pass_fds=[fd], stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60, env=clean_env(tmp_path),
                           cwd=tmp_path)  # fmt: skip
    finally:
        os.close(fd)
    assert p.returncode == 0, p.stderr
    assert target.read_text() == "hi\n"
    # The shell form: `iopilot run -- sh -c 'echo hi >&5' 5>file`.
    shell = f'exec "$@" 5>"{tmp_path}/five"'
    p = subprocess.run(["sh", "-c", shell, "sh", *IOPILOT, "--trace-only", "--",
                        "sh", "-c", "echo hi >&5"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60, env=clean_env(tmp_path),
                       cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "five").read_text() == "hi\n"


# Leaves a process summary from a newer format next to its own: no iopilot can read it.
NEWER_FORMAT = r"""
import json, os, sys
d = os.environ["IOPILOT_TRACE_DIR"]
with open(os.path.join(d, "pfuture-1-0.json"), "w") as f:
    json.dump({"format": "iopilot-process", "version": 999}, f)
sys.exit(5)
"""


def test_a_failed_diagnosis_keeps_the_programs_status(tmp_path):
    d = tmp_path / "t"
    p = iopilot(tmp_path, "--color", "never", "--trace-dir", str(d), "--", PY, "-c",
                NEWER_FORMAT)  # fmt: skip
    assert p.returncode == 5
    lines = p.stderr.splitlines()
    failed = [x for x in lines if x.startswith("iopilot: could not diagnose the trace: ")]
    assert len(failed) == 1 and "Traceback" not in p.stderr
    assert "iopilot: the program exited with status 5" in lines
    assert f"iopilot: trace in {d}" in lines


def test_default_trace_dir_is_private_and_not_in_the_working_directory(tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    env = clean_env(tmp_path, HOME=str(home))
    del env["IOPILOT_TRACE_ROOT"]
    env.pop("XDG_DATA_HOME", None)
    p = iopilot(tmp_path, "--trace-only", "--", "ls", "-A", env=env, cwd=work)
    assert p.returncode == 0 and p.stdout == ""  # the program sees an empty directory
    assert list(work.iterdir()) == []
    (trace,) = (home / ".local/share/iopilot/traces").iterdir()
    assert re.fullmatch(r"ls-\d{8}-\d{6}-\w+", trace.name)
    assert stat.S_IMODE(trace.stat().st_mode) == 0o700
    assert (trace / "job.json").exists()
    assert f"iopilot: trace in {trace}" in p.stderr.splitlines()
    # XDG_DATA_HOME, then IOPILOT_TRACE_ROOT, take precedence; names never repeat.
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    iopilot(tmp_path, "--trace-only", "--", "ls", env=env, cwd=work)
    iopilot(tmp_path, "--trace-only", "--", "ls", env=env, cwd=work)
    assert len(list((tmp_path / "xdg/iopilot/traces").iterdir())) == 2
    env["IOPILOT_TRACE_ROOT"] = str(tmp_path / "root")
    iopilot(tmp_path, "--trace-only", "--", "ls", env=env, cwd=work)
    assert len(list((tmp_path / "root").iterdir())) == 1


def test_trace_dir_is_created_private(tmp_path):
    d = tmp_path / "new" / "t"
    p = iopilot(tmp_path, "--trace-only", "--trace-dir", str(d), "--", "cat", "/dev/null")
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(d.stat().st_mode) == 0o700 and (d / "job.json").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    p = iopilot(tmp_path, "--trace-only", "--trace-dir", str(empty), "--", "cat", "/dev/null")
    assert p.returncode == 0 and (empty / "job.json").exists()


MARKS = "import sys; open(sys.argv[1], 'w').close()"


def test_trace_dir_that_holds_files_is_refused_before_running(tmp_path):
    d, ran = tmp_path / "t", tmp_path / "ran"
    assert iopilot(tmp_path, "--trace-only", "--trace-dir", str(d), "--", "cat",
                   "/dev/null").returncode == 0  # fmt: skip
    before = sorted(os.listdir(d))
    p = iopilot(tmp_path, "--trace-only", "--trace-dir", str(d), "--", PY, "-c", MARKS, str(ran))
    assert p.returncode == 2 and not ran.exists()
    assert p.stderr.splitlines() == [
        f"iopilot: error: {d}: already holds files; choose another --trace-dir or remove them"
    ]
    assert sorted(os.listdir(d)) == before  # the first trace is untouched
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    p = iopilot(tmp_path, "--trace-only", "--trace-dir", str(other), "--", PY, "-c", MARKS,
                str(ran))  # fmt: skip
    assert p.returncode == 2 and not ran.exists() and "already holds files" in p.stderr


def test_two_runs_into_one_empty_directory_never_merge(tmp_path):
    d = tmp_path / "t"
    d.mkdir()
    runs = [start(tmp_path, "--trace-only", "--trace-dir", str(d), "--", "sh", "-c",
                  "cat /dev/null; sleep 0.3") for _ in range(2)]  # fmt: skip
    results = sorted((p.wait(timeout=30), p.stderr.read()) for p in runs)
    for p in runs:
        p.stdout.close()
        p.stderr.close()
    assert [rc for rc, _ in results] == [0, 2]
    assert "already holds files" in results[1][1]
    assert json.loads((d / "job.json").read_text())["exit_status"] == 0  # the winner's


def test_trace_dir_symlink_is_refused(tmp_path):
    real, link, ran = tmp_path / "real", tmp_path / "link", tmp_path / "ran"
    real.mkdir()
    link.symlink_to(real)
    p = iopilot(tmp_path, "--trace-only", "--trace-dir", str(link), "--", PY, "-c", MARKS,
                str(ran))  # fmt: skip
    assert p.returncode == 2 and not ran.exists() and p.stderr.count("\n") == 1
    assert list(real.iterdir()) == []


# Plants job.json -> victim in its own trace directory, as a hostile program could.
PLANTS = r"""
import os, sys
link = os.path.join(os.environ["IOPILOT_TRACE_DIR"], "job.json")
if os.path.lexists(link):
    os.remove(link)
os.symlink(sys.argv[1], link)
"""


def test_job_json_replaces_a_planted_symlink(tmp_path):
    victim, d = tmp_path / "victim", tmp_path / "t"
    victim.write_bytes(b"precious\n")
    p = iopilot(tmp_path, "--trace-only", "--trace-dir", str(d), "--", PY, "-c", PLANTS,
                str(victim))  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert victim.read_bytes() == b"precious\n"
    job = d / "job.json"
    assert not job.is_symlink() and json.loads(job.read_text())["exit_status"] == 0
    assert stat.S_IMODE(job.stat().st_mode) == 0o600
    assert not [f for f in os.listdir(d) if "job" in f and f != "job.json"]  # no temporaries


def test_command_not_found_leaves_nothing(tmp_path):
    p = iopilot(tmp_path, "--", "no-such-command")
    assert p.returncode == 127
    assert p.stderr.splitlines() == ["iopilot: no-such-command: command not found"]
    assert not (tmp_path / "traces").exists() or not list((tmp_path / "traces").iterdir())
    d = tmp_path / "t"
    p = iopilot(tmp_path, "--trace-dir", str(d), "--", "no-such-command")
    assert p.returncode == 127 and not d.exists()


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_a_launch_that_leaves_no_trace_removes_the_directory(tmp_path):
    d = tmp_path / "t"
    env = clean_env(tmp_path, **MPI_ENV)
    p = iopilot(tmp_path, "--color", "never", "--trace-dir", str(d), "--", "mpirun", "-np",
                "1", "/no/such/binary", env=env)  # fmt: skip
    assert p.returncode != 0
    assert f"iopilot: the program left no trace (exit status {p.returncode})" in p.stderr
    assert "holds no iopilot trace" not in p.stderr and "trace in" not in p.stderr
    assert not d.exists()
