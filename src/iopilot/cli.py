"""The ``iopilot`` command line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .errors import InputError

if TYPE_CHECKING:
    from .model.scope import FileScope

EXIT_OK, EXIT_CRITICAL, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def _analyse(path: str, thresholds: dict[str, Any], only: set[str] | None,
             html: str | None = None,
             scope: FileScope | None = None) -> dict[str, Any]:  # fmt: skip
    """Load and diagnose one log (and write its HTML page); runs in a worker for many logs."""
    from . import api
    from ._alloc import keep_freed_memory

    keep_freed_memory()  # also in worker processes
    try:
        d = api.diagnose(path, thresholds=thresholds, only=only, scope=scope)
        out: dict[str, Any] = {"ok": api.render(d, "dict")}
        if html:
            out["html"] = api.write_page(d, html, phase_gap=thresholds.get("phase_gap") or None)
        return out
    except InputError as e:
        return {"error": {"path": e.path, "reason": str(e).removeprefix(f"{e.path}: ")}}
    except MemoryError:
        return {"error": {"path": path, "reason": "out of memory while reading this log"}}
    except Exception as e:  # keep other logs going; say what broke, not a traceback
        if os.environ.get("IOPILOT_DEBUG"):
            raise
        return {"error": {"path": path, "reason": f"internal error: {type(e).__name__}: {e}"}}


def cmd_report(args: argparse.Namespace) -> int:
    from . import api
    from .report import json_report, terminal

    thresholds = api.thresholds(args.config, args.set)
    only = set(args.checks.split(",")) if args.checks else None
    if only:
        unknown = only - set(api.checks())
        if unknown:
            raise InputError("--checks", f"unknown check(s): {', '.join(sorted(unknown))}")
    paths = api.inputs(args.logs)
    scope = file_scope(args)
    if args.summary or args.scheduler or args.parquet:
        return _summary(args, paths, thresholds, only, scope)
    htmls = html_targets(args.html, paths)
    jobs = max(1, min(args.jobs or os.cpu_count() or 1, len(paths)))
    if not os.environ.get("IOPILOT_DEBUG"):
        # Each log in a worker that may die alone: one log that crashes the
        # C library is one error row, never the end of the run.  One log too:
        # a damaged log can abort the library in ways no header check
        # foresees (a version string changed into another valid one); the
        # worker costs ~10 ms a run, and only the findings travel back.
        def failed(i: int, why: str) -> dict[str, Any]:
            return {"error": {"path": paths[i], "reason": why}}

        items = [(p, thresholds, only, h, scope) for p, h in zip(paths, htmls, strict=True)]
        results = api.run_isolated(_analyse, items, jobs, failed, timeout=args.timeout or None)
    else:  # in this process, so that a failure shows its traceback
        results = [_analyse(p, thresholds, only, h, scope)
                   for p, h in zip(paths, htmls, strict=True)]  # fmt: skip
    reports = [r["ok"] for r in results if "ok" in r]
    errors = [r["error"] for r in results if "error" in r]

    to_stdout = args.json == "-" or args.csv == "-"
    if args.json:
        _emit(args.json, json_report.dumps(json_report.document(reports, errors)))
    if args.csv:
        from .report import csv_report

        _emit(args.csv, csv_report.render(reports, errors))
    if not to_stdout:
        style = terminal.Style(terminal.want_color(args.color, sys.stdout))
        if not args.html or args.verbose:  # with --html the page is the report
            for r in reports:
                terminal.write(terminal.render(r, style, min_level=args.min_level,
                                               verbose=args.verbose))  # fmt: skip
        if len(paths) > 1 or args.html:
            terminal.write(terminal.render_summary(reports, errors, style))
    for r in results:
        if "html" in r:
            h = r["html"]
            sampled = " (timeline binned/sampled)" if h.get("sampled") else ""
            print(f"iopilot: wrote {h['path']} ({h['bytes'] / 2**20:.1f} MiB){sampled}",
                  file=sys.stderr)  # fmt: skip
    for e in errors:
        print(f"iopilot: error: {e['path']}: {e['reason']}", file=sys.stderr)
    if errors:
        return EXIT_BAD_INPUT
    if args.fail_on_critical and any(r["counts"]["HIGH"] for r in reports):
        return EXIT_CRITICAL
    return EXIT_OK


def _job_row(path: str, thresholds: dict[str, Any], only: set[str] | None,
             scope: FileScope | None = None) -> dict[str, Any]:  # fmt: skip
    """One log's summary row (runs in a worker process or on a Dask worker)."""
    from .report import fleet

    r = _analyse(path, thresholds, only, scope=scope)
    if "ok" in r:
        return fleet.job_row(r["ok"])
    return fleet.error_row(r["error"]["path"], r["error"]["reason"])


def _summary(args: argparse.Namespace, paths: list[str], thresholds: dict[str, Any],
             only: set[str] | None, scope: FileScope) -> int:  # fmt: skip
    """``report --summary``: one row per job, ranked by I/O core-hours."""
    from functools import partial

    from .report import fleet, json_report

    progress = fleet.Progress(len(paths))
    if args.scheduler:
        row_of = partial(_job_row, thresholds=thresholds, only=only, scope=scope)
        rows = []
        for row in fleet.rows_on_dask(paths, row_of, args.scheduler):
            rows.append(row)
            progress.step()
    elif os.environ.get("IOPILOT_DEBUG"):
        rows = [_job_row(p, thresholds, only, scope) for p in paths]
    else:  # each log in a worker that may die alone, as for the full report
        from . import api

        jobs = max(1, min(args.jobs or os.cpu_count() or 1, len(paths)))
        items = [(p, thresholds, only, scope) for p in paths]
        rows = api.run_isolated(_job_row, items, jobs,
                                lambda i, why: fleet.error_row(paths[i], why),
                                timeout=args.timeout or None, each=progress.step)  # fmt: skip
    if args.parquet:
        parts = fleet.write_parquet(rows, args.parquet)
        print(f"iopilot: wrote {len(rows):,} rows to {args.parquet} ({len(parts)} part file(s))",
              file=sys.stderr)  # fmt: skip
    if args.json:
        _emit(args.json, json_report.dumps(fleet.document(rows)))
    if args.csv:
        _emit(args.csv, fleet.render_csv(rows))
    if args.json != "-" and args.csv != "-":
        sys.stdout.write(fleet.render_terminal(rows))
    failed = [r for r in rows if r["error"]]
    for r in failed:
        print(f"iopilot: error: {r['log']}: {r['error']}", file=sys.stderr)
    return EXIT_BAD_INPUT if failed else EXIT_OK


def file_scope(args: argparse.Namespace) -> FileScope:
    """The files to analyse, from --exclude, --include-only, --no-default-excludes
    and IOPILOT_EXCLUDE."""
    from .model.scope import scope_args

    return scope_args(args.exclude, args.include_only, args.no_default_excludes)


def add_scope_options(p: argparse.ArgumentParser) -> None:
    """Options that choose the files the diagnosis is about."""
    p.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                   help="leave out files matching PATTERN (repeatable; shell-style: "
                   "'*.log', '/scratch/tmp'); IOPILOT_EXCLUDE adds more (':' or ',' "
                   "separated)")
    p.add_argument("--include-only", action="append", default=[], metavar="PATTERN",
                   help="analyse only files matching PATTERN (repeatable)")
    p.add_argument("--no-default-excludes", action="store_true",
                   help="also analyse runtime and library files (.pyc, site-packages, "
                   "*.so, /etc, /usr/share, /tmp/ompi*, /proc, /sys, /dev)")  # fmt: skip


def html_targets(html: str | None, paths: list[str]) -> list[str | None]:
    """Where each log's page goes: the given file for one log, DIR/<name>.html for many."""
    if not html:
        return [None] * len(paths)
    if len(paths) == 1 and not Path(html).is_dir():
        return [html]
    out = Path(html)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(html, f"cannot create the directory: {e.strerror}") from None
    names = [Path(p.rstrip("/")).name for p in paths]
    return [str(out / f"{n}.html") for n in names]


def _emit(target: str, text: str) -> None:
    if target == "-":
        sys.stdout.write(text)
        return
    try:
        Path(target).write_text(text)
    except OSError as e:
        raise InputError(target, f"cannot write: {e.strerror}") from None
    print(f"iopilot: wrote {target}", file=sys.stderr)


def cmd_checks(args: argparse.Namespace) -> int:
    from . import api

    REGISTRY, DEFAULTS = api.checks(), api.threshold_defaults()
    for cls in sorted(REGISTRY.values(), key=lambda c: (c.layer, c.id)):
        alias = cls.drishti or "-"
        print(f"{cls.id:<34} {cls.layer:<13} {alias:<4} {cls.summary()}")
        if args.verbose and cls.uses:
            for u in cls.uses:
                print(f"{'':<34} {u} = {DEFAULTS[u][0]}  ({DEFAULTS[u][1]})")
    if args.verbose:  # thresholds of the report as a whole (severity, listing)
        used = {u for cls in REGISTRY.values() for u in cls.uses}
        print("all checks")
        for u in (u for u in DEFAULTS if u not in used):
            print(f"{'':<34} {u} = {DEFAULTS[u][0]}  ({DEFAULTS[u][1]})")
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import diagnose_speed, html_speed, kernels, runtime_overhead, sweep

    if args.bench in kernels.KERNELS:
        return kernels.main(args, args.kernel_args)
    tools = {"diagnose": diagnose_speed, "runtime": runtime_overhead, "sweep": sweep,
             "html": html_speed}  # fmt: skip
    return tools[args.bench].main(args)


def cmd_run(args: argparse.Namespace) -> int:
    from .capture import run

    return run.main(args)


def cmd_demo(args: argparse.Namespace) -> int:
    from . import demo

    return demo.main(main, args.out, darshan=args.darshan)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="iopilot",
        description="Capture, diagnose, show and tune the I/O of HPC applications.",
    )
    p.add_argument("--version", action="version", version=f"iopilot {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser("report", help="diagnose Darshan logs and iopilot traces")
    r.add_argument("logs", nargs="+", metavar="LOG", help="log files or directories of logs")
    r.add_argument("--json", nargs="?", const="-", metavar="PATH",
                   help="write the JSON report to PATH (default: standard output)")
    r.add_argument("--csv", nargs="?", const="-", metavar="PATH",
                   help="write a CSV table of findings to PATH (default: standard output)")
    r.add_argument("--html", nargs="?", const="iopilot-report.html", metavar="PATH",
                   help="write the interactive HTML report (a directory for many logs)")
    r.add_argument("--config", metavar="TOML", help="thresholds from a TOML file")
    r.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="override one threshold (repeatable); see 'iopilot checks -v'")
    r.add_argument("--checks", metavar="ID[,ID...]", help="run only these checks")
    add_scope_options(r)
    r.add_argument("--min-level", choices=("HIGH", "WARN", "INFO", "OK"), default="OK",
                   help="hide findings below this level in the terminal report")
    r.add_argument("--fail-on-critical", action="store_true",
                   help="exit with status 1 when any HIGH finding exists (for CI pipelines)")
    r.add_argument("-v", "--verbose", action="store_true",
                   help="list every file and snippet")
    r.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    r.add_argument("-j", "--jobs", type=int, default=0,
                   help="worker processes for many logs (default: all cores)")
    r.add_argument("--timeout", type=float, default=0, metavar="SECONDS",
                   help="with many logs: give up on a log after this long (default: no limit)")
    r.add_argument("--summary", action="store_true",
                   help="one row per job (I/O seconds, share, core-hours, top finding), "
                        "ranked by I/O core-hours, and the checks that cost most hours")
    r.add_argument("--scheduler", metavar="ADDRESS",
                   help="with --summary: run on a Dask cluster (its scheduler's address, "
                        "or 'local' for this machine's cores)")
    r.add_argument("--parquet", metavar="DIR",
                   help="with --summary: also write the rows as a Parquet dataset in DIR")
    r.set_defaults(func=cmd_report)

    c = sub.add_parser("checks", help="list the checks, their Drishti codes and thresholds")
    c.add_argument("-v", "--verbose", action="store_true", help="also list thresholds")
    c.set_defaults(func=cmd_checks)

    u = sub.add_parser("run", help="trace a program (serial or MPI), then diagnose it")
    u.add_argument("--trace-dir", metavar="DIR", help="where to write the trace")
    u.add_argument("--trace-only", action="store_true", help="keep the trace, skip the report")
    u.add_argument("--max-records", type=int, metavar="N",
                   help="operation records kept per process (counters stay exact)")
    u.add_argument("--layers", metavar="L[,L...]",
                   help="trace only these layers: POSIX, STDIO, MPIIO, HDF5")
    u.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    add_scope_options(u)
    u.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND...")
    u.set_defaults(func=cmd_run)

    x = sub.add_parser("export", help="counters of a trace or Darshan log as text")
    xsub = x.add_subparsers(dest="export", required=True, metavar="WHAT")
    xc = xsub.add_parser("counters", help="every counter, one line each, as darshan-parser "
                         "prints them (module, rank, record id, counter, value, file, mount, "
                         "fs type)")
    xc.add_argument("log", metavar="TRACE-OR-LOG")
    xc.add_argument("--out", metavar="PATH", help="write to PATH (default: standard output)")
    xc.set_defaults(func=cmd_export)

    m = sub.add_parser("demo", help="diagnose a built-in example")
    m.add_argument("--out", default="demo-output", help="where to write the reports")
    m.add_argument("--darshan", action="store_true",
                   help="diagnose a Darshan log shipped with PyDarshan instead")
    m.set_defaults(func=cmd_demo)

    b = sub.add_parser("bench", help="benchmarks of iopilot itself")
    bsub = b.add_subparsers(dest="bench", required=True, metavar="BENCH")
    d = bsub.add_parser("diagnose", help="wall time and peak memory of 'iopilot report' per log")
    d.add_argument("logs", nargs="*", metavar="LOG", help="log files or directories")
    d.add_argument("--repeat", type=int, default=3, help="runs per log; the best is kept")
    d.add_argument("--synthetic", type=lambda v: [int(x) for x in v.split(",") if x],
                   default=[], metavar="N[,N...]",
                   help="also synthetic traces of these record counts, e.g. 5000000")
    d.add_argument("--compare", metavar="CMD",
                   help="also time another command per log, e.g. 'drishti'")
    from .bench.catalog import KERNELS

    for name, what in KERNELS.items():
        k = bsub.add_parser(name, help=what,
                            description=f"{what}. Options not listed here go to the kernel.")
        k.add_argument("--ranks", "-n", type=int, default=1, help="MPI ranks (default 1)")
        k.add_argument("--json", action="store_true", help="print the result as JSON")
        k.add_argument("--trace", metavar="DIR", help="run under the iopilot runtime")
        k.add_argument("--dir", help="working directory of the kernel (default: temporary)")
        k.add_argument("--keep", action="store_true", help="keep the temporary directory")
    w = bsub.add_parser("sweep", help="run a kernel over a grid of parameters")
    w.add_argument("kernel", choices=sorted(KERNELS))
    w.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...",
                   help="one axis of the grid (repeatable); NAME 'ranks' or a kernel option")
    w.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="a fixed kernel option for every run")
    w.add_argument("--out", default="sweep-output", help="where the table and plot go")
    w.add_argument("--dir", help="working directory of the kernel (default: temporary)")
    h = bsub.add_parser("html", help="time, memory and size of the HTML report")
    h.add_argument("logs", nargs="*", metavar="LOG", help="logs or traces (default: large "
                   "shared logs when present)")
    h.add_argument("--synthetic", type=lambda v: [int(x) for x in v.split(",") if x],
                   default=[1_000_000, 10_000_000], metavar="N[,N...]",
                   help="also synthetic traces of these record counts (default 1M,10M)")
    o = bsub.add_parser("runtime", help="cost of tracing: per call and on an I/O kernel")
    o.add_argument("--calls", type=int, default=2_000_000, help="tiny writes in case (a)")
    o.add_argument("--mib", type=int, default=1024, help="file size of the kernel in case (b)")
    o.add_argument("--block-kib", type=int, default=1024, help="block size of the kernel")
    o.add_argument("--repeat", type=int, default=5, help="runs of each variant; best is kept")
    o.add_argument("--dir", help="where the kernel writes (default: a temporary directory)")
    b.set_defaults(func=cmd_bench)
    _describe(p)
    return p  # fmt: skip


# What each command does and how it is called, shown by its --help.
_ABOUT: dict[str, tuple[str, str]] = {
    "report": ("Diagnose Darshan logs and iopilot trace directories: what slows the I/O, "
               "what it costs, and what to change.",
               "iopilot report run.darshan\n"
               "  iopilot report ~/.local/share/iopilot/traces/<run> --html page.html\n"
               "  iopilot report logs/ --csv findings.csv --json report.json"),
    "checks": ("List the checks, the Drishti codes they match and the thresholds they read.",
               "iopilot checks -v"),
    "run": ("Run a program (serial or under mpirun) with the iopilot runtime preloaded, "
            "then diagnose the trace it leaves.",
            "iopilot run -- ./my_app input.cfg\n"
            "  iopilot run --trace-dir /scratch/t1 -- mpirun -n 4 ./my_app"),
    "export": ("Export what a trace or a Darshan log holds as text.",
               "iopilot export counters run.darshan"),
    "export counters": ("Every counter of a trace or Darshan log, one tab-separated line "
                        "each, as darshan-parser prints them.",
                        "iopilot export counters trace-dir/ > mine.txt\n"
                        "  iopilot export counters run.darshan --out theirs.txt"),
    "demo": ("Diagnose a built-in example and write its reports.", "iopilot demo"),
    "bench": ("Benchmarks of iopilot itself and I/O kernels to measure a system.",
              "iopilot bench ior --ranks 4 --api mpiio --transfer 64k"),
    "bench diagnose": ("Wall time and peak memory of 'iopilot report', one fresh process "
                       "per log.",
                       "iopilot bench diagnose logs/\n"
                       "  iopilot bench diagnose --synthetic 5000000"),
    "bench sweep": ("Run a kernel over a grid of parameters; write a table and a plot.",
                    "iopilot bench sweep ior --grid ranks=1,2,4 --grid transfer=64k,1m"),
    "bench html": ("Time, memory and size of the HTML report.",
                   "iopilot bench html --synthetic 1000000"),
    "bench runtime": ("Cost of tracing: nanoseconds per call, and the slowdown of an I/O "
                      "kernel.",
                      "iopilot bench runtime --repeat 7"),
}  # fmt: skip


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _describe(p: argparse.ArgumentParser, path: str = "") -> None:
    """Give every command a description and examples (kernels get theirs from the catalog)."""
    for name, sp in _subparsers(p).items():
        key = f"{path} {name}".strip()
        what, example = _ABOUT.get(key, (sp.description or "", f"iopilot {key} --ranks 2"))
        sp.description = what
        sp.epilog = f"example:\n  {example}"
        sp.formatter_class = argparse.RawDescriptionHelpFormatter
        _describe(sp, key)


def _chosen(p: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command parser the command line chose, for its usage line."""
    for dest in ("command", "export", "bench"):
        sp = _subparsers(p).get(getattr(args, dest, None) or "")
        if sp is not None:
            p = sp
    return p


def cmd_export(args: argparse.Namespace) -> int:
    from . import api
    from .report.counters_text import counter_lines, header

    trace = api.load(args.log)
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout
    try:
        for line in header(trace):
            out.write(line + "\n")
        for line in counter_lines(trace):
            out.write(line + "\n")
    finally:
        if args.out:
            out.close()
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    from ._alloc import keep_freed_memory

    keep_freed_memory()
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # Options `iopilot bench KERNEL` does not know belong to the kernel.
    from .bench.catalog import KERNELS

    if getattr(args, "bench", None) in KERNELS:
        args.kernel_args = extra
    elif extra:
        _chosen(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.func(args)
    except InputError as e:
        print(f"iopilot: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
