"""The job by node (report/nodes.py) on traces built here: which ranks are
collective-buffering aggregators, bytes and seconds per host, and the
terminal's lines (the four-node runs themselves: test_multinode.py); and
how the terminal counts what a list left out."""

from __future__ import annotations

import numpy as np

from iopilot._record import replace
from iopilot.model import Records
from iopilot.model.trace import ClockAlignment
from iopilot.report.nodes import aggregators, clock_line, clock_summary, nodes_line, nodes_summary
from kit import counters, records, trace

HOSTS = {0: "a", 1: "a", 2: "b", 3: "b"}


def _concat(*parts: Records) -> Records:
    fields = ("rank", "layer", "op", "file_id", "offset", "length", "start", "end")
    return Records(*(np.concatenate([getattr(p, f) for p in parts]) for f in fields))


def _both(posix: list[tuple], mpiio: list[tuple]) -> Records:
    """POSIX and MPI-IO records in one table."""
    return _concat(records(posix, "POSIX"), records(mpiio, "MPIIO"))


def _job(collective: bool = True, posix: list[tuple] | None = None):
    """Four ranks on two hosts write 100 bytes each to file 1 through MPI-IO;
    ``posix``: what reached the file system, by whom."""
    mp = [(r, "w", 1, 100 * r, 100, 1.0, 2.0) for r in range(4)]
    if posix is None:  # ranks 0 and 2 gather their host's 200 bytes
        posix = [(0, "w", 1, 0, 200, 1.5, 1.8), (2, "w", 1, 200, 200, 1.5, 1.6)]
    kind = "MPIIO_COLL_WRITES" if collective else "MPIIO_INDEP_WRITES"
    table = counters("MPIIO", [{"file": 1, "rank": -1, kind: 4}])
    return trace(table, recs=_both(posix, mp), nprocs=4, hosts=HOSTS)


def test_the_aggregators_are_the_ranks_whose_posix_bytes_reach_their_mpiio_bytes():
    assert aggregators(_job()) == {0, 2}
    # exactly its own bytes through POSIX: still an aggregator (of itself)
    same = [(r, "w", 1, 100 * r, 100, 1.5, 1.6) for r in range(4)]
    assert aggregators(_job(posix=same)) == {0, 1, 2, 3}
    # one byte short: its data went through another rank
    short = [(0, "w", 1, 0, 99, 1.5, 1.6), (1, "w", 1, 99, 101, 1.5, 1.6)]
    assert aggregators(_job(posix=short)) == {1}
    # a rank with no POSIX bytes on the file is none
    assert aggregators(_job(posix=[(3, "w", 2, 0, 400, 1.5, 1.6)])) == set()
    # nor is one that never touched a second collective file (0 bytes both ways)
    two = _job()
    table = counters("MPIIO", [{"file": 1, "rank": -1, "MPIIO_COLL_WRITES": 4},
                               {"file": 5, "rank": 0, "MPIIO_COLL_WRITES": 1}])  # fmt: skip
    extra = _both([(0, "w", 5, 0, 50, 3.0, 3.1)], [(0, "w", 5, 0, 50, 3.0, 3.2)])
    two = replace(two, counters={"MPIIO": table}, records=_concat(two.records, extra))
    assert aggregators(two) == {0, 2}


def test_no_aggregators_are_known_without_collective_calls_or_records():
    assert aggregators(_job(collective=False)) is None
    no_records = replace(_job(), records=Records.empty())
    assert aggregators(no_records) is None
    assert aggregators(trace(recs=records([(0, "w", 1, 0, 10, 0.0, 1.0)]), nprocs=1)) is None


def test_each_host_lists_its_ranks_aggregators_bytes_and_seconds():
    nodes = nodes_summary(_job())
    assert nodes == [
        {"host": "a", "ranks": [0, 1], "aggregators": [0], "bytes": 200, "io_seconds": 0.3},
        {"host": "b", "ranks": [2, 3], "aggregators": [2], "bytes": 200, "io_seconds": 0.1},
    ]  # fmt: skip
    assert nodes_line(nodes) == "2: a 2 ranks, 1 aggregator; b 2 ranks, 1 aggregator"


def test_without_records_the_hosts_take_the_counters_per_rank():
    p = counters("POSIX", [
        {"file": 1, "rank": 0, "POSIX_BYTES_WRITTEN": 10, "POSIX_F_WRITE_TIME": 0.5},
        {"file": 2, "rank": 0, "POSIX_BYTES_READ": 5, "POSIX_F_META_TIME": 0.25},
        {"file": 1, "rank": 3, "POSIX_BYTES_READ": 7, "POSIX_F_READ_TIME": 1.0},
        {"file": 3, "rank": -1, "POSIX_BYTES_WRITTEN": 1000, "POSIX_F_WRITE_TIME": 9.0},
    ])  # fmt: skip
    nodes = nodes_summary(trace(p, nprocs=4, hosts={0: "a", 1: "b", 3: "b"}))
    # a shared file's row (rank -1) belongs to no host
    assert nodes == [
        {"host": "a", "ranks": [0], "aggregators": None, "bytes": 15, "io_seconds": 0.75},
        {"host": "b", "ranks": [1, 3], "aggregators": None, "bytes": 7, "io_seconds": 1.0},
    ]  # fmt: skip
    assert nodes_line(nodes) == "2: a rank 0; b 2 ranks"


def test_one_host_is_no_table():
    assert nodes_summary(trace(nprocs=2, hosts={0: "a", 1: "a"})) is None
    assert nodes_summary(trace(nprocs=1)) is None
    two = nodes_summary(trace(nprocs=2, hosts={0: "a", 1: "b"}))
    assert [n["host"] for n in two] == ["a", "b"]


def test_aggregator_counts_are_spelled_per_host():
    nodes = [{"host": "x", "ranks": [0, 1, 2], "aggregators": [0, 2]},
             {"host": "y", "ranks": [3], "aggregators": []}]  # fmt: skip
    assert nodes_line(nodes) == "2: x 3 ranks, 2 aggregators; y rank 3, 0 aggregators"


def test_clock_lines_say_what_was_measured():
    assert clock_summary(trace(nprocs=1)) is None
    c = clock_summary(replace(trace(nprocs=2), job=replace(
        trace(nprocs=2).job, clock=ClockAlignment(3, 2, 0.0123456789, 4.2e-5))))  # fmt: skip
    assert c == {"hosts": 3, "aligned": 2, "largest_shift_s": 0.012345679,
                 "uncertainty_s": 4.2e-05}  # fmt: skip
    assert clock_line(c) == ("2 host(s) put on rank 0's clock (moved by up to 12.3 ms); "
                             "timelines within 0.042 ms of each other; 1 host(s) not measured, "
                             "left on their own clocks")  # fmt: skip
    every = dict(c, aligned=3)
    assert clock_line(every).endswith("timelines within 0.042 ms of each other")
    none = {"hosts": 2, "aligned": 0, "largest_shift_s": 0.0, "uncertainty_s": None}
    assert clock_line(none).startswith("2 hosts, each process on its own host's clock: not "
                                       "measured")  # fmt: skip


def test_what_a_list_left_out_is_counted_in_plain_words():
    from iopilot.report.terminal import others

    assert others(1, "file") == "1 other file" and others(2, "file") == "2 other files"
    assert others(1, "phase") == "1 other phase" and others(0, "rank") == "0 other ranks"
    assert others(1234, "source") == "1,234 other places in the source"
    assert others(1, "unknown kind") == "1 other file"
