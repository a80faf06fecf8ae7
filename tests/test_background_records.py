"""Per-operation records of write-behind's thread: each deferred write (and,
relaxed, each sync) is in the trace with its queued, issued and completed
times, kept apart from the program's own calls, and the reports show the
overlap achieved from them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from iopilot import api
from iopilot.capture.run import library_path
from iopilot.model import OP_NAMES, OP_WRITE
from iopilot.model.background import background_summary, busy_and_overlap
from iopilot.sources import load
from iopilot.sources.trace_procs import HEADER, record_dtype
from iopilot.vocabulary import RECORD_FLAGS
from kit import unread_view_keys
from test_report_html_browser import CHROMEDRIVER, CHROMIUM, driver  # noqa: F401
from test_runtime_behind import small_fs  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
OP_SYNC = OP_NAMES.index("sync")
STEP = 256 << 10


@pytest.fixture(scope="module")
def prog(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("bin") / "background"
    src = ROOT / "runtime" / "tests" / "background.c"
    subprocess.run(["cc", "-O1", "-Wall", "-Werror", "-o", str(exe), str(src)], check=True,
                   timeout=120)  # fmt: skip
    return exe


def _run(prog: Path, tmp: Path, mode: str, steps: int, **env: str) -> tuple[str, Path]:
    work, trace = tmp / f"w-{mode}", tmp / f"t-{mode}"
    work.mkdir()
    trace.mkdir()
    e = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_") and k != "LD_PRELOAD"}
    e.update(LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(trace), IOPILOT_ASYNC="1",
             **env)  # fmt: skip
    r = subprocess.run([str(prog), str(work), mode, str(steps)], env=e, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r.stdout, trace


def _records(rec: Path) -> np.ndarray:
    """The records of a .rec file, of the format its header names."""
    version = int(np.fromfile(rec, HEADER, count=1)["version"][0])
    return np.fromfile(rec, record_dtype(version), offset=HEADER.itemsize)


def _flags(trace: Path) -> np.ndarray:
    return np.concatenate([_records(f)["flags"]
                           for f in trace.glob("*.rec")])  # fmt: skip


def test_each_deferred_write_has_its_queued_issued_and_completed_times(prog, tmp_path):
    out, trace = _run(prog, tmp_path, "compute", 6)
    assert out == f"{6 * STEP} bytes\n"
    t = load(str(trace))
    b = t.background
    assert b is not None and len(b) == 12 == t.write_behind["writes"]
    assert (b.op == OP_WRITE).all() and not b.failed.any()
    assert (b.queued <= b.issued).all() and (b.issued <= b.completed).all()
    # the program's calls, in the records once: 6 x (256 KiB + 4 KiB), no more
    w = t.records.select(t.records.op == OP_WRITE)
    assert len(w) == 12 and int(w.length.sum()) == 6 * (STEP + 4096)
    assert int(b.length.sum()) == int(w.length.sum())
    # in the order the calls were made, each queued while its call ran
    order = np.argsort(w.start, kind="stable")
    assert (b.offset == w.offset[order]).all() and (b.length == w.length[order]).all()
    assert (b.queued >= w.start[order]).all() and (b.queued <= w.end[order]).all()
    # the same thread issues them in order, one after the other
    assert (np.diff(b.issued) >= 0).all() and (b.issued[1:] >= b.completed[:-1]).all()
    # on disk: one DEFERRED program call per QUEUED/BACKGROUND pair
    f = _flags(trace)
    for name in ("DEFERRED", "QUEUED", "BACKGROUND"):
        assert np.count_nonzero(f & RECORD_FLAGS[name]) == 12, name
    # the counters count each byte once too
    assert int(t.counters["POSIX"].total("POSIX_BYTES_WRITTEN")) == 6 * (STEP + 4096)


def _hidden_by_hand(t) -> tuple[float, float]:
    """(busy, hidden) of rank 0 by brute force on a fine grid of instants."""
    b = t.background
    starts = np.concatenate([t.records.start, t.meta_records.start])
    ends = np.concatenate([t.records.end, t.meta_records.end])
    lo, hi = float(b.issued.min()), float(b.completed.max())
    grid = np.linspace(lo, hi, 400_001)
    step = grid[1] - grid[0]
    mid = grid[:-1] + step / 2
    busy = np.zeros(len(mid), bool)
    for i, c in zip(b.issued, b.completed, strict=True):
        busy |= (mid > i) & (mid < c)
    in_call = np.zeros(len(mid), bool)
    for s, e in zip(starts, ends, strict=True):
        in_call |= (mid > s) & (mid < e)
    return busy.sum() * step, (busy & ~in_call).sum() * step


@pytest.mark.parametrize("mode", ["compute", "sync"])
def test_overlap_achieved_is_the_thread_time_outside_the_programs_calls(prog, tmp_path, mode):
    _, trace = _run(prog, tmp_path, mode, 5)
    t = load(str(trace))
    s = background_summary(t)
    busy, hidden = _hidden_by_hand(t)
    tol = 2 * (float(t.background.completed.max()) - float(t.background.issued.min())) / 400_000
    assert s["busy_seconds"] == pytest.approx(busy, abs=len(t.background) * tol)
    assert s["hidden_seconds"] == pytest.approx(hidden, abs=len(t.background) * tol)
    assert s["hidden_seconds"] + s["exposed_seconds"] == pytest.approx(s["busy_seconds"])
    assert 0 <= s["overlap_share"] <= 1


def test_a_strict_fsync_returns_after_the_files_writes(prog, tmp_path):
    # the contract: fsync waits for the file's pending writes, so each write
    # the thread made completed before the next fsync the program made returned
    _, trace = _run(prog, tmp_path, "sync", 5)
    t = load(str(trace))
    m = t.meta_records
    sync_end = np.sort(m.end[m.op == OP_SYNC])
    sync_start = np.sort(m.start[m.op == OP_SYNC])
    assert len(sync_end) == 6
    b = t.background
    nxt = np.searchsorted(sync_start, b.queued)  # the first fsync begun after the write was queued
    assert (b.completed <= sync_end[nxt]).all()


def test_relaxed_syncs_are_background_operations(prog, tmp_path):
    _, trace = _run(prog, tmp_path, "sync", 4, IOPILOT_ASYNC_RELAXED="1")
    t = load(str(trace))
    b = t.background
    syncs = b.op == OP_SYNC
    assert np.count_nonzero(syncs) == 5  # one per step and the last one
    assert (b.offset[syncs] == -1).all() and (b.length[syncs] == 0).all()
    # the program's fsync calls are marked as deferred: they returned at once
    f = _flags(trace)
    assert np.count_nonzero(f & RECORD_FLAGS["DEFERRED"]) == 8 + 5
    # without relaxed, fsync is the program's own: no background sync
    (tmp_path / "s").mkdir()
    _, strict = _run(prog, tmp_path / "s", "sync", 4)
    assert not (load(str(strict)).background.op == OP_SYNC).any()


ENGINE_FULL_PY = """
import os, sys
from iopilot.overlap.engine import AsyncIOError, EventSet
fd = os.open(sys.argv[1] + "/full.dat", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
es = EventSet()
for i in range(32):                      # 2 MiB on a 1 MiB file system
    es.write(fd, b"x" * 65536, i * 65536)
try:
    es.wait()
except AsyncIOError as e:
    print("failed", len(e.failures))
es.close()
os.close(fd)
"""


def test_a_failed_background_write_is_marked(tmp_path, small_fs):  # noqa: F811
    """The event-set engine's writes that fail are background operations
    marked failed (write-behind queues only what fits, so it cannot fail
    this way on a full file system)."""
    e = dict(LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(tmp_path / "t"))
    (tmp_path / "t").mkdir()
    r = subprocess.run([sys.executable, "-c", ENGINE_FULL_PY, str(small_fs)],
                       env={**os.environ, **e}, capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    assert r.returncode == 0 and r.stdout.startswith("failed"), r.stderr
    b = load(str(tmp_path / "t")).background
    assert b.failed.any() and not b.failed[0]
    assert np.count_nonzero(b.failed) == int(r.stdout.split()[1])


@pytest.mark.parametrize(("limit", "pairs"), [(1025, 0), (1026, 1), (1027, 1), (1028, 2)])
def test_a_record_limit_never_splits_a_pair(prog, tmp_path, limit, pairs):
    # The program's thread takes the first 1,024 records of the limit; the
    # background thread gets what is left, and keeps whole pairs only.
    _, trace = _run(prog, tmp_path, "compute", 6, IOPILOT_MAX_RECORDS=str(limit))
    t = load(str(trace))
    f = _flags(trace)
    assert len(f) <= limit
    q, bg = (np.count_nonzero(f & RECORD_FLAGS[n]) for n in ("QUEUED", "BACKGROUND"))
    assert q == bg == pairs == (len(t.background) if t.background is not None else 0)
    assert not [w for w in t.warnings if "without their pair" in w]


def test_a_cut_pair_is_left_out_and_said(prog, tmp_path):
    _, trace = _run(prog, tmp_path, "compute", 3)
    rec = next(trace.glob("*.rec"))
    r = _records(rec)
    bg = np.flatnonzero(r["flags"] & RECORD_FLAGS["BACKGROUND"])
    r = np.delete(r, bg[1])  # the second operation loses its completion
    head = rec.read_bytes()[: HEADER.itemsize]
    rec.write_bytes(head + r.tobytes())
    (trace / rec.name.replace(".rec", ".json")).unlink()  # as if killed: no count to compare
    t = load(str(trace))
    assert len(t.background) == 5
    assert [w for w in t.warnings if "1 background I/O records without their pair" in w]
    # a completion that does not continue its queued record is no pair either
    r2 = _records(rec)
    q = np.flatnonzero(r2["flags"] & RECORD_FLAGS["QUEUED"])[0]
    r2["end"][q] -= 1e-6
    rec.write_bytes(head + r2.tobytes())
    assert len(load(str(trace)).background) == 4


@pytest.mark.parametrize("field", ["file_id", "op", "offset", "length", "thread"])
def test_a_completion_of_another_operation_is_no_pair(prog, tmp_path, field):
    _, trace = _run(prog, tmp_path, "compute", 2)
    rec = next(trace.glob("*.rec"))
    head = rec.read_bytes()[: HEADER.itemsize]
    r = _records(rec)
    b = np.flatnonzero(r["flags"] & RECORD_FLAGS["BACKGROUND"])[0]
    r[field][b] += 1  # the first operation's completion now names something else
    rec.write_bytes(head + r.tobytes())
    t = load(str(trace))
    assert len(t.background) == 3
    assert [w for w in t.warnings if "2 background I/O records without their pair" in w]


def test_busy_and_overlap_by_hand():
    # rank 0: background [0,2] and [1,3] (3 s covered), program [2.5,4] and [3,5]
    # -> 0.5 s shared; rank 1: background [0,1], program [1,2] touches only
    # -> 0 shared; rank 2's program time is not rank 0's
    ranks, covered, shared = busy_and_overlap(
        np.array([0, 0, 1]), np.array([0.0, 1.0, 0.0]), np.array([2.0, 3.0, 1.0]),
        np.array([0, 0, 1, 2]), np.array([2.5, 3.0, 1.0, 0.0]), np.array([4.0, 5.0, 2.0, 9.0]))
    assert ranks.tolist() == [0, 1]
    assert covered.tolist() == pytest.approx([3.0, 1.0])
    assert shared.tolist() == pytest.approx([0.5, 0.0])
    # one tick more on the program's side of the touch: it overlaps
    _, _, shared = busy_and_overlap(np.array([1]), np.array([0.0]), np.array([1.0]),
                                    np.array([1]), np.array([0.75]), np.array([2.0]))
    assert shared.tolist() == pytest.approx([0.25])


def test_reports_show_the_overlap_achieved(prog, tmp_path):
    _, trace = _run(prog, tmp_path, "compute", 4)
    term = subprocess.run([sys.executable, "-m", "iopilot", "report", "--color", "never",
                           str(trace)], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert term.returncode == 0, term.stderr
    doc = json.loads(subprocess.run([sys.executable, "-m", "iopilot", "report", "--json", "-",
                                     str(trace)], capture_output=True, text=True,
                                    timeout=120).stdout)  # fmt: skip
    ops = doc["reports"][0]["background_io"]
    assert ops["operations"] == 8 and ops["writes"] == 8 and ops["syncs"] == 0
    assert ops["bytes"] == 4 * (STEP + 4096)
    assert ops["queue_delay"]["p50"] <= ops["queue_delay"]["max"]
    assert (f"made by background threads in {ops['busy_seconds']:.3f} s\n    overlap achieved: "
            f"{ops['hidden_seconds']:.3f} s of that ({ops['overlap_share']:.0%})") in term.stdout
    assert "waited" in term.stdout and "in the queue (median" in term.stdout
    page = api.diagnose(str(trace))
    from iopilot.report.html import page_data

    views = page_data(page)["views"]
    assert views["background"]["n"] == 8 and views["background"]["drawn"] == 8
    assert unread_view_keys({"background": views["background"]}) == {}


def test_no_background_without_write_behind(prog, tmp_path):
    trace = tmp_path / "t"
    trace.mkdir()
    (tmp_path / "w").mkdir()
    e = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_")}
    e.update(LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(trace))
    subprocess.run([str(prog), str(tmp_path / "w"), "compute", "2"], env=e, check=True,
                   timeout=120)  # fmt: skip
    t = load(str(trace))
    assert t.background is None and t.write_behind is None
    assert not (_flags(trace) & (RECORD_FLAGS["QUEUED"] | RECORD_FLAGS["BACKGROUND"]
                                 | RECORD_FLAGS["DEFERRED"])).any()  # fmt: skip
    from iopilot.report.html import page_data

    assert "background" not in page_data(api.diagnose(str(trace)))["views"]


@pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
                    reason="chromium or chromedriver absent")
def test_background_view_draws_the_thread_and_the_program(prog, tmp_path, driver):  # noqa: F811
    from selenium.webdriver.common.by import By

    from iopilot.report.html import write_html
    from test_report_html_browser import _no_console_errors, _wait_drawn

    _, trace = _run(prog, tmp_path, "compute", 4)
    page = tmp_path / "page.html"
    write_html(api.diagnose(str(trace)), page)
    driver.get_log("browser")
    driver.get(page.as_uri() + "#view=background")
    _wait_drawn(driver, "background")
    sec = driver.find_element(By.ID, "view-background")
    assert "Overlap achieved:" in sec.text and "8 operations (8 writes" in sec.text
    assert "made by background threads in" in sec.text
    plot = sec.find_element(By.CSS_SELECTOR, ".js-plotly-plot")
    names = driver.execute_script("return arguments[0].data.map((t) => t.name)", plot)
    assert names == ["queued, waiting for the thread (8)", "issued by the thread, running (8)",
                     "the program's I/O calls (" + names[2].split("(")[1]]  # fmt: skip
    # every background stroke sits above rank 0's lane, every call below it
    ys = driver.execute_script("return arguments[0].data.map((t) => t.y.filter((v) => v !== null))",
                               plot)  # fmt: skip
    assert set(ys[0]) == set(ys[1]) == {0.18} and set(ys[2]) == {-0.18}
    rows = sec.find_elements(By.CSS_SELECTOR, "table tbody tr")
    assert [r.find_element(By.TAG_NAME, "td").text for r in rows] == ["0"]
    _no_console_errors(driver)


_ENGINE_PROGRAM = """
import os, sys
from iopilot.overlap.engine import EventSet
path = os.path.join(sys.argv[1], "engine.dat")
fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
with EventSet() as es:
    for k in range(4):
        es.write(fd, bytes([65 + k]) * 65536, k * 65536)
    es.fsync(fd)
    got = es.read(fd, 100000, 200000)
    es.wait()
    print(len(got.data))
os.close(fd)
"""


def _traced_python(tmp_path: Path, program: str, *args: str):
    """``program`` run traced with ``tmp_path/w`` as its first argument:
    (the finished process, its work directory, its trace directory)."""
    work, trace = tmp_path / "w", tmp_path / "t"
    work.mkdir()
    trace.mkdir()
    e = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_") and k != "LD_PRELOAD"}
    e.update(LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(trace),
             PYTHONPATH=str(ROOT / "src"))  # fmt: skip
    r = subprocess.run([sys.executable, "-c", program, str(work), *args], env=e,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r, work, trace


def test_the_engines_operations_are_recorded_once_with_their_times(tmp_path):
    r, work, trace = _traced_python(tmp_path, _ENGINE_PROGRAM)
    assert r.stdout == "62144\n"  # the read ran after the writes: 262144 - 200000 bytes
    t = load(str(trace))
    name = str(work / "engine.dat")
    fid = next(i for i, n in t.names.items() if n == name)
    b = t.background
    mine = b.file_id == fid
    assert [OP_NAMES[o] for o in b.op[mine]] == ["write"] * 4 + ["sync", "read"]
    assert (b.queued[mine] <= b.issued[mine]).all() and (b.issued[mine] <= b.completed[mine]).all()
    assert (np.diff(b.issued[mine]) >= 0).all()  # one thread, in submission order
    # each operation once in the program's records: the thread's own calls are not traced
    rec = t.records.select(t.records.file_id == fid)
    assert sorted(zip(rec.op.tolist(), rec.offset.tolist(), rec.length.tolist(), strict=True)) == \
        [(0, 200000, 62144)] + [(1, k * 65536, 65536) for k in range(4)]  # fmt: skip
    c = t.counters["POSIX"]
    row = c.file_id == fid
    assert int(c["POSIX_BYTES_WRITTEN"][row].sum()) == 4 * 65536
    assert int(c["POSIX_BYTES_READ"][row].sum()) == 62144
    assert int(c["POSIX_FSYNCS"][row].sum()) == 1
    # each deferred call is stamped when it was queued
    w = rec.select(rec.op == OP_WRITE)
    order = np.argsort(w.offset)
    assert np.allclose(w.start[order], b.queued[mine][:4]) and (w.start == w.end).all()


_MANY_PROGRAM = """
import os, sys
from iopilot.overlap.engine import EventSet
fd = os.open(os.path.join(sys.argv[1], "many.dat"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
n = int(sys.argv[2])
with EventSet() as es:
    for k in range(n):
        es.write(fd, bytes([65 + k % 26]) * 16, 16 * k)
        if k % 64 == 63:
            es.wait()
    es.wait()
os.close(fd)
"""


@pytest.mark.parametrize("n", [2730, 2731, 3000])
def test_many_engine_operations_fill_the_threads_buffer_without_loss(tmp_path, n):
    """Each operation of the engine is three records on its thread (the
    program's write and the background pair): 2731 of them fill a buffer of
    8192 records with a pair at its last slot, which must go to the next."""
    _, work, trace = _traced_python(tmp_path, _MANY_PROGRAM, str(n))
    assert (work / "many.dat").stat().st_size == 16 * n
    t = load(str(trace))
    fid = next(i for i, name in t.names.items() if name == str(work / "many.dat"))
    b = t.background
    assert int((b.file_id == fid).sum()) == n
    rec = t.records.select(t.records.file_id == fid)
    assert sorted(rec.offset[rec.op == OP_WRITE].tolist()) == [16 * k for k in range(n)]
    assert sorted(b.offset[b.file_id == fid].tolist()) == [16 * k for k in range(n)]
    # each process's summary counts the records its file holds, pairs included
    for summary in trace.glob("p*.json"):
        s = json.loads(summary.read_text())
        held = len(_records(summary.with_suffix(".rec")))
        assert (s["records"], s["records_dropped"]) == (held, 0), summary.name
