"""Start from what was learnt: a study keeps the features of the job it tuned
and the settings that won; a new tuning of a similar job measures those
settings right after its default.

Features are what the default run's trace showed: the program (its file's
name, past launchers and interpreters), the number of processes, the layers
its I/O went through and the checks that warned.  Two jobs are similar when
they run the same program (other sizes, other rank counts), or when they warn
of the same problems through the same layers (another program with the same
mistakes).  Only a confirmed win is reused, fitted to the new space: a
parameter the new space lacks is dropped, a range value is brought into the
new range (4 aggregators become 2 on 2 processes).
"""

from __future__ import annotations

import os
from typing import Any

from .._record import record
from .space import Space, point_key

JOB = "iopilot_job"  # a study's user attribute: the features of the job it tuned
RESULT = "iopilot_result"  # ... and what it concluded: verdict, best point, speedup
SIMILAR = 0.5  # least share of shared warnings (Jaccard) for another program to count
LIMIT = 2  # warm points measured at most

# Names that start a program rather than being it.
_STARTERS = {"mpirun", "mpiexec", "orterun", "srun", "aprun", "jsrun", "env", "time", "nice",
             "numactl", "taskset", "stdbuf", "valgrind", "bash", "sh"}  # fmt: skip


@record
class Warm:
    """A point that won in another study, fitted to this space."""

    point: dict[str, Any]
    study: str
    why: str  # what makes the two jobs similar, in words
    speedup: float | None
    score: float


def program_of(command: list[str]) -> str:
    """The name of the program a command runs: the first argument naming an
    existing file that is not a launcher or an interpreter (``mpirun -np 4
    ./ior`` and ``python3 sim.py`` give ``ior`` and ``sim.py``), else the
    first argument that is not a launcher, an option or a number."""
    words = [a for a in command if not a.startswith("-") and not a.isdigit()
             and os.path.basename(a) not in _STARTERS
             and not os.path.basename(a).startswith("python")]  # fmt: skip
    # a file that is there; else (a program not on this machine) the first word left
    name = next((a for a in words if os.path.isfile(a)), words[0] if words else "")
    return os.path.basename(name)


def job_of(command: list[str], observed: dict[str, Any]) -> dict[str, Any]:
    """The features of a job, from its command and what its default run showed."""
    checks = sorted({str(f.get("check")) for f in observed.get("findings", [])
                     if f.get("level") in ("WARN", "HIGH")})  # fmt: skip
    return {"program": program_of(command), "nprocs": int(observed.get("nprocs") or 1),
            "layers": sorted(observed.get("layers", [])), "checks": checks}  # fmt: skip


def similarity(here: dict[str, Any], there: dict[str, Any]) -> tuple[float, str] | None:
    """How alike two jobs are (higher is closer) and why, or None when not alike."""
    a, b = set(here.get("checks", [])), set(there.get("checks", []))
    shared = len(a & b) / len(a | b) if a | b else 1.0
    same_layers = set(here.get("layers", [])) == set(there.get("layers", []))
    procs = f"{there.get('nprocs')} processes there, {here.get('nprocs')} here"
    if here.get("program") and here.get("program") == there.get("program"):
        return 2.0 + shared + 0.5 * same_layers, f"the same program {here['program']}, {procs}"
    if a and same_layers and shared >= SIMILAR:
        return shared, (f"another program ({there.get('program')}) with "
                        f"{len(a & b)} of {len(a | b)} warnings alike, through the same "
                        f"layers")  # fmt: skip
    return None


def fit(space: Space, point: dict[str, Any]) -> dict[str, Any]:
    """``point`` in ``space``'s terms: parameters it lacks, or values outside
    its choices, dropped; range values brought into the range."""
    out: dict[str, Any] = {}
    for name, value in point.items():
        p = space.by_name.get(name)
        if p is None:
            continue
        if p.values is not None:
            if value in p.values:
                out[name] = value
        elif isinstance(value, int) and not isinstance(value, bool):
            assert p.low is not None and p.high is not None
            out[name] = min(max(value, p.low), p.high)
    return space.canonical(space.clean(out))


def learnt(storage: Any, own: str, job: dict[str, Any], space: Space) -> list[Warm]:
    """Winning points of other studies in ``storage`` whose job is similar to
    ``job``, closest first, fitted to ``space``; at most LIMIT, distinct."""
    import optuna  # lazy: 0.4 s to import; tune/ is loaded by `bench` and `--help` too

    rdb = None
    try:
        # A storage of its own, closed after this one read (an engine let go
        # keeps its connections until the cycle collector runs).
        if isinstance(storage, str):
            storage = rdb = optuna.storages.RDBStorage(storage)
        studies = optuna.get_all_study_summaries(storage, include_best_trial=False)
    except Exception:  # an empty or foreign database: nothing was learnt there
        return []
    finally:
        if rdb is not None:
            rdb.engine.dispose()
    found = []
    for s in studies:
        result, there = s.user_attrs.get(RESULT), s.user_attrs.get(JOB)
        if s.study_name == own or not result or not there or result.get("verdict") != "win":
            continue
        alike = similarity(job, there)
        if alike is None:
            continue
        point = fit(space, result.get("point") or {})
        if point:
            found.append(Warm(point, s.study_name, alike[1], result.get("speedup"), alike[0]))
    found.sort(key=lambda w: (-w.score, -(w.speedup or 0.0)))
    out: list[Warm] = []
    for w in found:
        if point_key(w.point) not in {point_key(x.point) for x in out}:
            out.append(w)
    return out[:LIMIT]
