"""``iopilot bench accuracy``: how right the diagnosis is on the corpus of
programs each written with one known I/O mistake (``corpus/``).

Per case: whether the first WARN/HIGH finding of the mistake's trace is the
expected check (and holds the expected advice), whether its advice is in the
program's language, whether its first call site is the mistake's line, and
how its "at stake" compares with what the fix really saved (untraced wall
time of the mistake minus the fixed program's, best of N).  The scoring
functions are pure; the runs are in :mod:`.corpus`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._record import asdict, field, record
from ..errors import InputError
from ..outfile import emit
from .corpus import (
    CORPUS_DIR,
    Case,
    CaseError,
    build,
    first_finding,
    load_corpus,
    raised,
    time_mode,
    traced_diagnosis,
)

# A saving below this is within the noise of a few-second run: "at stake" is
# scored only for cases whose fix saves at least this much.
MIN_SAVING = 0.1
STAKE_FACTOR = 2.0  # "at stake" is right within this factor of the saving
_ALIASES = {"cpp": "c++", "cxx": "c++", "f90": "fortran", "py": "python"}


# ---------------------------------------------------------------------------
# Scoring (pure)
# ---------------------------------------------------------------------------


def first_right(expect: str, advice: str | None, first: dict[str, Any] | None) -> bool:
    """The first WARN/HIGH finding is ``expect`` and its snippet holds ``advice``."""
    if first is None or first["check"] != expect:
        return False
    return advice is None or advice in (first.get("snippet") or "")


def _lang(name: str | None) -> str:
    name = (name or "").strip().lower()
    return _ALIASES.get(name, name)


def language_right(language: str, first: dict[str, Any] | None) -> bool:
    """The first finding's advice is code in the program's ``language`` (a
    C++ program's is labelled "c++"); no finding or no snippet is not.  A
    finding about how the program is built (layer BUILD) is right with a
    shell line: relinking is the fix, whatever the program's language."""
    if first is None or not first.get("snippet"):
        return False
    if first.get("layer") == "BUILD" and first.get("snippet_lang") == "sh":
        return True
    return _lang(first.get("snippet_lang")) == _lang(language)


def first_site(first: dict[str, Any] | None) -> dict[str, Any] | None:
    """The finding's first source location (its top call site), or None."""
    if first is None:
        return None
    return next((loc for loc in first.get("locations") or [] if loc.get("kind") == "source"),
                None)  # fmt: skip


def site_label(site: dict[str, Any] | None) -> str | None:
    """``main.c:19``, ``main.c`` (no line known) or None (no call site)."""
    if site is None:
        return None
    name = Path(site.get("file") or "").name or site.get("function") or "?"
    return f"{name}:{site['line']}" if site.get("line") else name


def line_right(source: str | Path, line: int | None, first: dict[str, Any] | None) -> bool:
    """The first finding's first call site is ``line`` of ``source`` (the
    file's name is compared: a build or an MPI launch may see the source by
    another directory)."""
    site = first_site(first)
    if line is None or site is None:
        return False
    return Path(site.get("file") or "").name == Path(source).name and site.get("line") == line


def stake_counts(saved: float | None) -> bool:
    """Whether the fix saved enough to score "at stake" against it."""
    return saved is not None and saved >= MIN_SAVING


def stake_ratio(cost_seconds: float | None, saved: float | None) -> float | None:
    """"At stake" over the measured saving (None when either is missing or
    nothing was saved)."""
    if cost_seconds is None or saved is None or saved <= 0:
        return None
    return cost_seconds / saved


def stake_right(ratio: float | None) -> bool:
    """Within a factor of :data:`STAKE_FACTOR` of the saving, both ends included."""
    return ratio is not None and 1 / STAKE_FACTOR <= ratio <= STAKE_FACTOR


# ---------------------------------------------------------------------------
# Per case and in all
# ---------------------------------------------------------------------------


@record
class Result:
    """What one case measured and how it scored."""

    case: str
    language: str
    expect: str
    first: str | None = None  # the first WARN/HIGH finding's check
    first_ok: bool = False
    expect_at: int | None = None  # the expected check's place among WARN/HIGH (1: first)
    warned: list[str] = field(default_factory=list)  # the WARN/HIGH checks, in order
    snippet: str | None = None
    language_ok: bool = False
    snippet_lang: str | None = None
    line: int | None = None  # the mistake's line (the case's label)
    site: str | None = None  # the first finding's first call site, "main.c:19"
    line_ok: bool = False
    cost_seconds: float | None = None
    io_seconds: float | None = None  # the slowest rank's I/O in the mistake's trace
    t_mistake: float | None = None
    t_fixed: float | None = None
    saved: float | None = None
    ratio: float | None = None
    stake_ok: bool = False
    still_in_fixed: bool | None = None  # the expected check is WARN/HIGH after the fix
    error: str | None = None  # why the case did not run to the end

    @property
    def scored_stake(self) -> bool:
        return stake_counts(self.saved)


def score(case: Case, mistake: dict[str, Any], fixed: dict[str, Any] | None,
          t_mistake: float | None, t_fixed: float | None) -> Result:  # fmt: skip
    """One case's result from the reports (as plain data) of its traced
    mistake and fixed runs, and its untraced wall times (None: not timed)."""
    first = first_finding(mistake)
    saved = t_mistake - t_fixed if t_mistake is not None and t_fixed is not None else None
    cost = first.get("cost_seconds") if first else None
    ratio = stake_ratio(cost, saved)
    warned = [f["check"] for f in mistake["findings"] if f["level"] in ("WARN", "HIGH")]
    return Result(
        case=case.name, language=case.language, expect=case.expect,
        first=first["check"] if first else None,
        first_ok=first_right(case.expect, case.advice, first),
        expect_at=warned.index(case.expect) + 1 if case.expect in warned else None,
        warned=warned, snippet=first.get("snippet") if first else None,
        language_ok=language_right(case.language, first),
        snippet_lang=first.get("snippet_lang") if first else None,
        line=case.line, site=site_label(first_site(first)),
        line_ok=line_right(case.source, case.line, first),
        cost_seconds=cost, io_seconds=mistake["io_time"]["slowest_rank_seconds"],
        t_mistake=t_mistake, t_fixed=t_fixed, saved=saved, ratio=ratio,
        stake_ok=stake_counts(saved) and stake_right(ratio),
        still_in_fixed=raised(fixed, case.expect) if fixed is not None else None,
    )  # fmt: skip


def totals(results: list[Result]) -> dict[str, Any]:
    """The three scores: cases that failed to run count as wrong."""
    n = len(results)
    stake = [r for r in results if r.scored_stake]
    return {
        "cases": n,
        "first_right": sum(r.first_ok for r in results),
        "language_right": sum(r.language_ok for r in results),
        "line_cases": sum(r.line is not None for r in results),
        "line_right": sum(r.line_ok for r in results),
        "timed": sum(r.saved is not None for r in results),
        "stake_cases": len(stake),
        "stake_right": sum(r.stake_ok for r in stake),
        "still_in_fixed": sum(bool(r.still_in_fixed) for r in results),
        "failed": sum(r.error is not None for r in results),
    }


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.0f} %" if n else "- %"


def _s(v: float | None, fmt: str = ".2f") -> str:
    return "-" if v is None else format(v, fmt)


def _row(r: Result) -> list[str]:
    ok = "yes" if r.first_ok else ("advice" if r.first == r.expect else "NO")
    ratio = _s(r.ratio) + ("" if not r.scored_stake else (" ok" if r.stake_ok else " !"))
    line = "-" if r.line is None else ("yes" if r.line_ok else f"no ({r.site or '-'})")
    return [r.case, r.language, r.expect, r.first or "-", ok, _s(r.expect_at, "d"),
            "yes" if r.language_ok else f"no ({r.snippet_lang or '-'})", line,
            _s(r.cost_seconds), _s(r.io_seconds), _s(r.saved), ratio,
            {None: "-", True: "still", False: "gone"}[r.still_in_fixed]]  # fmt: skip


_HEAD = ["case", "lang", "expected", "first finding", "ok", "at", "lang ok", "line", "stake s",
         "io s", "saved s", "ratio", "fixed"]  # fmt: skip
_RIGHT = {"at", "stake s", "io s", "saved s", "ratio"}  # numbers, right-aligned


def render(results: list[Result], t: dict[str, Any]) -> str:
    """The table per case, then the totals.  "ok" is "advice" when the check
    is right but its snippet lacks the expected advice; "at" is the expected
    check's place among the WARN/HIGH findings; "line" whether its first call
    site is the mistake's line (what it names instead; "-" for a case without
    a line); "fixed" says whether it is
    still WARN/HIGH after the fix ("gone" is right)."""
    rows = [_HEAD, *(_row(r) for r in results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEAD))]

    def line(row: list[str]) -> str:
        return "  ".join(v.rjust(w) if h in _RIGHT else v.ljust(w)
                         for v, w, h in zip(row, widths, _HEAD, strict=True)).rstrip()  # fmt: skip

    lines = [line(_HEAD)]
    for r, row in zip(results, rows[1:], strict=True):
        lines.append(line(row))
        if r.error:
            lines.append(f"    ! {r.error}")
    n = t["cases"]
    lines += ["",
              f"first finding right: {t['first_right']}/{n} ({_pct(t['first_right'], n)})",
              f"advice in the program's language: {t['language_right']}/{n} "
              f"({_pct(t['language_right'], n)})"]  # fmt: skip
    k, m = t["line_right"], t["line_cases"]
    lines.append(f"first call site on the mistake's line: {k}/{m} of the cases with a line "
                 f"({_pct(k, m)})")
    if t["timed"]:
        k, m = t["stake_right"], t["stake_cases"]
        lines.append(f"at stake within {STAKE_FACTOR:g}x: {k}/{m} of the cases saving >= "
                     f"{MIN_SAVING:g} s ({_pct(k, m)})")
    else:
        lines.append(f"at stake within {STAKE_FACTOR:g}x: not measured (no untraced runs)")
    if t["still_in_fixed"]:
        lines.append(f"expected finding still WARN/HIGH after the fix: {t['still_in_fixed']}/{n}")
    if t["failed"]:
        lines.append(f"cases that did not run to the end (scored wrong): {t['failed']}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------


def run_case(case: Case, repeat: int, timing: bool) -> Result:
    """Build, time (unless not ``timing``), trace and diagnose one case; a
    later step that fails leaves what the earlier ones measured, with why."""
    exe = build(case)
    errors: list[str] = []
    exe_fixed = build(case, mode="fixed") if case.build_fixed else exe

    def attempt(step: Callable[..., Any], *args: Any) -> Any:
        try:
            return step(*args)
        except CaseError as e:
            errors.append(e.reason)
            return None

    t_mistake = attempt(time_mode, case, exe, "mistake", repeat) if timing else None
    t_fixed = attempt(time_mode, case, exe_fixed, "fixed", repeat) if timing else None
    mistake = traced_diagnosis(case, exe, "mistake")  # without it, nothing to score
    fixed = attempt(traced_diagnosis, case, exe_fixed, "fixed")
    result = score(case, mistake, fixed, t_mistake, t_fixed)
    result.error = "; ".join(errors) or None
    return result


def main(*, corpus: str | None = None, patterns: list[str] | None = None, repeat: int = 3,
         no_timing: bool = False, json_path: str | None = None) -> int:
    """``iopilot bench accuracy``: run the cases of ``corpus`` (those matching
    ``patterns``), print the scores and write them to ``json_path``."""
    where = Path(corpus) if corpus else CORPUS_DIR
    if not where.is_dir():
        print(f"iopilot: error: {where}: no corpus directory there", file=sys.stderr)
        return 2
    if repeat < 1:
        print("iopilot: error: --repeat: at least 1", file=sys.stderr)
        return 2
    patterns = patterns or []
    cases, bad = load_corpus(where, patterns)
    for e in bad:
        print(f"iopilot: bad case: {e}", file=sys.stderr)
    if not cases:
        what = f"matching {' '.join(patterns)} " if patterns else ""
        print(f"iopilot: error: no valid case {what}in {where}", file=sys.stderr)
        return 2
    results: list[Result] = []
    not_run: dict[str, str] = {}
    for case in cases:
        if needs := case.needs():
            not_run[case.name] = f"needs {', '.join(needs)}"
            print(f"iopilot: {case.name}: not run: {not_run[case.name]}", file=sys.stderr)
            continue
        print(f"{case.name} ...", file=sys.stderr, flush=True)
        try:
            results.append(run_case(case, repeat, not no_timing))
        except InputError as e:  # CaseError included: the case could not be built or run
            results.append(Result(case.name, case.language, case.expect, error=e.reason))
        except Exception as e:  # a diagnosis that crashed: that case's result, not the run's
            results.append(Result(case.name, case.language, case.expect,
                                  error=f"{type(e).__name__}: {e}"))
    t = totals(results)
    if json_path != "-":
        print(render(results, t))
        for name, why in not_run.items():
            print(f"not run: {name}: {why}")
    if json_path:
        doc = {"corpus": str(where), "repeat": repeat, "timing": not no_timing,
               "min_saving_s": MIN_SAVING, "totals": t,
               "cases": [asdict(r) for r in results], "not_run": not_run,
               "bad_cases": [str(e) for e in bad]}  # fmt: skip
        emit(json_path, json.dumps(doc, indent=2) + "\n")
    return 0
