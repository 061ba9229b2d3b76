"""The committed report (tests/conformance/REPORT.md) lists exactly the (target, case) pairs the suite runs, so it
cannot silently rot when a case or a target is added or removed."""

from __future__ import annotations

import os

import pytest

from .report import COMMITTED, LIVE_CASE_ID, committed_pairs
from .suite import PAIRS
from .test_live import LIVE_TARGETS


def suite_pairs() -> set[tuple[str, str]]:
    pairs = {(p.target.name, p.case.id) for p in PAIRS}
    return pairs | {(t.target, LIVE_CASE_ID) for t in LIVE_TARGETS}


@pytest.mark.skipif(
    os.environ.get("METONA_CONFORMANCE_REPORT") == "update", reason="REPORT.md is rewritten at the end of this run"
)
def test_committed_report_lists_the_pairs_the_suite_runs() -> None:
    assert COMMITTED.exists(), f"{COMMITTED} is missing: METONA_CONFORMANCE_REPORT=update pytest tests/conformance"
    committed = committed_pairs()
    expected = suite_pairs()
    assert committed == expected, (
        f"REPORT.md is stale: missing {sorted(expected - committed)}, extra {sorted(committed - expected)}; "
        "regenerate it with METONA_CONFORMANCE_REPORT=update .venv/bin/python -m pytest tests/conformance"
    )


def test_the_report_reader_sees_every_row(tmp_path) -> None:  # the reader itself can fail
    report = tmp_path / "REPORT.md"
    report.write_text(
        "# r\n\n## Summary\n\n| target | preset | protocol | pass | fail | skip |\n|---|---|---|---|---|---|\n"
        "| x | p | openai | 1 | 0 | 0 |\n\n## Results\n\n"
        "| target | preset | protocol | model | case | outcome | ms | reason |\n|---|---|---|---|---|---|---|---|\n"
        "| deepseek | deepseek | openai | m | provider-a | pass | 1.0 |  |\n"
        "| ollama | ollama | ollama | q | provider-b | fail | 2.0 | a \\| b |\n",
        encoding="utf-8",
    )
    assert committed_pairs(report) == {("deepseek", "provider-a"), ("ollama", "provider-b")}
