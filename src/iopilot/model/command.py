"""A job's command line read as a shell runs it: launchers first (``mpirun
-np 4``, ``srun -n 2``, ``env X=1``, ``sh``), then the program and its
arguments.  Sources use it to tell a Python program whatever launches it;
reports to show which program a job ran."""

from __future__ import annotations

import re
from collections.abc import Sequence

# Launchers run the program; they never say what language it is in.
LAUNCHERS = frozenset({
    "mpirun", "mpiexec", "mpiexec.hydra", "mpiexec.openmpi", "mpirun.openmpi", "mpiexec.mpich",
    "mpirun.mpich", "orterun", "orted", "prterun", "prted", "prte", "srun", "aprun", "jsrun",
    "ibrun", "flux", "env", "sh", "bash", "dash", "zsh", "ksh", "time", "nohup", "nice",
    "numactl", "taskset", "stdbuf", "chrt", "ionice", "timeout", "exec", "xargs",
})  # fmt: skip
_PYTHON = re.compile(r"(python|pypy)(\d+(\.\d+)*)?[dmu]?(-dbg)?")
_ENV_ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")


def base(path: str) -> str:
    """The last component of a path (``/usr/bin/python3`` -> ``python3``)."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def is_launcher(exe: str) -> bool:
    return base(exe) in LAUNCHERS


def is_python(exe: str) -> bool:
    """``exe`` is a Python interpreter (python3, python3.11, pypy3 ...)."""
    return _PYTHON.fullmatch(base(exe)) is not None


def words_of(command: Sequence[str] | str) -> list[str]:
    return command.split() if isinstance(command, str) else list(command)


def program_start(command: Sequence[str] | str) -> int:
    """Index of the program's word, past launchers, their options and the
    options' values (``-np 4``, ``--hostfile hosts``, ``X=1``); the number
    of words when only launchers are there."""
    words = words_of(command)
    after_option = False  # the previous word was a launcher's option
    for i, w in enumerate(words):
        if is_python(w) or w.endswith(".py"):
            return i
        if w.startswith("-"):
            after_option = "=" not in w
            continue
        if _ENV_ASSIGN.fullmatch(w) or is_launcher(w) or (after_option and "/" not in w):
            after_option = False
            continue
        return i
    return len(words)


def command_language(command: Sequence[str] | str) -> str:
    """"python" when the command runs a Python program, whatever launches it
    (``mpirun -np 4 python3 x.py``, ``srun python x.py``, ``python -m pkg``,
    ``/usr/bin/env python3 x.py``, ``./x.py``); else "" (unknown)."""
    words = words_of(command)
    i = program_start(words)
    if i < len(words) and (is_python(words[i]) or words[i].endswith(".py")):
        return "python"
    return ""


def short_command(command: Sequence[str] | str, width: int = 60) -> str:
    """The program and its arguments in at most ``width`` characters: the
    program by its name, launchers as one word (``mpirun … python3 run.py
    --case a``), the middle cut out when too long (the end often tells jobs
    apart: the input, the case)."""
    words = words_of(command)
    if not words:
        return ""
    i = program_start(words)
    head = f"{base(words[0])} … " if 0 < i < len(words) else ""
    rest = words[i:] if i < len(words) else words
    text = head + " ".join([base(rest[0]), *rest[1:]])
    if len(text) <= width:
        return text
    keep = width - 1
    return text[: keep - keep // 2] + "…" + text[len(text) - keep // 2:]
