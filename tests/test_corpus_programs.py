"""Every program of the corpus (corpus/<case>/case.toml) traced in its mistake
mode: the first WARN/HIGH finding is the labelled mistake, its snippet holds
the labelled advice, and the snippet is in the program's language.

Cases are collected from the corpus when the tests are collected, so a new
case is a new test.  Deterministic only: the timings are ``iopilot bench
accuracy``'s.  A missing compiler or module fails its case (``make test``
installs everything); a bad case file fails as its own test.
"""

from __future__ import annotations

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
