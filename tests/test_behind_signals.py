"""Write-behind and fatal signals: a program ended by a signal's default
action (SIGTERM from outside, raise, abort, a fault) leaves the same bytes
and the same wait status, core-dump flag included, as without write-behind,
and the program sees its dispositions as it would without us.

Each case runs ``behind_signals`` untraced and traced with IOPILOT_ASYNC=1.
The program writes one block, the test holds the runtime's background
thread (ptrace), the program writes 255 more, which then all wait in the
buffer, and the signal comes; the thread is let go after it.  Without the
runtime's handler the process would die with those blocks unwritten."""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from iopilot.capture.run import library_path

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "runtime"
SOURCE = RUNTIME / "tests" / "behind_signals.c"
CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")

DATA = b"".join(bytes([i]) + bytes([ord("a") + i % 26]) * 4095 for i in range(256))

_SEIZE, _INTERRUPT, _DETACH, _SYSCALL = 0x4206, 0x4207, 17, 24
_TRACESYSGOOD, _TRACEEXIT, _EVENT_EXIT = 0x1, 0x40, 6
_WALL = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
_libc.ptrace.restype = ctypes.c_long


def _ptrace(request: int, tid: int, data: int = 0) -> int:
    return _libc.ptrace(request, tid, None, ctypes.c_void_p(data))


_FUTEX = {"x86_64": 202, "aarch64": 98}.get(platform.machine())


def _tasks(pid: int) -> list[int]:
    return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)


def _comm(pid: int, tid: int) -> str:
    try:
        return Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
    except FileNotFoundError:  # a thread that just ended
        return ""


class Held:
    """The process under ptrace from the moment its first block is written:
    the runtime's background thread stopped, so what the program writes next
    stays queued; the main thread (and a sanitizer's thread) runs on,
    watched.  ``let_go`` waits for the signal to reach the main thread,
    hands it on, and lets everything go at the first of two events: the
    process ending (the writes are lost with it) or a system call after the
    signal (a handler runs: ours waits for the writes, which the thread then
    makes).  With ``until_wait`` the second event is a wait on a futex
    instead, for a handler of the program's that runs first.  No timing is
    involved either way: the program waits for "go" while its threads are
    found and stopped."""

    def __init__(self, pid: int, traced: bool) -> None:
        self.pid = pid
        if _ptrace(_SEIZE, pid, _TRACESYSGOOD | _TRACEEXIT) != 0:
            pytest.fail(f"ptrace: {os.strerror(ctypes.get_errno())}")
        # Only the runtime's thread, by the name it gives itself once it runs:
        # a sanitizer's thread stopped while it held one of its own locks
        # would stop the main thread before "ready".
        self.threads = []
        deadline = time.monotonic() + 60
        while traced and not self.threads:
            self.threads = [t for t in _tasks(pid) if _comm(pid, t) == "iopilot-behind"]
            if time.monotonic() > deadline:
                pytest.fail("the runtime's background thread never named itself")
            time.sleep(0.001)
        for tid in self.threads:
            assert _ptrace(_SEIZE, tid) == 0 and _ptrace(_INTERRUPT, tid) == 0
            os.waitpid(tid, _WALL)  # it stopped

    def _waiting(self) -> bool:
        call = Path(f"/proc/{self.pid}/syscall").read_text().split()
        return int(call[0]) == _FUTEX and int(call[2], 16) & 0x7F in (0, 9)  # WAIT, WAIT_BITSET

    def let_go(self, until_wait: bool = False) -> None:
        _, st = os.waitpid(self.pid, _WALL)  # the signal, before it is delivered
        while os.WIFSTOPPED(st) and st >> 16 != _EVENT_EXIT:
            stop = os.WSTOPSIG(st)
            if stop == signal.SIGTRAP | 0x80:  # at a system call
                if not until_wait or self._waiting():
                    break
                stop = 0
            _ptrace(_SYSCALL, self.pid, stop)  # a signal is delivered; up to the next call
            _, st = os.waitpid(self.pid, _WALL)
        _ptrace(_DETACH, self.pid)
        for tid in self.threads:
            if _ptrace(_DETACH, tid) != 0:  # killed while held: we collect its end
                while not os.WIFEXITED(st := os.waitpid(tid, _WALL)[1]) and not os.WIFSIGNALED(st):
                    pass


@dataclass
class Ended:
    status: int  # the raw wait status: signal and core-dump flag
    out: bytes
    err: bytes
    files: dict[str, bytes]
    held: int  # threads held while the signal came
    caught: int  # SigCgt of the process while it waited

    @property
    def signal(self) -> int:
        return os.WTERMSIG(self.status) if os.WIFSIGNALED(self.status) else 0


def run(exe: Path, case: str, traced: bool, send: int = 0, ignore: int = 0,
        env: dict[str, str] | None = None, linked: bool = False,
        until_wait: bool = False) -> Ended:  # fmt: skip
    """One run of ``exe DIR case``; ``send``: the signal the test sends once
    the data is written; ``ignore``: a signal the program inherits ignored;
    ``linked``: the runtime is linked into ``exe`` (sanitizer builds);
    ``until_wait``: see Held.let_go."""
    work = Path(tempfile.mkdtemp(prefix="iop-work-"))
    cores = Path(tempfile.mkdtemp(prefix="iop-cores-"))  # its cwd: where cores go
    e = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_") and k != "LD_PRELOAD"}
    e.update(env or {})
    trace = Path(tempfile.mkdtemp(prefix="iop-trace-"))
    if traced:
        e.update(IOPILOT_TRACE_DIR=str(trace), IOPILOT_ASYNC="1")
        if not linked:
            e["LD_PRELOAD"] = str(library_path())

    def child() -> None:
        hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
        resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))
        # the signal sent starts at its default action, whatever the test
        # runner inherited (under nohup SIGHUP comes in ignored)
        if send:
            signal.signal(send, signal.SIG_DFL)
        if ignore:
            signal.signal(ignore, signal.SIG_IGN)

    p = subprocess.Popen([str(exe), str(work), case], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, cwd=cores,
                         preexec_fn=child)  # fmt: skip
    try:
        out = b""
        while (line := p.stdout.readline()) and line != b"started\n":
            out += line
        held, caught = None, 0
        if line:
            held = Held(p.pid, traced)
            p.stdin.write(b"go\n")
            p.stdin.flush()
            assert p.stdout.readline() == b"ready\n"
            status_lines = Path(f"/proc/{p.pid}/status").read_text().splitlines()
            caught = int(next(x for x in status_lines if x.startswith("SigCgt:")).split()[1], 16)
            if send:
                os.kill(p.pid, send)
            held.let_go(until_wait)
        p.stdin.close()  # a program still waiting reads the end and exits
        out += p.stdout.read()
        err = p.stderr.read()
    finally:
        _, status = os.waitpid(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        p.stdout.close()
        p.stderr.close()
        shutil.rmtree(cores, ignore_errors=True)
        shutil.rmtree(trace, ignore_errors=True)
    files = {f.name: f.read_bytes() for f in sorted(work.iterdir()) if f.is_file()}
    shutil.rmtree(work, ignore_errors=True)
    return Ended(status, out, err, files, len(held.threads) if held else 0, caught)


@pytest.fixture(scope="module")
def prog(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("bin") / "behind_signals"
    subprocess.run([CC, "-O1", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(SOURCE)],
                   check=True, timeout=120)  # fmt: skip
    return exe


def same_end(exe: Path, case: str, **how) -> Ended:
    """Untraced and traced: the same wait status, output and files."""
    plain = run(exe, case, traced=False, **how)
    traced = run(exe, case, traced=True, **how)
    assert traced.err == plain.err, traced.err
    assert (traced.signal, traced.status) == (plain.signal, plain.status)
    assert traced.out == plain.out
    assert traced.files == plain.files
    if case != "query":
        assert traced.held == 1  # the background thread was there, and held
    return traced


def _bit(sig: int) -> int:
    return 1 << (sig - 1)


def _name(sig: int) -> str:
    if sig >= signal.SIGRTMIN:
        return f"SIGRTMIN+{sig - signal.SIGRTMIN}"
    return signal.Signals(sig).name


EXTERNAL = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
            signal.SIGPIPE, signal.SIGALRM, signal.SIGXCPU, signal.SIGRTMIN + 3]  # fmt: skip


@pytest.mark.parametrize("sig", EXTERNAL, ids=_name)
def test_a_signal_from_outside_ends_it_with_every_byte_written(prog, sig):
    end = same_end(prog, "wait", send=sig)
    assert end.signal == sig and end.files["data.bin"] == DATA
    assert end.caught & _bit(sig)  # ours stood in for the default action


SELF = {
    "raise:15": signal.SIGTERM,
    "raise:3": signal.SIGQUIT,
    "abort": signal.SIGABRT,
    "segv": signal.SIGSEGV,
    "bus": signal.SIGBUS,
    "fpe": signal.SIGFPE,
    "ill": signal.SIGILL,
}


@pytest.mark.parametrize("case", sorted(SELF))
def test_raised_and_faults_end_it_with_every_byte_written(prog, case):
    end = same_end(prog, case)
    assert end.signal == SELF[case] and end.files["data.bin"] == DATA


def test_core_dump_flag_is_kept(prog):
    """Where this machine dumps cores at all, a fault and SIGQUIT still do."""
    plain = run(prog, "segv", traced=False)
    if not os.WCOREDUMP(plain.status):
        pytest.skip("no core dumps here (RLIMIT_CORE hard limit or core_pattern)")
    for case, send in (("segv", 0), ("wait", signal.SIGQUIT), ("abort", 0)):
        assert os.WCOREDUMP(run(prog, case, traced=True, send=send).status), case


def test_the_programs_own_handler_runs_and_its_exit_waits(prog):
    end = same_end(prog, "handler", send=signal.SIGTERM)
    assert os.WIFEXITED(end.status) and os.WEXITSTATUS(end.status) == 3
    assert end.files["data.bin"] == DATA and end.files["handled.txt"] == b"handled\n"


@pytest.mark.parametrize("case,sig", [("abort_handler", signal.SIGABRT),
                                      ("segv_handler", signal.SIGSEGV)])  # fmt: skip
def test_a_handler_that_returns_gets_its_writes_in_too(prog, case, sig):
    end = same_end(prog, case, until_wait=True)
    assert end.signal == sig
    assert end.files["data.bin"] == DATA and end.files["handled.txt"] == b"handled\n"


@pytest.mark.parametrize("case", ["oneshot", "sysv"])
def test_a_one_shot_handler_that_ends_the_process_gets_its_writes_in(prog, case):
    """SA_RESETHAND: the kernel would put the default action back unseen as
    the handler runs; the handler's own raise then ends the process."""
    end = same_end(prog, case, send=signal.SIGTERM)
    assert end.signal == signal.SIGTERM
    assert end.files["data.bin"] == DATA and end.files["handled.txt"] == b"handled\n"
    assert b"15 r=0 on_term_again flags=" in end.out
    assert b"signal(TERM, on_term_again) was on_term_again" in end.out


def test_default_action_set_again_by_the_program_is_ours_and_shown_as_default(prog):
    end = same_end(prog, "dfl_again", send=signal.SIGTERM)
    # signal() stores SA_RESTART and the signal in the mask; libc adds SA_RESTORER
    shown = b"signal(TERM, DFL) was on_term\n15 r=0 DFL flags=0x14000000 mask=0x4000 "
    assert end.out.startswith(shown)
    assert end.signal == signal.SIGTERM and end.files["data.bin"] == DATA
    assert end.caught & _bit(signal.SIGTERM)


def test_dispositions_read_and_set_every_way_are_what_they_would_be(prog):
    end = same_end(prog, "query")
    assert b"\n11 r=0 DFL flags=0 mask=0 restorer=0\n" in end.out  # SIGSEGV, as at start
    assert b"sigaction(INT, DFL) = 0" in end.out and os.WEXITSTATUS(end.status) == 0


def test_a_signal_inherited_ignored_stays_ignored(prog):
    end = same_end(prog, "wait", send=signal.SIGTERM, ignore=signal.SIGTERM)
    assert os.WIFEXITED(end.status) and os.WEXITSTATUS(end.status) == 0
    assert end.out == b"survived\n" and end.files["data.bin"] == DATA
    assert not end.caught & _bit(signal.SIGTERM)
    query = same_end(prog, "query", ignore=signal.SIGTERM)
    assert b"\n15 r=0 IGN " in query.out


# -- the runtime linked into the program, under AddressSanitizer+UBSan and
# ThreadSanitizer (untraced: the same program without IOPILOT_TRACE_DIR) ----


def _make_vars(*names: str) -> dict[str, list[str]]:
    """Variables of runtime/Makefile: the sources and flags its sanitizer
    builds use."""
    rules = "print-%: ; @echo $($*)"
    r = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(RUNTIME), "--eval", rules,
                        *(f"print-{n}" for n in names)], capture_output=True, text=True,
                       check=True, timeout=60)  # fmt: skip
    return dict(zip(names, (shlex.split(line) for line in r.stdout.splitlines()), strict=True))


@pytest.fixture(scope="module")
def sanitized_prog(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("san")
    v = _make_vars("COMMON", "CORE", "ASAN", "TSAN_PLAIN", "TSAN_INSTR")
    prog = "tests/behind_signals.c"

    def cc(*args: str) -> None:
        b = subprocess.run([CC, *v["COMMON"], *args], cwd=RUNTIME, capture_output=True, text=True,
                           timeout=600)  # fmt: skip
        assert b.returncode == 0, b.stderr

    cc(*v["ASAN"], "-o", str(out / "asan"), prog, *v["CORE"], "-ldl")
    # as the Makefile's faults-tsan: the wrappers and start-up built plain
    plain = [str(out / Path(src).with_suffix(".o").name) for src in v["TSAN_PLAIN"]]
    for src, obj in zip(v["TSAN_PLAIN"], plain, strict=True):
        cc("-O1", "-g", "-c", src, "-o", obj)
    cc("-O1", "-g", "-fsanitize=thread", "-o", str(out / "tsan"), prog, *v["TSAN_INSTR"], *plain,
       "-ldl")  # fmt: skip
    return {"asan": out / "asan", "tsan": out / "tsan"}


SANITIZER_ENV = {  # the default actions of SIGBUS & co., not the sanitizers' reports
    "ASAN_OPTIONS": "detect_leaks=0:handle_segv=0:handle_sigbus=0:handle_sigfpe=0",
    "TSAN_OPTIONS": "halt_on_error=1 exitcode=66 handle_segv=0 handle_sigbus=0 handle_sigfpe=0",
}
# UBSan ends a NULL store or a division by zero itself (exit status 1), and
# ThreadSanitizer reports to the program the handler it stored, unnormalized,
# where the kernel's action would be read untraced: those cases run under
# AddressSanitizer only.
SANITIZED = [("wait", signal.SIGTERM), ("raise:15", 0), ("abort", 0), ("bus", 0)]
ASAN_ONLY = [("dfl_again", signal.SIGTERM), ("handler", signal.SIGTERM), ("query", 0),
             ("oneshot", signal.SIGTERM)]  # fmt: skip


SANITIZER_CASES = [(t, c, s) for t in ("asan", "tsan") for c, s in SANITIZED] + [
    ("asan", c, s) for c, s in ASAN_ONLY
]


@pytest.mark.parametrize("tool,case,send", SANITIZER_CASES)
def test_signal_cases_under_sanitizers(sanitized_prog, tool, case, send):
    end = same_end(sanitized_prog[tool], case, send=send, env=SANITIZER_ENV, linked=True)
    assert "Sanitizer" not in end.err.decode() and "runtime error" not in end.err.decode()
    if case != "query":
        assert end.files["data.bin"] == DATA
