"""MPI-IO checks beyond the collective ones: MPI-IO not used, blocking reads
and writes kept apart, aggregators against nodes on every side."""

from __future__ import annotations

import pytest

from iopilot.checks import Level, advice
from kit import counters, findings, only, trace

MiB = 1024**2



def test_not_used_evidence_and_its_conditions():
    p = counters("POSIX", [{"file": 1, "rank": -1, "POSIX_BYTES_READ": MiB,
                            "POSIX_BYTES_WRITTEN": 2 * MiB}])  # fmt: skip
    f = only(findings(trace(p, nprocs=2), "mpiio-not-used"), Level.WARN)
    assert f.evidence == {
        "ranks": 2, "posix_bytes": 3 * MiB,
        "cost_unknown": "what collective MPI-IO would save depends on how requests would merge",
    }
    assert f.message == "2 ranks move 3.0 MiB through POSIX without MPI-IO."
    assert f.cost_seconds is None and f.drishti == "M01"
    assert f.snippet == advice.MPIIO_COLLECTIVE_WRITE
    # Reads alone are enough; nothing moved, nothing to say.
    reads = counters("POSIX", [{"file": 1, "rank": -1, "POSIX_BYTES_READ": 1}])
    assert only(findings(trace(reads, nprocs=2), "mpiio-not-used"))
    none = counters("POSIX", [{"file": 1, "rank": -1, "POSIX_OPENS": 3}])
    assert findings(trace(none, nprocs=2), "mpiio-not-used") == []
    m = counters("MPIIO", [{"file": 1, "rank": -1, "MPIIO_INDEP_WRITES": 1}])
    assert findings(trace(p, m, nprocs=2), "mpiio-not-used") == []
    # A main process and its Python workers (no launcher gave ranks) share no communicator.
    workers = trace(p, nprocs=2)
    workers.job.rank_source = "workers"
    assert findings(workers, "mpiio-not-used") == []


def _rw(d: str, **c):
    """An MPI-IO row with ``c`` in direction ``d`` and, in the other one,
    non-blocking calls that would hide a swap of the two."""
    other = "WRITES" if d == "READS" else "READS"
    return {"file": 1, "rank": 0, f"MPIIO_NB_{other}": 7, f"MPIIO_INDEP_{other}": 3} | {
        f"MPIIO_{k}_{d}": v for k, v in c.items()}


@pytest.mark.parametrize(("d", "cid", "word", "code"), [
    ("READS", "mpiio-blocking-reads", "read", "M06"),
    ("WRITES", "mpiio-blocking-writes", "write", "M07"),
])  # fmt: skip
def test_blocking_by_direction(d, cid, word, code):
    time = "MPIIO_F_READ_TIME" if d == "READS" else "MPIIO_F_WRITE_TIME"
    row = _rw(d, INDEP=4, COLL=5, SPLIT=1) | {time: 3.0}
    f = only(findings(trace(counters("MPIIO", [row])), cid), Level.WARN)
    assert {k: v for k, v in f.evidence.items() if k != "cost_unknown"} == {
        f"{word}s": 10, "nonblocking": 0}
    assert f.message.startswith(f"All 10 MPI-IO {word}s are blocking: the application waits")
    assert f.drishti == code
    # Without records, whether there is computation to overlap is unknown.
    assert f.cost_seconds is None and "at most the 3 s" in f.evidence.pop("cost_unknown")
    assert f.snippet == advice.mpiio_nonblocking(word)
    assert "(non-blocking MPI-IO)" in f.recommendation
    # One non-blocking call of the direction, or no calls at all: nothing.
    assert findings(trace(counters("MPIIO", [_rw(d, INDEP=4, NB=1)])), cid) == []
    assert findings(trace(counters("MPIIO", [_rw(d)])), cid) == []
    # Under HDF5 the advice is its async VOL.
    h5 = counters("H5F", [{"file": 1, "rank": 0}])
    f = only(findings(trace(counters("MPIIO", [row]), h5), cid))
    assert f.snippet == advice.HDF5_ASYNC and "(HDF5 async VOL)" in f.recommendation


def _agg(cb: str, hosts: dict[int, str]):
    m = counters("MPIIO", [{"file": 1, "rank": -1, "MPIIO_COLL_WRITES": 8}])
    return trace(m, nprocs=len(hosts) or 4, hints={"cb_nodes": cb}, hosts=hosts)


def test_aggregators_against_nodes():
    two_nodes = {0: "a", 1: "a", 2: "b", 3: "b"}
    f = only(findings(_agg("3", two_nodes), "mpiio-aggregators"), Level.WARN)
    assert f.evidence == {"cb_nodes": 3, "nodes": 2, "cost_unknown":
                          "one run with one aggregator count cannot say how long another "
                          "would take"}  # fmt: skip
    assert f.message.startswith("3 collective-buffering aggregators on 2 node(s)")
    assert f.snippet == 'MPI_Info_set(info, "cb_nodes", "2");'
    f = only(findings(_agg("1", two_nodes), "mpiio-aggregators"), Level.INFO)
    assert f.drishti == "M08" and f.evidence["cb_nodes"] == 1 and f.evidence["nodes"] == 2
    assert f.message.startswith("1 aggregator(s) for 2 nodes: only 1 node(s) write")
    f = only(findings(_agg("2", two_nodes), "mpiio-aggregators"), Level.OK)
    assert f.drishti == "M10" and f.cost_seconds == 0.0
    assert f.message == "One collective-buffering aggregator per node (2 on 2 nodes)."
    # Without hosts, without the hint, or with a hint that is not a number: nothing.
    assert findings(_agg("2", {}), "mpiio-aggregators") == []
    assert findings(_agg("many", two_nodes), "mpiio-aggregators") == []


def test_aggregators_on_one_node():
    one_node = {0: "a", 1: "a"}
    f = only(findings(_agg("1", one_node), "mpiio-aggregators"), Level.OK)
    assert f.message == "One collective-buffering aggregator per node (1 on 1 nodes)."
    f = only(findings(_agg("2", one_node), "mpiio-aggregators"), Level.WARN)
    assert f.recommendation == "Set cb_nodes to the number of nodes (or a divisor of it)."
    assert f.snippet == 'MPI_Info_set(info, "cb_nodes", "1");' and f.snippet_lang == "c"
    f = only(findings(_agg("1", {0: "a", 1: "b", 2: "c"}), "mpiio-aggregators"), Level.INFO)
    assert f.recommendation == "Raise cb_nodes to the number of nodes if collective I/O is slow."
    assert f.snippet == 'MPI_Info_set(info, "cb_nodes", "3");' and f.snippet_lang == "c"


# ------------------------------------------------- MPI-IO time above POSIX


def _above(d: str = "WRITES", coll: bool = True, posix: bool = True):
    t, b = ("WRITE", "WRITTEN") if d == "WRITES" else ("READ", "READ")
    kind = "COLL" if coll else "INDEP"
    m = counters("MPIIO", [
        {"file": 1, "rank": 0, f"MPIIO_F_{t}_TIME": 6.0, f"MPIIO_{kind}_{d}": 3,
         f"MPIIO_BYTES_{b}": 300},
        {"file": 1, "rank": 1, f"MPIIO_F_{t}_TIME": 2.0, f"MPIIO_{kind}_{d}": 1,
         f"MPIIO_BYTES_{b}": 100}])  # fmt: skip
    p = counters("POSIX", [{"file": 1, "rank": 0, f"POSIX_F_{t}_TIME": 1.0},
                           {"file": 1, "rank": 1, f"POSIX_F_{t}_TIME": 0.5},
                           # a file MPI-IO never opened: not beneath it
                           {"file": 2, "rank": 0, f"POSIX_F_{t}_TIME": 100.0}])  # fmt: skip
    return trace(m, p, nprocs=2) if posix else trace(m, nprocs=2)


def test_mpiio_time_above_posix_by_hand():
    f = only(findings(_above(), "mpiio-time-above-posix"), Level.WARN)
    assert f.evidence == {"direction": "write", "mpiio_seconds": 8.0, "posix_seconds": 1.5,
                          "collective_ops": 4, "ops": 4, "bytes_per_call": 100.0,
                          "slowest_rank": 0, "slowest_rank_excess_seconds": 5.0}  # fmt: skip
    assert f.message.startswith(
        "MPI-IO writes take 8 s summed over ranks, their POSIX writes 1.5 s (5.3×): 4 "
        "collective writes move 100 B per call on average: each one synchronises the ranks "
        "and the aggregators for little data; rank 0 spends 5 s in MPI-IO writes beyond its "
        "POSIX writes.")
    assert f.recommendation.startswith("Make fewer, larger collective calls: describe all")
    assert f.snippet == advice.MPIIO_ONE_CALL_PER_STEP
    assert f.cost_seconds == pytest.approx(5.0)


def test_mpiio_time_above_posix_limits_both_sides():
    tr = _above()
    assert findings(tr, "mpiio-time-above-posix", mpiio_overhead_ratio=5.34) == []
    assert only(findings(tr, "mpiio-time-above-posix", mpiio_overhead_ratio=5.33))
    assert findings(tr, "mpiio-time-above-posix", mpiio_overhead_min_time=6.5) == []
    assert only(findings(tr, "mpiio-time-above-posix", mpiio_overhead_min_time=6.49))
    # 100 bytes per call is not below 100: the waiting advice.
    f = only(findings(tr, "mpiio-time-above-posix", small_request_size=100))
    assert f.message.split("): ")[1].startswith("the ranks spend it waiting")
    assert f.snippet == advice.MPIIO_HINTS_CB
    assert f.recommendation.endswith("non-blocking collectives (MPI_File_iwrite_all).")


def test_collective_calls_beside_independent_ones_are_judged_by_their_own_share():
    """The bytes counter holds both kinds of call: 2 collective writes beside
    98 independent ones of 100 B moved up to (2 MiB + 9,800 B) / 2 each, not
    the 21 KiB the average over all 100 calls says."""
    def tr(coll_bytes: int):
        m = counters("MPIIO", [{"file": 1, "rank": 0, "MPIIO_F_WRITE_TIME": 8.0,
                                "MPIIO_COLL_WRITES": 2, "MPIIO_INDEP_WRITES": 98,
                                "MPIIO_BYTES_WRITTEN": coll_bytes + 9800}])  # fmt: skip
        p = counters("POSIX", [{"file": 1, "rank": 0, "POSIX_F_WRITE_TIME": 1.0}])
        return trace(m, p, nprocs=2)

    f = only(findings(tr(2 << 20), "mpiio-time-above-posix"))
    assert f.message.split("): ")[1].startswith("the ranks spend it waiting")
    assert f.evidence["bytes_per_call"] == pytest.approx(((2 << 20) + 9800) / 2)
    f = only(findings(tr(2 * 1000), "mpiio-time-above-posix"))
    assert "2 collective writes move at most 5.8 KiB per call (98 independent writes beside " \
           "them): each one" in f.message


def test_mpiio_time_above_posix_other_cases():
    f = only(findings(_above(coll=False), "mpiio-time-above-posix"))
    assert f.evidence["collective_ops"] == 0 and f.snippet == advice.MPIIO_HINTS_CB
    f = only(findings(_above("READS"), "mpiio-time-above-posix"))
    assert f.evidence["direction"] == "read"
    assert "read all a rank needs in a step" in f.recommendation
    f = only(findings(_above(posix=False), "mpiio-time-above-posix"))
    assert "(none beneath them)" in f.message and f.evidence["posix_seconds"] == 0.0
