"""The terminal report: levels, colours, counts, numbers, recommendations.

It renders the same plain-data report the JSON reporter writes, so what the
terminal shows and what tools read never disagree.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from ..model.trace import safe_name
from ..units import human_size
from .nodes import clock_line, nodes_line

LEVEL_STYLE = {"HIGH": "1;31", "WARN": "1;33", "INFO": "1;36", "OK": "1;32"}
LEVEL_ORDER = ("HIGH", "WARN", "INFO", "OK")


class Style:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text


def heatmap_line(h: dict[str, Any]) -> str:
    """One line on Darshan's HEATMAP module: layers, bins, the busiest bin."""
    first = h["layers"][0]
    layers = ", ".join(x["layer"] for x in h["layers"])
    ranks = max(x["ranks"] for x in h["layers"])
    line = (f"{layers}: {ranks:,} rank(s) x {first['bins']} bins of "
            f"{_fmt(first['bin_seconds'])} s (Darshan HEATMAP)")  # fmt: skip
    busy = max((x for x in h["layers"] if x["busiest_bin"]),
               key=lambda x: x["busiest_bin"]["bytes"], default=None)  # fmt: skip
    if busy:
        b = busy["busiest_bin"]
        line += (f"; busiest {busy['layer']} bin {_fmt(b['start'])}-{_fmt(b['end'])} s: "
                 f"{human_size(b['bytes'])}")  # fmt: skip
    return line


def mpi_line(m: dict[str, Any]) -> str:
    """One line on AutoPerf's APMPI module: MPI time, sync time, top operations."""
    line = (f"{_secs(m['seconds'])} s over {m['ranks']:,} rank(s) (APMPI), slowest rank "
            f"{m['slowest_rank']}: {_secs(m['slowest_rank_seconds'])} s; sync time "
            + (f"{_secs(m['sync_seconds'])} s" if m["sync_measured"] else "not measured"))
    ops = m["operations"][:3]
    if ops and m["seconds"] > 0:
        line += "; top: " + ", ".join(
            f"{o['operation']} {100 * o['seconds'] / m['seconds']:.0f} %" for o in ops)
    return line


def want_color(mode: str, stream: TextIO) -> bool:
    if mode == "always":
        return True
    if mode == "never" or os.environ.get("NO_COLOR"):
        return False
    return stream.isatty()


def _worker_ranks(job: dict[str, Any]) -> str:
    """" (the main process and N Python workers)" when those are the ranks."""
    if job.get("rank_source") != "workers":
        return ""
    n = job["nprocs"] - 1
    return f" (the main process and {n} Python worker{'' if n == 1 else 's'})"


_NOUNS = {"file": ("file", "files"), "phase": ("phase", "phases"), "rank": ("rank", "ranks"),
          "source": ("place in the source", "places in the source")}  # fmt: skip


def others(n: int, kind: str) -> str:
    """"3 other files", "1 other phase": what a list left out, in plain words."""
    one, many = _NOUNS.get(kind, _NOUNS["file"])
    return f"{n:,} other {one if n == 1 else many}"


def _listed_kind(f: dict[str, Any]) -> str:
    """What a finding's list holds (files, phases or ranks): the kind of its
    first locations, which are the listed entries."""
    locs = f.get("locations") or []
    return locs[0]["kind"] if locs and f["files"] else "file"


def render(report: dict[str, Any], style: Style, *, min_level: str = "OK",
           verbose: bool = False, files_shown: int = 5) -> str:  # fmt: skip
    lines: list[str] = []
    add = lines.append
    report = printable(report)
    job = report["job"]
    add(style(f"iopilot report: {report['source']}", "1"))
    if job.get("status"):
        add(style(f"  {job['status']}", LEVEL_STYLE["WARN"]))
    if report.get("io_time"):  # the first thing users ask
        add(style(f"  I/O time  {io_headline(report['io_time'])}", "1"))
    exe = job["executable"] or "(unknown executable)"
    add(f"  job       {exe}")
    add(
        f"  ranks     {job['nprocs']}{_worker_ranks(job)}    runtime {job['runtime']:.2f} s    "
        f"format {job['format']}" + (f" ({job['writer']})" if job["writer"] else "")
    )
    mods = ", ".join(m["name"] + (style(" (partial)", "33") if m["partial"] else "")
                     for m in report["modules"]) or "none"  # fmt: skip
    add(f"  modules   {mods}")
    if job.get("static_layers"):  # what no finding can be about
        hidden = ", ".join(f"{k} (linked statically into {v.rsplit('/', 1)[-1]})"
                           for k, v in job["static_layers"].items())  # fmt: skip
        add(style(f"  unseen    {hidden}: calls not traced, only the POSIX calls beneath",
                  LEVEL_STYLE["WARN"]))  # fmt: skip
    if job.get("nodes"):
        add(f"  nodes     {nodes_line(job['nodes'])}")
    if job.get("clock"):
        add(f"  clocks    {clock_line(job['clock'])}")
    if report["records"]:
        add(f"  records   {report['records']:,} per-operation records")
    if report.get("heatmap"):
        add(f"  heatmap   {heatmap_line(report['heatmap'])}")
    if report.get("mpi"):
        add(f"  MPI time  {mpi_line(report['mpi'])}")
    procs = report.get("processes")
    if procs:
        line = f"  processes {procs['summary']}"
        add(style(line, "33") if procs["ended_abnormally"] else line)
    for w in report["warnings"]:
        add(style(f"  ! {w}", "33"))
    if procs:
        add(style(f"  i {procs['not_seen']}", "36"))
    if report.get("settings"):
        lines += settings_block(report["settings"], style, verbose=verbose)
    if report.get("write_behind"):
        lines += behind_block(report["write_behind"], style)
    if report.get("background_io"):
        lines += background_block(report["background_io"], style)
    aside = report.get("set_aside")
    if aside and aside["files"]:
        add(style(f"  set aside {set_aside_line(aside)}", "36"))
        if verbose:
            for e in aside["listed"][:files_shown * 2]:
                add(style(f"    - {e['path']} ({e['reason']}): "
                          f"{human_size(e['bytes_read'] + e['bytes_written'])}, "
                          f"{e['operations']:,} ops, {_fmt(e['seconds'])} s", "2"))  # fmt: skip
    if report["layers"]:
        add("")
        add(f"  {'layer':<8} {'files':>6} {'reads':>12} {'writes':>12} {'read':>11} "
            f"{'written':>11} {'time r/w/meta (s, all ranks)':>30}")  # fmt: skip
        for s in report["layers"]:
            add(
                f"  {s['layer']:<8} {s['files']:>6,} {s['reads']:>12,} {s['writes']:>12,} "
                f"{human_size(s['bytes_read']):>11} {human_size(s['bytes_written']):>11} "
                f"{s['read_time']:>10.2f}/{s['write_time']:.2f}/{s['meta_time']:.2f}"
            )
    counts = report["counts"]
    add("")
    add(
        "  "
        + style(f"{counts['HIGH']} critical issue(s)", LEVEL_STYLE["HIGH"])
        + ", "
        + style(f"{counts['WARN']} warning(s)", LEVEL_STYLE["WARN"])
        + f", {counts['INFO']} note(s), {counts['OK']} ok"
    )
    cutoff = LEVEL_ORDER.index(min_level)
    for f in report["findings"]:
        if LEVEL_ORDER.index(f["level"]) > cutoff:
            continue
        add("")
        tag = f"[{f['level']}]"
        codes = f["check"] + (f" · Drishti {f['drishti']}" if f["drishti"] else " · new")
        add(f"  {style(tag, LEVEL_STYLE[f['level']])} {f['message']}")
        add(style(f"         {f['layer']} · {codes}", "2"))
        if f["drishti_note"]:
            add(style(f"         ({f['drishti_note']})", "2"))
        shown = f["files"] if verbose else f["files"][:files_shown]
        for e in shown:
            nums = ", ".join(f"{k} {_fmt(v)}" for k, v in e.items() if k != "path")
            add(f"         - {e['path']}: {nums}")
        more = f["files_total"] - len(shown)
        if more > 0:
            hidden = len(f["files"]) - len(shown)
            add(style(f"         and {others(more, _listed_kind(f))}"
                      + (" (--verbose lists them)" if hidden > 0 else ""), "2"))  # fmt: skip
        for loc in f.get("locations") or []:
            if loc["kind"] == "source":
                add(f"         at {site_line(loc)}")
        if f["recommendation"]:
            add(f"         {style('→', '1')} {f['recommendation']}")
        if f["snippet"] and (verbose or f["level"] in ("HIGH", "WARN")):
            for line in f["snippet"].splitlines():
                add(style(f"           {line}", "2;37"))
    fired = report["thresholds_fired"]
    if fired:
        add("")
        add(style("  thresholds behind these findings: ", "2")
            + ", ".join(f"{k}={_fmt(v)}" for k, v in fired.items()))  # fmt: skip
    return "\n".join(lines) + "\n"


OUTCOME_STYLE = {"applied": "32", "ignored": "33", "not_applicable": "36", "rejected": "31"}


def behind_block(wb: dict[str, Any], style: Style) -> list[str]:
    """What write-behind did: the writes it took, the time its thread spent on
    them while the program went on, and what the program waited for."""
    mib = wb["bytes"] / 2**20
    hidden = max(wb["busy_seconds"] - wb["wait_seconds"], 0.0)
    title = "  Write-behind" + (" (relaxed: syncs in the background)" if wb.get("relaxed") else "")
    out = ["", style(title, "1"),
           f"    {wb['writes']:,} writes ({mib:,.1f} MiB) made by the background thread in "
           f"{wb['busy_seconds']:.3f} s; the program waited {wb['wait_seconds']:.3f} s for "
           f"pending writes; {wb['synchronous']:,} written at once (buffer full)",
           f"    overlap achieved: {hidden:.3f} s of the thread's I/O ran while the program "
           "went on"]
    if wb.get("errors"):
        out.append(style(f"  ! {wb['errors']:,} deferred write(s) failed: reported to the "
                         "program at its next fsync or close", LEVEL_STYLE["HIGH"]))  # fmt: skip
    return out


def background_block(ops: dict[str, Any], style: Style) -> list[str]:
    """Background I/O from each operation's queued, issued and completed times
    (write-behind's thread, the event-set engine's): the overlap achieved."""
    q = ops["queue_delay"]
    out = ["", style("  Background I/O", "1"),
           f"    {ops['operations']:,} operations ({ops['writes']:,} writes, "
           f"{ops['bytes'] / 2**20:,.1f} MiB; {ops['syncs']:,} syncs) made by background "
           f"threads in {ops['busy_seconds']:.3f} s",
           f"    overlap achieved: {ops['hidden_seconds']:.3f} s of that "
           f"({ops['overlap_share']:.0%}) ran while the program was not in an I/O call",
           f"    each operation waited {q['p50'] * 1e3:.2f} ms in the queue (median; 95th "
           f"percentile {q['p95'] * 1e3:.2f} ms, longest {q['max'] * 1e3:.2f} ms)"]  # fmt: skip
    if ops["failed"]:
        out.append(style(f"  ! {ops['failed']:,} background operation(s) failed",
                         LEVEL_STYLE["HIGH"]))  # fmt: skip
    return out


def settings_block(st: dict[str, Any], style: Style, *, verbose: bool = False) -> list[str]:
    """The "Settings applied" block: each setting with its outcome and how often; ignored
    and rejected ones said plainly, since the user asked for them."""
    out = ["", style(f"  Settings applied (from {st['file']})", "1")]
    for err in st["errors"]:
        out.append(style(f"  ! the settings file was not used: {err}", LEVEL_STYLE["HIGH"]))
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for e in st["outcomes"]:
        key = (e["setting"], e["value"], e["outcome"], e["detail"] or "")
        groups.setdefault(key, []).append(e)
    for (setting, value, outcome, detail), es in groups.items():
        calls = sum(e["count"] for e in es)
        where = sorted({_place(e) for e in es} - {""})
        places = (f" on {len(where)} file(s)/object(s)" if len(where) > 1
                  else f" on {where[0]}" if where else "")  # fmt: skip
        said = style(outcome.replace("_", " "), OUTCOME_STYLE.get(outcome, "0"))
        out.append(f"    {setting} = {value}: {said} ×{calls}{places}"
                   + (f" ({detail})" if detail else ""))  # fmt: skip
        if verbose and len(where) > 1:
            out += [style(f"      - {w}", "2") for w in where]
    refused: dict[str, int] = {}
    taken: dict[str, int] = {}
    for e in st["outcomes"]:
        if e["outcome"] in ("ignored", "rejected"):
            refused[e["setting"]] = refused.get(e["setting"], 0) + e["count"]
        elif e["outcome"] == "applied":
            taken[e["setting"]] = taken.get(e["setting"], 0) + e["count"]
    ignored = sorted(s for s in refused if s not in taken)
    if ignored:
        out.append(style(f"  ! the I/O stack did not take {', '.join(ignored)}: "
                         "they changed nothing in this run", LEVEL_STYLE["WARN"]))  # fmt: skip
    for s in sorted(s for s in refused if s in taken):
        out.append(style(f"  ! {s} was taken {taken[s]} time(s) and refused {refused[s]}: "
                         "see the reasons above", LEVEL_STYLE["WARN"]))  # fmt: skip
    if not st["outcomes"] and not st["errors"]:
        out.append(style("    nothing was applied: no call the settings apply to was made", "2"))
    if st.get("dropped"):
        out.append(style(f"  ! {st['dropped']} outcome(s) not recorded: the runtime's table "
                         "was full", "33"))  # fmt: skip
    return out


def _place(outcome: dict[str, Any]) -> str:
    """Where a setting was applied: the file's name and, for a dataset, its name
    in the file ("run.h5 /particles/x"), so two datasets' outcomes stay apart."""
    file, obj = outcome.get("file") or "", outcome.get("object") or ""
    if file and obj and obj != file:
        return f"{_short(file)} {obj}"
    return _short(file or obj) if file or obj else ""


def io_headline(it: dict[str, Any]) -> str:
    """"0.52 s on the slowest rank (rank 3), 27.1 % of the 1.92 s run; MPI-IO 0.5 s"."""
    text = f"{it['slowest_rank_seconds']:.3g} s on the slowest rank (rank {it['slowest_rank']})"
    if it["share"] is not None:
        text += f", {100 * it['share']:.1f} % of the {it['run_seconds']:.3g} s run"
    layers = sorted(((v, k) for k, v in it["by_layer"]["slowest_rank"].items() if v > 0),
                    reverse=True)  # fmt: skip
    if layers:
        text += "; " + ", ".join(f"{k} {v:.3g} s" for v, k in layers)
    return text


def set_aside_line(aside: dict[str, Any]) -> str:
    """"1,310 runtime and library file(s): 14.7 MiB read, ... (Python bytecode 900, ...)"."""
    why = ", ".join(f"{r['reason']} {r['files']:,}" for r in aside["reasons"])
    scope = aside["scope"]
    what = "runtime and library file(s)" if scope["defaults"] else "file(s)"
    if scope["exclude"] or scope["env_exclude"] or scope["include_only"]:
        what = "runtime, library and excluded file(s)" if scope["defaults"] else "excluded file(s)"
    hint = ("; --no-default-excludes keeps the runtime and library files" if scope["defaults"]
            else "")  # fmt: skip
    return (f"{aside['files']:,} {what}: "
            f"{human_size(aside['bytes_read'])} read, {human_size(aside['bytes_written'])} "
            f"written, {aside['operations']:,} operations, {aside['seconds']:.3g} s "
            f"({why}){hint}")  # fmt: skip


def printable(o: Any, key: str = "") -> Any:
    """The report with every string safe to print: names from a trace may hold
    any byte, escape sequences included (snippets keep their line breaks)."""
    if isinstance(o, str):
        return safe_name(o, multiline=key == "snippet")
    if isinstance(o, dict):
        return {printable(k): printable(v, k) for k, v in o.items()}
    if isinstance(o, list):
        return [printable(v) for v in o]
    return o


def site_line(loc: dict[str, Any]) -> str:
    """A call site of a finding: ``main.c:42 write_rows — 4,096 calls, 1.23 s``,
    and why it is vague when it is (no debug information ...)."""
    where = loc.get("label") or f"{loc['file']}:{loc['line']} {loc['function']}".strip()
    text = f"{where} — {loc['calls']:,} call{'' if loc['calls'] == 1 else 's'}, "
    text += f"{_secs(float(loc['seconds']))} s"
    return text + (f" ({loc['note']})" if loc.get("note") else "")


def _secs(v: float) -> str:
    """Seconds without an exponent: 340,776 and 0.0345."""
    return f"{v:,.0f}" if v >= 1000 else _fmt(float(v))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def render_summary(rows: list[dict[str, Any]], errors: list[dict[str, str]], style: Style) -> str:
    """One line per log, after the individual reports."""
    rows, errors = printable(rows), printable(errors)
    lines = ["", style("summary", "1")]
    width = max([len(_short(r["source"])) for r in rows] + [len(_short(e["path"])) for e in errors]
                + [3])  # fmt: skip
    lines.append(f"  {'log':<{width}}  {'ranks':>6}  {'HIGH':>4}  {'WARN':>4}  {'INFO':>4}  data")
    for r in rows:
        c = r["counts"]
        data = "partial" if r["partial"] else "complete"
        lines.append(
            f"  {_short(r['source']):<{width}}  {r['job']['nprocs']:>6}  "
            + style(f"{c['HIGH']:>4}", LEVEL_STYLE["HIGH"] if c["HIGH"] else "0")
            + "  "
            + style(f"{c['WARN']:>4}", LEVEL_STYLE["WARN"] if c["WARN"] else "0")
            + f"  {c['INFO']:>4}  {data}"
        )
    for e in errors:
        lines.append(f"  {_short(e['path']):<{width}}  " + style(f"error: {e['reason']}", "31"))
    return "\n".join(lines) + "\n"


def _short(path: str) -> str:
    base = os.path.basename(path)
    return base if len(base) <= 60 else base[:57] + "..."


def write(text: str, stream: TextIO | None = None) -> None:
    (stream or sys.stdout).write(text)
