"""The program: ``iopilot`` and ``python -m iopilot``."""

import os
import sys


def _preload_report() -> None:
    from ._alloc import quiet_start, single_threaded_blas

    quiet_start()
    single_threaded_blas()  # before NumPy is imported
    from .cli import report

    report.preload()


def main() -> None:
    """Run the command line; a report of one log starts its child first."""
    if sys.argv[1:2] == ["report"] and not os.environ.get("IOPILOT_DEBUG"):
        # It imports what the report needs while this process reads the
        # command line (iopilot._child); a report that turns out to need no
        # child stops it.
        from ._child import warm_up

        warm_up(_preload_report)
    from .cli import run

    run()


if __name__ == "__main__":
    main()
