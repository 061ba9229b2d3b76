"""Issue 21, permissions: a benchmark answers only what the case consented to, never a risky plugin tool."""

from __future__ import annotations

import pytest

from sidecar.benchmarks.agent_run import BenchmarkBroker


@pytest.mark.parametrize(
    ("tool", "permission", "risk", "decision"),
    [
        ("write_file", "filesystem.write", "high", "allow_once"),  # listed by the case: its consent
        ("calculator", "", "safe", "allow_once"),
        ("http_get", "network", "medium", "deny"),  # not listed: never approved
        ("fixture.wipe", "plugin.fixture.tools", "high", "deny"),  # listed, but a high-risk plugin tool
        ("fixture.burn", "plugin.fixture.tools", "critical", "deny"),
        ("fixture.shout", "plugin.fixture.tools", "medium", "allow_once"),
        ("fixture.other", "plugin.fixture.tools", "medium", "deny"),
    ],
)
def test_the_benchmark_broker_answers_by_consent_and_risk(tool: str, permission: str, risk: str, decision: str) -> None:
    broker = BenchmarkBroker(["write_file", "calculator", "fixture.wipe", "fixture.burn", "fixture.shout"])
    request = broker.open("run_1", "bench_1", tool_call_id="c1", tool_name=tool, permission=permission,
                          risk_level=risk)  # fmt: skip
    assert (request.decision, request.source) == (decision, "benchmark")


def test_a_case_without_allowed_tools_approves_nothing() -> None:
    request = BenchmarkBroker(None).open("r", "s", tool_call_id="c", tool_name="write_file", permission="fs",
                                         risk_level="high")  # fmt: skip
    assert request.decision == "deny"
