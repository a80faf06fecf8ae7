#!/usr/bin/env python3
"""Write README.md's table of the checks no Drishti code covers from the
checks themselves (their ``finds`` and ``cost``).

    python tools/gen_checks_table.py           # (re)write the table
    python tools/gen_checks_table.py --check   # exit 1 when the table is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BEGIN = "<!-- checks without a Drishti code: written by tools/gen_checks_table.py -->\n"
END = "<!-- end of the generated table -->\n"
sys.path.insert(0, str(ROOT / "src"))

from iopilot.checks import REGISTRY  # noqa: E402
from iopilot.model import display  # noqa: E402

# Layers a reader would not guess from the check's name.
SAID_LAYERS = ("BUILD", "FORTRAN")


def render() -> str:
    rows = ["| check | finds | its `cost_seconds` |", "| --- | --- | --- |"]
    for cls in REGISTRY.values():
        if cls.finds is None:
            continue
        layer = f" (layer `{display(cls.layer)}`)" if cls.layer in SAID_LAYERS else ""
        rows.append(f"| `{cls.id}`{layer} | {cls.finds} | {cls.cost} |")
    return BEGIN + "\n".join(rows) + "\n" + END


def updated(text: str) -> str:
    """``text`` (README.md) with its table replaced by the current one."""
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not (sep and sep2):
        raise SystemExit(f"{README}: the markers of the table are missing")
    return head + render() + tail


def main(argv: list[str]) -> int:
    text = README.read_text()
    new = updated(text)
    if "--check" in argv:
        if new != text:
            print(f"{README}: the table of checks is stale: run python tools/gen_checks_table.py",
                  file=sys.stderr)  # fmt: skip
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
