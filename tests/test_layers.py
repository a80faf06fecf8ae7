"""The package's layers as a contract: import-linter's ``[tool.importlinter]``
in pyproject.toml (cli > tune | bench | capture > api > report | overlap |
sources > checks > model > vocabulary > bottom utilities), and argparse only
in the command line; imports at the top of their modules but where a
``# lazy:`` comment says why."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import importlinter  # noqa: F401  (a dev dependency: the contract runs, never skips)

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "iopilot"


def lint_imports(src: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the project's contract over the package in ``src``."""
    code = ("import sys\nfrom importlinter.cli import lint_imports\n"
            "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, "
            "no_logo=True))")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_no_module_imports_from_a_layer_above_its_own():
    r = lint_imports(SRC.parent)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Contracts: 1 kept, 0 broken." in r.stdout


def test_the_contract_fails_on_an_upward_import(tmp_path):
    # A copy of the package where the checks reach up into the command line,
    # and where two sibling layers (tune and bench) import each other.
    copy = tmp_path / "iopilot"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__", "_lib"))
    with (copy / "checks" / "base.py").open("a") as f:
        f.write("\nfrom ..cli import common  # noqa: E402\n")
    with (copy / "tune" / "objective.py").open("a") as f:
        f.write("\nfrom ..bench import kernels  # noqa: E402\n")
    r = lint_imports(tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "iopilot's layers BROKEN" in r.stdout
    assert "iopilot.checks.base -> iopilot.cli.common" in r.stdout
    assert "iopilot.tune.objective -> iopilot.bench.kernels" in r.stdout


def test_every_module_has_its_layer():
    # A new top-level module outside the contract could import anything.
    import tomllib

    layers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    named = {m.strip() for row in layers["contracts"][0]["layers"] for m in row.split("|")}
    top = {f"iopilot.{p.stem}" for p in SRC.glob("*.py") if p.stem != "__init__"}
    top |= {f"iopilot.{p.parent.name}" for p in SRC.glob("*/__init__.py")}
    assert top - named == set()


def unnamed_lazy_imports(root: Path = SRC) -> list[str]:
    """iopilot imports inside functions without a ``# lazy: why`` comment on
    their line or in the three lines above it, as ``path:line module``."""
    out = []
    for f in sorted(root.rglob("*.py")):
        lines = f.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "")
                                                         .startswith("iopilot")):
                    name = "." * node.level + (node.module or "")
                elif isinstance(node, ast.Import) and node.names[0].name.startswith("iopilot"):
                    name = node.names[0].name
                else:
                    continue
                near = lines[max(0, node.lineno - 4):node.lineno]
                if not any("# lazy:" in x for x in near):
                    out.append(f"{f.relative_to(root).as_posix()}:{node.lineno} {name}")
    return out


# Imports inside functions not yet moved to the top or named (their files'
# own changes will do it); an entry that no longer matches fails the test.
NOT_YET: dict[str, str] = {}


def test_imports_are_at_the_top_or_named_lazy():
    found: dict[str, list[str]] = {}
    for entry in unnamed_lazy_imports():
        where, name = entry.split()
        found.setdefault(where.split(":")[0], []).append(name)
    waiting = {f: " ".join(names) for f, names in found.items()}
    assert waiting == NOT_YET


def test_the_lazy_import_finder_finds_one(tmp_path):
    (tmp_path / "a.py").write_text(
        "def f():\n    from .b import x\n\n\n"
        "def g():\n    # lazy: 1 s, one command only\n    from .c import y\n"
        "    import json\n")
    assert unnamed_lazy_imports(tmp_path) == ["a.py:2 .b"]


def argparse_users(root: Path = SRC) -> list[str]:
    """Modules outside ``iopilot.cli`` that import argparse."""
    out = []
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root)
        if rel.parts[0] == "cli":
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "argparse" for n in names):
                out.append(str(rel))
                break
    return out


def test_only_the_command_line_reads_arguments():
    # The commands turn their options into typed parameters; the packages
    # below take those, never an argparse.Namespace.
    assert argparse_users() == []


def test_the_argparse_finder_finds_one(tmp_path):
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "a.py").write_text("import argparse\n")
    (tmp_path / "b.py").write_text("def f():\n    from argparse import Namespace\n")
    assert argparse_users(tmp_path) == ["b.py"]
