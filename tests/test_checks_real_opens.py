"""Opens that open nothing: Darshan's (and the runtime's) POSIX_OPENS count
every fileno and dup, STDIO_OPENS every fdopen.  A C++ ofstream calls
fileno before each write, so a file opened once and written by line shows
hundreds of thousands of "opens"; the checks judge the real ones."""

from __future__ import annotations

import numpy as np
import pytest

from iopilot.checks import Level
from iopilot.checks.base import Context
from iopilot.checks.rankcost import fs_rows
from iopilot.checks.thresholds import defaults
from kit import counters, findings, trace

T = defaults()


def posix(**kw):
    return {"file": 1, "rank": 0, **{f"POSIX_{k.upper()}": v for k, v in kw.items()}}


def reopened(*tables):
    return findings(trace(*tables), "reopened-files")


def rows_of(*tables) -> dict[str, np.ndarray]:
    rows = fs_rows(Context(trace(*tables), defaults()))
    assert rows is not None
    return rows


def test_one_open_and_ten_thousand_filenos_is_not_reopened():
    # ofstream written by line with std::endl: one open, a fileno per write
    row = posix(opens=1 + 10_000, filenos=10_000, writes=10_000, f_meta_time=0.5)
    assert reopened(counters("POSIX", [row])) == []
    assert rows_of(counters("POSIX", [row]))["opens"].tolist() == [1]


def test_two_hundred_real_opens_are_reopened():
    row = posix(opens=200, writes=200, f_meta_time=0.5)
    (f,) = reopened(counters("POSIX", [row]))
    assert f.evidence["opens"] == 200 and f.level >= Level.WARN
    assert "200 opens" in f.message
    # ... and with a fileno at each of their writes, still 200
    row = posix(opens=200 + 5_000, filenos=5_000, writes=5_000, f_meta_time=0.5)
    (f,) = reopened(counters("POSIX", [row]))
    assert f.evidence["opens"] == 200 and "200 opens" in f.message


def test_reopen_count_both_sides_with_filenos_and_dups():
    n = int(T["reopen_count"])
    extra = {"filenos": 3 * n, "dups": n}  # 4n opens that open nothing
    at = posix(opens=n + 4 * n, writes=n, f_meta_time=0.2, **extra)
    assert reopened(counters("POSIX", [at])) == []
    above = posix(opens=n + 1 + 4 * n, writes=n, f_meta_time=0.2, **extra)
    (f,) = reopened(counters("POSIX", [above]))
    assert f.evidence["opens"] == n + 1


def test_fdopens_are_not_stdio_opens():
    n = int(T["reopen_count"])
    # each step opens the file and fdopens a stream on it: n opens, not 2n
    po = counters("POSIX", [posix(opens=n, f_meta_time=0.2)])
    st = counters("STDIO", [{"file": 1, "rank": 0, "STDIO_OPENS": n, "STDIO_FDOPENS": n,
                             "STDIO_WRITES": n, "STDIO_F_META_TIME": 0.1}])  # fmt: skip
    assert reopened(po, st) == []
    st = counters("STDIO", [{"file": 1, "rank": 0, "STDIO_OPENS": n + 1, "STDIO_FDOPENS": n,
                             "STDIO_WRITES": n, "STDIO_F_META_TIME": 0.1}])  # fmt: skip
    (f,) = reopened(po, st)
    assert f.evidence["opens"] == n + 1


def test_real_opens_never_below_zero():
    # a log whose counters disagree (filenos without their opens)
    rows = rows_of(counters("POSIX", [posix(opens=2, filenos=5, dups=1, reads=1)]))
    assert rows["opens"].tolist() == [0]


@pytest.mark.parametrize(("real", "found"), [(T["reread_opens"] - 1, False),
                                             (T["reread_opens"], True)])  # fmt: skip
def test_an_input_reread_counts_real_opens(real, found):
    # a 1 MiB input read whole at each open, a fileno before each read
    n = int(real)
    row = posix(opens=n + 16 * n, filenos=16 * n, reads=16 * n, bytes_read=n << 20,
                max_byte_read=(1 << 20) - 1, f_read_time=0.5, f_meta_time=0.01)  # fmt: skip
    fs = reopened(counters("POSIX", [row]))
    assert bool(fs) == found
    if found:
        assert fs[0].evidence["opens"] == n


# ------------------------- a data file re-read whole: the bytes are the mistake


def _input(extent: int, meta: float, read: float, opens: int = 150):
    """An input of ``extent`` bytes read whole at each of ``opens`` opens."""
    return counters("POSIX", [posix(opens=opens, reads=opens, bytes_read=opens * extent,
                                    max_byte_read=extent - 1, f_read_time=read,
                                    f_meta_time=meta)])  # fmt: skip


def _first(*tables):
    from iopilot.checks import diagnose

    values = defaults() | {"high_min_io_seconds": 0, "high_min_io_share": 0}
    d = diagnose(trace(*tables), values, only={"reopened-files", "posix-redundant-reads"})
    return next(f for f in d.findings if f.level >= Level.WARN)


def test_a_data_file_reread_whole_is_redundant_reads_not_reopens():
    MiB = 1 << 20
    # 1 MiB read whole 150 times: the repeated reads are the cost
    (f,) = reopened(_input(MiB, meta=0.01, read=1.5))
    assert f.cost_seconds == pytest.approx(0.01)  # the opens' metadata only
    first = _first(_input(MiB, meta=0.01, read=1.5))
    assert first.check == "posix-redundant-reads"
    assert "reopened-files" in first.evidence["also_seen_as"]
    assert first.cost_seconds == pytest.approx(1.5 * 149 / 150)
    # just below 1 MiB it is a configuration re-read: opens and reads together
    (f,) = reopened(_input(MiB - 1, meta=0.01, read=1.5))
    assert f.cost_seconds == pytest.approx(0.01 + 1.5 * 149 / 150)
    assert _first(_input(MiB - 1, meta=0.01, read=1.5)).check == "reopened-files"
    # a data file whose opens cost more than its repeated reads: reopens
    (f,) = reopened(_input(MiB, meta=2.0, read=1.5))
    assert f.cost_seconds == pytest.approx(2.0 + 1.5 * 149 / 150)
    assert _first(_input(MiB, meta=2.0, read=1.5)).check == "reopened-files"


def test_an_input_reread_says_its_reads():
    # created by the program (one write), then read whole at every open
    row = posix(opens=200, reads=200, writes=1, bytes_read=200 * 1000, bytes_written=1000,
                max_byte_read=999, max_byte_written=999, f_meta_time=0.5)  # fmt: skip
    (f,) = reopened(counters("POSIX", [row]))
    assert "200 opens, 0 seeks and 0 stats for 200 reads" in f.message
    assert f.evidence["files_read"] == 1


# --------------------------------------- how long a re-read input stays open


def _opens_and_closes(rows: list[tuple[str, str, float]]):
    """Metadata records of file 1, rank 0 from (layer, "open"|"close", time)."""
    from iopilot.model import OP_NAMES, RECORD_LAYERS, Records

    n = len(rows)
    return Records(
        rank=np.zeros(n, np.int32),
        layer=np.array([RECORD_LAYERS.index(r[0]) for r in rows], np.uint8),
        op=np.array([OP_NAMES.index(r[1]) for r in rows], np.uint8),
        file_id=np.ones(n, np.uint64), offset=np.zeros(n, np.int64),
        length=np.zeros(n, np.int64), start=np.array([r[2] for r in rows]),
        end=np.array([r[2] + 1e-4 for r in rows]),
    )  # fmt: skip


def _parsed_config(meta_rows):
    """A 20 kB config parsed at each of 20 opens (an ifstream: fopen, a
    fileno before each read, fclose), with these open and close records."""
    from iopilot._record import replace

    po = counters("POSIX", [posix(opens=20, filenos=20, reads=20, bytes_read=20 * 20_000,
                                  max_byte_read=19_999, f_read_time=0.02)])  # fmt: skip
    st = counters("STDIO", [{"file": 1, "rank": 0, "STDIO_OPENS": 20,
                             "STDIO_F_META_TIME": 0.01}])  # fmt: skip
    tr = replace(trace(po, st), meta_records=_opens_and_closes(meta_rows))
    (f,) = findings(tr, "reopened-files")
    return f


def test_a_streams_fileno_opens_do_not_unpair_its_opens_and_closes():
    rows = []
    for i in range(20):  # each stream open 0.1 s, parsing; a fileno inside
        rows += [("STDIO", "open", i), ("POSIX", "open", i + 0.01), ("STDIO", "close", i + 0.1)]
    f = _parsed_config(rows)
    assert f.evidence["opens"] == 20
    assert f.evidence["open_seconds"] == pytest.approx(20 * (0.1 + 1e-4))
    # the opens and closes of no layer pair up: no span known
    f = _parsed_config([r for r in rows if r[1] == "open"] + [("STDIO", "close", 30.0)])
    assert f.evidence["open_seconds"] == 0


def test_nested_layers_are_open_as_long_as_the_outer_one():
    rows = []
    for i in range(20):  # a POSIX open and close inside each stream's
        rows += [("STDIO", "open", i), ("POSIX", "open", i + 0.01),
                 ("POSIX", "close", i + 0.05), ("STDIO", "close", i + 0.1)]  # fmt: skip
    f = _parsed_config(rows)
    assert f.evidence["open_seconds"] == pytest.approx(20 * (0.1 + 1e-4))  # not summed
