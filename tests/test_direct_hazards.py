"""[posix] direct under what a program may do behind the runtime's back:
descriptors closed and re-opened with raw system calls, flags changed with
fcntl, buffers that are not there; and requests on both sides of the
alignment on file systems that take O_DIRECT, refuse it at open, or take the
open and refuse the requests.  Each case runs plain and traced with the
setting on; return values, errno, positions, file bytes and the exit status
must be the same."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from iopilot.capture.run import library_path
from iopilot.sources import load
from test_behind_semantics import _sanitized_run
from test_runtime_safety import same_behaviour

SOURCES = Path(__file__).resolve().parents[1] / "runtime" / "tests"
CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")


def _build(tmp_path_factory, name: str) -> Path:
    """runtime/tests/NAME.c compiled into a fresh directory."""
    exe = tmp_path_factory.mktemp("bin") / name
    subprocess.run([CC, "-O1", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                    str(SOURCES / f"{name}.c")], check=True, timeout=120)  # fmt: skip
    return exe


def _settings(tmp_path: Path, text: str) -> dict[str, str]:
    """The environment that points the runtime at a settings file of ``text``."""
    toml = tmp_path / "direct.toml"
    toml.write_text(text)
    return {"IOPILOT_SETTINGS": str(toml)}


@pytest.fixture(scope="module")
def hazards(tmp_path_factory) -> Path:
    return _build(tmp_path_factory, "direct_hazards")


@pytest.fixture
def settings(tmp_path) -> dict[str, str]:
    return _settings(tmp_path, "[posix]\ndirect = true\n")


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


# -- requests on both sides of the alignment, on file systems that take
# O_DIRECT, refuse it at open, or take the open and refuse the requests ------
# runtime/tests/direct_align.c: one file per request, so what one request
# does to the twin cannot change the next one's path.

ALIGNED = ["len-4096", "len-8192", "off-4096", "buf-1", "buf-4095", "buf-4096"]
MISALIGNED = ["len-4095", "len-4097", "len-4608", "off-4095", "off-4097", "all-off"]
OPENED = ("applied", "opened with O_DIRECT beside the program's descriptor")
CACHE = ("ignored", "offset or length not a multiple of 4096: page cache")


@pytest.fixture(scope="module")
def align_prog(tmp_path_factory) -> Path:
    return _build(tmp_path_factory, "direct_align")


def _align_run(exe: Path, fs: str, settings: dict[str, str] | None, *extra: str):
    """direct_align in a fresh directory on ``fs`` ("disk": the temporary
    directory's; "tmpfs" or "ramfs": one mounted for the run in a mount
    namespace of its own), traced with ``settings`` or (None) not."""
    work = Path(tempfile.mkdtemp(prefix="iop-align-"))
    trace = Path(tempfile.mkdtemp(prefix="iop-align-trace-"))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("IOPILOT_") and k != "LD_PRELOAD"}  # fmt: skip
    cmd = [str(exe), str(work), *extra]
    if settings is not None:
        cmd = ["env", f"LD_PRELOAD={library_path()}", f"IOPILOT_TRACE_DIR={trace}",
               *(f"{k}={v}" for k, v in settings.items()), *cmd]  # fmt: skip
    if fs != "disk":
        cmd = ["unshare", "--mount", "sh", "-c", f'mount -t {fs} none "$0" && exec "$@"',
               str(work), *cmd]  # fmt: skip
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    if fs != "disk" and p.returncode != 0 and "mount" in p.stderr:
        pytest.skip(f"cannot mount a {fs} here: {p.stderr.strip()}")
    if p.returncode == 4:
        pytest.skip(f"no seccomp filter here: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    return p.stdout, trace


def request_paths(trace: Path) -> dict[str, dict[tuple[str, str], int]]:
    """Per request (file name without .bin): what [posix] direct did, counted."""
    got: dict[str, dict[tuple[str, str], int]] = {}
    for e in load(str(trace)).settings["outcomes"]:
        if e["setting"] == "posix.direct":
            per = got.setdefault(Path(e["file"]).stem, {})
            per[(e["outcome"], e["detail"])] = per.get((e["outcome"], e["detail"]), 0) + e["count"]
    return got


@pytest.fixture
def small_requests(tmp_path) -> dict[str, str]:
    return _settings(tmp_path, '[posix]\ndirect = true\ndirect_min_size = "1k"\n')


@pytest.mark.parametrize("fs", ["disk", "tmpfs", "ramfs"])
def test_only_requests_aligned_in_length_offset_and_memory_go_direct(align_prog, small_requests,
                                                                    fs):  # fmt: skip
    plain, _ = _align_run(align_prog, fs, None)
    out, trace = _align_run(align_prog, fs, small_requests)
    assert out == plain  # return values, errno, bytes read back, file sizes and checksums
    assert out.count("same bytes") == len(ALIGNED) + len(MISALIGNED)
    paths = request_paths(trace)
    if "O_DIRECT open: accepted" not in out:  # ramfs (and tmpfs before Linux 6.6)
        if fs == "disk":
            pytest.skip(f"the file system of {tempfile.gettempdir()} refuses O_DIRECT; "
                        "the ramfs case covers that")  # fmt: skip
        refused = {("not_applicable", "the file system refuses O_DIRECT"): 1}
        assert paths == {name: refused for name in ALIGNED + MISALIGNED}
        return
    for name in ALIGNED:  # a buffer off the boundary goes through a bounce buffer
        assert paths[name] == {OPENED: 1, ("applied", "write with O_DIRECT"): 1,
                               ("applied", "read with O_DIRECT"): 1}, name  # fmt: skip
    for name in MISALIGNED:
        assert paths[name] == {OPENED: 1, CACHE: 2}, name


@pytest.mark.parametrize("fs", ["disk", "tmpfs"])
def test_requests_the_file_system_refuses_are_made_on_the_programs_descriptor(
        align_prog, small_requests, fs):  # fmt: skip
    # the twin opens, and every request on it fails with EINVAL (a seccomp
    # filter answers for the file system): the program still gets its bytes
    plain, _ = _align_run(align_prog, fs, None, "refuse")
    out, trace = _align_run(align_prog, fs, small_requests, "refuse")
    assert out == plain
    assert out.count("same bytes") == len(ALIGNED) + len(MISALIGNED)
    assert "errno 22" not in out
    paths = request_paths(trace)
    refused = ("rejected", "the file system refused a request: page cache")
    for name in ALIGNED:  # the write was refused; the read then was the program's own
        assert paths[name] == {OPENED: 1, refused: 1}, name
    for name in MISALIGNED:
        assert paths[name] == {OPENED: 1, CACHE: 2}, name


FILL = """
import os, sys
first, stop = int(sys.argv[1]), int(sys.argv[2])
null = os.open("/dev/null", os.O_RDONLY)
for n in range(first, stop):
    os.dup2(null, n)
fd = os.open(sys.argv[3], os.O_WRONLY | os.O_CREAT, 0o644)
os.close(fd)
"""


@pytest.mark.parametrize(("busy_to", "spare"), [(223, True), (224, False)])
def test_the_second_descriptor_stays_below_seven_eighths_of_the_table(tmp_path, settings,
                                                                     busy_to, spare):  # fmt: skip
    """With 256 descriptors, twins are numbered from 128 and never at 224
    (128 + 3/4 of 128) or above: a program that has used that many is left
    the rest of its table."""
    trace = tmp_path / "trace"
    trace.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_")}
    env.update(settings, LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(trace))
    subprocess.run([sys.executable, "-c", FILL, "128", str(busy_to), str(tmp_path / "f.dat")],
                   env=env, check=True, timeout=60,
                   preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)))
    got = {detail for _, detail in request_paths(trace)["f"]}
    opened = "opened with O_DIRECT beside the program's descriptor"
    if "the file system refuses O_DIRECT" in got:
        pytest.skip(f"the file system of {tmp_path} refuses O_DIRECT")
    assert got == ({opened} if spare else {"no descriptor to spare"})
