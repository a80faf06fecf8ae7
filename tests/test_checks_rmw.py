"""POSIX reads inside the same rank's MPI-IO writes of the same file, from
the records: the edges of a write, other ranks and other files kept apart,
at times far from zero."""

from __future__ import annotations

import numpy as np

from iopilot.checks.base import Context
from iopilot.checks.rmw import _from_records
from iopilot.checks.thresholds import defaults
from iopilot.model import Records
from kit import records, trace


def test_reads_inside_writes_by_hand():
    writes = records([(0, "w", 2, 0, 1000, 100.0, 105.0),
                      (1, "w", 2, 0, 500, 101.0, 103.0),
                      (1, "w", 1, 0, 300, 110.0, 111.0)], layer="MPIIO")  # fmt: skip
    reads = records([
        (0, "r", 2, 0, 10, 102.0, 102.5),   # inside rank 0's write of file 2
        (0, "r", 2, 0, 20, 105.0, 105.25),  # starts as it ends: still inside
        (0, "r", 2, 0, 40, 106.0, 106.5),   # after it
        (1, "r", 2, 0, 30, 101.0, 101.5),   # starts as rank 1's write starts
        (2, "r", 1, 0, 50, 102.0, 102.5),   # rank 2 never writes file 1
        (1, "r", 3, 0, 60, 110.5, 111.0),   # file 3 is not written through MPI-IO
        (0, "r", 1, 0, 70, 110.5, 111.0),   # rank 0 does not write file 1
    ])  # fmt: skip
    ctx = Context(trace(recs=Records.concat([writes, reads]), nprocs=3), defaults())
    fid, rank, nbytes, secs, written = _from_records(ctx)
    got = sorted(zip(fid.tolist(), rank.tolist(), nbytes.tolist(), secs.tolist(), strict=True))
    assert got == [(2, 0, 10.0, 0.5), (2, 0, 20.0, 0.25), (2, 1, 30.0, 0.5)]
    assert written == 1800.0


def test_no_reads_at_all_or_no_writes():
    writes = records([(0, "w", 1, 0, 100, 5.0, 6.0)], layer="MPIIO")
    fid, rank, nbytes, secs, written = _from_records(
        Context(trace(recs=writes), defaults()))  # fmt: skip
    assert len(fid) == len(rank) == len(nbytes) == len(secs) == 0 and written == 100.0
    assert rank.dtype == np.int64
    reads = records([(0, "r", 1, 0, 100, 5.0, 6.0)])
    assert _from_records(Context(trace(recs=reads), defaults())) is None
