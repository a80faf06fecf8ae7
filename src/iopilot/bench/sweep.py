"""``iopilot bench sweep``: a kernel over a grid of parameters, as a table and a plot.

    iopilot bench sweep ior --grid ranks=1,2,4 --grid transfer=64k,1m \\
        --grid api=posix,mpiio --set block=4m --set fpp=0,1 ...

Each axis is ``NAME=V1,V2,...``; ``ranks`` is the number of MPI ranks, any
other name is a kernel option (``--NAME VALUE``; for flags use 0/1).  The
results go to ``OUT/sweep.csv`` and ``OUT/sweep.png`` (bandwidth lines: the
first axis across, one line per combination of the others).
"""

from __future__ import annotations

import csv
import itertools
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import InputError
from .kernels import run_kernel


def parse_axes(items: list[str], *, single: bool = False) -> list[tuple[str, list[str]]]:
    axes = []
    for item in items:
        if "=" not in item:
            raise InputError("--grid" if not single else "--set", f"expected NAME=VALUES: {item!r}")
        name, values = item.split("=", 1)
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not name or not vals:
            raise InputError("--grid", f"empty name or values in {item!r}")
        if single and len(vals) != 1:
            raise InputError("--set", f"one value only: {item!r}")
        axes.append((name.strip(), vals))
    return axes


def kernel_args(point: dict[str, str]) -> list[str]:
    args: list[str] = []
    for name, value in point.items():
        if name == "ranks":
            continue
        if value in ("0", "1", "true", "false", "on", "off"):
            # Flags: present or absent.
            if value in ("1", "true", "on"):
                args.append(f"--{name}")
        else:
            args += [f"--{name}", value]
    return args


def main(args: Any) -> int:
    axes = parse_axes(args.grid)
    if not axes:
        raise InputError("iopilot bench sweep", "give at least one --grid NAME=V1,V2,...")
    fixed = dict((k, v[0]) for k, v in parse_axes(args.set, single=True))
    points = [dict(zip([a[0] for a in axes], combo, strict=True))
              for combo in itertools.product(*[a[1] for a in axes])]  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="iopilot-sweep-"))
    work.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    try:
        for i, point in enumerate(points, 1):
            full = {**fixed, **point}
            label = " ".join(f"{k}={v}" for k, v in point.items())
            print(f"[{i}/{len(points)}] {args.kernel} {label} ...", end="", flush=True,
                  file=sys.stderr)  # fmt: skip
            ranks = int(full.get("ranks", 1))
            row: dict[str, Any] = dict(point)
            try:
                res = run_kernel(args.kernel, ranks, kernel_args(full), cwd=work)
            except InputError as e:
                print(f" failed: {e.reason}", file=sys.stderr)
                row["error"] = e.reason
                rows.append(row)
                continue
            s = res["summary"]
            row["write_mib_s"] = round(s["write"]["max_mib_s"], 2) if "write" in s else ""
            row["read_mib_s"] = round(s["read"]["max_mib_s"], 2) if "read" in s else ""
            row["verified"] = s["verified"]
            rows.append(row)
            w, r = row["write_mib_s"], row["read_mib_s"]
            print(f" write {w} MiB/s, read {r} MiB/s", file=sys.stderr)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    table = out / "sweep.csv"
    columns = [a[0] for a in axes] + ["write_mib_s", "read_mib_s", "verified", "error"]
    with open(table, "w", newline="") as f:
        w = csv.DictWriter(f, columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    plot = out / "sweep.png"
    _plot(rows, axes, plot, args.kernel)
    print(f"iopilot: {len(rows)} runs; table {table}, plot {plot}", file=sys.stderr)
    return 0 if all("error" not in r for r in rows) else 1


def _plot(rows: list[dict[str, Any]], axes: list[tuple[str, list[str]]], path: Path,
          kernel: str) -> None:  # fmt: skip
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    x_name, x_values = axes[0]
    others = [a[0] for a in axes[1:]]
    fig, panels = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    for panel, metric, title in ((panels[0], "write_mib_s", "write"),
                                 (panels[1], "read_mib_s", "read")):  # fmt: skip
        groups: dict[tuple[str, ...], list[tuple[int, float]]] = {}
        for r in rows:
            if r.get(metric) in ("", None) or "error" in r:
                continue
            key = tuple(str(r[o]) for o in others)
            groups.setdefault(key, []).append((x_values.index(str(r[x_name])), float(r[metric])))
        for key, pts in sorted(groups.items()):
            pts.sort()
            label = ", ".join(f"{o}={v}" for o, v in zip(others, key, strict=True)) or kernel
            panel.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        panel.set_title(f"{kernel}: {title} bandwidth")
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
