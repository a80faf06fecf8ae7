"""Reading Darshan logs into the model: real logs, and damaged input made here."""

from __future__ import annotations

import bz2
import csv
import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest

from iopilot.demo import example_dir
from iopilot.errors import InputError
from iopilot.model import OP_READ, OP_WRITE, RECORD_LAYERS
from iopilot.sources import load
from iopilot.sources.darshan_columns import parse_hints
from kit import SHARED, shared_logs

EXAMPLES = example_dir()
needs_shared = pytest.mark.skipif(not SHARED.exists(), reason="shared log corpus not present")


def test_example_log_counters_and_job():
    t = load(str(EXAMPLES / "ior_hdf5_example.darshan"))
    assert t.job.nprocs == 4
    assert t.job.format == "darshan 3.21"
    assert {"POSIX", "MPIIO", "H5F", "H5D", "STDIO"} <= set(t.counters)
    posix = t.counters["POSIX"]
    # Every row is one (file, rank); columns are addressed by Darshan's names.
    assert posix.ints.shape == (len(posix), len(posix.int_names))
    assert posix.total("POSIX_BYTES_WRITTEN") > 0
    assert posix.total("POSIX_BYTES_WRITTEN") == int(posix["POSIX_BYTES_WRITTEN"].sum())
    h5d = t.counters["H5D"]
    assert h5d.parent_id is not None and len(h5d.parent_id) == len(h5d)
    assert t.lustre is not None and len(t.lustre) > 0
    assert all(t.lustre.stripe_count > 0)
    assert any(path.startswith("/") for path in t.names.values())


def test_dxt_records_match_counters():
    t = load(str(EXAMPLES / "ior_hdf5_example.darshan"))
    recs = t.records
    posix = recs.layer == RECORD_LAYERS.index("POSIX")
    c = t.counters["POSIX"]
    # DXT holds one record per POSIX read/write: the counts must agree exactly.
    assert int((posix & (recs.op == OP_WRITE)).sum()) == c.total("POSIX_WRITES")
    assert int((posix & (recs.op == OP_READ)).sum()) == c.total("POSIX_READS")
    wrote = int(recs.length[posix & (recs.op == OP_WRITE)].sum())
    assert wrote == c.total("POSIX_BYTES_WRITTEN")
    assert np.all(recs.end >= recs.start)
    assert not t.warnings


def test_partial_dxt_is_flagged(tmp_path):
    # The DXT example is complete; the partial corpus logs are tested below.
    t = load(str(EXAMPLES / "dxt.darshan"))
    assert not any(m.partial for m in t.modules)
    assert len(t.records) > 1000


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty file"),
        (b"# darshan log version: 3.41\n# exe: foo\nPOSIX\t0\t1\n" * 4,
         "darshan-parser text output"),
        (b"hello world, this is a plain text file\n" * 8, "a text file"),
        (b"\x00\x01\x02garbage" * 200, "not a Darshan log"),
    ],
)
def test_bad_files_get_one_line_reasons(tmp_path, content, reason):
    p = tmp_path / "bad.darshan"
    p.write_bytes(content)
    with pytest.raises(InputError) as e:
        load(str(p))
    assert reason in str(e.value)
    assert str(p) in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_path_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load(str(tmp_path / "nope.darshan"))
    with pytest.raises(InputError, match="directory"):
        load(str(tmp_path))


def test_darshan2_gzip_and_bzip2_files(tmp_path):
    old = tmp_path / "old.darshan.gz"
    with gzip.open(old, "wb") as f:
        f.write(b"2.06\x00\x00\x00\x00" + b"\x00" * 600)
    with pytest.raises(InputError, match=r"Darshan 2\.x log \(format 2\.06\)"):
        load(str(old))
    whole = tmp_path / "log.darshan.bz2"
    whole.write_bytes(bz2.compress((EXAMPLES / "dxt.darshan").read_bytes()))
    with pytest.raises(InputError, match="bunzip2"):
        load(str(whole))


def test_truncated_copy_of_a_real_log(tmp_path):
    src = EXAMPLES / "ior_hdf5_example.darshan"
    data = src.read_bytes()
    cut = tmp_path / "cut.darshan"
    cut.write_bytes(data[: len(data) // 2])
    want = rf"truncated: the file ends at byte {len(data) // 2} inside the H5D module \(expects"
    with pytest.raises(InputError, match=want):
        load(str(cut))
    head = tmp_path / "head.darshan"
    head.write_bytes(data[:200])
    with pytest.raises(InputError, match="ends inside the header"):
        load(str(head))


@pytest.mark.parametrize("where", [0.1, 0.3, 0.5])
def test_corrupted_region_is_an_error_not_silence(tmp_path, where):
    # The library aborts on some damaged streams and reads others as shorter
    # data without a word; both must become one clear error instead.
    data = bytearray((EXAMPLES / "ior_hdf5_example.darshan").read_bytes())
    at = int(len(data) * where)
    data[at : at + 64] = b"\xff" * 64
    bad = tmp_path / "corrupt.darshan"
    bad.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"corrupt: the .+ region does not decompress"):
        load(str(bad))


@pytest.mark.parametrize(("where", "module", "layer"), [(0.7, "DXT_POSIX", "POSIX"),
                                                        (0.9, "DXT_MPIIO", "MPIIO")])
def test_a_damaged_dxt_region_keeps_the_counters_with_a_warning(tmp_path, where, module, layer):
    good = load(str(EXAMPLES / "ior_hdf5_example.darshan"))
    data = bytearray((EXAMPLES / "ior_hdf5_example.darshan").read_bytes())
    at = int(len(data) * where)
    data[at : at + 64] = b"\xff" * 64
    bad = tmp_path / "corrupt.darshan"
    bad.write_bytes(bytes(data))
    t = load(str(bad))
    assert any(w.startswith(f"the {module} region is damaged (it does not decompress")
               for w in t.warnings)  # fmt: skip
    for name in ("POSIX", "MPIIO", "H5D"):
        assert np.array_equal(t.counters[name].ints, good.counters[name].ints)
    code = RECORD_LAYERS.index(layer)
    assert not (t.records.layer == code).any() and (good.records.layer == code).any()
    assert next(m for m in t.modules if m.name == module).read is False


def test_renamed_log_still_reads(tmp_path):
    p = tmp_path / "log.bin"
    shutil.copy(EXAMPLES / "dxt.darshan", p)
    assert load(str(p)).job.nprocs == 1


def test_hint_parsing():
    assert parse_hints("no") is None
    assert parse_hints("") is None
    assert parse_hints("cb_nodes=4;romio_cb_write=enable") == {
        "cb_nodes": "4",
        "romio_cb_write": "enable",
    }


# ---------------------------------------------------------------------------
# The shared corpus: every log, checked against its manifest.


def _manifest() -> list[dict[str, str]]:
    if not SHARED.exists():
        return []
    with open(SHARED / "MANIFEST.tsv") as f:
        return list(csv.DictReader(f, delimiter="\t"))


READABLE = [r for r in _manifest() if not r["open_error"]] or shared_logs()
DAMAGED = [r for r in _manifest() if r["open_error"]] or shared_logs()


@needs_shared
@pytest.mark.parametrize("row", READABLE, ids=lambda r: r["file"][:50] if r else "corpus")
def test_corpus_log_matches_manifest(row):
    t = load(str(SHARED / row["file"]))
    assert t.job.nprocs == int(row["nprocs"])
    assert t.job.format == f"darshan {row['log_format']}"
    listed = [m for m in row["modules"].split(",") if m]
    assert [m.name for m in t.modules] == listed
    partial = {m for m in row["partial_modules"].split(",") if m}
    assert {m.name for m in t.modules if m.partial} == partial
    if partial:
        assert t.warnings, "partial modules must be reported"
    assert len(t.records) == int(row["dxt_segments"] or 0)


@needs_shared
@pytest.mark.parametrize("row", DAMAGED, ids=lambda r: r["file"] if r else "corpus")
def test_corpus_damaged_logs(row):
    with pytest.raises(InputError) as e:
        load(str(SHARED / row["file"]))
    msg = str(e.value)
    assert row["file"].split("/")[-1] in msg
    expected = {
        "CORRUPT_zero_bytes.darshan": "empty file",
        "CORRUPT_truncated_header_only.darshan": "ends inside the header",
        "LOCAL_bzip2_converted_mpi-io-test_dxt_32p.darshan": "darshan-convert",
    }[Path(row["file"]).name]
    assert expected in msg


@needs_shared
def test_partial_dxt_cross_check():
    t = load(str(SHARED / "partial_data_dxt.darshan"))
    text = " ".join(t.warnings)
    assert "65,536 of the 1,000,000 POSIX operations" in text
    assert "DXT_POSIX is partial" in text


@needs_shared
def test_big_endian_log_reads():
    t = load(str(SHARED / "mpi-io-test-ppc64-3.1.3.darshan"))
    assert t.job.nprocs == 4
    assert t.counters["POSIX"].total("POSIX_BYTES_WRITTEN") > 0


@needs_shared
def test_export_names_each_datasets_file_record_as_darshan_parser_does():
    from iopilot.report.counters_text import counter_lines, header

    tr = load(str(SHARED / "hdf5_diagonal_write_1_byte_dxt.darshan"))
    lines = [line.split("\t") for line in counter_lines(tr)]
    parents = {(r[1], r[2]): r[4] for r in lines if r[3] == "H5D_FILE_REC_ID"}
    # darshan-parser 3.5 prints this pair for rank 0's dataset of test_0.h5
    assert parents["0", "17389075414465034664"] == "2130744796581944128"
    assert len(parents) == len(tr.counters["H5D"])
    h5d = [r[3] for r in lines if r[0] == "H5D" and r[2] == "17389075414465034664"]
    assert h5d[-1] == "H5D_FILE_REC_ID"  # after the floating-point counters, as there
    assert "# not exported as counters: DXT_POSIX" in header(tr)


@pytest.mark.parametrize("memfd", [True, False])
def test_what_the_c_library_prints_on_fd_2_is_caught_and_fd_2_restored(monkeypatch, memfd):
    import os

    from iopilot.sources import darshan_library

    if not memfd:  # kernels or systems without memfd_create: a temporary file
        monkeypatch.delattr(os, "memfd_create", raising=False)
    before = os.fstat(2)
    with darshan_library.CapturedStderr() as err:
        os.write(2, b"Error: bad block\n  second line \n")
    assert err.text == "Error: bad block\n  second line"
    after = os.fstat(2)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
    with darshan_library.CapturedStderr() as quiet:
        pass
    assert quiet.text == ""


def test_impossible_counters_are_named_set_to_zero_and_the_unknown_kept():
    from iopilot.sources.darshan_columns import _clean_counters
    from kit import counters

    t = counters("POSIX", [
        {"file": 1, "rank": 0, "POSIX_WRITES": -2, "POSIX_MMAPS": -1,
         "POSIX_F_WRITE_TIME": -0.5, "POSIX_F_READ_TIME": -1.0},
        {"file": 2, "rank": -1, "POSIX_WRITES": -4, "POSIX_OPENS": -5,
         "POSIX_F_WRITE_TIME": 1e-310, "POSIX_F_META_TIME": float("inf")},
        {"file": 1, "rank": 1, "POSIX_WRITES": -3, "POSIX_F_META_TIME": 2.5},
    ])  # fmt: skip
    out = _clean_counters(t, {1: "/data/a"}, nprocs=4)
    tail = ": set to 0, the checks ignore it"
    assert out == [
        "POSIX_OPENS has an impossible value (-5 in the record of <file 0x2>, rank -1)" + tail,
        "POSIX_WRITES has an impossible value (-2 in the record of /data/a, rank 0 and 1 "
        "more record(s))" + tail,
        "POSIX_F_WRITE_TIME has an impossible value (-0.5 in the record of /data/a, rank 0 "
        "and 1 more record(s))" + tail,
        "POSIX_F_META_TIME has an impossible value (inf in the record of <file 0x2>, rank -1)"
        + tail,
    ]  # fmt: skip
    assert t["POSIX_WRITES"].tolist() == [0, -4, 0]  # -4 over 4 ranks: "unknown", kept
    assert t["POSIX_OPENS"].tolist() == [0, 0, 0] and t["POSIX_MMAPS"].tolist() == [-1, 0, 0]
    assert t["POSIX_F_WRITE_TIME"].tolist() == [0.0, 0.0, 0.0]
    assert t["POSIX_F_READ_TIME"].tolist() == [-1.0, 0.0, 0.0]  # -1: not monitored
    assert t["POSIX_F_META_TIME"].tolist() == [0.0, 0.0, 2.5]
    assert _clean_counters(t, {}, nprocs=4) == []  # clean now
    assert _clean_counters(counters("POSIX", []), {}, nprocs=1) == []
