"""The HTML report in a real browser: headless Chromium opens pages from file://."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from iopilot import api
from iopilot.checks import diagnose
from iopilot.checks import thresholds as th
from iopilot.checks.engine import Diagnosis, summarize
from iopilot.demo import example_dir
from iopilot.report.html import write_html
from iopilot.sources import load
from test_report_html import _synthetic, page_doc

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()), reason="chromium or chromedriver absent"
)

# A small program whose POSIX I/O the iopilot runtime traces: three files, written
# in 4 KiB pieces and read back.
_PROGRAM = """
import os, sys
for k in range(3):
    name = os.path.join(sys.argv[1], f"part{k}.bin")
    with open(name, "wb") as f:
        for _ in range(64):
            f.write(os.urandom(4096))
    with open(name, "rb") as f:
        while f.read(16384):
            pass
"""


@pytest.fixture(scope="module")
def driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    # Selenium Manager would send usage statistics and may download a driver:
    # statistics off, and the system chromedriver named explicitly below.
    os.environ["SE_AVOID_STATS"] = "true"
    opts = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--window-size=1400,1000"):  # fmt: skip
        opts.add_argument(arg)
    opts.binary_location = str(CHROMIUM)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    drv = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    drv.set_page_load_timeout(60)
    yield drv
    drv.quit()


def _iopilot_trace(tmp: Path) -> Path:
    work, trace = tmp / "work", tmp / "trace"
    work.mkdir()
    p = subprocess.run(
        [sys.executable, "-m", "iopilot", "run", "--trace-only", "--trace-dir", str(trace), "--",
         sys.executable, "-c", _PROGRAM, str(work)],
        capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=""),
    )  # fmt: skip
    if p.returncode != 0 or not trace.exists():
        pytest.skip(f"the iopilot runtime is not built here: {p.stderr.strip()[:200]}")
    return trace


def _page(kind: str, tmp: Path) -> Path:
    if kind == "synthetic":  # sampled: the timeline starts on exact bins
        t = _synthetic(200_000, ranks=16, files=3)
        d = Diagnosis(t, [], summarize(t), th.defaults())
    elif kind == "iopilot-trace":  # as `iopilot report` sees it: the interpreter's files set aside
        d = api.diagnose(_iopilot_trace(tmp), thresholds=th.defaults())
    else:
        d = diagnose(load(str(example_dir() / kind)))
    out = tmp / f"{kind.replace('.', '_')}.html"
    write_html(d, out)
    return out


def _expected_plots(doc: dict) -> dict[str, int]:
    rec = doc["records"]
    ranks = doc["views"]["fs"]["ranks"]
    has_ranks = bool(ranks["counters"] or ranks["records"])
    out = {
        "summary": 2 if doc["report"]["layers"] else 0,
        "sizes": (1 if doc["views"].get("sizes") else 0) + (1 if rec else 0),
        "fs": (3 if doc["views"]["fs"]["ost"] else 0) + (2 if has_ranks else 0),
    }
    if rec:
        out.update(timeline=1, spatiality=1, phases=2)
    out.update({k: 1 for k in ("heatmap", "apmpi") if k in doc["views"]})
    return out


def _wait_drawn(drv, view: str) -> None:
    """Wait until a view has drawn (big pages draw after showing "drawing…")."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(drv, 60).until(lambda d: d.execute_script(
        "const s = document.getElementById('view-' + arguments[0]);"
        "return s && s.dataset.drawn === '1';", view))  # fmt: skip


def _open(drv, view: str) -> None:
    drv.find_element("id", "tab-" + view).click()
    _wait_drawn(drv, view)


def _select(drv, css: str):
    from selenium.webdriver.support.ui import Select

    return Select(drv.find_element("css selector", css))


KINDS = ["ior_hdf5_example.darshan", "dxt.darshan", "example.darshan", "synthetic", "iopilot-trace"]


@pytest.mark.parametrize("kind", KINDS)
def test_page_renders_in_chromium(driver, tmp_path, kind):
    from selenium.webdriver.common.by import By

    path = _page(kind, tmp_path)
    doc = page_doc(path.read_text(encoding="utf-8"))
    driver.get_log("browser")  # drop what earlier pages left
    driver.get_log("performance")
    driver.get(path.as_uri())
    expected = _expected_plots(doc)
    tabs = driver.find_elements(By.CSS_SELECTOR, "nav.tabs button")
    assert {t.get_attribute("data-view") for t in tabs} == set(expected)
    plots = 0
    for tab in tabs:
        view = tab.get_attribute("data-view")
        tab.click()
        _wait_drawn(driver, view)
        sec = driver.find_element(By.ID, "view-" + view)
        assert sec.get_attribute("data-drawn") == "1", view
        drawn = sec.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")
        assert len(drawn) == int(sec.get_attribute("data-plots")) == expected[view], view
        # Each plot has its SVG and a non-empty size, and no button offers an upload.
        for p in drawn:
            assert p.find_elements(By.CSS_SELECTOR, "svg.main-svg")
            assert p.size["width"] > 200 and p.size["height"] > 150
            buttons = [b.get_attribute("data-title") or ""
                       for b in p.find_elements(By.CSS_SELECTOR, ".modebar-btn")]  # fmt: skip
            assert buttons, view  # the mode bar is there (so the check below means something)
            # No tick label or axis title sticks out of the plot's own drawing.
            clipped = driver.execute_script(
                "const svg = arguments[0].querySelector('svg.main-svg').getBoundingClientRect();"
                "return [...arguments[0].querySelectorAll('.xtick text, .ytick text, .xtitle, "
                ".ytitle')].filter((e) => { const r = e.getBoundingClientRect();"
                "return r.width > 0 && (r.left < svg.left - 1 || r.right > svg.right + 1 ||"
                "r.top < svg.top - 1 || r.bottom > svg.bottom + 1); }).map((e) => e.textContent);",
                p)  # fmt: skip
            assert not clipped, (view, clipped[:5])
            assert not [b for b in buttons if "share" in b.lower() or "cloud" in b.lower()]
        plots += len(drawn)
        driver.save_screenshot(str(tmp_path / f"{kind}-{view}.png"))
    assert plots == sum(expected.values())

    ost = doc["views"]["fs"]["ost"]
    if ost:  # the OST view's "all files" says how many were traced and how many estimated
        _open(driver, "fs")
        first = driver.execute_script(
            "return document.querySelector('#view-fs option[value=\"-2\"]').textContent")
        parts = [f"{n} {w}" for n, w in ((ost["files_exact"], "traced"),
                                         (ost["files_estimated"], "estimated")) if n]  # fmt: skip
        assert first.endswith(f": {', '.join(parts)})") and parts, first

    if doc["records"]:
        # The spatiality file selector lists every named file with traced operations.
        _open(driver, "spatiality")
        files = {int(f) for f in doc["records"]["file_counts"]["file"] if f >= 0}
        options = _select(driver, "#file-select").options
        assert len(options) == len(files) >= 1
        # Phases: a table with rows; switching the gap redraws it.
        _open(driver, "phases")
        rows = driver.find_elements(By.CSS_SELECTOR, "#phase-table tbody tr")
        assert len(rows) >= 1
        gap = _select(driver, "#gap-select")
        if len(gap.options) > 1:
            gap.select_by_index(len(gap.options) - 1)
            assert driver.find_elements(By.CSS_SELECTOR, "#phase-table tbody tr")
        if doc["records"]["sampled"]:  # exact bins, then the sample, then one file
            _open(driver, "timeline")
            _select(driver, "#timeline-mode").select_by_value("sample")
            _select(driver, "#timeline-file").select_by_index(1)
            _select(driver, "#timeline-mode").select_by_value("bins")
            _select(driver, "#timeline-file").select_by_index(0)
            _select(driver, "#timeline-metric").select_by_value("write")
            driver.save_screenshot(str(tmp_path / f"{kind}-timeline-write-bins.png"))
    else:
        assert not driver.find_elements(By.ID, "tab-timeline")
    _vocabulary_texts(driver, doc)
    # The per-file table sorts on a header click (twice: both directions).
    _open(driver, "fs")
    header = driver.find_elements(By.CSS_SELECTOR, "#view-fs table.data th")[6]
    header.click()
    header.click()
    # Runtime and library files: a table of their own under the files table.
    aside = doc["report"].get("set_aside") or {"files": 0}
    boxes = driver.find_elements(By.CSS_SELECTOR, "#view-fs details#set-aside")
    assert len(boxes) == (1 if aside["files"] else 0)
    if boxes:
        assert f"set aside: {aside['files']:,} file(s)" in boxes[0].text
        boxes[0].find_element(By.TAG_NAME, "summary").click()
        rows = boxes[0].find_elements(By.CSS_SELECTOR, "tbody tr")
        assert len(rows) == len(aside["listed"]) >= 1

    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe
    # Nothing was fetched but the page itself (plotly.js is inline).
    urls = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    assert any(u.startswith("file:") for u in urls)  # the log did record the page load
    assert [u for u in urls if not u.startswith(("file:", "data:", "blob:"))] == []
    shot = tmp_path / f"{kind}-summary.png"
    assert shot.exists() and shot.stat().st_size > 20_000  # not a blank page


def _vocabulary_texts(driver, doc: dict) -> None:
    """Texts the page builds from the vocabulary in its data: the file-system
    layers, the layers drawn above them, the operation names."""
    from selenium.webdriver.common.by import By

    _open(driver, "summary")
    summary = driver.find_element(By.ID, "view-summary").text
    fs_bytes = sum(lay["bytes_read"] + lay["bytes_written"] for lay in doc["report"]["layers"]
                   if lay["layer"] in ("POSIX", "STDIO"))  # fmt: skip
    assert ("read (POSIX + STDIO)" in summary) == (fs_bytes > 0)
    if not doc["records"]:
        return
    _open(driver, "timeline")
    labels = [o.text for o in _select(driver, "#timeline-layer").options]
    present = [n for n, k in zip(doc["record_layers"], doc["records"]["per_layer"], strict=True)
               if k]  # fmt: skip
    for upper, label in (("MPIIO", "MPI-IO above its POSIX calls"),
                         ("H5D", "HDF5 above its POSIX calls")):  # fmt: skip
        assert (label in labels) == (upper in present and "POSIX" in present), label
    ops = driver.execute_script(
        "const p = document.querySelector('#view-timeline .js-plotly-plot');"
        "return p ? p.data.filter((t) => t.mode === 'lines')"
        "  .map((t) => (t.text || []).find((x) => typeof x === 'string')).filter((x) => x) : [];")
    assert ops or doc["records"]["sampled"]  # unsampled pages draw operations first
    assert all(" read<br>" in t or " write<br>" in t for t in ops), ops[:3]


def test_deep_links_open_the_view_of_a_finding(driver, tmp_path):
    from selenium.webdriver.common.by import By

    path = _page("ior_hdf5_example.darshan", tmp_path)
    doc = page_doc(path.read_text(encoding="utf-8"))
    driver.get(path.as_uri() + "#view=phases")
    assert driver.find_element(By.ID, "tab-phases").get_attribute("class") == "active"
    # The page states the shortest gap that splits phases, in seconds too.
    text = driver.find_element(By.ID, "view-phases").text
    assert "idle gaps of at most" in text or ("s: no shorter gap splits a phase" in text)
    assert "active" in driver.find_element(By.ID, "view-phases").get_attribute("class")
    _open(driver, "summary")
    assert driver.execute_script("return location.hash") == "#view=summary"
    links = driver.find_elements(By.CSS_SELECTOR, ".finding a.show-in")
    linked = [i for i, v in enumerate(doc["finding_views"]) if v != "summary"]
    assert len(links) == len(linked) > 0
    i = linked[-1]
    want = doc["finding_views"][i]
    driver.find_element(By.CSS_SELECTOR, f"#finding-{i} a.show-in").click()
    assert driver.execute_script("return location.hash") == f"#view={want}&finding={i}"
    assert "active" in driver.find_element(By.ID, f"view-{want}").get_attribute("class")
    assert driver.find_element(By.ID, f"view-{want}").get_attribute("data-drawn") == "1"
    driver.get(path.as_uri() + "#view=nonsense")  # an unknown view opens the summary
    assert "active" in driver.find_element(By.ID, "view-summary").get_attribute("class")
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe


def test_interfaces_table_gives_each_interface_its_cost(driver, tmp_path):
    from selenium.webdriver.common.by import By

    path = tmp_path / "p.html"
    d = diagnose(load(str(example_dir() / "ior_hdf5_example.darshan")))
    write_html(d, path)
    report = page_doc(path.read_text(encoding="utf-8"))["report"]
    driver.get(path.as_uri())
    head = [th.text for th in driver.find_elements(By.CSS_SELECTOR, "#interface-table th")]
    cells = [[c.text for c in r.find_elements(By.TAG_NAME, "td")]
             for r in driver.find_elements(By.CSS_SELECTOR, "#interface-table tbody tr")]
    rows = {c[0]: c for c in cells}
    it = report["io_time"]
    assert set(rows) == {lay["layer"] for lay in report["layers"]}
    cats = driver.find_elements(By.CSS_SELECTOR, "#category-table tbody tr")
    doc = page_doc(path.read_text(encoding="utf-8"))
    assert len(cats) == len(doc["views"]["summary"]["overview"]["categories"]) > 0
    # Common access sizes: one row per (interface, size), the counts as in the data.
    acc = doc["views"]["summary"]["access_sizes"]
    sizes = driver.find_elements(By.CSS_SELECTOR, "#access-size-table tbody tr")
    assert len(sizes) == sum(len(a["sizes"]) for a in acc) > 0
    first = [c.text for c in sizes[0].find_elements(By.TAG_NAME, "td")]
    size, count = acc[0]["sizes"][0]
    assert first[:3] == [acc[0]["layer"], f"{size:,}", f"{count:,}"]
    for lay in report["layers"]:
        row = dict(zip(head, rows[lay["layer"]], strict=True))
        assert row["opens"] == f"{lay['opens']:,}" and row["seeks"] == f"{lay['seeks']:,}"
        secs = it["by_layer"]["slowest_rank"].get(lay["layer"])
        if secs is None:
            assert row["% of run"] == "–"
        else:
            assert row["% of run"] == f"{100 * secs / it['run_seconds']:.1f} %"


# Reads every plot of a view and returns what lies outside the filter: segments
# (start, end pairs) and heat bins outside the window or rank range, phase bars
# outside the window, per-rank bars outside the rank range.
_OUTSIDE_JS = """
const [view, t0, t1, r0, r1, slack] = arguments;
const bad = []; let n = 0;
const out = (what) => { if (bad.length < 5) bad.push(what); };
const plots = document.querySelectorAll('#view-' + view + ' .js-plotly-plot');
plots.forEach((p) => p.data.forEach((t) => {
  if (t.type === 'heatmap') {
    const w = t.x.length > 1 ? t.x[1] - t.x[0] : 0;
    t.x.forEach((x) => { n++; if (x < t0 - w || x > t1 + w) out(['bin', x]); });
    t.y.forEach((y) => { if (y < r0 - slack || y > r1 + slack) out(['row', y]); });
  } else if (t.mode === 'lines') {
    for (let j = 0; j + 1 < t.x.length; j += 3) {
      n++;
      const s = Math.min(t.x[j], t.x[j + 1]); const e = Math.max(t.x[j], t.x[j + 1]);
      if (s > t1 || e < t0 - slack) out(['op', s, e]);
      const m = /rank (\\d+)/.exec(t.text[j] || '');
      if (m && (Number(m[1]) < r0 || Number(m[1]) > r1)) out(['rank', m[1]]);
    }
  } else if (t.type === 'bar' && t.orientation === 'h') {
    t.base.forEach((b, j) => { n++; if (b > t1 || b + t.x[j] < t0) out(['phase', b]); });
  } else if (t.type === 'bar' && view === 'fs' && typeof t.x[0] === 'number') {
    t.x.forEach((x) => { n++; if (x < r0 - slack || x > r1) out(['rank bar', x]); });
  }
}));
return [n, bad];
"""


def test_one_filter_for_every_view(driver, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    path = _page("synthetic", tmp_path)  # 16 ranks, bursts every 25 s, sampled and binned
    doc = page_doc(path.read_text(encoding="utf-8"))
    driver.get_log("browser")
    driver.get(path.as_uri() + "#view=timeline")
    _wait_drawn(driver, "timeline")
    t0, t1, r0, r1 = 100.0, 130.0, 3, 6
    for key, value in (("t0", t0), ("t1", t1), ("r0", r0), ("r1", r1)):
        box = driver.find_element(By.ID, "filter-" + key)
        box.clear()
        box.send_keys(str(value), Keys.TAB)  # a change event, as a user makes it
    assert driver.execute_script("return location.hash") == (
        "#view=timeline&t0=100&t1=130&r0=3&r1=6")
    assert "active" in driver.find_element(By.ID, "filter-status").text
    slack = float(doc["records"]["sample"]["dur"].max())  # an operation may start before t0
    checked = {}
    for view in ("timeline", "sizes", "spatiality", "phases", "fs"):
        _open(driver, view)
        n, bad = driver.execute_script(_OUTSIDE_JS, view, t0, t1, r0, r1, slack)
        assert not bad, (view, bad)
        checked[view] = n
    assert min(checked.values()) > 0, checked  # each view drew something inside
    # The same views without the filter draw more: the filter did remove data.
    driver.find_element(By.ID, "filter-reset").click()
    for view in ("timeline", "sizes", "phases", "fs"):
        _open(driver, view)
        n, bad = driver.execute_script(_OUTSIDE_JS, view, t0, t1, r0, r1, slack)
        assert bad, view
    assert driver.execute_script("return location.hash") == "#view=fs"
    # The sampled operations too.
    _open(driver, "timeline")
    _select(driver, "#timeline-mode").select_by_value("sample")
    driver.get(path.as_uri() + "#view=timeline&t0=100&t1=130&r0=3&r1=6")
    _wait_drawn(driver, "timeline")
    driver.refresh()
    _wait_drawn(driver, "timeline")
    _select(driver, "#timeline-mode").select_by_value("sample")
    n, bad = driver.execute_script(_OUTSIDE_JS, "timeline", t0, t1, r0, r1, slack)
    assert n > 0 and not bad, bad
    # The summary says that its tables are not filtered.
    _open(driver, "summary")
    notes = driver.find_elements(By.CSS_SELECTOR, "#view-summary .filter-note")
    assert notes and "whole run" in notes[0].text
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe


def test_zooming_the_timeline_sets_the_window(driver, tmp_path):
    from selenium.webdriver.common.by import By

    path = _page("synthetic", tmp_path)
    driver.get(path.as_uri() + "#view=timeline")
    _wait_drawn(driver, "timeline")
    driver.execute_script(
        "Plotly.relayout(document.querySelector('#view-timeline .js-plotly-plot'),"
        " {'xaxis.range[0]': 50, 'xaxis.range[1]': 80});")
    assert driver.find_element(By.ID, "filter-t0").get_attribute("value") == "50"
    assert driver.find_element(By.ID, "filter-t1").get_attribute("value") == "80"
    assert "&t0=50&t1=80" in driver.execute_script("return location.hash")
    # Other views follow the window; the timeline keeps it as its axis range.
    _open(driver, "phases")
    n, bad = driver.execute_script(_OUTSIDE_JS, "phases", 50, 80, 0, 15, 0)
    assert n > 0 and not bad, bad
    rng = driver.execute_script(
        "return document.querySelector('#view-timeline .js-plotly-plot').layout.xaxis.range;")
    assert rng == [50, 80]
    # A reset of the zoom (autorange) clears the window.
    driver.execute_script(
        "Plotly.relayout(document.querySelector('#view-timeline .js-plotly-plot'),"
        " {'xaxis.autorange': true});")
    assert driver.find_element(By.ID, "filter-t0").get_attribute("value") == ""
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe


# Time bins of the timeline's heat map, inside [lo, hi], that hold some operation.
_BURST_JS = """
const [lo, hi] = arguments;
const p = document.querySelector('#view-timeline .js-plotly-plot');
const cols = new Set();
const heat = p.data.filter((t) => t.type === 'heatmap');
heat.forEach((t) => t.z.forEach((row) => row.forEach((v, c) => {
  if (v !== null && t.x[c] > lo && t.x[c] < hi) cols.add(t.x[c]);
})));
return cols.size;
"""


def test_zooming_into_a_burst_draws_finer_bins(driver, tmp_path, monkeypatch):
    from selenium.webdriver.common.by import By

    from iopilot.report.views import context
    from test_report_html import _burst_trace, _diag

    monkeypatch.setattr(context, "SAMPLE_CAP", 100)  # sampled: the timeline is binned
    path = tmp_path / "burst.html"
    write_html(_diag(_burst_trace()), path)
    driver.get_log("browser")
    driver.get(path.as_uri() + "#view=timeline")
    _wait_drawn(driver, "timeline")
    assert driver.execute_script(_BURST_JS, 499.9, 500.3) <= 2  # one bin at full range
    driver.execute_script(
        "Plotly.relayout(document.querySelector('#view-timeline .js-plotly-plot'),"
        " {'xaxis.range[0]': 499.9, 'xaxis.range[1]': 500.3});")
    assert driver.execute_script(_BURST_JS, 499.9, 500.3) >= 4
    assert "finer level" in driver.find_element(By.ID, "view-timeline").text
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe


def test_big_pages_say_drawing_before_a_slow_first_draw(driver, tmp_path):
    path = _page("synthetic", tmp_path)  # 50,000 drawn operations: a big page
    driver.get(path.as_uri())
    _wait_drawn(driver, "summary")
    # In the same task as the click: the indicator is there and visible, the
    # view not drawn yet (the draw waits for the browser to paint it).
    pending = driver.execute_script(
        "document.getElementById('tab-timeline').click();"
        "const s = document.getElementById('view-timeline');"
        "const e = s.querySelector('.drawing');"
        "return [!!e && e.offsetHeight > 0, e ? e.textContent : '', s.dataset.drawn || '',"
        " s.querySelectorAll('.js-plotly-plot').length];")
    assert pending[0] and "drawing" in pending[1] and pending[2:] == ["", 0], pending
    _wait_drawn(driver, "timeline")
    done = driver.execute_script(
        "const s = document.getElementById('view-timeline');"
        "return [s.querySelectorAll('.drawing').length,"
        " s.querySelectorAll('.js-plotly-plot').length];")
    assert done[0] == 0 and done[1] == 1, done
    # A small page draws at once, with no indicator.
    small = _page("dxt.darshan", tmp_path)
    driver.get(small.as_uri())
    now = driver.execute_script(
        "document.getElementById('tab-timeline').click();"
        "const s = document.getElementById('view-timeline');"
        "return [s.querySelectorAll('.drawing').length, s.dataset.drawn];")
    assert now == [0, "1"], now
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe


# ---------------------------------------------------------------------------
# Views of Darshan's HEATMAP and AutoPerf's APMPI modules (logs of the corpus)

_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "darshan-logs"
_PROFILE_LOGS = ["mpi-io-test-x86_64-3.4.6.darshan", "e3sm_io_heatmap_only.darshan"]


def _open_view(driver, name: str, tmp: Path, view: str):
    """The page of corpus log ``name`` opened at ``view``: (page data, the
    view's section, its plot), checked to have drawn one plot."""
    from selenium.webdriver.common.by import By

    if not (_CORPUS / name).exists():
        pytest.skip(f"shared log corpus not present: {_CORPUS}")
    path = tmp / "profiles.html"
    write_html(diagnose(load(str(_CORPUS / name))), path)
    doc = page_doc(path.read_text(encoding="utf-8"))
    driver.get_log("browser")
    driver.get(path.as_uri() + "#view=" + view)
    sec = driver.find_element(By.ID, "view-" + view)
    assert "active" in sec.get_attribute("class")
    assert sec.get_attribute("data-drawn") == "1" and sec.get_attribute("data-plots") == "1"
    plot = sec.find_element(By.CSS_SELECTOR, ".js-plotly-plot")
    assert plot.find_elements(By.CSS_SELECTOR, "svg.main-svg")
    assert plot.size["width"] > 200 and plot.size["height"] > 150
    # No upload: plotly's config says so, and no mode-bar button offers one.
    assert driver.execute_script("return arguments[0]._context.showSendToCloud", plot) is False
    buttons = [b.get_attribute("data-title") or ""
               for b in plot.find_elements(By.CSS_SELECTOR, ".modebar-btn")]  # fmt: skip
    assert buttons and not [b for b in buttons if "share" in b.lower() or "cloud" in b.lower()]
    return doc, sec, plot


def _no_console_errors(driver) -> None:
    bad = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert not bad, bad


@pytest.mark.parametrize("name", _PROFILE_LOGS)
def test_heatmap_view_draws_each_layer_and_direction(driver, tmp_path, name):
    doc, sec, plot = _open_view(driver, name, tmp_path, "heatmap")
    hm = doc["views"]["heatmap"]
    assert "Darshan's HEATMAP module" in sec.text
    first = hm["layers"][0]
    assert f"Darshan's HEATMAP module, in bins of {first['bin_seconds']:g} s:" in sec.text
    cells = ("return arguments[0].data[0].z.flat().filter((v) => v !== null).length")
    for i, lay in enumerate(hm["layers"]):
        _select(driver, "#heatmap-layer").select_by_value(str(i))
        for what in ("read", "write", "both"):
            _select(driver, "#heatmap-metric").select_by_value(what)
            grids = [lay[k] for k in ("read", "write")
                     if what in (k, "both") and lay[k] is not None]  # fmt: skip
            want = int(np.count_nonzero(sum(grids))) if grids else 0
            assert driver.execute_script(cells, plot) == want, (lay["label"], what)
        # the grid has one row per rank group and one column per bin
        z = driver.execute_script("return [arguments[0].data[0].z.length,"
                                  " arguments[0].data[0].z[0].length]", plot)  # fmt: skip
        assert z == [hm["rows"], lay["bins"]]
    # something is drawn: at least one layer moved bytes
    assert any(lay["read"] is not None or lay["write"] is not None for lay in hm["layers"])
    driver.save_screenshot(str(tmp_path / "heatmap.png"))
    _no_console_errors(driver)


def test_page_terminal_and_json_give_the_same_figures(driver, tmp_path):
    # A per-rank iopilot trace: the share of the run in I/O and the bytes moved
    # read the same on the page, in the terminal report and in the JSON.
    from selenium.webdriver.common.by import By

    from iopilot.report import json_report, terminal

    d = api.diagnose(str(_iopilot_trace(tmp_path)))
    path = tmp_path / "same.html"
    write_html(d, path)
    doc = json_report.diagnosis_dict(d)
    it = doc["io_time"]
    share = f"{100 * it['share']:.1f} %"
    term = terminal.render(doc, terminal.Style(False))
    assert f"{share} of the {it['run_seconds']:.3g} s run" in term
    driver.get(path.as_uri())
    figs = {f.find_element(By.CLASS_NAME, "l").text: f.find_element(By.CLASS_NAME, "v").text
            for f in driver.find_elements(By.CSS_SELECTOR, "#view-summary .figure")}  # fmt: skip
    run = [v for k, v in figs.items() if k.startswith("of the run in I/O on the slowest rank")]
    assert run == [share]
    assert page_doc(path.read_text(encoding="utf-8"))["report"]["io_time"] == it
    # Bytes: the page's read and written figures are the POSIX + STDIO rows of the
    # terminal's (and the JSON's) interface table.
    fs = [lay for lay in doc["layers"] if lay["layer"] in ("POSIX", "STDIO")]
    read = sum(lay["bytes_read"] for lay in fs)
    written = sum(lay["bytes_written"] for lay in fs)
    got = {k.split(" (")[0]: v for k, v in figs.items() if k.startswith(("read (", "written ("))}
    js = "return [IOP.ui.fmtBytes(arguments[0]), IOP.ui.fmtBytes(arguments[1])]"
    assert [got["read"], got["written"]] == driver.execute_script(js, read, written)
    assert written > 0


def test_heatmap_and_mpi_views_follow_the_filter(driver, tmp_path):
    name = "e3sm_io_heatmap_only.darshan"  # 512 ranks: two ranks per heatmap row
    doc, _, plot = _open_view(driver, name, tmp_path, "heatmap")
    hm = doc["views"]["heatmap"]
    lay, per = hm["layers"][0], hm["per_row"]
    w = lay["bin_seconds"]
    t0, t1, r0, r1 = round(3.5 * w, 6), round(8.5 * w, 6), 101, 300  # inside bins 3 and 8
    driver.get(f"{(tmp_path / 'profiles.html').as_uri()}#view=heatmap&t0={t0}&t1={t1}"
               f"&r0={r0}&r1={r1}")  # fmt: skip
    driver.refresh()
    _wait_drawn(driver, "heatmap")
    plot = driver.find_element("css selector", "#view-heatmap .js-plotly-plot")
    _select(driver, "#heatmap-metric").select_by_value("both")
    z = driver.execute_script("return arguments[0].data[0].z", plot)
    drawn = {(r, b) for r, row in enumerate(z) for b, v in enumerate(row) if v is not None}
    grid = sum(lay[k] for k in ("read", "write") if lay[k] is not None).reshape(hm["rows"], -1)
    # Bins 3..8 overlap [3.5 w, 8.5 w]; rows whose two ranks overlap 101..300
    # are rows 50 (ranks 100-101) to 150 (ranks 300-301).
    want = {(r, b) for r in range(50, 151) for b in range(3, 9) if grid[r, b] > 0}
    assert drawn == want and want
    assert driver.execute_script("return arguments[0].layout.xaxis.range", plot) == [t0, t1]
    note = driver.find_element("css selector", "#view-heatmap .filter-note").text
    assert note.startswith("Filter active") and "shows only what lies inside it" in note
    # MPI time per rank: only the bars of the rank range.
    _open(driver, "apmpi")
    bars = driver.find_element("css selector", "#view-apmpi .js-plotly-plot")
    xs = driver.execute_script("return arguments[0].data[0].x", bars)
    per_bar = doc["views"]["apmpi"]["per_bar"]
    assert xs and all(x + per_bar - 1 >= r0 and x <= r1 for x in xs)
    assert len(xs) < doc["views"]["apmpi"]["bars"]
    assert per == 2
    _no_console_errors(driver)


@pytest.mark.parametrize("name", _PROFILE_LOGS)
def test_apmpi_view_draws_per_rank_bars_and_the_operations_table(driver, tmp_path, name):
    from selenium.webdriver.common.by import By

    doc, sec, plot = _open_view(driver, name, tmp_path, "apmpi")
    mpi = doc["views"]["apmpi"]
    assert "AutoPerf's APMPI module" in sec.text
    names = driver.execute_script("return arguments[0].data.map((t) => t.name)", plot)
    want = [o["operation"] for o in mpi["stacked"]] + ["other MPI calls"]
    assert names == want + (["waiting before collectives (sync)"] if mpi["sync"] is not None
                            else [])  # fmt: skip
    # the bars add up to each rank's MPI time
    sums = driver.execute_script(
        "const d = arguments[0].data;"
        "return d[0].y.map((_, i) => d.reduce((s, t) => s + t.y[i], 0))",
        plot)  # fmt: skip
    assert np.allclose(sums, mpi["total"], rtol=1e-9, atol=1e-9)
    assert len(sums) == mpi["bars"] and max(sums) > 0
    # the spread over ranks, as a standard deviation of the variance the runtime kept
    spread = driver.execute_script("return IOP.ui.fmtSec(Math.sqrt(arguments[0]))",
                                   mpi["summary"]["variance"])  # fmt: skip
    assert f"{spread}\nspread of the time in MPI over ranks (standard deviation)" in sec.text
    rows = sec.find_elements(By.CSS_SELECTOR, "#mpi-table tbody tr")
    assert [r.find_element(By.TAG_NAME, "td").text for r in rows] == \
        [o["operation"] for o in mpi["summary"]["operations"]]  # fmt: skip
    driver.save_screenshot(str(tmp_path / "mpi.png"))
    _no_console_errors(driver)


def test_pages_without_the_modules_have_neither_view(driver, tmp_path):
    from selenium.webdriver.common.by import By

    path = _page("ior_hdf5_example.darshan", tmp_path)
    doc = page_doc(path.read_text(encoding="utf-8"))
    assert "heatmap" not in doc["views"] and "apmpi" not in doc["views"]
    driver.get(path.as_uri() + "#view=heatmap")  # an absent view opens the summary
    assert not driver.find_elements(By.ID, "tab-heatmap")
    assert not driver.find_elements(By.ID, "tab-apmpi")
    # the page says why each absent view is absent
    text = driver.find_element(By.TAG_NAME, "main").text
    assert "Not available for this source (no Darshan's HEATMAP module): Heatmap." in text
    assert "Not available for this source (no AutoPerf's APMPI module): MPI time." in text
    assert "active" in driver.find_element(By.ID, "view-summary").get_attribute("class")


def test_call_site_filter_draws_only_that_sites_operations(driver, tmp_path):
    from selenium.webdriver.common.by import By

    from test_callsites import MiB, small, small_writes_trace

    # 40 small writes from main.c:42, then 5 big ones from main.c:77 (the
    # first site in the filter's list: more seconds).
    tr = small_writes_trace(small(1, 40, 1.0) + [(2, "write", MiB, 0.6)] * 5)
    values = th.defaults()
    values.update(high_min_io_seconds=0, high_min_io_share=0)
    path = tmp_path / "sites.html"
    write_html(diagnose(tr, values, only={"posix-small-writes"}), path)
    driver.get_log("browser")
    driver.get(path.as_uri() + "#view=summary")
    _wait_drawn(driver, "summary")
    # The summary lists the program's lines, most seconds first.
    listed = driver.find_elements(By.CSS_SELECTOR, "#site-list li")
    assert [e.text.split(" — ")[0] for e in listed] == ["main.c:77 write_header",
                                                         "main.c:42 write_rows"]
    # The finding shows its line, and a button that filters by it.
    lines = driver.find_element(By.ID, "finding-0-sites").text
    assert "main.c:42 write_rows — 40 calls, 1.000 s" in lines and "main.c:77" not in lines
    driver.find_element(By.CSS_SELECTOR, "#finding-0-sites button.site-filter").click()
    assert driver.execute_script("return location.hash") == "#view=summary&site=1"
    button = driver.find_element(By.CSS_SELECTOR, "#finding-0-sites button.site-filter")
    assert "active" in button.get_attribute("class")
    assert "call site main.c:42 write_rows" in driver.find_element(By.ID, "filter-status").text
    strokes = ("return Array.from(document.querySelectorAll('#view-timeline .js-plotly-plot'))"
               ".flatMap((p) => p.data).filter((t) => t.mode === 'lines')"
               ".reduce((n, t) => n + t.x.length / 3, 0);")  # fmt: skip
    _open(driver, "timeline")
    assert driver.execute_script(strokes) == 40
    # The other site, chosen in the filter bar: its five writes only.
    _select(driver, "#filter-site").select_by_value("0")
    assert driver.execute_script(strokes) == 5
    assert driver.execute_script("return location.hash") == "#view=timeline&site=0"
    # All sites again; the aggregated views say they cover every call site.
    _select(driver, "#filter-site").select_by_value("")
    assert driver.execute_script(strokes) == 45
    _select(driver, "#filter-site").select_by_value("1")
    _open(driver, "fs")
    notes = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#view-fs .filter-note")]
    assert notes and all("the call site" in n for n in notes if n)
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe
