"""``iopilot bench sweep``: a kernel over a grid of parameters, as a table, a
plot and a recommendation.

    iopilot bench sweep ior --grid transfer=64k,1m --grid api=posix,mpiio \\
        --grid ranks=1,2 --set block=16m --set fsync=1 --repeat 3 --out study1

Each axis is ``NAME=V1,V2,...``; ``ranks`` is the number of MPI ranks, any
other name is a kernel option.  Values are typed by the kernel's own option
table (``KERNEL --list-options``): a flag takes 0/1 (or true/false, yes/no,
on/off), any other option takes its value as written, so ``--set
iterations=1`` is ``--iterations 1``.  Names and values are checked before the
first run.

Axes are of two kinds.  *Sizes* (numeric options: block, transfer, particles,
ranks...) describe the work; *mechanisms* (flags and word-valued options:
api, layout, collective, fpp...) describe how it is done.  For every
combination of sizes the sweep names the mechanism with the best median
bandwidth, its margin over the next one and the spread of both over the
repeats; a margin the spread covers is not called a win.

Outputs: ``OUT/sweep.csv`` (one row per point), ``OUT/sweep.json`` (the
fixed settings, the axes, the rows and the recommendations) and
``OUT/sweep.png`` (bandwidth lines: the first axis across, one line per
combination of the others).
"""

from __future__ import annotations

import csv
import itertools
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..errors import InputError
from .kernels import KernelFailed, kernel_options, run_kernel

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
METRICS = (("write", "write_mib_s"), ("read", "read_mib_s"))
_NUMBER = re.compile(r"^\d+(\.\d+)?[kmgtKMGT]?$")


def parse_axes(items: list[str], *, single: bool = False) -> list[tuple[str, list[str]]]:
    opt = "--set" if single else "--grid"
    axes = []
    for item in items:
        if "=" not in item:
            raise InputError(opt, f"expected NAME=VALUE{'' if single else 'S'}: {item!r}")
        name, values = item.split("=", 1)
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not name.strip() or not vals:
            raise InputError(opt, f"empty name or value in {item!r}")
        if single and len(vals) != 1:
            raise InputError(opt, f"one value only: {item!r}")
        axes.append((name.strip(), vals))
    names = [a[0] for a in axes]
    if len(set(names)) != len(names):
        raise InputError(opt, f"a name given twice: {', '.join(sorted(names))}")
    return axes


def check_point(kernel: str, point: dict[str, str], opt: str) -> None:
    """Every name is ``ranks`` or one of the kernel's options; flags get a truth value."""
    valued, flags = kernel_options(kernel)
    for name, value in point.items():
        if name == "ranks":
            if not value.isdigit() or int(value) < 1:
                raise InputError(opt, f"ranks must be a whole number >= 1, not {value!r}")
        elif name in flags:
            if value.lower() not in TRUE + FALSE:
                raise InputError(opt, f"{name} is a flag of {kernel}: give 1 or 0, not {value!r}")
        elif name not in valued:
            known = ", ".join(sorted(valued | flags))
            raise InputError(opt, f"{kernel} has no option --{name} (it has: ranks, {known})")


def kernel_args(kernel: str, point: dict[str, str]) -> list[str]:
    """The kernel's command line for one point (``ranks`` goes to mpirun)."""
    _, flags = kernel_options(kernel)
    args: list[str] = []
    for name, value in point.items():
        if name == "ranks":
            continue
        if name in flags:
            if value.lower() in TRUE:
                args.append(f"--{name}")
        else:
            args += [f"--{name}", value]
    return args


def mechanism_axes(kernel: str, axes: list[tuple[str, list[str]]]) -> list[str]:
    """Axes that choose how the I/O is done (flags, words), not how much."""
    _, flags = kernel_options(kernel)
    return [name for name, values in axes
            if name in flags or not all(_NUMBER.match(v) for v in values)]  # fmt: skip


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def recommend(rows: list[dict[str, Any]], axes: list[tuple[str, list[str]]],
              mechanisms: list[str], repeat: int) -> list[dict[str, Any]]:  # fmt: skip
    """Per combination of the size axes and per metric: the best mechanism."""
    mech = mechanisms or [a[0] for a in axes]  # no mechanism axis: the best point
    sizes = [a[0] for a in axes if a[0] not in mech]
    out: list[dict[str, Any]] = []
    for key, group in itertools.groupby(
        sorted((r for r in rows if "error" not in r), key=lambda r: [r[s] for s in sizes]),
        key=lambda r: tuple(r[s] for s in sizes),
    ):
        group = list(group)
        for phase, metric in METRICS:
            cands = [(r, r[f"{metric}_runs"]) for r in group if r.get(f"{metric}_runs")]
            if not cands:
                continue
            cands.sort(key=lambda c: statistics.median(c[1]), reverse=True)
            best, runs = cands[0]
            rec: dict[str, Any] = {
                "sizes": dict(zip(sizes, key, strict=True)),
                "phase": phase,
                "best": {m: best[m] for m in mech},
                "mib_s": _spread(runs),
            }
            if len(cands) > 1:
                second, runs2 = cands[1]
                b, s = statistics.median(runs), statistics.median(runs2)
                rec["runner_up"] = {m: second[m] for m in mech}
                rec["runner_up_mib_s"] = _spread(runs2)
                rec["margin"] = (b - s) / s if s > 0 else None
                if repeat < 2:
                    rec["verdict"] = "one run each: noise unknown (use --repeat 3)"
                elif min(runs) > max(runs2):
                    rec["verdict"] = "win: every run of the best beat every run of the next"
                else:
                    rec["verdict"] = "within noise: the runs of the two overlap"
            out.append(rec)
    return out


def _label(d: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in d.items())


def describe(rec: dict[str, Any]) -> str:
    """One line per recommendation, in plain words with the figures."""
    where = _label(rec["sizes"]) or "all points"
    b = rec["mib_s"]
    line = (f"{where}: {rec['phase']} best with {_label(rec['best'])}: "
            f"{b['median']:.1f} MiB/s (runs {b['min']:.1f}-{b['max']:.1f})")  # fmt: skip
    if "runner_up" in rec:
        s = rec["runner_up_mib_s"]
        margin = f"{100 * rec['margin']:+.0f} %" if rec["margin"] is not None else "n/a"
        line += (f", {margin} over {_label(rec['runner_up'])} {s['median']:.1f} MiB/s "
                 f"(runs {s['min']:.1f}-{s['max']:.1f}); {rec['verdict']}")  # fmt: skip
    return line


def _clock(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m}:{s:02d}"


def main(kernel: str, *, grid: list[str], fixed_options: list[str] | None = None,
         repeat: int = 1, out: str = "sweep-output", dir: str | None = None) -> int:
    """``iopilot bench sweep``: run ``kernel`` at every point of ``grid``
    (with ``fixed_options``), ``repeat`` times each; the table and plot go to ``out``."""
    axes = parse_axes(grid)
    if not axes:
        raise InputError("iopilot bench sweep", "give at least one --grid NAME=V1,V2,...")
    fixed = {k: v[0] for k, v in parse_axes(fixed_options or [], single=True)}
    both = set(fixed) & {a[0] for a in axes}
    if both:
        raise InputError("--set", f"also a --grid axis: {', '.join(sorted(both))}")
    if repeat < 1:
        raise InputError("--repeat", f"must be >= 1, not {repeat}")
    check_point(kernel, fixed, "--set")
    for name, values in axes:
        for v in values:
            check_point(kernel, {name: v}, "--grid")
    mechanisms = mechanism_axes(kernel, axes)
    points = [dict(zip([a[0] for a in axes], combo, strict=True))
              for combo in itertools.product(*[a[1] for a in axes])]  # fmt: skip
    where = Path(out)
    where.mkdir(parents=True, exist_ok=True)
    work = Path(dir) if dir else Path(tempfile.mkdtemp(prefix="iopilot-sweep-"))
    work.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    runs_total, runs_done, started = len(points) * repeat, 0, time.monotonic()
    try:
        for i, point in enumerate(points, 1):
            full = {**fixed, **point}
            print(f"[{i}/{len(points)}] {kernel} {_label(point)} ...", end="", flush=True,
                  file=sys.stderr)  # fmt: skip
            row: dict[str, Any] = {**point, **{f"set:{k}": v for k, v in fixed.items()}}
            t0 = time.monotonic()
            verified = []
            for n in range(repeat):
                runs_done += 1
                try:
                    res = run_kernel(kernel, int(full.get("ranks", 1)),
                                     kernel_args(kernel, full), cwd=work)  # fmt: skip
                except KernelFailed as e:
                    row["error"] = e.reason
                    runs_total -= repeat - n - 1  # the point's other runs are not made
                    break
                s = res["summary"]
                verified.append(s["verified"])
                for phase, metric in METRICS:
                    if phase in s:
                        row.setdefault(f"{metric}_runs", []).append(s[phase]["max_mib_s"])
            row["seconds"] = round(time.monotonic() - t0, 3)
            for _, metric in METRICS:
                runs = row.get(f"{metric}_runs")
                if runs and "error" not in row:
                    sp = _spread(runs)
                    row[metric] = round(sp["median"], 2)
                    row[f"{metric}_min"], row[f"{metric}_max"] = (round(sp["min"], 2),
                                                                  round(sp["max"], 2))  # fmt: skip
            row["verified"] = (None if not verified or all(v is None for v in verified)
                               else all(v is not False for v in verified))  # fmt: skip
            rows.append(row)
            elapsed = time.monotonic() - started
            eta = elapsed / runs_done * (runs_total - runs_done)
            got = (f"failed: {row['error']}" if "error" in row else
                   f"write {row.get('write_mib_s', '-')} MiB/s, read {row.get('read_mib_s', '-')} "
                   "MiB/s")  # fmt: skip
            print(f" {got} ({row['seconds']:.1f} s; {_clock(elapsed)} elapsed, "
                  f"ETA {_clock(eta)})", file=sys.stderr)  # fmt: skip
    finally:
        if not dir:
            shutil.rmtree(work, ignore_errors=True)
    recs = recommend(rows, axes, mechanisms, repeat)
    table = where / "sweep.csv"
    columns = ([a[0] for a in axes] + [f"set:{k}" for k in fixed]
               + [f"{m}{x}" for _, m in METRICS for x in ("", "_min", "_max")]
               + ["verified", "seconds", "error"])  # fmt: skip
    with open(table, "w", newline="") as f:
        w = csv.DictWriter(f, columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    doc = {"kernel": kernel, "fixed": fixed, "axes": dict(axes), "mechanisms": mechanisms,
           "repeat": repeat, "rows": rows, "recommendations": recs}  # fmt: skip
    (where / "sweep.json").write_text(json.dumps(doc, indent=2) + "\n")
    plot = where / "sweep.png"
    _plot(rows, axes, plot, kernel)
    for rec in recs:
        print(describe(rec))
    print(f"iopilot: {len(rows)} points x {repeat} run(s); table {table}, plot {plot}, "
          f"details {where / 'sweep.json'}", file=sys.stderr)  # fmt: skip
    return 0 if all("error" not in r for r in rows) else 1


# Ten colours and ten markers: every line differs from the others in both
# for up to ten lines, and in at least one of them for up to a hundred.
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
           "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")  # fmt: skip
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<")


def line_style(k: int) -> tuple[str, str]:
    """Colour and marker of the k-th line (no pair repeats below 100 lines)."""
    return COLOURS[k % len(COLOURS)], MARKERS[(k + k // len(COLOURS)) % len(MARKERS)]


def _plot(rows: list[dict[str, Any]], axes: list[tuple[str, list[str]]], path: Path,
          kernel: str) -> None:  # fmt: skip
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt  # lazy: 0.8 s to import, for the plot only

    x_name, x_values = axes[0]
    others = [a[0] for a in axes[1:]]
    fig, panels = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    for panel, (title, metric) in zip(panels, METRICS, strict=True):
        groups: dict[tuple[str, ...], list[tuple[int, float]]] = {}
        for r in rows:
            if r.get(metric) in ("", None) or "error" in r:
                continue
            key = tuple(str(r[o]) for o in others)
            groups.setdefault(key, []).append((x_values.index(str(r[x_name])), float(r[metric])))
        for k, (key, pts) in enumerate(sorted(groups.items())):
            pts.sort()
            colour, marker = line_style(k)
            label = ", ".join(f"{o}={v}" for o, v in zip(others, key, strict=True)) or kernel
            panel.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=colour,
                       label=label)  # fmt: skip
        panel.set_title(f"{kernel}: {title} bandwidth (median)")
        panel.set_xticks(range(len(x_values)), x_values)
        panel.set_xlabel(x_name)
        panel.set_ylabel("MiB/s")
        panel.grid(alpha=0.3)
    handles, labels = panels[0].get_legend_handles_labels()
    if labels:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8)
        fig.subplots_adjust(bottom=0.28)
    fig.savefig(path, dpi=110)
    plt.close(fig)
