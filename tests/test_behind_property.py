"""Write-behind (IOPILOT_ASYNC=1) against random operation sequences.

runtime/tests/behind_property.c makes 10,000 short sequences from a seed
(open, write, pwrite, lseek, ftruncate, stat, link, rename, unlink, dup,
read, fsync, close, fork, a hand-off to a child through a pipe, threads, a
child killed after it wrote ...) and prints what each operation returned
and every file's contents.  It runs plain and under the runtime with
write-behind, with the default buffer and with a 64 KiB one (large writes
then do not fit and are made at once); the outputs must be the same.  On a
difference the first differing sequence is run alone and shrunk, operation
by operation, to one that still differs; the assertion shows it.

The seeds: two fixed ones, so that a run of the suite is repeatable, or
IOPILOT_PROPERTY_SEED=N (with N+1) to explore, or =random for two new ones;
both are printed, so any failure can be run again:

    runtime/tests/behind_property WORK SEED FIRST COUNT [--drop LIST] [--list]
"""

from __future__ import annotations

import difflib
import os
import random
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from iopilot.capture.run import library_path

SOURCE = Path(__file__).resolve().parents[1] / "runtime" / "tests" / "behind_property.c"
CC = shutil.which("cc") or shutil.which("gcc")
COUNT = 10_000  # sequences per seed and way of running
CHUNKS = 2  # processes per seed and way of running
_SEED = os.environ.get("IOPILOT_PROPERTY_SEED", "20240611")
FIRST_SEED = (random.SystemRandom().randrange(1, 2**62) if _SEED == "random"
              else int(_SEED))  # fmt: skip
MODES = {
    "async": {"IOPILOT_ASYNC": "1"},
    "async, 64 KiB buffer": {"IOPILOT_ASYNC": "1", "IOPILOT_ASYNC_MAX_BYTES": "64k"},
}
Result = tuple[str, int | None]  # what a run printed, and its exit status (None: timed out)
TIMEOUT = 180  # one process; a hang is a failure, not a wait for ever

pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")


@pytest.fixture(scope="module")
def prog(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("bin") / "behind_property"
    subprocess.run([CC, "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o", str(exe),
                    str(SOURCE)], check=True, timeout=120)  # fmt: skip
    return exe


class Run:
    """behind_property started in a fresh work directory, plain (``env`` None)
    or under the runtime with ``env`` added; ``result()`` waits for it."""

    def __init__(self, prog: Path, seed: int, first: int, count: int, env: dict | None,
                 *extra: str) -> None:  # fmt: skip
        self.work = Path(tempfile.mkdtemp(prefix="iop-prop-"))
        self.trace = Path(tempfile.mkdtemp(prefix="iop-prop-trace-"))
        e = {k: v for k, v in os.environ.items()
             if not k.startswith("IOPILOT_") and k != "LD_PRELOAD"}  # fmt: skip
        if env is not None:
            e.update(env, LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(self.trace))
        self.argv = [str(prog), str(self.work), str(seed), str(first), str(count), *extra]
        self.p = subprocess.Popen(self.argv, env=e, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)  # fmt: skip

    def result(self) -> Result:
        """What it printed, and its exit status (None on a time-out)."""
        try:
            out, _ = self.p.communicate(timeout=TIMEOUT)
            status = self.p.returncode
        except subprocess.TimeoutExpired:
            self.p.kill()
            out, _ = self.p.communicate()
            status = None
        shutil.rmtree(self.work, ignore_errors=True)
        shutil.rmtree(self.trace, ignore_errors=True)
        return out.decode(errors="replace"), status


def once(prog: Path, seed: int, first: int, count: int, env: dict | None,
         *extra: str) -> Result:  # fmt: skip
    return Run(prog, seed, first, count, env, *extra).result()


def sequences(out: str) -> dict[int, str]:
    """Each sequence's lines, by number (the last one cut short when the
    process died in it)."""
    got: dict[int, str] = {}
    for block in re.split(r"^(?=seq \d+$)", out, flags=re.M):
        m = re.match(r"seq (\d+)\n", block)
        if m:
            got[int(m.group(1))] = block
    return got


def first_difference(plain: Result, traced: Result) -> int | None:
    """The first sequence whose lines differ (-1: only the exit status)."""
    if plain == traced:
        return None
    a, b = sequences(plain[0]), sequences(traced[0])
    for i in sorted(a):
        if a[i] != b.get(i):
            return i
    return -1


def shown(result: Result) -> list[str]:
    out, status = result
    return [*out.splitlines(), f"(exit status {status})"]


def diff(plain: Result, traced: Result) -> str:
    return "\n".join(difflib.unified_diff(shown(plain), shown(traced), "plain", "write-behind",
                                          lineterm="", n=3))  # fmt: skip


def difference(plain: Result, traced: Result) -> tuple[str, object] | None:
    """What makes a difference the same one while a sequence shrinks: the
    exit status when it differs, else the operation on the first line that
    differs."""
    if plain == traced:
        return None
    if plain[1] != traced[1]:
        return "exit status", traced[1]
    a, b = plain[0].splitlines(), traced[0].splitlines()
    k = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    line = a[k] if k < len(a) else b[k] if k < len(b) else ""
    return line.split(" = ")[0], traced[1]


def shrink(prog: Path, seed: int, idx: int, env: dict, seen: str) -> str:
    """Sequence ``idx`` alone, with operations dropped one at a time as long
    as plain and write-behind still differ in the same way: what is left, and
    how it differs (``seen``: how it differed in the whole run)."""
    def both(drops: list[str]) -> tuple[Result, Result]:
        extra = ("--drop", ",".join(drops)) if drops else ()
        return once(prog, seed, idx, 1, None, *extra), once(prog, seed, idx, 1, env, *extra)

    plain, traced = both([])
    wanted = difference(plain, traced)
    if wanted is None:
        listing = once(prog, seed, idx, 1, None, "--list")[0].removesuffix("done\n")
        return (f"sequence {idx} differs only after the sequences before it; alone it does not."
                f"\n{listing}in the whole run:\n{seen}")
    listing = once(prog, seed, idx, 1, None, "--list")[0].splitlines()[1:-1]
    ops = [line.split()[0] for line in listing]
    # whole operations first, last to first; then the operations inside a fork,
    # a hand-off or a thread
    order = [o for o in reversed(ops) if "." not in o] + [o for o in ops if "." in o]
    dropped: list[str] = []
    for _ in range(2):
        changed = False
        for o in order:
            if o in dropped or o.split(".")[0] in dropped:
                continue
            p, t = both([*dropped, o])
            if difference(p, t) == wanted:
                dropped.append(o)
                plain, traced = p, t
                changed = True
        if not changed:
            break
    extra = ("--drop", ",".join(dropped)) if dropped else ()
    again = once(prog, seed, idx, 1, None, *extra)
    if again != plain:
        return (f"sequence {idx}: the plain program printed different things in two runs "
                f"(the test's own fault):\n{diff(plain, again)}")  # fmt: skip
    listing = once(prog, seed, idx, 1, None, "--list", *extra)[0].removesuffix("done\n")
    command = " ".join([*(f"{k}={v}" for k, v in env.items()), "behind_property WORK",
                        str(seed), str(idx), "1", *extra])  # fmt: skip
    return (f"minimal sequence ({command}):\n{listing}"
            f"what differs:\n{diff(plain, traced)}")


@pytest.mark.parametrize("which", [0, 1])
def test_write_behind_changes_nothing_the_program_sees(prog, which):
    seed = FIRST_SEED + which
    print(f"behind_property seed {seed} (IOPILOT_PROPERTY_SEED=N or =random chooses others)")
    # every way at once, each in chunks of sequences: the runs wait on the
    # file system more than they compute
    size = COUNT // CHUNKS
    ways: dict[str, dict | None] = {"plain": None, **MODES}
    runs = {(way, k): Run(prog, seed, k * size, size, env)
            for way, env in ways.items() for k in range(CHUNKS)}  # fmt: skip
    results = {key: r.result() for key, r in runs.items()}
    for k in range(CHUNKS):
        out, status = results["plain", k]
        assert status == 0 and out.endswith("done\n"), out[-2000:]
        assert sorted(sequences(out)) == list(range(k * size, (k + 1) * size))
    failures = []
    for mode, env in MODES.items():
        for k in range(CHUNKS):
            plain, traced = results["plain", k], results[mode, k]
            idx = first_difference(plain, traced)
            if idx is None:
                continue
            if idx < 0:
                failures.append(f"[{mode}] every sequence the same, exit status "
                                f"{traced[1]} instead of {plain[1]}")  # fmt: skip
            else:
                a, b = sequences(plain[0]), sequences(traced[0])
                seen = diff((a[idx], plain[1]), (b.get(idx, ""), traced[1]))
                failures.append(f"[{mode}] seed {seed}, first difference in sequence {idx}\n"
                                f"{shrink(prog, seed, idx, env, seen)}")  # fmt: skip
            break
    assert not failures, f"seed {seed}:\n" + "\n\n".join(failures)
