"""Counters as Darshan defines them, on access patterns whose values are
worked out by hand: size bins with inclusive upper edges, sequential and
consecutive accesses (the last byte is 0 after open and close, so a first
access at offset 0 is neither), strides, and the four most common access
sizes and strides with their counts."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from iopilot.capture.run import library_path
from iopilot.checks.engine import summarize
from iopilot.model import OP_NAMES
from iopilot.sources import load
from iopilot.sources.trace_counters import _common_values
from rawtrace import RawProc

RUNTIME = Path(__file__).resolve().parents[1] / "runtime"
CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")


@pytest.fixture(scope="module")
def counting(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("bin") / "counting"
    subprocess.run([CC, "-O2", "-Wall", "-Werror", "-o", str(exe),
                    str(RUNTIME / "tests/counting.c")], check=True)  # fmt: skip
    return exe


def run_pattern(counting: Path, pattern: str) -> tuple[RawProc, Path, str]:
    """Run one pattern traced: its process, work directory and trace directory."""
    work = Path(tempfile.mkdtemp(prefix="iop-work-"))
    trace = Path(tempfile.mkdtemp(prefix="iop-trace-"))
    env = dict(os.environ, LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(trace))
    subprocess.run([str(counting), pattern, str(work)], env=env, check=True, timeout=60)
    (proc,) = [RawProc(p) for p in trace.glob("p*.json")]
    return proc, work, str(trace)


def traced(counting: Path, pattern: str) -> tuple[dict[str, int], str]:
    """Raw counters of DIR/PATTERN.dat, and the trace directory."""
    proc, work, trace = run_pattern(counting, pattern)
    return proc.get("POSIX", work / f"{pattern}.dat"), trace


def test_the_worked_example(counting):
    c, trace = traced(counting, "example")
    assert c["SIZE_WRITE_100K_1M"] == 1 and c["SIZE_WRITE_0_100"] == 3
    assert c["SIZE_WRITE_1K_10K"] == 1 and c.get("SIZE_WRITE_1M_4M", 0) == 0
    assert (c["ACCESS1_ACCESS"], c["ACCESS1_COUNT"]) == (100, 3)
    # ties: the larger size first
    assert (c["ACCESS2_ACCESS"], c["ACCESS2_COUNT"]) == (1 << 20, 1)
    assert (c["ACCESS3_ACCESS"], c["ACCESS3_COUNT"]) == (4096, 1)
    assert c.get("ACCESS4_ACCESS", 0) == 0
    assert c["CONSEC_WRITES"] == 4 and c["SEQ_WRITES"] == 4
    assert c["MAX_BYTE_WRITTEN"] == (1 << 20) + 300 + 4096 - 1
    # the same through the reader, in Darshan's names
    t = load(trace)
    col = t.counters["POSIX"]
    row = {n: int(col.ints[0, i]) for i, n in enumerate(col.int_names)}
    assert row["POSIX_ACCESS1_ACCESS"] == 100 and row["POSIX_ACCESS1_COUNT"] == 3
    assert row["POSIX_SIZE_WRITE_100K_1M"] == 1 and row["POSIX_CONSEC_WRITES"] == 4


def test_mode_and_the_size_of_the_slowest_write(counting):
    c, trace = traced(counting, "example")
    assert c["MODE"] == 0o644  # the mode open() was given, as Darshan keeps it
    (proc,) = [RawProc(p) for p in Path(trace).glob("p*.json")]
    writes = [r for r in proc.records if r[6] == 0 and r[7] == 1]
    slowest = max(writes, key=lambda r: r[1] - r[0])
    assert c["MAX_WRITE_TIME_SIZE"] == slowest[3]


def test_ranks_combine_the_size_of_the_slowest_operation():
    from iopilot.sources.trace_counters import _slowest_sizes

    inames, fnames = ["X_MAX_WRITE_TIME_SIZE"], ["X_F_MAX_WRITE_TIME"]
    ints = np.array([[4096], [1 << 20], [100]], np.int64)
    floats = np.array([[0.5], [2.0], [1.0]])
    out = ints.sum(axis=0)
    _slowest_sizes(inames, fnames, ints, floats, out)
    assert out[0] == 1 << 20  # the rank whose slowest write took 2 s


BINS = ["0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M"]


def test_every_bin_edge_belongs_to_its_bin_and_one_byte_more_to_the_next(counting):
    c, _ = traced(counting, "edges")
    # edge e of bin i is in bin i; e + 1 is in bin i + 1
    expected = {b: 0 for b in BINS}
    for i in range(7):
        expected[BINS[i]] += 1
        expected[BINS[i + 1]] += 1
    assert {b: c.get(f"SIZE_WRITE_{b}", 0) for b in BINS} == expected


@pytest.mark.parametrize("pattern, seq, consec, strides", [
    ("sequential", 9, 9, {}),            # offsets 0, 10, ... 90: the first is neither
    ("strided", 2, 0, {10: 2}),          # 0, 20, 40 (10 B each): gaps of 10 bytes
    ("backward", 1, 0, {}),              # 40, 20, 0: only the first is beyond the last byte
    ("from_one", 1, 1, {}),              # a first write at offset 1 follows "byte 0"
    ("reopened", 1, 0, {}),              # open resets the last byte: offset 10 is not consecutive
])  # fmt: skip
def test_sequential_consecutive_and_strides(counting, pattern, seq, consec, strides):
    c, _ = traced(counting, pattern)
    assert c.get("SEQ_WRITES", 0) == seq
    assert c.get("CONSEC_WRITES", 0) == consec
    got = {c[f"STRIDE{k}_STRIDE"]: c[f"STRIDE{k}_COUNT"] for k in range(1, 5)
           if c.get(f"STRIDE{k}_STRIDE")}  # fmt: skip
    assert got == strides


def test_four_most_common_sizes_highest_count_then_largest_size(counting):
    c, _ = traced(counting, "common")  # 5x10, 3x20, 3x30, 1x40, 1x50
    top = [(c.get(f"ACCESS{k}_ACCESS", 0), c.get(f"ACCESS{k}_COUNT", 0)) for k in range(1, 5)]
    assert top == [(10, 5), (30, 3), (20, 3), (50, 1)]


def test_ranks_combine_their_common_sizes_by_adding_counts():
    names = [f"X_ACCESS{k}_{what}" for what in ("ACCESS", "COUNT") for k in range(1, 5)]
    rows = np.array([[100, 8, 0, 0, 3, 1, 0, 0],
                     [8, 4096, 100, 0, 5, 2, 1, 0]], np.int64)  # fmt: skip
    out = rows.sum(axis=0)
    _common_values(names, rows, out)
    assert list(out) == [8, 100, 4096, 0, 6, 4, 2, 0]



def h5d_rows(*ranks: list[tuple[int, int, int, int]]) -> tuple[list[str], np.ndarray]:
    """H5D rows (one per rank) of up to four tuples (size, length D5, stride D5, count)."""
    parts = ["ACCESS", *(f"{k}_D{d}" for k in ("LENGTH", "STRIDE") for d in range(1, 6))]
    names = [f"H5D_ACCESS{k}_{p}" for k in range(1, 5) for p in parts]
    names += [f"H5D_ACCESS{k}_COUNT" for k in range(1, 5)]
    rows = np.zeros((len(ranks), len(names)), np.int64)
    for r, tuples in enumerate(ranks):
        for k, (size, length, stride, count) in enumerate(tuples, 1):
            rows[r, names.index(f"H5D_ACCESS{k}_ACCESS")] = size
            rows[r, names.index(f"H5D_ACCESS{k}_LENGTH_D5")] = length
            rows[r, names.index(f"H5D_ACCESS{k}_STRIDE_D5")] = stride
            rows[r, names.index(f"H5D_ACCESS{k}_COUNT")] = count
    return names, rows


def listed(names: list[str], out: np.ndarray) -> list[tuple[int, int, int, int]]:
    def v(k: int, p: str) -> int:
        return int(out[names.index(f"H5D_ACCESS{k}_{p}")])

    return [(v(k, "ACCESS"), v(k, "LENGTH_D5"), v(k, "STRIDE_D5"), v(k, "COUNT"))
            for k in range(1, 5)]  # fmt: skip


def test_ranks_combine_hdf5_access_tuples_as_darshan():
    x, y = (800, 100, 1), (800, 100, 2)  # one size, two shapes
    # rank 0 counted X then Y (Y listed first), rank 1 Y then X: Darshan folds
    # rank 0 into rank 1, merging rank 0's list first, so X ends above Y.
    names, rows = h5d_rows([(*y, 1), (*x, 1)], [(*x, 1), (*y, 1)])
    out = rows.sum(axis=0)
    _common_values(names, rows, out)
    assert listed(names, out) == [(*x, 2), (*y, 2), (0, 0, 0, 0), (0, 0, 0, 0)]
    # equal tuples add up, shapes are never summed; higher counts first
    names, rows = h5d_rows([(*x, 3), (80, 10, 1, 1)], [(*y, 5), (*x, 1), (8000, 0, 0, 1)])
    out = rows.sum(axis=0)
    _common_values(names, rows, out)
    assert listed(names, out) == [(*y, 5), (*x, 4), (8000, 0, 0, 1), (80, 10, 1, 1)]


NAMES_PY = """
import os, sys
os.chdir(sys.argv[1])
os.makedirs("sub/x")
for name in ("sub/../sub/./f", sys.argv[1] + "//sub/f", "sub/x/../f"):
    fd = os.open(name, os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"z")
    os.close(fd)
with open("/dev/null", "wb") as f:           # a character device: not a file
    f.write(b"n")
fd = os.open("/dev/null", os.O_WRONLY)
os.write(fd, b"n")
os.close(fd)
r, w = os.pipe()                              # a pipe: not a file
os.write(w, b"p")
with os.fdopen(w, "wb") as f:
    f.write(b"p")
"""


def traced_names(tmp_path: Path, **env: str) -> set[str]:
    trace = Path(tempfile.mkdtemp(prefix="iop-trace-"))
    e = dict(os.environ, LD_PRELOAD=str(library_path()), IOPILOT_TRACE_DIR=str(trace), **env)
    import sys

    subprocess.run([sys.executable, "-c", NAMES_PY, str(tmp_path)], env=e, check=True,
                   timeout=60)  # fmt: skip
    (proc,) = [RawProc(p) for p in trace.glob("p*.json")]
    return {name for (layer, name), c in proc.counters.items() if c.get("WRITES")}


def test_names_are_absolute_and_clean_and_devices_are_left_out(tmp_path):
    names = traced_names(tmp_path)
    assert str(tmp_path / "sub" / "f") in names
    assert not any("/../" in n or "/./" in n or "//" in n for n in names)
    assert not any(n.startswith("/dev/") or "pipe:" in n for n in names)


def test_special_files_are_traced_when_asked(tmp_path):
    names = traced_names(tmp_path, IOPILOT_TRACE_SPECIAL="1", IOPILOT_EXCLUDE="/proc/:/sys/")
    assert "/dev/null" in names


def test_stdio_character_scan_and_position_calls_are_counted(counting):
    proc, work, _ = run_pattern(counting, "stdio")
    c = proc.get("STDIO", work / "stdio.dat")
    assert (c["WRITES"], c["BYTES_WRITTEN"]) == (3, 8)  # fputs, putc, fputc
    assert (c["READS"], c["BYTES_READ"]) == (3, 7)  # fscanf (5 B), getc, fgetc
    assert c["SEEKS"] == 2  # rewind, fsetpos


def test_fscanf_reads_what_the_stream_position_moved_by(counting):
    # 3,000 lines scanned to EOF (buffer refills), then a getc, an ungetc
    # and a scan from offset 0, then a scan after a seek to line 1,000.
    proc, work, _ = run_pattern(counting, "scan")
    c = proc.get("STDIO", work / "scan.dat")
    size = sum(len(f"k{i} = {i}\n") for i in range(3000))
    assert (c["READS"], c["BYTES_READ"]) == (3001 + 2 + 1, size + 1 + 6 + len("k1000 = 1000"))
    assert c["MAX_BYTE_READ"] == size - 1
    assert c["SEEKS"] == 3
    # Each scan of the first pass starts where the previous read ended; the
    # scan after the pushback starts at 0 (where getc read), not at 1.
    assert c["CONSEC_READS"] == 3000


def test_loading_keeps_counters_darshan_does_not_have(counting):
    proc, work, trace = run_pattern(counting, "stdio")
    stdio = load(trace).counters["STDIO"]
    # Darshan's STDIO module has no sequential counters; the runtime keeps them
    assert stdio.has("STDIO_SEQ_WRITES") and stdio.has("STDIO_OPENS")
    assert int(stdio["STDIO_SEQ_WRITES"].sum()) == proc.get("STDIO", work / "stdio.dat")[
        "SEQ_WRITES"] == 2  # putc and fputc follow fputs  # fmt: skip


def test_loading_keeps_metadata_operations_one_by_one(counting):
    from iopilot.model import OP_NAMES

    _, work, trace = run_pattern(counting, "reopened")  # open, write, close, open, write, close
    t = load(trace)
    fid = next(k for k, v in t.names.items() if v == str(work / "reopened.dat"))
    m = t.meta_records
    ops = [OP_NAMES[o] for o in m.op[m.file_id == fid]]
    assert ops.count("open") == 2 and ops.count("close") == 2
    assert len(t.records.op[t.records.file_id == fid]) == 2  # the two writes, kept apart


def test_sync_file_range_is_counted_apart_from_fsync_and_fdatasync(counting):
    proc, work, trace = run_pattern(counting, "syncs")
    c = proc.get("POSIX", work / "syncs.dat")
    assert (c["FSYNCS"], c["FDSYNCS"], c["RANGE_SYNCS"]) == (1, 1, 2)
    t = load(trace)
    col = t.counters["POSIX"]
    assert int(col["POSIX_RANGE_SYNCS"].sum()) == 2
    fid = next(k for k, v in t.names.items() if v == str(work / "syncs.dat"))
    m = t.meta_records
    assert [OP_NAMES[o] for o in m.op[m.file_id == fid]].count("sync") == 4
    (posix,) = [x for x in summarize(t) if x.layer == "POSIX"]
    assert posix.syncs == 4  # the report's syncs: POSIX_*_SYNCS


def test_dups_fdopen_and_fileno_count_as_darshan_counts_them(counting):
    proc, work, _ = run_pattern(counting, "dups")
    posix = proc.get("POSIX", work / "dups.dat")
    # open + dup + dup2 + dup3 + F_DUPFD, then fopen's fileno: each an open
    assert posix["DUPS"] == 4 and posix["FILENOS"] == 1 and posix["OPENS"] == 6
    assert posix["WRITES"] == 5 and posix["BYTES_WRITTEN"] == 50  # F_DUPFD copy included
    stdio = proc.get("STDIO", work / "dups.dat")
    assert stdio["FDOPENS"] == 1 and stdio["OPENS"] == 2  # fdopen and fopen
    assert "FILENOS" not in stdio


def test_appends_are_recorded_where_they_landed(counting):
    proc, work, _ = run_pattern(counting, "append")
    writes = proc.records_of("POSIX", work / "append.dat", 1)
    assert [r[2] for r in writes] == [0, 10, 20]  # not 0, 0, 10 as each descriptor alone
    assert proc.get("POSIX", work / "append.dat")["MAX_BYTE_WRITTEN"] == 29


# -- iopilot export counters --------------------------------------------------


def export(path: str) -> dict[tuple[str, int, int, str], str]:
    import sys

    p = subprocess.run([sys.executable, "-m", "iopilot", "export", "counters", path],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = {}
    for line in p.stdout.splitlines():
        if line.startswith("#"):
            continue
        module, rank, rid, counter, value, name, mount, fstype = line.split("\t")
        out[module, int(rank), int(rid), counter] = value
        assert name and mount and fstype
    return out


def test_export_prints_a_traces_counters_as_darshan_parser_does(counting):
    _, trace = traced(counting, "example")
    lines = export(trace)
    mine = {k[3]: v for k, v in lines.items() if k[0] == "POSIX"}
    assert mine["POSIX_WRITES"] == "5" and mine["POSIX_ACCESS1_ACCESS"] == "100"
    assert mine["POSIX_ACCESS1_COUNT"] == "3" and mine["POSIX_SIZE_WRITE_100K_1M"] == "1"
    assert mine["POSIX_CONSEC_WRITES"] == "4"
    assert float(mine["POSIX_F_WRITE_TIME"]) >= 0 and "." in mine["POSIX_F_WRITE_TIME"]


def test_export_of_a_darshan_log_agrees_with_pydarshan():
    import darshan

    from iopilot.demo import example_dir

    log = example_dir() / "example.darshan"
    report = darshan.DarshanReport(str(log), read_all=False)
    report.mod_read_all_records("POSIX")
    frames = report.records["POSIX"].to_df()
    lines = export(str(log))
    checked = 0
    for kind in ("counters", "fcounters"):
        df = frames[kind]
        ids, ranks = df["id"].to_numpy(np.uint64), df["rank"].to_numpy(np.int64)
        for col in df.columns.drop(["id", "rank"]):
            for rid, rank, want in zip(ids, ranks, df[col].to_numpy(), strict=True):
                got = lines["POSIX", int(rank), int(rid), col]
                if kind == "counters":
                    assert int(got) == int(want), col
                else:
                    assert abs(float(got) - float(want)) <= 5e-7, col
                checked += 1
    assert checked == len(frames["counters"]) * (69 + 17)
