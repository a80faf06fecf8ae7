"""``iopilot bench tune-aa``: how often the tuner declares a win where no
setting can win.

Each case is a program whose I/O no setting in its space can change, so
every difference a tuning sees is noise.  The case is tuned again and again
(a new study and seed each time, the same code as ``iopilot tune``) and the
verdicts are counted: a sound decision rule calls few of them a win.  With
the rank test at ALPHA over 5 fresh runs each, a tuning whose best
candidate is not the default is called a win by chance with probability
2/252 (0.8 %), so 20 tunings should give none, or rarely one.
"""

from __future__ import annotations

import json
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from .._record import record
from ..errors import InputError
from ..kernel_results import KERNEL_DIR
from ..outfile import emit
from .study import ALPHA
from .tuning import TuneOptions, tune


@record(frozen=True)
class NullCase:
    """A program and a space none of whose settings reach its I/O."""

    name: str
    what: str
    command: tuple[str, ...]  # "{kernels}" and "{work}" are filled in
    space: str  # TOML
    script: str = ""  # a program written to {work}/noisy.py first, when given


# Every run writes between 4 and 64 MiB (its own random choice) and syncs
# half the time: the I/O time spreads far more than any setting could move it.
_NOISY = """\
import os, random, sys
rng = random.Random(int.from_bytes(os.urandom(8), "little"))
block = b"x" * (1 << 20)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for _ in range(rng.randint(4, 64)):
    os.write(fd, block)
if rng.random() < 0.5:
    os.fsync(fd)
os.close(fd)
os.unlink(sys.argv[1])
"""

CASES = {
    "posix-mpi": NullCase(
        "posix-mpi",
        "IOR, 2 ranks, POSIX writes of 64 KiB to a shared file; space: MPI-IO "
        "components and ROMIO hints (the program makes no MPI-IO call)",
        tuple(
            "mpirun --allow-run-as-root --oversubscribe -np 2 {kernels}/ior "
            "--api posix --transfer 64k --block 4m --write".split()
        ),
        textwrap.dedent("""\
            [ompi.io]
            values = ["ompio", "romio321"]
            default = "ompio"
            [ompi.fcoll]
            values = ["vulcan", "dynamic", "individual"]
            when = {"ompi.io" = "ompio"}
            [ompi.io_ompio_num_aggregators]
            values = [1, 2]
            when = {"ompi.io" = "ompio"}
            [mpiio.romio_cb_write]
            values = ["enable", "disable"]
            when = {"ompi.io" = "romio321"}
            """),
    ),
    "noisy": NullCase(
        "noisy",
        "Python, one process, 4-64 MiB of 1 MiB os.write calls (a random amount "
        "each run), fsync half the time; space: STDIO and HDF5 settings (it uses neither)",
        (sys.executable, "{work}/noisy.py", "noisy.dat"),
        textwrap.dedent("""\
            [stdio]
            buffer_size = {values = ["64k", "1m", "8m"]}
            [hdf5]
            alignment = {values = ["64k", "1m"]}
            chunk_cache_size = {values = ["16m", "64m"]}
            """),
        _NOISY,
    ),
}


def tally(verdicts: list[str]) -> dict[str, int]:
    """How many tunings ended with each verdict."""
    out: dict[str, int] = {}
    for v in verdicts:
        out[v] = out.get(v, 0) + 1
    return out


def run_case(case: NullCase, tunings: int, trials: int, repeats: int,
             work: Path) -> list[dict[str, Any]]:  # fmt: skip
    """Tune ``case`` ``tunings`` times, each a fresh study with its own seed."""
    work.mkdir(parents=True, exist_ok=True)
    if case.script:
        (work / "noisy.py").write_text(case.script)
    space = work / f"{case.name}-space.toml"
    space.write_text(case.space)
    command = [a.format(kernels=KERNEL_DIR, work=work) for a in case.command]
    rows = []
    for seed in range(tunings):
        out = work / f"{case.name}-{seed}"
        opts = TuneOptions(command, out, space=str(space), trials=trials, repeats=repeats,
                           seed=seed)  # fmt: skip
        outcome, doc = tune(opts, quiet=True)
        rows.append({"case": case.name, "seed": seed, "verdict": outcome.verdict,
                     "p_value": outcome.p_value, "speedup": doc["speedup"],
                     "trials": len(outcome.records), "noise": round(outcome.noise, 3),
                     "candidate": outcome.candidate.point})  # fmt: skip
        print(f"{case.name} #{seed}: {outcome.verdict}"
              + (f" (p = {outcome.p_value:.3f})" if outcome.p_value is not None else "")
              + f", noise {100 * outcome.noise:.0f} %", file=sys.stderr)  # fmt: skip
    return rows


def main(
    *,
    cases: list[str] | None = None,
    tunings: int = 10,
    trials: int = 8,
    repeats: int = 3,
    dir: str | None = None,
    json_path: str | None = None,
) -> int:
    """``iopilot bench tune-aa``: tune each case ``tunings`` times and count
    the wins (there should be none, or rarely one)."""
    cases = list(cases or CASES)
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise InputError("--case", f"unknown case {unknown[0]!r}", f"known: {', '.join(CASES)}")
    for name, v in (("--tunings", tunings), ("--trials", trials), ("--repeats", repeats)):
        if v < 1:
            raise InputError(name, f"must be 1 or more, not {v}")
    if "posix-mpi" in cases and not (KERNEL_DIR / "ior").exists():
        raise InputError("posix-mpi", f"kernel not built: {KERNEL_DIR / 'ior'}", "run make")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="iopilot-aa-", dir=dir) as tmp:
        for name in cases:
            rows += run_case(CASES[name], tunings, trials, repeats, Path(tmp) / name)
    wins = sum(r["verdict"] == "win" for r in rows)
    doc = {"alpha": ALPHA, "trials": trials, "repeats": repeats, "tunings": len(rows),
           "wins": wins, "verdicts": tally([r["verdict"] for r in rows]), "runs": rows}  # fmt: skip
    if json_path != "-":
        for name in cases:
            mine = [r for r in rows if r["case"] == name]
            counts = ", ".join(f"{v}: {n}" for v, n in tally([r["verdict"] for r in mine]).items())
            print(f"{name:<10} {len(mine)} tunings of {trials} trials: {counts}")
        print(f"wins declared where no setting can win: {wins} of {len(rows)} tunings")
    if json_path:
        emit(json_path, json.dumps(doc, indent=2) + "\n")
    return 0
