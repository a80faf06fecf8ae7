"""Print the mutation score of ``make mutation`` per folder, from mutmut's
result files (mutants/**/*.py.meta).

Killed (or timed out) mutants count as caught; survived ones as missed.
Mutants no test reaches count as missed too: a line no test runs is a bug no
test would catch.  Next to the score, ``str-only`` counts the missed mutants
whose only change is the text of a string literal: mostly prose (messages,
advice) that no test should pin word for word, but also names (a counter, a
dictionary key), so the reader sees both numbers and can judge.
The C runtime's mutants (tools/mutate_c.py, results in mutants-c/) show as
the folder ``runtime``: killed and timed-out mutants count as caught, those
that do not compile are left out of the score and counted apart.
Usage: python tools/mutation_score.py [MUTANTS_DIR] [--by-file] [--c-results FILE]
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections import Counter
from pathlib import Path

CAUGHT = {1, 3, 36, 24, -24, 152, 255, 37, -11, -9}  # killed, timeout, type check, crash
MISSED = {0, 5, 33}  # survived, no tests
_MUTANT = re.compile(r"__mutmut_\d+$")


def _same_but_strings(a: ast.AST, b: ast.AST) -> bool:
    """True if the two trees differ at most in the values of string constants."""
    if type(a) is not type(b):
        return False
    if isinstance(a, ast.Constant):
        both_str = isinstance(a.value, str) and isinstance(b.value, str)
        return both_str or (type(a.value) is type(b.value) and a.value == b.value)
    for field in a._fields:
        x, y = getattr(a, field, None), getattr(b, field, None)
        if isinstance(x, list):
            if not isinstance(y, list) or len(x) != len(y):
                return False
            pairs = zip(x, y, strict=True)
        else:
            pairs = [(x, y)]
        for u, v in pairs:
            if isinstance(u, ast.AST):
                if not isinstance(v, ast.AST) or not _same_but_strings(u, v):
                    return False
            elif u != v and field != "name":  # the mutant's own name differs
                return False
    return True


def prose_only(source: str, keys: list[str]) -> set[str]:
    """The mutant keys (``module.function__mutmut_N``) of ``source``, mutmut's
    rewritten module, whose function differs from the original only in the
    text of string literals."""
    funcs = {n.name: n for n in ast.walk(ast.parse(source))
             if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}  # fmt: skip
    out = set()
    for key in keys:
        name = key.rsplit(".", 1)[-1]
        mutant, orig = funcs.get(name), funcs.get(_MUTANT.sub("__mutmut_orig", name))
        if mutant is not None and orig is not None and _same_but_strings(orig, mutant):
            out.add(key)
    return out


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson interval of a share k/n: the score of a random sample of
    the mutants says where the score of all of them lies."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return max(0.0, mid - half), min(1.0, mid + half)


def _row(name: str, c: Counter[str]) -> str:
    tried = c["caught"] + c["missed"]
    score = f"{100 * c['caught'] / tried:.1f} %" if tried else "-"
    total = c["caught"] + c["missed"] + c["not run"]
    line = (f"{name:<22} {total:>8} {c['caught']:>8} {c['missed']:>8} {c['str']:>8} "
            f"{c['not run']:>8} {score:>7}")  # fmt: skip
    if tried and c["not run"]:  # a sample: where the whole folder's score lies
        lo, hi = wilson(c["caught"], tried)
        line += f"   95 % interval {100 * lo:.1f}-{100 * hi:.1f} %"
    return line


def c_counts(path: Path) -> tuple[dict[str, Counter[str]], Counter[str]]:
    """Per C file the caught, missed and not-run mutants of tools/mutate_c.py's
    results; beside them the mutants that did not compile or timed out."""
    results = json.loads(path.read_text())
    generated = results.pop("", {}).get("generated", len(results))
    files: dict[str, Counter[str]] = {}
    extra: Counter[str] = Counter()
    for rec in results.values():
        c = files.setdefault("runtime/" + rec["file"], Counter())
        status = rec.get("status")
        if status in ("killed", "timeout"):
            c["caught"] += 1
        elif status == "survived":
            c["missed"] += 1
        extra[status] += 1
    run = sum(sum(c.values()) for c in files.values())
    left_out = extra["compile"] + extra["error"]
    files.setdefault("runtime", Counter())["not run"] += generated - run - left_out
    return files, extra


def main(*args: str) -> int:
    by_file = "--by-file" in args
    rest = [a for a in args if a != "--by-file"]
    c_results = Path("mutants-c") / "results.json"
    if "--c-results" in rest:
        i = rest.index("--c-results")
        c_results = Path(rest[i + 1])
        del rest[i : i + 2]
    base = Path(rest[0] if rest else "mutants") / "src" / "iopilot"
    if not base.is_dir() and not c_results.is_file():
        print(f"mutation_score: {base} not found: run 'make mutation' first", file=sys.stderr)
        return 2
    per: dict[str, Counter[str]] = {}
    files: dict[str, Counter[str]] = {}
    extra: Counter[str] = Counter()
    if c_results.is_file():
        c_files, extra = c_counts(c_results)
        for name, c in c_files.items():
            per.setdefault("runtime", Counter()).update(c)
            if name != "runtime":
                files[name] = c
    for meta in sorted(base.rglob("*.py.meta")) if base.is_dir() else []:
        folder = meta.relative_to(base).parts[0]
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        c = files.setdefault(str(meta.relative_to(base))[: -len(".py.meta")], Counter())
        missed = []
        for key, code in codes.items():
            kind = "caught" if code in CAUGHT else "missed" if code in MISSED else "not run"
            c[kind] += 1
            if kind == "missed":
                missed.append(key)
        source = meta.with_suffix("")  # posix.py.meta -> posix.py
        if missed and source.is_file():
            c["str"] += len(prose_only(source.read_text(), missed))
        per.setdefault(folder, Counter()).update(c)
    print(f"{'folder':<22} {'mutants':>8} {'caught':>8} {'missed':>8} {'str-only':>8} "
          f"{'not run':>8} {'score':>7}")  # fmt: skip
    for folder, c in sorted(per.items()):
        print(_row(folder, c))
    if by_file:
        for name, c in sorted(files.items()):
            if sum(c.values()):
                print(_row("  " + name, c))
    print("str-only: of the missed, those that only change the text of a string literal")
    if extra:
        print(f"runtime: {extra['timeout']} timed out (counted caught); {extra['compile']} did "
              f"not compile and {extra['error']} stopped the tests before any ran (left out "
              "of the score)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
