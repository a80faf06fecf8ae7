"""Call sites in iopilot traces (format 3): records name a site of their
process's summary; the reader merges the sites of all ranks into
``Trace.sites`` and turns every record's id into a row of it.

Traces are written here from docs/trace-format.md, not by the reader's
own definitions.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from iopilot.errors import InputError
from iopilot.model import OP_WRITE, Sites
from iopilot.sources import load
from rawtrace import RawProc, read_records

HEAD = struct.Struct("<QIIqqdqqQ")  # magic version size rank pid t0 ppid image reserved
REC3 = struct.Struct("<ddqqQIBBHII")  # ... thread layer op flags site reserved
REC2 = struct.Struct("<ddqqQIBBH")
MAGIC = 0x31505249504F4921
T0 = 1_700_000_000.0
OPEN = 2
FILE = 7
EXE = "/opt/app/bin/app"


def write_proc(root: Path, rank: int, ops: list[tuple[int, int, int, int]], *,
               sites: list | None = None, modules: list | None = None, version: int = 3,
               summary: bool = True, extra: dict | None = None) -> Path:  # fmt: skip
    """One rank's image; ``ops`` are (op, length, thread, site id)."""
    stem = root / f"pnode-{100 + rank}-0"
    rec = REC3 if version >= 3 else REC2
    body, t = [], 0.001
    for k, (op, length, thread, site) in enumerate(ops):
        t += 1e-3
        fields = (t, t + 1e-4, k * 100 if length else -1, length, FILE, thread, 0, op, 0)
        body.append(rec.pack(*fields, site, 0) if version >= 3 else rec.pack(*fields))
    # the header knows the rank when a launcher variable gave it
    head = HEAD.pack(MAGIC, version, rec.size, -1 if summary else rank, 100 + rank, T0, 1, 0, 0)
    (stem.parent / f"{stem.name}.rec").write_bytes(head + b"".join(body))
    name = b"/data/out.dat"
    (stem.parent / f"{stem.name}.names").write_bytes(
        struct.pack("<QII", FILE, len(name), 0) + name + b"\0" * (-len(name) % 8))
    if not summary:
        return stem
    meta = {
        "format": "iopilot-process", "version": version, "image": 0, "rank": rank, "nprocs": 2,
        "rank_source": "mpi", "mpi": True, "pid": 100 + rank, "ppid": 1, "host": "node",
        "t0": T0, "t_end": t + 0.01, "ended_by": "exit", "exit_code": 0, "exe": EXE,
        "cmdline": [EXE], "records": len(body), "records_dropped": 0,
        "max_records": 50_000_000, "stats_missing": 0, "warnings": [], "threads": 2,
        "execs": 0, "env": {}, "layers": ["POSIX", "STDIO", "MPIIO", "H5F", "H5D"],
        "counter_names": ["WRITES"], "fcounter_names": [], "counters": [],
        "names": {str(FILE): name.decode()}, "notes": [],
    }  # fmt: skip
    if version >= 3:
        meta["modules"] = modules if modules is not None else [
            {"path": EXE, "base": 0x5555_5555_4000, "build_id": "ab12"},
            {"path": "/usr/lib/libhdf5.so.310", "base": 0x7F00_0000_0000, "build_id": ""}]
        meta["sites"] = sites if sites is not None else SITES
    meta.update(extra or {})
    (stem.parent / f"{stem.name}.json").write_text(json.dumps(meta))
    return stem


SITES = [
    {"id": 1, "frames": [[0, 0x1234], [0, 0x1300]], "count": 3, "bytes": 300, "time": 0.5},
    {"id": 2, "python": [["/home/u/analysis.py", 42, "save_rows"],
                         ["/home/u/analysis.py", 60, "main"]],
     "count": 1, "bytes": 100, "time": 0.25},
    {"id": 3, "frames": [[1, 0x9999]], "library": True, "count": 1, "bytes": 0, "time": 0.125},
]  # fmt: skip
OPS = [(OPEN, 0, 0, 3), (OP_WRITE, 100, 0, 1), (OP_WRITE, 100, 1, 1), (OP_WRITE, 100, 1, 2),
       (OP_WRITE, 100, 0, 1), (OP_WRITE, 100, 0, 0)]  # fmt: skip


def two_ranks(root: Path, **kw) -> Path:
    root.mkdir()
    write_proc(root, 0, OPS, **kw)
    # rank 1 numbers the same sites otherwise, and has one of its own
    other = [dict(SITES[0], id=5), dict(SITES[1], id=1),
             {"id": 2, "frames": [[0, 0x2000]], "count": 1, "bytes": 7, "time": 0.0}]
    write_proc(root, 1, [(OP_WRITE, 100, 0, 5), (OP_WRITE, 7, 0, 2), (OP_WRITE, 100, 0, 1)],
               sites=other, **kw)  # fmt: skip
    return root


def rows_of(t, rank: int) -> list[str]:
    r = t.records
    return [t.sites.label(s) for s in r.site[r.rank == rank]]


def test_sites_of_ranks_merge_into_one_table(tmp_path):
    t = load(str(two_ranks(tmp_path / "t")))
    s = t.sites
    assert isinstance(s, Sites)
    # row 0 unknown, then the first rank's three sites, then the second's new one
    assert len(s) == 5 and s.lang.tolist() == ["", "native", "python", "native", "native"]
    assert s.module[1] == EXE and s.offset[1] == 0x1234 and s.offset[4] == 0x2000
    assert (s.file[2], s.line[2], s.function[2]) == ("/home/u/analysis.py", 42, "save_rows")
    assert s.module[2] == "" and s.offset[2] == -1
    # counts, bytes and time summed over the ranks that share the site
    assert s.count.tolist() == [0, 6, 2, 1, 1]
    assert s.bytes.tolist() == [0, 600, 200, 0, 7]
    assert s.time.tolist() == [0.0, 1.0, 0.5, 0.125, 0.0]
    assert s.caller[2] == "analysis.py:60 main"
    assert s.library.tolist() == [False, False, False, True, False]
    # the binaries are not on this machine
    assert s.note[1] == "binary not found" and s.label(1) == "app+0x1234"
    assert s.note[3].startswith("no frame of the program") and "binary not found" in s.note[3]
    # every record points at the row of its own process's id
    assert rows_of(t, 0) == ["analysis.py:42 save_rows" if x == 2 else s.label(x)
                             for x in (1, 1, 2, 1, 0)]  # fmt: skip
    assert t.records.site[t.records.rank == 0].tolist() == [1, 1, 2, 1, 0]
    assert t.records.site[t.records.rank == 1].tolist() == [1, 4, 2]
    assert t.meta_records.site.tolist() == [3]
    assert t.records.thread[t.records.rank == 0].tolist() == [0, 1, 1, 0, 0]
    assert t.records.site.dtype == np.uint16 and t.records.thread.dtype == np.uint16  # 5 sites


def test_chunks_without_threads_or_sites_leave_their_zeros(tmp_path, monkeypatch):
    """Chunks whose threads or sites are all 0 skip those columns (zero
    pages cost no memory); the rows of the others are still in place."""
    import iopilot.sources.trace_records as tr

    monkeypatch.setattr(tr, "CHUNK", 2)
    t = load(str(two_ranks(tmp_path / "t")))
    assert t.records.site[t.records.rank == 0].tolist() == [1, 1, 2, 1, 0]
    assert t.records.thread[t.records.rank == 0].tolist() == [0, 1, 1, 0, 0]
    assert t.records.site[t.records.rank == 1].tolist() == [1, 4, 2]


def test_labels():
    s = Sites.of([
        ("", 0, "", "", -1, "", "", 0, 0, 0.0, False, ""),
        ("/src/main.c", 17, "write_rows", "/bin/prog", 0x1234, "native", "", 1, 1, 0.0, False, ""),
        ("", 0, "write_rows", "/bin/prog", 0x1234, "native", "n", 1, 1, 0.0, False, ""),
        ("", 0, "", "/bin/prog", 0x1234, "native", "n", 1, 1, 0.0, False, ""),
        ("", 0, "H5FD__sec2_write", "/lib/libhdf5.so", 0x99, "native", "n", 1, 1, 0.0, True, ""),
        ("/a/analysis.py", 42, "save_rows", "", -1, "python", "", 1, 1, 0.0, False, ""),
    ])  # fmt: skip
    assert [s.label(i) for i in range(len(s))] == [
        "unknown call site", "main.c:17 write_rows", "write_rows (prog+0x1234)", "prog+0x1234",
        "H5FD__sec2_write in libhdf5.so", "analysis.py:42 save_rows"]  # fmt: skip
    assert len(Sites.unknown()) == 1 and Sites.unknown().label(0) == "unknown call site"


def test_format_2_trace_has_no_sites(tmp_path):
    """Format 2 still loads: every record's site is 0 and Trace.sites is None."""
    root = tmp_path / "t"
    root.mkdir()
    stem = write_proc(root, 0, [(o, n, th, 0) for o, n, th, _ in OPS], version=2)
    assert all(r.site == 0 for r in read_records(stem.with_suffix(".rec")))
    t = load(str(root))
    assert t.sites is None and len(t.records) == 5
    assert not t.records.site.any() and t.records.thread.tolist() == [0, 1, 1, 0, 0]


def test_rawtrace_reads_format_3(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    stem = write_proc(root, 0, OPS)
    recs = read_records(stem.with_suffix(".rec"))
    assert [r.site for r in recs] == [3, 1, 1, 2, 1, 0] and recs[2].thread == 1
    raw = RawProc(stem.with_suffix(".json"))
    assert raw.sites[2]["python"][0] == ["/home/u/analysis.py", 42, "save_rows"]
    assert raw.modules[0]["path"] == EXE and [r.site for r in raw.records] == [3, 1, 1, 2, 1, 0]


def test_killed_process_sites_are_unknown(tmp_path):
    """A process without its summary has no site table: its records' sites
    are unknown, whatever ids they carry; the others' are kept."""
    root = tmp_path / "t"
    root.mkdir()
    write_proc(root, 0, OPS)
    write_proc(root, 1, [(OP_WRITE, 100, 0, 9)], summary=False)
    t = load(str(root))
    assert t.records.site[t.records.rank == 1].tolist() == [0]
    assert t.records.site[t.records.rank == 0].tolist() == [1, 1, 2, 1, 0]


@pytest.mark.parametrize(("ended_by", "ok"), [("exit", False), ("flush", True)])
def test_record_naming_a_site_beyond_the_summary(tmp_path, ended_by, ok):
    """An id beyond the largest the summary lists is a damaged record file;
    unless the summary was written before the process ended (MPI_Finalize):
    then the site is unknown, and the warnings say how many records."""
    root = tmp_path / "t"
    root.mkdir()
    stem = write_proc(root, 0, [*OPS, (OP_WRITE, 1, 0, 4)], extra={"ended_by": ended_by})
    if ok:
        t = load(str(root))
        assert t.records.site.tolist() == [1, 1, 2, 1, 0, 0]
        assert "rank 0 (pid 100): 1 operation records name a call site its summary does not " \
               "list: shown as unknown" in t.warnings
        return
    with pytest.raises(InputError) as e:
        load(str(root))
    assert str(e.value) == (f"{stem}.rec: damaged record file: record 6 has call-site id 4, "
                            "beyond those its process summary lists (3)")  # fmt: skip


def test_record_naming_a_site_the_summary_left_out(tmp_path):
    """An id below the largest listed but not listed is unknown and said."""
    root = tmp_path / "t"
    root.mkdir()
    sites = [*SITES, dict(SITES[0], id=9)]
    write_proc(root, 0, [*OPS, (OP_WRITE, 1, 0, 4), (OP_WRITE, 1, 0, 9)], sites=sites)
    t = load(str(root))
    assert t.records.site.tolist() == [1, 1, 2, 1, 0, 0, 1]
    assert [w for w in t.warnings if "1 operation records name a call site" in w]
    assert not [w for w in load(str(two_ranks(tmp_path / "u"))).warnings if "call site" in w]


def test_frames_outside_any_module_and_sites_without_frames(tmp_path):
    """Module -1: an address the runtime found in no module, shown as it
    is; a site without frames is unknown (row 0), its counts kept there."""
    root = tmp_path / "t"
    root.mkdir()
    sites = [{"id": 1, "frames": [[-1, 0x7F12_3456_7890]], "count": 2, "bytes": 3, "time": 0.5},
             {"id": 2, "frames": [], "count": 4, "bytes": 5, "time": 0.25},
             {"id": 3, "python": [], "count": 1, "bytes": 1, "time": 0.25},
             {"id": 4, "frames": [[-1, 2**64 - 1]], "count": 1, "bytes": 0, "time": 0.0}]
    write_proc(root, 0, [(OP_WRITE, 1, 0, 1), (OP_WRITE, 1, 0, 2), (OP_WRITE, 1, 0, 3)],
               sites=sites)  # fmt: skip
    t = load(str(root))
    s = t.sites
    assert len(s) == 3 and t.records.site.tolist() == [1, 0, 0]
    assert s.label(1) == "0x7f1234567890" and s.note[1] == "address in no module the runtime knew"
    assert s.label(2) == "0xffffffffffffffff"
    assert (s.count[0], s.bytes[0], s.time[0]) == (5, 6, 0.5)


def test_counts_past_int64_summed_over_ranks_stay_in_the_column(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    big = [dict(SITES[0], count=2**63 - 1, bytes=2**63 - 1)]
    for rank in range(2):
        write_proc(root, rank, [(OP_WRITE, 1, 0, 1)], sites=big)
    t = load(str(root))
    assert t.sites.count[1] == 2**63 - 1 and t.sites.bytes[1] == 2**63 - 1


def test_a_module_loaded_high_is_read(tmp_path):
    """The runtime writes a load address as unsigned 64 bits."""
    root = tmp_path / "t"
    root.mkdir()
    write_proc(root, 0, [(OP_WRITE, 1, 0, 1)], sites=[SITES[0]],
               modules=[{"path": EXE, "base": 2**64 - 4096, "build_id": ""}])  # fmt: skip
    assert load(str(root)).sites.module[1] == EXE


def test_sparse_site_ids(tmp_path):
    """Ids need not be dense: large ones go through a sorted search."""
    root = tmp_path / "t"
    root.mkdir()
    big = 3_000_000_000
    sites = [dict(SITES[0], id=big), dict(SITES[1], id=7)]
    write_proc(root, 0, [(OP_WRITE, 1, 0, big), (OP_WRITE, 1, 0, 7), (OP_WRITE, 1, 0, 0)],
               sites=sites)  # fmt: skip
    t = load(str(root))
    assert t.records.site.tolist() == [1, 2, 0]
    write_proc(root, 0, [(OP_WRITE, 1, 0, big + 1)], sites=sites)
    with pytest.raises(InputError, match=f"call-site id {big + 1}"):
        load(str(root))


def _sites(edit):
    return lambda: edit([json.loads(json.dumps(s)) for s in SITES])


BAD_SITES = {
    "not a list": ({"sites": {"1": 2}}, "'sites' should be an array"),
    "entry not an object": ({"sites": [1]}, "'sites' entry 0 should be an object"),
    "id zero": ({"sites": [dict(SITES[0], id=0)]}, "'sites' entry 0: id 0 is not an id"),
    "id too big": ({"sites": [dict(SITES[0], id=2**32)]}, "is not an id"),
    "id twice": ({"sites": [SITES[0], dict(SITES[1], id=1)]}, "id 1 is listed twice"),
    "no frames": ({"sites": [{"id": 1, "count": 1}]}, "either native 'frames' or 'python'"),
    "both": ({"sites": [dict(SITES[0], python=SITES[1]["python"])]}, "either native"),
    "module out of range": ({"sites": [dict(SITES[0], frames=[[2, 5]])]},
                            "'sites' entry 0: module index 2 is out of range (2 modules)"),
    "module below -1": ({"sites": [dict(SITES[0], frames=[[-2, 5]])]}, "module index -2"),
    "offset too big": ({"sites": [dict(SITES[0], frames=[[0, 2**64]])]}, "frames should be"),
    "offset true": ({"sites": [dict(SITES[0], frames=[[0, True]])]}, "frames should be"),
    "negative offset": ({"sites": [dict(SITES[0], frames=[[0, -5]])]},
                        "frames should be [module index, offset]"),
    "python frame": ({"sites": [dict(SITES[1], python=[["a.py", "42", "f"]])]},
                     "python frames should be [file, line, function]"),
    "python line": ({"sites": [dict(SITES[1], python=[["a.py", 2**31, "f"]])]},
                    "python frames should be"),
    "count": ({"sites": [dict(SITES[0], count=-1)]}, "count and bytes non-negative"),
    "time": ({"sites": [dict(SITES[0], time="1s")]}, "time a non-negative number"),
    "library": ({"sites": [dict(SITES[0], library="yes")]}, "library should be true or false"),
    "modules not a list": ({"modules": {}}, "'modules' should be an array"),
    "module path": ({"modules": [{"path": 5}]}, "'modules' entry 0 should be"),
    "module build id": ({"modules": [{"path": "/a", "build_id": 5}]}, "'modules' entry 0"),
    "module base": ({"modules": [{"path": "/a", "base": -1}]}, "'modules' entry 0"),
}  # fmt: skip


@pytest.mark.parametrize("what", list(BAD_SITES))
def test_damaged_sites_are_one_line_errors(tmp_path, what):
    root = tmp_path / "t"
    root.mkdir()
    extra, needle = BAD_SITES[what]
    stem = write_proc(root, 0, [(OP_WRITE, 1, 0, 0)], extra=extra)
    with pytest.raises(InputError) as e:
        load(str(root))
    msg = str(e.value)
    assert msg.startswith(f"{stem}.json: damaged process summary: ") and "\n" not in msg
    assert needle in msg, msg


def test_the_site_column_takes_two_bytes_while_the_table_fits_them():
    from iopilot.sources.trace_records import RecordSink

    assert RecordSink(10, sites=1 << 16).cols["site"].dtype == np.uint16  # rows 0 .. 65535
    assert RecordSink(10, sites=(1 << 16) + 1).cols["site"].dtype == np.uint32
    assert RecordSink(0, sites=5).records().site.dtype == np.uint16
