"""The conformance report: one row per (target, case) — provider target, preset, protocol, model, case, outcome,
run time, skip/failure reason — written to ``build/conformance/report.{json,md}`` at the end of a session that
ran conformance tests, summarised in pytest's terminal summary, and copied to ``tests/conformance/REPORT.md``
(the committed report) when ``METONA_CONFORMANCE_REPORT=update`` is set.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from .report import ReportRow, build_rows, summary_lines, write_reports


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "live: real-network provider call (needs METONA_LIVE_<VENDOR>_API_KEY)")
    config.stash[_ROWS] = {}


_ROWS = pytest.StashKey[dict[str, ReportRow]]()


def _row_for(item: pytest.Item) -> ReportRow | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    params = callspec.params
    if "pair" in params:
        return ReportRow.for_pair(params["pair"])
    if "live_target" in params:
        return ReportRow.for_live(params["live_target"])
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    rows = item.config.stash[_ROWS]
    row = rows.get(item.nodeid) or _row_for(item)
    if row is None:
        return report
    rows[item.nodeid] = row
    row.record(report, dict(item.user_properties))
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    rows = list(session.config.stash.get(_ROWS, {}).values())
    if rows:
        write_reports(build_rows(rows), update_committed=os.environ.get("METONA_CONFORMANCE_REPORT") == "update")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    rows = list(config.stash.get(_ROWS, {}).values())
    if not rows:
        return
    terminalreporter.write_sep("=", "provider conformance")
    for line in summary_lines(build_rows(rows)):
        terminalreporter.write_line(line)
