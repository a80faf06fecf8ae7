"""``iopilot bench``: benchmarks of iopilot itself and I/O kernels."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..bench import (
    accuracy,
    bigtrace,
    diagnose_speed,
    export_speed,
    html_speed,
    kernels,
    overlap,
    runtime_overhead,
    sweep,
)
from ..bench.catalog import KERNELS
from ..tune import aa, efficiency
from .common import add_json_option

# What the command does and how it is called, shown by its --help.
ABOUT: dict[str, tuple[str, str]] = {
    "bench": ("Benchmarks of iopilot itself and I/O kernels to measure a system.",
              "iopilot bench ior --ranks 4 --api mpiio --transfer 64k"),
    "bench diagnose": ("Wall time and peak memory of 'iopilot report', one fresh process "
                       "per log.",
                       "iopilot bench diagnose logs/\n"
                       "  iopilot bench diagnose --synthetic 5000000"),
    "bench bigtrace": ("Time and peak memory of 'iopilot report' on real traces of millions "
                       "of records: a C program making one-byte writes, traced, then reported "
                       "in a fresh process; also on a 10-record trace, the interpreter's floor.",
                       "iopilot bench bigtrace --records 5m\n"
                       "  iopilot bench bigtrace --records 5m,50m --dir /scratch/me --html"),
    "bench sweep": ("Run a kernel over a grid of parameters; write a table and a plot.",
                    "iopilot bench sweep ior --grid ranks=1,2,4 --grid transfer=64k,1m"),
    "bench h5bench": ("Run the VPIC-IO write and BD-CATS-IO read benchmarks of an h5bench "
                      "JSON configuration with iopilot's kernels.",
                      "iopilot bench h5bench sync-write-1d-contig-contig.json --dir /scratch/me"),
    "bench html": ("Time, memory and size of the HTML report.",
                   "iopilot bench html --synthetic 1000000"),
    "bench export": ("Time, peak memory and size of 'iopilot export perfetto', one fresh "
                     "process per trace and format, beside the time and memory of loading "
                     "the trace alone.",
                     "iopilot bench export --synthetic 5000000\n"
                     "  iopilot bench export trace-dir/ --format perfetto"),
    "bench runtime": ("Cost of tracing: nanoseconds per call, and the slowdown of an I/O "
                      "kernel.",
                      "iopilot bench runtime --repeat 7"),
    "bench tune-efficiency": ("Measure every point of a case's space, then replay each "
                              "tuning strategy against that table: the median number of "
                              "trials to come within 5 % of the best.",
                              "iopilot bench tune-efficiency --case ior --repeats 3\n"
                              "  iopilot bench tune-efficiency --reuse --out tune-eff"),
    "bench tune-aa": ("Tune programs whose I/O no setting in their space can change, many "
                      "times over, and count the wins declared: how often the tuner's "
                      "decision rule is fooled by noise.",
                      "iopilot bench tune-aa --tunings 10 --trials 8\n"
                      "  iopilot bench tune-aa --case noisy --tunings 2 --json aa.json"),
    "bench async": ("Run the epochs kernel with computation per step much longer than, "
                    "equal to and much shorter than its durable I/O per step, without and "
                    "with asynchronous I/O, and compare with the ideal overlap and with "
                    "what `iopilot advise async` predicted from the synchronous trace; at "
                    "each I/O layer of --apis, under each mpirun binding of --bindings, every "
                    "run of a scenario at a layer doing the same work.",
                    "iopilot bench async --steps 5 --size 128m --json async.json\n"
                    "  iopilot bench async --apis posix,mpiio,hdf5 --bindings default,none"),
    "bench accuracy": ("Run the corpus of programs each written with one known I/O mistake, "
                       "traced and untraced, with the mistake and fixed: whether the first "
                       "WARN/HIGH finding names the mistake, whether its advice is in the "
                       "program's language, and how its \"at stake\" compares with what the "
                       "fix saved.",
                       "iopilot bench accuracy --json accuracy.json\n"
                       "  iopilot bench accuracy --case 'hdf5-*' --no-timing"),
}  # fmt: skip


def _counts(text: str) -> list[int]:
    """"5m,50m" -> [5000000, 50000000]."""
    try:
        return [bigtrace.parse_count(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``bench`` subcommand, its benchmarks and one subcommand per kernel."""
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
    g = bsub.add_parser("bigtrace", help="time and peak memory of 'iopilot report' on real "
                        "traces of millions of records")
    g.add_argument("--records", type=_counts, default=[5_000_000], metavar="N[,N...]",
                   help="one-byte writes traced, one trace each (default 5m; k, m, g: "
                   "thousands, millions, billions)")
    g.add_argument("--repeat", type=int, default=3, help="reports per trace (default 3)")
    g.add_argument("--html", action="store_true", help="also time 'iopilot report --html'")
    g.add_argument("--dir", help="where the traces go (default: a temporary directory; "
                   "56 bytes per record)")
    for name, what in KERNELS.items():
        k = bsub.add_parser(name, help=what,
                            description=f"{what}. Options not listed here go to the kernel.")
        k.add_argument("--ranks", "-n", type=int, default=1, help="MPI ranks (default 1)")
        add_json_option(k, "the result")
        k.add_argument("--trace", metavar="DIR", help="run under the iopilot runtime")
        k.add_argument("--dir", help="working directory of the kernel (default: temporary)")
        k.add_argument("--keep", action="store_true", help="keep the temporary directory")
        if name == "ior":
            k.add_argument("--ior-json", metavar="PATH",
                           help="also write IOR's JSON summary (summaryFormat=JSON) to PATH")
    w = bsub.add_parser("sweep", help="run a kernel over a grid of parameters")
    w.add_argument("kernel", choices=sorted(KERNELS))
    w.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...",
                   help="one axis of the grid (repeatable); NAME 'ranks' or a kernel option")
    w.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="a fixed kernel option for every run (flags: NAME=1 or NAME=0)")
    w.add_argument("--repeat", type=int, default=1, metavar="K",
                   help="runs per point: medians and spreads, and wins only beyond the noise")
    w.add_argument("--out", default="sweep-output", help="where the table and plot go")
    w.add_argument("--dir", help="working directory of the kernel (default: temporary)")
    c = bsub.add_parser("h5bench", help="run the benchmarks of an h5bench JSON configuration")
    c.add_argument("config", metavar="CONFIG", help="h5bench configuration (JSON)")
    add_json_option(c, "the results")
    c.add_argument("--dir", help="working directory of the kernels (default: temporary)")
    h = bsub.add_parser("html", help="time, memory and size of the HTML report")
    h.add_argument("logs", nargs="*", metavar="LOG", help="logs or traces (default: large "
                   "shared logs when present)")
    h.add_argument("--synthetic", type=lambda v: [int(x) for x in v.split(",") if x],
                   default=[1_000_000, 10_000_000], metavar="N[,N...]",
                   help="also synthetic traces of these record counts (default 1M,10M)")
    x = bsub.add_parser("export", help="time, memory and size of 'iopilot export perfetto'")
    x.add_argument("logs", nargs="*", metavar="TRACE", help="traces or Darshan logs with DXT")
    x.add_argument("--synthetic", type=lambda v: [int(x) for x in v.split(",") if x],
                   default=[], metavar="N[,N...]",
                   help="also synthetic traces of these record counts, e.g. 5000000")
    x.add_argument("--format", action="append", choices=("perfetto", "json"),
                   help="perfetto or json (repeatable; default: both)")
    o = bsub.add_parser("runtime", help="cost of tracing: per call and on an I/O kernel")
    o.add_argument("--calls", type=int, default=2_000_000, help="tiny writes in case (a)")
    o.add_argument("--mib", type=int, default=1024, help="file size of the kernel in case (b)")
    o.add_argument("--block-kib", type=int, default=1024, help="block size of the kernel")
    o.add_argument("--repeat", type=int, default=5, help="runs of each variant; best is kept")
    o.add_argument("--dir", help="where the kernel writes (default: a temporary directory)")
    e = bsub.add_parser("tune-efficiency",
                        help="trials each tuning strategy needs, replayed on a measured table")
    e.add_argument("--case", action="append", metavar="NAME",
                   help="ior, vpicio or hacc (repeatable; default: all three)")
    e.add_argument("--repeats", type=int, default=3, metavar="K",
                   help="runs per point when measuring the table (default 3)")
    e.add_argument("--seeds", type=int, default=5, metavar="N",
                   help="replays per strategy, seeds 0..N-1 (default 5)")
    e.add_argument("--strategies", metavar="S[,S...]",
                   help="default guided,ga,random,tpe (grid also known)")
    e.add_argument("--timeout", type=float, metavar="S",
                   help="stop a run after S seconds (default 5x the default's run, >= 10 s)")
    e.add_argument("--reuse", action="store_true",
                   help="replay tables already in OUT instead of measuring them again")
    e.add_argument("--out", default="tune-efficiency", metavar="DIR",
                   help="where the tables and the JSON go (default ./tune-efficiency)")
    add_json_option(e, "the results (without --json: OUT/tune-efficiency.json)")
    n = bsub.add_parser("tune-aa", help="wins the tuner declares where no setting can win")
    n.add_argument("--case", action="append", metavar="NAME",
                   help="posix-mpi or noisy (repeatable; default: both)")
    n.add_argument("--tunings", type=int, default=10, metavar="N",
                   help="tunings per case, each a fresh study (default 10)")
    n.add_argument("--trials", type=int, default=8, help="trials per tuning (default 8)")
    n.add_argument("--repeats", type=int, default=3, help="runs of the default (default 3)")
    n.add_argument("--dir", help="where the tunings run (default: a temporary directory)")
    add_json_option(n, "every tuning's verdict")
    a = bsub.add_parser("async", help="async I/O against sync, the ideal and the advisor")
    a.add_argument("--steps", type=int, default=10,
                   help="steps per run (default 10: the last step's I/O, which nothing hides, "
                   "weighs less)")
    a.add_argument("--ranks", "-n", type=int, default=1,
                   help="MPI ranks (default 1: the I/O thread has a core of its own)")
    a.add_argument("--size", default="128m", help="bytes written per step (default 128m)")
    a.add_argument("--repeat", type=int, default=1, metavar="K",
                   help="sync, advice and async K times per row: each figure the median, "
                   "every repeat's in the JSON (default 1)")
    a.add_argument("--scenarios", type=lambda v: [x for x in v.split(",") if x],
                   default=["longer", "equal", "shorter", "overhead"], metavar="S[,S...]",
                   help="computation much longer than, equal to, much shorter than the I/O, "
                   "and none: 500 steps of one 4 KiB write (the engine's own cost)")
    a.add_argument("--bindings", type=lambda v: [x for x in v.split(",") if x],
                   default=["default", "advised", "none"], metavar="B[,B...]",
                   help="mpirun's binding for each run: default (a core a rank), advised "
                   "(--map-by slot:PE=2: a core for the I/O thread too), none (--bind-to none); "
                   "default: all three")
    a.add_argument("--apis", type=lambda v: [x for x in v.split(",") if x], default=["posix"],
                   metavar="API[,API...]",
                   help="the I/O layers the kernel writes through, each run as --api API: "
                   "posix (iopilot's engine), mpiio (non-blocking collective writes), hdf5 "
                   "(a thread makes each step's HDF5 calls); default: posix")
    a.add_argument("--dir", help="where the runs write (default: a temporary directory)")
    add_json_option(a, "the figures")
    y = bsub.add_parser("accuracy", help="first finding, advice language and at stake on "
                        "the corpus of mistake programs")
    y.add_argument("--corpus", metavar="DIR", help="the corpus (default: corpus/ of the "
                   "repository)")
    y.add_argument("--case", action="append", metavar="NAME",
                   help="run this case only (repeatable; a glob such as 'hdf5-*')")
    y.add_argument("--repeat", type=int, default=3, metavar="N",
                   help="untraced runs of each mode; the best is kept (default 3)")
    y.add_argument("--no-timing", action="store_true",
                   help="skip the untraced runs: first finding and language only")
    add_json_option(y, "every figure")
    b.set_defaults(func=cmd_bench)  # fmt: skip


def cmd_bench(args: argparse.Namespace) -> int:
    name = args.bench
    if name in KERNELS:
        return kernels.main(name, args.kernel_args, ranks=args.ranks, json_path=args.json,
                            trace=args.trace, dir=args.dir, keep=args.keep,
                            ior_json_path=getattr(args, "ior_json", None))  # fmt: skip
    if name == "h5bench":
        return kernels.h5bench_main(args.config, json_path=args.json, dir=args.dir)
    if name == "diagnose":
        return diagnose_speed.main(args.logs, repeat=args.repeat, synthetic=args.synthetic,
                                   compare=args.compare)  # fmt: skip
    if name == "bigtrace":
        return bigtrace.main(args.records, repeat=args.repeat, html=args.html, dir=args.dir)
    if name == "html":
        return html_speed.main(args.logs, synthetic=args.synthetic)
    if name == "export":
        return export_speed.main(args.logs, synthetic=args.synthetic,
                                 formats=args.format or ["perfetto", "json"])  # fmt: skip
    if name == "runtime":
        return runtime_overhead.main(calls=args.calls, mib=args.mib, block_kib=args.block_kib,
                                     repeat=args.repeat, dir=args.dir)  # fmt: skip
    if name == "sweep":
        return sweep.main(args.kernel, grid=args.grid, fixed_options=args.set,
                          repeat=args.repeat, out=args.out, dir=args.dir)  # fmt: skip
    if name == "async":
        plan = overlap.Plan(ranks=args.ranks, steps=args.steps, size=args.size,
                            scenarios=tuple(args.scenarios), dir=args.dir,
                            bindings=tuple(args.bindings), apis=tuple(args.apis),
                            repeat=args.repeat)  # fmt: skip
        return overlap.main(plan, args.json)
    if name == "accuracy":
        return accuracy.main(corpus=args.corpus, patterns=args.case, repeat=args.repeat,
                             no_timing=args.no_timing, json_path=args.json)  # fmt: skip
    if name == "tune-aa":
        return aa.main(cases=args.case, tunings=args.tunings, trials=args.trials,
                       repeats=args.repeats, dir=args.dir, json_path=args.json)  # fmt: skip
    assert name == "tune-efficiency", name
    return efficiency.main(
        cases=args.case, strategies=args.strategies.split(",") if args.strategies else None,
        repeats=args.repeats, seeds=args.seeds, timeout=args.timeout, reuse=args.reuse,
        out=Path(args.out), json_path=args.json)
