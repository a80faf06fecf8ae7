"""Record classes, the one kind of data class in iopilot, cheap to define.

``dataclasses`` writes each class's ``__init__``, ``__repr__`` and ``__eq__``
as source text and compiles it when the module is imported: about 0.26 ms a
class (0.44 ms frozen with slots) on a 2-core machine.  Measured on the
whole one-log ``iopilot report`` (58 Darshan logs, best of 5, the two
versions interleaved): 0.094 s per log with ``@record``, 0.104 s with
``@dataclass`` in its place, 9 ms or 10 % more, the self time of the modules
that define the classes going from 4 ms to 11.6 ms (``python -X importtime``).
So every class is a ``@record``, ``tune/``'s and the HTML views' too: one
system.  ``@record`` makes the same kind of class (fields from the
annotations in order, defaults, ``field(default_factory=...)``,
``__post_init__``, ``frozen``) with the methods below, written once, so
defining a class costs microseconds.  Instances are made a little more
slowly, which does not matter for these classes: they hold columns, not rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")

_MISSING: Any = object()


class FrozenRecordError(AttributeError):
    """Raised on assignment to a field of a frozen record."""


class _Field:
    __slots__ = ("default", "factory")

    def __init__(self, default: Any, factory: Callable[[], Any] | None) -> None:
        self.default = default
        self.factory = factory


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None) -> Any:
    """A field's default made fresh for each instance (``default_factory``)."""
    return _Field(default, default_factory)


def _make(cls: type[T], frozen: bool) -> type[T]:
    names: list[str] = list(getattr(cls, "__record_fields__", ()))
    defaults: dict[str, Any] = dict(getattr(cls, "__record_defaults__", {}))
    factories: dict[str, Callable[[], Any]] = dict(getattr(cls, "__record_factories__", {}))
    # Own annotations only (inherited fields came from the base above).
    for name, ann in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
        if "ClassVar" in str(ann):
            continue
        if name not in names:
            names.append(name)
        value = cls.__dict__.get(name, _MISSING)
        if isinstance(value, _Field):
            if value.factory is not None:
                factories[name] = value.factory
                delattr(cls, name)
                continue
            value = value.default
            setattr(cls, name, value)
        if value is not _MISSING:
            defaults[name] = value
        elif defaults or factories:
            raise TypeError(f"{cls.__name__}: field {name!r} without a default follows one with it")
    cls.__record_fields__ = tuple(names)  # type: ignore[attr-defined]
    cls.__record_defaults__ = defaults  # type: ignore[attr-defined]
    cls.__record_factories__ = factories  # type: ignore[attr-defined]
    cls.__record_frozen__ = frozen  # type: ignore[attr-defined]
    cls.__match_args__ = tuple(names)  # type: ignore[attr-defined]
    for name, method in (("__init__", _init), ("__repr__", _repr), ("__eq__", _eq)):
        if name not in cls.__dict__:
            setattr(cls, name, method)
    if frozen:
        cls.__setattr__ = _frozen_setattr  # type: ignore[assignment, method-assign]
        cls.__delattr__ = _frozen_delattr  # type: ignore[assignment, method-assign]
        cls.__hash__ = _hash  # type: ignore[assignment, method-assign]
    elif "__hash__" not in cls.__dict__:
        cls.__hash__ = None  # type: ignore[assignment]  # mutable and compared by value
    return cls


@overload
def record(cls: type[T], /) -> type[T]: ...
@overload
def record(*, frozen: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(field,))
def record(cls: type[T] | None = None, /, *, frozen: bool = False) -> Any:
    """Make ``cls`` a record: ``@record`` or ``@record(frozen=True)``."""
    if cls is None:
        return lambda c: _make(c, frozen)
    return _make(cls, frozen)


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    cls = type(self)
    names = cls.__record_fields__
    if len(args) > len(names):
        raise TypeError(f"{cls.__name__}() takes {len(names)} arguments, {len(args)} given")
    put = object.__setattr__
    for name, value in zip(names, args, strict=False):
        if name in kwargs:
            raise TypeError(f"{cls.__name__}() got two values for {name!r}")
        put(self, name, value)
    for name in names[len(args):]:
        if name in kwargs:
            put(self, name, kwargs.pop(name))
        elif name in cls.__record_defaults__:
            put(self, name, cls.__record_defaults__[name])
        elif name in cls.__record_factories__:
            put(self, name, cls.__record_factories__[name]())
        else:
            raise TypeError(f"{cls.__name__}() needs a value for {name!r}")
    if kwargs:
        raise TypeError(f"{cls.__name__}() got unknown field(s): {', '.join(sorted(kwargs))}")
    post = getattr(self, "__post_init__", None)
    if post is not None:
        post()


def _values(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, n) for n in type(self).__record_fields__)


def _repr(self: Any) -> str:
    inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in type(self).__record_fields__)
    return f"{type(self).__qualname__}({inner})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self: Any) -> int:
    return hash(_values(self))


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenRecordError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenRecordError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")


def replace(obj: T, **changes: Any) -> T:
    """A copy of record ``obj`` with ``changes`` (``__post_init__`` runs again)."""
    names = type(obj).__record_fields__  # type: ignore[attr-defined]
    unknown = set(changes) - set(names)
    if unknown:
        raise TypeError(f"{type(obj).__name__} has no field(s) {', '.join(sorted(unknown))}")
    return type(obj)(**{n: changes.get(n, getattr(obj, n)) for n in names})


def asdict(obj: Any) -> dict[str, Any]:
    """The fields of record ``obj`` by name (values as they are, not copied)."""
    return {n: getattr(obj, n) for n in type(obj).__record_fields__}
