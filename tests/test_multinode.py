"""A job on four "nodes" of this one machine, with clocks that disagree.

Open MPI starts its daemon on a remote host through a launch agent (ssh by
default).  Here the agent runs the daemon locally, in a UTS namespace of its
own (its own host name), and, where the kernel allows, a time namespace with
its own monotonic clock.  A host's wall clock (CLOCK_REALTIME) cannot be set
per namespace: libfaketime, preloaded into the ranks, moves it by the node's
offset.  The host names resolve to addresses on no local interface (else
Open MPI would start the ranks itself) through a hosts file bound over
/etc/hosts in a mount namespace of the job's own.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import test_report_html_browser as browser
from iopilot.model import OP_WRITE
from iopilot.runtime_lib import library_path
from iopilot.sources import load
from iopilot.vocabulary import RECORD_LAYERS
from test_report_html_browser import driver  # noqa: F401  (the browser, a fixture)

NODES = {"node-a": 0.0, "node-b": 0.05, "node-c": -0.05, "node-d": 0.03}  # clock offsets, s
RANKS_PER_NODE = 2
STEPS = 4

PROGRAM = r"""
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* Each step: a barrier, one byte to this rank's own marker file (so its
 * time is the barrier's end), then each rank's 1 MiB block of the shared
 * file in one collective call; then small independent writes. */
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, n = 1 << 20;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char marker[4096];
    snprintf(marker, sizeof marker, "%s/marker.%d", argv[1], rank);
    snprintf(marker + 2048, 2048, "%s/shared.dat", argv[1]);
    MPI_Info info = MPI_INFO_NULL; /* argv[2], argv[3]: cb_nodes, cb_config_list */
    if (argc > 3) {
        MPI_Info_create(&info);
        MPI_Info_set(info, "cb_nodes", argv[2]);
        MPI_Info_set(info, "cb_config_list", argv[3]);
    }
    MPI_File f;
    MPI_File_open(MPI_COMM_WORLD, marker + 2048, MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &f);
    char *b = malloc(n);
    memset(b, 'a' + rank, n);
    int fd = open(marker, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (int s = 0; s < STEPS; s++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (write(fd, b, 1) != 1) return 1;
        MPI_File_write_at_all(f, (MPI_Offset)(s * size + rank) * n, b, n, MPI_BYTE,
                              MPI_STATUS_IGNORE);
    }
    close(fd);
    for (int i = 0; i < 64; i++)
        MPI_File_write_at(f, (MPI_Offset)STEPS * size * n + (rank * 64 + i) * 100, b, 100,
                          MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_close(&f);
    free(b);
    MPI_Finalize();
    return 0;
}
"""


def _faketime() -> str | None:
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    return found[0] if found else None


def _works(*argv: str) -> bool:
    return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0


def _time_namespaces() -> bool:
    return _works("unshare", "--time", "--monotonic", "100", "--fork", "true")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> dict:
    """The program built, the agent, the hosts file; skipped only where this
    kernel refuses the namespaces the simulation needs."""
    for tool in ("unshare", "mount", "mpicc", "mpirun"):
        assert shutil.which(tool), f"{tool} is missing (make setup installs it)"
    fake = _faketime()
    assert fake, "libfaketime is missing (make setup installs the faketime package)"
    if not _works("unshare", "--mount", "--uts", "--fork", "true"):
        pytest.skip("this kernel refuses mount and UTS namespaces to this user")
    d = tmp_path_factory.mktemp("nodes")
    src = d / "job.c"
    src.write_text(PROGRAM.replace("STEPS", str(STEPS)))
    subprocess.run(["mpicc", "-O2", "-o", str(d / "job"), str(src)], check=True, timeout=120)
    hosts = d / "hosts"
    hosts.write_text("127.0.0.1 localhost\n" + "".join(
        f"10.254.0.{i + 1} {h}\n" for i, h in enumerate(NODES)))
    monotonic = "--time --monotonic {mono} --boottime {mono}" if _time_namespaces() else ""
    cases = "\n".join(f"  {h}) off={off:+g}; mono={1000 * (i + 1)};;"
                      for i, (h, off) in enumerate(NODES.items()))  # fmt: skip
    agent = d / "agent.sh"
    agent.write_text(f"""#!/bin/bash
# Open MPI's launch agent: "agent HOST COMMAND...": COMMAND here, as host HOST,
# its wall clock moved by the node's offset.
h=$1; shift
case $h in
{cases}
  *) exit 1;;
esac
exec unshare --uts {monotonic.format(mono="$mono")} --fork \\
  bash -c "hostname $h; export FAKETIME=$off FAKETIME_DONT_FAKE_MONOTONIC=1; exec $*"
""")
    agent.chmod(0o755)
    return {"dir": d, "exe": d / "job", "hosts": hosts, "agent": agent, "fake": fake}


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, OMPI_MCA_mpi_yield_when_idle="1", OMPI_MCA_io="romio321",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")  # fmt: skip
    env.update(extra)
    return env


def _run_four_nodes(c: dict, name: str, *args: str, **extra: str) -> tuple[Path, Path]:
    """``iopilot run`` of the job on the four nodes (``args``: its hints):
    (trace, output dir)."""
    out, trace = c["dir"] / f"{name}-out", c["dir"] / f"{name}-trace"
    out.mkdir()
    hints = c["dir"] / "hints"  # collective buffering even for these contiguous blocks
    hints.write_text("romio_cb_write enable\n")
    host_list = ",".join(f"{h}:{RANKS_PER_NODE}" for h in NODES)
    mpirun = ["mpirun", "--host", host_list, "--mca", "plm_rsh_agent", str(c["agent"]),
              "--mca", "oob_tcp_if_include", "lo", "--mca", "btl", "self,vader,tcp",
              "--mca", "btl_tcp_if_include", "lo",
              # the ranks' wall clocks: libfaketime first, then the runtime
              "env", f"LD_PRELOAD={c['fake']} {library_path()}", str(c["exe"]), str(out), *args]
    run = [sys.executable, "-m", "iopilot", "run", "--trace-only", "--trace-dir", str(trace),
           "--", *mpirun]  # fmt: skip
    script = 'mount --bind "$1" /etc/hosts && shift && exec "$@"'
    done = subprocess.run(["unshare", "--mount", "--fork", "sh", "-c", script, "sh",
                           str(c["hosts"]), *run],
                          env=_env(ROMIO_HINTS=str(hints), **extra), capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return trace, out


@pytest.fixture(scope="module")
def four_nodes(cluster) -> tuple[Path, Path]:
    return _run_four_nodes(cluster, "synced")


def _report(trace: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "iopilot", "report", "--json", "-", str(trace)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode in (0, 1, 2), done.stderr
    return json.loads(done.stdout)["reports"][0]


def _marker_starts(trace: Path, out: Path) -> np.ndarray:
    """Per step, per rank: when its write to its marker file began (s)."""
    t = load(str(trace))
    r = t.records
    ranks = RANKS_PER_NODE * len(NODES)
    starts = np.full((STEPS, ranks), np.nan)
    for rank in range(ranks):
        ids = [k for k, v in t.names.items() if v == str(out / f"marker.{rank}")]
        m = np.isin(r.file_id, np.array(ids, np.uint64)) & (r.op == OP_WRITE) & (r.layer == 0)
        s = np.sort(r.start[m])
        assert len(s) == STEPS, f"rank {rank}: {len(s)} marker writes"
        starts[:, rank] = s
    return starts


def test_the_report_shows_four_nodes_their_ranks_and_one_aggregator_each(four_nodes):
    trace, _ = four_nodes
    job = _report(trace)["job"]
    assert job["hosts"] == 4
    nodes = job["nodes"]
    assert [n["host"] for n in nodes] == list(NODES)
    for i, n in enumerate(nodes):
        assert n["ranks"] == [2 * i, 2 * i + 1]
        # ROMIO gives each host one collective-buffering aggregator
        assert len(n["aggregators"]) == 1 and n["aggregators"][0] in n["ranks"]
        assert n["bytes"] >= STEPS * (1 << 20)  # its aggregator wrote the node's blocks
    text = subprocess.run([sys.executable, "-m", "iopilot", "report", str(trace)],
                          capture_output=True, text=True, timeout=300).stdout  # fmt: skip
    assert "nodes     4: node-a 2 ranks, 1 aggregator; node-b 2 ranks, 1 aggregator" in text
    assert "clocks    4 host(s) put on rank 0's clock" in text


def test_each_host_s_clock_is_measured_to_within_what_the_trace_says(four_nodes):
    """Against the offsets the nodes were given: world rank 0's clock minus
    each host's is minus the host's offset, to within the uncertainty the
    trace states (half the best round trip: a bound, whatever the load), and
    that uncertainty tells the hosts apart (under a fifth of the 50 ms
    between their offsets; well under 1 ms on an idle machine)."""
    trace, _ = four_nodes
    from iopilot.sources.trace_clock import host_clock

    seen = {}
    for f in trace.glob("p*.json"):
        s = json.loads(f.read_text())
        if s["rank"] >= 0 and s.get("clock"):
            seen[s["host"]] = host_clock([tuple(x) for x in s["clock"]])
    assert sorted(seen) == sorted(NODES)
    for host, clock in seen.items():
        assert len({clock.when}) == 1
        assert abs(clock.offset + NODES[host]) <= clock.uncertainty + 1e-6, (host, clock)
        assert clock.uncertainty < 0.01
    c = _report(trace)["job"]["clock"]
    assert c["hosts"] == c["aligned"] == 4
    assert abs(c["largest_shift_s"] - 0.05) <= c["uncertainty_s"] + 1e-6
    assert max(x.uncertainty for x in seen.values()) <= c["uncertainty_s"] < 0.01


def _collectives(trace: Path, out: Path) -> tuple[np.ndarray, np.ndarray]:
    """Per step, per rank: when its collective 1 MiB MPI-IO write began and ended (s)."""
    t = load(str(trace))
    r = t.records
    ids = np.array([k for k, v in t.names.items() if v == str(out / "shared.dat")], np.uint64)
    m = (np.isin(r.file_id, ids) & (r.op == OP_WRITE) & (r.length == 1 << 20)
         & (r.layer == RECORD_LAYERS.index("MPIIO")))  # fmt: skip
    ranks = RANKS_PER_NODE * len(NODES)
    starts, ends = np.full((STEPS, ranks), np.nan), np.full((STEPS, ranks), np.nan)
    for rank in range(ranks):
        k = m & (r.rank == rank)
        order = np.argsort(r.start[k])
        assert k.sum() == STEPS, f"rank {rank}: {k.sum()} collective writes"
        starts[:, rank], ends[:, rank] = r.start[k][order], r.end[k][order]
    return starts, ends


def test_aligned_timelines_keep_the_order_the_ranks_met_in(cluster, four_nodes):
    """A collective write cannot end on any rank before every rank has begun
    it (ROMIO exchanges every rank's offsets first): on the aligned time line
    each step's latest start is before its earliest end, however loaded the
    machine.  With the measurement off (IOPILOT_CLOCK_SYNC=0) the ranks'
    marker writes after each barrier are as far apart as the clocks (100 ms)."""
    trace, out = four_nodes
    clock = _report(trace)["job"]["clock"]
    starts, ends = _collectives(trace, out)
    slack = 2 * clock["uncertainty_s"]  # two hosts' errors, at most
    assert (starts.max(axis=1) <= ends.min(axis=1) + slack).all(), (starts, ends)
    trace0, out0 = _run_four_nodes(cluster, "unsynced", IOPILOT_CLOCK_SYNC="0")
    assert _report(trace0)["job"]["clock"] == {"hosts": 4, "aligned": 0, "largest_shift_s": 0.0,
                                               "uncertainty_s": None}  # fmt: skip
    text = subprocess.run([sys.executable, "-m", "iopilot", "report", str(trace0)],
                          capture_output=True, text=True, timeout=300).stdout  # fmt: skip
    assert "clocks    4 hosts, each process on its own host's clock: not measured" in text
    spread0 = np.ptp(_marker_starts(trace0, out0), axis=1)
    assert spread0.max() > 0.08, spread0


@pytest.mark.parametrize(("cb_nodes", "per_host", "level"), [("4", "*:1", "OK"),
                                                             ("8", "*:2", "WARN")])
def test_the_aggregators_check_counts_the_nodes(cluster, cb_nodes, per_host, level):
    """cb_nodes against the nodes the job ran on: one aggregator per node is
    right; two per node share each node's link (the nodes table shows them)."""
    trace, _ = _run_four_nodes(cluster, f"cb{cb_nodes}", cb_nodes, per_host)
    rep = _report(trace)
    (f,) = [f for f in rep["findings"] if f["check"] == "mpiio-aggregators"]
    assert f["level"] == level and f["evidence"]["nodes"] == 4
    assert [len(n["aggregators"]) for n in rep["job"]["nodes"]] == [int(per_host[-1])] * 4


def test_the_timeline_names_each_rank_s_node(four_nodes, tmp_path):
    trace, _ = four_nodes
    out = tmp_path / "run.json"
    subprocess.run([sys.executable, "-m", "iopilot", "export", "perfetto", str(trace), "-o",
                    str(out), "--format", "json"], check=True, capture_output=True, timeout=300)
    events = json.loads(out.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    hosts = [h for h in NODES for _ in range(RANKS_PER_NODE)]
    assert [names[r + 1] for r in range(len(hosts))] == [f"rank {r} ({h})"
                                                         for r, h in enumerate(hosts)]


# Checks that compare durations (phases, stragglers, time shares): on one
# machine running eight ranks on two cores they follow the scheduler, not
# the program, so two runs need not agree on them.  For the same reason the
# others are compared by the problems they found (HIGH or WARN), not by
# which of the two: that follows the cost's share of the I/O time.
TIMED = {"io-phases", "phase-stragglers", "posix-shared-time-imbalance", "mpiio-time-above-posix",
         "posix-metadata-time", "posix-metadata-share", "unbalanced-ranks", "stdio-time"}


def test_the_four_node_run_has_the_findings_of_the_one_node_run(cluster, four_nodes):
    trace, _ = four_nodes
    out, one = cluster["dir"] / "one-out", cluster["dir"] / "one-trace"
    out.mkdir()
    hints = cluster["dir"] / "hints"
    done = subprocess.run([sys.executable, "-m", "iopilot", "run", "--trace-only", "--trace-dir",
                           str(one), "--", "mpirun", "--oversubscribe", "-np",
                           str(RANKS_PER_NODE * len(NODES)), "--mca", "btl", "self,vader",
                           str(cluster["exe"]), str(out)],
                          env=_env(ROMIO_HINTS=str(hints)), capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    single = _report(one)
    assert single["job"]["nodes"] is None and single["job"]["clock"] is None

    def findings(rep: dict) -> set[str]:
        return {f["check"] for f in rep["findings"]
                if f["check"] not in TIMED and f["level"] in ("HIGH", "WARN")}  # fmt: skip

    many = findings(_report(trace))
    assert many == findings(single)
    assert "posix-misaligned-file" in many  # the comparison has something to compare


# ---- the reader's side, on summaries written here ----

def test_a_host_s_clock_follows_its_drift_between_the_two_samples():
    from iopilot.sources.trace_clock import host_clock

    c = host_clock([(1000.0, 0.010, 1e-5), (1100.0, 0.012, 3e-5)])
    assert c.drift == pytest.approx(2e-5)
    assert c.at(1050.0) == pytest.approx(0.011)
    assert c.uncertainty == pytest.approx(3e-5)  # the worse sample's
    one = host_clock([(1000.0, -0.05, 2e-6)])
    assert one.drift == 0 and one.at(5000.0) == -0.05


def _summary_with(tmp_path: Path, clock) -> Path:
    """A trace of one real process, its summary's clock replaced."""
    trace = tmp_path / "t"
    subprocess.run([sys.executable, "-m", "iopilot", "run", "--trace-only", "--trace-dir",
                    str(trace), "--", "true"], check=True, capture_output=True, timeout=120)
    (f,) = [p for p in trace.glob("p*.json")]
    s = json.loads(f.read_text())
    s["clock"] = clock
    f.write_text(json.dumps(s))
    return trace


@pytest.mark.parametrize("bad", [[[1.0, 2.0]], [[1.0, 0.1, -1e-6]], "soon", [[1.0, "x", 0.0]],
                                 [[1.0, 0.1, True]]])
def test_a_damaged_clock_is_named_in_one_line(tmp_path, bad):
    trace = _summary_with(tmp_path, bad)
    done = subprocess.run([sys.executable, "-m", "iopilot", "report", str(trace)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "'clock'" in done.stderr and ".json" in done.stderr


def test_a_process_moves_by_its_host_s_offset_at_the_middle_of_its_life(tmp_path):
    from iopilot.sources.trace_procs import read_summary

    trace = _summary_with(tmp_path, [])
    (f,) = list(trace.glob("p*.json"))
    s = read_summary(f)
    t0, t_end = s["t0"], s["t_end"]
    s_raw = json.loads(f.read_text())
    # drift 1e-3 s/s: at the middle of its life the offset is 0.02 + 1e-3 * t_end / 2
    s_raw["clock"] = [[t0, 0.02, 1e-6], [t0 + 10.0, 0.03, 1e-6]]
    f.write_text(json.dumps(s_raw))
    t = load(str(trace))
    c = t.job.clock
    assert c is not None and c.hosts == c.aligned == 1
    assert c.largest_shift == pytest.approx(0.02 + 1e-3 * t_end / 2, abs=1e-9)
    # what is left: the samples' uncertainty and the drift over half its life
    assert c.uncertainty == pytest.approx(1e-6 + 1e-3 * t_end / 2, abs=1e-9)


def test_the_terminal_lines_count_aggregators_and_unmeasured_hosts():
    from iopilot.report.nodes import clock_line, nodes_line

    line = nodes_line([{"host": "a", "ranks": [0, 1], "aggregators": [0, 1]},
                       {"host": "b", "ranks": [2], "aggregators": []},
                       {"host": "c", "ranks": [3, 4], "aggregators": None}])
    assert line == "3: a 2 ranks, 2 aggregators; b rank 2, 0 aggregators; c 2 ranks"
    c = {"hosts": 3, "aligned": 2, "largest_shift_s": 0.0123, "uncertainty_s": 4e-5}
    assert clock_line(c) == ("2 host(s) put on rank 0's clock (moved by up to 12.3 ms); "
                             "timelines within 0.04 ms of each other; "
                             "1 host(s) not measured, left on their own clocks")
    assert "not measured" not in clock_line(dict(c, aligned=3))


@pytest.mark.skipif(not (browser.CHROMIUM.exists() and browser.CHROMEDRIVER.exists()),
                    reason="chromium or chromedriver absent")
def test_the_page_shows_the_nodes_and_the_clocks(four_nodes, tmp_path, driver):  # noqa: F811
    """The HTML report's summary: a Nodes table (host, ranks, aggregators)
    and the clocks' line, drawn by a real browser."""
    from selenium.webdriver.common.by import By

    trace, _ = four_nodes
    page = tmp_path / "nodes.html"
    done = subprocess.run([sys.executable, "-m", "iopilot", "report", "--html", str(page),
                           str(trace)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert page.exists(), done.stderr
    driver.get_log("browser")
    driver.get(page.as_uri() + "#view=summary")
    browser._wait_drawn(driver, "summary")
    sec = driver.find_element(By.ID, "view-summary")
    cards = {c.find_element(By.TAG_NAME, "h2").text: c
             for c in sec.find_elements(By.CSS_SELECTOR, ".card")
             if c.find_elements(By.TAG_NAME, "h2")}  # fmt: skip
    rows = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            for tr in cards["Nodes"].find_elements(By.CSS_SELECTOR, "tbody tr")]  # fmt: skip
    assert [r[:2] for r in rows] == [[h, f"{2 * i}, {2 * i + 1}"]
                                     for i, h in enumerate(NODES)]  # fmt: skip
    assert all(r[2] in r[1].split(", ") for r in rows)  # one aggregator, one of its ranks
    assert "4 host(s) put on rank 0's clock" in cards["Job"].text
    browser._no_console_errors(driver)


def test_aggregators_are_counted_per_file_of_collective_calls():
    """File 1 (collective calls): rank 1 wrote 200 POSIX bytes for its own
    100, an aggregator; rank 0 wrote none of its 100, not one.  File 2 (split
    collectives): rank 2 wrote just its own 50 (equal: an aggregator) and rank
    0 wrote 49 without an MPI-IO call there (an aggregator).  File 3 had only
    independent calls: rank 3 is no aggregator."""
    from iopilot.model import Records
    from iopilot.report.nodes import aggregators, nodes_summary
    from kit import counters, records, trace

    m = counters("MPIIO", [{"file": 1, "rank": -1, "MPIIO_COLL_WRITES": 4},
                           {"file": 2, "rank": -1, "MPIIO_SPLIT_WRITES": 2},
                           {"file": 3, "rank": -1, "MPIIO_INDEP_WRITES": 9}])  # fmt: skip
    mp = records([(0, "w", 1, 0, 100, 0, 1), (1, "w", 1, 100, 100, 0, 1),
                  (2, "w", 2, 0, 50, 0, 1), (3, "w", 3, 0, 10, 0, 1)], "MPIIO")
    px = records([(1, "w", 1, 0, 200, 0, 1), (2, "w", 2, 0, 50, 0, 1),
                  (0, "w", 2, 0, 49, 0, 1), (3, "w", 3, 0, 10, 0, 1)])
    recs = Records(*(np.concatenate([getattr(mp, f), getattr(px, f)])
                     for f in ("rank", "layer", "op", "file_id", "offset", "length", "start",
                               "end")))  # fmt: skip
    hosts = {0: "a", 1: "a", 2: "b", 3: "b"}
    t = trace(m, recs=recs, nprocs=4, hosts=hosts)
    assert aggregators(t) == {0, 1, 2}
    nodes = nodes_summary(t)
    assert [(n["host"], n["ranks"], n["aggregators"]) for n in nodes] == [
        ("a", [0, 1], [0, 1]), ("b", [2, 3], [2])]
    assert nodes_summary(trace(m, recs=recs, nprocs=4, hosts={k: "a" for k in hosts})) is None
    assert aggregators(trace(m, nprocs=4, hosts=hosts)) is None  # no records: unknown
