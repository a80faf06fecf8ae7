"""A pile of other people's logs: every log gets a report row or a one-line
error, a log that crashes the C library costs only itself, and nothing a
job named its files can reach a spreadsheet as a formula."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import darshan_craft as dc
from iopilot import cli
from iopilot.errors import InputError
from iopilot.report import csv_report
from iopilot.sources import darshan_header, darshan_library, darshan_log, load
from iopilot.sources.inputs import expand_inputs
from kit import SHARED

pytestmark = pytest.mark.skipif(not SHARED.exists(), reason="shared log corpus not present")
ROOT = Path(__file__).resolve().parents[1]
LOG_341 = SHARED / "mpi-io-test-x86_64-3.4.7.darshan"
LOG_310 = SHARED / "mpi-io-test-x86_64-3.1.3.darshan"
LOG_321 = SHARED / "hdf5_diagonal_write_1_byte_dxt.darshan"


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "iopilot", *args], capture_output=True,
                          text=True, env=env, timeout=timeout)  # fmt: skip


def _aborting(tmp: Path, name: str = "abort.darshan") -> Path:
    """An uncompressed copy of a real log whose name-table length is off by
    222 bytes: libdarshan-util calls abort() on it."""
    raw = bytearray(dc.uncompressed(LOG_341.read_bytes()))
    raw[40] = 222  # low byte of the name table's length (3.41 map at byte 32)
    p = tmp / name
    p.write_bytes(bytes(raw))
    return p


# ---------------------------------------------------------------------------
# Isolation


def test_aborting_log_is_caught_in_a_child_in_single_log_mode(tmp_path):
    r = _run("report", str(_aborting(tmp_path)))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "abort.darshan: corrupt: the Darshan library crashes on it with signal 6 (SIGABRT)" \
        in lines[0]  # fmt: skip


def test_a_single_log_that_aborts_the_library_past_every_check_is_one_line(tmp_path):
    # "3.00" changed into "3.10", another valid format: the header checks
    # pass and the library aborts; the worker dies, the report does not.
    data = bytearray((SHARED / "mpi-io-test-ppc64-3.0.0.darshan").read_bytes())
    data[2] = ord("1")
    p = tmp_path / "v.darshan"
    p.write_bytes(bytes(data))
    r = _run("report", str(p))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr == f"iopilot: error: {p}: crashed while reading: signal 6 (SIGABRT)\n"


def test_a_damaged_length_of_an_early_region_is_corruption(tmp_path):
    # The name table comes first in the file; its length's high byte damaged
    # made the library read far past the end (SIGSEGV).
    data = bytearray(LOG_321.read_bytes())
    data[24 + 8 + 5] ^= 0xFF  # 3.21 map at byte 24: the name table's length
    p = tmp_path / "n.darshan"
    p.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"corrupt: the header places the name table at bytes "
                       r"\d+-\d+, beyond the end of the file"):  # fmt: skip
        load(str(p))


def test_uncompressed_log_that_is_sound_reads_like_the_original(tmp_path):
    p = tmp_path / "raw.darshan"
    p.write_bytes(dc.uncompressed(LOG_341.read_bytes()))
    a, b = load(str(LOG_341)), load(str(p))
    assert a.counters["POSIX"].total("POSIX_BYTES_WRITTEN") == b.counters["POSIX"].total(
        "POSIX_BYTES_WRITTEN") > 0  # fmt: skip
    assert a.names == b.names


def test_damaged_compression_field_is_a_one_line_error(tmp_path):
    data = bytearray(LOG_341.read_bytes())
    data[16] = 2  # "none", but every region is zlib: the library would abort
    p = tmp_path / "c2.darshan"
    p.write_bytes(bytes(data))
    with pytest.raises(InputError, match="header says the data is uncompressed, but it is zlib"):
        load(str(p))
    data[16] = 7
    p.write_bytes(bytes(data))
    with pytest.raises(InputError, match="corrupt: unknown compression type 7"):
        load(str(p))


def test_a_worker_killed_by_the_library_is_replaced_and_its_log_is_one_row(
        tmp_path, monkeypatch):  # fmt: skip
    # Without the reading child, the abort happens in the worker itself.
    monkeypatch.setattr(darshan_log, "_read_in_child", darshan_log._read_checked)
    d = tmp_path / "pile"
    d.mkdir()
    _aborting(d, "a1.darshan")
    _aborting(d, "a2.darshan")
    for src in (LOG_341, LOG_310, LOG_321):
        shutil.copy(src, d)
    out = tmp_path / "r.json"
    code = cli.main(["report", str(d), "--json", str(out), "-j", "2", "--color", "never"])
    doc = json.loads(out.read_text())
    assert code == 2
    assert sorted(Path(r["source"]).name for r in doc["reports"]) == sorted(
        p.name for p in (LOG_341, LOG_310, LOG_321))  # fmt: skip
    errors = {Path(e["path"]).name: e["reason"] for e in doc["errors"]}
    assert errors == {"a1.darshan": "crashed while reading: signal 6 (SIGABRT)",
                      "a2.darshan": "crashed while reading: signal 6 (SIGABRT)"}  # fmt: skip


def test_a_one_log_json_report_does_not_import_multiprocessing():
    code = ("import sys, io, contextlib\n"
            "from iopilot.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    rc = main(['report', {str(LOG_341)!r}, '--json'])\n"
            "print(rc, sorted(m for m in sys.modules if m.split('.')[0] in "
            "('multiprocessing', 'plotly', 'socket', 'selectors')))\n")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    rc, mods = out.stdout.split(" ", 1)
    assert rc in ("0", "2") and mods.strip() == "[]"


# ---------------------------------------------------------------------------
# 96 one-byte mutations of real logs in one directory run


def _positions(data: bytes, n: int) -> list[int]:
    """``n`` positions spread evenly over header, job record, module map and
    module data: a quarter in each part."""
    hdr, first, slots = dc.layout(data)
    start = min(o for o, length in dc.regions(data) if length)
    parts = [(0, first), (first, first + 16 * (slots + 1)), (hdr, start), (start, len(data))]
    out = []
    for lo, hi in parts:
        k = n // 4
        out += [lo + (hi - lo) * j // k for j in range(k)]
    return out


def _mutants(tmp: Path) -> list[Path]:
    out = []
    for k, src in enumerate((LOG_341, LOG_310, LOG_321)):
        data = src.read_bytes()
        spots = _positions(data, 32)
        spots[min(range(8), key=lambda j: abs(spots[j] - 16))] = 16  # the compression field
        for pos in spots:
            m = bytearray(data)
            # the compression field gets "none" (the case that aborts the library)
            m[pos] = 2 if pos == 16 else m[pos] ^ 0xFF
            p = tmp / f"{k}-{src.stem[:20]}-{pos:06d}.darshan"
            p.write_bytes(bytes(m))
            out.append(p)
    return out


def test_96_one_byte_mutations_each_give_a_report_or_a_one_line_error(tmp_path):
    d = tmp_path / "mutants"
    d.mkdir()
    made = _mutants(d)
    assert len(made) == 96 and len({p.name for p in made}) == 96
    assert any(p.name.endswith("-000016.darshan") for p in made)
    out = tmp_path / "r.json"
    r = _run("report", str(d), "--json", str(out), "--timeout", "60", timeout=600)
    assert "Traceback" not in r.stderr
    assert r.returncode in (0, 2)
    doc = json.loads(out.read_text())
    seen = [r["source"] for r in doc["reports"]] + [e["path"] for e in doc["errors"]]
    assert sorted(seen) == sorted(str(p) for p in made)
    for e in doc["errors"]:
        assert "\n" not in e["reason"] and 0 < len(e["reason"]) < 300
        assert not e["reason"].startswith(("internal error", "crashed", "timed out")), e
    lines = [x for x in r.stderr.splitlines() if x.startswith("iopilot: error:")]
    assert len(lines) == len(doc["errors"]) > 0
    assert (r.returncode == 2) == bool(doc["errors"])
    # the compression field of each log is among the errors, with its reason
    comp = [e for e in doc["errors"] if e["path"].endswith("-000016.darshan")]
    assert len(comp) == 3 and all("uncompressed, but it is zlib" in e["reason"] for e in comp)


def test_a_directory_of_good_damaged_and_aborting_logs_reports_every_good_one(tmp_path):
    d = tmp_path / "mixed"
    (d / "deeper").mkdir(parents=True)
    good = [LOG_341, LOG_310, LOG_321, SHARED / "mpi-io-test-x86_64-3.4.2.darshan"]
    for src in good[:2]:
        shutil.copy(src, d)
    for src in good[2:]:
        shutil.copy(src, d / "deeper")
    for bad in (SHARED / "damaged").glob("*.darshan"):
        shutil.copy(bad, d)
    _aborting(d)
    out = tmp_path / "r.json"
    r = _run("report", str(d), "--json", str(out), "--color", "never")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    doc = json.loads(out.read_text())
    assert sorted(Path(x["source"]).name for x in doc["reports"]) == sorted(g.name for g in good)
    bad_names = {Path(e["path"]).name for e in doc["errors"]}
    assert bad_names == {"abort.darshan", *(b.name for b in (SHARED / "damaged").glob("*.darshan"))}


# ---------------------------------------------------------------------------
# CSV injection


def _report(source: str, top: str, message: str = "m") -> dict:
    finding = {"check": "c", "drishti": None, "layer": "POSIX", "level": "WARN",
               "message": message, "files_total": 1, "files": [{"path": top}],
               "recommendation": None, "cost_seconds": 1.5}  # fmt: skip
    return {"source": source, "job": {}, "warnings": [], "findings": [finding]}


@pytest.mark.parametrize("bad", ["-2+3+cmd|' /C calc'!A0", "=HYPERLINK(\"http://x\")",
                                 "+1", "@SUM(A1)", "\tx", "\r=1"])  # fmt: skip
def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised(bad):
    rows = list(csv.reader(io.StringIO(csv_report.render([_report(bad, bad, bad)]))))
    source, top, message = rows[1][0], rows[1][7], rows[1][5]
    for cell in (source, top, message):
        assert cell.startswith("'") and not cell.startswith(("'\t", "'\r"))
        assert cell[1:2] in "=+-@\\"


def test_csv_leaves_ordinary_names_alone():
    text = csv_report.render([_report("/a/log.darshan", "/scratch/x-1.dat")])
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[1][0] == "/a/log.darshan" and rows[1][7] == "/scratch/x-1.dat"


def test_csv_has_one_row_per_unreadable_log():
    text = csv_report.render([], [{"path": "=bad.darshan", "reason": "corrupt: x"}])
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[1][:6] == ["'=bad.darshan", "read-error", "", "DATA", "ERROR", "corrupt: x"]


# ---------------------------------------------------------------------------
# Inputs


def test_directories_recurse_and_gz_logs_are_read(tmp_path, monkeypatch):
    (tmp_path / "a" / "b").mkdir(parents=True)
    shutil.copy(LOG_341, tmp_path / "a")
    with gzip.open(tmp_path / "a" / "b" / "z.darshan.gz", "wb") as f:
        f.write(LOG_310.read_bytes())
    (tmp_path / "a" / "notes.txt").write_text("x")
    found = expand_inputs([str(tmp_path)])
    assert [Path(p).name for p in found] == ["z.darshan.gz", LOG_341.name]  # a/b/ < a/m
    t = load(found[0])
    assert t.source.endswith("z.darshan.gz") and t.job.format == "darshan 3.10"
    size = len(LOG_310.read_bytes())
    monkeypatch.setenv("IOPILOT_GZ_LIMIT", str(size))
    assert load(found[0]).job.nprocs == 4  # exactly at the limit
    monkeypatch.setenv("IOPILOT_GZ_LIMIT", str(size - 1))
    with pytest.raises(InputError, match=r"z.darshan.gz: decompresses to more than"):
        load(found[0])
    (tmp_path / "bad.darshan.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(InputError, match=r"bad.darshan.gz: damaged gzip file"):
        load(str(tmp_path / "bad.darshan.gz"))


def test_gz_that_is_not_a_log_names_the_gz(tmp_path):
    p = tmp_path / "t.darshan.gz"
    with gzip.open(p, "wb") as f:
        f.write(b"hello\n" * 100)
    with pytest.raises(InputError, match=r"t.darshan.gz: a text file.*\(after decompressing\)"):
        load(str(p))


def test_a_list_file_names_logs_relative_to_itself(tmp_path):
    (tmp_path / "logs").mkdir()
    shutil.copy(LOG_341, tmp_path / "logs" / "one.darshan")
    shutil.copy(LOG_310, tmp_path / "two.darshan")
    lst = tmp_path / "logs" / "list.txt"
    lst.write_text(f"# the jobs of week 3\none.darshan\n\n  {tmp_path / 'two.darshan'}  \n"
                   "@list.txt\n")  # fmt: skip
    got = expand_inputs([f"@{lst}"])
    assert got[:2] == [str(tmp_path / "logs" / "one.darshan"), str(tmp_path / "two.darshan")]
    # a list never expands another list (no loops): that entry is a path
    assert got[2] == str(tmp_path / "logs" / "@list.txt")
    with pytest.raises(InputError, match="cannot read the list of logs"):
        expand_inputs([f"@{tmp_path / 'missing.txt'}"])


def test_own_files_and_empty_directories_point_at_the_trace_directory(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = _run("report", str(empty))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "holds no Darshan logs" in r.stderr
    assert "pass a trace directory" in r.stderr
    rep = tmp_path / "report.json"
    rep.write_text('{"schema": "iopilot-report"}')
    r = _run("report", str(rep))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "a JSON file, not a trace" in r.stderr


def test_a_file_inside_a_trace_names_its_directory(tmp_path):
    trace = tmp_path / "trace"
    trace.mkdir()
    for name in ("job.json", "p0.rec"):
        (trace / name).write_bytes(b"")
        with pytest.raises(InputError, match=rf"a file inside an iopilot trace, not a trace "
                           rf"\(pass the trace directory: iopilot report {trace}\)"):  # fmt: skip
            load(str(trace / name))
    (tmp_path / "other").mkdir()
    stray = tmp_path / "other" / "copy.rec"  # not named like a trace's files
    stray.write_bytes(b"")
    with pytest.raises(InputError, match="an iopilot record file, not a trace"):
        load(str(stray))


# ---------------------------------------------------------------------------
# The Darshan reader: formats, truncation versus corruption, bad values, DFS/DAOS


def test_module_table_follows_the_format_version():
    ids = darshan_header.module_ids
    assert ids("3.00")[3] == "HDF5" and ids("3.10")[7] == "STDIO"
    assert ids("3.21")[3:5] == ("H5F", "H5D") and ids("3.21")[8] == "STDIO"
    assert ids("3.41")[9] == "STDIO" and ids("3.41")[16:] == ("DFS", "DAOS")


def test_old_format_truncation_names_the_module_of_that_format(tmp_path):
    data = LOG_321.read_bytes()
    # the last region of this 3.21 log is slot 9, DXT_POSIX in 3.2x (STDIO in 3.41)
    maps = dc.regions(data)
    last = max((i for i in range(17) if maps[i][1]), key=lambda i: maps[i][0])
    assert darshan_header.module_ids("3.21")[last - 1] == "DXT_POSIX"
    p = tmp_path / "cut.darshan"
    # cut inside DXT: its records are left out, the counters stay
    p.write_bytes(data[:-100])
    t = load(str(p))
    assert f"the DXT_POSIX region is damaged (the file ends at byte {len(data) - 100} inside " \
        f"the DXT_POSIX module (expects {len(data)}))" in t.warnings[0]  # fmt: skip
    assert t.counters["POSIX"].total("POSIX_READS") > 0 and not len(t.records)
    # one byte before DXT starts: inside the H5D counters, an error
    p.write_bytes(data[:maps[last][0] - 1])
    with pytest.raises(InputError, match=rf"truncated: the file ends at byte {maps[last][0] - 1} "
                       rf"inside the H5D module \(expects {len(data)}\)"):  # fmt: skip
        load(str(p))


def test_a_map_entry_beyond_the_file_is_corruption_not_truncation(tmp_path):
    data = bytearray(LOG_341.read_bytes())
    struct.pack_into("<Q", data, 32 + 16 * 2, 1 << 40)  # POSIX's offset
    p = tmp_path / "c.darshan"
    p.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"corrupt: the header places the POSIX module at "
                       rf"bytes {1 << 40}-\d+, beyond the end of the file"):  # fmt: skip
        load(str(p))


def _posix_record_log(tmp: Path, values: dict[str, int], floats: dict[str, float]) -> Path:
    """An uncompressed copy of a real 3.41 log with its one POSIX record changed."""
    data = bytearray(dc.uncompressed(LOG_341.read_bytes()))
    off, _ = dc.regions(bytes(data))[darshan_header.MODULE_IDS.index("POSIX") + 1]
    ints = darshan_library.counter_names("posix")
    fl = darshan_library.counter_names("posix_f")
    for name, v in values.items():
        struct.pack_into("<q", data, off + 16 + 8 * ints.index(name), v)
    for name, v in floats.items():
        struct.pack_into("<d", data, off + 16 + 8 * len(ints) + 8 * fl.index(name), v)
    p = tmp / "v.darshan"
    p.write_bytes(bytes(data))
    return p


def test_impossible_counter_values_are_one_warning_each_and_zeroed(tmp_path):
    t = load(str(_posix_record_log(tmp_path, {"POSIX_BYTES_READ": -5},
                                   {"POSIX_F_META_TIME": -0.25, "POSIX_F_READ_TIME": 5e-320})))
    c = t.counters["POSIX"]
    bad = [w for w in t.warnings if "impossible value" in w]
    assert len(bad) == 3
    assert any(w.startswith("POSIX_BYTES_READ has an impossible value (-5 in the record of /")
               for w in bad)  # fmt: skip
    assert any(w.startswith("POSIX_F_META_TIME") and "-0.25" in w for w in bad)
    assert any(w.startswith("POSIX_F_READ_TIME") and "e-320" in w for w in bad)
    assert c.total("POSIX_BYTES_READ") == 0 and c.total("POSIX_F_META_TIME") == 0.0
    assert c.total("POSIX_F_READ_TIME") == 0.0


def test_not_monitored_minus_one_stays_unknown_without_a_warning(tmp_path):
    # The log's one POSIX record is shared by its 4 ranks (rank -1): -4 is
    # four ranks' "not monitored", -5 is one more than that.
    t = load(str(_posix_record_log(tmp_path, {"POSIX_MMAPS": -4, "POSIX_RENAMED_FROM": -99},
                                   {"POSIX_F_OPEN_END_TIMESTAMP": -1.0})))  # fmt: skip
    assert t.counters["POSIX"].rank[0] == -1
    assert not [w for w in t.warnings if "impossible value" in w]
    assert t.counters["POSIX"].total("POSIX_MMAPS") == -4
    t = load(str(_posix_record_log(tmp_path, {"POSIX_MMAPS": -5}, {})))
    assert [w for w in t.warnings if w.startswith("POSIX_MMAPS has an impossible value (-5")]


def _dfs_log(tmp: Path, dfs_bytes: int) -> Path:
    raw = dc.uncompressed(LOG_341.read_bytes())
    dfs, daos = darshan_library.counter_names("dfs"), darshan_library.counter_names("daos")
    ids = darshan_header.MODULE_IDS
    rec = dc.record(7, 0, {dfs.index("DFS_WRITES"): 10,
                           dfs.index("DFS_BYTES_WRITTEN"): dfs_bytes}, len(dfs), 15, 32)
    obj = dc.record(8, 0, {daos.index("DAOS_ARRAY_WRITES"): 10,
                           daos.index("DAOS_BYTES_WRITTEN"): dfs_bytes}, len(daos), 15, 48)
    data = dc.with_module(dc.with_module(raw, ids.index("DFS"), 1, rec), ids.index("DAOS"), 1, obj)
    p = tmp / f"dfs{dfs_bytes}.darshan"
    p.write_bytes(data)
    return p


def test_dfs_and_daos_are_layers_and_keep_stdio_from_looking_dominant(tmp_path):
    from iopilot.checks import diagnose
    from iopilot.checks.thresholds import defaults

    t = load(str(_dfs_log(tmp_path, 1 << 30)))
    assert t.counters["DFS"].total("DFS_BYTES_WRITTEN") == 1 << 30
    assert t.counters["DAOS"].total("DAOS_ARRAY_WRITES") == 10
    assert {"DFS", "DAOS"} <= {m.name for m in t.modules if m.read}
    d = diagnose(t)
    assert {"DFS", "DAOS"} <= {s.layer for s in d.layers}
    # a threshold between STDIO's share without DAOS and with it: only the
    # log without object-store traffic has STDIO dominant
    stdio = t.counters["STDIO"].total("STDIO_BYTES_WRITTEN")
    posix = t.counters["POSIX"].total("POSIX_BYTES_WRITTEN") + t.counters["POSIX"].total(
        "POSIX_BYTES_READ")  # fmt: skip
    th = defaults()
    th["stdio_share"] = (stdio / (stdio + posix) + stdio / (stdio + posix + (1 << 30))) / 2
    assert "stdio-share" not in {f.check for f in diagnose(t, th).findings}
    without = load(str(LOG_341))
    assert "stdio-share" in {f.check for f in diagnose(without, th).findings}


@pytest.mark.parametrize("how,want", [
    ("segv", "crashed while reading: signal 11 (SIGSEGV)"),
    ("hang", "timed out after 1 s while reading"),
])  # fmt: skip
@pytest.mark.parametrize("entry", ["main", "program"])  # called, or as the program
def test_a_one_log_report_whose_child_dies_is_one_error_row(tmp_path, how, want, entry):
    # One log runs its whole report in one child; if that child dies or hangs,
    # the parent still writes the error row and exits with status 2.
    from iopilot.demo import example_dir

    log = tmp_path / "x.darshan"
    log.write_bytes((example_dir() / "dxt.darshan").read_bytes())
    out = tmp_path / "r.json"
    die = "os.kill(os.getpid(), signal.SIGSEGV)" if how == "segv" else "signal.pause()"
    argv = ["report", "--timeout", "1", "--json", str(out), str(log)]
    call = (f"sys.exit(main({argv!r}))" if entry == "main" else
            f"sys.argv = ['iopilot', *{argv!r}]\nfrom iopilot.__main__ import main as program\n"
            "program()")  # fmt: skip
    code = ("import os, signal, sys\nfrom iopilot.cli import main, reporting\n"
            f"reporting.report = lambda args, isolate: {die}\n{call}")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert r.returncode == 2
    doc = json.loads(out.read_text())
    assert doc["errors"] == [{"path": str(log), "reason": want}] and doc["reports"] == []
    assert r.stderr.endswith(f"iopilot: error: {log}: {want}\n")
