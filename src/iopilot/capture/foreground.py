"""Run a program the way a shell runs a foreground job, so the wrapper is invisible to it.

The program gets its own process group.  When the wrapper holds the terminal's
foreground, it hands the terminal to that group and takes it back when the program
ends or stops, so Ctrl-C and Ctrl-Z reach the program exactly once.  Signals sent to
the wrapper itself are forwarded to the program; nothing is ever killed on a timer.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence
from types import FrameType
from typing import Any

from .._record import record

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
             signal.SIGUSR2)  # fmt: skip
# What a terminal sends to its whole foreground group by itself.
FROM_TERMINAL = (signal.SIGINT, signal.SIGQUIT)


@record(frozen=True)
class Outcome:
    """How the program ended, as a shell reports it."""

    status: int  # the exit code, or 128+N when killed by signal N
    signal: int | None = None
    core_dumped: bool = False

    @classmethod
    def from_wait_status(cls, w: int) -> Outcome:
        if os.WIFSIGNALED(w):
            n = os.WTERMSIG(w)
            return cls(128 + n, n, os.WCOREDUMP(w))
        return cls(os.WEXITSTATUS(w))

    def failure(self) -> str | None:
        """'exited with status 3', 'was killed by SIGTERM' ..., or None on success."""
        if self.signal is not None:
            try:
                name = signal.Signals(self.signal).name
            except ValueError:
                name = f"signal {self.signal}"
            return f"was killed by {name}" + (" (core dumped)" if self.core_dumped else "")
        return f"exited with status {self.status}" if self.status else None


def run_foreground(argv: Sequence[str], env: dict[str, str]) -> Outcome:
    """Run ``argv`` to its end; raise OSError (as Popen does) when it cannot start."""
    return _Job(argv, env).run()


class _Job:
    def __init__(self, argv: Sequence[str], env: dict[str, str]) -> None:
        self.argv, self.env = list(argv), env
        self.tty = _controlling_terminal()
        foreground = self.tty is not None and _foreground(self.tty) == os.getpgrp()
        # In a foreground pipeline (`iopilot run -- prog | less`) the other commands share
        # our group: a new group for the program would cut them off the terminal, so the
        # program stays in ours and gets the terminal's keys directly.
        self.own_group = not (foreground and not _alone_in_group())
        self.hand_over = foreground and self.own_group
        self.pid: int | None = None
        self.ended = False
        self.pending: list[int] = []

    def run(self) -> Outcome:
        previous = self._install_handlers()
        try:
            try:
                proc = subprocess.Popen(self.argv, env=self.env, close_fds=False,
                                        preexec_fn=self._in_child if self.own_group else None)
            except OSError:
                if self.hand_over and self.tty is not None:  # the failed child took it
                    _set_foreground(self.tty, os.getpgrp())
                raise
            self.pid = proc.pid
            for sig in self.pending:  # arrived while the program was starting
                self._forward(sig)
            status = self._wait()
            proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
            return Outcome.from_wait_status(status)
        finally:
            self.ended = True
            self._take_terminal_back()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _in_child(self) -> None:
        """Between fork and exec: a group of its own and, like a shell's job, the
        terminal before the program can read from it."""
        os.setpgid(0, 0)
        if self.hand_over and self.tty is not None:
            _set_foreground(self.tty, os.getpgrp())

    def _install_handlers(self) -> dict[int, Any]:
        previous = {}
        for sig in FORWARDED:
            old = signal.getsignal(sig)
            # A signal ignored by whoever started us stays ignored: the program inherits that.
            if old is not None and old != signal.SIG_IGN:
                previous[sig] = signal.signal(sig, self._on_signal)
        if self.own_group and self.tty is not None:
            previous[signal.SIGCONT] = signal.signal(signal.SIGCONT, self._on_continue)
        return previous

    def _on_signal(self, sig: int, _frame: FrameType | None) -> None:
        if self.pid is None:
            self.pending.append(sig)
        elif not self.ended:
            self._forward(sig)

    def _forward(self, sig: int) -> None:
        assert self.pid is not None
        try:
            if self.own_group:
                os.killpg(self.pid, sig)
            elif sig not in FROM_TERMINAL:  # the terminal sent those to the program too
                os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    def _on_continue(self, _sig: int, _frame: FrameType | None) -> None:
        if not self.ended:
            self._pass_terminal()  # `fg` after `bg` or `&`

    def _wait(self) -> int:
        assert self.pid is not None
        while True:
            _, status = os.waitpid(self.pid, os.WUNTRACED)
            if not os.WIFSTOPPED(status):
                self.ended = True  # its process id may be reused from now on
                return status
            if self.own_group and self.tty is not None:
                self._stop_with_the_program()

    def _stop_with_the_program(self) -> None:
        """The program was stopped (Ctrl-Z, or a terminal read in the background): stop
        too, so the shell sees a stopped job; when continued, continue the program."""
        assert self.pid is not None
        self._take_terminal_back()
        os.kill(os.getpid(), signal.SIGSTOP)
        self._pass_terminal()  # `fg` gave us the terminal; `bg` did not
        try:
            os.killpg(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    def _pass_terminal(self) -> None:
        if (self.tty is not None and self.own_group and self.pid is not None
                and _foreground(self.tty) == os.getpgrp() and _alone_in_group()):  # fmt: skip
            _set_foreground(self.tty, self.pid)

    def _take_terminal_back(self) -> None:
        if self.tty is not None and self.pid is not None and _foreground(self.tty) == self.pid:
            _set_foreground(self.tty, os.getpgrp())


def _controlling_terminal() -> int | None:
    """The first standard descriptor that is our controlling terminal."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                os.tcgetpgrp(fd)  # fails for a terminal that is not our controlling one
                return fd
        except OSError:
            continue
    return None


def _foreground(fd: int) -> int | None:
    try:
        return os.tcgetpgrp(fd)
    except OSError:
        return None


def _set_foreground(fd: int, pgrp: int) -> None:
    """Give the terminal to ``pgrp``; SIGTTOU is blocked, as a shell does, since a
    process outside the foreground would otherwise be stopped by it."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
    try:
        os.tcsetpgrp(fd, pgrp)
    except OSError:
        pass  # hung up, or the group is gone: nothing to hand over
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _alone_in_group() -> bool:
    """Whether no other process shares our process group (Linux /proc)."""
    me, group = os.getpid(), os.getpgrp()
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return True
    for name in entries:
        if int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        if int(fields[2]) == group:  # state, ppid, pgrp
            return False
    return True
