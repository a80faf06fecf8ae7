"""iopilot's one pipeline: load -> derive -> check -> render.

Every front end (the command line, ``iopilot run``, the fleet summary, the
benches, future ones) goes through these functions, so a log is read, scoped
and checked the same way wherever it comes from::

    from iopilot import api

    print(api.report("run.darshan", fmt="terminal"))
    d = api.diagnose("trace-dir/", thresholds=api.thresholds(overrides=["x=1"]))
    doc = api.render(d, "dict")

Front ends import this module, not ``iopilot.sources`` or ``iopilot.checks``
(``tests/test_structure.py`` holds them to it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import sources
from ._alloc import settled
from .checks import REGISTRY, Check, Diagnosis
from .checks import diagnose as run_checks
from .checks import thresholds as th
from .model import Trace
from .model.scope import FileScope
from .report import csv_report, json_report, terminal
from .sources import program as programs
from .sources.inputs import expand_inputs

if TYPE_CHECKING:
    from .overlap.advise import Advice

FORMATS = ("dict", "json", "csv", "terminal", "html")


def load(path: str) -> Trace:
    """Read an iopilot trace directory or a Darshan log (``.darshan``, ``.gz``);
    raise :class:`~iopilot.errors.InputError` with a one-line reason otherwise."""
    return sources.load(str(path))


def derive(trace: Trace, scope: FileScope | None = None) -> Trace:
    """The trace the checks see: runtime and library files set aside by
    ``scope`` (the default scope when None); ``trace.set_aside`` says what went."""
    return (scope or FileScope.build()).apply(trace)


def diagnose(source: Trace | str | Path, *, thresholds: dict[str, Any] | None = None,
             only: set[str] | None = None,
             scope: FileScope | None = None) -> Diagnosis:  # fmt: skip
    """Load ``source`` (a path, or a trace already loaded), set the noise
    aside and run the checks (all, or the ids in ``only``) with
    ``thresholds`` (the defaults when None).  A trace that went through
    :func:`derive` already keeps its scope unless ``scope`` is given."""
    trace = load(str(source)) if isinstance(source, (str, Path)) else source
    settled()  # the modules are in: collect garbage again from here on
    if scope is not None or trace.set_aside is None:  # (twice would lose what went)
        trace = derive(trace, scope)
    return run_checks(trace, thresholds, only)


def render(diagnosis: Diagnosis, fmt: str = "terminal", *, color: bool = False,
           min_level: str = "OK", verbose: bool = False,
           phase_gap: float | None = None) -> Any:  # fmt: skip
    """One diagnosis in ``fmt``: ``dict`` (plain data, the JSON report's
    entry for one log), ``json`` (the whole versioned document), ``csv``,
    ``terminal`` (the text ``iopilot report`` prints) or ``html`` (the page)."""
    if fmt == "html":
        from .report.html import render_html  # lazy: see write_page

        return render_html(diagnosis, phase_gap=phase_gap)
    doc = json_report.diagnosis_dict(diagnosis)
    return render_dict(doc, fmt, color=color, min_level=min_level, verbose=verbose)


def render_dict(doc: dict[str, Any], fmt: str, *, color: bool = False, min_level: str = "OK",
                verbose: bool = False) -> Any:  # fmt: skip
    """``render`` for a diagnosis already turned into plain data (what worker
    processes send back); every format but ``html``."""
    if fmt == "dict":
        return doc
    if fmt == "json":
        return json_report.dumps(json_report.document([doc], []))
    if fmt == "csv":
        return csv_report.render([doc])
    if fmt == "terminal":
        return terminal.render(doc, terminal.Style(color), min_level=min_level, verbose=verbose)
    raise ValueError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")


def write_page(diagnosis: Diagnosis, path: str | Path, *,
               phase_gap: float | None = None) -> dict[str, Any]:  # fmt: skip
    """Write the HTML page to ``path``; return where, its size and whether the
    timeline was sampled."""
    # lazy: the page's views cost 20 ms of imports, a fifth of a one-log
    # report (0.1 s) that writes no page.
    from .report.html import write_html

    return write_html(diagnosis, path, phase_gap=phase_gap)


def report(path: str | Path, fmt: str = "terminal", *,
           thresholds: dict[str, Any] | None = None, only: set[str] | None = None,
           scope: FileScope | None = None, **options: Any) -> Any:  # fmt: skip
    """The whole pipeline in one call: ``render(diagnose(path, ...), fmt, ...)``."""
    d = diagnose(path, thresholds=thresholds, only=only, scope=scope)
    return render(d, fmt, **options)


def advise_async(source: Trace | str | Path, *, cores: int | None = None,
                 scope: FileScope | None = None) -> Advice:
    """Whether asynchronous I/O pays for the run in ``source``: the predicted
    run time with and without it, per phase, and whether reordering is safe
    (calibrated on this machine; ``cores`` per node when it differs)."""
    # lazy: the advisor and its calibration (4 ms of imports) serve one command only.
    from .overlap.advise import advise
    from .overlap.calibrate import measure

    trace = load(str(source)) if isinstance(source, (str, Path)) else source
    return advise(derive(trace, scope), measure(cores))


# ---------------------------------------------------------------------------
# What front ends need besides the pipeline
# ---------------------------------------------------------------------------


def thresholds(config: str | None = None, overrides: Sequence[str] | None = None) -> dict[str, Any]:
    """The defaults, then a TOML file, then ``NAME=VALUE`` overrides."""
    return th.load(config, list(overrides or ()))


def threshold_defaults() -> dict[str, tuple[Any, str]]:
    """Every threshold: name -> (default value, what it means)."""
    return dict(th.DEFAULTS)


def checks() -> dict[str, type[Check]]:
    """The registered checks by id."""
    return dict(REGISTRY)


def inputs(items: Sequence[str]) -> list[str]:
    """What ``iopilot report`` is pointed at -> the logs and traces to read."""
    return expand_inputs(items)


def program_facts(trace_dir: str | Path) -> dict[str, Any]:
    """What the executables of a trace's processes link: I/O layers linked
    into them statically, the language runtime (for job.json, so that a
    report made on another machine still knows)."""
    return programs.program_facts(programs.trace_executables(trace_dir))
