"""Tiny hand-made models for check tests: a few rows in, known findings out."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pytest

from iopilot.model import RECORD_LAYERS, Counters, Job, ModuleInfo, Records, Striping, Trace
from iopilot.sources.darshan_library import counter_names

_PREFIX = {"MPIIO": "mpiio", "H5F": "h5f", "H5D": "h5d"}


def counters(layer: str, rows: Iterable[Mapping[str, float]]) -> Counters:
    """A counters table of ``layer`` with Darshan's counter names.

    Each row is a mapping with ``file`` (int id), ``rank`` and any counters;
    the rest are zero.  ``parent`` sets the file of H5D/PNETCDF_VAR rows.
    """
    prefix = _PREFIX.get(layer, layer.lower())
    inames, fnames = counter_names(prefix), counter_names(prefix + "_f")
    rows = list(rows)
    ints = np.zeros((len(rows), len(inames)), np.int64)
    floats = np.zeros((len(rows), len(fnames)), np.float64)
    for i, r in enumerate(rows):
        for k, v in r.items():
            if k in ("file", "rank", "parent"):
                continue
            if k in inames:
                ints[i, inames.index(k)] = v
            elif k in fnames:
                floats[i, fnames.index(k)] = v
            else:
                raise KeyError(f"{layer} has no counter {k}")
    parent = None
    if layer in ("H5D", "PNETCDF_VAR"):
        parent = np.array([r.get("parent", 0) for r in rows], np.uint64)
    return Counters(
        layer,
        np.array([r.get("file", 1) for r in rows], np.uint64),
        np.array([r.get("rank", 0) for r in rows], np.int64),
        ints,
        floats,
        inames,
        fnames,
        parent,
    )


def records(rows: Iterable[tuple], layer: str = "POSIX") -> Records:
    """Records from (rank, op, file, offset, length, start, end) tuples; op 'r' or 'w'."""
    rows = list(rows)
    col = list(zip(*rows, strict=True)) if rows else [()] * 7
    return Records(
        rank=np.array(col[0], np.int32),
        layer=np.full(len(rows), RECORD_LAYERS.index(layer), np.uint8),
        op=np.array([1 if o == "w" else 0 for o in col[1]], np.uint8),
        file_id=np.array(col[2], np.uint64),
        offset=np.array(col[3], np.int64),
        length=np.array(col[4], np.int64),
        start=np.array(col[5], np.float64),
        end=np.array(col[6], np.float64),
    )


def striping(rows: Iterable[tuple[int, int, list[int]]]) -> Striping:
    """Lustre layout from (file, stripe size, OST list) tuples."""
    rows = list(rows)
    starts, osts = [], []
    for _, _, o in rows:
        starts.append(len(osts))
        osts.extend(o)
    return Striping(
        np.array([r[0] for r in rows], np.uint64),
        np.array([r[1] for r in rows], np.int64),
        np.array([len(r[2]) for r in rows], np.int64),
        np.array(starts, np.int64),
        np.array(osts, np.int64),
    )


def trace(*tables: Counters, recs: Records | None = None, nprocs: int = 1,
          names: Mapping[int, str] | None = None, lustre: Striping | None = None,
          mounts: list[tuple[str, str]] | None = None,
          hints: dict[str, str] | None = None,
          hosts: dict[int, str] | None = None) -> Trace:  # fmt: skip
    """A trace holding the given tables (and optional records)."""
    found = {int(i) for t in tables for i in t.file_id}
    if recs is not None:
        found |= {int(i) for i in recs.file_id}
    all_names = {i: f"/data/file{i}" for i in found}
    all_names.update(names or {})
    return Trace(
        source="<test>",
        job=Job(nprocs=nprocs, runtime=10.0, mounts=mounts or [], hints=hints,
                hosts=dict(hosts or {})),
        names=all_names,
        counters={t.layer: t for t in tables},
        records=recs if recs is not None else Records.empty(),
        lustre=lustre,
        modules=[ModuleInfo(t.layer) for t in tables],
    )


def findings(tr: Trace, check_id: str, **overrides: float):
    """Findings of one check on ``tr`` with default thresholds (plus overrides)."""
    from iopilot.checks import diagnose
    from iopilot.checks.thresholds import defaults

    values = defaults()
    # Hand-made traces hold little or no time: judge the check, not the job's
    # I/O share (tests of that cap set these themselves).
    values.update(high_min_io_seconds=0, high_min_io_share=0)
    values.update(overrides)
    d = diagnose(tr, values, only={check_id})
    assert not [w for w in d.warnings if "failed" in w], d.warnings
    for f in d.findings:
        keeps_contract(f)
    return d.findings


# Column labels are lower case; capitals only for these names and units.
CAPS = {"POSIX", "STDIO", "MPI-IO", "HDF5", "OST", "OSTs", "MiB", "KiB", "GiB", "MiB/s", "I/O"}
SNIPPET_LANGS = {"c", "c++", "python", "fortran", "sh", "toml", "text"}


def _label_ok(label: str) -> bool:
    words = re.split(r"[ ,()]+", label)
    return bool(label) and all(w in CAPS or w == w.lower() for w in words)


def keeps_contract(f) -> None:
    """What every finding promises, whatever the check (tests/test_findings_contract.py):
    sentences, snake_case evidence, lower-case column labels, a file table for
    the files it counts, snippets with their language, costs never negative."""
    from iopilot.checks import Level

    where = f"{f.check}: {f.message[:60]}"
    assert f.message[:1].isupper() or f.message[:1].isdigit(), where
    assert f.message.endswith("."), where
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", k) for k in f.evidence), (where, f.evidence)
    assert f.files_total >= len(f.files), where
    for fe in f.files:
        assert fe.path and fe.numbers and all(_label_ok(k) for k in fe.numbers), (where, fe)
    if f.level in (Level.HIGH, Level.WARN):
        assert f.recommendation.endswith("."), where
        first = f.recommendation.split()[0]
        assert first in CAPS or first[:1].isdigit() or (
            first[:1].isupper() and first[1:] == first[1:].lower()), (where, f.recommendation)
    if f.snippet:
        assert f.snippet_lang in SNIPPET_LANGS and f.snippet.strip(), where
    else:
        assert f.snippet_lang == "", where
    assert f.cost_seconds is None or f.cost_seconds >= 0, where
    assert f.drishti is None or re.fullmatch(r"[A-Z]\d\d", f.drishti), where


def only(fs, level=None):
    """The one finding of ``fs`` (at ``level``, if given)."""
    assert len(fs) == 1, fs
    if level is not None:
        assert fs[0].level == level, fs[0]
    return fs[0]


# The shared corpus of real Darshan logs sits beside the project; the first
# ancestor that has it wins, so a copy of the tests one level deeper (the
# mutants/ tree of `make mutation`) finds the same logs.
SHARED = next((p / "shared" / "darshan-logs" for p in Path(__file__).resolve().parents[1:]
               if (p / "shared" / "darshan-logs").is_dir()),
              Path(__file__).resolve().parents[2] / "shared" / "darshan-logs")  # fmt: skip
CORPUS_ABSENT = f"shared log corpus not present: {SHARED}"


def shared_logs(pattern: str = "*.darshan", keep=None) -> list:
    """Names of the corpus logs matching ``pattern`` (and ``keep(name)``, if
    given), as test parameters; without the corpus, one skipped parameter, so
    the test shows as skipped instead of not being collected at all."""
    if SHARED.is_dir():
        return sorted(p.name for p in SHARED.glob(pattern) if keep is None or keep(p.name))
    return [pytest.param(None, marks=pytest.mark.skip(reason=CORPUS_ABSENT))]


def killed_after_durable_steps(cmd: list[str], path, steps: int, env=None) -> int:
    """Run ``cmd`` (a program printing "durable K" after step K's bytes are
    synced: 1 MiB of the byte K % 251 at K MiB of ``path``), SIGKILL it once
    ``steps`` steps are durable, and check every durable step's bytes.
    Returns the last durable step."""
    import os
    import signal
    import subprocess
    import time

    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout is not None
    last, deadline = -1, time.monotonic() + 60
    while last < steps and time.monotonic() < deadline:
        line = p.stdout.readline()
        if line.startswith("durable"):
            last = int(line.split()[1])
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert last >= steps
    data = open(path, "rb").read()
    for step in range(last + 1):
        assert data[step << 20:(step + 1) << 20] == bytes([step % 251]) * (1 << 20), step
    return last


_PAGE_SCRIPTS = Path(__file__).resolve().parents[1] / "src" / "iopilot" / "report"


def unread_view_keys(views: Mapping) -> dict[str, str]:
    """{key: where} for each key of the views' page data that no page
    script reads (as ``.key``, ``["key"]``, ``'key'`` or ``key:``).  Keys
    that are names (``POSIX``, ``MPI_BARRIER``: upper case) key a map the
    script walks, and ``X_bytes`` is read as ``X + '_bytes'``."""
    js = "".join(p.read_text(encoding="utf-8") for p in _PAGE_SCRIPTS.rglob("*.js"))

    def read(k: str) -> bool:
        e = re.escape(k)
        if re.search(rf"\.{e}\b|\[['\"]{e}['\"]\]|['\"]{e}['\"]|\b{e}\s*:", js):
            return True
        return k.endswith("_bytes") and "'_bytes'" in js and read(k.removesuffix("_bytes"))

    out: dict[str, str] = {}

    def walk(o: object, where: str) -> None:
        if isinstance(o, Mapping):
            if "$b64" in o:  # a packed array
                return
            for k, v in o.items():
                if not re.fullmatch(r"[A-Z0-9_-]+", k) and not read(k):
                    out.setdefault(k, where)
                walk(v, f"{where}.{k}")
        elif isinstance(o, list):
            for v in o:
                walk(v, where + "[]")

    for name, v in views.items():
        walk(v, name)
    return out
