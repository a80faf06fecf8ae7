"""How a trace directory's process images ended, as the reader accounts for
them (sources/iopilot_trace.py ``accounting``), worked out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iopilot.sources.trace_accounting import accounting
from iopilot.sources.trace_procs import Proc


def proc(pid: int, rank: int | None, ended: str | None, code: int | None = 0, *,
         exe: str = "/bin/app", mmaps: int = 0, on_disk: int = 0, fs_bytes: int = 0) -> Proc:
    summary = None if ended is None else {"ended_by": ended, "exit_code": code, "exe": exe}
    return Proc(stem=f"h-{pid}", root=Path("/t"), version=2, pid=pid, ppid=1, image=0,
                 host="h", t0=0.0, t_end=1.0, written_rank=-1 if rank is None else rank,
                 known=rank is not None, summary=summary, rec_size=None, rank=rank,
                 mmaps=mmaps, on_disk=on_disk, fs_bytes=fs_bytes)  # fmt: skip


def test_every_way_of_ending_counted_and_told():
    procs = [
        proc(10, 0, "exit", 0, mmaps=2),
        proc(11, 1, "exit", 3),
        proc(12, 2, "_exit", None),
        proc(13, 3, "exec"),
        proc(14, 4, "flush"),
        proc(15, 5, None, on_disk=7),
        proc(16, None, "exit", 0, exe="/usr/bin/mpirun", fs_bytes=10),
        proc(17, None, "exit", 0, exe="/usr/bin/mpirun"),
        proc(18, None, "signal", exe="/bin/sh"),
    ]
    a = accounting(procs)
    assert a["summary"] == (
        "9 process images: 8 ended normally (exit 0: 3, exit 3: 1, exit: 1, exec: 1, "
        "after MPI_Finalize: 1, signal: 1), 1 ended without a summary (killed or crashed); "
        "3 launcher images (mpirun ×2, sh) not counted as ranks")
    assert a["images"] == 9 and a["ranks"] == 6
    assert a["ended_normally"] == 8 and a["ended_abnormally"] == 1
    assert a["ended_by"] == {"exit": 4, "_exit": 1, "exec": 1, "flush": 1, "none": 1,
                             "signal": 1}  # fmt: skip
    assert a["exit_codes"] == {"0": 3, "3": 1, "unknown": 1}
    assert a["abnormal"] == [{"stem": "h-15", "pid": 15, "host": "h", "rank": 5, "records": 7}]
    assert a["launchers"] == [
        {"stem": "h-16", "pid": 16, "exe": "/usr/bin/mpirun", "bytes": 10},
        {"stem": "h-17", "pid": 17, "exe": "/usr/bin/mpirun", "bytes": 0},
        {"stem": "h-18", "pid": 18, "exe": "/bin/sh", "bytes": 0},
    ]
    assert a["not_seen"] == (
        "not seen by the runtime: reads and writes through memory mapped with mmap "
        "(2 mmap calls on traced files), and data moved by sendfile, copy_file_range, "
        "splice or io_uring")


def test_one_image_one_launcher_one_mmap_in_the_singular():
    a = accounting([proc(1, 0, "exit", 0, mmaps=1), proc(2, None, "exit", 0, exe="/x/srun")])
    assert a["summary"] == ("2 process images: 2 ended normally (exit 0: 2); "
                            "1 launcher image (srun) not counted as ranks")  # fmt: skip
    assert "(1 mmap call on traced files)" in a["not_seen"]
    one = accounting([proc(1, 0, "exit", 0)])
    assert one["summary"] == "1 process image: 1 ended normally (exit 0: 1)"
    assert one["not_seen"] == ("not seen by the runtime: data moved by sendfile, "
                               "copy_file_range, splice or io_uring")  # fmt: skip
    assert one["abnormal"] == [] and one["launchers"] == [] and one["ranks"] == 1


def test_unknown_exit_codes_come_last_and_codes_sort_as_text():
    a = accounting([proc(4, 0, "_exit", None), proc(2, 1, "exit", 12), proc(3, 2, "exit", 2)])
    assert a["summary"] == "3 process images: 3 ended normally (exit 12: 1, exit 2: 1, exit: 1)"


def test_no_summary_at_all_has_no_details():
    a = accounting([proc(1, 0, None), proc(2, 1, None)])
    assert a["summary"] == ("2 process images: 0 ended normally, "
                            "2 ended without a summary (killed or crashed)")  # fmt: skip
    assert a["ended_by"] == {"none": 2} and a["exit_codes"] == {}


def test_more_than_five_launcher_programs_are_cut_short():
    procs = [proc(i, None, "exit", 0, exe=f"/bin/l{i}") for i in range(7)]
    procs.append(proc(9, None, "exit", 0, exe=""))  # no name known
    a = accounting(procs)
    assert a["summary"].endswith(
        "8 launcher images (l0, l1, l2, l3, l4, ...) not counted as ranks")
    assert a["ranks"] == 0


# ---------------------------------------------------------------------------
# Small pieces of the trace reader, at their edges


def test_hdf5_creates_count_as_opens_only_in_the_h5f_layer():
    from iopilot.sources.trace_counters import _h5f_name

    assert _h5f_name("H5F", "CREATES") == "OPENS"  # as Darshan counts them
    assert _h5f_name("H5D", "CREATES") == "CREATES"
    assert _h5f_name("POSIX", "CREATES") == "CREATES"
    assert _h5f_name("H5F", "READS") == "READS"


def test_record_file_size_limit_allows_one_cut_record_past_the_limit():
    from iopilot.sources.trace_procs import HEADER, RECORD, rec_limit

    assert rec_limit(0) == HEADER.itemsize + RECORD.itemsize
    assert rec_limit(10) == HEADER.itemsize + 11 * RECORD.itemsize


def test_record_limit_of_processes_without_a_summary(monkeypatch):
    from iopilot.sources.trace_procs import DEFAULT_MAX_RECORDS, max_records

    monkeypatch.delenv("IOPILOT_MAX_RECORDS", raising=False)
    assert max_records() == DEFAULT_MAX_RECORDS
    monkeypatch.setenv("IOPILOT_MAX_RECORDS", str(DEFAULT_MAX_RECORDS + 1))
    assert max_records() == DEFAULT_MAX_RECORDS + 1
    monkeypatch.setenv("IOPILOT_MAX_RECORDS", "10")  # never below the runtime's own
    assert max_records() == DEFAULT_MAX_RECORDS
    for junk in ("-5", "1e9", "٣", ""):  # not plain ASCII digits: the default
        monkeypatch.setenv("IOPILOT_MAX_RECORDS", junk)
        assert max_records() == DEFAULT_MAX_RECORDS


def _recs(**cols):
    from iopilot.sources.trace_procs import RECORD

    r = np.zeros(3, RECORD)
    for k, v in cols.items():
        r[k] = v
    return r


def test_record_checks_at_the_edges_of_each_code():
    from iopilot.errors import InputError
    from iopilot.sources.trace_records import N_OPS, _check_records

    _check_records(Path("p.rec"), _recs(layer=[0, 1, 4], op=[0, N_OPS - 1, 1]), 0, 5)  # all fine
    with pytest.raises(InputError, match=r"record 12 has layer code 5 \(5 layers\)"):
        _check_records(Path("p.rec"), _recs(layer=[0, 0, 5]), 10, 5)
    with pytest.raises(InputError, match=f"record 1 has operation code {N_OPS}$"):
        _check_records(Path("p.rec"), _recs(op=[0, N_OPS, 0]), 0, 5)
    with pytest.raises(InputError, match="record 7 has a"):
        _check_records(Path("p.rec"), _recs(end=[1.0, np.inf, 0.0]), 6, 5)


def test_job_description_fields_as_the_reader_keeps_them(tmp_path):
    import json

    from iopilot.errors import InputError
    from iopilot.sources.trace_procs import read_job_meta

    p = tmp_path / "job.json"
    assert read_job_meta(p) == {}  # none: nothing known
    p.write_text(json.dumps({"command": ["a", "b"], "start": 10.5, "end": 12, "exit_status": 3,
                             "signal": None, "mounts": [["/", "ext4"], ["/scratch", "lustre"]],
                             "other": 1}))  # fmt: skip
    assert read_job_meta(p) == {"command": ["a", "b"], "start": 10.5, "end": 12, "exit_status": 3,
                            "mounts": [("/", "ext4"), ("/scratch", "lustre")]}  # fmt: skip
    p.write_text(json.dumps({"start": 1.0}))
    assert read_job_meta(p) == {"start": 1.0}
    p.write_text(json.dumps({"start": "soon"}))
    with pytest.raises(InputError, match="job description") as e:
        read_job_meta(p)
    assert "start" in str(e.value)


def _summary(**kw):
    base = {"nprocs": 4, "notes": [], "cmdline": [], "exe": "/bin/app", "env": {},
            "ended_by": "exit", "exit_code": 0}  # fmt: skip
    return base | kw


def _ranked(pid, rank, t0=100.0, t_end=5.0, host="h", version=2, **summary):
    p = proc(pid, rank, "exit")
    p.summary = None if summary.get("none") else _summary(**summary)
    p.t0, p.t_end, p.host, p.version = t0, t_end, host, version
    return p


def test_job_from_the_summaries_when_job_json_says_nothing():
    from iopilot.sources.iopilot_trace import _job

    procs = [
        _ranked(2, 1, t0=100.0, t_end=9.0, host="n2", cmdline=["./app", "-x"],
                notes=[[7, "mpiio_hint\tcb_nodes\t2"], [7, "hdf5\tx\ty"], [7, "bare"]]),
        _ranked(1, 0, t0=101.0, t_end=4.0, host="n1", cmdline=[], exe="/bin/zero",
                env={"OMP_NUM_THREADS": 4}, notes=[[3, "mpiio_hint\tromio_cb_write\tenable"]]),
        _ranked(3, None, t0=99.0, t_end=1.0, version=3, exe="/usr/bin/mpirun"),
    ]
    j = _job({}, procs, job_start=99.5)
    # rank 0's, though rank 1 started first; no command line, so its program
    assert j.executable == "/bin/zero"
    assert j.metadata == {"OMP_NUM_THREADS": "4"}
    assert j.hints == {"cb_nodes": "2", "romio_cb_write": "enable"}
    assert (j.start, j.end, j.runtime) == (99.5, 109.0, 9.5)  # the last image ends at 100 + 9
    assert j.nprocs == 4 and j.hosts == {1: "n2", 0: "n1"} and j.mounts == []
    assert j.format == "iopilot 3" and j.writer == "libiopilot (3 process image(s))"
    alone = _job({}, [_ranked(1, None, exe="/bin/sh")], job_start=100.0)
    assert alone.nprocs == 1 and alone.executable == "/bin/sh"  # no rank at all: one


def test_job_json_wins_where_it_speaks():
    from iopilot.sources.iopilot_trace import _job

    procs = [_ranked(1, 0, cmdline=["./app"]), _ranked(2, 5, nprocs=2)]
    meta = {"command": ["srun", "./app"], "start": 50.0, "end": 60.5,
            "mounts": [("/", "ext4")], "exit_status": 1}  # fmt: skip
    j = _job(meta, procs, job_start=99.0)
    assert j.executable == "srun ./app" and (j.start, j.end, j.runtime) == (50.0, 60.5, 10.5)
    assert j.mounts == [("/", "ext4")] and j.exit_status == 1
    assert j.nprocs == 6  # rank 5 was seen, whatever a summary says
    assert j.hints is None  # no hint noted: none, not an empty table
    bare = _job({}, [_ranked(1, 0, cmdline=["./a", "b"])], job_start=100.0)
    assert bare.executable == "./a b" and bare.runtime == 5.0


def _s(**kw):
    base = {"ended_by": "exit", "exit_code": 0, "exe": "/bin/app", "records": 10,
            "records_dropped": 0, "max_records": None, "warnings": [], "stats_missing": 0,
            "overflows": {}, "nested_calls": 0}  # fmt: skip
    return base | kw


def _with(p, on_disk=10, rec_size=None, cut=False, **summary):
    p.summary, p.on_disk, p.rec_size, p.cut = _s(**summary), on_disk, rec_size, cut
    return p


def test_every_warning_about_what_a_trace_lacks():
    from iopilot.sources.trace_accounting import trace_warnings

    k1, k2 = proc(15, 5, None, on_disk=7), proc(16, 6, None, on_disk=2)
    k1.kept, k2.kept = 3, 2
    procs = [
        k1, k2,
        _with(proc(30, None, "exit", fs_bytes=2048), exe="/usr/bin/mpirun"),
        _with(proc(1, 0, "exit"), on_disk=100, rec_size=5, records=120, records_dropped=30,
              max_records=150),
        _with(proc(2, 1, "exit"), records_dropped=5, warnings=["out of memory"]),
        _with(proc(3, 2, "exit"), on_disk=3, rec_size=1000, cut=True, records=4,
              stats_missing=2, overflows={"aio": 3, "odd": 1}, nested_calls=4),
    ]  # fmt: skip
    tail = ": per-operation views see part of the run (counters are exact)"
    assert trace_warnings(procs) == [
        "2 processes (pid 15, h-15; pid 16, h-16) ended without a summary (killed or crashed): "
        "their 9 flushed operation records are kept (5 reads and writes analysed), their "
        "counters are missing",
        "launcher processes, not ranks: mpirun (pid 30): 2.0 KiB of I/O not analysed",
        "rank 0 (pid 1) kept 100 operation records (its summary says 120) and dropped 30 "
        "beyond its limit of 150" + tail,
        'rank 1 (pid 2) kept 10 operation records and lost 5 because tracing stopped (runtime '
        'warning: "out of memory")' + tail,
        "rank 2 (pid 3): its record file holds 3 operation records, its summary says 4: the "
        "file was cut short" + tail,
        "h-3.rec: the last record is cut short and was dropped",
        "rank 2 (pid 3) ran out of table memory for 2 file(s): their counters are missing",
        "rank 1 (pid 2): runtime warning: out of memory",
        "rank 2 (pid 3): a runtime table was full: 3 asynchronous I/O operations (aio) could "
        "not be followed, their I/O is missing or incomplete",
        "rank 2 (pid 3): a runtime table was full: 1 odd could not be followed, their I/O is "
        "missing or incomplete",
        "rank 2 (pid 3): 4 calls made by signal handlers while the runtime was busy were passed "
        "through, not counted",
    ]  # fmt: skip


def test_warnings_at_their_edges():
    from iopilot.sources.trace_accounting import trace_warnings

    lone = proc(9, 0, None)
    lone.cut = True
    assert trace_warnings([lone]) == [
        "1 process (pid 9, h-9) ended without a summary (killed or crashed): it flushed no "
        "operation records, its counters are missing",
        "h-9.rec: the last record is cut short and was dropped"]  # fmt: skip
    six = [proc(i, i, None, on_disk=1) for i in range(6)]
    for p in six:
        p.kept = 1
    assert "(pid 0, h-0; pid 1, h-1; pid 2, h-2; pid 3, h-3; pid 4, h-4; and 1 more)" in (
        trace_warnings(six)[0])
    # one short of the limit: records were lost, not dropped at the limit
    short = _with(proc(1, 0, "exit"), records=120, records_dropped=29, max_records=150)
    said = trace_warnings([short])[0]
    assert "lost 29 because tracing stopped (the runtime left no warning)" in said
    # the record file as long as the summary says, no drop: nothing to say
    assert trace_warnings([_with(proc(1, 0, "exit"), rec_size=99)]) == []
    launchers = [_with(proc(i, None, "exit", fs_bytes=1024), exe=f"/b/l{i}") for i in range(7)]
    assert trace_warnings(launchers)[0].endswith(
        "l4 (pid 4): 1.0 KiB, and 2 more: 2.0 KiB of I/O not analysed")


def test_exit_status_of_the_job():
    from iopilot.sources.trace_accounting import exit_status

    assert exit_status({"exit_status": 3, "signal": None}, []) == (3, None)
    assert exit_status({"exit_status": -9}, []) == (137, 9)  # killed by signal 9
    a = proc(1, 1, "exit", 4)
    b = proc(2, 0, "exit", 0)
    b2 = proc(2, 0, "exit", 5)  # a later image of the same process
    b2.image = 1
    gone = proc(3, 2, None)  # no summary: no code
    child = proc(4, 3, "exit", 7)
    for p in (a, b, b2, gone):
        p.ppid = 99  # started by the launcher, which was not traced
    child.ppid = 2  # started by another traced process: not the program's own
    assert exit_status({}, [a, b, b2, gone, child]) == (5, None)  # rank 0's last image first
    assert exit_status({}, [a, b, gone]) == (4, None)  # the first non-zero code
    ok = [proc(1, 0, "exit", 0), proc(2, 1, "exit", 0)]
    for p in ok:
        p.ppid = 99
    assert exit_status({}, ok) == (0, None)
    assert exit_status({}, [gone]) == (None, None)


def test_a_launcher_without_a_known_program_is_unknown():
    a = accounting([proc(1, 0, "exit", 0), proc(2, None, "exit", 0, exe="")])
    assert a["summary"].endswith("1 launcher image (unknown) not counted as ranks")


def _row(row, layers=("POSIX", "STDIO")):
    from iopilot.sources.checked import Fields
    from iopilot.sources.trace_procs import _counter_row

    s = {"layers": list(layers), "counter_names": ["OPENS", "READS"],
         "fcounter_names": ["F_READ_TIME"]}  # fmt: skip
    return _counter_row(Fields({}, Path("p.json"), "summary"), s, 3, row)


def test_a_counters_row_at_the_edges_of_its_codes():
    from iopilot.errors import InputError

    assert _row([1, "16", {"1": 5}, {"0": 0.5}]) == (1, 16, {1: 5}, {0: 0.5})
    assert _row([0, 7, {}, {}]) == (0, 7, {}, {})
    for row, says in (
        ([2, 7, {}, {}], "'counters' row 3: layer code 2 is out of range (2 layers)"),
        ([-1, 7, {}, {}], "layer code -1 is out of range"),
        ([0, 7, {"2": 1}, {}], "'counters' row 3: counter index '2' is out of range "
                               "(2 counters)"),
        ([0, 7, {}, {"1": 1.0}], "counter index '1' is out of range (1 counters)"),
        ([0, 7, {"x": 1}, {}], "counter index 'x' is out of range"),
        ([0, 7, {"0": 1.5}, {}], "counter OPENS should be an integer, not a number"),
        ([0, 7, {}, {"0": "fast"}], "counter F_READ_TIME should be a finite number, not a string"),
        ([0, 7, [], {}], "counters should be an object"),
        ([0, "x", {}, {}], "file id 'x' is not a number"),
        ([0, 7, {}], "'counters' row 3 should be [layer, file id, {...}, {...}]"),
    ):  # fmt: skip
        with pytest.raises(InputError) as e:
            _row(row)
        assert says in str(e.value), (row, str(e.value))


def test_file_system_bytes_and_mmaps_from_a_summary():
    from iopilot.sources.trace_counters import summary_totals

    p = proc(1, 0, "exit")
    p.summary = {"counter_names": ["OPENS", "MMAPS", "BYTES_READ", "BYTES_WRITTEN"],
                 "layers": ["POSIX", "MPIIO", "STDIO"],
                 "counters": [[0, 1, {"1": 2, "2": 100, "3": 50}, {}],
                              [0, 2, {"2": 7, "0": 3}, {}],
                              [1, 1, {"2": 1000, "1": 9}, {}],  # MPI-IO: not the file system's
                              [2, 3, {"3": 5}, {}]]}  # fmt: skip
    # counter keys are indices once the summary is checked
    for row in p.summary["counters"]:
        row[2] = {int(k): v for k, v in row[2].items()}
    p.fs_bytes, p.mmaps = 99, 99  # counted afresh
    summary_totals(p)
    assert (p.fs_bytes, p.mmaps) == (162, 2)
    p.summary["counter_names"] = ["OPENS", "NOT_MMAPS", "BYTES_READ", "BYTES_WRITTEN"]
    summary_totals(p)
    assert (p.fs_bytes, p.mmaps) == (162, 0)
    gone = proc(2, 0, None)
    gone.fs_bytes = 4
    summary_totals(gone)
    assert gone.fs_bytes == 4  # nothing to count from


def test_names_file_entries_at_the_end_of_the_file(tmp_path):
    import struct

    from iopilot.errors import InputError
    from iopilot.sources.trace_procs import read_names

    def entry(i: int, name: bytes, pad: bool = True) -> bytes:
        return struct.pack("<QII", i, len(name), 0) + name + (b"\0" * (-len(name) % 8) if pad
                                                              else b"")  # fmt: skip

    p = tmp_path / "p.names"
    p.write_bytes(entry(5, b"/a/b") + entry(6, b"") + entry(7, b"/data/x.h5", pad=False))
    assert read_names(p) == {5: "/a/b", 6: "", 7: "/data/x.h5"}  # ends exactly at the name
    whole = entry(5, b"/a/b")
    p.write_bytes(whole + entry(6, b"/c")[:16])  # the last entry is exactly its 16-byte head
    with pytest.raises(InputError, match="the entry at byte 24 has a 2-byte name, past the end "
                                         r"of the file \(40 bytes\)"):  # fmt: skip
        read_names(p)
    p.write_bytes(whole + entry(6, b"/c")[:15])
    with pytest.raises(InputError, match="the entry at byte 24 is cut short"):
        read_names(p)
    p.write_bytes(b"")
    assert read_names(p) == {}
