"""One whole tuning, as ``iopilot tune`` and ``iopilot optimize`` run it:
the study, its table and conclusion on the terminal, ``best.toml`` and the
convergence plot in its output directory, and the summary document (which
the command line writes as JSON or as a page where asked)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._progress import Progress
from .._record import record
from ..errors import InputError
from ..userfiles import settings_text
from . import output
from .generate import generate
from .launch import launcher
from .objective import OBJECTIVES, absolute_command
from .space import Space, load
from .study import Options, Outcome, Study, study_name


@record(frozen=True)
class TuneOptions:
    """What a tuning is asked to do (``iopilot tune``'s options)."""

    command: list[str]
    out: Path
    space: str | None = None  # a space file; None: generated from the diagnosis
    strategy: str = "guided"
    trials: int = 20
    repeats: int = 3
    study: str | None = None  # Optuna storage URL; None: sqlite in ``out``
    seed: int = 0
    objective: str = "io"
    timeout: float | None = None
    verify: str | None = None
    launcher: str = "local"
    warm_from: str | None = ""  # earlier studies to start from ("": --study's; None: none)


def tune(opts: TuneOptions, generated: Callable[[dict[str, Any]], Space] | None = None,
         *, quiet: bool = False) -> tuple[Outcome, dict[str, Any]]:
    """Run the study ``opts`` asks for, print its table (unless ``quiet``)
    and write best.toml and the plot; the outcome and the summary document.
    ``generated`` builds the space when no space file was given (default:
    from the diagnosis of the default's first run)."""
    if not opts.command:
        raise InputError("iopilot tune", "no command given: iopilot tune [options] -- COMMAND...")
    for name, v in (("--trials", opts.trials), ("--repeats", opts.repeats)):
        if v < 1:
            raise InputError(name, f"must be 1 or more, not {v}")
    if opts.timeout is not None and opts.timeout <= 0:
        raise InputError("--timeout", f"must be above 0, not {opts.timeout:g}")
    command = absolute_command(opts.command, Path.cwd())
    out = opts.out.resolve()
    space_text = "generated"
    given: Space | None = None
    if opts.space:
        given = load(opts.space)
        space_text = settings_text(opts.space, "not valid TOML")
    launch = launcher(opts.launcher)
    out.mkdir(parents=True, exist_ok=True)
    storage = opts.study or f"sqlite:///{out / 'study.db'}"
    unit, direction = OBJECTIVES[opts.objective]

    def space_for(observed: dict[str, Any]) -> Space:
        if given is not None:
            return given
        return (generated or generate)(observed)

    study = Options(command, opts.objective, opts.strategy, opts.trials, opts.repeats, opts.seed,
                    opts.timeout, opts.verify, storage, out / "trials",
                    study_name(command, space_text, opts.objective, opts.strategy, opts.seed),
                    opts.warm_from)  # fmt: skip
    progress = Progress(opts.trials, "trials")
    try:
        outcome = Study(study, space_for, launch, output.tell(progress, unit),
                        lambda text: print(f"iopilot: {text}", file=sys.stderr)).run()
    finally:
        progress.close()
        _tidy(out / "trials")
    maximize = direction == "maximize"
    doc = output.summary(outcome, command=command, objective=opts.objective, unit=unit,
                         maximize=maximize, strategy=opts.strategy, seed=opts.seed,
                         storage=storage)  # fmt: skip
    if not quiet:
        print(output.table(outcome, unit))
        print()
        print(output.conclusion(outcome, doc, unit))
    best = out / "best.toml"
    output.write_best(outcome, best, command)
    plot = out / "convergence.png"
    made = output.plot(outcome, plot, unit, maximize)
    wrote = [str(best)] + ([str(plot)] if made else [])
    print(f"iopilot: {len(outcome.records)} trial(s), {outcome.stopped}; wrote "
          f"{', '.join(wrote)}; study {storage}", file=sys.stderr)  # fmt: skip
    return outcome, doc


def _tidy(work: Path) -> None:
    """The trials' work directory, when no trial of another study process is in it."""
    try:
        work.rmdir()
    except OSError:
        pass
