"""The Anthropic Messages adapter (presets ``anthropic`` and Agnes' Anthropic-compatible protocol), replaying the
recorded vendor answers in ``recordings/anthropic`` and ``recordings/agnes-anthropic`` through httpx.MockTransport."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from dataclasses import replace
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
)
from sidecar.providers.anthropic import AnthropicAdapter
from sidecar.providers.base import ProviderConfig
from sidecar.providers.capabilities import CONSERVATIVE, THINKING, TOOL_CALLING, VISION
from sidecar.providers.errors import ProviderError, phase2_code
from sidecar.providers.presets import PRESETS
from tests.providers.support import request, tool

pytestmark = pytest.mark.anyio

RECORDINGS = Path(__file__).parent / "recordings"
T = MetonaStreamEventType
C = MetonaErrorCode
VENDORS = ("anthropic", "agnes-anthropic")
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()


# ---- harness -------------------------------------------------------------------------------------------------


def load(vendor: str, name: str) -> dict[str, Any]:
    return yaml.safe_load((RECORDINGS / vendor / f"{name}.yaml").read_text(encoding="utf-8"))


class Replay:
    """A MockTransport handler answering every POST with one recording; it keeps the requests it saw."""

    def __init__(self, recording: dict[str, Any], models: dict[str, Any] | None = None) -> None:
        self.recording = recording
        self.models = models
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.method == "GET":
            assert self.models is not None, "unexpected GET"
            return httpx.Response(200, json=self.models)
        rec = self.recording

        async def body() -> AsyncIterator[bytes]:
            for chunk in rec["chunks"]:
                yield chunk.encode("utf-8")
            if rec.get("cut"):
                raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")

        return httpx.Response(rec["status"], headers=rec["headers"], content=body())

    @property
    def payload(self) -> dict[str, Any]:
        return json.loads(self.requests[-1].content)


def config(vendor: str, **options: Any) -> ProviderConfig:
    if vendor == "anthropic":
        preset = PRESETS["anthropic"]
        return ProviderConfig(
            provider_id="anthropic",
            preset="anthropic",
            protocol="anthropic",
            base_url=preset.base_url,
            api_key="sk-ant-test-key",
            default_model=preset.default_model,
            options=options,
            models=preset.models,
        )
    return ProviderConfig(
        provider_id="agnes-ai",
        preset="agnes-ai",
        protocol="anthropic",
        base_url=PRESETS["agnes-ai"].base_urls["anthropic"],
        api_key="agnes-test-key",
        default_model="agnes-model",
        options=options,
    )


def adapter(vendor: str, replay: Replay, **options: Any) -> AnthropicAdapter:
    return AnthropicAdapter(config(vendor, **options), transport=httpx.MockTransport(replay))


async def stream(vendor: str, name: str, req: MetonaRequest | None = None, **options: Any):
    replay = Replay(load(vendor, name))
    events: list[MetonaStreamEvent] = []
    response = await adapter(vendor, replay, **options).send_stream(req or request(), events.append)
    check_sequence(events)
    return events, response, replay


def check_sequence(events: list[MetonaStreamEvent]) -> None:
    assert [e.seq for e in events] == list(range(len(events)))
    assert [e.type for e in events].count(T.DONE) == 1
    assert events[-1].type is T.DONE
    assert all(e.request_id == "r_1" and e.session_id == "s_1" and e.iteration == 1 for e in events)
    for line in events:  # every event is a valid wire line
        assert MetonaStreamEvent.from_line(line.to_line()).type is line.type


def types(events: list[MetonaStreamEvent]) -> list[MetonaStreamEventType]:
    return [e.type for e in events]


def usage(response: MetonaResponse) -> dict[str, Any]:
    return response.usage.model_dump(mode="json")


# ---- streams -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("vendor", VENDORS)
async def test_plain_text_stream(vendor: str) -> None:
    events, response, replay = await stream(vendor, "plain_text")
    assert types(events) == [T.TEXT_DELTA, T.TEXT_DELTA, T.USAGE, T.DONE]
    assert [e.delta for e in events[:2]] == ["Hello", "!"]
    assert events[2].usage is not None and events[2].usage.total_tokens == 40
    assert response.content == "Hello!"
    assert response.reasoning_content is None and response.tool_calls is None
    assert usage(response) == {"inputTokens": 25, "outputTokens": 15, "totalTokens": 40}
    assert response.finish_reason is MetonaFinishReason.STOP
    assert response.error is None

    sent = replay.requests[0]
    base = config(vendor).base_url
    assert str(sent.url) == base + "/v1/messages"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["x-api-key"] == config(vendor).api_key
    assert sent.headers["content-type"] == "application/json"
    assert "authorization" not in sent.headers
    payload = replay.payload
    assert payload == {
        "model": config(vendor).default_model,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}],
        "system": "You are Metona.\n\nAnswer briefly.\n\nBe safe.\n\nToday is Monday.",
        "temperature": 0.0,
        # claude-sonnet-4-5 documents 64k output tokens, capped at 8192; an unknown model gets 4096
        "max_tokens": 8192 if vendor == "anthropic" else 4096,
        "stream": True,
    }


@pytest.mark.parametrize("vendor", VENDORS)
async def test_plain_text_nonstream(vendor: str) -> None:
    replay = Replay(load(vendor, "plain_text_nonstream"))
    response = await adapter(vendor, replay).send(request())
    assert response.content == "Hi! My name is Claude."
    assert usage(response) == {"inputTokens": 2095, "outputTokens": 503, "totalTokens": 2598}
    assert response.finish_reason is MetonaFinishReason.STOP
    assert "stream" not in replay.payload


@pytest.mark.parametrize("vendor", VENDORS)
async def test_reasoning_stream(vendor: str) -> None:
    req = request(params={"thinkingEnabled": True, "thinkingEffort": "high", "maxTokens": 2000})
    events, response, replay = await stream(vendor, "reasoning", req)
    assert types(events) == [T.THINKING_START, *[T.REASONING_DELTA] * 6, T.THINKING_END, T.TEXT_DELTA, T.DONE]
    assert response.reasoning_content == (
        "Let me solve this step by step:\n\n1. First break down 27 * 453\n2. 453 = 400 + 50 + 3"
        "\n3. 27 * 400 = 10,800\n4. 27 * 50 = 1,350\n5. 27 * 3 = 81\n6. 10,800 + 1,350 + 81 = 12,231"
    )
    assert response.reasoning_signature == "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds..."
    assert response.content == "27 * 453 = 12,231"
    assert response.finish_reason is MetonaFinishReason.STOP
    assert usage(response) == {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}  # the docs' example has none

    payload = replay.payload
    assert payload["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert payload["max_tokens"] == 4096 + 2000  # raised above the budget
    assert "temperature" not in payload and "top_p" not in payload


@pytest.mark.parametrize("vendor", VENDORS)
async def test_tool_call_single(vendor: str) -> None:
    events, response, _ = await stream(vendor, "tool_call_single")
    assert types(events) == [
        T.TEXT_DELTA,
        T.TEXT_DELTA,
        *[T.TOOL_CALL_DELTA] * 5,
        T.TOOL_CALL_COMPLETE,
        T.USAGE,
        T.DONE,
    ]
    deltas = [e.tool_call_delta for e in events if e.type is T.TOOL_CALL_DELTA]
    assert deltas[0] is not None and deltas[0].name == "get_weather" and deltas[0].index == 1
    assert "".join(d.args_delta or "" for d in deltas if d) == '{"location": "Paris"}'
    assert response.content == "I'll check the current weather in Paris for you."
    assert response.tool_calls is not None
    [call] = response.tool_calls
    assert (call.id, call.name, call.args, call.iteration) == (
        "toolu_01NRLabsLyVHZPKxbKvkfSMn",
        "get_weather",
        {"location": "Paris"},
        1,
    )
    assert events[-3].tool_call == call
    assert response.finish_reason is MetonaFinishReason.TOOL_CALLS
    assert usage(response) == {
        "inputTokens": 377,
        "outputTokens": 65,
        "totalTokens": 442,
        "cacheHitTokens": 0,
        "cacheMissTokens": 377,
    }


@pytest.mark.parametrize("vendor", VENDORS)
async def test_tool_calls_parallel(vendor: str) -> None:
    events, response, _ = await stream(vendor, "tool_calls_parallel")
    completes = [e.tool_call for e in events if e.type is T.TOOL_CALL_COMPLETE]
    assert [(c.name, c.args) for c in completes if c] == [
        ("get_weather", {"location": "Paris, France"}),
        ("get_time", {"timezone": "Europe/Paris"}),
    ]
    assert response.tool_calls == completes
    assert [c.id for c in response.tool_calls] == ["toolu_01A09q90qw90lq917835lq9", "toolu_01B19r91rx91mr928946mr0"]
    # each call completes at its own content_block_stop, before the next one starts
    kinds = types(events)
    assert kinds.index(T.TOOL_CALL_COMPLETE) < max(i for i, k in enumerate(kinds) if k is T.TOOL_CALL_DELTA)
    assert response.finish_reason is MetonaFinishReason.TOOL_CALLS
    assert usage(response) == {
        "inputTokens": 768,
        "outputTokens": 112,
        "totalTokens": 880,
        "cacheHitTokens": 256,
        "cacheMissTokens": 512,
    }


@pytest.mark.parametrize("vendor", VENDORS)
async def test_tool_call_one_chunk_args(vendor: str) -> None:
    events, response, _ = await stream(vendor, "tool_call_one_chunk_args")
    assert types(events) == [T.TOOL_CALL_DELTA, T.TOOL_CALL_DELTA, T.TOOL_CALL_COMPLETE, T.USAGE, T.DONE]
    assert response.tool_calls is not None
    assert response.tool_calls[0].args == {"location": "San Francisco, CA", "unit": "fahrenheit"}
    assert response.content == ""
    assert response.finish_reason is MetonaFinishReason.TOOL_CALLS


@pytest.mark.parametrize("vendor", VENDORS)
async def test_usage_only_final_chunk(vendor: str) -> None:
    events, response, _ = await stream(vendor, "usage_only_final_chunk")
    assert types(events) == [T.TEXT_DELTA, T.TEXT_DELTA, T.TEXT_DELTA, T.USAGE, T.DONE]
    assert usage(response) == {
        "inputTokens": 10682 + 1024 + 2048,
        "outputTokens": 510,
        "totalTokens": 10682 + 1024 + 2048 + 510,
        "cacheHitTokens": 2048,
        "cacheMissTokens": 10682 + 1024,
    }
    assert events[-2].usage == response.usage


@pytest.mark.parametrize("vendor", VENDORS)
async def test_mid_stream_error(vendor: str) -> None:
    events, response, _ = await stream(vendor, "mid_stream_error")
    assert types(events) == [T.TEXT_DELTA, T.ERROR, T.DONE]
    assert response.content == "Hello"
    assert response.finish_reason is MetonaFinishReason.ERROR
    error = response.error
    assert error is not None and events[1].error == error
    assert (error.code, error.retryable, error.provider_code) == (C.MODEL_OVERLOADED, True, "overloaded_error")
    assert error.provider == config(vendor).provider_id

    # the lower-level run() raises, marked interrupted (phase-2 PROVIDER_STREAM_INTERRUPTED)
    replay = Replay(load(vendor, "mid_stream_error"))
    ad = adapter(vendor, replay)
    with pytest.raises(ProviderError) as caught:
        await ad.run(request(), None, ad.assembler(request(), "", None), stream=True)
    assert caught.value.interrupted
    assert phase2_code(caught.value.error, interrupted=True)[0] == "PROVIDER_STREAM_INTERRUPTED"


@pytest.mark.parametrize("vendor", VENDORS)
async def test_stream_cut(vendor: str) -> None:
    events, response, _ = await stream(vendor, "stream_cut")
    kinds = types(events)
    assert kinds[-2:] == [T.ERROR, T.DONE]
    assert T.TOOL_CALL_COMPLETE not in kinds  # a half-streamed call is never completed
    assert response.content == "I'll check the current weather in Paris for you."
    assert response.error is not None and response.error.code is C.NETWORK_ERROR
    assert response.error.retryable
    assert response.tool_calls is None


async def test_stream_ending_without_message_stop_is_interrupted() -> None:
    rec = load("anthropic", "plain_text")
    rec["chunks"] = rec["chunks"][:-1]  # clean EOF, but no message_stop
    replay = Replay(rec)
    ad = adapter("anthropic", replay)
    with pytest.raises(ProviderError) as caught:
        await ad.run(request(), None, ad.assembler(request(), "", None), stream=True)
    assert caught.value.error.code is C.NETWORK_ERROR
    assert caught.value.interrupted


@pytest.mark.parametrize("vendor", VENDORS)
async def test_malformed_stream(vendor: str) -> None:
    events, response, _ = await stream(vendor, "malformed")
    assert types(events) == [T.TEXT_DELTA, T.ERROR, T.DONE]
    assert response.error is not None and response.error.code is C.INVALID_RESPONSE
    assert not response.error.retryable


async def test_invalid_tool_arguments_are_a_parse_error() -> None:
    rec = load("anthropic", "tool_call_single")
    rec["chunks"] = [c.replace('is\\"}', "is") for c in rec["chunks"]]  # '{"location": "Paris' is cut
    assert not any('is\\"}' in c for c in rec["chunks"])
    replay = Replay(rec)
    events: list[MetonaStreamEvent] = []
    response = await adapter("anthropic", replay).send_stream(request(), events.append)
    check_sequence(events)
    assert types(events)[-2:] == [T.ERROR, T.DONE]
    assert response.error is not None and response.error.code is C.PARSE_ERROR


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ('"text": "!"', '"text": 1e30'),  # a number where the text belongs
        ('"text": "!"', '"text": {"a": 1}'),
    ],
)
async def test_a_delta_of_the_wrong_type_is_an_invalid_response(before: str, after: str) -> None:
    rec = load("anthropic", "plain_text")
    assert any(before in c for c in rec["chunks"])
    rec["chunks"] = [c.replace(before, after) for c in rec["chunks"]]
    events: list[MetonaStreamEvent] = []
    response = await adapter("anthropic", Replay(rec)).send_stream(request(), events.append)
    check_sequence(events)
    assert types(events)[-2:] == [T.ERROR, T.DONE]
    assert types(events) == [T.TEXT_DELTA, T.ERROR, T.DONE]  # "Hello", then the bad delta
    assert response.error is not None and response.error.code is C.INVALID_RESPONSE


# ---- HTTP errors ---------------------------------------------------------------------------------------------

ERRORS = {
    # status: (IR code, retryable, retryAfterMs, providerCode, phase-2 code)
    400: (C.UNKNOWN, False, None, "invalid_request_error", "PROVIDER_PROTOCOL_ERROR"),
    401: (C.AUTH_INVALID, False, None, "authentication_error", "PROVIDER_AUTH_FAILED"),
    402: (C.QUOTA_EXCEEDED, False, None, "billing_error", "PROVIDER_RATE_LIMITED"),
    403: (C.AUTH_INVALID, False, None, "permission_error", "PROVIDER_AUTH_FAILED"),
    404: (C.MODEL_NOT_FOUND, False, None, "not_found_error", "MODEL_NOT_FOUND"),
    413: (C.CONTEXT_LENGTH_EXCEEDED, False, None, "request_too_large", "MODEL_CONTEXT_LENGTH_EXCEEDED"),
    429: (C.RATE_LIMITED, True, 30_000, "rate_limit_error", "PROVIDER_RATE_LIMITED"),
    500: (C.UNKNOWN, True, None, "api_error", "PROVIDER_UNAVAILABLE"),
    529: (C.MODEL_OVERLOADED, True, None, "overloaded_error", "PROVIDER_UNAVAILABLE"),
}
ERROR_CASES = [(vendor, path.stem) for vendor in VENDORS for path in sorted((RECORDINGS / vendor).glob("error_*.yaml"))]


def test_every_error_recording_is_tested() -> None:
    assert {int(name[6:]) for _, name in ERROR_CASES} == set(ERRORS)
    assert len(ERROR_CASES) >= len(ERRORS) + 4


@pytest.mark.parametrize(("vendor", "name"), ERROR_CASES)
@pytest.mark.parametrize("streaming", [True, False])
async def test_http_errors(vendor: str, name: str, streaming: bool) -> None:
    rec = load(vendor, name)
    code, retryable, retry_after, provider_code, p2 = ERRORS[rec["status"]]
    replay = Replay(rec)
    ad = adapter(vendor, replay)
    events: list[MetonaStreamEvent] = []
    if streaming:
        response = await ad.send_stream(request(), events.append)
        check_sequence(events)
        assert types(events) == [T.ERROR, T.DONE]
    else:
        response = await ad.send(request())
    error = response.error
    assert error is not None
    assert (error.code, error.retryable, error.retry_after_ms, error.provider_code) == (
        code,
        retryable,
        retry_after,
        provider_code,
    )
    assert error.provider == config(vendor).provider_id
    assert f"HTTP {rec['status']}" in error.message
    assert response.finish_reason is MetonaFinishReason.ERROR

    with pytest.raises(ProviderError) as caught:
        await ad.run(request(), None, ad.assembler(request(), "", None), stream=streaming)
    assert caught.value.status == rec["status"] and not caught.value.interrupted
    assert phase2_code(caught.value.error)[0] == p2


@pytest.mark.parametrize(
    ("status", "etype", "message", "code"),
    [
        (400, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum", C.CONTEXT_LENGTH_EXCEEDED),
        (400, "invalid_request_error", "Your credit balance is too low to access the Anthropic API.", C.QUOTA_EXCEEDED),
        (
            400,
            "invalid_request_error",
            "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000",
            C.CONTEXT_LENGTH_EXCEEDED,
        ),
        (402, "billing_error", "billing problem", C.QUOTA_EXCEEDED),
        (504, "timeout_error", "Request timed out", C.NETWORK_TIMEOUT),
        (418, "teapot_error", "?", C.UNKNOWN),
    ],
)
async def test_error_classification(status: int, etype: str, message: str, code: MetonaErrorCode) -> None:
    ad = AnthropicAdapter(config("anthropic"))
    body = json.dumps({"type": "error", "error": {"type": etype, "message": message}}).encode()
    exc = ad.error_from_response(status, {}, body)
    assert exc.error.code is code and exc.error.provider_code == etype


async def test_error_body_that_is_not_json() -> None:
    exc = AnthropicAdapter(config("anthropic")).error_from_response(502, {}, b"<html>Bad Gateway</html>")
    assert exc.error.code is C.NETWORK_ERROR and exc.error.retryable and exc.error.provider_code == "502"


# ---- request mapping ---------------------------------------------------------------------------------------


async def built(req: MetonaRequest, model: str = "claude-sonnet-4-5", **options: Any) -> dict[str, Any]:
    return await AnthropicAdapter(config("anthropic", **options)).build_payload(req, model, stream=True)


def tool_msg(call_id: str, *, summary: str | None = None, result: Any = None, ok: bool = True) -> dict[str, Any]:
    tr: dict[str, Any] = {
        "toolCallId": call_id,
        "toolName": "get_weather",
        "result": result,
        "success": ok,
        "durationMs": 3,
        "timestamp": 1,
    }
    if summary is not None:
        tr["summary"] = summary
    if not ok:
        tr["error"] = "city not found"
    return {"role": "tool", "content": "", "toolResult": tr, "timestamp": 1}


def call(call_id: str, name: str = "get_weather", **args: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "args": args, "iteration": 1, "timestamp": 1}


TOOL_LOOP = [
    {"role": "system", "content": "Extra system note.", "timestamp": 1},
    {"role": "user", "content": "Weather in Paris and Rome?", "timestamp": 1},
    {"role": "user", "content": "Quickly please.", "timestamp": 1},
    {
        "role": "assistant",
        "content": "Checking both.",
        "reasoningContent": "Two cities: two calls.",
        "reasoningSignature": "sig-abc",
        "toolCalls": [call("toolu_1", location="Paris"), call("toolu_2", location="Rome")],
        "timestamp": 1,
    },
    tool_msg("toolu_1", summary="Sunny, 21°C", result={"temp": 21, "raw": "x" * 10}),
    tool_msg("toolu_2", result=None, ok=False),
]


async def test_messages_tool_loop_mapping() -> None:
    payload = await built(request(TOOL_LOOP, tools=[tool("get_weather")], params={"thinkingEnabled": True}))
    assert payload["system"].endswith("Today is Monday.\n\nExtra system note.")
    assert payload["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather in Paris and Rome?"},
                {"type": "text", "text": "Quickly please."},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Two cities: two calls.", "signature": "sig-abc"},
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"location": "Rome"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny, 21°C"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "city not found", "is_error": True},
            ],
        },
    ]
    assert payload["thinking"] == {"type": "enabled", "budget_tokens": 2048}  # effort absent → medium
    assert payload["tools"] == [
        {
            "name": "get_weather",
            "description": "the get_weather tool",
            "input_schema": {
                "type": "object",
                "properties": {"location": {"type": "string", "description": "where"}},
                "required": ["location"],
            },
        }
    ]
    assert "tool_choice" not in payload


async def test_tool_result_without_summary_sends_json_of_result() -> None:
    messages = [*TOOL_LOOP[1:4], tool_msg("toolu_1", result={"temp": 21}), tool_msg("toolu_2", result="plain")]
    payload = await built(request(messages))
    results = payload["messages"][-1]["content"]
    assert results[0]["content"] == '{"temp": 21}'
    assert results[1]["content"] == "plain"


async def test_thinking_off_drops_thinking_blocks_and_unsigned_reasoning_is_never_sent() -> None:
    payload = await built(request(TOOL_LOOP))
    assert "thinking" not in payload
    assert all(b["type"] != "thinking" for m in payload["messages"] for b in m["content"])

    unsigned = [dict(m) for m in TOOL_LOOP]
    del unsigned[3]["reasoningSignature"]
    payload = await built(request(unsigned, params={"thinkingEnabled": True, "thinkingEffort": "max"}))
    assert all(b["type"] != "thinking" for m in payload["messages"] for b in m["content"])
    # the open tool-use cycle has no signed thinking to send back: the API would reject thinking → off
    assert "thinking" not in payload
    assert payload["temperature"] == 0.0

    closed = [*unsigned, {"role": "assistant", "content": "Done.", "timestamp": 1}, TOOL_LOOP[1]]
    payload = await built(request(closed, params={"thinkingEnabled": True, "thinkingEffort": "max"}))
    assert payload["thinking"] == {"type": "enabled", "budget_tokens": 8192}


@pytest.mark.parametrize(("effort", "budget"), [("low", 1024), ("medium", 2048), ("high", 4096), ("max", 8192)])
async def test_thinking_effort_mapping(effort: str, budget: int) -> None:
    payload = await built(request(params={"thinkingEnabled": True, "thinkingEffort": effort, "temperature": 0.3}))
    assert payload["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert payload["max_tokens"] == 8192 + (budget if budget >= 8192 else 0)
    assert payload["max_tokens"] > budget
    assert "temperature" not in payload


async def test_thinking_top_p_only_in_the_accepted_range() -> None:
    high = await built(request(params={"thinkingEnabled": True, "topP": 0.97}))
    low = await built(request(params={"thinkingEnabled": True, "topP": 0.5}))
    assert high["top_p"] == 0.97
    assert "top_p" not in low


async def test_params_mapping() -> None:
    payload = await built(request(params={"temperature": 0.7, "maxTokens": 100, "stopSequences": ["\n\nHuman:"]}))
    assert (payload["temperature"], payload["max_tokens"], payload["stop_sequences"]) == (0.7, 100, ["\n\nHuman:"])
    assert "top_p" not in payload
    only_top_p = await built(request(params={"topP": 0.9}))
    assert only_top_p["top_p"] == 0.9 and "temperature" not in only_top_p
    both = await built(request(params={"topP": 0.9, "temperature": 0.2}))
    assert both["temperature"] == 0.2 and "top_p" not in both
    dated = await built(request(), model="claude-opus-4-1-20250805")
    assert dated["max_tokens"] == 8192  # the dated id inherits the alias' spec
    unknown = await built(request(), model="claude-unknown")
    assert unknown["max_tokens"] == 4096


async def test_tool_constraints() -> None:
    tools = [tool("get_weather"), tool("get_time", "timezone")]
    allowed = await built(request(tools=tools, constraints={"allowedTools": ["get_time"]}))
    assert [t["name"] for t in allowed["tools"]] == ["get_time"]
    none = await built(request(TOOL_LOOP[1:], tools=tools, constraints={"maxToolCalls": 0}))
    assert none["tool_choice"] == {"type": "none"}
    assert len(none["tools"]) == 2  # kept: the history holds tool_use blocks, which need their tools defined
    one = await built(request(tools=tools, constraints={"maxToolCalls": 1}))
    assert one["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    nothing = await built(request(tools=tools, constraints={"allowedTools": []}))
    assert "tools" not in nothing and "tool_choice" not in nothing


async def test_images() -> None:
    messages = [
        {
            "role": "user",
            "content": "What is in these?",
            "images": [{"url": f"data:image/png;base64,{PNG}"}, {"url": "https://example.com/cat.jpg"}],
            "timestamp": 1,
        }
    ]
    payload = await built(request(messages))
    assert payload["messages"][0]["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        {"type": "text", "text": "What is in these?"},
    ]


@pytest.mark.parametrize(
    "url", ["data:image/tiff;base64," + PNG, "data:image/png;base64,@@@", "ftp://example.com/a.png", "data:,x"]
)
async def test_bad_images_are_typed_errors(url: str) -> None:
    messages = [{"role": "user", "content": "?", "images": [{"url": url}], "timestamp": 1}]
    replay = Replay(load("anthropic", "plain_text"))
    response = await adapter("anthropic", replay).send(request(messages))
    assert response.error is not None and response.error.provider_code == "invalid_request"
    assert replay.requests == []  # nothing was sent


async def test_extra_headers_and_no_key() -> None:
    replay = Replay(load("anthropic", "plain_text"))
    cfg = config("anthropic", extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"})
    no_key = ProviderConfig(**{**cfg.__dict__, "api_key": None})
    await AnthropicAdapter(no_key, transport=httpx.MockTransport(replay)).send(request())
    sent = replay.requests[0]
    assert sent.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert "x-api-key" not in sent.headers


# ---- non-streaming bodies ----------------------------------------------------------------------------------


async def test_nonstream_thinking_and_tool_use_blocks() -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "Need the weather.", "signature": "sig-1"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {"location": "Oslo"}},
        ],
        "stop_reason": "tool_use",
        "usage": {
            "input_tokens": 10,
            "cache_read_input_tokens": 5,
            "cache_creation_input_tokens": 0,
            "output_tokens": 20,
            "output_tokens_details": {"thinking_tokens": 7},
        },
    }
    rec = {"status": 200, "headers": {"content-type": "application/json"}, "chunks": [json.dumps(body)]}
    response = await adapter("anthropic", Replay(rec)).send(request())
    assert (response.reasoning_content, response.reasoning_signature) == ("Need the weather.", "sig-1")
    assert response.content == "Let me check."
    assert response.tool_calls is not None
    assert [(c.id, c.name, c.args) for c in response.tool_calls] == [("toolu_9", "get_weather", {"location": "Oslo"})]
    assert response.finish_reason is MetonaFinishReason.TOOL_CALLS
    assert usage(response) == {
        "inputTokens": 15,
        "outputTokens": 20,
        "totalTokens": 35,
        "reasoningTokens": 7,
        "cacheHitTokens": 5,
        "cacheMissTokens": 10,
    }


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("max_tokens", MetonaFinishReason.LENGTH),
        ("stop_sequence", MetonaFinishReason.STOP),
        ("refusal", MetonaFinishReason.CONTENT_FILTER),
    ],
)
async def test_nonstream_stop_reasons(stop_reason: str, finish: MetonaFinishReason) -> None:
    body = {"content": [{"type": "text", "text": "x"}], "stop_reason": stop_reason, "usage": {"output_tokens": 1}}
    rec = {"status": 200, "headers": {}, "chunks": [json.dumps(body)]}
    response = await adapter("anthropic", Replay(rec)).send(request())
    assert response.finish_reason is finish


@pytest.mark.parametrize(
    "body",
    [
        "[1, 2]",
        '{"content": "not a list"}',
        '{"content": [{"type": "tool_use", "id": "t", "input": {}}]}',
        '{"content": [{"type": "tool_use", "id": "t", "name": "x", "input": [1]}]}',
        '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
    ],
)
async def test_nonstream_bad_bodies_are_typed_errors(body: str) -> None:
    rec = {"status": 200, "headers": {}, "chunks": [body]}
    response = await adapter("anthropic", Replay(rec)).send(request())
    assert response.error is not None
    assert response.error.code in (C.INVALID_RESPONSE, C.PARSE_ERROR, C.MODEL_OVERLOADED)


# ---- models ------------------------------------------------------------------------------------------------

MODELS = {
    "data": [
        {"type": "model", "id": "claude-sonnet-4-5-20250929", "display_name": "Claude Sonnet 4.5"},
        {"type": "model", "id": "claude-3-haiku-20240307", "display_name": "Claude Haiku 3"},
    ],
    "has_more": False,
    "first_id": "claude-sonnet-4-5-20250929",
    "last_id": "claude-3-haiku-20240307",
}


async def test_model_specs_and_list_models() -> None:
    replay = Replay(load("anthropic", "plain_text"), models=MODELS)
    ad = adapter("anthropic", replay)
    specs = {s.id: s for s in await ad.model_specs()}
    sent = replay.requests[0]
    assert sent.url.path == "/v1/models" and sent.headers["x-api-key"] == "sk-ant-test-key"
    dated = specs["claude-sonnet-4-5-20250929"]
    assert dated.context_window == 200_000 and {THINKING, TOOL_CALLING, VISION} <= set(dated.capabilities)
    assert specs["claude-3-haiku-20240307"].capabilities == CONSERVATIVE
    assert specs["claude-3-haiku-20240307"].display_name == "Claude Haiku 3"
    assert {"claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"} <= set(specs)  # known aliases kept
    infos = await ad.list_models()
    assert [i.id for i in infos] == list(specs)
    assert infos[1].supports_tool_calling is False and infos[0].supports_thinking is True
    assert await ad.health_check() is True


async def test_model_list_pages_are_followed() -> None:
    pages = [
        {"data": [{"id": "a-1", "display_name": "A"}], "has_more": True, "last_id": "a-1"},
        {"data": [{"id": "b-1"}], "has_more": False, "last_id": "b-1"},
    ]
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, json=pages[len(seen) - 1])

    ad = AnthropicAdapter(config("agnes-anthropic"), transport=httpx.MockTransport(handler))
    assert [s.id for s in await ad.model_specs()] == ["a-1", "b-1"]
    assert seen[1].url.params["after_id"] == "a-1"


async def test_model_list_errors() -> None:
    rec = load("anthropic", "error_401")

    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(401, headers=rec["headers"], content=rec["chunks"][0].encode())

    ad = AnthropicAdapter(config("anthropic"), transport=httpx.MockTransport(handler))
    with pytest.raises(ProviderError) as caught:
        await ad.list_models()
    assert caught.value.error.code is C.AUTH_INVALID
    assert await ad.health_check() is False

    bad = AnthropicAdapter(
        config("anthropic"), transport=httpx.MockTransport(lambda r: httpx.Response(200, json={"x": 1}))
    )
    with pytest.raises(ProviderError) as caught:
        await bad.list_models()
    assert caught.value.error.code is C.INVALID_RESPONSE

    def refuse(req: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    down = AnthropicAdapter(config("anthropic"), transport=httpx.MockTransport(refuse))
    assert await down.health_check() is False


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_key_pasted_with_a_line_break_is_sent_and_redacted_without_it(vendor: str) -> None:
    rec = load(vendor, "error_401")
    replay = Replay(rec)
    key = "sk-ant-pasted-key-0123456789"
    a = AnthropicAdapter(replace(config(vendor), api_key=f" {key}\n"), transport=httpx.MockTransport(replay))
    await a.send_stream(request(), [].append)
    assert replay.requests[-1].headers["x-api-key"] == key  # h11 refuses "\n" in a header: no request at all
    assert a.redact(f"bad key {key}") == "bad key [redacted]"
