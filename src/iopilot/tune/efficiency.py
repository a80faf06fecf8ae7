"""``iopilot bench tune-efficiency``: how many trials each search strategy
needs to come within 5 % of the best point of a space.

For a case (a kernel command and a fixed space) every point of the space is
first measured (the median of ``--repeats`` runs, through the objective code
``iopilot tune`` uses), and the table is written (``table.json``,
``table.csv``).  Then each strategy is replayed for several seeds against the
table: the same study and search code as ``iopilot tune``, with only the
measurement replaced by a look-up (a point's runs are handed out in turn, so
the noise rule sees the measured spread).  A replay's score is the number of
the first trial (the default is trial 1) whose measured median is within 5 %
of the exhaustive best; the median over the seeds is reported per strategy
and case.  A replay that never gets there (guided may stop early) counts as
not reached.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from .._record import record
from ..errors import InputError
from ..kernel_results import KERNEL_DIR
from ..outfile import emit
from .launch import launcher
from .objective import Run, measure
from .search import STRATEGIES as KNOWN
from .space import Space, from_dict, point_key
from .study import Options, Study, observed

WITHIN = 0.05  # "close to the best": within 5 % of its median
STRATEGIES = ("guided", "ga", "random", "tpe")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]

_ROMIO = '{"ompi.io" = "romio321"}'
_OMPIO_ROMIO = f"""\
[ompi.io]
values = ["ompio", "romio321"]
default = "ompio"
[ompi.fcoll]
values = ["vulcan", "dynamic", "dynamic_gen2", "individual"]
when = {{"ompi.io" = "ompio"}}
[mpiio.romio_cb_write]
values = ["enable", "disable", "automatic"]
default = "automatic"
when = {_ROMIO}
[mpiio.romio_ds_write]
values = ["enable", "disable", "automatic"]
default = "automatic"
when = {_ROMIO}
"""


@record(frozen=True)
class Case:
    """A program and the space every point of which is measured."""

    name: str
    what: str
    command: tuple[str, ...]  # kernel names are resolved in build/kernels
    space: str  # TOML
    ranks: int = 4
    # a case whose tuning this one may start from (warm start): its winner is
    # tried right after the default, and the replays count that column too
    warm_from: str = ""


CASES = {
    "ior": Case("ior", "IOR, 4 ranks, MPI-IO collective 4 KiB transfers, 8 MiB block, write",
                ("ior", "--api", "mpiio", "--collective", "--transfer", "4k", "--block", "8m",
                 "--write"),
                _OMPIO_ROMIO + f"""\
[mpiio.cb_buffer_size]
values = ["1m", "16m"]
when = {_ROMIO}
"""),  # 5 + 3 x 3 x 3 = 32 points (a parameter without a default may also be unset)
    "vpicio": Case("vpicio", "HDF5 VPIC-IO, 4 ranks, collective",
                   ("vpicio", "--particles", "131072", "--steps", "2", "--collective"),
                   _OMPIO_ROMIO.replace('"dynamic_gen2", ', "").split("[mpiio.romio_ds")[0]
                   + """\
[hdf5.alignment]
values = ["1m"]
[hdf5.coll_metadata_ops]
values = [true, false]
default = false
"""),  # (4 + 3) x 2 x 2 = 28 points
    "hacc": Case("hacc", "HACC-IO, 4 ranks, MPI-IO layout",
                 ("hacc", "--layout", "mpiio", "--particles", "262144", "--collective"),
                 _OMPIO_ROMIO + f"""\
[mpiio.cb_nodes]
values = [1, 4]
when = {_ROMIO}
"""),  # 5 + 27 = 32 points
}
# The ior case with another block size: a tuning of it may start from what
# won for the first.  (At 2 ranks each rank has a core of its own here and the
# default is already near the best: nothing to carry over.)
CASES["ior-4m"] = Case(
    "ior-4m", CASES["ior"].what.replace("8 MiB block", "4 MiB block"),
    tuple(a.replace("8m", "4m") for a in CASES["ior"].command), CASES["ior"].space,
    warm_from="ior")  # fmt: skip


# -- the table ----------------------------------------------------------------------------


def canonical(space: Space, point: dict[str, Any]) -> dict[str, Any]:
    """A point without the parameters set to their default: what the system
    uses when unset, so the same run (guided leaves them unset, the others set them)."""
    return {k: v for k, v in space.clean(point).items() if v != space.by_name[k].default}


def all_points(space: Space) -> list[dict[str, Any]]:
    """Every point a strategy can propose, canonical: each parameter whose
    condition holds unset (its default) or set to one of its other values."""
    points: list[dict[str, Any]] = [{}]
    for p in space.params:
        nxt = []
        for pt in points:
            nxt.append(pt)
            if space.active(p, pt):
                nxt += [{**pt, p.name: v} for v in p.domain() if v != p.default]
        points = nxt
    return points


def table_space(table: dict[str, Any]) -> Space:
    return from_dict(tomllib.loads(table["space"]), f"case {table['case']}")


def table_index(table: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The table's rows by the key of their canonical point."""
    space = table_space(table)
    return {point_key(canonical(space, r["point"])): r for r in table["points"]}


def best_value(table: dict[str, Any]) -> float:
    """The exhaustive best: the lowest median of a point that worked."""
    ok = [r["median"] for r in table["points"] if r["status"] == "ok"]
    if not ok:
        raise InputError("tune-efficiency", "no point of the table worked")
    return min(ok)


def measure_table(case: Case, repeats: int, timeout: float | None = None) -> dict[str, Any]:
    """Every point of the case's space (and the default), ``repeats`` runs each,
    through the objective code of ``iopilot tune``; a line on stderr per point."""
    local = launcher("local")
    space = from_dict(tomllib.loads(case.space), f"case {case.name}")
    command = [*MPIRUN, str(case.ranks), str(KERNEL_DIR / case.command[0]), *case.command[1:]]
    points = all_points(space)
    rows: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="iopilot-tune-eff-") as tmp:
        for i, point in enumerate(points):
            doc = space.settings_doc(point) if point else {}
            runs: list[float] = []
            walls: list[float] = []
            reason = ""
            for k in range(repeats):
                r = measure(command, doc, "io", Path(tmp) / f"p{i}-r{k}", launch=local,
                            timeout=timeout, keep_findings=not point and k == 0)  # fmt: skip
                walls.append(r.seconds)
                if not r.ok:
                    reason = r.reason
                    break  # a failing point is not run again: it fails in tuning too
                assert r.value is not None
                runs.append(r.value)
                if not point and k == 0:
                    extra = observed(r)
                    # the default's wall time sets the others' timeout, as in tuning
                    timeout = timeout or max(10.0, 5 * r.seconds)
            row = {"point": point, "runs": runs, "walls": walls,
                   "median": statistics.median(runs) if runs and not reason else None,
                   "status": "failed" if reason else "ok", "reason": reason}  # fmt: skip
            rows.append(row)
            got = f"{row['median']:.4g} s" if row["median"] is not None else reason
            label = " ".join(f"{k}={v}" for k, v in point.items()) or "(default)"
            print(f"[{case.name} {i + 1}/{len(points)}] {label}: {got}", file=sys.stderr,
                  flush=True)  # fmt: skip
    if rows[0]["status"] != "ok":
        raise InputError(" ".join(command), f"the default run failed: {rows[0]['reason']}")
    return {"case": case.name, "what": case.what, "command": command, "space": case.space,
            "repeats": repeats, "objective": "io", "observed": extra, "points": rows}  # fmt: skip


def write_table(table: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{table['case']}-table.json").write_text(json.dumps(table, indent=2) + "\n")
    with (out / f"{table['case']}-table.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["point", "median_s", "runs_s", "status", "reason"])
        for r in table["points"]:
            label = " ".join(f"{k}={v}" for k, v in r["point"].items()) or "(default)"
            w.writerow([label, r["median"], " ".join(f"{v:.6g}" for v in r["runs"]),
                        r["status"], r["reason"]])  # fmt: skip


# -- the replay ---------------------------------------------------------------------------


def replay(table: dict[str, Any], strategy: str, seed: int, trials: int | None = None,
           storage: Any = None, warm: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """The points ``strategy`` measures, in order, when every measurement is
    the table's: the study of ``iopilot tune`` with a look-up for a run.  The
    study goes in ``storage`` (default: a new one in memory); with ``warm``,
    it starts from the winners of the similar studies already there."""
    import optuna  # lazy: 0.4 s to import, for the replays only (not for a table)

    space = table_space(table)
    rows = table_index(table)
    handed: dict[str, int] = {}  # runs of each point handed out so far

    class TableStudy(Study):
        def _measure_point(self, point, n, runs, timeout, keep_findings=False,
                           more=None):  # type: ignore[no-untyped-def]  # fmt: skip
            key = point_key(canonical(space, point))
            row = rows.get(key)
            if row is None:
                raise InputError("tune-efficiency", f"the table has no point {point}")
            if row["status"] != "ok":
                return [Run(None, 0.0, row["reason"])], row["reason"]
            out: list[Run] = []
            while True:
                k = handed.get(key, 0)
                handed[key] = k + 1
                out.append(Run(row["runs"][k % len(row["runs"])], 0.0))
                if keep_findings and len(out) == 1:
                    obs = table.get("observed", {})
                    out[0].findings = obs.get("findings", [])
                    out[0].io = {"by_layer": {"all_ranks": dict.fromkeys(obs.get("layers", []),
                                                                         1.0)},
                                 "nprocs": obs.get("nprocs", 1)}  # fmt: skip
                values = [r.value for r in out if r.value is not None]
                if len(out) >= runs or (more is not None and not more(values)):
                    return out, ""

    repeats = int(table.get("repeats", 1))
    with tempfile.TemporaryDirectory(prefix="iopilot-replay-") as tmp:
        # the table's command: the job's features (its program) are what a warm start matches
        command = list(table.get("command") or [f"(table {table['case']})"])
        opts = Options(command=command, objective="io", strategy=strategy,
                       trials=trials or len(rows), repeats=repeats, seed=seed, timeout=None,
                       storage=storage or optuna.storages.InMemoryStorage(),  # type: ignore[arg-type]
                       work=Path(tmp), study_name=f"replay-{table['case']}-{strategy}-{seed}",
                       warm_from="" if warm else None)  # fmt: skip
        outcome = TableStudy(opts, lambda _observed: space, _no_launch).run()
    return [{"point": r.point, "median": rows[point_key(canonical(space, r.point))]["median"],
             "phase": r.phase} for r in outcome.records]  # fmt: skip


def _no_launch(*_args: Any) -> Any:
    raise AssertionError("a replay runs nothing")


def trials_to_best(proposed: list[dict[str, Any]], best: float,
                   within: float = WITHIN) -> int | None:  # fmt: skip
    """The number (from 1: the default) of the first trial whose table median
    is within ``within`` of ``best``; None when none is."""
    for i, p in enumerate(proposed, 1):
        if p["median"] is not None and p["median"] <= best * (1 + within):
            return i
    return None


def median_trials(counts: list[int | None]) -> float | None:
    """The median over seeds, a replay that never got there counting as
    infinitely many; None when the median itself is such a replay."""
    v = statistics.median([math.inf if c is None else c for c in counts])
    return None if math.isinf(v) else float(v)


def evaluate(table: dict[str, Any], strategies: tuple[str, ...] | list[str] = STRATEGIES,
             seeds: int = 5, source: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """Per strategy: trials to within 5 % of the best for each seed, and their
    median.  With a ``source`` table, also ``warm``: guided on this table
    after guided on the source (same seed) in the same store."""
    import optuna  # lazy: 0.4 s to import, for the replays only (not for a table)

    best = best_value(table)
    out: dict[str, Any] = {"case": table["case"], "points": len(table["points"]),
                           "best": best, "strategies": {}}  # fmt: skip
    for s in strategies:
        counts = [trials_to_best(replay(table, s, seed), best) for seed in range(seeds)]
        out["strategies"][s] = {"per_seed": counts, "median": median_trials(counts)}
    if source is not None:
        counts = []
        for seed in range(seeds):
            store = optuna.storages.InMemoryStorage()
            replay(source, "guided", seed, storage=store)
            counts.append(trials_to_best(replay(table, "guided", seed, storage=store,
                                                warm=True), best))  # fmt: skip
        out["strategies"]["warm"] = {"per_seed": counts, "median": median_trials(counts),
                                     "from": source["case"]}  # fmt: skip
    return out


def format_results(results: list[dict[str, Any]], strategies: list[str]) -> str:
    head = ["case", "points", "best (s)", *strategies]
    rows = [head]
    for r in results:
        cells = []
        for s in strategies:
            if s not in r["strategies"]:
                cells.append("-")
                continue
            m = r["strategies"][s]["median"]
            cells.append(f">{r['points']}" if m is None else f"{m:g}")
        rows.append([r["case"], str(r["points"]), f"{r['best']:.4g}", *cells])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) if i else c.ljust(w)
                               for i, (c, w) in enumerate(zip(row, widths, strict=True)))
                     for row in rows)  # fmt: skip


def main(*, cases: list[str] | None = None, strategies: list[str] | None = None,
         repeats: int = 3, seeds: int = 5, timeout: float | None = None, reuse: bool = False,
         out: Path = Path("tune-efficiency"), json_path: str | None = None) -> int:
    """``iopilot bench tune-efficiency``: measure (or ``reuse``) each case's
    table in ``out``, replay the strategies, print the results and write them
    as JSON to ``json_path`` (``-``: standard output; default in ``out``)."""
    cases = list(cases or CASES)
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise InputError("--case", f"unknown case {unknown[0]!r}",
                         f"known: {', '.join(CASES)}")  # fmt: skip
    strategies = list(strategies or STRATEGIES)
    bad = [s for s in strategies if s not in KNOWN]
    if bad:
        raise InputError("--strategies", f"unknown strategy {bad[0]!r}",
                         f"known: {', '.join(KNOWN)}")  # fmt: skip
    tables: dict[str, dict[str, Any]] = {}

    def table_of(name: str) -> dict[str, Any]:
        if name not in tables:
            saved = out / f"{name}-table.json"
            if reuse and saved.exists():
                tables[name] = json.loads(saved.read_text())
            else:
                kernel = KERNEL_DIR / CASES[name].command[0]
                if not kernel.exists():
                    raise InputError(name, f"kernel not built: {kernel}", "run make")
                tables[name] = measure_table(CASES[name], repeats, timeout)
                write_table(tables[name], out)
        return tables[name]

    results = []
    for name in cases:
        source = CASES[name].warm_from
        results.append(evaluate(table_of(name), strategies, seeds,
                                table_of(source) if source else None))  # fmt: skip
    if any("warm" in r["strategies"] for r in results):
        strategies = [*strategies, "warm"]
    if json_path != "-":
        print(f"median trials (over {seeds} seeds, the default is trial 1) to come within "
              f"{100 * WITHIN:.0f} % of the exhaustive best (warm: guided, started from what "
              f"guided found on the case it names):")
        print(format_results(results, strategies))
    doc = {"within": WITHIN, "seeds": seeds, "strategies": strategies, "results": results}
    out.mkdir(parents=True, exist_ok=True)
    emit(json_path or str(out / "tune-efficiency.json"), json.dumps(doc, indent=2) + "\n")
    print(f"iopilot: tables in {out}", file=sys.stderr)
    return 0
