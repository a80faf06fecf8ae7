"""The runtime never harms the program it runs in.

Each case runs a program twice, untraced and traced, in fresh directories:
the files it writes, its output and its exit status must be identical, and
the trace must account for what happened (counters, images, how each
process ended).  The programs do what real programs do to a preloaded
tracer: vfork and exec with files open, close every descriptor, run out of
them, write from signal handlers, cancel threads, share a descriptor among
64 threads, plant links in the trace directory, die by SIGKILL.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from iopilot.capture.run import library_path
from iopilot.sources import load
from rawtrace import RawProc, read_records

RUNTIME = Path(__file__).resolve().parents[1] / "runtime"
CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")
PY = sys.executable  # the venv's interpreter: a real program, not a shell shim


@pytest.fixture(scope="module")
def faults(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("bin") / "faults"
    subprocess.run([CC, "-O2", "-Wall", "-Werror", "-pthread", "-o", str(exe),
                    str(RUNTIME / "tests/faults.c"), str(RUNTIME / "src/async.c"), "-ldl"],
                   check=True)  # fmt: skip
    return exe


class Run:
    """One run of a command in a fresh work directory, traced or not."""

    def __init__(self, cmd: list[str], traced: bool, timeout: float = 60, env=None) -> None:
        self.work = Path(tempfile.mkdtemp(prefix="iop-work-"))
        self.trace = Path(tempfile.mkdtemp(prefix="iop-trace-"))
        e = dict(os.environ, **(env or {}))
        e.pop("LD_PRELOAD", None)
        if traced:
            e["LD_PRELOAD"] = str(library_path())
            e["IOPILOT_TRACE_DIR"] = str(self.trace)
        argv = [str(self.work) if a == "WORK" else a for a in cmd]
        self.p = subprocess.run(argv, env=e, capture_output=True, timeout=timeout)

    def files(self) -> dict[str, bytes]:
        return {str(f.relative_to(self.work)): f.read_bytes()
                for f in sorted(self.work.rglob("*")) if f.is_file()}  # fmt: skip

    def procs(self) -> list[RawProc]:
        return [RawProc(p) for p in sorted(self.trace.glob("p*.json"))]

    def images(self) -> list[Path]:
        return sorted(self.trace.glob("p*.rec"))


def same_behaviour(cmd: list[str], timeout: float = 60, env=None, content=lambda b: b) -> Run:
    """Run untraced and traced; everything the program did must be equal
    (``content`` maps file bytes to what is deterministic about them)."""
    plain = Run(cmd, traced=False, timeout=timeout, env=env)
    traced = Run(cmd, traced=True, timeout=timeout, env=env)
    assert traced.p.returncode == plain.p.returncode, traced.p.stderr
    assert traced.p.stdout == plain.p.stdout
    assert traced.p.stderr == plain.p.stderr  # the runtime never writes to the program's streams
    assert {k: content(v) for k, v in traced.files().items()} == {
        k: content(v) for k, v in plain.files().items()
    }
    return traced


def counters_of(run: Run, name: str, layer: str = "POSIX") -> dict[str, int]:
    path = str(run.work / name)
    found = [p.get(layer, path) for p in run.procs() if p.get(layer, path)]
    assert len(found) == 1, f"{path}: {len(found)} processes have counters"
    return found[0]


# -- vfork and exec ---------------------------------------------------------

VFORK_PY = """
import subprocess, sys
f = open(sys.argv[1] + "/out.bin", "wb")
f.write(b"abcdef")
subprocess.run(["/bin/true"])       # Python starts children with vfork
f.write(b"x" * 20000)
subprocess.run(["/bin/sh", "-c", "exit 0"])
for i in range(9000):                # enough records to flush after the child
    f.write(b"y")
    f.flush()
f.close()
"""


def test_vfork_exec_leaves_the_programs_open_file_alone():
    run = same_behaviour([PY, "-c", VFORK_PY, "WORK"])
    assert (run.work / "out.bin").stat().st_size == 6 + 20000 + 9000
    c = counters_of(run, "out.bin")
    assert c["BYTES_WRITTEN"] == 29006
    names = [p.json["cmdline"][0] for p in run.procs()]
    assert "/bin/true" in names and "/bin/sh" in names  # the children were traced as themselves
    assert all(not p.json["warnings"] for p in run.procs())


def test_dash_running_commands_keeps_its_redirections():
    script = "exec 3>WORK/sh.out; echo a >&3; /bin/true; echo b >&3; ls WORK >&3"
    run = same_behaviour(["/bin/sh", "-c", script.replace("WORK", "$0"), "WORK"])
    assert (run.work / "sh.out").read_bytes() == b"a\nb\nsh.out\n"


def test_exec_chain_gives_one_image_each():
    cmd = ["/bin/sh", "-c", 'exec /bin/sh -c "exec dd if=/dev/zero of=$0/dd.out bs=4096 count=8 '
           '2>/dev/null"', "WORK"]  # fmt: skip
    run = same_behaviour(cmd)
    stems = sorted(p.name for p in run.images())
    pid = {s.rsplit("-", 2)[1] for s in stems}
    assert len(pid) == 1 and [s.rsplit("-", 1)[1] for s in stems] == ["0.rec", "1.rec", "2.rec"]
    ended = [p.json["ended_by"] for p in sorted(run.procs(), key=lambda p: p.json["image"])]
    assert ended == ["exec", "exec", "exit"]
    assert counters_of(run, "dd.out")["BYTES_WRITTEN"] == 8 * 4096


# -- descriptors --------------------------------------------------------------


@pytest.mark.parametrize("how", ["closeall", "close_range", "closefrom"])
def test_closing_every_descriptor_never_gives_the_program_trace_data(faults, how):
    run = same_behaviour([str(faults), how, "WORK"])
    assert (run.work / "after.dat").read_bytes() == b"0123456789" * 2000
    assert counters_of(run, "after.dat")["WRITES"] == 20000


def test_a_low_descriptor_limit_gives_the_program_every_slot(faults):
    run = same_behaviour([str(faults), "rlimit", "WORK"])
    assert b"(EMFILE)" in run.p.stdout  # as many as untraced (same_behaviour)
    assert counters_of(run, "data.dat")["WRITES"] == 20000


def test_every_slot_used_up_to_the_hard_limit_still_keeps_the_records(faults):
    """With no descriptor left at all, the summary cannot be written at exit:
    the image is then one that ended without a summary, its records kept."""
    run = same_behaviour([str(faults), "rlimit_hard", "WORK"])
    assert b"(EMFILE)" in run.p.stdout
    (rec,) = run.images()
    assert len(read_records(rec)) >= 8192
    assert str(run.work / "data.dat").encode() in rec.with_suffix(".names").read_bytes()


def test_trace_directory_moved_away_stops_tracing_quietly(faults):
    run = same_behaviour([str(faults), "trace_gone", "WORK"])
    moved = Path(str(run.trace) + ".moved")
    try:
        summaries = [json.loads(p.read_text()) for p in moved.glob("p*.json")]
        assert not summaries  # nothing could be written, and nothing went elsewhere
        assert not list(run.trace.parent.glob(run.trace.name + "/*"))
    finally:
        shutil.rmtree(moved, ignore_errors=True)


# -- signals and threads ------------------------------------------------------


def test_signal_handler_writing_during_traced_writes_does_not_deadlock(faults):
    run = Run([str(faults), "signals", "WORK", "50000"], traced=True, timeout=10)
    assert run.p.returncode == 0, run.p.stderr
    main, handler = (int(x) for x in run.p.stdout.split()[1::2])
    assert main == 50000 and handler > 0
    assert (run.work / "signals.dat").stat().st_size == main + handler
    (proc,) = run.procs()
    c = proc.get("POSIX", run.work / "signals.dat")
    # every handler call was either recorded or passed through and counted as nested
    assert c["WRITES"] + proc.json["nested_calls"] == main + handler
    assert c["WRITES"] >= main


def test_cancelled_threads_leave_no_lock_held(faults):
    run = Run([str(faults), "cancel", "WORK"], traced=True, timeout=60)
    assert run.p.returncode == 0 and b"cancelled 800" in run.p.stdout
    (proc,) = run.procs()
    c = proc.get("POSIX", run.work / "cancel.dat")
    size = (run.work / "cancel.dat").stat().st_size
    # a thread cancelled inside write() may have written its byte without
    # returning to be counted: at most one byte for each of the 800 threads
    assert size - 800 <= c["BYTES_WRITTEN"] <= size


def blocks(data: bytes) -> list[bytes]:
    """Threads interleave their blocks differently in every run."""
    return sorted(data[i : i + 512] for i in range(0, len(data), 512))


def test_64_threads_sharing_one_descriptor(faults):
    run = same_behaviour([str(faults), "threads64", "WORK"], content=blocks)
    total = 64 * 2000 * 512
    c = counters_of(run, "threads.dat")
    assert c["WRITES"] == 64 * 2000 and c["BYTES_WRITTEN"] == total
    assert c["MAX_BYTE_WRITTEN"] == total - 1
    (proc,) = run.procs()
    offsets = sorted(r[2] for r in proc.records if r[7] == 1 and r[3] == 512)
    assert offsets == list(range(0, total, 512))  # each write claimed its own range


def test_a_full_table_of_pending_aio_is_counted_not_hidden(faults):
    run = same_behaviour([str(faults), "aio", "WORK"])
    assert run.p.stdout == b"aio 1100\n"
    (proc,) = run.procs()
    followed = proc.get("POSIX", run.work / "aio.dat")["WRITES"]
    assert followed + proc.json["overflows"]["aio"] == 1100
    assert proc.json["overflows"]["aio"] > 0  # the table holds 1,024


# -- the trace directory ------------------------------------------------------


def test_planted_links_in_the_trace_directory_are_never_followed(faults, tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    run = Run([str(faults), "plant", "WORK", str(victim)], traced=True)
    assert run.p.returncode == 0, run.p.stderr
    assert victim.read_bytes() == b"precious"
    (summary,) = run.trace.glob("p*.json")
    assert not summary.is_symlink() and json.loads(summary.read_text())["ended_by"] == "exit"


def test_a_fifo_in_place_of_the_record_file_does_not_hang(faults):
    run = Run([str(faults), "fifo", "WORK"], traced=True, timeout=20)
    assert run.p.returncode == 0 and run.p.stdout == b"fifo\n"
    (summary,) = run.trace.glob("p*.json")
    assert any("tracing disabled" in w for w in json.loads(summary.read_text())["warnings"])


def test_two_programs_in_one_directory_keep_their_own_files(faults):
    run = Run([str(faults), "threads64", "WORK"], traced=True)
    again = subprocess.run([str(faults), "threads64", str(run.work)], capture_output=True,
                           env=dict(os.environ, LD_PRELOAD=str(library_path()),
                                    IOPILOT_TRACE_DIR=str(run.trace)))  # fmt: skip
    assert again.returncode == 0
    assert len(run.procs()) == 2 and len({p.json["pid"] for p in run.procs()}) == 2


# -- how processes end ----------------------------------------------------------


def test_killed_process_keeps_its_flushed_records(faults):
    run = Run([str(faults), "killself", "WORK"], traced=True)
    assert run.p.returncode == -signal.SIGKILL
    (rec,) = run.images()
    assert not rec.with_suffix(".json").exists()  # no summary: the reader calls it killed
    records = read_records(rec)
    assert len(records) >= 8192  # at least the first full buffer
    names = rec.with_suffix(".names").read_bytes()
    assert str(run.work / "killed.dat").encode() in names


EXIT_PY = """
import os, sys
open(sys.argv[1] + "/a", "w").write("a")
if os.fork() == 0:
    open(sys.argv[1] + "/b", "w").write("b")
    os._exit(5)
os.wait()
sys.exit(3)
"""


def test_exit_status_and_underscore_exit_are_recorded():
    run = same_behaviour([PY, "-c", EXIT_PY, "WORK"])
    assert run.p.returncode == 3
    by_end = {p.json["ended_by"]: p.json["exit_code"] for p in run.procs()}
    assert by_end == {"exit": 3, "_exit": 5}
    assert counters_of(run, "b")["BYTES_WRITTEN"] == 1


POOL_PY = """
import multiprocessing as mp, os, sys
def work(i):
    with open(f"{sys.argv[1]}/w{i}", "w") as f:
        f.write(str(i))
    return os.getpid()
if __name__ == "__main__":
    mp.set_start_method("fork")
    pool = mp.Pool(40)
    pids = set(pool.map(work, range(400), chunksize=1))
    pool.close(); pool.join()
    print(len(pids) <= 40)
"""


def test_multiprocessing_pool_workers_are_all_seen():
    run = same_behaviour([PY, "-c", POOL_PY, "WORK"], timeout=120)
    workers = [p for p in run.procs() if p.json["ended_by"] == "_exit"]
    assert len(workers) == 40
    written = sum(c.get("BYTES_WRITTEN", 0) for p in workers for (layer, name), c in
                  p.counters.items() if layer == "POSIX" and "/w" in name)  # fmt: skip
    assert written == sum(len(v) for v in run.files().values())


# -- names ----------------------------------------------------------------------

NAMES_PY = r"""
import os, sys
d = os.fsencode(sys.argv[1])
for name in (b"bad\xff\xfename", b"\x1b[31mRED\x1b[0m\nline", "caf\u00e9".encode()):
    fd = os.open(d + b"/" + name, os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"z")
    os.close(fd)
"""


def test_names_that_are_not_utf8_or_hold_escapes_survive_exactly():
    run = same_behaviour([PY, "-c", NAMES_PY, "WORK"])
    (summary,) = run.trace.glob("p*.json")
    names = json.loads(summary.read_bytes())["names"].values()  # valid JSON, whatever the names
    as_bytes = {os.fsencode(n) for n in names}
    work = os.fsencode(str(run.work))
    for name in (b"bad\xff\xfename", b"\x1b[31mRED\x1b[0m\nline", "caf\u00e9".encode()):
        assert work + b"/" + name in as_bytes


# -- h5py whose import starts a subprocess ---------------------------------------

H5PY_PY = """
import platform, sys
platform.processor()          # runs `uname -p` in a child, as numpy and h5py imports can
import h5py, numpy as np
with h5py.File(sys.argv[1] + "/data.h5", "w") as f:
    for i in range(200):
        f.create_dataset(f"d{i}", data=np.arange(1000, dtype="f8"))
"""


def test_h5py_program_keeps_every_hdf5_write():
    run = Run([PY, "-c", H5PY_PY, "WORK"], traced=True, timeout=120)
    assert run.p.returncode == 0, run.p.stderr
    h5d = [c for p in run.procs() for (layer, _), c in p.counters.items() if layer == "H5D"]
    assert sum(c.get("WRITES", 0) for c in h5d) == 200
    assert all(not p.json["warnings"] for p in run.procs())


# -- the same cases under AddressSanitizer+UBSan and ThreadSanitizer -------------


SANITIZED_CASES = {
    "threads64": "threads.dat",
    "signals": "signals.dat",
    "cancel": "cancel.dat",
    "closeall": "after.dat",
    "close_range": "after.dat",
    "rlimit": "data.dat",
    "killself": "killed.dat",
    "fifo": "fifo.dat",
    "engine": "engine.dat",
}


@pytest.mark.parametrize("tool", ["asan", "tsan"])
@pytest.mark.parametrize("case", sorted(SANITIZED_CASES))
def test_fault_cases_under_sanitizers(sanitized, tool, case):
    work = Path(tempfile.mkdtemp(prefix="iop-work-"))
    trace = Path(tempfile.mkdtemp(prefix="iop-trace-"))
    env = dict(os.environ, IOPILOT_TRACE_DIR=str(trace), ASAN_OPTIONS="detect_leaks=0",
               TSAN_OPTIONS="halt_on_error=1 exitcode=66")  # fmt: skip
    env.pop("LD_PRELOAD", None)
    extra = ["40000"] if case == "signals" else []  # sanitizers make each call slow
    p = subprocess.run([str(sanitized / f"faults-{tool}"), case, str(work), *extra], env=env,
                       capture_output=True, text=True, timeout=180)  # fmt: skip
    assert "Sanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
    assert p.returncode == (-signal.SIGKILL if case == "killself" else 0), p.stderr
    assert (work / SANITIZED_CASES[case]).stat().st_size > 0
    recs = list(trace.glob("p*.rec"))
    assert len(recs) == 1
    assert case == "fifo" or recs[0].stat().st_size >= 64  # the fifo case replaced it
    if case == "engine":  # the engine's operations reached the linked-in runtime, once each
        t = load(str(trace))
        assert t.background is not None and len(t.background) == 402
        assert int(t.counters["POSIX"].total("POSIX_BYTES_WRITTEN")) == 400 * 4096 + 400 * 512


MPI4PY_PY = """
import platform, sys
platform.processor()                    # a child process at import time, as in real codes
from mpi4py import MPI
import h5py, numpy as np
rank = MPI.COMM_WORLD.Get_rank()
with h5py.File(f"{sys.argv[1]}/rank{rank}.h5", "w") as f:
    for i in range(50):
        f.create_dataset(f"d{i}", data=np.full(512, rank, dtype="f8"))
MPI.COMM_WORLD.Barrier()
"""


def test_mpi4py_h5py_ranks_keep_every_write():
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("no mpirun")
    work = Path(tempfile.mkdtemp(prefix="iop-work-"))
    trace = Path(tempfile.mkdtemp(prefix="iop-trace-"))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_btl="self,vader")  # fmt: skip
    p = subprocess.run([mpirun, "-np", "2", "-x", f"LD_PRELOAD={library_path()}",
                        "-x", f"IOPILOT_TRACE_DIR={trace}", PY, "-c", MPI4PY_PY, str(work)],
                       env=env, capture_output=True, text=True, timeout=180)  # fmt: skip
    assert p.returncode == 0, p.stderr
    ranks = {}
    for proc in (RawProc(x) for x in trace.glob("p*.json")):
        assert not proc.json["warnings"]
        assert proc.json["records_dropped"] == 0
        if proc.json["mpi"]:
            h5d = [c for (layer, _), c in proc.counters.items() if layer == "H5D"]
            ranks[proc.rank] = (proc.json["rank_source"], sum(c.get("WRITES", 0) for c in h5d))
    assert ranks == {0: ("mpi", 50), 1: ("mpi", 50)}


def test_relative_trace_directory_survives_a_change_of_directory(tmp_path):
    (tmp_path / "tr").mkdir()
    (tmp_path / "sub").mkdir()
    env = dict(os.environ, LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR="tr")
    prog = "import os; os.chdir('sub'); open('f', 'w').write('x')"
    p = subprocess.run([PY, "-c", prog], cwd=tmp_path, env=env, capture_output=True, timeout=60)
    assert p.returncode == 0 and p.stderr == b""
    (summary,) = (tmp_path / "tr").glob("p*.json")
    names = json.loads(summary.read_text())["names"].values()
    assert str(tmp_path / "sub" / "f") in names


def test_run_reports_a_child_killed_by_sigkill_with_its_flushed_records(tmp_path):
    """End to end: `iopilot run`, then `iopilot report --json`, on a program whose
    child dies by SIGKILL after its first buffer reached the disk."""
    prog = ("import os, sys\n"
            "if os.fork() == 0:\n"
            "    fd = os.open(sys.argv[1] + '/k', os.O_CREAT | os.O_WRONLY, 0o644)\n"
            "    for i in range(10000): os.write(fd, b'k')\n"
            "    os.kill(os.getpid(), 9)\n"
            "os.wait()\n")  # fmt: skip
    out, trace = tmp_path / "report.json", tmp_path / "t"
    iopilot = [sys.executable, "-m", "iopilot"]
    p = subprocess.run([*iopilot, "run", "--trace-only", "--trace-dir", str(trace), "--", PY,
                        "-c", prog, str(tmp_path)], capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr
    p = subprocess.run([*iopilot, "report", str(trace), "--json", str(out)], capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr
    report = json.loads(out.read_text())
    report = report["reports"][0] if "reports" in report else report
    procs = report["processes"]
    assert procs["images"] == 2 and procs["ended_normally"] == 1 and procs["ended_abnormally"] == 1
    (killed,) = procs["abnormal"]
    assert killed["records"] >= 8192
    assert any("killed or crashed" in w for w in report["warnings"])
