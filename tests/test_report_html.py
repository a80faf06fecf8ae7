"""The HTML report: self-contained pages whose embedded numbers add up."""

from __future__ import annotations

import base64
import json
import re
import time
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from iopilot.checks import diagnose
from iopilot.checks import thresholds as th
from iopilot.checks.engine import Diagnosis, summarize
from iopilot.demo import example_dir
from iopilot.model import RECORD_LAYERS, SIZE_BIN_UPPER, Job, ModuleInfo, Records, Striping, Trace
from iopilot.report.html import SAMPLE_CAP, render_html, write_html
from iopilot.report.views import context as html_context
from iopilot.sources import load
from kit import SHARED, records, shared_logs, striping, unread_view_keys

EXAMPLES = ["dxt.darshan", "ior_hdf5_example.darshan", "example.darshan", "sample-badost.darshan"]
SHARED_LOGS = [
    "jlbez_8a_benchmark_write_parallel*.darshan",
    "partial_data_dxt.darshan",
    "nonmpi_dxt_anonymized.darshan",
    "e3sm_io_heatmap_only.darshan",
]
MAX_PAGE = 15 * 1024**2
_DT = {"f8": "<f8", "f4": "<f4", "i4": "<i4", "i2": "<i2", "u4": "<u4", "u1": "u1"}
_DATA = re.compile(r'<script id="iopilot-data" type="application/json">(.*?)</script>', re.S)


# ---------------------------------------------------------------------------
# Reading a page back, independently of the writer
# ---------------------------------------------------------------------------


def _decode(o):
    if isinstance(o, dict):
        if "$b64" in o:
            return np.frombuffer(base64.b64decode(o["$b64"]), _DT[o["dtype"]])
        return {k: _decode(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_decode(v) for v in o]
    return o


def page_doc(page: str) -> dict:
    m = _DATA.search(page)
    assert m, "no embedded data"
    return _decode(json.loads(m.group(1)))


class _Tags(HTMLParser):
    """Every start tag with its attributes (script bodies are not parsed as HTML)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)


def assert_self_contained(page: str) -> None:
    p = _Tags()
    p.feed(page)
    scripts = [a for t, a in p.tags if t == "script"]
    assert len(scripts) == 3  # plotly.js, the data, the page script: all inline
    assert not any("src" in a for a in scripts)
    assert not [t for t, _ in p.tags if t in ("link", "iframe", "img", "embed", "object")]
    loads = [(t, k, v) for t, a in p.tags for k, v in a.items() if k in ("src", "href") and v]
    assert not loads, loads
    css = "".join(p.styles)
    assert css and "url(" not in css and "@import" not in css


# ---------------------------------------------------------------------------
# Logs
# ---------------------------------------------------------------------------


def _logs() -> list:
    out = [pytest.param(example_dir() / n, id=n) for n in EXAMPLES]
    for pattern in SHARED_LOGS:
        hits = sorted(SHARED.glob(pattern)) if SHARED.exists() else []
        marks = pytest.mark.skipif(not hits, reason=f"{SHARED} absent")
        path = hits[0] if hits else SHARED / pattern
        out.append(pytest.param(path, id=pattern.split("*")[0], marks=marks))
    return out


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Diagnosis, written page and its data, once per log."""
    cache: dict[Path, tuple] = {}
    out_dir = tmp_path_factory.mktemp("html")

    def get(path: Path):
        if path not in cache:
            d = diagnose(load(str(path)))
            t0 = time.perf_counter()
            info = write_html(d, out_dir / (path.stem + ".html"), phase_gap=None)
            took = time.perf_counter() - t0
            print(f"{path.name}: {info['bytes'] / 1e6:.2f} MB in {took:.2f} s, "
                  f"{info['records']:,} records, {info['records_drawn']:,} drawn")  # fmt: skip
            page = Path(info["path"]).read_text(encoding="utf-8")
            cache[path] = (d, info, page, page_doc(page))
        return cache[path]

    return get


@pytest.mark.parametrize("path", _logs())
def test_page_is_self_contained(pages, path):
    d, info, page, doc = pages(path)
    assert_self_contained(page)
    assert info["bytes"] == len(page.encode("utf-8")) < MAX_PAGE
    assert doc["schema"] == "iopilot-html"
    assert doc["report"]["source"] == d.trace.source
    assert len(doc["report"]["findings"]) == len(d.findings)
    assert doc["report"]["warnings"] == d.warnings


@pytest.mark.parametrize("path", _logs())
def test_every_number_a_view_carries_is_read_by_its_script(pages, path):
    """The page carries only what it draws: each key of a view's data is
    read by the page's scripts (a key renamed on one side only is a view
    that draws nothing, or data the page carries for nothing)."""
    _d, _info, _page, doc = pages(path)
    assert doc["views"]
    assert unread_view_keys(doc["views"]) == {}


def test_a_key_the_scripts_do_not_read_is_found():
    assert unread_view_keys({"fs": {"ost": {"rb": 1, "XXrbXX": 2, "POSIX": {"mt": 0}}},
                             "phases": [{"in_phases": 3}]}) == \
        {"XXrbXX": "fs.ost", "in_phases": "phases[]"}  # fmt: skip


@pytest.mark.parametrize("path", _logs())
def test_records_sample_and_bins_add_up(pages, path):
    d, info, _, doc = pages(path)
    r = d.trace.records
    rec = doc["records"]
    assert info["records"] == len(r)
    if not len(r):
        assert rec is None and doc["views"].get("phases") is None
        return
    assert rec["total"] == len(r)
    assert info["sampled"] == rec["sampled"] == (len(r) > SAMPLE_CAP)
    assert rec["drawn"] == info["records_drawn"] == len(rec["sample"]["rank"])
    assert rec["drawn"] <= SAMPLE_CAP
    if not rec["sampled"]:
        assert rec["drawn"] == len(r)
        np.testing.assert_array_equal(np.sort(rec["sample"]["start"]), np.sort(r.start))
    counts = np.bincount(r.layer, minlength=len(RECORD_LAYERS))
    assert rec["per_layer"] == counts.tolist()
    assert sum(rec["drawn_per_layer"]) == rec["drawn"]
    levels = [(n, b) for n, base in rec["bins"].items() for b in (base, base["finer"])]
    for name, b in levels:
        sel = r.layer == RECORD_LAYERS.index(name)
        length = r.length[sel].clip(0)
        # Bytes and operations are exact sums; busy time is float32 per cell.
        assert b["rb"].sum() + b["wb"].sum() == length.sum()
        assert b["rb"].sum() == length[r.op[sel] == 0].sum()
        assert int(b["rn"].sum() + b["wn"].sum()) == sel.sum() == b["records"]
        busy = np.clip(r.end[sel] - r.start[sel], 0, None).sum()
        assert b["rt"].astype(np.float64).sum() + b["wt"].sum() == pytest.approx(busy, rel=1e-4)
    if rec["sampled"]:
        assert rec["bins"], "a sampled trace must come with exact bins"
    # Every operation is counted in the per-file table behind the file selector.
    assert rec["file_counts"]["n"].sum() == len(r)
    assert rec["file_counts"]["drawn"].sum() == rec["drawn"]


@pytest.mark.parametrize("path", _logs())
def test_totals_match_the_counters(pages, path):
    d, _, _, doc = pages(path)
    t = d.trace
    by_layer = {s.layer: s for s in d.layers}
    totals = {row["layer"]: row for row in doc["views"]["fs"]["file_table"]["totals"]}
    for layer, c in t.counters.items():
        if layer not in totals:
            continue
        s = by_layer[{"MPIIO": "MPI-IO"}.get(layer, layer)]
        assert totals[layer]["bytes_read"] == s.bytes_read
        assert totals[layer]["bytes_written"] == s.bytes_written
        ranks = doc["views"]["fs"]["ranks"]["counters"][layer]
        per_rank = ranks["rb"].sum() + ranks["wb"].sum()
        assert per_rank + ranks["shared_bytes"] == pytest.approx(s.bytes_read + s.bytes_written)
        if (c.rank < 0).any():
            assert ranks["shared_files"] > 0
    # The overview's bytes per file system add up to the POSIX and STDIO counters.
    fs_layers = [n for n in ("POSIX", "STDIO") if n in t.counters]
    if fs_layers:
        mounts = doc["views"]["summary"]["overview"]["filesystems"]
        want = sum(float(t.counters[n][f"{n}_BYTES_READ"].sum())
                   + float(t.counters[n][f"{n}_BYTES_WRITTEN"].sum()) for n in fs_layers)
        assert sum(m["bytes"] for m in mounts) == pytest.approx(want)
    # Size histograms: exact counts from counters, else from every record.
    for layer, h in doc["views"]["sizes"].items():
        if h["source"] == "counters":
            c = t.counters[layer]
            pref = "POSIX_SIZE_READ_" if layer == "POSIX" else f"{layer}_SIZE_READ_AGG_"
            assert sum(h["read"]) == sum(int(c[n].sum()) for n in c.int_names
                                         if n.startswith(pref))  # fmt: skip
        else:
            sel = t.records.layer == RECORD_LAYERS.index(layer)
            assert sum(h["read"]) + sum(h["write"]) == sel.sum()


@pytest.mark.parametrize("path", _logs())
def test_phases_reuse_the_checks_helper(pages, path):
    d, _, _, doc = pages(path)
    if doc["views"].get("phases") is None:
        return
    r = d.trace.records
    for name, entry in doc["views"]["phases"]["layers"].items():
        n = int((r.layer == RECORD_LAYERS.index(name)).sum())
        for opt in entry["options"]:
            assert opt["total"] >= 1 and opt["shown"] == len(opt["cols"]["start"])
            if opt["shown"] == opt["total"]:
                assert opt["cols"]["ops"].sum() == n
            assert (opt["cols"]["slowest_time"] >= opt["cols"]["fastest_time"]).all()
    primary = doc["views"]["phases"]["layers"][doc["views"]["phases"]["primary"]]
    assert primary["options"][0]["label"].endswith("(default)")


def test_counter_only_page_has_its_views(pages):
    d, _, _, doc = pages(example_dir() / "example.darshan")
    assert doc["records"] is None
    assert set(doc["views"].get("sizes")) >= {"POSIX", "MPIIO"}
    assert all(h["source"] == "counters" for h in doc["views"]["sizes"].values())
    assert doc["views"]["fs"]["ranks"]["counters"]["POSIX"]["shared_files"] == 1
    ost = doc["views"]["fs"]["ost"]
    assert ost is not None and ost["files_estimated"] == 1
    # The 2 TiB written are spread over the file's 24 OSTs, all of it.
    ost = doc["views"]["fs"]["ost"]
    written = d.trace.counters["POSIX"].total("POSIX_BYTES_WRITTEN")
    assert ost["wb"].sum() == pytest.approx(written)
    assert len(np.unique(ost["ost"])) == 24
    assert doc["report"]["io_time"]["share"] is not None


def test_lustre_dxt_maps_records_to_osts(pages):
    d, _, _, doc = pages(example_dir() / "ior_hdf5_example.darshan")
    ost = doc["views"]["fs"]["ost"]
    assert ost["files_exact"] == 1 and ost["files_estimated"] == 0
    r = d.trace.records
    fs = r.layer == RECORD_LAYERS.index("POSIX")
    assert ost["rb"].sum() + ost["wb"].sum() == r.length[fs].clip(0).sum()
    assert set(np.unique(ost["ost"]).tolist()) == {106}  # stripe count 1 on OST 106


def test_many_files_one_page(pages):
    path = SHARED / "nonmpi_dxt_anonymized.darshan"
    if not path.exists():
        pytest.skip(f"{SHARED} absent")
    d, _, _, doc = pages(path)
    ids = np.unique(d.trace.records.file_id)
    listed = np.unique(doc["records"]["file_counts"]["file"])
    assert len(listed) == len(ids) > 50  # every traced file is in the selector
    assert (listed >= 0).all()
    assert len(doc["files"]["names"]) >= len(ids)


# ---------------------------------------------------------------------------
# Small hand-made traces: exact OST mapping, bins, escaping, options
# ---------------------------------------------------------------------------


def _trace(recs: Records, lustre: Striping | None = None, names: dict | None = None,
           nprocs: int = 2) -> Trace:  # fmt: skip
    names = names or {int(i): f"/scratch/f{int(i)}" for i in np.unique(recs.file_id)}
    job = Job(nprocs=nprocs, runtime=float(recs.end.max()) + 1 if len(recs) else 1.0,
              mounts=[("/scratch", "lustre")])  # fmt: skip
    return Trace("hand-made", job, names, {}, recs, lustre, [ModuleInfo("DXT_POSIX")])


def _diag(t: Trace) -> Diagnosis:
    return Diagnosis(t, [], summarize(t), th.defaults())


def _brute_osts(recs: Records, stripe: int, osts: list[int]) -> dict[int, list[int]]:
    """Bytes and requests per OST by walking each request stripe by stripe."""
    out: dict[int, list[int]] = {}
    for off, ln, op in zip(recs.offset, recs.length, recs.op, strict=True):
        pos, end, seen = int(off), int(off + ln), set()
        while pos < end:
            k = pos // stripe
            part = min(end, (k + 1) * stripe) - pos
            o = osts[k % len(osts)]
            e = out.setdefault(o, [0, 0, 0, 0])
            e[int(op)] += part
            if o not in seen:
                e[2 + int(op)] += 1
                seen.add(o)
            pos += part
    return out


def test_ost_mapping_is_exact_across_stripes():
    stripe, osts = 1000, [7, 3, 9]
    rng = np.random.default_rng(3)
    rows = []
    for i in range(400):
        off = int(rng.integers(0, 50_000))
        ln = int(rng.choice([1, 10, 999, 1000, 1001, 2500, 3000, 7777, 30_000]))
        rows.append((i % 2, "rw"[i % 3 == 0], 5, off, ln, i * 0.01, i * 0.01 + 0.005))
    recs = records(rows)
    t = _trace(recs, striping([(5, stripe, osts)]))
    doc = page_doc(render_html(_diag(t)))
    got = {}
    ost = doc["views"]["fs"]["ost"]
    for j, o in enumerate(ost["ost"]):
        got[int(o)] = [ost["rb"][j], ost["wb"][j], ost["rr"][j], ost["wr"][j]]
    want = _brute_osts(recs, stripe, osts)
    assert got == {k: [float(x) for x in v] for k, v in want.items()}
    # Each request's time is shared out by bytes: the totals are the durations.
    dur = recs.end - recs.start
    assert ost["wt"].sum() == pytest.approx(dur[recs.op == 1].sum())
    assert ost["rt"].sum() == pytest.approx(dur[recs.op == 0].sum())


def test_binned_timeline_sums_long_operations_exactly(monkeypatch):
    monkeypatch.setattr(html_context, "SAMPLE_CAP", 20)
    rows = [(r, "wr"[i % 2], 1, i * 10, 100 + i, 0.5 * i, 0.5 * i + (3.0 if i % 7 == 0 else 0.01))
            for i in range(60) for r in (0, 1)]  # fmt: skip
    recs = records(rows)
    t = _trace(recs)
    d = _diag(t)
    doc = page_doc(render_html(d))
    rec = doc["records"]
    assert rec["sampled"] and rec["drawn"] <= 20
    b = rec["bins"]["POSIX"]
    assert b["rows"] == 2
    assert b["rb"].sum() + b["wb"].sum() == recs.length.sum()
    busy = (recs.end - recs.start).sum()
    assert b["rt"].astype(float).sum() + b["wt"].sum() == pytest.approx(busy, rel=1e-5)
    # Cell by cell, at both levels: each operation's overlap with each bin.
    assert b["finer"]["rows"] == 1 and b["finer"]["per_row"] == 8  # two ranks in one row
    assert b["finer"]["cols"] > b["cols"]
    for g in (b, b["finer"]):
        cells = g["rows"] * g["cols"]
        want = np.zeros((2, cells))
        lo = g["t0"] + np.arange(g["cols"]) * g["width"]
        for rank, op, s, e in zip(recs.rank, recs.op, recs.start, recs.end, strict=True):
            row = rank // g["per_row"]
            want[op, row * g["cols"] : (row + 1) * g["cols"]] += np.clip(
                np.minimum(e, lo + g["width"]) - np.maximum(s, lo), 0, None)
        got = np.zeros((2, cells))
        got[0, g["idx"]], got[1, g["idx"]] = g["rt"], g["wt"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _burst_trace() -> Trace:
    """1000 s of sparse writes on 4 ranks, and a burst of 40 writes in 0.2 s at 500 s."""
    rows = [(r, "w", 1, 0, 4096, float(t), t + 0.01) for t in range(0, 1000, 5) for r in range(4)]
    rows += [(k % 4, "w", 1, 0, 4096, 500.0 + 0.005 * k, 500.001 + 0.005 * k) for k in range(40)]
    return _trace(records(sorted(rows, key=lambda x: (x[0], x[5]))), nprocs=4)


def test_zoom_level_shows_a_short_burst_in_distinct_bins(monkeypatch):
    monkeypatch.setattr(html_context, "SAMPLE_CAP", 100)  # sampled: the timeline is binned
    doc = page_doc(render_html(_diag(_burst_trace())))
    b = doc["records"]["bins"]["POSIX"]
    f = b["finer"]
    # Both levels fit the layer's share of the cell budget.
    assert b["rows"] * b["cols"] + f["rows"] * f["cols"] <= html_context.BIN_CELLS

    def burst_columns(g: dict) -> set[int]:
        col = g["idx"] % g["cols"]
        mid = g["t0"] + (col + 0.5) * g["width"]
        return {int(c) for c in col[(mid > 499.9) & (mid < 500.3)]}

    # At full range the burst is one bin per row; the finer level splits it.
    assert b["width"] > 0.2 and len(burst_columns(b)) <= 2
    assert f["width"] < 0.05 and len(burst_columns(f)) >= 4
    assert f["wn"].sum() == b["wn"].sum() == 4 * 200 + 40


def test_hostile_file_names_stay_data():
    name = "/scratch/</script><script>alert(1)</script>&amp;"
    recs = records([(0, "w", 1, 0, 10, 0.0, 0.1), (1, "r", 1, 0, 10, 0.2, 0.3)])
    page = render_html(_diag(_trace(recs, names={1: name})))
    assert_self_contained(page)
    assert page_doc(page)["files"]["names"] == [name]


def test_phase_gap_choice_and_write_html(tmp_path):
    rows = [(r, "w", 1, 100 * i, 100, burst * 10.0 + i * 0.01, burst * 10.0 + i * 0.01 + 0.005)
            for burst in range(4) for i in range(20) for r in (0, 1)]  # fmt: skip
    d = _diag(_trace(records(rows)))
    info = write_html(d, tmp_path / "p.html", phase_gap=2.5)
    assert set(info) == {"path", "bytes", "records", "records_drawn", "sampled"}
    assert info["bytes"] == (tmp_path / "p.html").stat().st_size
    assert (info["records"], info["records_drawn"], info["sampled"]) == (160, 160, False)
    doc = page_doc((tmp_path / "p.html").read_text(encoding="utf-8"))
    opts = doc["views"]["phases"]["layers"]["POSIX"]["options"]
    assert opts[0]["gap"] == 2.5 and opts[0]["label"] == "2.5 s (default)"
    assert opts[0]["total"] == 4
    gaps = {o["gap"] for o in opts}
    assert 0.001 in gaps and 1.0 in gaps and 60.0 not in gaps  # only gaps below the span
    # Bursts 10 s apart with 9.8 s of idle time between them.
    total = {o["gap"]: o["total"] for o in opts}
    assert total[1.0] == 4 and total[10.0] == 1


def _synthetic(n: int, ranks: int = 64, files: int = 8) -> Trace:
    rng = np.random.default_rng(1)
    rank = rng.integers(0, ranks, n).astype(np.int32)
    layer = (rng.random(n) < 0.3).astype(np.uint8)  # 30 % MPI-IO above the POSIX calls
    op = (rng.random(n) < 0.6).astype(np.uint8)
    fid = (rng.integers(0, files, n) + 100).astype(np.uint64)
    length = rng.choice([4096, 65536, 1 << 20, 4 << 20], n).astype(np.int64)
    offset = rng.integers(0, 1 << 22, n).astype(np.int64) * 4096
    start = rng.integers(0, 10, n) * 25.0 + rng.random(n) * 5.0  # 10 bursts
    end = start + rng.exponential(2e-3, n)
    order = np.lexsort((start, rank, fid))  # grouped per file and rank, as DXT stores them
    recs = Records(rank[order], layer[order], op[order], fid[order], offset[order],
                   length[order], start[order], end[order])  # fmt: skip
    ids = np.arange(100, 100 + files, dtype=np.uint64)
    osts = rng.integers(0, 32, files * 4)  # four stripes of 1 MiB per file
    lustre = Striping(ids, np.full(files, 1 << 20), np.full(files, 4), np.arange(files) * 4, osts)
    t = _trace(recs, lustre, nprocs=ranks)
    t.job.runtime = 260.0
    return t


def test_one_million_records_page(tmp_path):
    t = _synthetic(1_000_000)
    d = _diag(t)
    t0 = time.perf_counter()
    info = write_html(d, tmp_path / "big.html")
    took = time.perf_counter() - t0
    print(f"1 M records: {info['bytes'] / 1e6:.2f} MB in {took:.2f} s")
    assert info["bytes"] < MAX_PAGE
    assert info["sampled"] and info["records"] == 1_000_000
    assert 0.9 * SAMPLE_CAP <= info["records_drawn"] <= SAMPLE_CAP
    page = (tmp_path / "big.html").read_text(encoding="utf-8")
    assert_self_contained(page)
    doc = page_doc(page)
    r = t.records
    for name in ("POSIX", "MPIIO"):
        b = doc["records"]["bins"][name]
        sel = r.layer == RECORD_LAYERS.index(name)
        assert b["rb"].sum() + b["wb"].sum() == r.length[sel].sum()
        assert b["rows"] == 64
        # Each layer and each file is represented in the sample.
        assert doc["records"]["drawn_per_layer"][RECORD_LAYERS.index(name)] > 0.2 * SAMPLE_CAP
    fc = doc["records"]["file_counts"]
    assert (fc["drawn"] > 0).all()
    # OST bytes: every POSIX byte lands on exactly one OST.
    fs = r.layer == RECORD_LAYERS.index("POSIX")
    ost = doc["views"]["fs"]["ost"]
    assert ost["rb"].sum() + ost["wb"].sum() == r.length[fs].sum()
    sizes = doc["views"]["sizes"]["POSIX"]
    assert sizes["source"] == "records"
    assert sum(sizes["read"]) + sum(sizes["write"]) == fs.sum()
    # Darshan's bins: a 1 MiB request is in 100K_1M (the upper bound is inclusive).
    assert SIZE_BIN_UPPER[4] == 1 << 20
    assert sizes["write"][4] == int((fs & (r.op == 1) & (r.length == 1 << 20)).sum())


@pytest.mark.parametrize("name", shared_logs("e3sm_io_heatmap_only.darshan"))
def test_ost_view_counts_files_not_per_rank_layout_records(pages, name):
    d, _, _, doc = pages(SHARED / name)
    files = np.unique(d.trace.counters["POSIX"].file_id)
    lustre = d.trace.lustre
    # Darshan wrote 113 LUSTRE records (one per rank and file) for 3 files.
    assert len(lustre) == len(np.unique(lustre.file_id)) == 3
    assert set(lustre.file_id.tolist()) <= set(files.tolist())
    assert doc["views"]["fs"]["ost"]["lustre_files"] == 3


def test_ost_view_takes_mpiio_bytes_of_files_without_a_posix_record():
    from kit import counters

    job = Job(nprocs=2, runtime=10.0, mounts=[("/scratch", "lustre")])
    posix = counters("POSIX", [{"file": 5, "rank": -1, "POSIX_BYTES_WRITTEN": 3000,
                                "POSIX_WRITES": 3, "POSIX_MAX_BYTE_WRITTEN": 2999}])
    mpiio = counters("MPIIO", [{"file": 5, "rank": -1, "MPIIO_BYTES_WRITTEN": 3000,
                                "MPIIO_COLL_WRITES": 2},
                               {"file": 6, "rank": -1, "MPIIO_BYTES_WRITTEN": 4000,
                                "MPIIO_INDEP_WRITES": 4}])  # fmt: skip
    names = {5: "/scratch/a", 6: "/scratch/b"}
    t = Trace("hand-made", job, names, {"POSIX": posix, "MPIIO": mpiio}, Records.empty(),
              striping([(5, 1000, [1, 2]), (6, 1000, [3])]), [ModuleInfo("POSIX")])
    ost = page_doc(render_html(_diag(t)))["views"]["fs"]["ost"]
    per = {int(o): ost["wb"][j] for j, o in enumerate(ost["ost"])}
    # File 5 counts once (its POSIX bytes), file 6 from MPI-IO: it has no POSIX record.
    assert per[1] + per[2] == pytest.approx(3000) and per[3] == pytest.approx(4000)
    assert "1 of them from MPI-IO counters" in ost["how"]


def test_the_sample_keeps_the_largest_and_slowest_operations(monkeypatch):
    monkeypatch.setattr(html_context, "SAMPLE_CAP", 3000)  # keeps the 300 largest and slowest
    monkeypatch.setattr(html_context, "CHUNK", 4096)  # the extremes come from many chunks
    t = _synthetic(60_000)
    r = t.records
    rng = np.random.default_rng(5)
    big = rng.choice(len(r), 250, replace=False)
    slow = rng.choice(np.setdiff1d(np.arange(len(r)), big), 250, replace=False)
    r.length[big] = 1 << 30
    r.end[slow] = r.start[slow] + 100.0
    doc = page_doc(render_html(_diag(t)))
    s = doc["records"]["sample"]
    assert doc["records"]["sampled"] and s["n"] <= 3000
    assert int((s["length"] == 1 << 30).sum()) == 250  # every one of them, not a tenth
    assert int((s["dur"] >= 99.0).sum()) == 250
    assert "the 300 largest and the 300 slowest" in " ".join(doc["notes"])


@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_top_k_over_chunks(chunk):
    from iopilot.report.views.common import Top

    values = np.random.default_rng(chunk).random(997)
    top = Top(25)
    for a in range(0, len(values), chunk):
        top.add(values[a : a + chunk], a)
    assert sorted(top.index.tolist()) == sorted(np.argsort(values)[-25:].tolist())


def test_each_finding_names_the_view_that_shows_it(pages):
    from iopilot.checks import REGISTRY
    from iopilot.report.html import _VIEW_OF_CHECK, _finding_view

    assert set(_VIEW_OF_CHECK) <= set(REGISTRY)  # no stale check ids
    d, _, _, doc = pages(example_dir() / "ior_hdf5_example.darshan")
    views = doc["finding_views"]
    assert len(views) == len(d.findings) > 0
    for f, v in zip(d.findings, views, strict=True):
        assert v == _finding_view(f.check, f.layer, True, doc["views"].get("phases") is not None)
    assert _finding_view("io-phases", "PHASES", True, True) == "phases"
    assert _finding_view("io-phases", "PHASES", True, False) == "fs"  # no phases view
    assert _finding_view("overlapping-writes", "POSIX", True, True) == "spatiality"
    assert _finding_view("overlapping-writes", "POSIX", False, False) == "fs"
    assert _finding_view("rank-zero-heavy", "RANKS", False, False) == "fs"
    assert _finding_view("posix-small-writes", "POSIX", False, False) == "sizes"


def test_files_by_category():
    from iopilot.report.views.summary import file_categories
    from kit import counters

    p = counters("POSIX", [
        {"file": 1, "rank": -1, "POSIX_BYTES_READ": 100},                   # shared, read only
        {"file": 2, "rank": 0, "POSIX_BYTES_WRITTEN": 50},                   # written by 2 ranks
        {"file": 2, "rank": 1, "POSIX_BYTES_WRITTEN": 30},
        {"file": 3, "rank": 0, "POSIX_BYTES_READ": 7, "POSIX_BYTES_WRITTEN": 9},
        {"file": 4, "rank": 1, "POSIX_OPENS": 2},                            # no data
    ])  # fmt: skip
    job = Job(nprocs=2, runtime=1.0)
    t = Trace("hand-made", job, {}, {"POSIX": p}, Records.empty())
    (row,) = file_categories(t)
    assert row["layer"] == "POSIX" and row["files"] == 4
    assert (row["read_only"], row["write_only"], row["read_write"], row["no_data"]) == (1, 1, 1, 1)
    got = (row["read_only_bytes"], row["write_only_bytes"], row["read_write_bytes"],
           row["no_data_bytes"])  # fmt: skip
    assert got == (100, 80, 16, 0)
    assert (row["shared"], row["unique"]) == (2, 2)
    assert (row["shared_bytes"], row["unique_bytes"]) == (180, 16)


def _pydarshan_common_sizes(path: Path, module: str) -> list[list[int]]:
    """The four most common access sizes of a module, read with PyDarshan and
    summed in plain Python (counts of a size add up over records and slots)."""
    darshan = pytest.importorskip("darshan")
    report = darshan.DarshanReport(str(path), read_all=False)
    if module not in report.modules:
        return []
    report.mod_read_all_records(module)
    df = report.records[module].to_df()["counters"]
    pre = module.replace("-", "")
    totals: dict[int, int] = {}
    for _, row in df.iterrows():
        for k in range(1, 5):
            size, count = int(row[f"{pre}_ACCESS{k}_ACCESS"]), int(row[f"{pre}_ACCESS{k}_COUNT"])
            if size > 0 and count > 0:
                totals[size] = totals.get(size, 0) + count
    return [[s, n] for s, n in sorted(totals.items(), key=lambda sn: (-sn[1], -sn[0]))[:4]]


@pytest.mark.parametrize("name", ["LOCAL_mpi-io-test_coll_4p_dxt_v3.5.0.darshan",
                                  "mpi-io-test-x86_64-3.4.0.darshan",
                                  "hdf5_diagonal_write_bytes_range_dxt.darshan"])
def test_common_access_sizes_match_the_darshan_counters(name):
    path = SHARED / name
    if not path.exists():
        pytest.skip("the shared Darshan logs are not here")
    doc = page_doc(render_html(diagnose(load(str(path)))))
    got = {a["layer"]: a for a in doc["views"]["summary"]["access_sizes"]}
    checked = 0
    for module, shown in (("POSIX", "POSIX"), ("MPI-IO", "MPI-IO")):
        want = _pydarshan_common_sizes(path, module)
        if not want:
            assert shown not in got
            continue
        assert got[shown]["source"] == "counters"
        assert got[shown]["sizes"] == want, (module, got[shown]["sizes"], want)
        checked += 1
    assert checked >= 1


def test_common_access_sizes_of_a_trace(monkeypatch):
    monkeypatch.setattr(html_context, "CHUNK", 64)  # sizes counted over many chunks
    sizes = [4096] * 100 + [65536] * 50 + [1000] * 50 + [7] * 10 + [3] * 9 + [0] * 30
    rows = [(i % 3, "wr"[i % 2], 1, 0, n, 0.01 * i, 0.01 * i + 0.001)
            for i, n in enumerate(sizes)]  # fmt: skip
    recs = records(rows)
    mpiio = records([(0, "w", 1, 0, 1 << 20, 5.0 + i, 5.5 + i) for i in range(3)], "MPIIO")
    both = Records(*(np.concatenate([getattr(recs, f), getattr(mpiio, f)]) for f in
                     ("rank", "layer", "op", "file_id", "offset", "length", "start", "end")))
    doc = page_doc(render_html(_diag(_trace(both, nprocs=3))))
    got = {a["layer"]: a for a in doc["views"]["summary"]["access_sizes"]}
    # A tie (50 each) lists the larger size first; size 3 is fifth; size 0 is no access.
    assert got["POSIX"] == {"layer": "POSIX", "source": "records",
                            "sizes": [[4096, 100], [65536, 50], [1000, 50], [7, 10]]}
    assert got["MPI-IO"]["sizes"] == [[1 << 20, 3]]
