"""Every program of the corpus (corpus/<case>/case.toml) traced in its mistake
mode: the first WARN/HIGH finding is the labelled mistake, its snippet holds
the labelled advice, and the snippet is in the program's language.

Cases are collected from the corpus when the tests are collected, so a new
case is a new test.  Deterministic only: the timings are ``iopilot bench
accuracy``'s.  A missing compiler or module fails its case (``make test``
installs everything); a bad case file fails as its own test.
"""

from __future__ import annotations

import re

import pytest

from iopilot.bench.accuracy import language_right
from iopilot.bench.corpus import (
    CORPUS_DIR,
    Case,
    build,
    first_finding,
    load_corpus,
    traced_diagnosis,
)

CASES, BAD = load_corpus(CORPUS_DIR)


def test_every_case_file_is_valid():
    assert CASES or BAD, f"no case.toml under {CORPUS_DIR}"
    assert not BAD, "bad case file(s):\n" + "\n".join(str(e) for e in BAD)


# The kind of call each expected finding is about, as text on the labelled
# line (case-insensitive; any language): a new check in the corpus adds its own.
_CALLS = {
    "posix-small-writes": r"\bwrite\b|\.write\(|<<",
    "posix-small-reads": r"\bread\b|\.read\(",
    "posix-random-reads": r"\bp?read\b|\.read\(",
    "posix-redundant-reads": r"\.read\(|\bread\b|fromfile|loadtxt",
    "posix-misaligned-file": r"\bp?write\b",
    "flush-per-step": r"fsync|H5Fflush|\.sync\(|\.flush\(",
    "reopened-files": r"\bf?open\b|h5py\.File\(|read_csv|to_csv|loadtxt",
    "tiny-files": r"\bopen\b|np\.save\(",
    "stdio-time": r"fprintf|fwrite|fputs",
    "fortran-element-io": r"^\s*write\s*\(",
    "fortran-formatted-io": r"^\s*write\s*\(",
    "hdf5-chunking": r"H5Dwrite|H5Dread|\bdset\[",
    "hdf5-chunk-cache": r"H5Dwrite|H5Dread|\bdset\[",
    "hdf5-small-dataset-access": r"h5dwrite_f|h5dread_f|H5Dwrite|H5Dread|\bdset\[",
    "static-layers": r"H5Dwrite|H5Dread",
    "mpiio-collective-writes": r"write_at\b|Write_at\(",
    "mpiio-cb-disabled": r"MPI_File_write_all",
    "rank-zero-heavy": r"\bp?write\b|\.write\(",
}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_line_holds_the_mistakes_call(case: Case):
    assert case.line is not None, f"{case.name}: case.toml has no line = N"
    text = case.source.read_text().splitlines()[case.line - 1]
    assert case.expect in _CALLS, f"{case.name}: no call pattern for {case.expect} in _CALLS"
    assert re.search(_CALLS[case.expect], text, re.IGNORECASE), \
        f"{case.name}: {case.source.name}:{case.line} is {text.strip()!r}, not a call " \
        f"that {case.expect} is about"


def test_the_call_patterns_tell_lines_apart():
    """The patterns refuse a line that is not the call: a comment-free
    declaration, a loop header."""
    assert not re.search(_CALLS["posix-small-writes"], "for (i = 0; i < N; i++)", re.I)
    assert not re.search(_CALLS["flush-per-step"], "H5Dwrite(dset, t, m, f, p, buf);", re.I)
    assert not re.search(_CALLS["fortran-element-io"], "  do i = 1, n", re.I)
    assert re.search(_CALLS["fortran-element-io"], "      write (u) a(i)", re.I)


def _summary(report: dict) -> str:
    """The WARN/HIGH findings in order, for a failure message."""
    rows = [f"  {f['level']} {f['check']} (at stake {f['cost_seconds']}, "
            f"snippet {f['snippet_lang']})"
            for f in report["findings"] if f["level"] in ("WARN", "HIGH")]  # fmt: skip
    return "\n".join(rows) or "  (no WARN/HIGH finding)"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_mistake_is_the_first_finding(case: Case):
    needs = case.needs()
    assert not needs, f"{case.name} needs {', '.join(needs)} (`make test` installs it)"
    report = traced_diagnosis(case, build(case), "mistake")
    first = first_finding(report)
    expect, advice, language = case.expect, case.advice, case.language
    seen = f"{case.name}: WARN/HIGH findings of the mistake:\n{_summary(report)}"
    assert first is not None and first["check"] == expect, seen
    snippet = first["snippet"] or ""
    if advice:
        assert advice in snippet, f"{seen}\nits snippet lacks {advice!r}:\n{snippet}"
    assert language_right(language, first), \
        f"{seen}\nadvice in {first['snippet_lang']!r}, the program is {language}"
