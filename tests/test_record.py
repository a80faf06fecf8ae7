"""The record classes of the model, checks and readers (src/iopilot/_record.py)."""

from __future__ import annotations

import subprocess
import sys
from typing import ClassVar

import pytest

from iopilot._record import FrozenRecordError, asdict, field, record, replace


@record
class Point:
    x: int
    y: int = 2
    tags: list[str] = field(default_factory=list)
    kind: ClassVar[str] = "point"  # a class attribute, not a field


@record(frozen=True)
class Key:
    name: str
    n: int = 0


@record
class Scaled:
    value: float
    scale: float = 1.0

    def __post_init__(self) -> None:
        self.scaled = self.value * self.scale


@record
class Point3(Point):
    z: int = 0


def test_fields_in_order_with_defaults_and_fresh_factories():
    assert Point.__record_fields__ == ("x", "y", "tags")
    a, b = Point(1), Point(x=1)
    assert (a.x, a.y, a.tags) == (1, 2, [])
    a.tags.append("t")
    assert b.tags == []  # each instance its own list
    assert Point(1, 5, ["u"]).tags == ["u"] and Point(1, tags=["v"]).y == 2
    assert Point.kind == "point" and "kind" not in asdict(a)
    assert Point3.__record_fields__ == ("x", "y", "tags", "z") and Point3(1, z=4).z == 4


def test_wrong_arguments_are_type_errors():
    with pytest.raises(TypeError, match="needs a value for 'x'"):
        Point()
    with pytest.raises(TypeError, match="two values for 'x'"):
        Point(1, x=2)
    with pytest.raises(TypeError, match="unknown field"):
        Point(1, w=3)
    with pytest.raises(TypeError, match="takes 3 arguments, 4 given"):
        Point(1, 2, [], 4)
    Point(1, 2, [])  # exactly as many as there are fields
    with pytest.raises(TypeError, match="without a default follows"):
        @record
        class Bad:
            a: int = 0
            b: int


def test_equality_repr_and_hashing():
    assert Point(1, 2) == Point(1, 2) and Point(1, 2) != Point(1, 3)
    assert Point(1) != Point3(1)  # another class is never equal
    assert repr(Point(1)) == "Point(x=1, y=2, tags=[])"
    with pytest.raises(TypeError):
        hash(Point(1))  # mutable and compared by value: unhashable, as a dataclass
    assert hash(Key("a", 1)) == hash(Key("a", 1)) and {Key("a"), Key("a")} == {Key("a")}
    assert Key("a") != Key("b") and Key("a", 1) != Key("a", 2)


def test_frozen_records_refuse_assignment():
    k = Key("a")
    with pytest.raises(FrozenRecordError):
        k.name = "b"  # type: ignore[misc]
    with pytest.raises(AttributeError):  # a FrozenRecordError is an AttributeError
        del k.n
    assert k.name == "a"
    p = Point(1)
    p.y = 7  # a plain record is mutable
    assert p.y == 7


def test_post_init_replace_and_asdict():
    s = Scaled(2.0, 3.0)
    assert s.scaled == 6.0
    t = replace(s, scale=0.5)
    assert (t.value, t.scale, t.scaled) == (2.0, 0.5, 1.0) and s.scale == 3.0
    with pytest.raises(TypeError, match="no field"):
        replace(s, speed=1)
    assert asdict(Key("a", 3)) == {"name": "a", "n": 3}
    assert replace(Key("a"), n=9) == Key("a", 9)


def test_the_model_loads_without_dataclasses():
    # Compiling dataclass methods at import cost a tenth of a small report.
    code = ("import sys, iopilot.checks, iopilot.api, iopilot.sources, iopilot.model.scope;"
            "print('dataclasses' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False"]


def test_every_data_class_of_the_package_is_a_record():
    # One system: a module that imports dataclasses brings back the cost above.
    import ast
    from pathlib import Path

    import iopilot

    root = Path(iopilot.__file__).parent
    users = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if "dataclasses" in names:
                users.append(str(path.relative_to(root)))
    assert users == []


def test_records_cross_process_boundaries_by_pickle():
    # Worker processes send findings and traces back to the parent.
    import pickle

    for obj in (Point(1, 3, ["a"]), Key("k", 2), Scaled(2.0, 2.0)):
        back = pickle.loads(pickle.dumps(obj))
        assert back == obj and type(back) is type(obj)
    assert pickle.loads(pickle.dumps(Scaled(2.0, 2.0))).scaled == 4.0
