import os
import shutil
import signal
import subprocess
import sys
import tempfile
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


@pytest.fixture(autouse=True, scope="session")
def _scratch_under_basetemp(tmp_path_factory):
    """``tempfile.mkdtemp()`` in a test lands under pytest's base directory
    (pruned across sessions), never loose in /tmp."""
    root = tmp_path_factory.getbasetemp() / "scratch"
    root.mkdir(exist_ok=True)
    old, tempfile.tempdir = tempfile.tempdir, str(root)
    yield root
    tempfile.tempdir = old


@pytest.fixture(autouse=True)
def _scratch_freed_after_each_test(_scratch_under_basetemp):
    """What a test body left in the scratch directory goes when it ends: a
    property test makes hundreds of traced runs, each with its own files.
    Wider-scoped fixtures are set up before this snapshot, so theirs stay."""
    before = set(os.listdir(_scratch_under_basetemp))
    yield
    for name in set(os.listdir(_scratch_under_basetemp)) - before:
        path = _scratch_under_basetemp / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def sanitized(tmp_path_factory) -> Path:
    """The runtime's sanitizer builds (``make -C runtime sanitize``: ten
    programs, a minute or more on two cores), made once for the session: the
    fault, write-behind, hazard and self-test modules all run them.
    IOPILOT_SANITIZED names a directory where they are built already (the
    C mutation run, tools/mutate_c.py, builds them per mutant)."""
    if os.environ.get("IOPILOT_SANITIZED"):
        return Path(os.environ["IOPILOT_SANITIZED"])
    out = tmp_path_factory.mktemp("san")
    runtime = Path(__file__).resolve().parents[1] / "runtime"
    jobs = f"-j{os.cpu_count() or 1}"  # ten programs, independent but for their tsan objects
    b = subprocess.run(["make", "-s", jobs, "-C", str(runtime), "sanitize", f"OUT={out}"],
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert b.returncode == 0, b.stderr
    return out


def pytest_sessionstart(session):
    # A suite started in the background by a non-interactive shell inherits
    # SIGINT and SIGQUIT ignored, and so would every program a test runs;
    # the tests that raise or send them expect the defaults.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # exec: the default
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    if os.environ.get("IOPILOT_REQUIRE_CORPUS") == "1" and not CORPUS.is_dir():
        raise pytest.UsageError(f"IOPILOT_REQUIRE_CORPUS=1 but {CORPUS} is absent")


def pytest_terminal_summary(terminalreporter):
    if not CORPUS.is_dir():
        skipped = [r for r in terminalreporter.stats.get("skipped", [])
                   if "shared" in str(getattr(r, "longrepr", ""))]  # fmt: skip
        terminalreporter.write_line(
            f"corpus: {CORPUS} is absent, {len(skipped)} corpus tests did not run "
            "(IOPILOT_REQUIRE_CORPUS=1 makes this an error)", yellow=True, bold=True)
