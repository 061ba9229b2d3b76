"""The conformance report (phase-2 §8.3: provider type, model, protocol, run time, skip reason): rows, files,
the terminal summary, and the reader of the committed copy ``tests/conformance/REPORT.md``."""

from __future__ import annotations

import datetime
import json
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .suite import HERE, PAIRS, ROOT, TARGETS_BY_NAME, Pair

BUILD_DIR = ROOT / "build" / "conformance"
COMMITTED = HERE / "REPORT.md"
COLUMNS = ("target", "preset", "protocol", "model", "case", "outcome", "ms", "reason")
LIVE_CASE_ID = "live-plain-text"


@dataclass
class ReportRow:
    target: str
    preset: str
    protocol: str
    model: str
    case: str
    outcome: str = "skip"
    ms: float = 0.0
    reason: str = ""
    capabilities_from: str = ""
    """Where the model's capabilities (which decide capability skips) come from: the preset, or the target."""

    @classmethod
    def for_pair(cls, pair: Pair) -> ReportRow:
        return cls(**pair.row())

    @classmethod
    def for_live(cls, live: Any) -> ReportRow:
        target = TARGETS_BY_NAME[live.target]
        return cls(
            target.name, target.preset, target.protocol, live.model or "", LIVE_CASE_ID, capabilities_from="live"
        )

    def record(self, report: Any, properties: dict[str, Any]) -> None:
        """Fold one phase report (setup / call / teardown) into the row."""
        if report.when == "call":
            self.ms = round(report.duration * 1000, 1)
        if report.skipped:
            self.outcome = "skip"
            self.reason = _skip_reason(report.longrepr)
        elif report.failed:
            self.outcome = "fail"
            problems = properties.get("problems")
            if problems:
                self.reason = "; ".join(problems)
            else:
                crash = getattr(report.longrepr, "reprcrash", None)
                self.reason = crash.message if crash is not None else str(report.longrepr).splitlines()[-1]
        elif report.when == "call":
            self.outcome = "pass"
            self.reason = ""


def _skip_reason(longrepr: Any) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = str(longrepr[2])
        return reason.removeprefix("Skipped: ")
    return str(longrepr)


def build_rows(rows: list[ReportRow]) -> list[ReportRow]:
    order = {name: i for i, name in enumerate(TARGETS_BY_NAME)}
    return sorted(rows, key=lambda r: (order.get(r.target, 99), r.case == LIVE_CASE_ID, r.case))


def totals(rows: list[ReportRow]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        counts = out.setdefault(row.target, {"pass": 0, "fail": 0, "skip": 0})
        counts[row.outcome] += 1
    return out


def render_markdown(rows: list[ReportRow], generated_at: str) -> str:
    count = Counter(r.outcome for r in rows)
    lines = [
        "# Provider conformance report",
        "",
        f"Generated {generated_at} by `pytest tests/conformance` (regenerate this copy with "
        "`METONA_CONFORMANCE_REPORT=update .venv/bin/python -m pytest tests/conformance`). "
        f"{len(rows)} pairs{_partial(rows)}: {count['pass']} pass, {count['fail']} fail, {count['skip']} skip. "
        "Cases: `tests/conformance/cases/`; recordings: `tests/providers/recordings/<target>/`.",
        "",
        "## Summary",
        "",
        "| target | preset | protocol | pass | fail | skip |",
        "|---|---|---|---|---|---|",
    ]
    for target, counts in totals(rows).items():
        t = TARGETS_BY_NAME[target]
        lines.append(
            f"| {target} | {t.preset} | {t.protocol} | {counts['pass']} | {counts['fail']} | {counts['skip']} |"
        )
    declared = sorted({f"{r.target} {r.model}" for r in rows if r.capabilities_from.startswith("declared")})
    if declared:
        lines += ["", "Capabilities declared by the suite (the preset lists no models): " + ", ".join(declared) + "."]
    lines += ["", "## Results", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        cells = [str(getattr(row, c)) for c in COLUMNS]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _partial(rows: list[ReportRow]) -> str:
    run = sum(1 for r in rows if r.case != LIVE_CASE_ID)
    return f" (a partial run: {run} of the suite's {len(PAIRS)} offline pairs)" if run < len(PAIRS) else ""


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def write_reports(rows: list[ReportRow], *, update_committed: bool) -> None:
    generated_at = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    data = {"generated_at": generated_at, "totals": totals(rows), "rows": [asdict(r) for r in rows]}
    (BUILD_DIR / "report.json").write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    markdown = render_markdown(rows, generated_at)
    (BUILD_DIR / "report.md").write_text(markdown, encoding="utf-8")
    if update_committed:
        COMMITTED.write_text(markdown, encoding="utf-8")


def summary_lines(rows: list[ReportRow]) -> list[str]:
    lines = [f"{'target':<16} {'protocol':<10} {'pass':>4} {'fail':>4} {'skip':>4}"]
    for target, counts in totals(rows).items():
        protocol = TARGETS_BY_NAME[target].protocol
        lines.append(f"{target:<16} {protocol:<10} {counts['pass']:>4} {counts['fail']:>4} {counts['skip']:>4}")
    for row in rows:
        if row.outcome == "fail":
            lines.append(f"FAIL {row.target}::{row.case} ({row.model}): {row.reason[:300]}")
    lines.append(f"report: {(BUILD_DIR / 'report.md').relative_to(ROOT)}")
    return lines


def committed_pairs(path: Path = COMMITTED) -> set[tuple[str, str]]:
    """(target, case) of each row of the Results table of a report file."""
    pairs: set[tuple[str, str]] = set()
    in_results = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            in_results = line.strip() == "## Results"
            continue
        if not in_results or not line.startswith("| ") or line.startswith("| target "):
            continue
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if len(cells) == len(COLUMNS):
            pairs.add((cells[0], cells[4]))
    return pairs
