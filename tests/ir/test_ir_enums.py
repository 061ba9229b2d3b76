"""IR enum and literal values are exactly the seed's lists (order included)."""

from __future__ import annotations

from typing import get_args

from sidecar.ir import (
    IR_ENUMS,
    MetonaErrorCode,
    MetonaFinishReason,
    MetonaImageDetail,
    MetonaMemorySource,
    MetonaMemoryType,
    MetonaParamType,
    MetonaRiskLevel,
    MetonaRole,
    MetonaStreamEventType,
    MetonaThinkingEffort,
    MetonaThinkingStatus,
    MetonaToolCategory,
)


def values(enum: type) -> list[str]:
    return [m.value for m in enum]


def test_error_codes() -> None:
    assert values(MetonaErrorCode) == [
        "network_timeout",
        "network_error",
        "auth_invalid",
        "auth_expired",
        "rate_limited",
        "quota_exceeded",
        "model_overloaded",
        "model_not_found",
        "context_length_exceeded",
        "output_length_exceeded",
        "content_filtered",
        "parse_error",
        "invalid_response",
        "max_iterations",
        "user_aborted",
        "timeout",
        "unknown",
    ]
    assert all(m.name.lower() == m.value for m in MetonaErrorCode)


def test_finish_reasons() -> None:
    assert values(MetonaFinishReason) == ["stop", "length", "tool_calls", "content_filter", "error"]


def test_stream_event_types() -> None:
    assert values(MetonaStreamEventType) == [
        "text_delta",
        "reasoning_delta",
        "tool_call_delta",
        "tool_call_complete",
        "thinking_start",
        "thinking_end",
        "error",
        "done",
        "usage",
    ]


def test_tool_categories_and_risk_levels() -> None:
    assert values(MetonaToolCategory) == [
        "filesystem",
        "search",
        "calculation",
        "code_execution",
        "network",
        "database",
        "mcp",
        "custom",
    ]
    assert values(MetonaRiskLevel) == ["safe", "low", "medium", "high", "critical"]


def test_enum_names_match_values() -> None:
    for enum in IR_ENUMS:
        for member in enum:
            assert member.name == member.value.upper()
            assert member == member.value  # StrEnum: compares and serialises as the plain string


def test_literals() -> None:
    assert get_args(MetonaRole) == ("system", "user", "assistant", "tool")
    assert get_args(MetonaImageDetail) == ("low", "high", "auto")
    assert get_args(MetonaParamType) == ("string", "number", "boolean", "object", "array")
    assert get_args(MetonaThinkingEffort) == ("low", "medium", "high", "max")
    assert get_args(MetonaThinkingStatus) == ("thinking", "complete")
    assert get_args(MetonaMemoryType) == ("episodic", "semantic", "working")
    assert get_args(MetonaMemorySource) == ("user_input", "tool_result", "agent_thought", "imported")
