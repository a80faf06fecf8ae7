"""The house's shape: no import cycles between iopilot's modules (lazy
imports inside functions count too: they are cycles that run later)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "iopilot"


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for f in root.rglob("*.py"):
        name = ".".join(f.relative_to(root.parent).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = f
    return out


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    """Module -> the iopilot modules it imports (a package's submodule when
    ``from . import x`` names one, else the package)."""
    mods = _modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        pkg = m if f.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = pkg.split(".")
                    target = ".".join(parts[: len(parts) - node.level + 1]
                                      + ([node.module] if node.module else []))  # fmt: skip
                else:
                    target = node.module or ""
                names = [f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target
                         for a in node.names]  # fmt: skip
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for n in names:
                while n and n not in mods:
                    n = n.rsplit(".", 1)[0] if "." in n else ""
                if n and n != m:
                    graph[m].add(n)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path):
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n")  # lazy: still a cycle
    (pkg / "c.py").write_text("from .a import y\n")
    assert cycles(import_graph(pkg)) == [["p.a", "p.b"]]


# Front ends reach sources and checks only through iopilot.api, the one
# pipeline.  bench.synthetic writes iopilot's trace format, so it may read
# that format's layout from the source that reads it.
FRONT_ENDS = ("iopilot.cli", "iopilot.bench", "iopilot.demo", "iopilot.report.fleet",
              "iopilot.capture.run")  # fmt: skip
BEHIND_API = ("iopilot.sources", "iopilot.checks")
FORMAT_WRITERS = {"iopilot.bench.synthetic": {"iopilot.sources.trace_procs"}}


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def front_end_leaks(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    out = {}
    for m, deps in graph.items():
        if not _under(m, FRONT_ENDS):
            continue
        bad = sorted(d for d in deps if _under(d, BEHIND_API)
                     and d not in FORMAT_WRITERS.get(m, set()))  # fmt: skip
        if bad:
            out[m] = bad
    return out


def test_front_ends_go_through_the_api():
    graph = import_graph()
    assert "iopilot.pipeline" not in graph  # the pipeline is iopilot.api now
    assert front_end_leaks(graph) == {}


def test_the_leak_finder_finds_a_leak(tmp_path):
    pkg = tmp_path / "iopilot"
    (pkg / "checks").mkdir(parents=True)
    for f in ("__init__.py", "checks/__init__.py", "api.py", "demo.py"):
        (pkg / f).write_text("")
    (pkg / "demo.py").write_text("def f():\n    from .checks import REGISTRY\n")
    assert front_end_leaks(import_graph(pkg)) == {"iopilot.demo": ["iopilot.checks"]}


def test_one_cli_module_per_subcommand():
    from iopilot.cli import _subparsers, build_parser

    commands = _subparsers(build_parser())
    assert set(commands) == {"report", "checks", "run", "export", "demo", "bench", "tune",
                             "optimize", "advise", "cc"}
    for name, parser in commands.items():
        func = parser.get_default("func") or next(
            sp.get_default("func") for sp in _subparsers(parser).values())
        assert func.__module__ == f"iopilot.cli.{name}", name
