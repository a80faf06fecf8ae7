"""Print the mutation score of ``make mutation`` per folder, from mutmut's
result files (mutants/**/*.py.meta).

Killed (or timed out) mutants count as caught; survived ones as missed.
Mutants no test reaches count as missed too: a line no test runs is a bug no
test would catch.  Usage: python tools/mutation_score.py [MUTANTS_DIR]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

CAUGHT = {1, 3, 36, 24, -24, 152, 255, 37, -11, -9}  # killed, timeout, type check, crash
MISSED = {0, 5, 33}  # survived, no tests


def main(root: str = "mutants") -> int:
    base = Path(root) / "src" / "iopilot"
    if not base.is_dir():
        print(f"mutation_score: {base} not found: run 'make mutation' first", file=sys.stderr)
        return 2
    per: dict[str, Counter[str]] = {}
    for meta in sorted(base.rglob("*.py.meta")):
        folder = meta.relative_to(base).parts[0]
        codes = json.loads(meta.read_text())["exit_code_by_key"].values()
        c = per.setdefault(folder, Counter())
        for code in codes:
            c["caught" if code in CAUGHT else "missed" if code in MISSED else "not run"] += 1
    print(f"{'folder':<10} {'mutants':>8} {'caught':>8} {'missed':>8} {'not run':>8} {'score':>7}")
    for folder, c in sorted(per.items()):
        tried = c["caught"] + c["missed"]
        score = f"{100 * c['caught'] / tried:.1f} %" if tried else "-"
        print(f"{folder:<10} {sum(c.values()):>8} {c['caught']:>8} {c['missed']:>8} "
              f"{c['not run']:>8} {score:>7}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
