"""The work of ``iopilot tune`` (its options are in ``iopilot.cli.tune``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._progress import Progress
from ..errors import InputError
from . import output
from .engine import launcher
from .objective import OBJECTIVES, absolute_command
from .space import Space
from .study import Options, Outcome, Study, study_name


def main(args: argparse.Namespace) -> int:
    tune(args)
    return 0


def tune(args: argparse.Namespace, generated: Callable[[dict[str, Any]], Space] | None = None,
         ) -> tuple[Outcome, dict[str, Any]]:
    """Run the study ``args`` asks for, print its table and write its outputs;
    the outcome and the JSON document.  ``generated`` builds the space when no
    --space was given (default: from the diagnosis of the default's first run)."""
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise InputError("iopilot tune", "no command given: iopilot tune [options] -- COMMAND...")
    for name, v in (("--trials", args.trials), ("--repeats", args.repeats)):
        if v < 1:
            raise InputError(name, f"must be 1 or more, not {v}")
    if args.timeout is not None and args.timeout <= 0:
        raise InputError("--timeout", f"must be above 0, not {args.timeout:g}")
    cwd = Path.cwd()
    command = absolute_command(command, cwd)
    out = Path(args.out).resolve()
    space_text = "generated"
    given: Space | None = None
    if args.space:
        from ..userfiles import settings_text
        from .space import load

        given = load(args.space)
        space_text = settings_text(args.space, "not valid TOML")
    launch = launcher(args.launcher)
    out.mkdir(parents=True, exist_ok=True)
    storage = args.study or f"sqlite:///{out / 'study.db'}"
    unit, direction = OBJECTIVES[args.objective]

    def space_for(observed: dict[str, Any]) -> Space:
        if given is not None:
            return given
        if generated is not None:
            return generated(observed)
        from .generate import generate

        return generate(observed)

    opts = Options(command, args.objective, args.strategy, args.trials, args.repeats, args.seed,
                   args.timeout, args.verify, storage, out / "trials",
                   study_name(command, space_text, args.objective, args.strategy, args.seed))
    progress = Progress(args.trials, "trials")
    try:
        outcome = Study(opts, space_for, launch, output.tell(progress, unit)).run()
    finally:
        progress.close()
        _tidy(out / "trials")
    maximize = direction == "maximize"
    doc = output.summary(outcome, command=command, objective=args.objective, unit=unit,
                         maximize=maximize, strategy=args.strategy, seed=args.seed,
                         storage=storage)  # fmt: skip
    print(output.table(outcome, unit))
    print()
    print(output.conclusion(outcome, doc, unit))
    best = out / "best.toml"
    output.write_best(outcome, best, command)
    plot = out / "convergence.png"
    made = output.plot(outcome, plot, unit, maximize)
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2, default=str) + "\n")
    html = getattr(args, "html", None)
    if html:
        output.write_page(doc, Path(html))
    wrote = [str(best)] + ([str(plot)] if made else []) + ([args.json] if args.json else [])
    wrote += [html] if html else []
    print(f"iopilot: {len(outcome.records)} trial(s), {outcome.stopped}; wrote "
          f"{', '.join(wrote)}; study {storage}", file=sys.stderr)  # fmt: skip
    return outcome, doc


def _tidy(work: Path) -> None:
    """The trials' work directory, when no trial of another study process is in it."""
    try:
        work.rmdir()
    except OSError:
        pass
