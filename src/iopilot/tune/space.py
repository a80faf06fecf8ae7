"""The search space of ``iopilot tune``: which settings to try and their values.

A space file is TOML; every table that holds ``values`` or ``low``/``high`` is
one parameter, named by its path in a settings file::

    [ompi.io]
    values = ["ompio", "romio321"]
    default = "ompio"                    # what the system uses when unset
    [mpiio.romio_cb_write]
    values = ["enable", "disable", "automatic"]
    when = {"ompi.io" = "romio321"}      # only tried under this condition
    [mpiio.cb_nodes]
    low = 1
    high = 8
    log = true
    when = {"mpiio.romio_cb_write" = "enable"}
    [mpiio.files."*.h5".striping_factor]
    values = [1, 2, 4]

A point is a dict ``{name: value}`` of the parameters it sets; a parameter
whose condition does not hold is never in it.  ``settings_doc`` turns a point
into a settings document (``iopilot.settings``).
"""

from __future__ import annotations

import json
import math
import random
import re
import tomllib
from pathlib import Path
from typing import Any

from .. import settings as st
from .._record import field, record
from ..errors import InputError
from ..userfiles import short_errors

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")
_SPEC_KEYS = {"values", "low", "high", "log", "step", "when", "default"}
GRID_MAX = 4096  # points a grid may hold


def join_name(parts: tuple[str, ...]) -> str:
    """The dotted name of a path, quoting parts TOML would quote."""
    return ".".join(p if _BARE.match(p) else json.dumps(p) for p in parts)


def _parts(name: str) -> tuple[str, ...]:
    # TOML parses the dotted key for us: walk the one-leaf document it makes.
    doc: Any = tomllib.loads(f"{name} = 0")
    out = []
    while isinstance(doc, dict):
        (key, doc), = doc.items()
        out.append(key)
    return tuple(out)


def point_key(point: dict[str, Any]) -> str:
    """A stable text key of a point (for finding points already measured)."""
    return json.dumps(sorted(point.items()), separators=(",", ":"))


@record
class Param:
    """One parameter: categorical (``values``) or an integer range."""

    name: str
    path: tuple[str, ...]
    setting: st.Setting
    values: list[Any] | None = None
    low: int | None = None
    high: int | None = None
    log: bool = False
    step: int = 1
    when: dict[str, list[Any]] = field(default_factory=dict)
    default: Any = None

    @property
    def categorical(self) -> bool:
        return self.values is not None

    def domain(self) -> list[Any]:
        """Every value (a range as its grid: powers of two when ``log``)."""
        if self.values is not None:
            return list(self.values)
        assert self.low is not None and self.high is not None
        if self.log:
            out, v = [], self.low
            while v <= self.high:
                out.append(v)
                v *= 2
            return out
        return list(range(self.low, self.high + 1, self.step))

    def ladder(self) -> list[Any]:
        """A few values to try one at a time: all choices, or a range's ends and middle."""
        if self.values is not None:
            return [v for v in self.values if v != self.default]
        assert self.low is not None and self.high is not None
        if self.log:
            mid = 2 ** round((math.log2(self.low) + math.log2(self.high)) / 2)
        else:
            mid = self.low + (self.high - self.low) // 2 // self.step * self.step
        return [v for v in dict.fromkeys((self.low, mid, self.high)) if v != self.default]

    def sample(self, rng: random.Random) -> Any:
        if self.values is not None:
            return rng.choice(self.values)
        assert self.low is not None and self.high is not None
        if self.log:
            v = round(math.exp(rng.uniform(math.log(self.low), math.log(self.high))))
            return min(max(v, self.low), self.high)
        return rng.randrange(self.low, self.high + 1, self.step)

    def optuna_choices(self) -> list[Any]:
        # Optuna stores str, int, float, bool; an array (a chunk shape) goes as JSON text.
        assert self.values is not None
        return [json.dumps(v) if isinstance(v, list) else v for v in self.values]

    def from_optuna(self, value: Any) -> Any:
        if self.values is not None and any(isinstance(v, list) for v in self.values):
            return json.loads(value) if isinstance(value, str) else value
        return value

    def distribution(self) -> Any:
        import optuna  # lazy: 0.4 s to import; tune/ is loaded by `bench` and `--help` too

        if self.values is not None:
            return optuna.distributions.CategoricalDistribution(self.optuna_choices())
        return optuna.distributions.IntDistribution(self.low, self.high, log=self.log,
                                                    step=1 if self.log else self.step)  # fmt: skip


class Space:
    """Parameters in an order where every condition comes before what it guards."""

    def __init__(self, params: list[Param], where: str = "space") -> None:
        self.where = where
        self.params = _ordered(params, where)
        self.by_name = {p.name: p for p in self.params}

    def __len__(self) -> int:
        return len(self.params)

    def value_of(self, point: dict[str, Any], name: str) -> Any:
        """The value a condition sees: the point's, else the parameter's default."""
        return point.get(name, self.by_name[name].default)

    def active(self, param: Param, point: dict[str, Any]) -> bool:
        return all(self.value_of(point, n) in vals for n, vals in param.when.items())

    def clean(self, point: dict[str, Any]) -> dict[str, Any]:
        """``point`` without the parameters whose condition no longer holds."""
        out: dict[str, Any] = {}
        for p in self.params:  # conditions first, so `out` decides what follows
            if p.name in point and self.active(p, out):
                out[p.name] = point[p.name]
        return out

    def canonical(self, point: dict[str, Any]) -> dict[str, Any]:
        """``point`` without the values that are their parameter's default
        (and what only they unlocked): the settings it stands for, so that
        two points of the same settings have one key."""
        kept = {k: v for k, v in point.items()
                if self.by_name[k].default is None or v != self.by_name[k].default}  # fmt: skip
        return self.clean(kept)

    def valid(self, point: dict[str, Any]) -> bool:
        return set(point) <= set(self.by_name) and self.clean(point) == point

    def sample(self, rng: random.Random) -> dict[str, Any]:
        """A random point setting every parameter whose condition holds."""
        point: dict[str, Any] = {}
        for p in self.params:
            if self.active(p, point):
                point[p.name] = p.sample(rng)
        return point

    def grid(self) -> list[dict[str, Any]]:
        """Every combination, each conditional parameter only where its condition holds."""
        points: list[dict[str, Any]] = [{}]
        for p in self.params:
            nxt = []
            for pt in points:
                if self.active(p, pt):
                    nxt += [{**pt, p.name: v} for v in p.domain()]
                else:
                    nxt.append(pt)
            points = nxt
            if len(points) > GRID_MAX:
                raise InputError(self.where, f"the grid has more than {GRID_MAX} points",
                                 "use --strategy guided, tpe or random")  # fmt: skip
        return points

    def grid_size(self) -> int:
        try:
            return len(self.grid())
        except InputError:
            return GRID_MAX + 1

    def suggest(self, trial: Any) -> dict[str, Any]:
        """The point an Optuna trial chooses (define-by-run: conditions as branches)."""
        point: dict[str, Any] = {}
        for p in self.params:
            if not self.active(p, point):
                continue
            if p.values is not None:
                v = trial.suggest_categorical(p.name, p.optuna_choices())
            else:
                v = trial.suggest_int(p.name, p.low, p.high, log=p.log,
                                      step=1 if p.log else p.step)  # fmt: skip
            point[p.name] = p.from_optuna(v)
        return point

    def to_optuna(self, point: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(params, distributions) of a point, as Optuna stores them."""
        params, dists = {}, {}
        for name, v in point.items():
            p = self.by_name[name]
            params[name] = json.dumps(v) if isinstance(v, list) else v
            dists[name] = p.distribution()
        return params, dists

    def settings_doc(self, point: dict[str, Any]) -> dict[str, Any]:
        """The settings document a point stands for."""
        doc: dict[str, Any] = {}
        for name, value in point.items():
            node = doc
            *parents, leaf = self.by_name[name].path
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        return doc

    def describe(self) -> list[dict[str, Any]]:
        out = []
        for p in self.params:
            d: dict[str, Any] = {"name": p.name}
            if p.values is not None:
                d["values"] = p.values
            else:
                d.update(low=p.low, high=p.high, log=p.log)
            if p.when:
                d["when"] = p.when
            out.append(d)
        return out


def _ordered(params: list[Param], where: str) -> list[Param]:
    """Topological order of the conditions; a cycle is an input error."""
    by = {p.name: p for p in params}
    done: dict[str, Param] = {}
    visiting: set[str] = set()

    def visit(p: Param) -> None:
        if p.name in done:
            return
        if p.name in visiting:
            raise InputError(where, f"[{p.name}] when: the conditions form a cycle")
        visiting.add(p.name)
        for n in p.when:
            visit(by[n])
        visiting.discard(p.name)
        done[p.name] = p

    for p in params:
        visit(p)
    return list(done.values())


def _setting_of(path: tuple[str, ...], where: str) -> st.Setting:
    name = join_name(path)
    if path[0] == "mpiio" and len(path) == 4 and path[1] == "files":
        key = ("mpiio", path[3])
    elif len(path) == 2:
        key = (path[0], path[1])
    else:
        raise InputError(where, f"[{name}]: not a setting's name",
                         'expected TABLE.NAME or mpiio.files."GLOB".NAME')  # fmt: skip
    s = st.BY_KEY.get(key)
    if s is None:
        known = ", ".join(f"{x.table}.{x.name}" for x in st.SETTINGS if x.table == key[0])
        raise InputError(where, f"[{name}]: unknown setting",
                         f"known: {known}" if known else f"tables: {', '.join(st.TABLES)}")
    return s


def _check_value(param: Param, value: Any, where: str, what: str) -> Any:
    """``value`` checked as the setting's; a size string becomes bytes in ranges."""
    doc: dict[str, Any] = {}
    node = doc
    *parents, leaf = param.path
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    try:
        st.validate(doc, where)
    except InputError as e:  # "[TABLE] NAME: why": the parameter is named here already
        why = e.reason.partition("]")[2].partition(": ")[2] or e.reason
        raise InputError(where, f"[{param.name}] {what}: {why}") from None
    return value


def _int_bound(param: Param, raw: Any, where: str, what: str) -> int:
    if param.setting.kind not in ("int", "size"):
        raise InputError(where, f"[{param.name}] {what}: a range needs an integer or size "
                         f"setting; {param.name} is {param.setting.kind}: give values = [...]")
    if param.setting.kind == "size" and isinstance(raw, str):
        _check_value(param, raw, where, what)
        return st.parse_size(raw)
    if not isinstance(raw, int) or isinstance(raw, bool):
        raise InputError(where, f"[{param.name}] {what}: expected an integer, not {raw!r}")
    return _check_value(param, raw, where, what)


def _param(path: tuple[str, ...], spec: dict[str, Any], where: str) -> Param:
    name = join_name(path)
    if extra := sorted(set(spec) - _SPEC_KEYS):
        raise InputError(where, f"[{name}] {extra[0]}: unknown key",
                         f"a parameter has: {', '.join(sorted(_SPEC_KEYS))}")  # fmt: skip
    p = Param(name, path, _setting_of(path, where))
    has_values, has_range = "values" in spec, "low" in spec or "high" in spec
    if has_values == has_range:
        raise InputError(where, f"[{name}]: give either values = [...] or low and high")
    if has_values:
        vals = spec["values"]
        if not isinstance(vals, list) or not vals:
            raise InputError(where, f"[{name}] values: expected a non-empty array")
        for v in vals:
            _check_value(p, v, where, "values")
        if len({json.dumps(v) for v in vals}) != len(vals):
            raise InputError(where, f"[{name}] values: a value is listed twice")
        p.values = vals
        for k in ("log", "step"):
            if k in spec:
                raise InputError(where, f"[{name}] {k}: only for ranges (low, high)")
    else:
        if "low" not in spec or "high" not in spec:
            raise InputError(where, f"[{name}]: a range needs both low and high")
        p.low = _int_bound(p, spec["low"], where, "low")
        p.high = _int_bound(p, spec["high"], where, "high")
        if p.low > p.high:
            raise InputError(where, f"[{name}] low: {p.low} is above high {p.high}")
        p.log = spec.get("log", False)
        if not isinstance(p.log, bool):
            raise InputError(where, f"[{name}] log: expected true or false")
        if p.log and p.low < 1:
            raise InputError(where, f"[{name}] low: must be >= 1 with log = true")
        p.step = spec.get("step", 1)
        if not isinstance(p.step, int) or isinstance(p.step, bool) or p.step < 1:
            raise InputError(where, f"[{name}] step: expected an integer >= 1")
        if p.log and "step" in spec:
            raise InputError(where, f"[{name}] step: not with log = true")
    if "default" in spec:
        p.default = _check_value(p, spec["default"], where, "default")
    when = spec.get("when", {})
    if not isinstance(when, dict):
        raise InputError(where, f"[{name}] when: expected a table {{\"TABLE.NAME\" = VALUE}}")
    p.when = {k: v if isinstance(v, list) else [v] for k, v in when.items()}
    return p


def _walk(node: dict[str, Any], path: tuple[str, ...], out: list[tuple[tuple[str, ...], dict]],
          where: str) -> None:  # fmt: skip
    for key, value in node.items():
        sub = (*path, key)
        if not isinstance(value, dict):
            raise InputError(where, f"[{join_name(path)}] {key}: expected a table "
                             f"[{join_name(sub)}] with values = [...] or low/high")  # fmt: skip
        if _SPEC_KEYS & set(value) and not any(isinstance(v, dict) and k != "when"
                                               for k, v in value.items()):  # fmt: skip
            out.append((sub, value))
        else:
            _walk(value, sub, out, where)


def from_dict(doc: dict[str, Any], where: str = "space") -> Space:
    """A space from its TOML document; InputError naming the key when wrong."""
    found: list[tuple[tuple[str, ...], dict]] = []
    _walk(doc, (), found, where)
    if not found:
        raise InputError(where, "no parameters", 'e.g. [ompi.io] values = ["ompio", "romio321"]')
    params = [_param(path, spec, where) for path, spec in found]
    by = {p.name: p for p in params}
    for p in params:
        for n, vals in p.when.items():
            q = by.get(_canonical(n))
            if q is None:
                raise InputError(where, f"[{p.name}] when: {n} is not a parameter of the space")
            if q.values is None:
                raise InputError(where, f"[{p.name}] when: {n} must have values = [...]")
            for v in vals:
                if v not in q.values and v != q.default:
                    raise InputError(where, f"[{p.name}] when: {v!r} is not a value of {n}")
        p.when = {_canonical(n): vals for n, vals in p.when.items()}
    return Space(params, where)


def _canonical(name: str) -> str:
    try:
        return join_name(_parts(name))
    except (tomllib.TOMLDecodeError, ValueError):
        return name


def load(path: str | Path) -> Space:
    """The space in a TOML file."""
    with short_errors():
        return from_dict(st.read_toml(path), str(path))
