"""What a study shows: the live progress line, the table of trials, the
convergence plot, ``best.toml`` and the JSON summary."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import settings as st
from .._progress import Progress
from ..report.tuning import render_tune_page
from .search import Record
from .study import Outcome


def label(point: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in point.items()) or "(default)"


def _fmt(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return f"{v:.4g}"


def trial_dict(rec: Record, outcome: Outcome) -> dict[str, Any]:
    return {
        "number": rec.number,
        "phase": rec.phase,
        "settings": outcome.space.settings_doc(rec.point) if rec.point else {},
        "point": rec.point,
        "objective": statistics.median(rec.runs) if rec.ok and rec.runs else None,
        "runs": rec.runs,
        "repeats": len(rec.walls),
        "spread": {"min": min(rec.runs), "max": max(rec.runs)} if rec.runs else None,
        "status": rec.status,
        "reason": rec.reason,
        "seconds": rec.walls,
    }


def summary(outcome: Outcome, *, command: list[str], objective: str, unit: str,
            maximize: bool, strategy: str, seed: int, storage: str) -> dict[str, Any]:  # fmt: skip
    """The JSON document of a study."""
    d, b = outcome.default, outcome.best

    def point(rec: Record) -> dict[str, Any]:
        return {"objective": statistics.median(rec.runs), "runs": rec.runs,
                "settings": outcome.space.settings_doc(rec.point) if rec.point else {},
                "trial": rec.number}  # fmt: skip

    # The speedup of a win, from the runs that confirmed it; 1.0 without a win.
    d_runs, b_runs = outcome.confirm_default or d.runs, outcome.confirm_best or b.runs
    dv, bv = statistics.median(d_runs), statistics.median(b_runs)
    speedup = (bv / dv if maximize else dv / bv) if dv > 0 and bv > 0 else None
    if outcome.verdict in ("within noise", "the default was best") and speedup is not None:
        speedup = 1.0
    return {
        "command": command,
        "objective": objective,
        "unit": unit,
        "direction": "maximize" if maximize else "minimize",
        "strategy": strategy,
        "seed": seed,
        "study": storage,
        "study_name": outcome.study_name,
        "noise": outcome.noise,
        "timeout": outcome.timeout,
        "default": point(d),
        "best": point(b),
        "best_candidate": point(outcome.candidate),
        "verdict": outcome.verdict,
        "confirmation": {"default": outcome.confirm_default, "best": outcome.confirm_best,
                         "p_value": outcome.p_value},
        "speedup": speedup,
        "warm_start": [
            {"study": w.study, "why": w.why, "settings": w.point, "speedup_there": w.speedup}
            for w in outcome.warm
        ],
        "stopped": outcome.stopped,
        "space": outcome.space.describe(),
        "findings": outcome.findings,
        "trials": [trial_dict(r, outcome) for r in outcome.records],
    }


def table(outcome: Outcome, unit: str) -> str:
    """One line per trial: number, status, median and spread, runs, settings, reason."""
    rows = [("#", "status", f"median ({unit})", "spread", "runs", "phase", "settings")]
    for r in outcome.records:
        med = statistics.median(r.runs) if r.ok and r.runs else None
        spread = f"{_fmt(min(r.runs))}-{_fmt(max(r.runs))}" if r.ok and len(r.runs) > 1 else "-"
        mark = " *" if r is outcome.best and r is not outcome.default else ""
        settings = label(r.point) + (f"  [{r.reason}]" if r.reason else "")
        rows.append((str(r.number), r.status + mark, _fmt(med), spread, str(len(r.walls)),
                     r.phase, settings))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(6)]
    lines = []
    for row in rows:
        lines.append("  ".join(c.ljust(w) if i in (1, 5) else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row[:6], widths, strict=True)))
                     + "  " + row[6])  # fmt: skip
    return "\n".join(lines)


def conclusion(outcome: Outcome, doc: dict[str, Any], unit: str) -> str:
    d, c = doc["default"], doc["best_candidate"]
    sp = doc["speedup"]
    head = (f"default {_fmt(d['objective'])} {unit} (runs {_fmt(min(d['runs']))}-"
            f"{_fmt(max(d['runs']))}); ")  # fmt: skip
    warm = "".join(f"started from settings that won a similar tuning ({w.why}): "
                   f"{label(w.point)}. " for w in outcome.warm)  # fmt: skip
    head = warm + head
    if outcome.verdict == "the default was best":
        return head + "no trial beat the default."
    cand = (f"best {label(outcome.candidate.point)}: {_fmt(c['objective'])} {unit} (runs "
            f"{_fmt(min(c['runs']))}-{_fmt(max(c['runs']))})")  # fmt: skip
    again = ""
    if outcome.confirm_best:
        cd, cb = outcome.confirm_default, outcome.confirm_best
        again = (f"; run again {len(cb)} times each, interleaved: default "
                 f"{_fmt(min(cd))}-{_fmt(max(cd))}, best {_fmt(min(cb))}-{_fmt(max(cb))} "
                 f"(chance it is noise {outcome.p_value:.3f})")  # fmt: skip
    if outcome.verdict == "within noise":
        return head + cand + again + ": within the noise, not a win; no setting helps."
    return (head + cand + again + (f", {sp:.2f}x the default" if sp else "")
            + f" ({outcome.verdict}).")  # fmt: skip


def write_best(outcome: Outcome, path: Path, command: list[str]) -> None:
    doc = outcome.space.settings_doc(outcome.best.point) if outcome.best.point else {}
    st.dump(doc, path)
    note = ("# iopilot tune: the best settings for\n#   " + " ".join(command)
            + f"\n# apply with: iopilot run --settings {path.name} -- COMMAND\n")
    if not doc:
        note += "# (no setting beat the default beyond the noise)\n"
    path.write_text(note + path.read_text())


def plot(outcome: Outcome, path: Path, unit: str, maximize: bool) -> bool:
    """Best objective so far against the trial number, each trial's median as a
    dot, failures as crosses; False when matplotlib is missing."""
    try:
        import matplotlib  # lazy: see pyplot below
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: 0.8 s to import, for the plot only

    xs, ys, best_line, fails = [], [], [], []
    best: float | None = None
    for i, r in enumerate(outcome.records, 1):
        if r.ok and r.runs:
            v = statistics.median(r.runs)
            xs.append(i)
            ys.append(v)
            if len(r.runs) >= len(outcome.default.runs) and (
                    best is None or (v > best if maximize else v < best)):
                best = v
        else:
            fails.append(i)
        best_line.append(best)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(range(1, len(best_line) + 1), best_line, drawstyle="steps-post", color="#1f77b4",
            label="best so far (median)")  # fmt: skip
    ax.scatter(xs, ys, color="#7f7f7f", s=18, label="trial median", zorder=3)
    if fails:
        top = max(ys) if ys else 1.0
        ax.scatter(fails, [top] * len(fails), marker="x", color="#d62728", label="failed")
    ax.set_xlabel("trial")
    ax.set_ylabel(unit)
    ax.set_title("iopilot tune: convergence")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def page(doc: dict[str, Any]) -> str:
    """The study's HTML page: its outcome and the interactive convergence plot."""
    return render_tune_page(doc)


def tell(progress: Progress, unit: str) -> Callable[[Record, Record | None, int], None]:
    """What the study calls after each trial: its line, the best so far as the note."""

    def told(rec: Record, best: Record | None, n: int) -> None:
        got = (f"{_fmt(statistics.median(rec.runs))} {unit}" if rec.ok
               else f"failed: {rec.reason}")  # fmt: skip
        note = (f"best {_fmt(statistics.median(best.runs))} {unit} "
                f"({label(best.point)})") if best is not None else ""  # fmt: skip
        progress.update(n, line=f"[{n}/{progress.total}] {label(rec.point)}: {got}", note=note)

    return told
