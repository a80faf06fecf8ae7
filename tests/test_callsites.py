"""Findings name their top call sites: which records each check is about,
the order by seconds, and their form in every report."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from iopilot import api
from iopilot.bench.synthetic import write_trace
from iopilot.checks import diagnose
from iopilot.checks.base import REGISTRY, Context, Finding, Level, SourceLocation
from iopilot.checks.posix import backwards
from iopilot.checks.thresholds import defaults
from iopilot.cli import main
from iopilot.demo import example_dir
from iopilot.model import OP_NAMES, RECORD_LAYERS, Records, Sites
from iopilot.report import csv_report, json_report, terminal
from iopilot.report.html import render_html
from kit import counters, findings, trace
from test_report_html import page_doc

MiB = 1 << 20
FILE = 1  # /data/file1

# Sites of the tests: 1 and 2 with debug information, 3 without, 4 a Python line.
SITES = [
    ("", 0, "", "", -1, "", "", 0, 0, 0.0, False, ""),
    ("/src/main.c", 42, "write_rows", "/bin/app", 0x1234, "native", "", 0, 0, 0.0, False,
     "main.c:88 main"),
    ("/src/main.c", 77, "write_header", "/bin/app", 0x1300, "native", "", 0, 0, 0.0, False, ""),
    ("", 0, "", "/bin/app", 0x2000, "native", "no debug information", 0, 0, 0.0, False, ""),
    ("/src/analysis.py", 9, "save", "", -1, "python", "", 0, 0, 0.0, False, ""),
]  # fmt: skip


def recs(rows: list[tuple], meta: bool = False) -> Records:
    """Records from (site, op, length, seconds) tuples on FILE, one after the other."""
    start = np.cumsum([0.0] + [r[3] for r in rows])[:-1]
    return Records(
        rank=np.zeros(len(rows), np.int32),
        layer=np.full(len(rows), RECORD_LAYERS.index("POSIX"), np.uint8),
        op=np.array([OP_NAMES.index(r[1]) for r in rows], np.uint8),
        file_id=np.full(len(rows), FILE, np.uint64),
        offset=np.zeros(len(rows), np.int64),
        length=np.array([0 if meta else r[2] for r in rows], np.int64),
        start=start,
        end=start + np.array([r[3] for r in rows]),
        site=np.array([r[0] for r in rows], np.uint32),
    )


def sited(row: dict, data: list[tuple], meta: list[tuple] = ()):
    """A trace with the POSIX counters ``row`` of FILE, the data records
    ``data`` and the metadata records ``meta`` (site, op, length, seconds)."""
    tr = trace(counters("POSIX", [{"file": FILE, "rank": 0, **row}]), recs=recs(data))
    tr.meta_records, tr.sites = recs(list(meta), meta=True), Sites.of(SITES)
    return tr


def small_writes_trace(rows: list[tuple]):
    """Many small POSIX writes (counters that fire posix-small-writes) with
    the records ``rows``."""
    return sited({"POSIX_WRITES": 2000, "POSIX_SIZE_WRITE_0_100": 2000,
                  "POSIX_BYTES_WRITTEN": 2000 * 50, "POSIX_F_WRITE_TIME": 2.0}, rows)  # fmt: skip


def sources(f) -> list[SourceLocation]:
    return [loc for loc in f.locations if isinstance(loc, SourceLocation)]


def small(site: int, n: int, seconds: float) -> list[tuple]:
    return [(site, "write", 50, seconds / n)] * n


# --------------------------------------------------------------- the records a finding is about


def test_the_site_with_more_seconds_comes_first_even_with_fewer_calls():
    tr = small_writes_trace(small(1, 100, 0.2) + small(2, 5, 0.9))
    (f,) = findings(tr, "posix-small-writes")
    first, second = sources(f)
    assert (first.file, first.line, first.function) == ("/src/main.c", 77, "write_header")
    assert (first.calls, first.seconds) == (5, pytest.approx(0.9))
    assert (second.line, second.calls, second.seconds) == (42, 100, pytest.approx(0.2))
    assert first.label == "main.c:77 write_header"


def test_small_write_findings_leave_out_the_site_of_big_writes():
    big = [(2, "write", 4 * MiB, 0.5)] * 4  # more seconds than the small ones
    tr = small_writes_trace(small(1, 100, 0.2) + big)
    (f,) = findings(tr, "posix-small-writes")
    assert [s.line for s in sources(f)] == [42]
    # At the threshold itself a write is not small; one byte below it is.
    edge = [(2, "write", MiB, 0.5), (3, "write", MiB - 1, 0.1)]
    (f,) = findings(small_writes_trace(small(1, 100, 0.2) + edge), "posix-small-writes")
    assert [s.line for s in sources(f)] == [42, 0]


def test_reads_are_not_the_sites_of_a_write_finding():
    reads = [(4, "read", 50, 0.01)] * 100
    (f,) = findings(small_writes_trace(small(1, 10, 0.2) + reads), "posix-small-writes")
    assert [s.line for s in sources(f)] == [42]


def test_at_most_three_sites_and_unknown_never_listed():
    rows = small(0, 50, 5.0) + small(1, 10, 0.4) + small(2, 10, 0.3) + small(3, 10, 0.2)
    rows += small(4, 10, 0.1)
    (f,) = findings(small_writes_trace(rows), "posix-small-writes")
    assert [s.calls for s in sources(f)] == [10, 10, 10]
    assert [s.line for s in sources(f)] == [42, 77, 0]


def test_ties_go_to_more_calls_then_to_the_first_site():
    rows = small(2, 4, 0.4) + small(1, 8, 0.4)
    (f,) = findings(small_writes_trace(rows), "posix-small-writes")
    assert [s.line for s in sources(f)] == [42, 77]  # same seconds: more calls first
    rows = small(2, 4, 0.4) + small(1, 4, 0.4)
    for _ in range(2):  # same seconds and calls: the lower site id, every time
        (f,) = findings(small_writes_trace(rows), "posix-small-writes")
        assert [s.line for s in sources(f)] == [42, 77]


def test_a_site_without_debug_information_is_listed_by_module_and_offset():
    (f,) = findings(small_writes_trace(small(3, 10, 0.5)), "posix-small-writes")
    (s,) = sources(f)
    assert (s.file, s.line, s.module, s.offset) == ("", 0, "/bin/app", 0x2000)
    assert s.label == "app+0x2000" and s.note == "no debug information"


def test_flush_findings_list_the_sync_calls():
    writes = [(1, "write", 4096, 0.001)] * 20
    syncs = [(2, "sync", 0, 0.05)] * 20 + [(4, "open", 0, 0.5)]
    row = {"POSIX_WRITES": 20, "POSIX_BYTES_WRITTEN": 20 * 4096, "POSIX_FSYNCS": 20,
           "POSIX_OPENS": 1, "POSIX_F_WRITE_TIME": 0.02, "POSIX_F_META_TIME": 1.5}  # fmt: skip
    (f,) = findings(sited(row, writes, syncs), "flush-per-step")
    assert [(s.line, s.calls) for s in sources(f)] == [(77, 20)]


def test_reopen_findings_list_the_opens_and_closes():
    reads = [(1, "read", 1000, 0.001)] * 30
    opens = [(2, "open", 0, 0.02), (3, "close", 0, 0.01)] * 30 + [(4, "sync", 0, 2.0)]
    row = {"POSIX_READS": 30, "POSIX_BYTES_READ": 30 * 1000, "POSIX_OPENS": 30,
           "POSIX_F_READ_TIME": 0.03, "POSIX_F_META_TIME": 2.9, "POSIX_MAX_BYTE_READ": 999}
    (f,) = findings(sited(row, reads, opens), "reopened-files")
    assert [(s.line, s.calls) for s in sources(f)] == [(77, 30), (0, 30)]


def test_a_trace_without_sites_gets_no_source_locations():
    tr = small_writes_trace(small(1, 10, 0.2))
    tr.sites = None
    (f,) = findings(tr, "posix-small-writes")
    assert sources(f) == []


def test_darshan_logs_get_no_source_locations():
    d = api.diagnose(example_dir() / "ior_hdf5_example.darshan")
    assert d.findings and not d.warnings
    assert not [loc for f in d.findings for loc in f.locations if loc.kind == "source"]


# --------------------------------------------------------------------------------- the reports


def _report():
    values = defaults()
    values.update(high_min_io_seconds=0, high_min_io_share=0)
    tr = small_writes_trace(small(1, 4096, 1.23) + small(3, 10, 0.02))
    return json_report.diagnosis_dict(diagnose(tr, values, only={"posix-small-writes"}))


def test_json_lists_the_sites_as_source_locations():
    (f,) = _report()["findings"]
    locs = [x for x in json.loads(json.dumps(f["locations"])) if x["kind"] == "source"]
    assert locs[0] == {"kind": "source", "file": "/src/main.c", "line": 42,
                       "function": "write_rows", "calls": 4096, "seconds": 1.23,
                       "label": "main.c:42 write_rows", "module": "/bin/app", "offset": 0x1234,
                       "note": "", "caller": "main.c:88 main"}  # fmt: skip
    assert locs[1]["label"] == "app+0x2000" and locs[1]["note"] == "no debug information"


def test_terminal_prints_a_line_per_site_under_the_finding():
    text = terminal.render(_report(), terminal.Style(False))
    lines = text.splitlines()
    at = next(i for i, x in enumerate(lines) if "main.c:42" in x)
    assert lines[at].strip() == "at main.c:42 write_rows — 4,096 calls, 1.23 s"
    assert lines[at + 1].strip() == "at app+0x2000 — 10 calls, 0.02 s (no debug information)"
    assert lines.index(next(x for x in lines if "posix-small-writes" in x)) < at


def test_csv_names_the_top_site():
    rows = list(csv.DictReader(io.StringIO(csv_report.render([_report()]))))
    (row,) = [r for r in rows if r["check"] == "posix-small-writes"]
    assert row["top_site"] == "/src/main.c:42"
    # A site without a line is named by its label.
    rep = _report()
    rep["findings"][0]["locations"] = [x for x in rep["findings"][0]["locations"]
                                       if x.get("line") != 42]  # fmt: skip
    (row,) = list(csv.DictReader(io.StringIO(csv_report.render([rep]))))
    assert row["top_site"] == "app+0x2000"
    # Rows of unreadable logs and of incomplete data have the column too.
    rep["warnings"] = ["module POSIX is partial"]
    text = csv_report.render([rep], [{"path": "bad.darshan", "reason": "truncated"}])
    rows = list(csv.reader(io.StringIO(text)))
    assert len(rows) == 4 and {len(r) for r in rows} == {len(csv_report.COLUMNS)}


def test_html_page_names_the_sites_beside_the_finding_and_in_the_filter():
    values = defaults()
    values.update(high_min_io_seconds=0, high_min_io_share=0)
    tr = small_writes_trace(small(1, 40, 1.0) + small(3, 10, 0.02) + [(2, "write", MiB, 3.0)])
    doc = page_doc(render_html(diagnose(tr, values, only={"posix-small-writes"})))
    # The filter's list: every site with records, most seconds first.
    assert [s["label"] for s in doc["sites"]] == ["main.c:77 write_header",
                                                   "main.c:42 write_rows", "app+0x2000"]
    assert doc["sites"][1]["calls"] == 40 and doc["sites"][1]["seconds"] == pytest.approx(1.0)
    # The finding's two sites, as places in that list (the big write is not one).
    assert doc["finding_sites"] == [[1, 2]]
    # Each drawn operation carries its site's place in the list.
    site = doc["records"]["sample"]["site"]
    assert list(site) == [1] * 40 + [2] * 10 + [0]


def test_html_page_without_sites_has_no_site_filter():
    tr = small_writes_trace(small(1, 10, 0.2))
    tr.sites = None
    doc = page_doc(render_html(diagnose(tr, only={"posix-small-writes"})))
    assert doc["sites"] == [] and "site" not in doc["records"]["sample"]


def test_report_of_a_trace_names_the_small_writes_sites(tmp_path, capsys):
    # The benchmark's writer: site 1 + 3 op + k for requests of 4 KiB, 64 KiB
    # and 1 MiB (k = 0, 1, 2), at offset 0x1000 + 16 site of the executable.
    out = write_trace(tmp_path / "t", 6000, ranks=2)
    assert main(["report", str(out), "--json"]) == 0
    (rep,) = json.loads(capsys.readouterr().out)["reports"]
    by_check = {f["check"]: f for f in rep["findings"]}
    sites = [x for x in by_check["posix-small-writes"]["locations"] if x["kind"] == "source"]
    assert sorted(x["offset"] for x in sites) == [0x1040, 0x1050]  # not the 1 MiB writes' 0x1060
    assert sites[0]["seconds"] >= sites[1]["seconds"] and sites[0]["calls"] > 900
    assert sites[0]["label"] == f"app+{sites[0]['offset']:#x}"
    reads = [x for x in by_check["posix-small-reads"]["locations"] if x["kind"] == "source"]
    assert sorted(x["offset"] for x in reads) == [0x1010, 0x1020]


def test_a_call_counts_once_at_the_highest_layer_of_its_file():
    # rank 0 is heavy: 10 MPI-IO writes from line 42, each with the POSIX
    # write beneath it (the same site), and plain POSIX writes to another file.
    upper = recs([(1, "write", 1 << 20, 0.1)] * 10)
    upper.layer[:] = RECORD_LAYERS.index("MPIIO")
    below = recs([(1, "write", 1 << 20, 0.09)] * 10 + [(2, "write", 100, 0.001)] * 10)
    below.file_id[10:] = 2
    both = Records.concat([upper, below])
    others = recs([(4, "write", 100, 0.001)] * 3)
    others.rank[:] = [1, 2, 3]
    tr = trace(recs=Records.concat([both, others]), nprocs=4)
    tr.sites = Sites.of(SITES)
    (f,) = findings(tr, "rank-zero-heavy")
    got = {s.line: (s.calls, s.seconds) for s in sources(f)}
    assert got[42] == (10, pytest.approx(1.0))  # the MPI-IO calls, not 20
    assert got[77] == (10, pytest.approx(0.01))  # POSIX is the top layer of file 2
    assert set(got) == {42, 77}  # rank 0's lines: not the other ranks' (analysis.py:9)


def test_tiny_files_list_the_opens_and_closes_not_the_writes():
    n = 150  # files of 100 bytes, each opened, written once (slowly) and closed
    rows = [{"file": 100 + i, "rank": 0, "POSIX_OPENS": 1, "POSIX_WRITES": 1,
             "POSIX_BYTES_WRITTEN": 100, "POSIX_MAX_BYTE_WRITTEN": 99,
             "POSIX_F_META_TIME": 0.003} for i in range(n)]  # fmt: skip
    data = recs([(1, "write", 100, 0.01)] * n)
    meta = recs([(2, "open", 0, 0.002), (3, "close", 0, 0.001)] * n, meta=True)
    data.file_id[:] = 100 + np.arange(n)
    meta.file_id[:] = 100 + np.repeat(np.arange(n), 2)
    tr = trace(counters("POSIX", rows), recs=data)
    tr.meta_records, tr.sites = meta, Sites.of(SITES)
    (f,) = findings(tr, "tiny-files")
    assert [(s.line, s.calls) for s in sources(f)] == [(77, n), (0, n)]


def test_misaligned_file_findings_list_the_misaligned_requests_only():
    aligned = recs([(1, "write", 1 << 20, 0.5)] * 4)  # more seconds, on 4 KiB boundaries
    aligned.offset[:] = np.arange(4) << 20
    off = recs([(2, "write", 1000, 0.01)] * 20)
    off.offset[:] = (4 << 20) + 1000 * np.arange(20) + 10
    row = {"POSIX_WRITES": 24, "POSIX_BYTES_WRITTEN": (4 << 20) + 20_000,
           "POSIX_FILE_NOT_ALIGNED": 20, "POSIX_FILE_ALIGNMENT": 4096,
           "POSIX_F_WRITE_TIME": 2.2}  # fmt: skip
    tr = sited(row, [])
    tr.records = Records.concat([aligned, off])
    (f,) = findings(tr, "posix-misaligned-file")
    assert [(s.line, s.calls) for s in sources(f)] == [(77, 20)]


def test_random_read_findings_list_the_reads_that_go_backwards():
    ahead = recs([(1, "read", 4096, 0.05)] * 40)  # in order, and slower
    ahead.offset[:] = 4096 * np.arange(40)
    jumps = recs([(2, "read", 100, 0.001)] * 3000)
    jumps.offset[:] = (np.arange(3000) * 7919 % 3000) * 100 + (1 << 20)
    jumps.start += 10.0
    jumps.end += 10.0
    row = {"POSIX_READS": 3040, "POSIX_BYTES_READ": 40 * 4096 + 300_000,
           "POSIX_CONSEC_READS": 40, "POSIX_SEQ_READS": 1540, "POSIX_F_READ_TIME": 5.0}
    tr = sited(row, [])
    tr.records = Records.concat([ahead, jumps])
    back = int(backwards(tr.records, RECORD_LAYERS.index("POSIX"), OP_NAMES.index("read")).sum())
    assert 1000 < back < 3000  # about half of the jumps go backwards
    (f,) = findings(tr, "posix-random-reads")
    assert [(s.line, s.calls) for s in sources(f)] == [(77, back)]


def test_backwards_follows_each_rank_and_file_in_time_order():
    r = recs([(1, "read", 100, 0.1)] * 6)
    r.offset[:] = [0, 100, 50, 200, 0, 10]
    r.rank[:] = [0, 0, 0, 0, 1, 0]
    r.file_id[5] = 2  # a rank's first access to another file goes nowhere
    r.start[3], r.start[2] = r.start[2], r.start[3]  # 200 comes before 50
    got = backwards(r, RECORD_LAYERS.index("POSIX"), OP_NAMES.index("read"))
    assert list(got) == [False, False, True, False, False, False]
    assert not backwards(r, RECORD_LAYERS.index("POSIX"), OP_NAMES.index("write")).any()


def test_redundant_reads_through_stdio_list_their_lines():
    # np.fromfile reads with fread: STDIO records, no POSIX ones beneath.
    row = {"STDIO_READS": 10, "STDIO_BYTES_READ": 10 * MiB, "STDIO_MAX_BYTE_READ": MiB - 1,
           "STDIO_F_READ_TIME": 1.0}  # fmt: skip
    reads = recs([(4, "read", MiB, 0.1)] * 10)
    reads.layer[:] = RECORD_LAYERS.index("STDIO")
    tr = trace(counters("STDIO", [{"file": FILE, "rank": 0, **row}]), recs=reads)
    tr.sites = Sites.of(SITES)
    (f,) = findings(tr, "posix-redundant-reads")
    assert [(s.label, s.calls) for s in sources(f)] == [("analysis.py:9 save", 10)]


# What each check's call sites count: (layers, operations, small only), or
# None for checks about no operation of the program. A new check adds its row.
_D, _M = ("read", "write"), tuple(op for op in OP_NAMES if op not in ("read", "write"))
_FS, _ALL = ("POSIX", "STDIO"), tuple(RECORD_LAYERS)
CONCERNS = {
    "stdio-share": (("STDIO",), _D, False), "stdio-time": (("STDIO",), _D + _M, False),
    "lustre-single-stripe-shared": (("POSIX",), _D, False),
    "lustre-stripe-request-mismatch": (("POSIX",), _D, False),
    "lustre-ost-imbalance": None, "lustre-slow-ost": None,
    "hdf5-small-dataset-access": (("H5D",), _D, True),
    "hdf5-independent-transfers": (("H5D",), _D, False),
    "hdf5-metadata-reads": (("POSIX",), ("read",), True),
    "hdf5-alignment": (("POSIX",), _D, False), "hdf5-chunking": (("H5D",), _D, False),
    "hdf5-chunk-cache": (("H5D",), _D, False),
    "posix-write-count-intensive": (("POSIX",), ("write",), False),
    "posix-read-count-intensive": (("POSIX",), ("read",), False),
    "posix-write-size-intensive": (("POSIX",), ("write",), False),
    "posix-read-size-intensive": (("POSIX",), ("read",), False),
    "posix-small-reads": (("POSIX",), ("read",), True),
    "posix-small-writes": (("POSIX",), ("write",), True),
    "posix-shared-small-reads": (("POSIX",), ("read",), True),
    "posix-shared-small-writes": (("POSIX",), ("write",), True),
    "posix-misaligned-memory": (("POSIX",), _D, False),
    "posix-misaligned-file": (("POSIX",), _D, False),  # and its own mask: off the alignment
    "posix-redundant-reads": (_FS, ("read",), False),
    "posix-redundant-writes": (_FS, ("write",), False),
    "posix-random-reads": (("POSIX",), ("read",), False),  # and its mask: backwards
    "posix-random-writes": (("POSIX",), ("write",), False),
    "posix-metadata-time": (("POSIX",), _M, False), "posix-metadata-share": (("POSIX",), _M, False),
    "posix-shared-data-imbalance": (("POSIX",), _D, False),
    "posix-shared-time-imbalance": (("POSIX",), _D, False),
    "posix-rank-write-imbalance": (("POSIX",), ("write",), False),
    "posix-rank-read-imbalance": (("POSIX",), ("read",), False),
    "mpiio-not-used": (("POSIX",), _D, False),
    "mpiio-collective-reads": (("MPIIO",), ("read",), False),
    "mpiio-collective-writes": (("MPIIO",), ("write",), False),
    "mpiio-blocking-reads": (("MPIIO",), ("read",), False),
    "mpiio-blocking-writes": (("MPIIO",), ("write",), False),
    "mpiio-aggregators": None, "mpiio-cb-disabled": (("MPIIO",), _D, False),
    "mpiio-time-above-posix": (("MPIIO",), _D, False),
    "mpiio-read-modify-write": (("MPIIO",), ("write",), False),
    "pnetcdf-independent": (("MPIIO",), _D, False),
    "pnetcdf-blocking-many-vars": (("MPIIO",), _D, False),
    "pnetcdf-small-requests": (("MPIIO",), _D, True),
    "reopened-files": (_FS, ("open", "close", "stat", "seek"), False),
    "tiny-files": (_FS, ("open", "close", "stat"), False),
    "unused-opens": (_FS, ("open", "close", "stat"), False),
    "rank-zero-heavy": (_ALL, _D, False),  # rank 0's only
    "unbalanced-ranks": (_ALL, _D, False), "phase-stragglers": (_ALL, _D, False),
    "io-phases": None,
    "overlapping-writes": (("POSIX",), ("write",), False),
    "overlapping-reads": (("POSIX",), ("read",), False),
    "background-waits": (("POSIX",), _D + _M, False),
    "background-shared-core": (("POSIX",), _D, False), "static-layers": (_FS, _D + _M, False),
    "flush-per-step": (("H5F", "H5D", "MPIIO", "POSIX"), ("sync", "flush"), False),
    "fortran-element-io": (("POSIX",), _D, False), "fortran-formatted-io": (("POSIX",), _D, False),
}  # fmt: skip


def test_every_check_says_which_operations_its_call_sites_count():
    ctx = Context(trace(recs=recs(small(1, 3, 0.1))), defaults())
    assert set(CONCERNS) == set(REGISTRY)
    for cid, cls in REGISTRY.items():
        ops = cls().concerns(ctx, Finding(cid, cls.layer, Level.WARN, "m."))
        got = None if ops is None else (ops.layers, ops.ops, ops.small)
        assert got == CONCERNS[cid], cid
