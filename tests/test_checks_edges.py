"""Both sides of the checks' thresholds, reads kept apart from writes, and
the exact evidence numbers, on tiny hand-made counters."""

from __future__ import annotations

import pytest

from iopilot.checks import Level, advice
from kit import counters, findings, striping, trace


def only(fs, level=None):
    assert len(fs) == 1, fs
    if level is not None:
        assert fs[0].level == level, fs[0]
    return fs[0]


# ---------------------------------------------------------------------------
# MPI-IO collective reads / writes (collective_ops = 1000,
# collective_share_low = 0.5).  Each row also fills the other direction with
# numbers that would give another verdict, so swapping the two is caught.


def _mpiio(
    direction: str,
    coll: int = 0,
    indep: int = 0,
    nb: int = 0,
    split: int = 0,
    nbytes: int = 0,
    file: int = 1,
):
    d, other = ("READ", "WRITE") if direction == "READ" else ("WRITE", "READ")
    moved = "MPIIO_BYTES_READ" if d == "READ" else "MPIIO_BYTES_WRITTEN"
    moved_other = "MPIIO_BYTES_WRITTEN" if d == "READ" else "MPIIO_BYTES_READ"
    return {
        "file": file,
        f"MPIIO_COLL_{d}S": coll,
        f"MPIIO_SPLIT_{d}S": split,
        f"MPIIO_INDEP_{d}S": indep,
        f"MPIIO_NB_{d}S": nb,
        moved: nbytes,
        # the other direction: all collective, many, big
        f"MPIIO_COLL_{other}S": 5000,
        moved_other: 5000 * 2**20,
    }


_CHECK = {
    "READ": ("mpiio-collective-reads", "read", "M02", "M04"),
    "WRITE": ("mpiio-collective-writes", "write", "M03", "M05"),
}


def _collective(d: str, level, *rows):
    """The one finding of the collective check of direction ``d``, at ``level``."""
    return only(findings(trace(counters("MPIIO", rows)), _CHECK[d][0]), level)


def _snippet_is_collective(f, d: str) -> None:
    want = advice.MPIIO_COLLECTIVE_READ if d == "READ" else advice.C_MPIIO_COLLECTIVE_STEP
    assert f.snippet == want and f.snippet_lang == "c"


@pytest.mark.parametrize("d", ["READ", "WRITE"])
def test_mpiio_no_collective_above_the_count_is_high(d):
    _, word, code, _ = _CHECK[d]
    f = _collective(
        d, Level.HIGH, _mpiio(d, indep=1001, file=1), _mpiio(d, indep=1, file=2), _mpiio(d, file=3)
    )
    assert f.evidence == {"collective": 0, "independent": 1002, "nonblocking": 0}
    assert f.message.startswith(
        f"MPI-IO is used but no {word} is collective: 1,002 independent {word} calls (100.0 %)."
    )
    assert f.drishti == code
    # file 3 has no independent access: only files 1 and 2 are to blame
    assert f.files_total == 2
    assert [x.numbers[f"independent {word}s"] for x in f.files] == [1001, 1]
    assert f.files[0].path == "/data/file1"
    assert f.recommendation.startswith(f"Use collective {word}s (the _all variants)")
    _snippet_is_collective(f, d)


@pytest.mark.parametrize("d", ["READ", "WRITE"])
def test_mpiio_nonblocking_calls_count_towards_the_total(d):
    _, word, _, _ = _CHECK[d]
    # 600 + 401 = 1001 calls, above the 1000; none collective
    f = _collective(d, Level.HIGH, _mpiio(d, indep=600, nb=401))
    assert f.evidence == {"collective": 0, "independent": 600, "nonblocking": 401}
    assert f"600 independent {word} calls (59.9 %)" in f.message


@pytest.mark.parametrize("d", ["READ", "WRITE"])
def test_mpiio_no_collective_at_the_count_is_only_info(d):
    _, word, _, _ = _CHECK[d]
    # exactly 1000 calls of 4 KiB each: not above the threshold
    f = _collective(d, Level.INFO, _mpiio(d, indep=1000, nbytes=1000 * 4096))
    assert f.message.startswith(
        f"No MPI-IO {word} is collective: 1,000 independent {word}s, averaging "
        "4.0 KiB each; too few (at most 1,000) to make it a problem."
    )
    assert f.drishti is None
    assert f.drishti_note == "Drishti says nothing below its operation threshold"
    assert f.evidence == {"collective": 0, "independent": 1000, "nonblocking": 0}
    assert f.cost_seconds == 0.0


@pytest.mark.parametrize("d", ["READ", "WRITE"])
def test_mpiio_low_collective_share_warns_below_half(d):
    _, word, _, ok = _CHECK[d]
    # 1000 of 2001 collective: 49.98 % < 50 %, and 1001 independent > 1000
    f = _collective(d, Level.WARN, _mpiio(d, coll=600, split=400, indep=1001))
    assert f.message.startswith(
        f"Only 50.0 % of MPI-IO {word}s are collective (1,000 of 2,001); 1,001 are independent."
    )
    assert f.evidence == {"collective": 1000, "independent": 1001, "nonblocking": 0}
    assert f.drishti == ok
    assert f.drishti_note == "Drishti reports any collective use as OK"
    assert f.recommendation.startswith(f"Make the independent {word}s collective too")
    _snippet_is_collective(f, d)


@pytest.mark.parametrize("d", ["READ", "WRITE"])
def test_mpiio_collective_share_of_exactly_half_is_ok(d):
    _, word, _, ok = _CHECK[d]
    f = _collective(d, Level.OK, _mpiio(d, coll=1001, indep=1001))
    assert f.message.startswith(f"MPI-IO {word}s are collective: 1,001 of 2,002 (50.0 %).")
    assert f.drishti == ok and f.cost_seconds == 0.0


@pytest.mark.parametrize("d", ["READ", "WRITE"])
def test_mpiio_low_share_with_few_independent_calls_is_ok(d):
    cid, _, _, _ = _CHECK[d]
    # share 1/1001 is low, but 1000 independent calls are not above 1000
    only(findings(trace(counters("MPIIO", [_mpiio(d, coll=1, indep=1000)])), cid), Level.OK)
    # and with 1001 they are
    only(findings(trace(counters("MPIIO", [_mpiio(d, coll=1, indep=1001)])), cid), Level.WARN)


@pytest.mark.parametrize("d", ["READ", "WRITE"])
def test_mpiio_a_single_collective_call_is_not_none(d):
    cid = _CHECK[d][0]
    # one collective call of 1002: share far below half, so a warning, not "no collective"
    f = only(findings(trace(counters("MPIIO", [_mpiio(d, coll=1, indep=1001)])), cid))
    assert f.level == Level.WARN and f.evidence["collective"] == 1


@pytest.mark.parametrize("d", ["READ", "WRITE"])
def test_mpiio_no_calls_in_a_direction_says_nothing(d):
    cid, _, _, _ = _CHECK[d]
    assert findings(trace(counters("MPIIO", [_mpiio(d)])), cid) == []


# ---------------------------------------------------------------------------
# POSIX misaligned requests (misaligned_ratio = 0.1 of reads + writes).


def _misaligned(kind: str, bad: int, reads: int = 60, writes: int = 40, file: int = 1):
    return {"file": file, "POSIX_READS": reads, "POSIX_WRITES": writes,
            f"POSIX_{kind}_NOT_ALIGNED": bad,
            "POSIX_FILE_ALIGNMENT": 4096, "POSIX_MEM_ALIGNMENT": 8}  # fmt: skip


@pytest.mark.parametrize("kind", ["FILE", "MEM"])
def test_misaligned_share_at_the_threshold_is_fine(kind):
    cid = f"posix-misaligned-{kind.lower().replace('mem', 'memory')}"
    # 10 of 60 reads + 40 writes = 0.1, not above it
    assert findings(trace(counters("POSIX", [_misaligned(kind, 10)])), cid) == []
    # 11 of 100 is
    f = only(findings(trace(counters("POSIX", [_misaligned(kind, 11)])), cid), Level.HIGH)
    assert f.evidence["misaligned"] == 11 and f.evidence["requests"] == 100


def test_misaligned_file_offsets_evidence_and_files():
    rows = [_misaligned("FILE", 30, file=1), _misaligned("FILE", 0, file=2),
            _misaligned("FILE", 1, reads=0, writes=100, file=3)]  # fmt: skip
    f = only(findings(trace(counters("POSIX", rows)), "posix-misaligned-file"), Level.HIGH)
    # 31 of 300 requests, aligned to the 4096 of POSIX_FILE_ALIGNMENT
    assert f.evidence == {"misaligned": 31, "requests": 300, "alignment": 4096}
    assert f.message.startswith(
        "10.3 % of POSIX requests (31 of 300) are not aligned to the file system's "
        "4096-byte boundary."
    )
    assert f.drishti == "P08"
    # file 2 has nothing misaligned; file 3's one misaligned request counts
    assert f.files_total == 2
    assert [(x.path, x.numbers["misaligned"], x.numbers["requests"]) for x in f.files] == [
        ("/data/file1", 30, 100), ("/data/file3", 1, 100)]  # fmt: skip
    # plain POSIX: pad to the block, in the program's language
    assert f.recommendation == (
        "Start requests on 4096-byte boundaries (the file system's alignment unit)."
    )
    assert f.snippet == advice.C_ALIGN_OFFSETS and f.snippet_lang == "c"


def test_misaligned_memory_buffers_name_the_memory_alignment():
    rows = [_misaligned("MEM", 50, file=1), _misaligned("MEM", 0, file=2)]
    f = only(findings(trace(counters("POSIX", rows)), "posix-misaligned-memory"), Level.HIGH)
    assert f.evidence == {
        "misaligned": 50,
        "requests": 200,
        "alignment": 8,
        "cost_unknown": "counters do not separate the cost of misaligned buffers from the calls",
    }
    assert f.message.startswith(
        "25.0 % of POSIX requests (50 of 200) use memory buffers not aligned to 8 bytes."
    )
    assert f.drishti == "P07" and f.files_total == 1
    assert f.snippet.startswith("void *buf;\nposix_memalign(") and f.snippet_lang == "c"
    assert f.recommendation.startswith("Allocate I/O buffers aligned")
    # the counters cannot price misaligned buffers
    assert f.cost_seconds is None


def test_misaligned_file_alignment_is_the_largest_of_the_rows():
    rows = [_misaligned("FILE", 50), {**_misaligned("FILE", 50, file=2),
                                       "POSIX_FILE_ALIGNMENT": 1 << 20}]  # fmt: skip
    f = only(findings(trace(counters("POSIX", rows)), "posix-misaligned-file"))
    assert f.evidence["alignment"] == 1 << 20


def test_misaligned_file_advice_follows_the_interface_above():
    posix = counters("POSIX", [_misaligned("FILE", 50)])
    h5 = only(findings(trace(posix, counters("H5F", [{"file": 1}])), "posix-misaligned-file"))
    assert h5.recommendation.endswith("; HDF5 can align its objects for you.")
    assert h5.snippet == advice.hdf5_alignment(4096, 4096) and h5.snippet_lang == "c"
    mp = only(findings(trace(posix, counters("MPIIO", [{"file": 1}])), "posix-misaligned-file"))
    assert "collective MPI-IO aligns the aggregators' requests" in mp.recommendation
    assert mp.snippet == advice.MPIIO_HINTS_CB and mp.snippet_lang == "c"
    lus = only(findings(trace(posix, lustre=striping([(1, 1 << 20, [0])])),
                        "posix-misaligned-file"))  # fmt: skip
    assert "on Lustre, make the stripe size a multiple" in lus.recommendation
    # alignment 4096 is below 1 MiB: the stripe size suggested is 1M
    assert lus.snippet == advice.lfs_setstripe(4, "1M", "DIR") and lus.snippet_lang == "sh"


# ---------------------------------------------------------------------------
# POSIX read/write intensity (intensity = 0.1 of |writes - reads| / total).

_INTENSITY = [
    ("posix-write-count-intensive", "P01", "count", "write"),
    ("posix-read-count-intensive", "P02", "count", "read"),
    ("posix-write-size-intensive", "P03", "size", "write"),
    ("posix-read-size-intensive", "P04", "size", "read"),
]


def _intensity_row(kind: str, reads: int, writes: int) -> dict:
    """``reads``/``writes`` in the counters of ``kind``; the other kind leans
    hard the other way so that reading the wrong counters changes the verdict."""
    counts = {"POSIX_READS": reads, "POSIX_WRITES": writes}
    sizes = {"POSIX_BYTES_READ": reads, "POSIX_BYTES_WRITTEN": writes}
    lean = (
        {"POSIX_READS": 900, "POSIX_WRITES": 0}
        if writes > reads
        else {"POSIX_READS": 0, "POSIX_WRITES": 900}
    )
    if kind == "count":
        return counts | {"POSIX_BYTES_READ": lean["POSIX_READS"],
                         "POSIX_BYTES_WRITTEN": lean["POSIX_WRITES"]}  # fmt: skip
    return sizes | lean


@pytest.mark.parametrize(("cid", "code", "kind", "verb"), _INTENSITY)
def test_intensity_above_the_threshold_is_reported(cid, code, kind, verb):
    mine, other = 56, 44  # (56 - 44) / 100 = 0.12 > 0.1
    r, w = (other, mine) if verb == "write" else (mine, other)
    f = only(findings(trace(counters("POSIX", [_intensity_row(kind, r, w)])), cid), Level.INFO)
    unit = "operations" if kind == "count" else "bytes"
    assert f.message.startswith(
        f"The job is {verb}-intensive by {unit}: 56.0 % of POSIX {unit} are {verb}s (56 of 100)."
    )
    assert f.evidence == {"reads": r, "writes": w}
    assert f.drishti == code and f.cost_seconds == 0.0


@pytest.mark.parametrize(("cid", "code", "kind", "verb"), _INTENSITY)
def test_intensity_at_the_threshold_is_not(cid, code, kind, verb):
    mine, other = 55, 45  # (55 - 45) / 100 = 0.1, not above it
    r, w = (other, mine) if verb == "write" else (mine, other)
    assert findings(trace(counters("POSIX", [_intensity_row(kind, r, w)])), cid) == []


@pytest.mark.parametrize(("cid", "code", "kind", "verb"), _INTENSITY)
def test_intensity_in_the_other_direction_is_not_reported(cid, code, kind, verb):
    mine, other = 10, 90
    r, w = (other, mine) if verb == "write" else (mine, other)
    assert findings(trace(counters("POSIX", [_intensity_row(kind, r, w)])), cid) == []
    # nothing moved at all: nothing to say
    assert findings(trace(counters("POSIX", [_intensity_row(kind, 0, 0)])), cid) == []


# ---------------------------------------------------------------------------
# POSIX redundant reads / writes: bytes moved beyond a file's extent.

_REDUNDANT = {
    "READ": ("posix-redundant-reads", "read", "BYTES_READ", "MAX_BYTE_READ"),
    "WRITE": ("posix-redundant-writes", "written", "BYTES_WRITTEN", "MAX_BYTE_WRITTEN"),
}


def _moved(d: str, file: int, rank: int, moved: int, max_byte: int) -> dict:
    """A row moving ``moved`` bytes up to ``max_byte`` in direction ``d``; the
    other direction moves 50 bytes over and over within 10, on every row."""
    _, _, b, m = _REDUNDANT[d]
    _, _, ob, om = _REDUNDANT["WRITE" if d == "READ" else "READ"]
    return {"file": file, "rank": rank, f"POSIX_{b}": moved, f"POSIX_{m}": max_byte,
            f"POSIX_{ob}": 50, f"POSIX_{om}": 9}  # fmt: skip


@pytest.mark.parametrize("d", ["READ", "WRITE"])
def test_redundant_bytes_beyond_the_extent(d):
    cid, verb, _, _ = _REDUNDANT[d]
    rows = [
        # file 1: two ranks move the same 1000 bytes: 1000 repeated
        _moved(d, 1, 0, 1000, 999), _moved(d, 1, 1, 1000, 999),
        # file 2: exactly its extent, nothing repeated
        _moved(d, 2, 0, 1000, 999),
        # file 3: one byte more than its extent
        _moved(d, 3, 0, 1001, 999),
    ]  # fmt: skip
    f = only(findings(trace(counters("POSIX", rows)), cid), Level.WARN)
    assert f.evidence == {"repeated_bytes": 1001}
    assert f.message.startswith(
        f"1001 B more were {verb} than the files' extents hold, on 2 file(s): the same bytes "
        f"were {verb} more than once."
    )
    assert f.files_total == 2
    got = [(x.path, x.numbers[f"bytes {verb}"], x.numbers["file extent"],
            x.numbers["repeated bytes"]) for x in f.files]  # fmt: skip
    assert got == [("/data/file1", 2000, 1000, 1000), ("/data/file3", 1001, 1000, 1)]
    assert f.recommendation.startswith("Read each byte once" if d == "READ" else
                                       "Write each byte once")  # fmt: skip


@pytest.mark.parametrize("d", ["READ", "WRITE"])
def test_redundant_nothing_beyond_the_extent_is_fine(d):
    cid = _REDUNDANT[d][0]
    # the extent is the largest offset over all ranks + 1: rank 1 reaches 1999
    rows = [_moved(d, 1, 0, 1000, 999), _moved(d, 1, 1, 1000, 1999)]
    assert findings(trace(counters("POSIX", rows)), cid) == []
    # nothing moved in this direction at all
    assert findings(trace(counters("POSIX", [_moved(d, 1, 0, 0, 0)])), cid) == []


# ---------------------------------------------------------------------------
# POSIX random reads / writes (random_ratio = 0.2, random_count = 1000);
# random = all - sequential (POSIX_SEQ_* includes the consecutive ones).

_RANDOM = {"READ": ("posix-random-reads", "reads", "P11", "P12"),
           "WRITE": ("posix-random-writes", "writes", "P13", "P14")}  # fmt: skip


def _ordered(d: str, ops: int, seq: int, consec: int = 0, file: int = 1) -> dict:
    """``ops`` requests of direction ``d``, ``seq`` of them sequential; the
    other direction is all random, many of them."""
    name = _RANDOM[d][1].upper()
    other = "WRITES" if d == "READ" else "READS"
    return {"file": file, f"POSIX_{name}": ops, f"POSIX_SEQ_{name}": seq,
            f"POSIX_CONSEC_{name}": consec, f"POSIX_{other}": 9000}  # fmt: skip


def _random_findings(d: str, *rows: dict):
    return findings(trace(counters("POSIX", rows)), _RANDOM[d][0])


@pytest.mark.parametrize("d", ["READ", "WRITE"])
def test_random_above_share_and_count_is_high(d):
    _, ops, code, _ = _RANDOM[d]
    # file 1: 2200 random of 10000 (2201 not sequential, the first access at
    # offset 0 is no jump); file 2: all sequential; 2200 of 10500 = 20.95 %
    rows = [_ordered(d, 10000, 7799, consec=5000, file=1), _ordered(d, 500, 500, file=2)]
    f = only(_random_findings(d, *rows), Level.HIGH)
    assert f.evidence == {"random": 2200, "sequential": 3299, "consecutive": 5000,
                          "first_accesses": 1, ops: 10500}
    assert f.message.startswith(
        f"2,200 of 10,500 POSIX {ops} (21.0 %) go backwards in the file (random access)."
    )
    assert f.drishti == code and f.files_total == 1
    assert f.files[0].numbers == {f"random {ops}": 2200, ops: 10000}
    # Without MPI-IO: read in order (or aggregate the writes) in the program's language.
    want = advice.C_SORTED_READS if d == "READ" else advice.POSIX_AGGREGATE
    assert f.snippet == want and f.snippet_lang == "c"


@pytest.mark.parametrize("d", ["READ", "WRITE"])
def test_random_share_at_the_threshold_is_in_order(d):
    _, ops, _, ok = _RANDOM[d]
    # 2000 random of 10000 = 0.2, not above it
    f = only(_random_findings(d, _ordered(d, 10000, 7999, consec=5000)), Level.OK)
    assert f.message.startswith(
        f"POSIX {ops} are mostly in order: 50.0 % consecutive and 30.0 % sequential."
    )
    assert f.evidence == {"random": 2000, "sequential": 2999, "consecutive": 5000,
                          "first_accesses": 1, ops: 10000}
    assert f.drishti == ok and f.cost_seconds == 0.0


@pytest.mark.parametrize("d", ["READ", "WRITE"])
def test_random_count_at_the_threshold_is_too_few(d):
    _, ops, _, ok = _RANDOM[d]
    # 1000 random of 4000 (25 %): the share is high, the count is not above 1000
    f = only(_random_findings(d, _ordered(d, 4000, 2999)), Level.OK)
    assert f.message.startswith(
        f"1,000 of 4,000 POSIX {ops} are random, too few to matter (at most 1,000)."
    )
    assert f.drishti == ok and f.cost_seconds == 0.0
    # 2001 of 10000 is above the share
    only(_random_findings(d, _ordered(d, 10000, 7998, consec=5000)), Level.HIGH)
    # 1001 of 4004 are enough
    only(_random_findings(d, _ordered(d, 4004, 3002)), Level.HIGH)


@pytest.mark.parametrize("d", ["READ", "WRITE"])
def test_random_none_at_all(d):
    _, ops, _, _ = _RANDOM[d]
    f = only(_random_findings(d, _ordered(d, 100, 100, consec=100)), Level.OK)
    assert f.evidence == {"random": 0, "sequential": 0, "consecutive": 100,
                          "first_accesses": 0, ops: 100}
    # no request in this direction: nothing to judge
    assert _random_findings(d, _ordered(d, 0, 0)) == []


# ---------------------------------------------------------------------------
# STDIO share of the bytes (stdio_share = 0.1).


def _stdio_share(*tables, names=None):
    return findings(trace(*tables, names=names), "stdio-share")


def _bytes(layer: str, read: int, written: int, file: int = 1) -> dict:
    return {"file": file, f"{layer}_BYTES_READ": read, f"{layer}_BYTES_WRITTEN": written}


def test_stdio_share_at_and_above_the_threshold():
    posix = counters("POSIX", [_bytes("POSIX", 500, 400)])
    # 10 + 90 of 1000 bytes: 0.1, not above it
    assert _stdio_share(posix, counters("STDIO", [_bytes("STDIO", 10, 90, file=2)])) == []
    # 11 + 90 of 1001
    rows = [_bytes("STDIO", 11, 90, file=2), _bytes("STDIO", 0, 0, file=3)]
    f = only(_stdio_share(posix, counters("STDIO", rows)), Level.HIGH)
    assert f.evidence == {"stdio_bytes": 101, "total_bytes": 1001}
    assert f.message.startswith("10.1 % of the bytes (101 B of 1001 B) move through STDIO.")
    # file 3 moved nothing
    assert f.files_total == 1 and f.files[0].numbers == {"bytes": 101}
    assert f.snippet == advice.STDIO_BUFFER and f.snippet_lang == "c"


def test_stdio_share_counts_posix_below_mpiio_whole():
    stdio = counters("STDIO", [_bytes("STDIO", 60, 40, file=2)])
    # POSIX moved less than MPI-IO (e.g. MPI-IO on another file system): both count
    few = counters("POSIX", [_bytes("POSIX", 30, 20)])
    mpiio = counters("MPIIO", [_bytes("MPIIO", 100, 100)])
    f = only(_stdio_share(few, mpiio, stdio))
    assert f.evidence == {"stdio_bytes": 100, "total_bytes": 350}
    # POSIX equal to MPI-IO: the same bytes, counted once
    same = counters("POSIX", [_bytes("POSIX", 150, 50)])
    f = only(_stdio_share(same, mpiio, stdio))
    assert f.evidence == {"stdio_bytes": 100, "total_bytes": 300}


def test_stdio_share_counts_dfs_and_daos_once():
    stdio = counters("STDIO", [_bytes("STDIO", 60, 40, file=2)])
    dfs = counters("DFS", [_bytes("DFS", 100, 200, file=3)])
    daos = counters("DAOS", [_bytes("DAOS", 250, 250, file=4)])
    # the larger of the two: 100 + 500
    assert only(_stdio_share(stdio, dfs, daos)).evidence["total_bytes"] == 600
    more_dfs = counters("DFS", [_bytes("DFS", 300, 400, file=3)])
    assert only(_stdio_share(stdio, more_dfs, daos)).evidence["total_bytes"] == 800


def test_stdio_share_names_the_console_part():
    posix = counters("POSIX", [_bytes("POSIX", 100, 100)])
    rows = [_bytes("STDIO", 0, 50, file=3), _bytes("STDIO", 100, 0, file=2)]
    f = only(_stdio_share(posix, counters("STDIO", rows), names={3: "<STDOUT>"}))
    assert f.message.startswith(
        "42.9 % of the bytes (150 B of 350 B) move through STDIO (50 B of it is console output)."
    )
    assert [(x.path, x.numbers["bytes"]) for x in f.files] == [
        ("/data/file2", 100), ("<STDOUT>", 50)]  # fmt: skip


# ---------------------------------------------------------------------------
# POSIX imbalance between ranks: per-rank bytes on a file (rank_size_imbalance
# = 0.3 of max - min over max) and shared files' slowest versus fastest rank
# (shared_imbalance = 0.15 of the file's total).

_RANK_SIZE = {
    "WRITE": ("posix-rank-write-imbalance", "written", "BYTES_WRITTEN", "BYTES_READ"),
    "READ": ("posix-rank-read-imbalance", "read", "BYTES_READ", "BYTES_WRITTEN"),
}


@pytest.mark.parametrize("d", ["WRITE", "READ"])
def test_rank_size_imbalance_on_both_sides_of_the_threshold(d):
    cid, verb, mine, other = _RANK_SIZE[d]
    t = "F_WRITE_TIME" if d == "WRITE" else "F_READ_TIME"

    def row(file, rank, n, secs=0.0):
        # the other direction is badly imbalanced everywhere
        return {"file": file, "rank": rank, f"POSIX_{mine}": n,
                f"POSIX_{other}": 1000 * rank, f"POSIX_{t}": secs}  # fmt: skip

    rows = [
        row(1, 0, 1000), row(1, 1, 700), row(1, 2, 900),  # (1000 - 700) / 1000 = 0.3
        row(2, 0, 1000, 3.0), row(2, 1, 699, 1.0),  # 0.301
        row(3, 0, 1000), row(3, -1, 0),  # one rank (the shared row does not count)
        row(4, 0, 0), row(4, 1, 0),  # nothing moved in this direction
    ]  # fmt: skip
    f = only(findings(trace(counters("POSIX", rows), nprocs=3), cid), Level.HIGH)
    assert f.message.startswith(
        f"On 1 file(s) accessed by several ranks, the bytes {verb} per rank differ by up to "
        "30.1 % (max - min over max)."
    )
    assert f.evidence == {"files": 1, "max_imbalance": 0.301}
    assert f.files_total == 1 and f.files[0].path == "/data/file2"
    assert f.files[0].numbers == {f"max bytes {verb} by a rank": 1000,
                                  f"min bytes {verb} by a rank": 699, "ranks": 2}  # fmt: skip
    # the busiest rank's 3 s minus the mean of 2 s
    assert f.cost_seconds == pytest.approx(1.0)
    # without file 2: nothing
    assert findings(trace(counters("POSIX", rows[:3] + rows[5:])), cid) == []  # fmt: skip


_SHARED = {"bytes": ("posix-shared-data-imbalance", "data", "bytes"),
           "time": ("posix-shared-time-imbalance", "time", "seconds")}  # fmt: skip


def _shared_row(kind: str, file: int, slow: float, fast: float, rank: int = -1) -> dict:
    """A file whose total is 1000 bytes and 10 s; ``slow``/``fast`` are the
    slowest and fastest ranks' bytes or seconds; the other kind is balanced."""
    row = {"file": file, "rank": rank, "POSIX_BYTES_READ": 500, "POSIX_BYTES_WRITTEN": 500,
           "POSIX_F_READ_TIME": 5.0, "POSIX_F_WRITE_TIME": 3.0, "POSIX_F_META_TIME": 2.0,
           "POSIX_SLOWEST_RANK_BYTES": 500, "POSIX_FASTEST_RANK_BYTES": 500,
           "POSIX_F_SLOWEST_RANK_TIME": 5.0, "POSIX_F_FASTEST_RANK_TIME": 5.0}  # fmt: skip
    if kind == "bytes":
        row.update(POSIX_SLOWEST_RANK_BYTES=slow, POSIX_FASTEST_RANK_BYTES=fast)
    else:
        row.update(POSIX_F_SLOWEST_RANK_TIME=slow, POSIX_F_FASTEST_RANK_TIME=fast)
    return row


@pytest.mark.parametrize(("kind", "at", "above", "share"), [
    ("bytes", (600, 450), (600, 449), 0.151),
    ("time", (6.0, 4.5), (6.0, 4.488), 0.1512),
])  # fmt: skip
def test_shared_imbalance_on_both_sides_of_the_threshold(kind, at, above, share):
    cid, what, label = _SHARED[kind]
    rows = [
        _shared_row(kind, 1, *at),  # 150 of 1000 / 1.5 of 10 s: 0.15, not above it
        _shared_row(kind, 2, *above),  # 0.151 / 0.1512
        _shared_row(kind, 3, 1000, 0, rank=0),  # one rank's own file: not shared
    ]
    f = only(findings(trace(counters("POSIX", rows), nprocs=4), cid), Level.HIGH)
    assert f.message.startswith(
        f"1 shared file(s) show a {what} imbalance between the slowest and the fastest rank of "
        "up to 15.1 % of the file's total: stragglers."
    )
    assert f.evidence == {"files": 1, "max_imbalance": share}
    assert f.files_total == 1 and f.files[0].path == "/data/file2"
    want = {f"slowest rank {label}": above[0], f"fastest rank {label}": above[1]}
    assert f.files[0].numbers == {**want, "imbalance %": 15.1}
    # the slowest rank's seconds on file 2 minus the mean rank's 10 s / 4
    assert f.cost_seconds == pytest.approx((6.0 if kind == "time" else 5.0) - 2.5)
    assert findings(trace(counters("POSIX", rows[:1] + rows[2:]), nprocs=4), cid) == []


# ---------------------------------------------------------------------------
# Per-rank load from the counters: POSIX rows of files opened through MPI-IO
# count at the MPI-IO level only; shared rows (rank -1) are unattributed.


def test_counter_load_per_rank():
    from iopilot.checks.base import Context
    from iopilot.checks.ranks import counter_load
    from iopilot.checks.thresholds import defaults

    posix = counters("POSIX", [
        {"file": 1, "rank": 0, "POSIX_READS": 3, "POSIX_WRITES": 5, "POSIX_BYTES_READ": 30,
         "POSIX_BYTES_WRITTEN": 50, "POSIX_F_READ_TIME": 1.0, "POSIX_F_WRITE_TIME": 2.0,
         "POSIX_F_META_TIME": 0.5},
        {"file": 1, "rank": 2, "POSIX_READS": 1, "POSIX_BYTES_READ": 10,
         "POSIX_F_READ_TIME": 0.25, "POSIX_F_META_TIME": 0.25},
        # under MPI-IO: counted there, not here
        {"file": 2, "rank": 1, "POSIX_READS": 100, "POSIX_WRITES": 100,
         "POSIX_BYTES_READ": 1000, "POSIX_F_READ_TIME": 9.0, "POSIX_F_META_TIME": 9.0},
        {"file": 3, "rank": -1, "POSIX_READS": 7, "POSIX_WRITES": 4, "POSIX_BYTES_READ": 70,
         "POSIX_BYTES_WRITTEN": 40},
    ])  # fmt: skip
    mpiio = counters("MPIIO", [
        {"file": 2, "rank": 1, "MPIIO_INDEP_READS": 2, "MPIIO_NB_READS": 1,
         "MPIIO_COLL_WRITES": 3, "MPIIO_SPLIT_WRITES": 1, "MPIIO_BYTES_READ": 20,
         "MPIIO_BYTES_WRITTEN": 40, "MPIIO_F_READ_TIME": 0.5, "MPIIO_F_WRITE_TIME": 1.5,
         "MPIIO_F_META_TIME": 0.125},
        {"file": 2, "rank": -1, "MPIIO_COLL_WRITES": 6, "MPIIO_BYTES_WRITTEN": 600},
    ])  # fmt: skip
    # two ranks in the job's header, but rank 2 has a row: three ranks
    load = counter_load(Context(trace(posix, mpiio, nprocs=2), defaults()))
    assert load.source == "counters"
    assert load.reads.tolist() == [3, 3, 1]
    assert load.writes.tolist() == [5, 4, 0]
    assert load.ops.tolist() == [8, 7, 1]
    assert load.bytes.tolist() == [80, 60, 10]
    assert load.seconds.tolist() == [3.0, 2.0, 0.25]
    assert load.meta_seconds.tolist() == [0.5, 0.125, 0.25]
    # shared rows: 70 + 40 + 600 bytes, 7 + 4 + 6 operations
    assert load.unattributed_bytes == 710
    assert load.unattributed_ops == 17


def test_counter_load_without_posix_or_mpiio_is_none():
    from iopilot.checks.base import Context
    from iopilot.checks.ranks import counter_load
    from iopilot.checks.thresholds import defaults

    stdio = counters("STDIO", [_bytes("STDIO", 1, 1)])
    assert counter_load(Context(trace(stdio), defaults())) is None


# ---------------------------------------------------------------------------
# Lustre slow OST (slow_ost_ratio = 3, slow_ost_min_time = 1 s; only files of
# at least small_request_size = 1 MiB count).

MiB = 1 << 20


def _ost_files(secs_per_ost: list[list[float]], size: int = 100 * MiB):
    """One single-stripe file per entry, on the OST of its list; each moves
    ``size`` bytes (60 % read, 40 % written) in the given seconds, split alike."""
    rows, lay = [], []
    for ost, files in enumerate(secs_per_ost):
        for s in files:
            k = len(rows) + 1
            rows.append({"file": k, "rank": 0, "POSIX_READS": 6, "POSIX_WRITES": 4,
                         "POSIX_BYTES_READ": size * 6 // 10,
                         "POSIX_BYTES_WRITTEN": size - size * 6 // 10,
                         "POSIX_F_READ_TIME": 0.6 * s, "POSIX_F_WRITE_TIME": 0.4 * s})  # fmt: skip
            lay.append((k, MiB, [ost]))
    return findings(trace(counters("POSIX", rows), lustre=striping(lay)), "lustre-slow-ost")


def test_slow_ost_just_above_the_ratio():
    # 100 MiB/s, 200 MiB/s, and 100 / 3.01 MiB/s on OST 2
    f = only(_ost_files([[1.0, 1.0], [0.5, 0.5], [3.01, 3.01]]), Level.WARN)
    assert f.message.startswith(
        "1 OST(s) are slow: files on OST 2 move data at a median 33.22 MiB/s against 100.00 "
        "MiB/s on the typical OST (3.0x slower, 2 files, 6.0 s of I/O)."
    )
    assert f.evidence == {"slow_osts": "2", "median_mib_s": 33.223, "typical_mib_s": 100.0,
                          "slowdown": 3.01}  # fmt: skip
    assert f.files_total == 2
    assert [(x.path, x.numbers) for x in f.files] == [
        (f"/data/file{k}", {"seconds": 3.01, "MiB/s": 33.22, "OST": 2})
        for k in (5, 6)]  # fmt: skip
    # 6.02 s on the slow files, of which a typical OST would take 6.02 / 3.01
    assert f.cost_seconds == pytest.approx(4.02)


def test_slow_ost_at_the_ratio_or_alone_is_not_slow():
    # exactly 3x slower
    assert _ost_files([[1.0, 1.0], [0.5, 0.5], [3.0, 3.0]]) == []
    # a single slow file on its OST proves nothing
    assert _ost_files([[1.0, 1.0], [0.5, 0.5], [5.0]]) == []
    # two OSTs: nothing to compare against
    assert _ost_files([[1.0, 1.0], [10.0, 10.0]]) == []


def test_slow_ost_needs_more_than_a_second_on_files_of_a_mebibyte():
    fast = [[0.1, 0.1], [0.1, 0.1]]
    # two 1 MiB files at 0.5 s on OST 2: 5x slower but only 1.0 s in all
    assert _ost_files([*fast, [0.5, 0.5]], size=MiB) == []
    f = only(_ost_files([*fast, [0.51, 0.51]], size=MiB))
    assert f.evidence["slowdown"] == 5.1
    # files below 1 MiB tell latency, not bandwidth
    assert _ost_files([*fast, [0.51, 0.51]], size=MiB - 10) == []


# ---------------------------------------------------------------------------
# HDF5 chunks too small (chunk_min_bytes = 64 KiB, chunk_access_ratio = 64).

_CHUNK_OK = {"H5D_CHUNK_SIZE_D1": 8192, "H5D_DATATYPE_SIZE": 8,  # 64 KiB chunks
             "H5D_DATASPACE_NDIMS": 1, "H5D_DATASPACE_NPOINTS": 10**9,
             "H5D_READS": 1, "H5D_ACCESS1_ACCESS": 64 * 65536}  # fmt: skip


@pytest.mark.parametrize(("change", "flagged"), [
    ({}, False),  # 64 KiB chunks, accesses of 64 chunks: both at their limit
    ({"H5D_CHUNK_SIZE_D1": 8191}, True),  # 65528 bytes: small
    ({"H5D_ACCESS1_ACCESS": 64 * 65536 + 1}, True),  # more than 64 chunks per access
    ({"H5D_CHUNK_SIZE_D1": 8191, "H5D_DATASPACE_NPOINTS": 8191}, False),  # holds it all
    ({"H5D_CHUNK_SIZE_D1": 8191, "H5D_DATASPACE_NPOINTS": 8192}, True),
    ({"H5D_CHUNK_SIZE_D1": 8191, "H5D_READS": 0}, False),  # never accessed
    ({"H5D_CHUNK_SIZE_D1": 8191, "H5D_READS": 0, "H5D_WRITES": 1}, True),
    ({"H5D_CHUNK_SIZE_D1": 0}, False),  # not chunked
])  # fmt: skip
def test_hdf5_chunking_limits(change, flagged):
    ds = counters("H5D", [{"file": 5, "parent": 1, **_CHUNK_OK, **change}])
    got = findings(trace(counters("H5F", [{"file": 1}]), ds), "hdf5-chunking")
    assert len(got) == int(flagged), got
    if flagged:
        f = got[0]
        assert f.level == Level.WARN
        assert f.evidence["chunk_bytes"] == 8 * change.get("H5D_CHUNK_SIZE_D1", 8192)
        assert f.evidence["access_bytes"] == change.get("H5D_ACCESS1_ACCESS", 64 * 65536)
        assert f.evidence["datasets"] == 1


@pytest.mark.parametrize("kind", ["bytes", "time"])
def test_shared_imbalance_either_way_round_and_a_slowest_rank_below_the_mean(kind):
    # Darshan's "fastest" can hold more than its "slowest" (they are by time):
    # the gap counts either way.  The slowest rank's 1 s is below the mean
    # rank's 10 s / 4: nothing saved, no negative cost.
    cid, _, label = _SHARED[kind]
    slow, fast = (100, 900) if kind == "bytes" else (1.0, 9.0)
    row = _shared_row(kind, 1, slow, fast)
    if kind == "bytes":
        row["POSIX_F_SLOWEST_RANK_TIME"] = 1.0
    f = only(findings(trace(counters("POSIX", [row]), nprocs=4), cid), Level.HIGH)
    assert f.evidence == {"files": 1, "max_imbalance": 0.8}
    assert f.files[0].numbers == {f"slowest rank {label}": slow, f"fastest rank {label}": fast,
                                  "imbalance %": 80.0}  # fmt: skip
    assert f.cost_seconds == 0.0
