"""The Darshan reader against PyDarshan on real logs: the job (times to the
nanosecond, metadata, mounts) and every DXT segment (rank, file, operation,
offset, length, start and end)."""

from __future__ import annotations

import numpy as np
import pytest

from iopilot.model import OP_READ, OP_WRITE, RECORD_LAYERS
from iopilot.sources import load
from kit import SHARED

darshan = pytest.importorskip("darshan")

# Logs whose job times have nanoseconds, with and without DXT.
LOGS = ["LOCAL_mpi-io-test_coll_4p_dxt_v3.5.0.darshan", "LOCAL_dd_nonmpi_dxt_v3.5.0.darshan",
        "mpi-io-test-x86_64-3.4.1.darshan"]  # fmt: skip


def _log(name: str) -> str:
    p = SHARED / name
    if not p.exists():
        pytest.skip(f"shared log corpus not present: {SHARED}")
    return str(p)


@pytest.mark.parametrize("name", LOGS)
def test_job_matches_pydarshan(name):
    path = _log(name)
    ours = load(path).job
    ref = darshan.DarshanReport(path, read_all=False)
    j = ref.metadata["job"]
    assert ours.nprocs == j["nprocs"] and ours.jobid == j["jobid"] and ours.uid == j["uid"]
    assert ours.start == pytest.approx(j["start_time_sec"] + j["start_time_nsec"] * 1e-9,
                                       abs=1e-7)  # fmt: skip
    assert ours.end == pytest.approx(j["end_time_sec"] + j["end_time_nsec"] * 1e-9, abs=1e-7)
    assert ours.runtime == pytest.approx(j["run_time"])
    assert ours.metadata == j["metadata"]
    assert ours.executable == ref.metadata["exe"]
    assert ours.mounts == [tuple(m) for m in ref.mounts]
    assert ours.writer == f"darshan-runtime {j['metadata']['lib_ver']}"
    assert ours.format == f"darshan {j['log_ver']}"


@pytest.mark.parametrize("name", LOGS[:2])
def test_dxt_segments_match_pydarshan(name):
    path = _log(name)
    t = load(path)
    ref = darshan.DarshanReport(path, read_all=True)
    want = []
    dxt = ref.records["DXT_POSIX"].to_df()  # one dict per record, segments as frames
    for rec in dxt:
        for op, key in ((OP_WRITE, "write_segments"), (OP_READ, "read_segments")):
            for s in rec[key].itertuples():
                want.append((rec["rank"], rec["id"], op, s.offset, s.length, s.start_time,
                             s.end_time))  # fmt: skip
    r = t.records
    mine = r.layer == RECORD_LAYERS.index("POSIX")
    got = list(zip(r.rank[mine].tolist(), r.file_id[mine].tolist(), r.op[mine].tolist(),
                   r.offset[mine].tolist(), r.length[mine].tolist(), r.start[mine].tolist(),
                   r.end[mine].tolist(), strict=True))  # fmt: skip
    assert len(want) > 0
    assert sorted(got) == sorted(want)  # the same doubles, read the same way
    hosts = {rec["rank"]: rec["hostname"] for rec in dxt}
    assert all(t.job.hosts[k] == v for k, v in hosts.items())
    assert np.all(r.end >= r.start)


@pytest.mark.parametrize("name", ["example.darshan", "sample-badost.darshan",
                                  "ior_hdf5_example.darshan"])
def test_lustre_layouts_match_pydarshan(name):
    from iopilot.demo import example_dir

    path = str(example_dir() / name)
    lay = load(path).lustre
    comps = darshan.DarshanReport(path, read_all=True).records["LUSTRE"].to_df()["components"]
    want = {}
    for row in comps.to_dict("records"):  # the first component of each file
        want.setdefault(row["id"], (row["LUSTRE_COMP_STRIPE_SIZE"],
                                    row["LUSTRE_COMP_STRIPE_COUNT"],
                                    [int(x) for x in row["LUSTRE_OST_IDS"]]))  # fmt: skip
    got = {}
    ends = [*lay.ost_start[1:].tolist(), len(lay.ost_ids)]
    for i, fid in enumerate(lay.file_id.tolist()):
        osts = lay.ost_ids[lay.ost_start[i] : ends[i]].tolist()
        got[fid] = (int(lay.stripe_size[i]), int(lay.stripe_count[i]), osts)
    assert len(got) == len(lay) and len(want) > 0
    assert got == {k: (s, c, o[:c]) for k, (s, c, o) in want.items()}
