"""The checks real programs needed: reopened files, tiny files, MPI-IO time
above POSIX, read-modify-write, STDIO logging; tiny models on both sides of
every threshold, reads and writes apart, and a real pandas job."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import iopilot
from iopilot.checks import REGISTRY, Level
from iopilot.checks.thresholds import defaults
from kit import counters, findings, trace

KiB, MiB = 1024, 1024 * 1024
T = defaults()


def one(fs, level=None):
    assert len(fs) == 1, fs
    if level is not None:
        assert fs[0].level == level, fs[0]
    assert fs[0].cost_seconds is not None
    return fs[0]


def test_registered_with_their_thresholds():
    for cid in ("reopened-files", "tiny-files", "mpiio-time-above-posix",
                "mpiio-read-modify-write", "stdio-time"):
        cls = REGISTRY[cid]
        assert cls.summary() != cid and set(cls.uses) <= set(T)
        assert "cost_seconds" in (cls.__doc__ or "")


# ------------------------------------------------------------ reopened files


def posix_row(file=1, rank=0, **kw):
    return {"file": file, "rank": rank, **{f"POSIX_{k.upper()}": v for k, v in kw.items()}}


def reopen(rows, nprocs=1, exe=""):
    tr = trace(counters("POSIX", rows), nprocs=nprocs)
    tr.job.executable = exe
    return findings(tr, "reopened-files")


def test_reopen_count_both_sides():
    n = T["reopen_count"]
    assert reopen([posix_row(opens=n, writes=n, f_meta_time=1.0)]) == []
    f = one(reopen([posix_row(opens=n + 1, writes=n + 1, f_meta_time=1.0)]), Level.HIGH)
    assert f.evidence["files_written"] == 1 and f.evidence["files_read"] == 0
    assert f.cost_seconds == pytest.approx(1.0)
    assert "write once" in f.recommendation and f.snippet_lang == "c"


def test_seek_stat_count_both_sides():
    n = T["seek_stat_count"]
    assert reopen([posix_row(seeks=n // 2, stats=n - n // 2, f_meta_time=0.1)]) == []
    f = one(reopen([posix_row(seeks=n // 2, stats=n - n // 2 + 1, f_meta_time=0.1)]))
    assert "stat or an existence test" in f.recommendation and f.snippet == ""
    # One seek per write is an access pattern: only the excess counts.
    assert reopen([posix_row(seeks=n + 500, writes=500, f_meta_time=0.1)]) == []
    assert one(reopen([posix_row(seeks=n + 501, writes=500, f_meta_time=0.1)]))
    assert reopen([posix_row(seeks=n + 500, reads=500, f_meta_time=0.1)]) == []


def test_reads_and_writes_get_their_own_advice():
    n = T["reopen_count"] + 1
    r = one(reopen([posix_row(opens=n, reads=n, f_meta_time=0.2)], exe="/usr/bin/python3 a.py"))
    assert r.evidence["files_read"] == 1 and r.evidence["files_written"] == 0
    assert "Read the file once" in r.recommendation and "read_csv" in r.snippet
    w = one(reopen([posix_row(opens=n, writes=n, f_meta_time=0.2)], exe="/v/bin/python a.py"))
    assert "Open the file once" in w.recommendation and "to_csv" in w.snippet
    assert w.snippet_lang == "python" and "pandas" in w.recommendation


def test_reopen_level_follows_the_metadata_share():
    n = T["reopen_count"] + 1
    share = T["metadata_time_share"]
    # The reopened file's metadata time against the rank's I/O time (another file's writes).
    def level(meta):
        return one(reopen([posix_row(file=1, opens=n, writes=n, f_meta_time=meta),
                           posix_row(file=2, opens=1, writes=1,
                                     f_write_time=1.0 - meta)])).level  # fmt: skip

    assert level(share + 0.01) == Level.HIGH
    assert level(share - 0.01) == Level.WARN


def test_reduced_shared_rows_count_per_rank():
    n = T["reopen_count"]
    row = posix_row(rank=-1, opens=4 * n, writes=4 * n, f_meta_time=4.0)
    assert reopen([row], nprocs=4) == []  # n opens per rank: not above
    row = posix_row(rank=-1, opens=4 * n + 4, writes=4 * n, f_meta_time=4.0)
    f = one(reopen([row], nprocs=4))
    assert f.cost_seconds == pytest.approx(1.0)  # spread over the 4 ranks


def test_stdio_opens_join_posix_on_the_same_file():
    n = T["reopen_count"]
    st = counters("STDIO", [{"file": 1, "rank": 0, "STDIO_OPENS": n // 2 + 1,
                             "STDIO_WRITES": 3, "STDIO_F_META_TIME": 0.5}])  # fmt: skip
    po = counters("POSIX", [posix_row(opens=n - n // 2, f_meta_time=0.25)])
    f = one(findings(trace(po, st), "reopened-files"))
    assert f.evidence["opens"] == n + 1
    assert f.cost_seconds == pytest.approx(0.75)


# --------------------------------------------------------- real programs


def _iopilot(cwd: Path, *args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess:  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOPILOT_")} | (env or {})
    env["PYTHONPATH"] = str(Path(iopilot.__file__).resolve().parents[1])
    return subprocess.run([sys.executable, "-m", "iopilot", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd, env=env)  # fmt: skip


_APPENDS = """
import pandas as pd
for i in range(2000):
    pd.DataFrame({"step": [i], "value": [i * 0.5]}).to_csv(
        "out.csv", mode="a", header=(i == 0), index=False)
"""


def test_pandas_appends_are_the_costliest_finding(tmp_path):
    p = _iopilot(tmp_path, "run", "--trace-only", "--trace-dir", str(tmp_path / "t"), "--",
                 sys.executable, "-c", _APPENDS)  # fmt: skip
    assert p.returncode == 0, p.stderr
    q = _iopilot(tmp_path, "report", str(tmp_path / "t"), "--json")
    doc = json.loads(q.stdout)["reports"][0]
    # pandas' own modules are set aside; the CSV is the job's.
    assert doc["set_aside"]["files"] > 100
    by = {f["check"]: f for f in doc["findings"]}
    f = by["reopened-files"]
    out = next(e for e in f["files"] if e["path"].endswith("/out.csv"))
    assert out["opens"] >= 2000 and out["writes"] == 2000 and out["seeks"] >= 2000
    assert f["snippet_lang"] == "python" and "to_csv" in f["snippet"]
    costs = [x["cost_seconds"] or 0.0 for x in doc["findings"]]
    assert f["cost_seconds"] == max(costs) > 0
    # More than all data transfers took: whatever another check charges, this is the most.
    posix = next(x for x in doc["layers"] if x["layer"] == "POSIX")
    assert f["cost_seconds"] > posix["read_time"] + posix["write_time"]


# ---------------------------------------------------------------- tiny files


def tiny(n, size, op="write", meta=0.001, exe=""):
    """``n`` files of ``size`` bytes, each opened once and read or written."""
    word = "WRITTEN" if op == "write" else "READ"
    rows = [{"file": 100 + i, "rank": 0, "POSIX_OPENS": 1, f"POSIX_{op.upper()}S": 1,
             f"POSIX_BYTES_{word}": size, f"POSIX_MAX_BYTE_{word}": size - 1,
             "POSIX_F_META_TIME": meta} for i in range(n)]  # fmt: skip
    tr = trace(counters("POSIX", rows))
    tr.job.executable = exe
    return findings(tr, "tiny-files")


def test_tiny_files_count_both_sides_reads_and_writes_apart():
    n, size = T["tiny_files_count"], T["tiny_file_size"]
    # At most tiny_files_min files are never a storm, whatever their share.
    assert tiny(T["tiny_files_min"], 100) == []
    assert one(tiny(T["tiny_files_min"] + 1, 100)).evidence["tiny_files_written"] == 101
    w = one(tiny(n + 1, 100))
    assert w.evidence["tiny_files_written"] == n + 1 and w.evidence["tiny_files_read"] == 0
    assert "one file" in w.recommendation and w.snippet_lang == "c"
    assert w.cost_seconds == pytest.approx((n + 1) * 0.001)
    r = one(tiny(n + 1, 100, op="read"))
    assert r.evidence["tiny_files_read"] == n + 1 and r.evidence["tiny_files_written"] == 0
    assert "Pack the small inputs" in r.recommendation and r.snippet_lang == "sh"
    assert tiny(n + 1, size) == []  # a file of exactly the size is not tiny
    assert one(tiny(n + 1, size - 1)).evidence["tiny_files_written"] == n + 1
    py = one(tiny(n + 1, 100, exe="/usr/bin/python3 run.py"))
    assert py.snippet_lang == "python" and "h5py" in py.snippet


def test_tiny_reads_and_writes_are_counted_apart():
    n = T["tiny_files_count"]
    half = n // 2 + 1  # above the limit together, below it apart
    rows = [{"file": 100 + i, "rank": 0, "POSIX_OPENS": 1, "POSIX_WRITES": 1,
             "POSIX_BYTES_WRITTEN": 10, "POSIX_MAX_BYTE_WRITTEN": 9} for i in range(half)]
    rows += [{"file": 5000 + i, "rank": 0, "POSIX_OPENS": 1, "POSIX_READS": 1,
              "POSIX_BYTES_READ": 10, "POSIX_MAX_BYTE_READ": 9} for i in range(half)]  # fmt: skip
    assert findings(trace(counters("POSIX", rows)), "tiny-files") == []


# ------------------------------------------------------- MPI-IO time vs POSIX


def mpiio_time(mpi_s, posix_s, d="WRITE", coll=10, nbytes=100 * MiB, ranks=2):
    """``ranks`` ranks each spending ``mpi_s`` in MPI-IO and ``posix_s`` in POSIX
    on one file, in direction ``d``."""
    word = "WRITTEN" if d == "WRITE" else "READ"
    m = counters("MPIIO", [{"file": 1, "rank": r, f"MPIIO_COLL_{d}S": coll,
                            f"MPIIO_BYTES_{word}": nbytes, f"MPIIO_F_{d}_TIME": mpi_s}
                           for r in range(ranks)])  # fmt: skip
    p = counters("POSIX", [{"file": 1, "rank": r, f"POSIX_{d}S": coll,
                            f"POSIX_BYTES_{word}": nbytes, f"POSIX_F_{d}_TIME": posix_s}
                           for r in range(ranks)])  # fmt: skip
    return findings(trace(m, p, nprocs=ranks), "mpiio-time-above-posix")


def test_mpiio_time_ratio_both_sides():
    k = T["mpiio_overhead_ratio"]
    assert mpiio_time(k * 2.0, 2.0) == []  # exactly the ratio: not above
    f = one(mpiio_time(k * 2.0 + 0.01, 2.0), Level.WARN)
    assert f.evidence["direction"] == "write"
    assert f.cost_seconds == pytest.approx(k * 2.0 + 0.01 - 2.0)


def test_mpiio_time_minimum_both_sides():
    lo = T["mpiio_overhead_min_time"]
    # Two ranks: the excess summed over ranks is twice the per-rank excess.
    assert mpiio_time(lo / 2, 0.0) == []
    assert one(mpiio_time(lo / 2 + 0.01, 0.0)).evidence["posix_seconds"] == 0


def test_mpiio_time_reads_and_writes_apart():
    r = one(mpiio_time(10.0, 1.0, d="READ"))
    assert r.evidence["direction"] == "read" and "MPI_File_iread_all" in r.recommendation
    # Write time does not excuse read time: POSIX writes do not count against MPI-IO reads.
    m = counters("MPIIO", [{"file": 1, "rank": 0, "MPIIO_COLL_READS": 10,
                            "MPIIO_BYTES_READ": 100 * MiB, "MPIIO_F_READ_TIME": 10.0}])
    p = counters("POSIX", [{"file": 1, "rank": 0, "POSIX_WRITES": 10,
                            "POSIX_F_WRITE_TIME": 10.0}])  # fmt: skip
    f = one(findings(trace(m, p), "mpiio-time-above-posix"))
    assert f.evidence["direction"] == "read" and f.evidence["posix_seconds"] == 0


def test_mpiio_time_small_calls_or_waiting():
    small = T["small_request_size"]
    calls = one(mpiio_time(10.0, 1.0, coll=100, nbytes=100 * (small - 1)))
    assert "fewer, larger collective calls" in calls.recommendation
    assert "MPI_File_set_view" in calls.snippet
    wait = one(mpiio_time(10.0, 1.0, coll=100, nbytes=100 * small))
    small_reads = one(mpiio_time(10.0, 1.0, d="READ", coll=100, nbytes=100 * (small - 1)))
    assert "read all a rank needs" in small_reads.recommendation
    assert "cb_nodes" in wait.recommendation and "waiting" in wait.message


# --------------------------------------------------------- read-modify-write


def rmw_trace(read_bytes, write_bytes=1000, inside=True, op="r", records_=True):
    """Rank 0 writes ``write_bytes`` through MPI-IO from t=1 to t=2; its POSIX
    layer reads ``read_bytes`` at t=1.5 (inside) or t=3 (after)."""
    from kit import records

    at = 1.5 if inside else 3.0
    mp = records([(0, "w", 1, 0, write_bytes, 1.0, 2.0)], layer="MPIIO")
    po = records([(0, op, 1, 0, read_bytes, at, at + 0.25),
                  (0, "w", 1, 0, write_bytes, 1.6, 1.7)])  # fmt: skip
    from iopilot.model import Records

    m = counters("MPIIO", [{"file": 1, "rank": 0, "MPIIO_INDEP_WRITES": 1,
                            "MPIIO_BYTES_WRITTEN": write_bytes}])
    p = counters("POSIX", [{"file": 1, "rank": 0, "POSIX_READS": 1, "POSIX_WRITES": 1,
                            "POSIX_BYTES_READ": read_bytes, "POSIX_BYTES_WRITTEN": write_bytes,
                            "POSIX_F_READ_TIME": 0.25}])  # fmt: skip
    recs = Records.concat([mp, po]) if records_ else None
    return findings(trace(m, p, recs=recs), "mpiio-read-modify-write")


def test_rmw_share_both_sides():
    share = T["rmw_share"]
    assert rmw_trace(int(share * 1000)) == []
    f = one(rmw_trace(int(share * 1000) + 1), Level.WARN)
    assert f.evidence["source"] == "records" and f.evidence["posix_reads"] == 1
    assert f.cost_seconds == pytest.approx(0.25)
    assert "romio_ds_write" in f.snippet and "romio_ds_write=disable" in f.recommendation


def test_rmw_counts_only_reads_inside_writes():
    assert rmw_trace(500, inside=False) == []  # a read after the write: not read-modify-write
    assert rmw_trace(500, op="w") == []  # POSIX writes inside MPI-IO writes are its writes


def test_rmw_from_counters_needs_write_only_files():
    f = one(rmw_trace(500, records_=False))
    assert f.evidence["source"] == "counters"
    # A file the application also reads through MPI-IO: its POSIX reads may be the app's.
    m = counters("MPIIO", [{"file": 1, "rank": 0, "MPIIO_INDEP_WRITES": 1,
                            "MPIIO_BYTES_WRITTEN": 1000, "MPIIO_BYTES_READ": 500}])
    p = counters("POSIX", [{"file": 1, "rank": 0, "POSIX_READS": 1,
                            "POSIX_BYTES_READ": 500}])  # fmt: skip
    assert findings(trace(m, p), "mpiio-read-modify-write") == []


# ------------------------------------------------------------- STDIO time


def stdio(rank_secs, d="WRITE", runtime=10.0, meta=0.0, exe=""):
    """One STDIO file per rank: rank r spends ``rank_secs[r]`` seconds in ``d``."""
    rows = [{"file": 1, "rank": r, f"STDIO_{d}S": 1000, f"STDIO_F_{d}_TIME": sec,
             "STDIO_F_META_TIME": meta, "STDIO_OPENS": 1}
            for r, sec in enumerate(rank_secs)]  # fmt: skip
    tr = trace(counters("STDIO", rows), nprocs=len(rank_secs))
    tr.job.runtime, tr.job.executable = runtime, exe
    return findings(tr, "stdio-time")


def test_stdio_share_of_the_run_both_sides():
    share = T["stdio_time_share"]
    assert stdio([0.1, share * 10.0], runtime=10.0) == []  # exactly the share: not above
    f = one(stdio([0.1, share * 10.0 + 0.01], runtime=10.0), Level.WARN)
    assert f.evidence["rank"] == 1 and f.evidence["direction"] == "writing"
    assert f.cost_seconds == pytest.approx(share * 10.0 + 0.01)
    assert "Log less" in f.recommendation and "setvbuf" in f.snippet


def test_stdio_minimum_time_both_sides():
    lo = T["stdio_min_time"]
    assert stdio([lo], runtime=lo) == []  # 100 % of a short run, but not above the minimum
    assert one(stdio([lo + 0.01], runtime=lo + 0.01))


def test_stdio_reads_and_writes_apart():
    r = one(stdio([0.0, 3.0], d="READ"))
    assert r.evidence["direction"] == "reading" and "Read the input" in r.recommendation
    # Metadata time goes with the direction the stream was used for.
    assert one(stdio([0.0, 1.0], meta=2.0)).cost_seconds == pytest.approx(3.0)
    py = one(stdio([0.0, 3.0], exe="/usr/bin/python3 job.py"))
    assert py.snippet_lang == "python" and "MemoryHandler" in py.snippet


# --------------------------------------------------- stragglers by I/O time


def straggler_rows(meta=0.0, d="WRITE", data=1.0):
    """Four ranks moving the same bytes in ``data`` seconds each; rank 2 also
    spends ``meta`` seconds in metadata calls."""
    word = "WRITTEN" if d == "WRITE" else "READ"
    return [{"file": 1 + r, "rank": r, f"POSIX_{d}S": 10, f"POSIX_BYTES_{word}": MiB,
             f"POSIX_F_{d}_TIME": data, "POSIX_F_META_TIME": meta if r == 2 else 0.0}
            for r in range(4)]  # fmt: skip


def test_metadata_time_makes_a_straggler_both_sides():
    k = T["straggler_ratio"]
    tr = trace(counters("POSIX", straggler_rows(meta=k - 1.0)), nprocs=4)
    assert findings(tr, "phase-stragglers") == []  # exactly k× the median: not above
    tr = trace(counters("POSIX", straggler_rows(meta=k - 1.0 + 0.01)), nprocs=4)
    (f,) = findings(tr, "phase-stragglers")
    assert f.evidence["worst_rank"] == 2
    assert f.evidence["worst_rank_meta_seconds"] == pytest.approx(k - 1.0 + 0.01)
    assert f.cost_seconds == pytest.approx(k - 1.0 + 0.01)


def test_metadata_straggler_gets_metadata_advice():
    (f,) = findings(trace(counters("POSIX", straggler_rows(meta=5.0)), nprocs=4),
                    "phase-stragglers")  # fmt: skip
    assert "opens, stats" in f.recommendation
    # A rank slow in its reads (not its metadata): the same straggler, other advice.
    rows = straggler_rows(d="READ")
    rows[2]["POSIX_F_READ_TIME"] = 5.0
    (g,) = findings(trace(counters("POSIX", rows), nprocs=4), "phase-stragglers")
    assert g.evidence["worst_rank"] == 2 and "opens, stats" not in g.recommendation
    assert g.cost_seconds == pytest.approx(4.0)


def test_whole_run_straggler_when_the_phases_have_none():
    from kit import records

    # Same data operations on every rank: no phase has a straggler.
    recs = records([(r, "w", 1 + r, 0, MiB, 0.0, 1.0) for r in range(4)])
    tr = trace(counters("POSIX", straggler_rows(meta=5.0)), recs=recs, nprocs=4)
    (f,) = findings(tr, "phase-stragglers")
    assert f.evidence["source"] == "counters" and f.message.startswith("No I/O phase")
    tr = trace(counters("POSIX", straggler_rows(meta=0.0)), recs=recs, nprocs=4)
    assert findings(tr, "phase-stragglers") == []


_STRIDED = """
from mpi4py import MPI
import numpy as np
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
block, nblocks = 1024, 1024
fh = MPI.File.Open(comm, "strided.dat", MPI.MODE_CREATE | MPI.MODE_WRONLY)
ftype = MPI.BYTE.Create_vector(nblocks, block, block * size).Commit()
fh.Set_view(rank * block, MPI.BYTE, ftype)
fh.Write_at(0, np.full(block * nblocks, rank, np.uint8))   # independent, with holes
fh.Close()
"""


@pytest.mark.skipif(not shutil.which("mpirun"), reason="mpirun not installed")
@pytest.mark.parametrize("hint", ["", "romio_ds_write disable"])
def test_romio_data_sieving_is_read_modify_write(tmp_path, hint):
    (tmp_path / "job.py").write_text(_STRIDED)
    (tmp_path / "hints").write_text(hint + "\n")
    env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMPI_MCA_io": "romio321",
           "OMPI_MCA_btl": "self,vader", "ROMIO_HINTS": str(tmp_path / "hints")}  # fmt: skip
    p = _iopilot(tmp_path, "run", "--trace-only", "--trace-dir", str(tmp_path / "t"), "--",
                 "mpirun", "-x", "ROMIO_HINTS", "-n", "2", sys.executable, "job.py",
                 env=env)  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(_iopilot(tmp_path, "report", str(tmp_path / "t"), "--json").stdout)
    got = {f["check"]: f for f in doc["reports"][0]["findings"]}
    if hint:  # the hint the finding recommends makes it go away
        assert "mpiio-read-modify-write" not in got
    else:
        f = got["mpiio-read-modify-write"]
        assert f["evidence"]["source"] == "records" and f["evidence"]["posix_reads"] >= 2
        # ROMIO read each rank's region (its pieces and the holes between them) back.
        assert f["evidence"]["bytes_read_back"] >= f["evidence"]["mpiio_bytes_written"] - 2 * KiB


def test_stdio_message_names_the_median_rank_only_when_there_are_others():
    f = one(stdio([0.5, 4.0], runtime=10.0))
    assert f.message.startswith("Rank 1 spends 4 s writing through STDIO, 40.0 % of the 10 s "
                                "run (1,000 calls; the median rank spends 2.25 s). At stake:")
    assert f.evidence["median_rank_seconds"] == 2.25 and f.evidence["runtime_seconds"] == 10.0
    alone = one(stdio([4.0], runtime=10.0))
    assert alone.message.startswith(
        "Rank 0 spends 4 s writing through STDIO, 40.0 % of the 10 s run (1,000 calls). At stake:")
