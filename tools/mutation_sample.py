"""Pick a seeded random sample of the mutants ``mutmut`` generated, for a
score in minutes instead of hours (``make mutation SAMPLE=N``).

Prints one mutant name per line.  The names come from mutmut's result files
(mutants/**/*.py.meta), so run mutmut once first to generate them.  The
sample is stratified by folder (checks/, sources/ ...): each folder gets its
share of N (with --equal, N over the number of folders), so each folder's
score has its own confidence interval, which ``tools/mutation_score.py``
prints for any partial run.
Usage: python tools/mutation_sample.py N [--seed S] [--equal] [MUTANTS_DIR]
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path


def names_by_folder(base: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for meta in sorted(base.rglob("*.py.meta")):
        folder = meta.relative_to(base).parts[0]
        out.setdefault(folder, []).extend(sorted(json.loads(meta.read_text())["exit_code_by_key"]))
    return out


def sample(by_folder: dict[str, list[str]], n: int, seed: int, equal: bool = False) -> list[str]:
    """``n`` names in all: each folder's share of them as its share of the
    mutants, or with ``equal`` the same share for every folder (a small
    folder then gets a score of its own, with an interval as narrow as a
    large one's); never more than a folder has."""
    total = sum(len(v) for v in by_folder.values())
    rng = random.Random(seed)
    picked: list[str] = []
    for folder in sorted(by_folder):
        names = by_folder[folder]
        share = 1 / len(by_folder) if equal else len(names) / total if total else 0
        picked.extend(rng.sample(names, min(len(names), round(n * share))))
    return picked


def main(*args: str) -> int:
    rest = list(args)
    seed = 1
    equal = "--equal" in rest
    rest = [a for a in rest if a != "--equal"]
    if "--seed" in rest:
        i = rest.index("--seed")
        seed = int(rest[i + 1])
        del rest[i : i + 2]
    if not rest or not rest[0].isdigit():
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    base = Path(rest[1] if len(rest) > 1 else "mutants") / "src" / "iopilot"
    if not base.is_dir():
        print(f"mutation_sample: {base} not found: run mutmut once first", file=sys.stderr)
        return 2
    print("\n".join(sample(names_by_folder(base), int(rest[0]), seed, equal)))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
