"""The registry of formats (src/iopilot/sources/registry.py): each format module
registers a probe and a loader, and ``sources.load`` asks it."""

from __future__ import annotations

import pkgutil
import sys
from pathlib import Path

import pytest

import iopilot.sources as sources
from iopilot.errors import InputError
from iopilot.model import Trace
from iopilot.sources.registry import SOURCES, Source, find, register


@pytest.fixture
def toy():
    """A format of .toy files, as a new module would register it."""
    loaded: list[str] = []

    def load(path: str) -> Trace:
        loaded.append(path)
        raise InputError(path, "a toy")

    source = register(Source("toy file", lambda p: p.suffix == ".toy", load))
    yield loaded
    SOURCES.remove(source)


def test_every_module_of_the_package_is_imported_and_its_formats_registered():
    names = {m.name for m in pkgutil.iter_modules(sources.__path__)}
    assert {"darshan_log", "darshan_gz", "iopilot_trace"} <= names
    assert all(f"iopilot.sources.{n}" in sys.modules for n in names)
    assert {s.name for s in SOURCES} >= {"Darshan log", "gzip-compressed Darshan log",
                                        "iopilot trace", "a file of an iopilot trace"}
    assert [s.name for s in SOURCES if s.fallback] == ["Darshan log"]


def test_load_asks_the_registered_format(tmp_path, toy):
    p = tmp_path / "x.toy"
    p.write_bytes(b"toy")
    with pytest.raises(InputError, match="a toy"):
        sources.load(str(p))
    assert toy == [str(p)]


def test_each_path_goes_to_its_format(tmp_path):
    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / "job.json").write_text("{}")
    plain = tmp_path / "plain"
    plain.mkdir()
    cases = {trace: "iopilot trace", trace / "job.json": "a file of an iopilot trace",
             tmp_path / "a.darshan": "Darshan log", tmp_path / "a.darshan.gz":
             "gzip-compressed Darshan log", tmp_path / "renamed.log": "Darshan log"}  # fmt: skip
    for path, name in cases.items():
        if not path.exists():
            path.write_bytes(b"")
        assert find(path).name == name, path
    assert find(plain) is None  # a directory no format claims
    with pytest.raises(InputError, match="is a directory, not a trace"):
        sources.load(str(plain))
    with pytest.raises(InputError, match="a file inside an iopilot trace"):
        sources.load(str(trace / "job.json"))


def test_a_name_or_a_second_fallback_is_refused(toy):
    with pytest.raises(ValueError, match="registered already"):
        register(Source("toy file", lambda p: False, Path))
    with pytest.raises(ValueError, match="fallback"):
        register(Source("another", lambda p: False, Path, fallback=True))
    assert sum(s.name == "toy file" for s in SOURCES) == 1


def test_the_readers_import_no_check():
    # Sources sit below the checks, in functions too: reading a trace must not
    # load every check (as a size formatter taken from the checks once did).
    import ast

    found = []
    for path in Path(sources.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and "checks" in (node.module or "").split("."):
                found.append(f"{path.name}:{node.lineno}")
    assert found == []
