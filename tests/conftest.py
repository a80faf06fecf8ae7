import os
import sys
from pathlib import Path

import pytest

# tests/kit.py is imported as a plain module by the test files.
sys.path.insert(0, str(Path(__file__).parent))

# The shared corpus of real Darshan logs sits beside the project on the
# machines that have it.  Without it the corpus tests show as skipped (one
# per test, never silently uncollected), the summary says so in one line,
# and IOPILOT_REQUIRE_CORPUS=1 turns its absence into a failure.
from kit import SHARED as CORPUS


@pytest.fixture(autouse=True, scope="session")
def _children_skip_mutation_bookkeeping():
    """`make mutation` first runs the tests once to record which test reaches
    which function ("stats"); a program a test starts (``python -m iopilot``
    in a temporary directory) cannot do that bookkeeping and would fail, so it
    runs unmutated then.  While a mutant is under test, children run it too."""
    with pytest.MonkeyPatch.context() as mp:
        if os.environ.get("MUTANT_UNDER_TEST") == "stats":
            mp.delenv("MUTANT_UNDER_TEST")
        yield


def pytest_sessionstart(session):
    if os.environ.get("IOPILOT_REQUIRE_CORPUS") == "1" and not CORPUS.is_dir():
        raise pytest.UsageError(f"IOPILOT_REQUIRE_CORPUS=1 but {CORPUS} is absent")


def pytest_terminal_summary(terminalreporter):
    if not CORPUS.is_dir():
        skipped = [r for r in terminalreporter.stats.get("skipped", [])
                   if "shared" in str(getattr(r, "longrepr", ""))]  # fmt: skip
        terminalreporter.write_line(
            f"corpus: {CORPUS} is absent, {len(skipped)} corpus tests did not run "
            "(IOPILOT_REQUIRE_CORPUS=1 makes this an error)", yellow=True, bold=True)
