"""iopilot traces as a centre's support staff meet them: format 2, processes that
were killed or were launchers, the program's exit status, file names that are
not text, and trace files that are damaged or hostile.

Trace directories are written here straight from docs/trace-format.md, not by
the reader's own definitions.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from iopilot.cli import main
from iopilot.demo import example_dir
from iopilot.model import OP_WRITE
from iopilot.model.trace import safe_name
from iopilot.sources import load

LAYERS = ["POSIX", "STDIO", "MPIIO", "H5F", "H5D"]
INTS = ["OPENS", "READS", "WRITES", "MMAPS", "BYTES_READ", "BYTES_WRITTEN", "MAX_BYTE_WRITTEN",
        "CONSEC_WRITES", "SEQ_WRITES", "SIZE_WRITE_0_100", "SIZE_WRITE_100_1K",
        "SIZE_WRITE_1K_10K", "SIZE_WRITE_10K_100K"]  # fmt: skip
FLOATS = ["F_WRITE_TIME", "F_META_TIME", "F_WRITE_START_TIMESTAMP", "F_WRITE_END_TIMESTAMP"]
HEAD = struct.Struct("<QIIqqdqqQ")  # magic version size rank pid t0 ppid image reserved
REC = struct.Struct("<ddqqQIBBH")  # start end offset length id thread layer op flags
MAGIC = 0x31505249504F4921
T0 = 1_700_000_000.0
OPEN = 2
DARSHAN = str(example_dir() / "ior_hdf5_example.darshan")


def fid(name: bytes) -> int:
    return (zlib.crc32(name) << 20) | 0xABC


def _size_bin(size: int) -> str:
    for upper, b in ((100, "0_100"), (1024, "100_1K"), (10240, "1K_10K")):
        if size < upper:
            return b
    return "10K_100K"


def write_proc(root: Path, pid: int, files: dict[bytes, tuple[int, int]] | None = None, *,
               rank: int = -1, rank_source: str = "none", image: int = 0, ppid: int = 1,
               host: str = "node1", exe: str = "/opt/app/bin/app", ended_by: str | None = "exit",
               exit_code: int | None = 0, version: int = 2, nprocs: int = 1,
               unnamed: tuple[int, ...] = (), mmaps: int = 0, extra: dict | None = None,
               raw_json: bool = False) -> Path:  # fmt: skip
    """One process image: .rec (+ .names) always, .json unless ``ended_by`` is None.

    ``files`` maps a name to (writes, bytes per write); every file is opened
    once (a metadata record) and written sequentially.  ``unnamed`` ids get one
    100-byte write each and no name anywhere."""
    files = files or {}
    stem = root / (f"p{host}-{pid}-{image}" if version >= 2 else f"p{host}-{pid}")
    recs, counters, t = [], [], 0.001
    for name, (count, size) in files.items():
        i = fid(name)
        recs.append(REC.pack(t, t + 1e-4, -1, 0, i, 0, 0, OPEN, 0))
        for k in range(count):
            t += 1e-3
            recs.append(REC.pack(t, t + 1e-4, k * size, size, i, 0, 0, OP_WRITE, 0))
        ints = {"OPENS": 1, "WRITES": count, "BYTES_WRITTEN": count * size,
                "MAX_BYTE_WRITTEN": count * size - 1, "CONSEC_WRITES": count - 1,
                "SEQ_WRITES": count - 1, f"SIZE_WRITE_{_size_bin(size)}": count}  # fmt: skip
        if mmaps:
            ints["MMAPS"] = mmaps
        floats = {"F_WRITE_TIME": count * 1e-4, "F_WRITE_START_TIMESTAMP": 0.002,
                  "F_WRITE_END_TIMESTAMP": t + 1e-4}  # fmt: skip
        counters.append([0, str(i), {str(INTS.index(k)): v for k, v in ints.items() if v},
                         {str(FLOATS.index(k)): v for k, v in floats.items()}])  # fmt: skip
    for i in unnamed:
        t += 1e-3
        recs.append(REC.pack(t, t + 1e-4, 0, 100, i, 0, 0, OP_WRITE, 0))
    head_rank = rank if (version < 2 or rank_source == "env") else -1
    head = HEAD.pack(MAGIC, version, REC.size, head_rank, pid, T0 + pid * 1e-3,
                     ppid if version >= 2 else 0, image if version >= 2 else 0, 0)  # fmt: skip
    (stem.parent / (stem.name + ".rec")).write_bytes(head + b"".join(recs))
    if version >= 2:
        table = b""
        for name in files:
            pad = b"\0" * (-len(name) % 8)
            table += struct.pack("<QII", fid(name), len(name), 0) + name + pad
        (stem.parent / (stem.name + ".names")).write_bytes(table)
    if ended_by is None:
        return stem
    meta = {
        "format": "iopilot-process", "version": version, "image": image, "rank": rank,
        "nprocs": nprocs, "rank_source": rank_source, "mpi": rank_source == "mpi",
        "pid": pid, "ppid": ppid, "host": host, "t0": T0 + pid * 1e-3, "t_end": t + 0.01,
        "ended_by": ended_by, "exit_code": exit_code, "exe": exe,
        "cmdline": [exe], "records": len(recs), "records_dropped": 0,
        "max_records": 50_000_000, "stats_missing": 0,
        "overflows": {"aio": 0, "split": 0, "fapl": 0, "handles": 0}, "nested_calls": 0,
        "warnings": [], "threads": 1, "execs": 0, "env": {}, "layers": LAYERS,
        "counter_names": INTS, "fcounter_names": FLOATS, "counters": counters,
        "names": {str(fid(n)): n.decode("utf-8", "surrogateescape") for n in files},
        "notes": [],
    }  # fmt: skip
    if version < 2:
        for k in ("image", "rank_source", "mpi", "exit_code", "overflows", "nested_calls",
                  "warnings"):  # fmt: skip
            meta.pop(k)
    meta.update(extra or {})
    path = stem.parent / (stem.name + ".json")
    if raw_json:  # the version 1 runtime wrote names as raw bytes
        path.write_bytes(json.dumps(meta, ensure_ascii=False).encode("utf-8", "surrogateescape"))
    else:
        path.write_text(json.dumps(meta))
    return stem


def write_job(root: Path, **fields) -> None:
    job = {"format": "iopilot-job", "version": 1, "command": ["./app", "in.cfg"],
           "launched": ["./app", "in.cfg"], "start": T0 - 1, "end": T0 + 10,
           "exit_status": 0, "signal": None, "host": "node1",
           "mounts": [["/", "ext4"]]}  # fmt: skip
    job.update(fields)
    (root / "job.json").write_text(json.dumps(job))


def serial_trace(root: Path, **job) -> Path:
    """A serial program (rank unknown) that writes one file, with its job.json."""
    root.mkdir()
    write_proc(root, 100, {b"/scratch/u/out.dat": (20, 1000)})
    write_job(root, **job)
    return root


def report(capsys, *argv):
    rc = main(["report", *map(str, argv)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def report_json(capsys, path) -> dict:
    rc, out, err = report(capsys, path, "--json")
    assert rc == 0, err
    (r,) = json.loads(out)["reports"]
    return r


# ---------------------------------------------------------------------------
# 1. Format 2, versions, ranks and launchers
# ---------------------------------------------------------------------------


def test_format_2_trace_is_read(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    for r in range(2):
        write_proc(root, 200 + r, {f"/scratch/u/r{r}.dat".encode(): (10, 4096)}, rank=r,
                   rank_source="mpi", nprocs=2, host=f"node{r}")  # fmt: skip
    write_job(root)
    t = load(str(root))
    assert t.job.nprocs == 2
    assert sorted(np.unique(t.records.rank)) == [0, 1]
    assert len(t.records) == 20 and t.counters["POSIX"].total("POSIX_WRITES") == 20
    assert sorted(t.names.values()) == ["/scratch/u/r0.dat", "/scratch/u/r1.dat"]
    assert t.job.hosts == {0: "node0", 1: "node1"}
    assert t.warnings == []


def test_format_1_trace_is_still_read(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    write_proc(root, 300, {b"/scratch/u/a.dat": (5, 100)}, rank=0, version=1)
    t = load(str(root))
    assert len(t.records) == 5 and t.names[fid(b"/scratch/u/a.dat")] == "/scratch/u/a.dat"


@pytest.mark.parametrize("where", ["json", "rec"])
def test_newer_format_is_refused_with_the_usual_message(capsys, tmp_path, where):
    root = serial_trace(tmp_path / "t")
    if where == "json":
        p = root / "pnode1-100-0.json"
        p.write_text(p.read_text().replace('"version": 2', '"version": 4'))
    else:
        p = root / "pnode1-100-0.rec"
        data = bytearray(p.read_bytes())
        data[8:12] = struct.pack("<I", 4)
        p.write_bytes(bytes(data))
    rc, _, err = report(capsys, root)
    assert rc == 2
    assert err == f"iopilot: error: {p}: written by a newer iopilot (format 4); upgrade iopilot\n"


def test_serial_program_and_its_children_are_rank_0(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    write_proc(root, 100, {b"/scratch/u/a.dat": (10, 100)}, exe="/usr/bin/bash", ended_by="exec",
               exit_code=None)  # fmt: skip
    write_proc(root, 100, {b"/scratch/u/b.dat": (10, 100)}, image=1)
    write_proc(root, 101, {b"/scratch/u/c.dat": (10, 100)}, ppid=100)
    t = load(str(root))
    assert t.job.nprocs == 1 and set(t.records.rank.tolist()) == {0}
    assert len(t.records) == 30
    assert set(t.counters["POSIX"].rank.tolist()) == {0}
    assert not any("launcher" in w for w in t.warnings)


def test_each_operation_keeps_the_rank_of_its_process(tmp_path):
    """Two ranks each open and write a file of their own: every data and
    metadata operation is its process's rank."""
    root = tmp_path / "t"
    root.mkdir()
    for rank, name in ((0, b"/scratch/u/r0.dat"), (1, b"/scratch/u/r1.dat")):
        write_proc(root, 100 + rank, {name: (3, 100)}, rank=rank, rank_source="env", nprocs=2)
    write_job(root)
    t = load(str(root))
    assert t.job.nprocs == 2
    for recs in (t.records, t.meta_records):
        got = {(t.name(int(f)), int(r)) for f, r in zip(recs.file_id, recs.rank, strict=True)}
        assert got == {("/scratch/u/r0.dat", 0), ("/scratch/u/r1.dat", 1)}
    assert len(t.records) == 6 and len(t.meta_records) == 2


def test_launchers_are_not_ranks(capsys, tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    write_proc(root, 12, {b"/home/u/.bash_history": (1, 4096)}, exe="/usr/bin/bash")
    write_proc(root, 13, exe="/usr/bin/orterun", ppid=12)
    for r in range(2):
        write_proc(root, 20 + r, {f"/scratch/u/r{r}.dat".encode(): (10, 1000)}, rank=r,
                   rank_source="env", nprocs=2, ppid=13)  # fmt: skip
    write_job(root)
    t = load(str(root))
    assert t.job.nprocs == 2
    assert sorted(set(t.records.rank.tolist())) == [0, 1] and len(t.records) == 20
    c = t.counters["POSIX"]
    assert c.total("POSIX_BYTES_WRITTEN") == 20_000
    assert fid(b"/home/u/.bash_history") not in c.file_id.tolist()
    want = "launcher processes, not ranks: bash (pid 12): 4.0 KiB of I/O not analysed"
    assert want in t.warnings
    r = report_json(capsys, root)
    assert [(x["pid"], x["exe"], x["bytes"]) for x in r["processes"]["launchers"]] == [
        (12, "/usr/bin/bash", 4096), (13, "/usr/bin/orterun", 0)]  # fmt: skip


# ---------------------------------------------------------------------------
# 2. How every process ended
# ---------------------------------------------------------------------------


def killed_trace(root: Path) -> Path:
    root.mkdir()
    write_proc(root, 100, {b"/scratch/u/ok.dat": (10, 1000)}, rank=0, rank_source="env",
               nprocs=2)  # fmt: skip
    write_proc(root, 123, {b"/scratch/u/lost.dat": (8191, 10)}, rank=1, rank_source="env",
               nprocs=2, ended_by=None, unnamed=(0xDEAD,))  # fmt: skip
    write_job(root, exit_status=137, signal=None)
    return root


def test_records_of_a_killed_process_are_kept(tmp_path):
    t = load(str(killed_trace(tmp_path / "t")))
    # 8,191 writes + 1 open + 1 write to an unnamed file = 8,193 records on disk
    want = ("1 process (pid 123, pnode1-123-0) ended without a summary (killed or crashed): "
            "its 8,193 flushed operation records are kept (8,192 reads and writes analysed), "
            "its counters are missing")  # fmt: skip
    assert want in t.warnings
    lost = t.records.rank == 1
    assert int(lost.sum()) == 8192
    assert t.names[fid(b"/scratch/u/lost.dat")] == "/scratch/u/lost.dat"
    assert t.name(0xDEAD) == "<file 0xdead>"
    assert t.job.nprocs == 2


def test_process_accounting_in_every_output(capsys, tmp_path):
    root = killed_trace(tmp_path / "t")
    rc, out, _ = report(capsys, root, "--color", "never")
    assert rc == 0
    assert "2 process images" in out and "1 ended without a summary (killed or crashed)" in out
    assert "1 ended normally (exit 0: 1)" in out
    r = report_json(capsys, root)
    p = r["processes"]
    assert p["images"] == 2 and p["ended_normally"] == 1 and p["ended_abnormally"] == 1
    assert p["exit_codes"] == {"0": 1}
    assert [(a["pid"], a["records"]) for a in p["abnormal"]] == [(123, 8193)]
    assert r["partial"] is True
    rc, out, _ = report(capsys, root, "--csv")
    rows = [x for x in csv.DictReader(io.StringIO(out)) if x["check"] == "incomplete-data"]
    assert any("ended without a summary" in x["message"] for x in rows)
    assert any("2 process images" in x["message"] for x in rows)


def test_children_the_program_ran_are_named_by_their_executable(tmp_path):
    """Children of the program are counted apart, by executable name; one
    whose executable is not known is "unknown"."""
    root = tmp_path / "t"
    root.mkdir()
    write_proc(root, 100, {b"/scratch/u/a.dat": (2, 100)})
    write_proc(root, 101, ppid=100, exe="/usr/bin/uname")
    write_proc(root, 102, ppid=100, exe="")
    write_proc(root, 103, ppid=100, exe="/usr/bin/uname")
    write_job(root)
    text = load(str(root)).processes["summary"]
    assert "(exit 0: 1, 3 child processes the program ran: uname ×2, unknown)" in text


def test_the_chunk_cache_is_the_largest_a_process_opened_the_dataset_with(tmp_path):
    """Only HDF5 "chunk_cache" notes give a dataset's chunk cache: other
    properties and other kinds of note with bytes in them do not."""
    root = tmp_path / "t"
    root.mkdir()
    a, b = fid(b"/scratch/u/a.h5:/x"), fid(b"/scratch/u/a.h5:/y")
    notes = {0: [[str(a), "hdf5_property\tchunk_cache\tnslots=521 nbytes=1048576 w0=0.75"],
                 [str(b), "hdf5_property\tsieve_buf\tnbytes=99999999"],
                 [str(b), "mpiio_hint\tchunk_cache\tnbytes=99999999"],
                 [str(b), "hdf5_property"]],
             1: [[str(a), "hdf5_property\tchunk_cache\tnslots=521 nbytes=4194304 w0=0.75"],
                 [str(b), "hdf5_property\tchunk_cache\tnslots=521 nbytes=65536 w0=0.75"]],
             2: [[str(a), "hdf5_property\tchunk_cache\tnslots=521 nbytes=2097152 w0=0.75"]]}
    for rank, n in notes.items():
        write_proc(root, 100 + rank, {b"/scratch/u/a.h5": (1, 100)}, rank=rank,
                   rank_source="env", nprocs=3, extra={"notes": n})  # fmt: skip
    write_job(root)
    assert load(str(root)).job.hdf5_chunk_cache == {a: 4194304, b: 65536}


def test_all_processes_killed_is_still_a_report(capsys, tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    for r in range(2):
        write_proc(root, 50 + r, {f"/scratch/u/r{r}.dat".encode(): (4, 1000)}, rank=r,
                   rank_source="env", nprocs=2, ended_by=None)  # fmt: skip
    write_job(root, exit_status=143, signal=15)
    rc, out, err = report(capsys, root, "--color", "never")
    assert rc == 0, err
    assert "2 processes (pid 50, pnode1-50-0; pid 51, pnode1-51-0) ended without a summary" in out
    assert "program killed by SIGTERM" in out
    assert len(load(str(root)).records) == 8


def test_ended_at_mpi_finalize_is_normal(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    write_proc(root, 70, {b"/scratch/u/a.dat": (3, 100)}, rank=0, rank_source="mpi",
               ended_by="flush", exit_code=None)  # fmt: skip
    t = load(str(root))
    assert t.warnings == []
    assert t.processes["ended_normally"] == 1 and t.processes["ended_abnormally"] == 0


def test_runtime_warnings_overflows_and_nested_calls(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    write_proc(root, 80, {b"/scratch/u/a.dat": (3, 100)}, extra={
        "warnings": ["tracing disabled: cannot write the names file: No space left on device"],
        "overflows": {"aio": 3, "split": 0, "fapl": 2, "handles": 0}, "nested_calls": 5})
    w = "\n".join(load(str(root)).warnings)
    assert "tracing disabled: cannot write the names file: No space left on device" in w
    assert "3 asynchronous I/O operations (aio)" in w and "2 HDF5 file access property" in w
    assert "5 calls made by signal handlers" in w


def test_dropped_records_say_why(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    write_proc(root, 90, {b"/scratch/u/a.dat": (99, 100)}, rank=0, rank_source="env",
               extra={"records_dropped": 400, "max_records": 100})  # fmt: skip
    write_proc(root, 91, {b"/scratch/u/b.dat": (9, 100)}, rank=1, rank_source="env",
               extra={"records_dropped": 70, "max_records": 1000,
                      "warnings": ["tracing disabled: the record file was replaced"]})  # fmt: skip
    w = load(str(root)).warnings
    limit = [x for x in w if "beyond its limit" in x]
    assert limit == ["rank 0 (pid 90) kept 100 operation records and dropped 400 beyond its "
                     "limit of 100: per-operation views see part of the run (counters are exact)"]
    stopped = [x for x in w if "pid 91" in x and "lost" in x]
    assert stopped and "beyond" not in stopped[0] and "tracing stopped" in stopped[0]
    assert "the record file was replaced" in stopped[0] and "10 operation records" in stopped[0]


def test_record_counts_agree_with_the_file(tmp_path):
    """A summary that says more records than the file holds: the file's count is told."""
    root = tmp_path / "t"
    root.mkdir()
    write_proc(root, 95, {b"/scratch/u/a.dat": (99, 100)}, rank=0, rank_source="env",
               extra={"records": 150, "records_dropped": 50, "max_records": 150})  # fmt: skip
    w = "\n".join(load(str(root)).warnings)
    assert "kept 100 operation records" in w and "summary says 150" in w


def test_what_the_runtime_cannot_see_is_one_info_line(capsys, tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    write_proc(root, 60, {b"/scratch/u/m.dat": (2, 100)}, mmaps=3)
    r = report_json(capsys, root)
    info = r["processes"]["not_seen"]
    assert "mmap" in info and "3" in info
    for call in ("sendfile", "copy_file_range", "splice", "io_uring"):
        assert call in info
    _, out, _ = report(capsys, root, "--color", "never")
    assert sum(info in line for line in out.splitlines()) == 1
    root2 = serial_trace(tmp_path / "t2")
    assert "mmap" not in report_json(capsys, root2)["processes"]["not_seen"]


# ---------------------------------------------------------------------------
# 3. The program's exit status
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("job", "line"),
    [({"exit_status": 3, "signal": None}, "program failed: exit status 3"),
     ({"exit_status": 143, "signal": 15}, "program killed by SIGTERM"),
     ({"exit_status": 0, "signal": None}, None)],
)  # fmt: skip
def test_exit_status_from_job_json(capsys, tmp_path, job, line):
    root = serial_trace(tmp_path / "t", **job)
    rc, out, _ = report(capsys, root, "--color", "never")
    assert rc == 0
    top = out.splitlines()[:3]
    if line:
        assert any(line in x for x in top), out
    else:
        assert "program failed" not in out and "program killed" not in out
    r = report_json(capsys, root)
    assert r["job"]["exit_status"] == job["exit_status"]
    assert r["job"]["signal"] == job["signal"]
    rc, out, _ = report(capsys, root, "--color", "always")
    if line:
        assert f"\x1b[1;33m  {line}" in out or f"\x1b[1;33m{line}" in out


def test_exit_status_from_the_processes_without_job_json(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    write_proc(root, 100, {b"/scratch/u/a.dat": (3, 100)}, exit_code=4)
    write_proc(root, 101, {b"/scratch/u/b.dat": (3, 100)}, exit_code=0, ppid=100)
    t = load(str(root))
    assert t.job.exit_status == 4 and t.job.signal is None


def test_darshan_logs_have_no_exit_status(capsys):
    r = report_json(capsys, DARSHAN)
    assert r["job"]["exit_status"] is None and r["job"]["signal"] is None
    assert r["processes"] is None


# ---------------------------------------------------------------------------
# 4. File names that are bytes, shown safely
# ---------------------------------------------------------------------------

BAD = b"/scratch/u/\xff\xfe.dat"
ESC = b"/scratch/u/\x1b[31mRED\x1b[0m\n.dat"


def test_safe_name():
    assert safe_name("/a/b.dat") == "/a/b.dat"
    assert safe_name(BAD.decode("utf-8", "surrogateescape")) == "/scratch/u/\\xff\\xfe.dat"
    assert safe_name(ESC.decode()) == "/scratch/u/\\x1b[31mRED\\x1b[0m\\n.dat"
    assert safe_name("a\x7fb\x9bc\tq") == "a\\x7fb\\u009bc\\tq"
    assert safe_name("é→") == "é→"


def names_trace(root: Path, *, version: int = 2, raw_json: bool = False) -> Path:
    root.mkdir()
    # Many small writes to both files: the small-writes finding lists them.
    write_proc(root, 100, {BAD: (1500, 10), ESC: (1500, 10)}, rank=0, version=version,
               raw_json=raw_json)  # fmt: skip
    return root


@pytest.mark.parametrize(("version", "raw_json"), [(2, False), (1, True)])
def test_names_that_are_not_text(capsys, tmp_path, version, raw_json):
    root = names_trace(tmp_path / "t", version=version, raw_json=raw_json)
    t = load(str(root))
    assert os.fsencode(t.names[fid(BAD)]) == BAD
    rc, out, err = report(capsys, root, "--color", "never", "-v")
    assert rc == 0, err
    assert "\x1b" not in out and "\\xff\\xfe.dat" in out and "\\x1b[31mRED" in out
    rc, out, _ = report(capsys, root, "--csv")
    cells = [c for row in csv.reader(io.StringIO(out)) for c in row]
    assert any("\\xff\\xfe" in c for c in cells)
    assert not any("\x1b" in c or "\n" in c or "\r" in c for c in cells)
    r = report_json(capsys, root)
    paths = {e["path"] for f in r["findings"] for e in f["files"]}
    assert BAD.decode("utf-8", "surrogateescape") in paths
    assert ESC.decode() in paths


def test_names_in_the_html_page(tmp_path):
    from iopilot.checks import diagnose
    from iopilot.report.html import render_html

    page = render_html(diagnose(load(str(names_trace(tmp_path / "t")))))
    tag = '<script id="iopilot-data" type="application/json">'
    start = page.index(tag) + len(tag)
    doc = json.loads(page[start : page.index("</script>", start)])

    def strings(o):
        if isinstance(o, dict):
            return [s for k, v in o.items() for s in (k, *strings(v))]
        return [s for v in o for s in strings(v)] if isinstance(o, list) else [o]

    texts = [s for s in strings(doc) if isinstance(s, str)]
    assert not [s for s in texts if "\x1b" in s]
    assert safe_name(BAD.decode("utf-8", "surrogateescape")) in texts
    assert safe_name(ESC.decode()) in texts
    page.encode("utf-8")  # every character is encodable


def test_colour_codes_are_ours_only(capsys, tmp_path):
    root = names_trace(tmp_path / "t")
    _, out, _ = report(capsys, root, "--color", "always", "-v")
    assert "\x1b[31mRED" not in out and "\n.dat" not in out


# ---------------------------------------------------------------------------
# 5. Hostile files in place of trace files
# ---------------------------------------------------------------------------


def _plant(path: Path, kind: str) -> None:
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    else:
        with open(path, "wb") as f:
            f.truncate(100 * 2**30)  # 100 GiB, none of it on disk


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory", "sparse"])
@pytest.mark.parametrize("name", ["pnode1-100-0.rec", "pnode1-100-0.json", "pnode1-100-0.names",
                                  "job.json"])  # fmt: skip
def test_hostile_trace_files(tmp_path, name, kind):
    root = serial_trace(tmp_path / "t")
    victim = root / name
    _plant(victim, kind)
    # the limit catches a report that hangs on a FIFO, with room for a slow
    # interpreter (mutation runs trace every line)
    p = subprocess.run([sys.executable, "-m", "iopilot", "report", str(root)],
                       capture_output=True, text=True, timeout=180)  # fmt: skip
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert p.stderr.startswith(f"iopilot: error: {victim}: ")
    if kind == "sparse":
        assert "too large: 107,374,182,400 bytes, limit " in p.stderr
    else:
        assert "not a regular file" in p.stderr


# ---------------------------------------------------------------------------
# 6. Damaged files: one line, never an internal error
# ---------------------------------------------------------------------------


def _edit_json(edit):
    def mutate(root: Path) -> Path:
        p = next(root.glob("p*.json"))
        m = json.loads(p.read_text())
        edit(m)
        p.write_text(json.dumps(m))
        return p

    return mutate


def _edit_bytes(suffix: str, edit):
    def mutate(root: Path) -> Path:
        p = root / suffix if suffix == "job.json" else next(root.glob(f"p*{suffix}"))
        p.write_bytes(edit(p.read_bytes()))
        return p

    return mutate


def _edit_job(edit):
    def mutate(root: Path) -> Path:
        p = root / "job.json"
        m = json.loads(p.read_text())
        edit(m)
        p.write_text(json.dumps(m))
        return p

    return mutate


def _set(key, value):
    return lambda m: m.__setitem__(key, value)


def _first_record(edit):
    def f(data: bytes) -> bytes:
        rec = bytearray(data[64:112])
        edit(rec)
        return data[:64] + bytes(rec) + data[112:]

    return f


MUTATIONS = {
    "json missing t0": (_edit_json(lambda m: m.pop("t0")), "'t0'"),
    "json missing layers": (_edit_json(lambda m: m.pop("layers")), "'layers'"),
    "json missing counter_names": (_edit_json(lambda m: m.pop("counter_names")), "'counter_names'"),
    "json counter index": (_edit_json(lambda m: m["counters"][0][2].update({"999": 1})), "999"),
    "json fcounter index": (_edit_json(lambda m: m["counters"][0][3].update({"-1": 1.0})), "-1"),
    "json layer index": (_edit_json(lambda m: m["counters"][0].__setitem__(0, 9)), "layer"),
    "json rank type": (_edit_json(_set("rank", "zero")), "'rank'"),
    "json counters type": (_edit_json(_set("counters", {})), "'counters'"),
    "json counters row": (_edit_json(lambda m: m["counters"].append([0, "1"])), "counters"),
    "json counter value": (_edit_json(lambda m: m["counters"][0][2].update({"1": "x"})), "counter"),
    "json counter huge": (_edit_json(lambda m: m["counters"][0][2].update({"1": 10**30})),
                          "counter"),
    "json names type": (_edit_json(_set("names", [])), "'names'"),
    "json name id": (_edit_json(lambda m: m["names"].update({"x1": "/a"})), "names"),
    "json notes": (_edit_json(_set("notes", [[1]])), "'notes'"),
    "json layers type": (_edit_json(_set("layers", "POSIX")), "'layers'"),
    "json version type": (_edit_json(_set("version", "two")), "'version'"),
    "json t0 not finite": (_edit_json(_set("t0", float("nan"))), "'t0'"),
    "json overflows type": (_edit_json(_set("overflows", [1])), "'overflows'"),
    "json warnings type": (_edit_json(_set("warnings", "x")), "'warnings'"),
    "json cpu type": (_edit_json(_set("cpu", [0, 1])), "'cpu'"),
    "json cpu allowed": (_edit_json(_set("cpu", {"allowed": "0-1"})), "'cpu' allowed"),
    "json cpu launcher": (_edit_json(_set("cpu", {
        "allowed": [0], "online": 2, "ran_on": 0, "io_cpu_s": 0.0, "io_cpu_bytes": 0,
        "launcher": {"name": 1, "binding": ""}})), "'cpu' launcher"),
    "json thread cpus": (_edit_json(_set("write_behind", {"thread_cpus": [0], "shares_core": 1})),
                         "'write_behind' shares_core"),
    "json not an object": (_edit_bytes(".json", lambda d: b"[1, 2]"), "process summary"),
    "json format": (_edit_json(_set("format", "other")), "not an iopilot process summary"),
    "rec cut in header": (_edit_bytes(".rec", lambda d: d[:10]), "header"),
    "rec magic": (_edit_bytes(".rec", lambda d: b"\0" * 8 + d[8:]), "magic"),
    "rec record size": (_edit_bytes(".rec", lambda d: d[:12] + b"\x10\0\0\0" + d[16:]),
                        "record size"),
    "rec version 0": (_edit_bytes(".rec", lambda d: d[:8] + b"\0\0\0\0" + d[12:]), "version"),
    "rec layer code": (_edit_bytes(".rec", _first_record(lambda r: r.__setitem__(44, 77))),
                       "layer"),
    "rec op code": (_edit_bytes(".rec", _first_record(lambda r: r.__setitem__(45, 200))),
                    "operation"),
    "rec time": (_edit_bytes(".rec", _first_record(
        lambda r: r.__setitem__(slice(0, 8), struct.pack("<d", float("nan"))))), "time"),
    "names length past the end": (_edit_bytes(".names", lambda d: d[:8] + b"\xff\xff\0\0" + d[12:]),
                                  "past the end"),
    "names cut in an entry header": (_edit_bytes(".names", lambda d: d + b"\1\2\3"), "names"),
    "job not an object": (_edit_bytes("job.json", lambda d: b'"job"'), "job"),
    "job mounts": (_edit_job(_set("mounts", "/:ext4")), "'mounts'"),
    "job start": (_edit_job(_set("start", "yesterday")), "'start'"),
    "job command": (_edit_job(_set("command", 5)), "'command'"),
    "job exit status": (_edit_job(_set("exit_status", "3")), "'exit_status'"),
    "job not json": (_edit_bytes("job.json", lambda d: d[:20]), "job"),
}


@pytest.mark.parametrize("what", list(MUTATIONS))
def test_damaged_traces_are_one_line_errors(capsys, tmp_path, what):
    root = serial_trace(tmp_path / "t")
    mutate, needle = MUTATIONS[what]
    victim = mutate(root)
    rc, out, err = report(capsys, root)
    assert rc == 2, out
    assert err.count("\n") == 1 and err.startswith(f"iopilot: error: {victim}: "), err
    assert needle in err.removeprefix(f"iopilot: error: {victim}: "), err
    assert "internal error" not in err and "Traceback" not in err


@pytest.mark.parametrize("what", ["json missing t0", "json counter index", "json layer index",
                                  "rec magic", "rec layer code", "json rank type"])  # fmt: skip
def test_damaged_benchmark_traces(capsys, tmp_path, what):
    """The same damage to traces of the benchmark writer (format 3)."""
    from iopilot.bench.synthetic import write_trace

    root = write_trace(tmp_path / "t", 2000, ranks=4, files=2)
    mutate, needle = MUTATIONS[what]
    victim = mutate(root)
    rc, _, err = report(capsys, root)
    assert rc == 2 and err.count("\n") == 1 and err.startswith(f"iopilot: error: {victim}: ")
    assert needle in err and "internal error" not in err


# ---------------------------------------------------------------------------
# Real traced runs
# ---------------------------------------------------------------------------


def traced(trace: Path, *command: str, cwd: Path, env: dict | None = None):
    from iopilot.capture.run import library_path

    try:
        library_path()
    except Exception:
        pytest.skip("the runtime is not built")
    return subprocess.run([sys.executable, "-m", "iopilot", "run", "--trace-only", "--trace-dir",
                           str(trace), "--", *command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


KILLED = """
import os, signal
with open("killed.dat", "wb", buffering=0) as f:
    for _ in range(20000):
        f.write(b"x" * 100)
    os.kill(os.getpid(), signal.SIGTERM)
"""


def test_real_program_killed_by_a_signal(capsys, tmp_path):
    trace = tmp_path / "t"
    p = traced(trace, sys.executable, "-c", KILLED, cwd=tmp_path)
    assert p.returncode == 128 + signal.SIGTERM, p.stderr
    t = load(str(trace))
    assert (t.job.exit_status, t.job.signal) == (143, signal.SIGTERM)
    assert any("ended without a summary (killed or crashed)" in w for w in t.warnings)
    ids = [i for i, n in t.names.items() if n == str(tmp_path / "killed.dat")]
    assert ids, "the killed process's file is named from its .names file"
    written = int((t.records.file_id == ids[0]).sum())
    assert 8192 <= written <= 20000  # at least the first full buffer reached the disk
    rc, out, _ = report(capsys, trace, "--color", "never")
    assert rc == 0 and out.splitlines()[1] == "  program killed by SIGTERM"


@pytest.mark.skipif(not shutil.which("mpirun"), reason="mpirun not installed")
def test_real_launchers_are_not_ranks(tmp_path):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")  # fmt: skip
    trace = tmp_path / "t"
    script = ("mpirun -np 2 sh -c 'dd if=/dev/zero of=out.$OMPI_COMM_WORLD_RANK bs=10000 "
              "count=10 status=none'; exit 0")  # fmt: skip
    p = traced(trace, "bash", "-c", script, cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    t = load(str(trace))
    assert t.job.nprocs == 2 and set(t.records.rank.tolist()) == {0, 1}
    launchers = {os.path.basename(x["exe"]) for x in t.processes["launchers"]}
    assert "bash" in launchers
    for r in range(2):
        out = [i for i, n in t.names.items() if n == str(tmp_path / f"out.{r}")]
        assert out and int(t.records.length[t.records.file_id == out[0]].sum()) == 100_000


_LOAD_RSS = """
import resource, sys
from pathlib import Path
from iopilot.sources import load
def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
before = rss()
trace = load(sys.argv[1])
print(len(trace.records), rss() - before)
"""


def test_loading_takes_at_most_60_bytes_per_record(tmp_path):
    from iopilot.bench.synthetic import write_trace

    n = 1_000_000
    path = write_trace(tmp_path / "t", n)
    out = subprocess.run([sys.executable, "-c", _LOAD_RSS, str(path)], capture_output=True,
                         text=True, check=True).stdout.split()  # fmt: skip
    assert int(out[0]) == n
    assert int(out[1]) <= 60 * n, f"{int(out[1]) / n:.0f} bytes per record"


def test_newer_format_is_refused_by_the_reader_itself(tmp_path):
    from iopilot.errors import InputError
    from iopilot.sources import load

    root = serial_trace(tmp_path / "t")
    p = root / "pnode1-100-0.json"
    p.write_text(p.read_text().replace('"version": 2', '"version": 4'))
    with pytest.raises(InputError) as e:
        load(str(root))
    assert str(e.value) == f"{p}: written by a newer iopilot (format 4); upgrade iopilot"


@pytest.mark.parametrize(("notes", "ok"), [
    ([[str(fid(b"/data/out.dat")), "hint cb_nodes=2"]], True),
    ([], True),
    ([[str(fid(b"/data/out.dat"))]], False),                    # no text
    ([[str(fid(b"/data/out.dat")), 5]], False),                 # text not a string
    ([["not an id", "text"]], False),                                # no file id
    (["%016x text"], False),                                         # not a pair
])  # fmt: skip
def test_process_notes_are_checked(tmp_path, notes, ok):
    from iopilot.errors import InputError
    from iopilot.sources import load

    root = tmp_path / "t"
    root.mkdir()
    write_proc(root, 100, {b"/data/out.dat": (2, 100)}, extra={"notes": notes})
    if ok:
        assert len(load(str(root)).records) > 0
    else:
        with pytest.raises(InputError, match="'notes' entry 0 should be"):
            load(str(root))
