"""Darshan's HEATMAP and AutoPerf's APMPI modules in the model: real logs checked
against PyDarshan read independently, and damaged copies made here."""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import numpy as np
import pytest

import darshan_craft as dc
from iopilot.model import MpiProfile
from iopilot.sources import load
from iopilot.sources.darshan_header import MODULE_IDS
from iopilot.sources.darshan_profiles import HEATMAP_IDS
from iopilot.vocabulary import DIRECTIONS, MODULE
from kit import CORPUS_ABSENT, SHARED, shared_logs

PERF_BYTES = 5232  # one APMPI per-rank record; the header record is 48 bytes
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=CORPUS_ABSENT)
E3SM = SHARED / "e3sm_io_heatmap_only.darshan"  # 512 ranks, 114 bins, APMPI
SMALL = SHARED / "mpi-io-test-x86_64-3.4.6.darshan"  # 3.41, 4 ranks, both modules
HEATMAP_LOGS = ["e3sm_io_heatmap_only.darshan", "mpi-io-test-x86_64-3.4.6.darshan",
                "treddy_runtime_heatmap_inactive_ranks.darshan",
                "LOCAL_dd_nonmpi_dxt_v3.5.0.darshan",  # not MPI: one rank
                "snyder_python3_id3116902-2110365_12-19-66957-188958432683465822_1.darshan"]


def _pydarshan_heatmaps(path) -> dict:
    import darshan

    with darshan.DarshanReport(str(path), read_all=False) as r:
        r.read_all_heatmap_records()
        return {k: (h._bin_width_seconds, h._nbins, h.to_df(["read"], interval_index=False),
                    h.to_df(["write"], interval_index=False)) for k, h in r.heatmaps.items()}


@needs_shared
@pytest.mark.parametrize("name", HEATMAP_LOGS)
def test_heatmaps_equal_pydarshans_bin_for_bin(name):
    t = load(str(SHARED / name))
    ref = _pydarshan_heatmaps(SHARED / name)
    assert t.heatmaps is not None and set(t.heatmaps) == set(ref)
    for layer, h in t.heatmaps.items():
        width, nbins, read, write = ref[layer]
        assert h.bin_width == width and h.bins == nbins
        assert list(h.rank) == sorted(read.index)
        assert np.array_equal(h.read, read.loc[h.rank].to_numpy())
        assert np.array_equal(h.write, write.loc[h.rank].to_numpy())
        assert h.total("read") == int(read.to_numpy().sum())
    info = next(m for m in t.modules if m.name == "HEATMAP")
    assert info.read and info.rows == sum(len(h) for h in t.heatmaps.values())


@needs_shared
@pytest.mark.parametrize("name", shared_logs(keep=lambda n: n in HEATMAP_LOGS or n.startswith(
    ("mpi-io-test-x86_64-3.4", "shane_ior"))))
def test_heatmap_bytes_agree_with_the_layers_byte_counters(name):
    # Darshan spreads an operation's bytes over the bins it spans, rounding
    # each share: with one bin nothing is spread, so the sums are exact; with
    # more, each operation is off by well under one byte per bin it spans.
    t = load(str(SHARED / name))
    assert t.heatmaps
    for layer, h in t.heatmaps.items():
        c = t.counters[layer]
        for d, word in zip(DIRECTIONS, ("READ", "WRITTEN"), strict=True):
            ops = sum(c.total(n) for n in MODULE[layer].op_counters(d))
            diff = abs(h.total(d.lower()) - c.total(f"{layer}_BYTES_{word}"))
            assert diff == 0 if h.bins == 1 else diff <= ops, (layer, d, diff, ops)


@needs_shared
def test_e3sm_heatmap_shape_and_time_span():
    t = load(str(E3SM))
    h = t.heatmaps["POSIX"]
    assert (len(h), h.bins, h.bin_width) == (512, 114, 6.4)
    assert list(h.rank) == list(range(512))
    # the bins cover the run (727 s) and no more than one bin past it
    assert 727 <= h.seconds < 727 + h.bin_width
    assert list(t.heatmaps) == ["POSIX", "MPIIO", "STDIO"]  # the vocabulary's order


_APMPI_REF = """
import json, sys, darshan
r = darshan.DarshanReport(sys.argv[1], read_all=False)
r.mod_read_all_apmpi_records()
recs = r.records["APMPI"]
keys = ["MPI_TOTAL_COMM_TIME", "MPI_BARRIER_CALL_COUNT", "MPI_ALLREDUCE_TOTAL_TIME",
        "MPI_ALLREDUCE_MAX_TIME", "MPI_SEND_TOTAL_BYTES", "MPI_BCAST_TOTAL_SYNC_TIME"]
out = {"head": {k: recs[0][k] for k in ("sync_flag", "variance_total_mpitime")},
       "ranks": [x["rank"] for x in recs[1:]], "hosts": [x["node_name"] for x in recs[1:]],
       "calls": [int(sum(v for k, v in x["all_counters"].items() if k.endswith("_CALL_COUNT")))
                 for x in recs[1:]]}
for k in keys:
    out[k] = [float(x["all_counters"][k]) for x in recs[1:]]
print(json.dumps(out))
"""


def _pydarshan_apmpi(path) -> dict:
    # A fresh process: the library reads APMPI right only in the first log a
    # process opens (see iopilot.sources.darshan_profiles).
    r = subprocess.run([sys.executable, "-c", _APMPI_REF, str(path)], capture_output=True,
                       text=True, check=True, timeout=120)  # fmt: skip
    return json.loads(r.stdout)


def _col(m: MpiProfile, op: str, what: str) -> np.ndarray:
    return getattr(m, what)[:, m.ops.index(op)]


@needs_shared
@pytest.mark.parametrize("name", ["e3sm_io_heatmap_only.darshan", SMALL.name,
                                  "mpi-io-test-x86_64-3.3.0.darshan"])
def test_apmpi_equals_pydarshan_read_in_a_fresh_process(name):
    ref = _pydarshan_apmpi(SHARED / name)
    m = load(str(SHARED / name)).mpi
    assert m is not None
    assert list(m.rank) == ref["ranks"] and list(m.host) == ref["hosts"]
    assert m.sync_measured is bool(ref["head"]["sync_flag"])
    assert m.comm_variance == ref["head"]["variance_total_mpitime"]
    assert list(m.comm_seconds) == ref["MPI_TOTAL_COMM_TIME"]
    assert list(_col(m, "MPI_BARRIER", "calls")) == ref["MPI_BARRIER_CALL_COUNT"]
    assert list(_col(m, "MPI_ALLREDUCE", "seconds")) == ref["MPI_ALLREDUCE_TOTAL_TIME"]
    assert list(_col(m, "MPI_ALLREDUCE", "max_seconds")) == ref["MPI_ALLREDUCE_MAX_TIME"]
    assert list(_col(m, "MPI_SEND", "bytes")) == ref["MPI_SEND_TOTAL_BYTES"]
    bcast = m.sync_seconds[:, m.sync_ops.index("MPI_BCAST")]
    assert list(bcast) == ref["MPI_BCAST_TOTAL_SYNC_TIME"]
    assert list(m.calls.sum(axis=1)) == ref["calls"]
    # operations without message sizes have no bytes
    assert not _col(m, "MPI_BARRIER", "bytes").any()


@needs_shared
def test_apmpi_reads_right_in_every_log_of_a_process():
    first = load(str(E3SM)).mpi
    again = [load(str(SMALL)).mpi for _ in range(2)]
    assert first is not None and len(first) == 512
    for m in again:
        assert m is not None and list(m.rank) == [0, 1, 2, 3]
        assert np.array_equal(m.comm_seconds, again[0].comm_seconds)
    # MPI time is spent: every rank of this job called MPI (barriers at least)
    assert (first.comm_seconds > 0).all() and (_col(first, "MPI_BARRIER", "calls") > 0).all()


def test_a_log_without_the_modules_has_none():
    from iopilot.demo import example_dir

    t = load(str(example_dir() / "ior_hdf5_example.darshan"))
    assert t.heatmaps is None and t.mpi is None


def test_job_sync_time_sums_the_ranks():
    m = MpiProfile(rank=np.array([0, 1]), host=("a", "b"), ops=("MPI_BARRIER",),
                   calls=np.array([[1], [2]]), seconds=np.array([[1.0], [3.0]]),
                   max_seconds=np.array([[1.0], [2.0]]), bytes=np.zeros((2, 1), np.int64),
                   sync_ops=("MPI_BARRIER", "MPI_BCAST"),
                   sync_seconds=np.array([[0.5, 0.25], [0.0, 2.0]]),
                   comm_seconds=np.array([1.75, 5.0]), sync_measured=True)  # fmt: skip
    assert list(m.rank_sync_seconds) == [0.75, 2.0]
    assert m.job_sync_seconds == 2.75 and m.job_comm_seconds == 6.75


# ---------------------------------------------------------------------------
# Damaged regions: a warning, the module left out, everything else kept


def _region(data: bytes, module: str) -> tuple[int, int]:
    return dc.regions(data)[MODULE_IDS.index(module) + 1]


def _check_left_out(t, good, module: str, why: str) -> None:
    assert any(w.startswith(f"the {module} region is damaged (") and why in w
               and w.endswith("its data are left out; the counters are complete")
               for w in t.warnings), t.warnings  # fmt: skip
    info = next(m for m in t.modules if m.name == module)
    assert info.read is False and info.partial
    for layer in ("POSIX", "MPIIO", "STDIO"):
        assert np.array_equal(t.counters[layer].ints, good.counters[layer].ints)


@needs_shared
@pytest.mark.parametrize(("module", "other"), [("HEATMAP", "mpi"), ("APMPI", "heatmaps")])
def test_a_region_that_does_not_decompress_is_left_out(tmp_path, module, other):
    good = load(str(SMALL))
    data = bytearray(SMALL.read_bytes())
    off, n = _region(bytes(data), module)
    data[off + n // 2: off + n // 2 + 8] = b"\xff" * 8
    p = tmp_path / "bad.darshan"
    p.write_bytes(bytes(data))
    t = load(str(p))
    _check_left_out(t, good, module, "it does not decompress")
    assert getattr(t, "mpi" if module == "APMPI" else "heatmaps") is None
    assert getattr(t, other) is not None  # the other module is untouched


def _edited(tmp_path, edit) -> object:
    """The small log, uncompressed (no checksum), after ``edit(bytearray)``, loaded."""
    data = bytearray(dc.uncompressed(SMALL.read_bytes()))
    edit(data)
    p = tmp_path / "m.darshan"
    p.write_bytes(bytes(data))
    return load(str(p))


def _mutated(tmp_path, module: str, at: int, fmt: str, value) -> object:
    """The small log with one value packed ``at`` bytes into ``module``'s region."""
    return _edited(tmp_path, lambda d: struct.pack_into(fmt, d, _region(bytes(d), module)[0] + at,
                                                        value))  # fmt: skip


@needs_shared
def test_an_uncompressed_copy_reads_the_same(tmp_path):
    good = load(str(SMALL))
    p = tmp_path / "u.darshan"
    p.write_bytes(dc.uncompressed(SMALL.read_bytes()))
    t = load(str(p))
    assert not t.warnings
    for layer, h in good.heatmaps.items():
        assert np.array_equal(t.heatmaps[layer].write, h.write)
    assert np.array_equal(t.mpi.seconds, good.mpi.seconds) and t.mpi.host == good.mpi.host


_TIMES_AT = 48 + 16 + 8 * 396 + 8  # APMPI: rank 0's MPI_SEND_MIN_TIME


@needs_shared
@pytest.mark.parametrize(("module", "at", "fmt", "value", "why"), [
    ("HEATMAP", 8, "<q", 4, "a record has rank 4"),      # rank nprocs: one too many
    ("HEATMAP", 8, "<q", -1, "a record has rank -1"),
    ("HEATMAP", 16, "<d", -0.1, "bins of -0.1 s"),       # bin width
    ("HEATMAP", 48, "<q", -7, "negative byte counts"),    # first write bin
    ("APMPI", 16, "<q", 12345, "bad magic number 0x3039"),  # header magic
    ("APMPI", 48 + 8, "<q", 4, "ranks out of order or out of range (0-3)"),  # rank nprocs
    ("APMPI", _TIMES_AT, "<d", float("nan"), "negative or not-a-number times"),
    ("APMPI", _TIMES_AT, "<d", -1.0, "negative or not-a-number times"),
])  # fmt: skip
def test_a_damaged_record_leaves_its_module_out(tmp_path, module, at, fmt, value, why):
    t = _mutated(tmp_path, module, at, fmt, value)
    _check_left_out(t, load(str(SMALL)), module, why)
    kept, lost = ("mpi", "heatmaps") if module == "HEATMAP" else ("heatmaps", "mpi")
    assert getattr(t, lost) is None and getattr(t, kept) is not None


@needs_shared
def test_heatmap_records_of_one_layer_with_two_bin_widths_are_damage(tmp_path):
    good = load(str(SMALL))
    data = dc.uncompressed(SMALL.read_bytes())
    off, _ = _region(data, "HEATMAP")
    # records of 1 bin are 48 + 16 bytes; the POSIX ones are the 2nd to 5th here
    ids = [struct.unpack_from("<Q", data, off + 64 * i)[0] for i in range(9)]
    posix = [i for i, x in enumerate(ids) if x == ids[1]]
    assert len(posix) == 4
    t = _mutated(tmp_path, "HEATMAP", 64 * posix[-1] + 16, "<d", 0.2)
    _check_left_out(t, good, "HEATMAP", "different bin widths (0.1 s, 0.2 s)")
    # a rank recorded twice in one layer
    t = _mutated(tmp_path, "HEATMAP", 64 * posix[-1] + 8, "<q",
                 struct.unpack_from("<q", data, off + 64 * posix[0] + 8)[0])
    _check_left_out(t, good, "HEATMAP", "more than one POSIX record")


@needs_shared
def test_ranks_in_any_order_up_to_the_last_are_read_and_sorted(tmp_path):
    def reorder(data: bytearray) -> None:
        off, _ = _region(bytes(data), "APMPI")
        for i, r in enumerate((3, 2, 1, 0)):  # rank nprocs - 1 is valid: the check's edge
            struct.pack_into("<q", data, off + 48 + PERF_BYTES * i + 8, r)

    m = _edited(tmp_path, reorder).mpi
    good = load(str(SMALL)).mpi
    assert m is not None and list(m.rank) == [0, 1, 2, 3]
    assert np.array_equal(m.comm_seconds, good.comm_seconds[::-1])


@needs_shared
def test_an_apmpi_region_of_partial_records_is_damage(tmp_path):
    def cut(data: bytearray) -> None:  # the map gives the region 100 bytes less
        _, first, _ = dc.layout(bytes(data))
        off, n = _region(bytes(data), "APMPI")
        struct.pack_into("<QQ", data, first + 16 * (MODULE_IDS.index("APMPI") + 1), off, n - 100)

    t = _edited(tmp_path, cut)
    _check_left_out(t, load(str(SMALL)), "APMPI",
                    f"not 1 to 4 whole per-rank records of {PERF_BYTES} bytes")


@needs_shared
def test_an_apmpi_record_format_of_another_version_is_not_guessed(tmp_path):
    at = dc.MOD_VER_AT + 4 * MODULE_IDS.index("APMPI")
    t = _edited(tmp_path, lambda d: struct.pack_into("<I", d, at, 2))
    _check_left_out(t, load(str(SMALL)), "APMPI", "record format version 2, this reader knows 1")


# ---------------------------------------------------------------------------
# What the JSON and terminal reports say of them


def _report(path) -> dict:
    from iopilot.checks import diagnose
    from iopilot.report.json_report import diagnosis_dict

    return diagnosis_dict(diagnose(load(str(path))))


@needs_shared
def test_json_summaries_of_the_e3sm_log():
    r = _report(E3SM)
    ref = _pydarshan_heatmaps(E3SM)
    h = r["heatmap"]
    assert h["source"] == "Darshan HEATMAP module"
    assert [x["layer"] for x in h["layers"]] == ["POSIX", "MPI-IO", "STDIO"]
    posix = h["layers"][0]
    width, nbins, read, write = ref["POSIX"]
    per_bin = (read + write).sum(axis=0).to_numpy()
    b = int(np.argmax(per_bin))
    assert (posix["ranks"], posix["bins"], posix["bin_seconds"]) == (512, nbins, width)
    assert posix["bytes_written"] == int(write.to_numpy().sum())
    assert posix["busiest_bin"] == {"start": round(b * width, 6), "end": round((b + 1) * width, 6),
                                    "bytes": int(per_bin[b])}  # fmt: skip
    m = r["mpi"]
    ref = _pydarshan_apmpi(E3SM)
    total = ref["MPI_TOTAL_COMM_TIME"]
    assert m["ranks"] == 512 and m["seconds"] == round(sum(total), 6)
    assert m["slowest_rank"] == ref["ranks"][int(np.argmax(total))]
    assert m["slowest_rank_seconds"] == round(max(total), 6)
    assert m["sync_measured"] is False and m["sync_seconds"] is None
    ops = m["operations"]
    assert len(ops) == 9 and ops[0]["operation"] == "MPI_BARRIER"  # it called 9 of them
    assert [o["seconds"] for o in ops] == sorted((o["seconds"] for o in ops), reverse=True)
    assert ops[0]["calls"] == sum(ref["MPI_BARRIER_CALL_COUNT"])
    assert all(o["calls"] > 0 for o in ops)
    mods = {x["name"]: x for x in r["modules"]}
    assert mods["HEATMAP"]["used"] and mods["APMPI"]["used"] and mods["APMPI"]["rows"] == 512


@needs_shared
def test_terminal_names_both_modules_and_a_log_without_them_says_nothing():
    from iopilot.report.terminal import Style, render

    text = render(_report(SMALL), Style(False))
    assert "  heatmap   POSIX, MPI-IO, STDIO: 4 rank(s) x 1 bins of 0.1 s (Darshan HEATMAP);" \
        " busiest POSIX bin 0-0.1 s: 128.0 MiB" in text  # fmt: skip
    assert "  MPI time  0.03452 s over 4 rank(s) (APMPI), slowest rank 2: 0.01155 s;" \
        " sync time not measured; top: MPI_BARRIER 97 %, MPI_ALLREDUCE 3 %" in text  # fmt: skip
    from iopilot.demo import example_dir

    plain = _report(example_dir() / "ior_hdf5_example.darshan")
    assert plain["heatmap"] is None and plain["mpi"] is None
    text = render(plain, Style(False))
    assert "heatmap" not in text and "MPI time" not in text


def test_measured_sync_time_is_reported_and_large_times_have_no_exponent():
    from iopilot.report.profiles import mpi_summary
    from iopilot.report.terminal import mpi_line
    from kit import trace

    t = trace(nprocs=2)
    t.mpi = MpiProfile(rank=np.array([0, 1]), host=("a", "a"), ops=("MPI_SEND", "MPI_BCAST"),
                       calls=np.array([[0, 1], [0, 2]]), seconds=np.array([[0.0, 1500.0],
                                                                           [0.0, 10.0]]),
                       max_seconds=np.ones((2, 2)), bytes=np.array([[0, 8], [0, 8]]),
                       sync_ops=("MPI_BCAST",), sync_seconds=np.array([[2.0], [0.5]]),
                       comm_seconds=np.array([1502.0, 10.5]), sync_measured=True)  # fmt: skip
    m = mpi_summary(t)
    assert m["sync_seconds"] == 2.5 and m["slowest_rank"] == 0
    # MPI_SEND was never called: not listed although its seconds tie at 0
    assert [o["operation"] for o in m["operations"]] == ["MPI_BCAST"]
    assert m["operations"][0] == {"operation": "MPI_BCAST", "calls": 3, "seconds": 1510.0,
                                  "slowest_rank_seconds": 1500.0, "bytes": 16}  # fmt: skip
    assert mpi_line(m).startswith("1,512 s over 2 rank(s) (APMPI), slowest rank 0: 1,502 s; "
                                  "sync time 2.5 s; top: MPI_BCAST 100 %")  # fmt: skip


def _heatmap_record(rid: int, rank: int, width: float, write: list[int], read: list[int]) -> bytes:
    return struct.pack("<Qqdq16x", rid, rank, width, len(write)) + np.array(
        write + read, "<i8").tobytes()


@needs_shared
def test_records_with_uneven_bin_counts_are_padded_and_unknown_layers_left_out(tmp_path):
    # Darshan 3.4.0-3.4.3 wrote some records a bin short or long: each layer
    # gets its longest count, shorter rows end with empty bins.
    posix = next(i for i, n in HEATMAP_IDS.items() if n == "POSIX")
    recs = b"".join(_heatmap_record(posix, r, 0.5, [r + 1, 2, 3], [0, 0, 7]) for r in range(3))
    recs += _heatmap_record(posix, 3, 0.5, [9, 9], [1, 1])
    recs += _heatmap_record(12345, 0, 0.5, [1], [1])
    data = dc.uncompressed(SMALL.read_bytes())
    slot = MODULE_IDS.index("HEATMAP")
    p = tmp_path / "uneven.darshan"
    p.write_bytes(dc.with_module(data, slot, 1, recs))
    t = load(str(p))
    h = t.heatmaps["POSIX"]
    assert list(t.heatmaps) == ["POSIX"] and h.bin_width == 0.5
    assert h.write.tolist() == [[1, 2, 3], [2, 2, 3], [3, 2, 3], [9, 9, 0]]
    assert h.read.tolist() == [[0, 0, 7]] * 3 + [[1, 1, 0]]
    assert "HEATMAP has 1 record(s) of an unknown layer (id 0x3039): left out" in t.warnings
    # a bin count past what Darshan writes, and a record cut short, are damage
    huge = _heatmap_record(posix, 0, 0.5, [1] * 4097, [1] * 4097)
    for bad, why in ((recs[:-8], "a record of 1 bins is cut short at byte"),
                     (recs[:40], "a record is cut short at byte 0 of 40"),
                     (huge, "a record has 4097 bins")):  # fmt: skip
        p.write_bytes(dc.with_module(data, slot, 1, bad))
        _check_left_out(load(str(p)), load(str(SMALL)), "HEATMAP", why)
    # 4096 bins is still a heatmap: the bound's other side, alone (records of
    # one size) and before a shorter record (found one by one)
    big = _heatmap_record(posix, 0, 0.5, [1] * 4096, [2] * 4096)
    for region in (big, big + _heatmap_record(posix, 1, 0.5, [5], [0])):
        p.write_bytes(dc.with_module(data, slot, 1, region))
        h = load(str(p)).heatmaps["POSIX"]
        assert h.bins == 4096 and h.total("read") == 8192
        assert h.total("write") == 4096 + 5 * (len(region) > len(big))


def test_big_endian_regions_read_as_little_endian_ones():
    from iopilot.sources.darshan_library import APMPI_TABLES, counter_names
    from iopilot.sources.darshan_profiles import (
        APMPI_MAGIC,
        apmpi_dtypes,
        read_apmpi,
        read_heatmaps,
    )

    posix = next(i for i, n in HEATMAP_IDS.items() if n == "POSIX")
    for e in "<>":
        raw = b"".join(struct.pack(e + "Qqdq16x", posix, r, 0.25, 2)
                       + np.array([r, 2, 3, 4], e + "i8").tobytes() for r in (1, 0))  # fmt: skip
        maps, warn = read_heatmaps(raw, {}, 2, e == ">")
        h = maps["POSIX"]
        assert not warn and list(h.rank) == [0, 1] and h.bin_width == 0.25
        assert h.write.tolist() == [[0, 2], [1, 2]] and h.read.tolist() == [[3, 4], [3, 4]]
    names = {k: counter_names(f"apmpi{t}") for k, t in APMPI_TABLES.items()}
    for big in (False, True):
        head_t, perf_t = apmpi_dtypes(names, big)
        head = np.zeros(1, head_t)
        head["magic"], head["sync_flag"], head["comm_variance"] = APMPI_MAGIC, 1, 0.5
        perf = np.zeros(2, perf_t)
        perf["rank"] = [1, 0]
        perf["total"][:, 0] = [2.0, 3.0]  # MPI_TOTAL_COMM_TIME
        perf["counters"][:, names["counters"].index("MPI_BARRIER_CALL_COUNT")] = [7, 9]
        perf["host"] = [b"n1", b"n0"]
        m = read_apmpi(head.tobytes() + perf.tobytes(), names, big, 2)
        assert list(m.rank) == [0, 1] and m.host == ("n0", "n1")
        assert list(m.comm_seconds) == [3.0, 2.0] and m.sync_measured and m.comm_variance == 0.5
        assert list(m.calls[:, m.ops.index("MPI_BARRIER")]) == [9, 7]


@needs_shared
@pytest.mark.parametrize("name", ["e3sm_io_heatmap_only.darshan", SMALL.name])
def test_known_heatmap_ids_are_those_the_name_tables_give(name):
    from iopilot.sources.darshan_profiles import heatmap_layer

    t = load(str(SHARED / name))
    named = {i: n for i, n in t.names.items() if n.startswith("heatmap:")}
    assert named  # these logs name their heatmaps
    for rid, n in named.items():
        assert heatmap_layer(rid, {}) == n.removeprefix("heatmap:") == heatmap_layer(rid, named)
