"""[posix] direct under what a program may do behind the runtime's back:
descriptors closed and re-opened with raw system calls, flags changed with
fcntl, buffers that are not there.  Each case runs plain and traced with
the setting on; return values, errno, positions, file bytes and the exit
status must be the same."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from iopilot.sources import load
from test_behind_semantics import _sanitized_run
from test_runtime_safety import same_behaviour

SOURCES = Path(__file__).resolve().parents[1] / "runtime" / "tests"
CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")


@pytest.fixture(scope="module")
def hazards(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("bin") / "direct_hazards"
    subprocess.run([CC, "-O1", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                    str(SOURCES / "direct_hazards.c")], check=True, timeout=120)  # fmt: skip
    return exe


@pytest.fixture
def settings(tmp_path) -> dict[str, str]:
    toml = tmp_path / "direct.toml"
    toml.write_text("[posix]\ndirect = true\n")
    return {"IOPILOT_SETTINGS": str(toml)}


def outcomes(run) -> dict[tuple[str, str], int]:
    st = load(str(run.trace)).settings
    got: dict[tuple[str, str], int] = {}
    for e in st["outcomes"]:
        if e["setting"] == "posix.direct":
            key = (e["outcome"], e["detail"])
            got[key] = got.get(key, 0) + e["count"]
    return got


def twin_used(run) -> bool:
    """The traced run opened a twin and moved data through it, so the case
    tested what it means to (a file system without O_DIRECT would not)."""
    got = outcomes(run)
    return (got.get(("applied", "opened with O_DIRECT beside the program's descriptor"), 0) > 0
            and any(d.startswith(("write with", "read with")) for _, d in got))  # fmt: skip


@pytest.mark.parametrize("case", ["reopen-other", "reopen-rdonly", "reopen-closed"])
def test_a_descriptor_reopened_with_raw_calls_is_never_written_through_the_old_twin(
        hazards, settings, case):  # fmt: skip
    run = same_behaviour([str(hazards), case, "WORK"], env=settings)
    out = run.p.stdout.decode()
    assert run.p.returncode == 0
    if case != "reopen-closed":
        assert "same number: 1" in out
    assert outcomes(run).get(("applied", "opened with O_DIRECT beside the program's descriptor"))
    if case == "reopen-other":  # the 1 MiB went to the new file, the old one kept its 4 KiB
        assert "old.bin: 4096 bytes" in out and "new.bin: 2097152 bytes" in out
    if case == "reopen-rdonly":
        assert "write 1m                     -> -1 errno 9" in out  # EBADF


def test_flags_changed_with_fcntl_are_the_programs_rules(hazards, settings):
    run = same_behaviour([str(hazards), "setfl", "WORK"], env=settings)
    out = run.p.stdout.decode()
    assert "append write 1m              -> 1048576 errno 0 position 1052672" in out
    assert twin_used(run)  # the plain 1 MiB write at 8 MiB went through the twin


@pytest.mark.parametrize("case", ["efault-write", "efault-read"])
def test_buffers_that_are_not_there_give_efault_as_without_the_setting(hazards, settings, case):
    run = same_behaviour([str(hazards), case, "WORK"], env=settings)
    out = run.p.stdout.decode()
    assert run.p.returncode == 0
    assert out.count("errno 14") >= 8  # EFAULT, not SIGSEGV
    assert twin_used(run)
    # the good misaligned requests still went through a bounce buffer
    assert outcomes(run).get(("applied", "write with O_DIRECT" if case == "efault-write"
                              else "read with O_DIRECT"), 0) > 0  # fmt: skip


def test_without_process_vm_readv_the_bounce_buffers_are_not_used(hazards, settings):
    run = same_behaviour([str(hazards), "no-vm-copy", "WORK"], env=settings)
    out = run.p.stdout.decode()
    if run.p.returncode == 4:
        pytest.skip(f"no seccomp filter here: {run.p.stderr.decode().strip()}")
    assert run.p.returncode == 0 and "process_vm_readv refused: 1" in out
    assert out.count("errno 14") >= 16
    got = outcomes(run)
    assert got.get(("ignored", "buffer not 4096-aligned and no fault-safe copy: page cache"), 0) > 0


# The same cases with the runtime built under AddressSanitizer+UBSan and
# ThreadSanitizer, linked into the program.
@pytest.mark.parametrize("tool", ["asan", "tsan"])
@pytest.mark.parametrize("case", ["reopen-other", "reopen-rdonly", "reopen-closed", "setfl",
                                  "efault-write", "efault-read"])  # fmt: skip
def test_the_same_under_sanitizers(sanitized, settings, tool, case):
    exe = sanitized / f"hazards-{tool}"
    plain, plain_files = _sanitized_run(exe, case, {}, traced=False)
    run, files = _sanitized_run(exe, case, settings, traced=True)
    assert "Sanitizer" not in run.stderr and "runtime error" not in run.stderr, run.stderr
    assert run.returncode == plain.returncode == 0, run.stderr
    assert run.stdout == plain.stdout
    assert files == plain_files
