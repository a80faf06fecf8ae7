"""Mutation testing of the C runtime (runtime/src): ``make mutation`` runs it
after mutmut's Python mutants.

Each mutant is one small deliberate bug in one file: a comparison flipped
(``<`` and ``<=``, ``>`` and ``>=``, ``==`` and ``!=``), ``&&`` and ``||``
swapped, an integer constant one more or one less, an ``if`` condition
negated, a returned constant changed (``return 0;`` to ``return -1;``, any
other to ``0``) or a statement that is just a call deleted.  Comments,
strings, character constants and preprocessor lines are never touched.

For each mutant the file is changed in a scratch copy of the project, the
runtime library and the sanitizer programs are rebuilt from it with the
flags of runtime/Makefile (objects of the unchanged files are built once and
reused), and the tests of that file (``TESTS`` below) run against that copy
(``pytest -x``, the copy's own src/ and tests/).  A mutant the tests fail on
is killed; one that runs past the time limit is killed by timeout; one that
does not compile is killed by the compiler and left out of the score.
Results go to mutants-c/results.json, which tools/mutation_score.py reads.

Usage: python tools/mutate_c.py [--sample N] [--seed S] [--jobs J]
           [--files a.c,b.c] [--list] [--key KEY] [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "mutants-c"

# The tests that exercise each mutated file, fastest first (pytest -x stops
# at the first failure).  Left out: MPI runs, HDF5 and kernel programs, the
# write-behind property test (hundreds of traced runs) and the link build;
# they reach these files only through paths the listed tests already take.
# tests/test_behind_signals.py is left out too: it builds its own sanitizer
# programs (a minute per mutant) for signal cases the fault programs cover.
TESTS: dict[str, list[str]] = {
    "behind.c": ["tests/test_runtime_cpu.py", "tests/test_background_records.py",
                 "tests/test_runtime_behind.py",
                 "tests/test_behind_semantics.py"],
    "direct.c": ["tests/test_direct_hazards.py", "tests/test_settings_runtime.py",
                 "tests/test_behind_semantics.py"],
    "settings.c": ["tests/test_settings_runtime.py", "tests/test_settings.py",
                   "tests/test_settings_hdf5.py", "tests/test_direct_hazards.py"],
    "records.c": ["tests/test_runtime_posix.py", "tests/test_background_records.py",
                  "tests/test_runtime_safety.py"],
}  # fmt: skip


# ---------------------------------------------------------------- operators


@dataclass(frozen=True)
class Mutant:
    file: str  # name under runtime/src
    start: int  # character offsets of the replaced text
    end: int
    new: str
    op: str
    line: int
    old: str

    @property
    def key(self) -> str:
        return f"{self.file}:{self.line}:{self.op}:{self.start}"

    def apply(self, text: str) -> str:
        return text[: self.start] + self.new + text[self.end :]


def code_mask(text: str) -> list[bool]:
    """Per character: True where it is code, False inside a comment, a
    string or character constant, or a preprocessor line (with its
    continuation lines)."""
    mask = [True] * len(text)
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":  # preprocessor: to the end of the logical line
            j = i
            while j < n and not (text[j] == "\n" and text[j - 1] != "\\"):
                j += 1
            mask[i:j] = [False] * (j - i)
            i = j
            continue
        if c == "\n":
            line_start = True
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            mask[i:j] = [False] * (j - i)
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            mask[i:j] = [False] * (j - i)
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(n, j + 1)
            mask[i:j] = [False] * (j - i)
            i = j
        else:
            i += 1
    return mask


_FLIP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==",
         "&&": "||", "||": "&&"}  # fmt: skip
_CMP = re.compile(r"(?<![<>=!\-&|])(<=|>=|==|!=|<|>|&&|\|\|)(?![<>=&|])")
_INT = re.compile(r"(?<![\w.])(0[xX][0-9a-fA-F]+|\d+)([uUlL]*)(?![\w.])")
_RETURN = re.compile(r"\breturn\s+(-?\s*\d+)\s*;")
_IF = re.compile(r"\bif\s*\(")
_CALL = re.compile(r"(?:\(void\)\s*)?([A-Za-z_]\w*)\s*\(")
_KEYWORDS = {"if", "while", "for", "switch", "return", "sizeof", "do", "else", "case",
             "goto", "break", "continue", "default", "typedef", "struct", "union", "enum",
             "static", "const", "volatile", "extern", "int", "void", "char", "long",
             "unsigned", "signed", "short", "double", "float"}  # fmt: skip


def _closing(text: str, mask: list[bool], open_at: int) -> int:
    """The index of the parenthesis closing the one at ``open_at``, or -1."""
    depth = 0
    for j in range(open_at, len(text)):
        if not mask[j]:
            continue
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _prev_code(text: str, mask: list[bool], i: int) -> str:
    j = i - 1
    while j >= 0 and (not mask[j] or text[j].isspace()):
        j -= 1
    return text[j] if j >= 0 else ""


def _statement_starts(text: str, mask: list[bool], i: int) -> bool:
    """True if a statement starts at ``i``: after ``;``, a brace, ``else``
    or the header of an ``if``, ``for`` or ``while``."""
    j = i - 1
    while j >= 0 and (not mask[j] or text[j].isspace()):
        j -= 1
    if j < 0:
        return False
    if text[j] in ";{}":
        return True
    if text[j - 3 : j + 1] == "else" and (j < 4 or not text[j - 4].isalnum()):
        return True
    if text[j] != ")":
        return False
    depth = 0
    while j >= 0:  # back to the parenthesis this one closes
        if mask[j]:
            depth += text[j] == ")"
            depth -= text[j] == "("
            if depth == 0:
                break
        j -= 1
    return re.search(r"\b(if|for|while)\s*$", text[max(0, j - 10) : j]) is not None


def mutants_of(name: str, text: str) -> list[Mutant]:
    """Every mutant of one C file, in the order of the file."""
    mask = code_mask(text)
    depth = [0] * (len(text) + 1)
    d = 0
    for j, ch in enumerate(text):
        depth[j] = d
        if mask[j]:
            d += ch == "{"
            d -= ch == "}"
    line_of = [0] * (len(text) + 1)
    ln = 1
    for j, ch in enumerate(text):
        line_of[j] = ln
        ln += ch == "\n"
    out: list[Mutant] = []

    def add(start: int, end: int, new: str, op: str, whole: bool = True) -> None:
        """``whole``: all the replaced text must be code (else its two ends)."""
        code = all(mask[start:end]) if whole else mask[start] and mask[end - 1]
        if code and depth[start] > 0:
            out.append(Mutant(name, start, end, new, op, line_of[start], text[start:end]))

    for m in _CMP.finditer(text):
        op = m.group(1)
        add(m.start(1), m.end(1), _FLIP[op], f"{op}->{_FLIP[op]}")
    for m in _INT.finditer(text):
        if _prev_code(text, mask, m.start()) == "[" and text[m.end():].lstrip().startswith("]"):
            continue  # an array size: a bigger or smaller array, not a bug
        whole = m.group(0)
        add(m.start(), m.end(), f"({whole} + 1)", "+1")
        add(m.start(), m.end(), f"({whole} - 1)", "-1")
    for m in _RETURN.finditer(text):
        value = int(m.group(1).replace(" ", ""))
        new = "-1" if value == 0 else "0"
        add(m.start(1), m.end(1), new, f"return {value}->{new}")
    for m in _IF.finditer(text):
        close = _closing(text, mask, m.end() - 1)
        if close > 0:
            add(m.end(), close, f"!({text[m.end():close]})", "negate if", whole=False)
    for m in _CALL.finditer(text):
        if m.group(1) in _KEYWORDS or not _statement_starts(text, mask, m.start()):
            continue
        close = _closing(text, mask, m.end() - 1)
        rest = text[close + 1 :] if close > 0 else ""
        if close > 0 and rest.lstrip().startswith(";"):
            semi = close + 1 + (len(rest) - len(rest.lstrip()))
            add(m.start(), semi + 1, ";", f"delete {m.group(1)}()", whole=False)
    return sorted(out, key=lambda x: (x.start, x.op))


def all_mutants(files: list[str]) -> list[Mutant]:
    out: list[Mutant] = []
    for name in files:
        out.extend(mutants_of(name, (ROOT / "runtime" / "src" / name).read_text()))
    return out


def sample(mutants: list[Mutant], n: int, seed: int) -> list[Mutant]:
    """A seeded sample of ``n``, stratified by file (each its share)."""
    by_file: dict[str, list[Mutant]] = {}
    for m in mutants:
        by_file.setdefault(m.file, []).append(m)
    rng = random.Random(seed)
    picked: list[Mutant] = []
    for name in sorted(by_file):
        group = by_file[name]
        k = min(len(group), round(n * len(group) / len(mutants)))
        picked.extend(rng.sample(group, k))
    rng.shuffle(picked)  # a run stopped early has still tried every file
    return picked


# ---------------------------------------------------------------- building


def make_vars(names: list[str]) -> dict[str, str]:
    """Variables of runtime/Makefile, as make expands them."""
    rules = "".join(f"print-{v}: ; @echo '{v}=$({v})'\n" for v in names)
    with tempfile.NamedTemporaryFile("w", suffix=".mk", delete=False) as f:
        f.write(rules)
    try:
        p = subprocess.run(["make", "-s", "-C", str(ROOT / "runtime"), "-f", "Makefile",
                            "-f", f.name, *[f"print-{v}" for v in names]],
                           capture_output=True, text=True, check=True)  # fmt: skip
    finally:
        os.unlink(f.name)
    return dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)


# program: (flavour, test main, its runtime sources: CORE, CORE and
# async.c, or SRCS), as in runtime/Makefile's sanitize target
PROGRAMS = {"faults-asan": ("asan", "tests/faults.c", "core+async"),
            "semantics-asan": ("asan", "tests/behind_semantics.c", "core"),
            "hazards-asan": ("asan", "tests/direct_hazards.c", "core"),
            "direct-asan": ("asan", "tests/posix_direct.c", "core"),
            "selftest-asan": ("asan", "tests/selftest.c", "srcs"),
            "faults-tsan": ("tsan", "tests/faults.c", "core+async"),
            "semantics-tsan": ("tsan", "tests/behind_semantics.c", "core"),
            "hazards-tsan": ("tsan", "tests/direct_hazards.c", "core")}  # fmt: skip


@dataclass
class Build:
    """How runtime/Makefile builds the library and the sanitizer programs,
    taken apart into objects so that a mutant recompiles one file."""

    cc: list[str]
    lib: list[str]  # flags of libiopilot.so's sources
    asan: list[str]
    tsan_plain: list[str]
    tsan: list[str]
    srcs: list[str]  # src/x.c of the library
    core: list[str]  # src/x.c of the sanitizer programs
    tsan_plain_srcs: list[str]

    @classmethod
    def from_makefile(cls) -> Build:
        v = make_vars(["CC", "COMMON", "CFLAGS", "ASAN", "SRCS", "CORE", "TSAN_PLAIN"])
        common = v["COMMON"].split()
        return cls(cc=v["CC"].split(), lib=common + v["CFLAGS"].split(),
                   asan=common + v["ASAN"].split(), tsan_plain=[*common, "-O1", "-g"],
                   tsan=[*common, "-O1", "-g", "-fsanitize=thread"], srcs=v["SRCS"].split(),
                   core=v["CORE"].split(), tsan_plain_srcs=v["TSAN_PLAIN"].split())  # fmt: skip

    def flavours(self) -> dict[str, tuple[list[str], list[str]]]:
        """Object flavour: (flags, the sources built with them)."""
        instr = [s for s in self.core if s not in self.tsan_plain_srcs]
        asan = list(dict.fromkeys([*self.core, "src/async.c", *self.srcs]))
        return {"lib": (self.lib, self.srcs), "asan": (self.asan, asan),
                "tsanp": (self.tsan_plain, self.tsan_plain_srcs),
                "tsan": (self.tsan, [*instr, "src/async.c"])}  # fmt: skip

    def compile(self, runtime: Path, flavour: str, src: str, objdir: Path) -> Path:
        flags, _ = self.flavours()[flavour]
        obj = objdir / flavour / (Path(src).stem + ".o")
        obj.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([*self.cc, *flags, "-c", src, "-o", str(obj)], cwd=runtime, check=True,
                       capture_output=True, text=True)  # fmt: skip
        return obj

    def objects(self, runtime: Path, objdir: Path) -> None:
        """Every object of every flavour (the unmutated build)."""
        for flavour, (_, srcs) in self.flavours().items():
            for src in dict.fromkeys(srcs):
                self.compile(runtime, flavour, src, objdir)

    def link(self, runtime: Path, objdir: Path, out: Path) -> None:
        """libiopilot.so and the sanitizer programs from the objects."""
        lib_objs = [str(objdir / "lib" / (Path(s).stem + ".o")) for s in self.srcs]
        subprocess.run([*self.cc, *self.lib, "-shared", "-o", str(out / "libiopilot.so"),
                        *lib_objs, "-ldl"], cwd=runtime, check=True,
                       capture_output=True, text=True)  # fmt: skip
        plain = set(self.tsan_plain_srcs)
        for prog, (flavour, main, kind) in PROGRAMS.items():
            srcs = {"core": self.core, "core+async": [*self.core, "src/async.c"],
                    "srcs": self.srcs}[kind]  # fmt: skip
            objs = []
            for s in srcs:
                fl = "tsanp" if flavour == "tsan" and s in plain else flavour
                objs.append(str(objdir / fl / (Path(s).stem + ".o")))
            flags = self.asan if flavour == "asan" else self.tsan
            subprocess.run([*self.cc, *flags, "-o", str(out / prog), main, *objs, "-ldl"],
                           cwd=runtime, check=True, capture_output=True, text=True)  # fmt: skip


# ---------------------------------------------------------------- running

_COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", "mutants", "mutants-c", "__pycache__",
                                      ".pytest_cache", ".ruff_cache", "link-objs",
                                      "tsan-plain")  # fmt: skip


class Worker:
    """One scratch copy of the project, where mutants are built and tested
    one after another."""

    def __init__(self, base: Path, build: Build) -> None:
        self.dir = base
        self.build = build
        shutil.copytree(ROOT, base, ignore=_COPY_IGNORE, symlinks=True)
        self.runtime = base / "runtime"
        self.objs = base / "mutation-objs"
        self.san = base / "mutation-san"
        self.san.mkdir()
        build.objects(self.runtime, self.objs)
        self.lib = base / "src" / "iopilot" / "_lib"
        build.link(self.runtime, self.objs, self.san)
        shutil.copy2(self.san / "libiopilot.so", self.lib / "libiopilot.so")

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = f"{self.dir / 'src'}:{self.dir / 'tests'}"
        env["IOPILOT_SANITIZED"] = str(self.san)
        env.pop("IOPILOT_LIB", None)
        return env

    def pytest(self, tests: list[str], timeout: float) -> tuple[str, float, str]:
        t0 = time.monotonic()
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
               "--basetemp", str(self.dir / "pytest-tmp"), *tests]  # fmt: skip
        try:
            p = subprocess.run(cmd, cwd=self.dir, env=self.env(), capture_output=True,
                               text=True, timeout=timeout, start_new_session=True)  # fmt: skip
        except subprocess.TimeoutExpired as e:
            _kill_group(e)
            return "timeout", time.monotonic() - t0, ""
        status = pytest_status(p.returncode)
        tail = "\n".join((p.stdout + p.stderr).splitlines()[-3:])
        return status, time.monotonic() - t0, tail

    def run(self, m: Mutant, timeout: float) -> dict[str, object]:
        path = self.runtime / "src" / m.file
        original = path.read_text()
        src = f"src/{m.file}"
        path.write_text(m.apply(original))
        rec: dict[str, object] = {"file": m.file, "line": m.line, "op": m.op, "old": m.old,
                                  "new": m.new}  # fmt: skip
        try:
            try:
                for flavour, (_, srcs) in self.build.flavours().items():
                    if src in srcs:
                        self.build.compile(self.runtime, flavour, src, self.objs)
                self.build.link(self.runtime, self.objs, self.san)
            except subprocess.CalledProcessError as e:
                rec["status"] = "compile"
                rec["detail"] = (e.stderr or "").strip().splitlines()[:1]
                return rec
            shutil.copy2(self.san / "libiopilot.so", self.lib / "libiopilot.so")
            status, secs, tail = self.pytest(TESTS[m.file], timeout)
            rec.update(status=status, seconds=round(secs, 1), detail=tail)
            return rec
        finally:
            path.write_text(original)
            for flavour, (_, srcs) in self.build.flavours().items():
                if src in srcs:
                    self.build.compile(self.runtime, flavour, src, self.objs)


def pytest_status(code: int) -> str:
    """A mutant's fate from pytest's exit status: 1 is a failed test; 2 to 5
    (interrupted, internal or usage error, nothing collected) say nothing of
    the mutant."""
    return {0: "survived", 1: "killed"}.get(code, "error")


def _kill_group(e: subprocess.TimeoutExpired) -> None:
    """The timed-out pytest started its own session: end every process in it."""
    proc = getattr(e, "process", None)
    if proc is not None:
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass


def _save(results: dict[str, dict[str, object]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1, sort_keys=True))
    tmp.replace(path)


def _chunks(items: list[Mutant], k: int) -> Iterator[list[Mutant]]:
    for i in range(k):
        yield items[i::k]


def main(*args: str) -> int:
    ap = argparse.ArgumentParser(prog="mutate_c.py", description="C runtime mutants.")
    ap.add_argument("--sample", type=int)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--files", default=",".join(TESTS))
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--results", type=Path, default=OUT_DIR / "results.json")
    ap.add_argument("--key", action="append", default=[],
                    help="run only this mutant (as --list names it); repeatable")
    a = ap.parse_args(args)
    files = [f for f in a.files.split(",") if f]
    unknown = [f for f in files if f not in TESTS]
    if unknown:
        print(f"mutate_c: {', '.join(unknown)}: no tests listed for it in TESTS "
              f"(known: {', '.join(TESTS)})", file=sys.stderr)  # fmt: skip
        return 2
    mutants = all_mutants(files)
    chosen = sample(mutants, a.sample, a.seed) if a.sample is not None else mutants
    if a.key:
        chosen = [m for m in mutants if m.key in a.key]
    if a.list:
        for m in chosen:
            print(f"{m.key}\t{m.old!r} -> {m.new!r}")
        return 0
    build = Build.from_makefile()
    results: dict[str, dict[str, object]] = {"": {"generated": len(mutants)}}
    _save(results, a.results)
    base = Path(tempfile.mkdtemp(prefix="iopilot-mutate-c-"))
    if (ROOT.parent / "shared").is_dir():  # the corpus beside the project, as tests/kit.py finds it
        (base / "shared").symlink_to(ROOT.parent / "shared")
    print(f"mutate_c: {len(chosen)} of {len(mutants)} mutants, {a.jobs} job(s), in {base}",
          flush=True)  # fmt: skip

    lock = threading.Lock()

    def work(i: int, part: list[Mutant]) -> None:
        w = Worker(base / f"w{i}", build)
        for m in part:
            rec = w.run(m, a.timeout)
            with lock:
                results[m.key] = rec
                _save(results, a.results)
            print(f"{rec['status']:>9} {m.key} {m.old!r}->{m.new!r} {rec.get('seconds', '')}",
                  flush=True)  # fmt: skip

    try:
        with ThreadPoolExecutor(a.jobs) as pool:
            for f in [pool.submit(work, i, p) for i, p in enumerate(_chunks(chosen, a.jobs))]:
                f.result()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
