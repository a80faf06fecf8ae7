import sys
from pathlib import Path

# tests/kit.py is imported as a plain module by the test files.
sys.path.insert(0, str(Path(__file__).parent))

# The shared corpus of real Darshan logs sits beside the project on the
# machines that have it.  Without it the corpus tests show as skipped (one
# per test, never silently uncollected), the summary says so in one line,
# and IOPILOT_REQUIRE_CORPUS=1 turns its absence into a failure.
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "darshan-logs"


def pytest_sessionstart(session):
    import os

    import pytest

    if os.environ.get("IOPILOT_REQUIRE_CORPUS") == "1" and not CORPUS.is_dir():
        raise pytest.UsageError(f"IOPILOT_REQUIRE_CORPUS=1 but {CORPUS} is absent")


def pytest_terminal_summary(terminalreporter):
    if not CORPUS.is_dir():
        skipped = [r for r in terminalreporter.stats.get("skipped", [])
                   if "shared" in str(getattr(r, "longrepr", ""))]  # fmt: skip
        terminalreporter.write_line(
            f"corpus: {CORPUS} is absent, {len(skipped)} corpus tests did not run "
            "(IOPILOT_REQUIRE_CORPUS=1 makes this an error)", yellow=True, bold=True)
