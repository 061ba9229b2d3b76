"""Wire rules: camelCase, absent optionals omitted (never null), unknown keys ignored, bad input refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from sidecar.ir import (
    MetonaContext,
    MetonaError,
    MetonaGenerationParams,
    MetonaMemoryItem,
    MetonaMessage,
    MetonaModelInfo,
    MetonaRequest,
    MetonaResponse,
    MetonaResponseMeta,
    MetonaTokenUsage,
    MetonaToolCall,
    MetonaToolDef,
    MetonaToolResult,
)

META = {"requestId": "r", "provider": "ollama", "model": "qwen3", "latencyMs": 12, "timestamp": 1}
USAGE = {"inputTokens": 1, "outputTokens": 2, "totalTokens": 3}


def response(**extra: Any) -> dict[str, Any]:
    return {"meta": META, "content": "hi", "usage": USAGE, "finishReason": "stop", **extra}


def tool_result(**extra: Any) -> dict[str, Any]:
    return {"toolCallId": "tc", "toolName": "t", "success": True, "durationMs": 1, "timestamp": 2, **extra}


# ---- omission ---------------------------------------------------------------------------------------


def test_absent_optionals_are_omitted_without_exclude_none() -> None:
    msg = MetonaMessage(role="user", content="hi", timestamp=5)
    assert msg.model_dump(mode="json", by_alias=True) == {"role": "user", "content": "hi", "timestamp": 5}
    assert msg.model_dump() == {"role": "user", "content": "hi", "timestamp": 5}
    assert msg.model_dump_json() == '{"role":"user","content":"hi","timestamp":5}'
    assert MetonaGenerationParams().model_dump(mode="json") == {}


def test_type_adapter_dumps_omit_absent_fields_too() -> None:
    msgs = [MetonaMessage(role="user", content="a", timestamp=1), MetonaMessage(role="tool", content="", timestamp=2)]
    adapter = TypeAdapter(list[MetonaMessage])
    expected = [{"role": "user", "content": "a", "timestamp": 1}, {"role": "tool", "content": "", "timestamp": 2}]
    assert adapter.dump_python(msgs, mode="json", by_alias=True) == expected
    assert json.loads(adapter.dump_json(msgs, by_alias=True)) == expected


def test_nested_models_omit_their_own_absent_fields() -> None:
    resp = MetonaResponse.model_validate(response(meta={**META, "perfStats": {"tokensPerSecond": 42.5}}))
    assert resp.model_dump(mode="json") == response(meta={**META, "perfStats": {"tokensPerSecond": 42.5}})


def test_explicit_none_on_an_ordinary_optional_is_still_omitted() -> None:
    result = MetonaToolResult(
        tool_call_id="tc", tool_name="t", result=1, success=True, duration_ms=1, timestamp=2, summary=None
    )
    assert "summary" not in result.model_dump(mode="json")
    parsed = MetonaMessage.model_validate({"role": "user", "content": "x", "timestamp": 1, "iteration": None})
    assert parsed.model_dump(mode="json") == {"role": "user", "content": "x", "timestamp": 1}


def test_explicit_null_result_is_kept() -> None:
    result = MetonaToolResult.model_validate(tool_result(result=None))
    assert result.model_dump(mode="json") == tool_result(result=None)
    built = MetonaToolResult(tool_call_id="tc", tool_name="t", result=None, success=True, duration_ms=1, timestamp=2)
    assert json.loads(built.model_dump_json()) == tool_result(result=None)


def test_structured_output_null_kept_only_when_set() -> None:
    assert "structuredOutput" not in MetonaResponse.model_validate(response()).model_dump(mode="json")
    explicit = MetonaResponse.model_validate(response(structuredOutput=None))
    assert explicit.model_dump(mode="json") == response(structuredOutput=None)
    assert explicit.model_dump_json().endswith('"finishReason":"stop"}')
    assert '"structuredOutput":null' in explicit.model_dump_json()
    value = MetonaResponse.model_validate(response(structuredOutput={"a": [1, None]}))
    assert value.model_dump(mode="json") == response(structuredOutput={"a": [1, None]})


def test_exclude_and_exclude_unset_still_work() -> None:
    resp = MetonaResponse.model_validate(response(reasoningContent="r"))
    assert resp.model_dump(mode="json", exclude={"usage", "meta"}) == {
        "content": "hi",
        "reasoningContent": "r",
        "finishReason": "stop",
    }
    assert MetonaGenerationParams(stream=True).model_dump(exclude_unset=True) == {"stream": True}


# ---- input ------------------------------------------------------------------------------------------


def test_field_names_and_aliases_both_populate() -> None:
    by_alias = MetonaTokenUsage.model_validate({"inputTokens": 1, "outputTokens": 2, "totalTokens": 3})
    by_name = MetonaTokenUsage(input_tokens=1, output_tokens=2, total_tokens=3)
    assert by_alias == by_name
    assert by_name.model_dump() == {"inputTokens": 1, "outputTokens": 2, "totalTokens": 3}
    assert by_name.model_dump(by_alias=False) == {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}


def test_unknown_keys_are_ignored() -> None:
    usage = MetonaTokenUsage.model_validate({**USAGE, "futureField": 7})
    assert usage.model_dump(mode="json") == USAGE


# ---- rejection --------------------------------------------------------------------------------------

TOOL_DEF = {
    "name": "read_file",
    "description": "d",
    "parameters": {"type": "object", "properties": {"p": {"type": "string", "description": "x"}}},
    "category": "filesystem",
    "riskLevel": "low",
    "requiresPermission": False,
    "timeoutMs": 1000,
}
MEMORY = {"id": "m", "type": "semantic", "content": "c", "source": "imported", "importance": 0.5, "createdAt": 1}


@pytest.mark.parametrize(
    ("model", "data"),
    [
        (MetonaResponse, response(finishReason="finished")),
        (MetonaError, {"code": "RATE_LIMITED", "message": "m", "retryable": True}),
        (MetonaError, {"code": "teapot", "message": "m", "retryable": True}),
        (MetonaToolDef, {**TOOL_DEF, "category": "filesystems"}),
        (MetonaToolDef, {**TOOL_DEF, "riskLevel": "extreme"}),
        (MetonaToolDef, {**TOOL_DEF, "parameters": {"type": "array", "properties": {}}}),
        (MetonaToolDef, {**TOOL_DEF, "parameters": {"type": "object", "properties": {"p": {"type": "integer"}}}}),
        (MetonaMessage, {"role": "bot", "content": "", "timestamp": 1}),
        (MetonaMessage, {"role": "user", "content": "", "timestamp": 1, "images": [{"url": "u", "detail": "mid"}]}),
        (MetonaGenerationParams, {"thinkingEffort": "extreme"}),
        (MetonaGenerationParams, {"topP": 1.5}),
        (MetonaMemoryItem, {**MEMORY, "importance": 1.5}),
        (MetonaMemoryItem, {**MEMORY, "importance": -0.1}),
        (MetonaMemoryItem, {**MEMORY, "type": "procedural"}),
        (MetonaMemoryItem, {**MEMORY, "source": "web"}),
    ],
)
def test_bad_values_are_rejected(model: type, data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        model.model_validate(data)


@pytest.mark.parametrize(
    ("model", "data", "missing"),
    [
        (MetonaToolResult, tool_result(), "result"),
        (MetonaMessage, {"role": "user", "content": "x"}, "timestamp"),
        (MetonaToolCall, {"id": "tc_1", "name": "read_file", "args": {}, "iteration": 1}, "timestamp"),
        (MetonaResponse, {"meta": META, "content": "x", "usage": USAGE}, "finishReason"),
        (MetonaResponseMeta, {k: v for k, v in META.items() if k != "latencyMs"}, "latencyMs"),
        (MetonaModelInfo, {"id": "m", "providerId": "p"}, "displayName"),
        (MetonaRequest, {"meta": {}, "systemPrompt": {}, "messages": []}, "params"),
        (MetonaContext, {"id": "c"}, "sessionId"),
    ],
)
def test_missing_required_field_is_rejected(model: type, data: dict[str, Any], missing: str) -> None:
    with pytest.raises(ValidationError) as exc:
        model.model_validate(data)
    assert any(err["loc"] == (missing,) and err["type"] == "missing" for err in exc.value.errors())


def test_valid_memory_item_boundaries() -> None:
    for importance in (0, 1, 0.25):
        item = MetonaMemoryItem.model_validate({**MEMORY, "importance": importance})
        assert item.model_dump(mode="json") == {**MEMORY, "importance": importance}
