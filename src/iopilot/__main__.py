"""The program: ``iopilot`` and ``python -m iopilot``.

Its two imports inside functions are its lazy-loading points: a one-log
report forks its child before the command line's modules load, and the
child imports the report's (``iopilot._child``)."""

import os
import sys

from ._alloc import quiet_start, single_threaded_blas
from ._child import warm_up


def _preload_report() -> None:
    quiet_start()
    single_threaded_blas()  # before NumPy is imported
    from .cli import report  # lazy: in the child, while the parent reads the command line

    report.preload()


def main() -> None:
    """Run the command line; a report of one log starts its child first."""
    if sys.argv[1:2] == ["report"] and not os.environ.get("IOPILOT_DEBUG"):
        # It imports what the report needs while this process reads the
        # command line (iopilot._child); a report that turns out to need no
        # child stops it.
        warm_up(_preload_report)
    from .cli import run  # lazy: after the fork, so the child does not carry it

    run()


if __name__ == "__main__":
    main()
