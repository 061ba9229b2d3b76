"""The OpenAI-compatible Chat Completions adapter (presets ``deepseek``, ``agnes-ai`` over its OpenAI-compatible
protocol, ``openai``), replaying the recorded vendor answers in ``recordings/{deepseek,agnes-openai,openai}``
through httpx.MockTransport, plus the request each vendor is sent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from sidecar.ir import (
    MetonaErrorCode,
    MetonaFinishReason,
    MetonaRequest,
    MetonaResponse,
    MetonaStreamEvent,
    MetonaStreamEventType,
    MetonaTokenUsage,
)
from sidecar.providers.base import ProviderConfig
from sidecar.providers.capabilities import CONSERVATIVE, THINKING, TOOL_CALLING, VISION, ModelSpec
from sidecar.providers.errors import ProviderError, phase2_code
from sidecar.providers.openai_compat import OpenAICompatAdapter, map_usage
from sidecar.providers.presets import PRESETS
from tests.providers.support import request, tool

pytestmark = pytest.mark.anyio

RECORDINGS = Path(__file__).parent / "recordings"
T = MetonaStreamEventType
C = MetonaErrorCode
VENDORS = ("deepseek", "agnes-openai", "openai")
PRESET_OF = {"deepseek": "deepseek", "agnes-openai": "agnes-ai", "openai": "openai"}
MODEL_OF = {"deepseek": "deepseek-chat", "agnes-openai": "agnes-2.0-flash", "openai": "gpt-4o-mini"}


# ---- harness -------------------------------------------------------------------------------------------------


def load(vendor: str, name: str) -> dict[str, Any]:
    return yaml.safe_load((RECORDINGS / vendor / f"{name}.yaml").read_text(encoding="utf-8"))


def sse(*objects: Any, done: bool = True) -> dict[str, Any]:
    """An inline recording: one SSE event per object (a str is sent as the data line as is)."""
    chunks = [f"data: {o if isinstance(o, str) else json.dumps(o)}\n\n" for o in objects]
    if done:
        chunks.append("data: [DONE]\n\n")
    return {"status": 200, "headers": {"content-type": "text/event-stream"}, "chunks": chunks}


def body(status: int, data: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    text = data if isinstance(data, str) else json.dumps(data)
    return {"status": status, "headers": {"content-type": "application/json", **(headers or {})}, "chunks": [text]}


class Replay:
    """A MockTransport handler answering every POST with one recording (GET /models with ``models``)."""

    def __init__(self, recording: dict[str, Any] | None = None, models: dict[str, Any] | None = None) -> None:
        self.recording = recording
        self.models = models
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        rec = self.models if request.method == "GET" else self.recording
        assert rec is not None, f"unexpected {request.method} {request.url}"

        async def chunks() -> AsyncIterator[bytes]:
            for chunk in rec["chunks"]:
                yield chunk.encode("utf-8")
            if rec.get("cut"):
                raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")

        return httpx.Response(rec["status"], headers=rec["headers"], content=chunks())

    @property
    def payload(self) -> dict[str, Any]:
        return json.loads(self.requests[-1].content)


def config(vendor: str, *, api_key: str | None = "sk-test-key", **options: Any) -> ProviderConfig:
    preset_name = PRESET_OF.get(vendor, vendor)
    preset = PRESETS.get(preset_name)
    return ProviderConfig(
        provider_id=preset_name,
        preset=preset_name,
        protocol="openai",
        base_url=preset.base_urls["openai"] if preset else "http://127.0.0.1:8000/v1",
        api_key=api_key,
        default_model=MODEL_OF.get(vendor, "local-model"),
        options=options,
        models=preset.models if preset else (),
    )


def adapter(vendor: str, replay: Replay, **options: Any) -> OpenAICompatAdapter:
    return OpenAICompatAdapter(config(vendor, **options), transport=httpx.MockTransport(replay))


async def stream(
    a: OpenAICompatAdapter, req: MetonaRequest | None = None, *, model: str | None = None
) -> tuple[list[MetonaStreamEvent], MetonaResponse]:
    events: list[MetonaStreamEvent] = []
    response = await a.send_stream(req or request(), events.append, model=model)
    return events, response


async def payload_for(vendor: str, req: MetonaRequest, *, model: str | None = None, **options: Any) -> dict[str, Any]:
    replay = Replay(load(vendor, "plain_text"))
    await stream(adapter(vendor, replay, **options), req, model=model)
    return replay.payload


def types(events: list[MetonaStreamEvent]) -> list[str]:
    return [str(e.type) for e in events]


def assert_well_formed(events: list[MetonaStreamEvent]) -> None:
    """seq from 0 by 1, exactly one done, last; error (if any) right before it."""
    assert [e.seq for e in events] == list(range(len(events)))
    assert types(events).count("done") == 1 and events[-1].type is T.DONE
    if any(e.type is T.ERROR for e in events):
        assert events[-2].type is T.ERROR
    assert all(e.request_id == "r_1" and e.session_id == "s_1" and e.iteration == 1 for e in events)


# ---- recorded answers ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("vendor", VENDORS)
async def test_plain_text_streams_text_then_usage_then_done(vendor: str) -> None:
    replay = Replay(load(vendor, "plain_text"))
    events, response = await stream(adapter(vendor, replay))
    assert_well_formed(events)
    assert types(events) == ["text_delta", "text_delta", "text_delta", "usage", "done"]
    assert "".join(e.delta or "" for e in events) == "Hello! How can I help you today?"
    assert response.content == "Hello! How can I help you today?"
    assert response.finish_reason is MetonaFinishReason.STOP and response.error is None
    assert response.usage.input_tokens == 21 and response.usage.output_tokens == 9 and response.usage.total_tokens == 30
    assert events[-2].usage == response.usage
    assert response.reasoning_content is None and response.tool_calls is None
    assert response.meta.provider == PRESET_OF[vendor] and response.meta.model == MODEL_OF[vendor]


@pytest.mark.parametrize("vendor", VENDORS)
async def test_plain_text_nonstream(vendor: str) -> None:
    replay = Replay(load(vendor, "plain_text_nonstream"))
    response = await adapter(vendor, replay).send(request())
    assert response.content == "Hello! How can I help you today?"
    assert response.finish_reason is MetonaFinishReason.STOP
    assert response.usage.total_tokens == 30
    assert replay.payload["stream"] is False and "stream_options" not in replay.payload


@pytest.mark.parametrize("vendor", ["deepseek", "agnes-openai"])
async def test_reasoning_is_framed_then_text_follows(vendor: str) -> None:
    events, response = await stream(adapter(vendor, Replay(load(vendor, "reasoning"))))
    assert_well_formed(events)
    assert types(events) == [
        "thinking_start",
        "reasoning_delta",
        "reasoning_delta",
        "reasoning_delta",
        "thinking_end",
        "text_delta",
        "text_delta",
        "usage",
        "done",
    ]
    assert response.reasoning_content == "The user asks which is larger: 9.11 or 9.8. Compare the tenths: 1 < 8."
    assert response.content == "9.8 is larger."
    assert response.usage.reasoning_tokens == 41


@pytest.mark.parametrize("vendor", VENDORS)
async def test_tool_call_single_is_assembled_from_fragments(vendor: str) -> None:
    events, response = await stream(adapter(vendor, Replay(load(vendor, "tool_call_single"))))
    assert_well_formed(events)
    deltas = [e.tool_call_delta for e in events if e.type is T.TOOL_CALL_DELTA]
    assert deltas[0] is not None and deltas[0].index == 0 and deltas[0].name == "get_weather"
    assert "".join(d.args_delta or "" for d in deltas if d) == '{"location":"Hangzhou"}'
    completes = [e.tool_call for e in events if e.type is T.TOOL_CALL_COMPLETE]
    assert len(completes) == 1 and completes[0] is not None
    assert completes[0].name == "get_weather" and completes[0].args == {"location": "Hangzhou"}
    assert types(events)[-3:] == ["tool_call_complete", "usage", "done"]
    assert response.finish_reason is MetonaFinishReason.TOOL_CALLS
    assert response.tool_calls is not None and response.tool_calls[0].id == completes[0].id
    assert response.tool_calls[0].id.startswith(("call_", "chatcmpl-tool-"))
    cache = (None, None) if vendor == "agnes-openai" else (64, 56)  # Agnes reports no cache split
    assert (response.usage.cache_hit_tokens, response.usage.cache_miss_tokens) == cache


@pytest.mark.parametrize("vendor", VENDORS)
async def test_parallel_tool_calls_complete_in_index_order(vendor: str) -> None:
    events, response = await stream(adapter(vendor, Replay(load(vendor, "tool_calls_parallel"))))
    assert_well_formed(events)
    assert response.tool_calls is not None
    assert [c.args for c in response.tool_calls] == [{"location": "Hangzhou"}, {"location": "Beijing"}]
    assert len({c.id for c in response.tool_calls}) == 2
    indexes = [e.tool_call_delta.index for e in events if e.tool_call_delta]
    assert indexes == sorted(indexes) and set(indexes) == {0, 1}


@pytest.mark.parametrize("vendor", VENDORS)
async def test_tool_call_whose_arguments_arrive_in_one_chunk(vendor: str) -> None:
    events, response = await stream(adapter(vendor, Replay(load(vendor, "tool_call_one_chunk_args"))))
    assert_well_formed(events)
    assert types(events).count("tool_call_delta") == 1
    assert response.tool_calls is not None
    assert response.tool_calls[0].args == {"location": "Hangzhou", "unit": "celsius"}


@pytest.mark.parametrize("vendor", VENDORS)
async def test_usage_only_final_chunk(vendor: str) -> None:
    events, response = await stream(adapter(vendor, Replay(load(vendor, "usage_only_final_chunk"))))
    assert_well_formed(events)
    assert types(events) == ["text_delta", "usage", "done"]
    assert response.content == "Hi there." and response.usage.total_tokens == 30


@pytest.mark.parametrize("vendor", VENDORS)
async def test_mid_stream_error_fails_the_stream_as_interrupted(vendor: str) -> None:
    a = adapter(vendor, Replay(load(vendor, "mid_stream_error")))
    events, response = await stream(a)
    assert_well_formed(events)
    assert types(events) == ["text_delta", "error", "done"]
    assert response.finish_reason is MetonaFinishReason.ERROR and response.content == "Partial"
    assert response.error is not None and response.error.code is C.UNKNOWN
    assert response.error.provider_code == "server_error" and response.error.retryable is True
    req = request()
    with pytest.raises(ProviderError) as caught:
        await a.run(req, None, a.assembler(req, MODEL_OF[vendor], None), stream=True)
    assert caught.value.interrupted is True
    assert phase2_code(caught.value.error, interrupted=True) == ("PROVIDER_STREAM_INTERRUPTED", 502)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_cut_stream_is_a_network_error_after_the_partial_text(vendor: str) -> None:
    a = adapter(vendor, Replay(load(vendor, "stream_cut")))
    events, response = await stream(a)
    assert_well_formed(events)
    assert response.content == "The answer is"
    assert response.error is not None and response.error.code is C.NETWORK_ERROR
    req = request()
    with pytest.raises(ProviderError) as caught:
        await a.run(req, None, a.assembler(req, MODEL_OF[vendor], None), stream=True)
    assert caught.value.interrupted is True


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_malformed_chunk_is_an_invalid_response(vendor: str) -> None:
    events, response = await stream(adapter(vendor, Replay(load(vendor, "malformed"))))
    assert_well_formed(events)
    assert types(events) == ["text_delta", "error", "done"]
    assert response.error is not None and response.error.code is C.INVALID_RESPONSE
    assert response.error.retryable is False


@pytest.mark.parametrize("vendor", VENDORS)
async def test_think_tags_in_text_become_reasoning(vendor: str) -> None:
    events, response = await stream(adapter(vendor, Replay(load(vendor, "think_tags"))))
    assert_well_formed(events)
    assert response.reasoning_content == "\nThe user greets me. Answer briefly.\n"
    assert response.content == "Hello! How can I help?"
    assert types(events)[0] == "thinking_start" and "thinking_end" in types(events)


async def test_think_tags_can_be_turned_off() -> None:
    _, response = await stream(adapter("agnes-openai", Replay(load("agnes-openai", "think_tags")), think_tags=False))
    assert response.reasoning_content is None
    assert response.content.startswith("<think>\nThe user greets me.") and response.content.endswith("How can I help?")


# vendor, status → (IR code, retryable, retryAfterMs, phase-2 code); the phase-2 code of a 5xx ``unknown`` is the
# core's choice (errors.phase2_code), not pinned here
ERRORS: dict[tuple[str, int], tuple[MetonaErrorCode, bool, int | None, str | None]] = {
    ("deepseek", 400): (C.CONTEXT_LENGTH_EXCEEDED, False, None, "MODEL_CONTEXT_LENGTH_EXCEEDED"),
    ("deepseek", 401): (C.AUTH_INVALID, False, None, "PROVIDER_AUTH_FAILED"),
    ("deepseek", 402): (C.QUOTA_EXCEEDED, False, None, "PROVIDER_RATE_LIMITED"),
    ("deepseek", 422): (C.UNKNOWN, False, None, "PROVIDER_PROTOCOL_ERROR"),
    ("deepseek", 429): (C.RATE_LIMITED, True, 3000, "PROVIDER_RATE_LIMITED"),
    ("deepseek", 500): (C.UNKNOWN, True, None, None),
    ("deepseek", 503): (C.MODEL_OVERLOADED, True, 5000, "PROVIDER_UNAVAILABLE"),
    ("agnes-openai", 400): (C.CONTEXT_LENGTH_EXCEEDED, False, None, "MODEL_CONTEXT_LENGTH_EXCEEDED"),
    ("agnes-openai", 401): (C.AUTH_INVALID, False, None, "PROVIDER_AUTH_FAILED"),
    ("agnes-openai", 402): (C.QUOTA_EXCEEDED, False, None, "PROVIDER_RATE_LIMITED"),
    ("agnes-openai", 403): (C.AUTH_INVALID, False, None, "PROVIDER_AUTH_FAILED"),
    ("agnes-openai", 404): (C.MODEL_NOT_FOUND, False, None, "MODEL_NOT_FOUND"),
    ("agnes-openai", 429): (C.RATE_LIMITED, True, 12000, "PROVIDER_RATE_LIMITED"),
    ("agnes-openai", 500): (C.UNKNOWN, True, None, None),
    ("agnes-openai", 503): (C.MODEL_OVERLOADED, True, None, "PROVIDER_UNAVAILABLE"),
    ("openai", 400): (C.CONTEXT_LENGTH_EXCEEDED, False, None, "MODEL_CONTEXT_LENGTH_EXCEEDED"),
    ("openai", 401): (C.AUTH_INVALID, False, None, "PROVIDER_AUTH_FAILED"),
    ("openai", 403): (C.AUTH_INVALID, False, None, "PROVIDER_AUTH_FAILED"),
    ("openai", 404): (C.MODEL_NOT_FOUND, False, None, "MODEL_NOT_FOUND"),
    ("openai", 429): (C.RATE_LIMITED, True, 120, "PROVIDER_RATE_LIMITED"),
    ("openai", 500): (C.UNKNOWN, True, None, None),
    ("openai", 503): (C.MODEL_OVERLOADED, True, 2000, "PROVIDER_UNAVAILABLE"),
}
ERROR_FILES = sorted((v, int(p.stem.split("_")[1])) for v in VENDORS for p in (RECORDINGS / v).glob("error_*.yaml"))


def test_every_error_recording_has_an_expectation() -> None:
    assert set(ERROR_FILES) == set(ERRORS)


@pytest.mark.parametrize(("vendor", "status"), ERROR_FILES)
async def test_recorded_error_answers_map_to_ir_codes(vendor: str, status: int) -> None:
    code, retryable, retry_after, p2 = ERRORS[(vendor, status)]
    rec = load(vendor, f"error_{status}")
    assert rec["status"] == status
    events, response = await stream(adapter(vendor, Replay(rec)))
    assert types(events) == ["error", "done"]
    err = response.error
    assert err is not None and response.finish_reason is MetonaFinishReason.ERROR
    assert (err.code, err.retryable, err.retry_after_ms) == (code, retryable, retry_after)
    assert err.provider == PRESET_OF[vendor] and err.provider_code
    assert f"HTTP {status}" in err.message
    if p2 is not None:
        assert phase2_code(err)[0] == p2


# ---- the request ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("vendor", VENDORS)
async def test_url_headers_and_the_common_payload(vendor: str) -> None:
    replay = Replay(load(vendor, "plain_text"))
    a = adapter(vendor, replay, extra_headers={"X-Title": "Metona"})
    await stream(a, request(params={"maxTokens": 256, "topP": 0.9, "stopSequences": ["END"]}))
    sent = replay.requests[-1]
    assert sent.method == "POST"
    assert str(sent.url) == PRESETS[PRESET_OF[vendor]].base_urls["openai"] + "/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test-key"
    assert sent.headers["x-title"] == "Metona"
    p = replay.payload
    assert p["model"] == MODEL_OF[vendor]
    assert p["messages"] == [
        {"role": "system", "content": "You are Metona.\n\nAnswer briefly.\n\nBe safe.\n\nToday is Monday."},
        {"role": "user", "content": "Hello"},
    ]
    assert p["stream"] is True and p["stream_options"] == {"include_usage": True}
    assert p["temperature"] == 0.0 and p["top_p"] == 0.9 and p["stop"] == ["END"]
    max_key = "max_completion_tokens" if vendor == "openai" else "max_tokens"
    assert p[max_key] == 256
    assert not {"tools", "thinking", "reasoning_effort", "chat_template_kwargs", "parallel_tool_calls"} & set(p)


async def test_no_authorization_header_without_a_key() -> None:
    replay = Replay(load("agnes-openai", "plain_text"))
    a = OpenAICompatAdapter(config("agnes-openai", api_key=None), transport=httpx.MockTransport(replay))
    await stream(a)
    assert "authorization" not in replay.requests[-1].headers


async def test_extra_body_is_merged_into_the_payload() -> None:
    p = await payload_for("agnes-openai", request(), extra_body={"seed": 7, "top_k": 20})
    assert p["seed"] == 7 and p["top_k"] == 20


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, {}),
        ({"thinkingEnabled": False}, {"thinking": {"type": "disabled"}}),
        ({"thinkingEnabled": True}, {"thinking": {"type": "enabled"}}),
        (
            {"thinkingEnabled": True, "thinkingEffort": "low"},
            {"thinking": {"type": "enabled"}, "reasoning_effort": "high"},
        ),
        (
            {"thinkingEnabled": True, "thinkingEffort": "medium"},
            {"thinking": {"type": "enabled"}, "reasoning_effort": "high"},
        ),
        (
            {"thinkingEnabled": True, "thinkingEffort": "high"},
            {"thinking": {"type": "enabled"}, "reasoning_effort": "high"},
        ),
        (
            {"thinkingEnabled": True, "thinkingEffort": "max"},
            {"thinking": {"type": "enabled"}, "reasoning_effort": "max"},
        ),
        ({"thinkingEffort": "max"}, {"thinking": {"type": "enabled"}, "reasoning_effort": "max"}),
        ({"thinkingEnabled": False, "thinkingEffort": "max"}, {"thinking": {"type": "disabled"}}),
    ],
)
async def test_deepseek_thinking_mapping(params: dict[str, Any], expected: dict[str, Any]) -> None:
    p = await payload_for("deepseek", request(params=params))
    assert {k: p[k] for k in ("thinking", "reasoning_effort") if k in p} == expected
    assert "chat_template_kwargs" not in p


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, None),
        ({"thinkingEnabled": False}, False),
        ({"thinkingEnabled": True}, True),
        ({"thinkingEnabled": True, "thinkingEffort": "low"}, False),
        ({"thinkingEnabled": True, "thinkingEffort": "medium"}, True),
        ({"thinkingEnabled": True, "thinkingEffort": "high"}, True),
        ({"thinkingEnabled": True, "thinkingEffort": "max"}, True),
    ],
)
async def test_agnes_thinking_mapping(params: dict[str, Any], expected: bool | None) -> None:
    p = await payload_for("agnes-openai", request(params=params))
    if expected is None:
        assert "chat_template_kwargs" not in p
    else:
        assert p["chat_template_kwargs"] == {"enable_thinking": expected}
    assert not {"thinking", "reasoning_effort"} & set(p)


@pytest.mark.parametrize(
    ("model", "effort", "expected"),
    [
        ("o3-mini", "low", "low"),
        ("o4-mini", "medium", "medium"),
        ("gpt-5", "high", "high"),
        ("gpt-5-mini", "max", "high"),
        ("gpt-4o", "high", None),
        ("gpt-5-chat-latest", "high", None),
    ],
)
async def test_openai_reasoning_effort_only_for_reasoning_models(model: str, effort: str, expected: str | None) -> None:
    p = await payload_for("openai", request(params={"thinkingEnabled": True, "thinkingEffort": effort}), model=model)
    assert p.get("reasoning_effort") == expected
    assert not {"thinking", "chat_template_kwargs"} & set(p)


async def test_openai_reasoning_models_get_no_sampling_or_stop_parameters() -> None:
    req = request(params={"temperature": 0.2, "topP": 0.5, "stopSequences": ["x"], "maxTokens": 100})
    p = await payload_for("openai", req, model="o3")
    assert not {"temperature", "top_p", "stop", "max_tokens"} & set(p)
    assert p["max_completion_tokens"] == 100
    p = await payload_for("openai", req, model="gpt-4o")
    assert (p["temperature"], p["top_p"], p["stop"]) == (0.2, 0.5, ["x"])


async def test_an_unknown_preset_gets_no_thinking_parameters() -> None:
    replay = Replay(load("openai", "plain_text"))
    await stream(adapter("local-vllm", replay), request(params={"thinkingEnabled": True, "thinkingEffort": "high"}))
    p = replay.payload
    assert not {"thinking", "reasoning_effort", "chat_template_kwargs", "parallel_tool_calls"} & set(p)
    assert str(replay.requests[-1].url) == "http://127.0.0.1:8000/v1/chat/completions"


async def test_thinking_style_option_overrides_the_preset() -> None:
    replay = Replay(load("openai", "plain_text"))
    a = adapter("local-vllm", replay, thinking_style="chat_template_kwargs")
    await stream(a, request(params={"thinkingEnabled": True}))
    assert replay.payload["chat_template_kwargs"] == {"enable_thinking": True}


@pytest.mark.parametrize("vendor", VENDORS)
async def test_tools_and_the_allowed_list(vendor: str) -> None:
    req = request(tools=[tool("get_weather"), tool("read_file", "path")], constraints={"allowedTools": ["get_weather"]})
    p = await payload_for(vendor, req)
    assert p["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "the get_weather tool",
                "parameters": {
                    "type": "object",
                    "properties": {"location": {"type": "string", "description": "where"}},
                    "required": ["location"],
                },
            },
        }
    ]
    assert "parallel_tool_calls" not in p


@pytest.mark.parametrize(
    ("vendor", "model", "expected"),
    [("openai", "gpt-4o", False), ("openai", "o3", None), ("deepseek", None, None), ("agnes-openai", None, None)],
)
async def test_one_tool_call_at_most_asks_for_no_parallel_calls_where_documented(
    vendor: str, model: str | None, expected: bool | None
) -> None:
    p = await payload_for(vendor, request(tools=[tool("get_weather")], constraints={"maxToolCalls": 1}), model=model)
    assert p.get("parallel_tool_calls") == expected and len(p["tools"]) == 1


async def test_no_tools_when_max_tool_calls_is_zero() -> None:
    p = await payload_for("openai", request(tools=[tool("get_weather")], constraints={"maxToolCalls": 0}))
    assert "tools" not in p and "parallel_tool_calls" not in p


def tool_loop(final_reasoning: str | None = "all done") -> list[dict[str, Any]]:
    call = {"id": "call_1", "name": "get_weather", "args": {"location": "杭州"}, "iteration": 1, "timestamp": 2}
    result = {
        "toolCallId": "call_1",
        "toolName": "get_weather",
        "result": {"temp": 21},
        "success": True,
        "durationMs": 5,
        "timestamp": 3,
    }
    return [
        {"role": "user", "content": "Weather in Hangzhou?", "timestamp": 1},
        {"role": "assistant", "content": "", "reasoningContent": "need the tool", "toolCalls": [call], "timestamp": 2},
        {"role": "tool", "content": "", "toolResult": result, "timestamp": 3},
        {"role": "assistant", "content": "21 °C.", "reasoningContent": final_reasoning, "timestamp": 4},
        {"role": "user", "content": "Thanks. And 1+1?", "timestamp": 5},
        {"role": "assistant", "content": "2", "reasoningContent": "easy", "timestamp": 6},
        {"role": "user", "content": "Bye", "timestamp": 7},
    ]


async def test_messages_of_a_tool_loop() -> None:
    p = await payload_for("openai", request(tool_loop()))
    assert p["messages"][1:] == [
        {"role": "user", "content": "Weather in Hangzhou?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"location": "杭州"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
        {"role": "assistant", "content": "21 °C."},
        {"role": "user", "content": "Thanks. And 1+1?"},
        {"role": "assistant", "content": "2"},
        {"role": "user", "content": "Bye"},
    ]


async def test_deepseek_sends_back_the_reasoning_of_tool_calling_turns_only() -> None:
    p = await payload_for("deepseek", request(tool_loop(), params={"thinkingEnabled": True}))
    reasoning = [m.get("reasoning_content") for m in p["messages"] if m["role"] == "assistant"]
    assert reasoning == ["need the tool", "all done", None]
    p = await payload_for("deepseek", request(tool_loop()))  # thinking is on by default: same rule
    assert [m.get("reasoning_content") for m in p["messages"] if m["role"] == "assistant"] == reasoning
    p = await payload_for("deepseek", request(tool_loop(), params={"thinkingEnabled": False}))
    assert not any("reasoning_content" in m for m in p["messages"])
    for vendor in ("agnes-openai", "openai"):
        p = await payload_for(vendor, request(tool_loop()))
        assert not any("reasoning_content" in m for m in p["messages"])


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"summary": "21 degrees", "result": {"temp": 21}}, "21 degrees"),
        ({"result": "plain text"}, "plain text"),
        ({"result": None, "success": False, "error": "city not found"}, "Error: city not found"),
        ({"result": [1, "二"]}, '[1, "二"]'),
    ],
)
async def test_tool_result_text(result: dict[str, Any], expected: str) -> None:
    tr = {"toolCallId": "c1", "toolName": "t", "success": True, "durationMs": 1, "timestamp": 1, **result}
    messages = [
        {"role": "user", "content": "go", "timestamp": 1},
        {
            "role": "assistant",
            "content": "",
            "toolCalls": [{"id": "c1", "name": "t", "args": {}, "iteration": 1, "timestamp": 1}],
            "timestamp": 1,
        },
        {"role": "tool", "content": "", "toolResult": tr, "timestamp": 1},
    ]
    p = await payload_for("deepseek", request(messages))
    assert p["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": expected}


async def test_a_tool_message_without_its_result_fails_before_any_request() -> None:
    replay = Replay(load("openai", "plain_text"))
    messages = [{"role": "user", "content": "go", "timestamp": 1}, {"role": "tool", "content": "x", "timestamp": 1}]
    events, response = await stream(adapter("openai", replay), request(messages))
    assert types(events) == ["error", "done"] and not replay.requests
    assert response.error is not None and response.error.provider_code == "invalid_request"


async def test_images_become_a_content_array() -> None:
    messages = [
        {
            "role": "user",
            "content": "What is this?",
            "timestamp": 1,
            "images": [{"url": "https://example.com/cat.png", "detail": "low"}, {"url": "data:image/png;base64,AAAA"}],
        }
    ]
    p = await payload_for("openai", request(messages))
    assert p["messages"][-1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    }


# ---- stream details ------------------------------------------------------------------------------------------


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "x", "object": "chat.completion.chunk", "model": "m", "choices": choices, **extra}


async def test_reasoning_field_of_openrouter_and_vllm() -> None:
    rec = sse(chunk({"reasoning": "hmm"}), chunk({"content": "ok"}), chunk({}, "stop"))
    _, response = await stream(adapter("local-vllm", Replay(rec)))
    assert (response.reasoning_content, response.content) == ("hmm", "ok")


async def test_reasoning_content_wins_over_a_duplicate_reasoning_field() -> None:
    rec = sse(chunk({"reasoning_content": "a", "reasoning": "a"}), chunk({"content": "b"}, "stop"))
    _, response = await stream(adapter("local-vllm", Replay(rec)))
    assert response.reasoning_content == "a"


async def test_a_name_repeated_on_every_fragment_is_not_doubled() -> None:
    fn = "get_weather"
    rec = sse(
        chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": fn, "arguments": '{"location"'}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": fn, "arguments": ': "x"}'}}]}),
        chunk({}, "tool_calls"),
    )
    _, response = await stream(adapter("local-vllm", Replay(rec)))
    assert response.tool_calls is not None and response.tool_calls[0].name == fn
    assert response.tool_calls[0].args == {"location": "x"}


async def test_name_and_first_arguments_as_two_entries_of_one_chunk() -> None:
    # the shape of openai-python tests/lib/chat/test_tool_call_deltas.py
    rec = sse(
        chunk(
            {
                "role": "assistant",
                "tool_calls": [
                    {"index": 0, "id": "call_files", "type": "function", "function": {"name": "list_files"}},
                    {"index": 0, "function": {"arguments": '{"path"'}},
                ],
            }
        ),
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "function": {"arguments": ": "}},
                    {"index": 0, "function": {"arguments": '"."}'}},
                ]
            }
        ),
        chunk({}, "tool_calls"),
    )
    _, response = await stream(adapter("openai", Replay(rec)))
    assert response.tool_calls is not None
    assert (response.tool_calls[0].id, response.tool_calls[0].args) == ("call_files", {"path": "."})


async def test_arguments_sent_as_an_object_and_calls_without_index() -> None:
    rec = sse(
        chunk(
            {
                "tool_calls": [
                    {"id": "a", "function": {"name": "f", "arguments": {"x": 1}}},
                    {"id": "b", "function": {"name": "g", "arguments": "{}"}},
                ]
            }
        ),
        chunk({}, "tool_calls"),
    )
    _, response = await stream(adapter("local-vllm", Replay(rec)))
    assert response.tool_calls is not None
    assert [(c.id, c.name, c.args) for c in response.tool_calls] == [("a", "f", {"x": 1}), ("b", "g", {})]


async def test_arguments_that_are_not_a_json_object_are_a_parse_error() -> None:
    rec = sse(
        chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": "[1]"}}]}),
        chunk({}, "tool_calls"),
    )
    _, response = await stream(adapter("openai", Replay(rec)))
    assert response.error is not None and response.error.code is C.PARSE_ERROR


async def test_bad_arguments_of_a_call_the_stream_never_finished_fail_the_stream_not_the_caller() -> None:
    # no finish_reason, just [DONE]: the call is completed (and its arguments checked) when the stream ends
    rec = sse(chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": "[1]"}}]}))
    events, response = await stream(adapter("openai", Replay(rec)))
    assert_well_formed(events)
    assert types(events) == ["tool_call_delta", "error", "done"]
    assert response.error is not None and response.error.code is C.PARSE_ERROR


DEEP = "[" * 200_000  # json.loads raises RecursionError, not ValueError, on nesting this deep


@pytest.mark.parametrize(
    ("rec", "code"),
    [
        (sse(DEEP), C.INVALID_RESPONSE),
        (sse(chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": DEEP}}]})), None),
        (body(500, DEEP), C.UNKNOWN),
    ],
)
async def test_absurdly_deep_json_is_a_typed_error(rec: dict[str, Any], code: MetonaErrorCode | None) -> None:
    events, response = await stream(adapter("openai", Replay(rec)))
    assert_well_formed(events)
    assert response.error is not None
    assert response.error.code is (code or C.PARSE_ERROR)


async def test_absurdly_deep_json_nonstream_is_a_typed_error() -> None:
    response = await adapter("openai", Replay(body(200, DEEP))).send(request())
    assert response.error is not None and response.error.code is C.INVALID_RESPONSE


async def test_other_choices_are_ignored() -> None:
    other = {"id": "x", "choices": [{"index": 1, "delta": {"content": "nope"}, "finish_reason": None}]}
    rec = sse(other, chunk({"content": "yes"}, "stop"))
    _, response = await stream(adapter("openai", Replay(rec)))
    assert response.content == "yes"


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("length", MetonaFinishReason.LENGTH),
        ("content_filter", MetonaFinishReason.CONTENT_FILTER),
        ("eos", MetonaFinishReason.STOP),
    ],
)
async def test_finish_reasons(reason: str, finish: MetonaFinishReason) -> None:
    _, response = await stream(adapter("openai", Replay(sse(chunk({"content": "a"}, reason)))))
    assert response.finish_reason is finish and response.error is None


async def test_legacy_function_call_delta() -> None:
    rec = sse(chunk({"function_call": {"name": "f", "arguments": '{"a": 1}'}}), chunk({}, "function_call"))
    _, response = await stream(adapter("local-vllm", Replay(rec)))
    assert response.tool_calls is not None and response.tool_calls[0].args == {"a": 1}
    assert response.finish_reason is MetonaFinishReason.TOOL_CALLS


async def test_deepseek_insufficient_system_resource_is_an_overload() -> None:
    _, response = await stream(
        adapter("deepseek", Replay(sse(chunk({"content": "a"}, "insufficient_system_resource"))))
    )
    assert response.error is not None and response.error.code is C.MODEL_OVERLOADED and response.error.retryable


async def test_a_stream_closed_without_an_end_is_a_network_error() -> None:
    _, response = await stream(adapter("openai", Replay(sse(chunk({"content": "a"}), done=False))))
    assert response.content == "a" and response.error is not None and response.error.code is C.NETWORK_ERROR


async def test_done_after_a_finish_reason_is_not_required() -> None:
    _, response = await stream(adapter("openai", Replay(sse(chunk({"content": "a"}, "stop"), done=False))))
    assert response.error is None and response.content == "a"


@pytest.mark.parametrize(
    ("error", "code", "retryable"),
    [
        ({"message": "Rate limit exceeded", "code": 429}, C.RATE_LIMITED, True),  # OpenRouter/vLLM: status in code
        ({"message": "Provider returned error", "code": 502}, C.NETWORK_ERROR, True),
        ({"message": "overloaded", "type": "overloaded_error"}, C.MODEL_OVERLOADED, True),
        ({"message": "This model's maximum context length is 4096 tokens."}, C.CONTEXT_LENGTH_EXCEEDED, False),
        (
            {"message": "Invalid prompt: flagged as violating our usage policy", "code": "invalid_prompt"},
            C.CONTENT_FILTERED,
            False,
        ),
        ({"message": "boom"}, C.UNKNOWN, False),
    ],
)
async def test_in_band_error_codes(error: dict[str, Any], code: MetonaErrorCode, retryable: bool) -> None:
    rec = sse(chunk({"content": "a"}), {"error": error}, done=False)
    _, response = await stream(adapter("openai", Replay(rec)))
    assert response.error is not None and (response.error.code, response.error.retryable) == (code, retryable)


async def test_an_sse_error_event_fails_the_stream() -> None:
    rec = {"status": 200, "headers": {}, "chunks": ['event: error\ndata: {"message": "Too many requests"}\n\n']}
    _, response = await stream(adapter("openai", Replay(rec)))
    assert response.error is not None and response.error.code is C.RATE_LIMITED


# ---- the non-streaming answer --------------------------------------------------------------------------------


async def test_nonstream_reasoning_tool_calls_and_usage() -> None:
    answer = {
        "id": "x",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "",
                    "reasoning_content": "I need the weather.",
                    "tool_calls": [
                        {
                            "id": "call_9",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"location":"Paris"}'},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {
            "prompt_tokens": 100,
            "completion_tokens": 30,
            "total_tokens": 130,
            "completion_tokens_details": {"reasoning_tokens": 12},
            "prompt_cache_hit_tokens": 80,
            "prompt_cache_miss_tokens": 20,
        },
    }
    response = await adapter("deepseek", Replay(body(200, answer))).send(request())
    assert response.reasoning_content == "I need the weather."
    assert response.tool_calls is not None
    assert (response.tool_calls[0].id, response.tool_calls[0].args) == ("call_9", {"location": "Paris"})
    assert response.finish_reason is MetonaFinishReason.TOOL_CALLS
    assert response.usage == MetonaTokenUsage(
        input_tokens=100,
        output_tokens=30,
        total_tokens=130,
        reasoning_tokens=12,
        cache_hit_tokens=80,
        cache_miss_tokens=20,
    )


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        ({"choices": []}, C.INVALID_RESPONSE),
        ({"choices": "nope"}, C.INVALID_RESPONSE),
        ({"choices": [{"message": {"content": 3, "tool_calls": [{"function": "x"}]}}]}, C.INVALID_RESPONSE),
        ({"error": {"message": "Insufficient Balance", "type": "unknown_error", "code": 402}}, C.QUOTA_EXCEEDED),
    ],
)
async def test_nonstream_bad_answers(answer: dict[str, Any], code: MetonaErrorCode) -> None:
    response = await adapter("deepseek", Replay(body(200, answer))).send(request())
    assert response.error is not None and response.error.code is code


async def test_a_non_json_answer_is_an_invalid_response() -> None:
    rec = {"status": 200, "headers": {"content-type": "text/html"}, "chunks": ["<html>hi</html>"]}
    response = await adapter("openai", Replay(rec)).send(request())
    assert response.error is not None and response.error.code is C.INVALID_RESPONSE


# ---- errors ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error", "code", "retryable"),
    [
        (
            429,
            {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"},
            C.QUOTA_EXCEEDED,
            False,
        ),
        (
            400,
            {
                "message": "Your request was rejected as a result of our safety system.",
                "code": "content_policy_violation",
            },
            C.CONTENT_FILTERED,
            False,
        ),
        (
            400,
            {
                "message": "max_tokens is too large: 100000. This model supports at most 16384 completion tokens",
                "code": None,
            },
            C.OUTPUT_LENGTH_EXCEEDED,
            False,
        ),
        (
            400,
            {
                "message": "Invalid max_tokens value, the valid range of max_tokens is [1, 8192]",
                "type": "invalid_request_error",
            },
            C.OUTPUT_LENGTH_EXCEEDED,
            False,
        ),
        (400, {"message": "Unsupported parameter: 'stop'", "code": "unsupported_parameter"}, C.UNKNOWN, False),
        (413, {"message": "Request too large"}, C.CONTEXT_LENGTH_EXCEEDED, False),
        (502, {"message": "Bad gateway"}, C.NETWORK_ERROR, True),
    ],
)
async def test_error_bodies_refine_the_status(
    status: int, error: dict[str, Any], code: MetonaErrorCode, retryable: bool
) -> None:
    response = await adapter("openai", Replay(body(status, {"error": error}))).send(request())
    assert response.error is not None and (response.error.code, response.error.retryable) == (code, retryable)


async def test_a_404_that_is_not_about_a_model_is_not_model_not_found() -> None:
    rec = {"status": 404, "headers": {"content-type": "text/html"}, "chunks": ["<html><h1>404 Not Found</h1></html>"]}
    response = await adapter("openai", Replay(rec)).send(request())
    assert response.error is not None and response.error.code is C.UNKNOWN and response.error.provider_code == "404"


def test_map_usage_openai_cached_tokens() -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 5,
        "total_tokens": 105,
        "prompt_tokens_details": {"cached_tokens": 60},
    }
    assert map_usage(usage) == MetonaTokenUsage(
        input_tokens=100, output_tokens=5, total_tokens=105, cache_hit_tokens=60, cache_miss_tokens=40
    )
    assert map_usage({"prompt_tokens": 3, "completion_tokens": 2}) == MetonaTokenUsage(
        input_tokens=3, output_tokens=2, total_tokens=5
    )


# ---- models ----------------------------------------------------------------------------------------------------


def models_list(*ids: str, **extra: Any) -> dict[str, Any]:
    data = [{"id": i, "object": "model", "created": 1, "owned_by": "system", **extra.get(i, {})} for i in ids]
    return body(200, {"object": "list", "data": data})


async def test_openai_models_merge_with_known_specs() -> None:
    listed = models_list(
        "gpt-4o-mini-2024-07-18", "gpt-4o", "text-embedding-3-small", "whisper-1", "ft:gpt-4o:acme::x1"
    )
    replay = Replay(models=listed)
    a = adapter("openai", replay)
    specs = await a.model_specs()
    assert [s.id for s in specs] == ["gpt-4o-mini-2024-07-18", "gpt-4o", "ft:gpt-4o:acme::x1", "gpt-4o-mini", "gpt-4.1"]
    snapshot, known, unknown = specs[0], specs[1], specs[2]
    assert snapshot.capabilities == PRESETS["openai"].models[1].capabilities and VISION in snapshot.capabilities
    assert known == PRESETS["openai"].models[0]
    assert unknown.capabilities == CONSERVATIVE and TOOL_CALLING not in unknown.capabilities
    assert (unknown.context_window, unknown.max_output_tokens) == (
        ModelSpec.CONSERVATIVE_CONTEXT,
        ModelSpec.CONSERVATIVE_OUTPUT,
    )
    assert unknown.metadata == {"owned_by": "system"}
    sent = replay.requests[-1]
    assert (sent.method, str(sent.url)) == ("GET", "https://api.openai.com/v1/models")
    assert sent.headers["authorization"] == "Bearer sk-test-key"
    infos = await a.list_models()
    assert infos[0].provider_id == "openai" and infos[0].supports_images and not infos[2].supports_tool_calling
    assert a.get_context_window("gpt-4o-mini-2024-07-18") == 128_000


async def test_deepseek_models_and_a_model_that_thinks() -> None:
    a = adapter("deepseek", Replay(models=models_list("deepseek-v4-flash", "deepseek-reasoner")))
    specs = await a.model_specs()
    assert [s.id for s in specs] == ["deepseek-v4-flash", "deepseek-reasoner", "deepseek-chat"]
    assert specs[0].capabilities == CONSERVATIVE
    assert THINKING in specs[1].capabilities
    infos = await a.list_models()
    assert infos[1].supports_thinking and not infos[0].supports_thinking


async def test_a_server_stated_context_window_is_kept() -> None:
    listed = models_list("Qwen/Qwen3-8B", **{"Qwen/Qwen3-8B": {"max_model_len": 32768}})
    specs = await adapter("local-vllm", Replay(models=listed)).model_specs()
    assert [(s.id, s.context_window, s.capabilities) for s in specs] == [("Qwen/Qwen3-8B", 32768, CONSERVATIVE)]


async def test_model_list_errors_and_health() -> None:
    rec = load("openai", "error_401")
    a = adapter("openai", Replay(models=rec))
    with pytest.raises(ProviderError) as caught:
        await a.model_specs()
    assert caught.value.error.code is C.AUTH_INVALID and caught.value.status == 401
    assert await a.health_check() is False
    assert await adapter("openai", Replay(models=models_list("gpt-4o"))).health_check() is True
    bad = adapter("openai", Replay(models=body(200, {"object": "list"})))
    with pytest.raises(ProviderError) as caught:
        await bad.list_models()
    assert caught.value.error.code is C.INVALID_RESPONSE
