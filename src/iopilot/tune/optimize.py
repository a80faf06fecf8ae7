"""The work of ``iopilot optimize``: trace, diagnose, tune, trace again, compare.

The steps are the ones a user would take by hand, through the same code:
the program is traced with the default settings and diagnosed
(``api.diagnose``); the diagnosis chooses the search space
(``generate.generate``); the study of ``iopilot tune`` searches it
(``tune.tuning.tune``, guided); the program is traced once more with the best
settings, and the two diagnoses are compared finding by finding.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from .. import api
from .. import settings as st
from .._record import replace
from ..errors import InputError
from ..report.tuning import render_optimize_page
from .generate import generate
from .launch import RunTrial, launcher
from .objective import absolute_command
from .space import Space
from .tuning import TuneOptions, tune

QUIET_LEVELS = ("OK", "INFO")  # findings that are not problems


def trace(command: list[str], settings_file: Path, trace_dir: Path, launch: RunTrial,
          timeout: float | None = None) -> Path:  # fmt: skip
    """Run ``command`` once under ``iopilot run --settings`` (as a trial runs)
    and keep its trace in ``trace_dir``."""
    if trace_dir.exists():
        shutil.rmtree(trace_dir)
    work = trace_dir.with_name(trace_dir.name + ".work")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    doc = st.load(settings_file) if settings_file.stat().st_size else {}
    argv = [sys.executable, "-m", "iopilot", "run", "--trace-only", "--trace-dir",
            str(trace_dir), "--settings", str(settings_file), "--", *command]  # fmt: skip
    env = {**os.environ, **st.job_env(doc)}
    try:
        r = launch(argv, env, work, timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if r.timed_out or r.returncode != 0 or not trace_dir.exists():
        why = "timed out" if r.timed_out else f"exit status {r.returncode}"
        tail = " | ".join(r.stderr.strip().splitlines()[-3:])
        raise InputError(" ".join(command), f"the traced run failed ({why}): {tail}")
    return trace_dir


def side(report: dict[str, Any]) -> dict[str, Any]:
    """One side of the comparison, from a diagnosis as plain data."""
    it = report["io_time"]
    findings = [{"check": f.get("check"), "layer": f.get("layer"), "level": f.get("level"),
                 "title": f.get("title") or f.get("message") or "",
                 "cost_seconds": f.get("cost_seconds")}
                for f in report.get("findings", [])]  # fmt: skip
    problems = [f for f in findings if f["level"] not in QUIET_LEVELS]
    return {
        "io_time": float(it["slowest_rank_seconds"]),
        "run_seconds": it.get("run_seconds"),
        "share": it.get("share"),
        "nprocs": it.get("nprocs"),
        "findings_count": len(problems),
        "findings_cost": sum(float(f["cost_seconds"] or 0) for f in problems),
        "findings": findings,
    }


def findings_diff(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict]:
    """Each problem finding of either side, matched by check and layer: ``gone``
    (only before), ``remains`` (both) or ``new`` (only after)."""
    def keyed(fs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
        return {(str(f["check"]), str(f["layer"])): f for f in fs
                if f["level"] not in QUIET_LEVELS}  # fmt: skip

    b, a = keyed(before), keyed(after)
    out = []
    for key in [*b, *(k for k in a if k not in b)]:
        fb, fa = b.get(key), a.get(key)
        state = "gone" if fa is None else "new" if fb is None else "remains"
        f = fa or fb
        assert f is not None
        out.append({"check": key[0], "layer": key[1], "level": f["level"],
                    "title": f["title"], "state": state,
                    "cost_before": fb["cost_seconds"] if fb else None,
                    "cost_after": fa["cost_seconds"] if fa else None})  # fmt: skip
    order = {"gone": 0, "remains": 1, "new": 2}
    return sorted(out, key=lambda f: (order[f["state"]], -float(f["cost_before"] or 0)))


def changes(best: dict[str, Any], recorded: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The best settings, each with its outcomes as the after-trace recorded
    them (applied, ignored ... with counts), or why none was recorded."""
    flat: dict[str, Any] = {}
    for table, values in best.items():
        for key, value in values.items():
            if isinstance(value, dict):  # [mpiio.files."pattern"]
                for k, v in value.items():
                    flat[f"{table}.files.{json.dumps(key)}.{k}"] = v
            else:
                flat[f"{table}.{key}"] = value
    outcomes = (recorded or {}).get("outcomes", [])
    out = []
    for name, value in flat.items():
        short = name.split(".")[-1]
        seen: dict[str, int] = {}
        for e in outcomes:
            if e.get("setting") in (name, short):
                seen[e["outcome"]] = seen.get(e["outcome"], 0) + int(e.get("count") or 1)
        if seen:
            said = ", ".join(f"{o.replace('_', ' ')} x{n}" for o, n in seen.items())
        elif name.startswith("ompi."):
            said = "set for the job (Open MPI component)"
        else:
            said = "no outcome recorded (no call it applies to was made)"
        out.append({"setting": name, "value": value, "outcome": said})
    return out


def speedup(before: float, after: float, verdict: str) -> float | None:
    """The speedup ``optimize`` reports: 1.0 unless the tuning's verdict is a
    win (a difference within the noise is no speedup, whatever one pair of
    runs measured); None when a run measured no I/O."""
    if not (before > 0 and after > 0):
        return None
    return before / after if verdict == "win" else 1.0


def summary_text(doc: dict[str, Any]) -> str:
    """The terminal summary: before and after, what changed, what the findings did."""
    b, a = doc["before"], doc["after"]

    def line(s: dict[str, Any]) -> str:
        text = f"{s['io_time']:.4g} s slowest-rank I/O"
        if s.get("share") is not None and s.get("run_seconds"):
            text += f", {100 * s['share']:.1f} % of the {s['run_seconds']:.3g} s run"
        return text

    sp, ratio = doc["speedup"], doc.get("measured_ratio")
    said = f"speedup: {sp:.2f}x" if sp else "speedup: -"
    if sp == 1.0 and ratio and abs(ratio - 1.0) > 1e-9:  # no win: one pair is not a speedup
        said += f" (these two runs differ by {ratio:.2f}x, within what the default's runs vary)"
    lines = [f"before (default settings): {line(b)}",
             f"after (best settings):     {line(a)}", said]  # fmt: skip
    if doc["changes"]:
        lines.append("what changed (outcome in the after run):")
        lines += [f"  {c['setting']} = {c['value']}: {c['outcome']}" for c in doc["changes"]]
    else:
        lines.append("what changed: nothing (no setting beat the default beyond the noise)")
    for state, head in (("gone", "findings that went away"), ("remains", "findings that remain"),
                        ("new", "new findings")):  # fmt: skip
        fs = [f for f in doc["findings_diff"] if f["state"] == state]
        if not fs:
            continue
        lines.append(f"{head}:")
        for f in fs:
            cost = (f"{_cost(f['cost_before'])} s" if state == "gone"
                    else f"{_cost(f['cost_after'])} s" if state == "new"
                    else f"{_cost(f['cost_before'])} s -> {_cost(f['cost_after'])} s")
            lines.append(f"  {f['check']} ({f['layer']}, {f['level']}): {cost}")
    return "\n".join(lines)


def _cost(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def optimize(opts: TuneOptions, *, quiet: bool = False) -> dict[str, Any]:
    """Trace ``opts.command`` with the default settings, tune what its
    diagnosis points at (guided, ``opts``' trials in ``opts.out``), trace it
    with the best settings and compare: the document of ``iopilot optimize``
    (its summary printed unless ``quiet``)."""
    if not opts.command:
        raise InputError("iopilot optimize",
                         "no command given: iopilot optimize [options] -- COMMAND...")
    for name, v in (("--trials", opts.trials), ("--repeats", opts.repeats)):
        if v < 1:
            raise InputError(name, f"must be 1 or more, not {v}")
    command = absolute_command(opts.command, Path.cwd())
    out = opts.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    launch = launcher(opts.launcher)
    empty = out / "default.toml"
    empty.write_text("")

    print("iopilot optimize: tracing the program with the default settings", file=sys.stderr)
    before_doc = api.render(api.diagnose(trace(command, empty, out / "before.trace", launch,
                                               opts.timeout)), "dict")  # fmt: skip
    before = side(before_doc)
    kept = ("check", "layer", "level", "cost_seconds", "evidence")
    observed = {"findings": [{k: f.get(k) for k in kept} for f in before_doc["findings"]],
                "layers": sorted(before_doc["io_time"].get("by_layer", {})
                                 .get("all_ranks", {})),
                "nprocs": before_doc["io_time"].get("nprocs", 1),
                "layer_summaries": before_doc["layers"]}  # fmt: skip

    def space_from_diagnosis(_first_run: dict[str, Any]) -> Space:
        return generate(observed)

    # a space file given (--space) is searched as it is; else the diagnosis chooses
    guided = replace(opts, command=command, out=out, strategy="guided", objective="io")
    _, tuning = tune(guided, space_from_diagnosis, quiet=quiet)
    best_file = out / "best.toml"
    print("iopilot optimize: tracing the program with the best settings", file=sys.stderr)
    after_doc = api.render(api.diagnose(trace(command, best_file, out / "after.trace", launch,
                                              opts.timeout)), "dict")  # fmt: skip
    after = side(after_doc)
    best = tuning["best"]["settings"]
    doc = {
        "command": command,
        "before": before,
        "after": after,
        "best": best,
        "speedup": speedup(before["io_time"], after["io_time"], tuning.get("verdict", "")),
        "measured_ratio": before["io_time"] / after["io_time"] if after["io_time"] > 0 else None,
        "changes": changes(best, after_doc.get("settings")),
        "findings_diff": findings_diff(before["findings"], after["findings"]),
        "traces": {"before": str(out / "before.trace"), "after": str(out / "after.trace")},
        "tuning": tuning,
    }
    if not quiet:
        print()
        print(summary_text(doc))
    print(f"iopilot: wrote {best_file}; traces in {out}", file=sys.stderr)
    return doc


def page(doc: dict[str, Any]) -> str:
    """The before/after page of ``iopilot optimize``."""
    return render_optimize_page(doc)
