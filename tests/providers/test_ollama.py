"""The Ollama adapter against recorded /api/chat, /api/tags and /api/show answers (tests/providers/recordings/ollama/),
replayed through httpx.MockTransport with the recorded split points; no network, no sleeps."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
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
)
from sidecar.providers.base import ProviderConfig
from sidecar.providers.capabilities import CHAT, STREAMING, THINKING, TOOL_CALLING, VISION, ModelSpec
from sidecar.providers.errors import ProviderError, phase2_code
from sidecar.providers.ollama import OllamaAdapter

pytestmark = pytest.mark.anyio

RECORDINGS = Path(__file__).parent / "recordings" / "ollama"
BASE_URL = "http://127.0.0.1:11434"
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC")
C = MetonaErrorCode


def recording(name: str) -> dict[str, Any]:
    return yaml.safe_load((RECORDINGS / f"{name}.yaml").read_text(encoding="utf-8"))


class Replay(httpx.AsyncByteStream):
    """A recorded body, chunk by chunk (split points kept); ``cut`` drops the connection after the last one."""

    def __init__(self, chunks: list[str], cut: bool = False) -> None:
        self.chunks = chunks
        self.cut = cut

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk.encode("utf-8")
        if self.cut:
            raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")

    async def aclose(self) -> None:
        return None


def replay(rec: dict[str, Any]) -> httpx.Response:
    return httpx.Response(rec["status"], headers=rec.get("headers") or {}, stream=Replay(rec["chunks"], rec.get("cut")))


class Server:
    """A MockTransport handler: /api/chat answers the recording; every request is kept."""

    def __init__(
        self, chat: dict[str, Any] | None = None, routes: dict[str, Callable[..., httpx.Response]] | None = None
    ):
        self.chat = chat
        self.routes = routes or {}
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        route = self.routes.get(f"{request.method} {request.url}") or self.routes.get(request.url.path)
        if route is not None:
            return route(request)
        if request.url.path == "/api/chat" and self.chat is not None:
            return replay(self.chat)
        return httpx.Response(404, json={"error": "404 page not found"})

    @property
    def chat_payload(self) -> dict[str, Any]:
        sent = [r for r in self.requests if r.url.path == "/api/chat"]
        assert len(sent) == 1
        return json.loads(sent[0].content)


def adapter(server: Server, *, api_key: str | None = None, options: dict[str, Any] | None = None) -> OllamaAdapter:
    config = ProviderConfig(
        provider_id="ollama",
        preset="ollama",
        protocol="ollama",
        base_url=BASE_URL,
        api_key=api_key,
        default_model="llama3.2",
        options=options or {},
    )
    return OllamaAdapter(config, transport=httpx.MockTransport(server))


def make_request(**overrides: Any) -> MetonaRequest:
    data: dict[str, Any] = {
        "meta": {"sessionId": "s_1", "iteration": 1, "requestId": "r_1", "timestamp": 1, "agentVersion": "0.1.0"},
        "systemPrompt": {
            "roleDefinition": "You are Metona.",
            "outputConstraints": "Answer briefly.",
            "safetyGuidelines": "Be safe.",
            "dynamicReminders": "Today is Monday.",
        },
        "messages": [{"role": "user", "content": "why is the sky blue?", "timestamp": 1}],
        "params": {},
    }
    data.update(overrides)
    return MetonaRequest.model_validate(data)


async def stream(
    server: Server, request: MetonaRequest | None = None
) -> tuple[list[MetonaStreamEvent], MetonaResponse]:
    events: list[MetonaStreamEvent] = []
    response = await adapter(server).send_stream(request or make_request(), events.append)
    assert_framing(events)
    return events, response


def assert_framing(events: list[MetonaStreamEvent]) -> None:
    assert [e.seq for e in events] == list(range(len(events)))
    types = [e.type.value for e in events]
    assert types.count("done") == 1 and types[-1] == "done"
    assert all(e.request_id == "r_1" and e.session_id == "s_1" and e.iteration == 1 for e in events)
    if "error" in types:
        assert types[-2] == "error"


def kinds(events: list[MetonaStreamEvent]) -> list[str]:
    return [e.type.value for e in events]


# ---- streams -------------------------------------------------------------------------------------------------


async def test_plain_text_stream() -> None:
    server = Server(recording("plain_text"))
    events, response = await stream(server)
    assert kinds(events) == ["text_delta"] * 4 + ["usage", "done"]
    assert [e.delta for e in events[:4]] == ["The", " sky", " is blue", " because of Rayleigh scattering."]
    assert response.content == "The sky is blue because of Rayleigh scattering."
    assert response.reasoning_content is None and response.tool_calls is None
    assert response.finish_reason is MetonaFinishReason.STOP
    usage = response.usage.model_dump()
    assert usage == {"inputTokens": 26, "outputTokens": 282, "totalTokens": 308}
    assert events[-2].usage == response.usage
    perf = response.meta.perf_stats
    assert perf is not None
    assert perf.load_duration_ms == pytest.approx(1.334875)
    assert perf.prompt_eval_duration_ms == pytest.approx(342.546)
    assert perf.eval_duration_ms == pytest.approx(4535.599)
    assert perf.tokens_per_second == pytest.approx(282 / 4.535599)
    assert response.meta.provider == "ollama" and response.meta.model == "llama3.2"
    assert response.error is None


async def test_plain_text_nonstream() -> None:
    server = Server(recording("plain_text_nonstream"))
    response = await adapter(server).send(make_request())
    assert server.chat_payload["stream"] is False
    assert response.content == "Hello! How are you today?"
    assert response.finish_reason is MetonaFinishReason.STOP
    assert response.usage.model_dump() == {"inputTokens": 26, "outputTokens": 298, "totalTokens": 324}
    assert response.meta.perf_stats is not None
    assert response.meta.perf_stats.tokens_per_second == pytest.approx(298 / 4.799921)


async def test_reasoning_stream() -> None:
    events, response = await stream(Server(recording("reasoning")))
    assert kinds(events) == (
        ["thinking_start"] + ["reasoning_delta"] * 14 + ["thinking_end"] + ["text_delta"] * 6 + ["usage", "done"]
    )
    assert response.reasoning_content == "We need to give a description of a rabbit in 3 words."
    assert response.content == "Fluffy, curious, gentle."
    assert response.usage.model_dump() == {"inputTokens": 74, "outputTokens": 26, "totalTokens": 100}
    assert response.finish_reason is MetonaFinishReason.STOP


async def test_tool_call_single_arrives_whole() -> None:
    events, response = await stream(Server(recording("tool_call_single")))
    assert kinds(events) == ["tool_call_complete", "usage", "done"]  # no tool_call_delta for Ollama
    assert response.tool_calls is not None and len(response.tool_calls) == 1
    call = response.tool_calls[0]
    assert (call.name, call.args, call.iteration) == ("get_weather", {"city": "Tokyo"}, 1)
    assert call.id.startswith("call_")  # Ollama sent no id: one is made
    assert events[0].tool_call == call
    assert response.finish_reason is MetonaFinishReason.TOOL_CALLS  # done_reason "stop" after tool calls
    assert response.usage.model_dump() == {"inputTokens": 169, "outputTokens": 15, "totalTokens": 184}


async def test_tool_calls_parallel() -> None:
    events, response = await stream(Server(recording("tool_calls_parallel")))
    assert kinds(events) == (
        ["thinking_start", "reasoning_delta", "reasoning_delta", "thinking_end"]
        + ["tool_call_complete"] * 4
        + ["usage", "done"]
    )
    assert response.tool_calls is not None
    assert [(c.id, c.name, c.args) for c in response.tool_calls] == [
        ("call_0xtemp", "get_temperature", {"city": "New York"}),
        ("call_1xcond", "get_conditions", {"city": "New York"}),
        ("call_2xtemp", "get_temperature", {"city": "London"}),
        ("call_3xcond", "get_conditions", {"city": "London"}),
    ]
    assert response.reasoning_content == (
        "The user wants conditions and temperature for two cities. I will call both tools for each city."
    )
    assert response.content == ""
    assert response.finish_reason is MetonaFinishReason.TOOL_CALLS


async def test_tool_call_in_the_done_line() -> None:
    events, response = await stream(Server(recording("tool_call_one_chunk_args")))
    assert kinds(events) == ["tool_call_complete", "usage", "done"]
    assert response.tool_calls is not None
    assert [(c.name, c.args) for c in response.tool_calls] == [("get_weather", {"city": "Tokyo"})]
    assert response.finish_reason is MetonaFinishReason.TOOL_CALLS
    assert response.usage.total_tokens == 187


async def test_usage_only_final_line_without_message() -> None:
    events, response = await stream(Server(recording("usage_only_final_chunk")))
    assert kinds(events) == ["text_delta", "usage", "done"]
    assert response.content == "The"
    assert response.usage.model_dump() == {"inputTokens": 61, "outputTokens": 468, "totalTokens": 529}
    assert response.finish_reason is MetonaFinishReason.STOP  # no done_reason at all
    assert response.meta.perf_stats is not None and response.meta.perf_stats.load_duration_ms == pytest.approx(6.396458)


async def test_think_tags_in_content_are_reasoning() -> None:
    events, response = await stream(Server(recording("think_tags")))
    assert kinds(events)[:2] == ["thinking_start", "reasoning_delta"]
    assert "thinking_end" in kinds(events)
    assert response.reasoning_content == "\nOkay, the user says hello.\n"
    assert response.content.lstrip("\n") == "Hello! How can I help you today?"
    assert "<think>" not in response.content and "</think>" not in response.content


# ---- failures inside a stream --------------------------------------------------------------------------------


async def test_mid_stream_error_line() -> None:
    events, response = await stream(Server(recording("mid_stream_error")))
    assert kinds(events) == ["text_delta"] * 4 + ["error", "done"]
    assert response.content == " Yes.Ican"
    assert response.finish_reason is MetonaFinishReason.ERROR
    error = response.error
    assert error is not None and events[-2].error == error
    assert error.code is C.UNKNOWN and error.retryable is True and error.provider_code == "stream_error"
    assert "an error was encountered while running the model" in error.message
    with pytest.raises(ProviderError) as caught:
        await run(Server(recording("mid_stream_error")))
    assert caught.value.interrupted is True
    assert phase2_code(caught.value.error, interrupted=True) == ("PROVIDER_STREAM_INTERRUPTED", 502)


async def test_stream_cut() -> None:
    events, response = await stream(Server(recording("stream_cut")))
    assert kinds(events) == ["text_delta"] * 3 + ["error", "done"]
    assert response.content == "The sky is blue"
    assert response.error is not None and response.error.code is C.NETWORK_ERROR
    assert "is Ollama running" not in response.error.message
    with pytest.raises(ProviderError) as caught:
        await run(Server(recording("stream_cut")))
    assert caught.value.interrupted is True


async def test_stream_that_ends_without_a_done_line_is_a_cut() -> None:
    rec = recording("stream_cut")
    rec["chunks"] = rec["chunks"][:2]
    rec["cut"] = False
    events, response = await stream(Server(rec))
    assert kinds(events) == ["text_delta"] * 3 + ["error", "done"]
    assert response.error is not None and response.error.code is C.NETWORK_ERROR
    assert "without its final done line" in response.error.message
    with pytest.raises(ProviderError) as caught:
        await run(Server(rec))
    assert caught.value.interrupted is True and caught.value.retryable


async def test_malformed_line() -> None:
    events, response = await stream(Server(recording("malformed")))
    assert kinds(events) == ["text_delta", "error", "done"]
    assert response.error is not None
    assert response.error.code is C.INVALID_RESPONSE and response.error.retryable is False
    assert "malformed stream" in response.error.message


@pytest.mark.parametrize(
    "arguments", [[1, 2], "[1, 2]", "{not json", 42], ids=["list", "json-list", "bad-json", "number"]
)
async def test_tool_arguments_that_are_not_an_object_are_a_parse_error(arguments: Any) -> None:
    line = {
        "model": "llama3.2",
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "f", "arguments": arguments}}],
        },
        "done": True,
        "done_reason": "stop",
    }
    rec = {"status": 200, "headers": {}, "chunks": [json.dumps(line) + "\n"]}
    events, response = await stream(Server(rec))
    assert kinds(events) == ["error", "done"]
    assert response.error is not None and response.error.code is C.PARSE_ERROR
    assert response.error.retryable is False


async def test_done_reason_length() -> None:
    line = {
        "model": "llama3.2",
        "message": {"role": "assistant", "content": "abc"},
        "done": True,
        "done_reason": "length",
    }
    rec = {"status": 200, "headers": {}, "chunks": [json.dumps(line) + "\n"]}
    _events, response = await stream(Server(rec))
    assert response.finish_reason is MetonaFinishReason.LENGTH
    assert response.usage.total_tokens == 0  # no counts reported: zero usage, no usage event
    assert "usage" not in kinds(_events)


async def run(server: Server, request: MetonaRequest | None = None, *, stream_: bool = True) -> None:
    ollama = adapter(server)
    req = request or make_request()
    await ollama.run(req, None, ollama.assembler(req, "llama3.2", None), stream=stream_)


# ---- HTTP errors -----------------------------------------------------------------------------------------------

ERRORS = {
    "error_400": (C.UNKNOWN, False, "does not support tools"),
    "error_401": (C.AUTH_INVALID, False, "unauthorized"),
    "error_404": (C.MODEL_NOT_FOUND, False, 'model "llama3.2" not found, try pulling it first'),
    "error_429": (C.RATE_LIMITED, True, "too many requests"),
    "error_500": (C.UNKNOWN, True, "the model failed to generate a response"),
    "error_502": (C.NETWORK_ERROR, True, "cloud model could not be reached"),
    "error_503": (C.MODEL_OVERLOADED, True, "server busy"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
async def test_http_errors(name: str) -> None:
    code, retryable, text = ERRORS[name]
    rec = recording(name)
    events, response = await stream(Server(rec))
    assert kinds(events) == ["error", "done"]
    error = response.error
    assert error is not None and events[0].error == error
    assert (error.code, error.retryable) == (code, retryable)
    assert error.provider_code == str(rec["status"])
    assert error.retry_after_ms is None  # Ollama documents no Retry-After
    assert text in error.message and error.provider == "ollama"
    with pytest.raises(ProviderError) as caught:
        await run(Server(rec), stream_=False)
    assert caught.value.status == rec["status"] and caught.value.interrupted is False


async def test_connection_refused_says_is_ollama_running() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    events: list[MetonaStreamEvent] = []
    ollama = OllamaAdapter(adapter(Server()).config, transport=httpx.MockTransport(refuse))
    response = await ollama.send_stream(make_request(), events.append)
    assert kinds(events) == ["error", "done"]
    error = response.error
    assert error is not None and error.code is C.NETWORK_ERROR and error.retryable is True
    assert f"is Ollama running at {BASE_URL}?" in error.message
    assert await ollama.health_check() is False
    with pytest.raises(ProviderError) as caught:
        await ollama.model_specs()
    assert "is Ollama running" in caught.value.error.message and caught.value.interrupted is False


async def test_network_timeout() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    ollama = OllamaAdapter(adapter(Server()).config, transport=httpx.MockTransport(slow))
    response = await ollama.send(make_request())
    assert response.error is not None and response.error.code is C.NETWORK_TIMEOUT and response.error.retryable


# ---- the request sent ---------------------------------------------------------------------------------------

TOOLS = [
    {
        "name": "get_weather",
        "description": "Get the weather in a given city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city"}},
            "required": ["city"],
        },
        "category": "network",
        "riskLevel": "safe",
        "requiresPermission": False,
        "timeoutMs": 1000,
    },
    {
        "name": "rm",
        "description": "Delete a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "Path"}}},
        "category": "filesystem",
        "riskLevel": "high",
        "requiresPermission": True,
        "timeoutMs": 1000,
    },
]

HISTORY = [
    {
        "role": "user",
        "content": "what is in these images and the weather in Toronto?",
        "timestamp": 1,
        "images": [
            {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
            {"url": "http://img.example/cat.png"},
        ],
    },
    {
        "role": "assistant",
        "content": "",
        "reasoningContent": "I should call the weather tool.",
        "toolCalls": [
            {"id": "call_1", "name": "get_weather", "args": {"city": "Toronto"}, "iteration": 1, "timestamp": 2}
        ],
        "timestamp": 2,
    },
    {
        "role": "tool",
        "content": "",
        "toolResult": {
            "toolCallId": "call_1",
            "toolName": "get_weather",
            "result": {"celsius": 11},
            "summary": "11 degrees celsius",
            "success": True,
            "durationMs": 5,
            "timestamp": 3,
        },
        "timestamp": 3,
    },
    {
        "role": "tool",
        "content": "",
        "toolResult": {
            "toolCallId": "call_2",
            "toolName": "get_weather",
            "result": {"celsius": 15, "city": "London"},
            "success": True,
            "durationMs": 5,
            "timestamp": 3,
        },
        "timestamp": 3,
    },
]


def image_route(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "image/png"}, content=PNG)


async def test_payload() -> None:
    server = Server(recording("tool_call_single"), {"GET http://img.example/cat.png": image_route})
    request = make_request(
        messages=HISTORY,
        tools=TOOLS,
        params={"maxTokens": 256, "topP": 0.9, "stopSequences": ["\n\n", "END"]},
        constraints={"allowedTools": ["get_weather"]},
    )
    await stream(server, request)
    sent = next(r for r in server.requests if r.url.path == "/api/chat")
    assert "authorization" not in sent.headers
    payload = server.chat_payload
    png = base64.b64encode(PNG).decode()
    assert payload == {
        "model": "llama3.2",
        "messages": [
            {
                "role": "system",
                "content": "You are Metona.\n\nAnswer briefly.\n\nBe safe.\n\nToday is Monday.",
            },
            {
                "role": "user",
                "content": "what is in these images and the weather in Toronto?",
                "images": [png, png],
            },
            {
                "role": "assistant",
                "content": "",
                "thinking": "I should call the weather tool.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": {"city": "Toronto"}},
                    }
                ],
            },
            {"role": "tool", "content": "11 degrees celsius", "tool_name": "get_weather", "tool_call_id": "call_1"},
            {
                "role": "tool",
                "content": '{"celsius": 15, "city": "London"}',
                "tool_name": "get_weather",
                "tool_call_id": "call_2",
            },
        ],
        "stream": True,
        "options": {"temperature": 0.0, "num_predict": 256, "top_p": 0.9, "stop": ["\n\n", "END"]},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Get the weather in a given city",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string", "description": "The city"}},
                        "required": ["city"],
                    },
                },
            }
        ],
    }


async def test_payload_temperature_and_no_tools_when_max_tool_calls_is_zero() -> None:
    server = Server(recording("plain_text"))
    request = make_request(tools=TOOLS, params={"temperature": 0.7}, constraints={"maxToolCalls": 0})
    await stream(server, request)
    payload = server.chat_payload
    assert "tools" not in payload and "think" not in payload
    assert payload["options"] == {"temperature": 0.7}


async def test_payload_offers_every_tool_without_allowed_tools() -> None:
    server = Server(recording("plain_text"))
    await stream(server, make_request(tools=TOOLS))
    assert [t["function"]["name"] for t in server.chat_payload["tools"]] == ["get_weather", "rm"]


@pytest.mark.parametrize(
    ("params", "think"),
    [
        ({}, None),
        ({"thinkingEnabled": False}, False),
        ({"thinkingEnabled": False, "thinkingEffort": "high"}, False),
        ({"thinkingEnabled": True}, True),
        ({"thinkingEffort": "low"}, "low"),
        ({"thinkingEnabled": True, "thinkingEffort": "medium"}, "medium"),
        ({"thinkingEffort": "high"}, "high"),
        ({"thinkingEffort": "max"}, True),
    ],
)
async def test_think_mapping(params: dict[str, Any], think: Any) -> None:
    server = Server(recording("plain_text"))
    await stream(server, make_request(params=params))
    payload = server.chat_payload
    if think is None:
        assert "think" not in payload
    else:
        assert payload["think"] == think and type(payload["think"]) is type(think)


async def test_auth_extra_headers_and_options() -> None:
    server = Server(recording("plain_text"))
    ollama = OllamaAdapter(
        ProviderConfig(
            provider_id="ollama",
            preset="ollama",
            protocol="ollama",
            base_url=BASE_URL + "/",
            api_key="sk-canary-123",
            default_model="qwen3",
            options={"extra_headers": {"X-Proxy": "yes"}, "num_ctx": 16384, "keep_alive": "10m"},
        ),
        transport=httpx.MockTransport(server),
    )
    response = await ollama.send_stream(make_request(), lambda e: None)
    assert response.error is None
    sent = server.requests[0]
    assert str(sent.url) == BASE_URL + "/api/chat"
    assert sent.headers["authorization"] == "Bearer sk-canary-123"
    assert sent.headers["x-proxy"] == "yes"
    payload = server.chat_payload
    assert payload["model"] == "qwen3"
    assert payload["options"]["num_ctx"] == 16384 and payload["keep_alive"] == "10m"


async def test_image_failures_are_typed() -> None:
    bad = make_request(
        messages=[{"role": "user", "content": "x", "timestamp": 1, "images": [{"url": "data:image/png;base64,@@@"}]}]
    )
    response = await adapter(Server(recording("plain_text"))).send(bad)
    assert response.error is not None and response.error.provider_code == "invalid_request"

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    server = Server(recording("plain_text"), {"GET http://img.example/cat.png": refuse})
    remote = make_request(
        messages=[{"role": "user", "content": "x", "timestamp": 1, "images": [{"url": "http://img.example/cat.png"}]}]
    )
    response = await adapter(server).send(remote)
    assert response.error is not None and response.error.code is C.NETWORK_ERROR
    assert "downloading an image failed" in response.error.message and "is Ollama running" not in response.error.message
    assert not [r for r in server.requests if r.url.path == "/api/chat"]


# ---- models ------------------------------------------------------------------------------------------------


def json_route(body: Any, status: int = 200) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(status, json=body)


def recorded_route(name: str) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: replay(recording(name))


def show_route(answers: dict[str, Callable[[httpx.Request], httpx.Response]]) -> Callable[..., httpx.Response]:
    def route(request: httpx.Request) -> httpx.Response:
        return answers[json.loads(request.content)["model"]](request)

    return route


async def test_list_models_from_tags_and_show() -> None:
    server = Server(
        routes={
            "/api/tags": recorded_route("api_tags"),
            "/api/show": show_route(
                {
                    "llama3.2:latest": recorded_route("api_show"),
                    "deepseek-r1:latest": json_route({"error": "the model failed"}, 500),
                }
            ),
        }
    )
    ollama = adapter(server)
    assert ollama.get_context_window("llama3.2:latest") == ModelSpec.CONSERVATIVE_CONTEXT  # nothing shown yet
    infos = await ollama.list_models()
    by_id = {i.id: i for i in infos}
    assert list(by_id) == ["deepseek-r1:latest", "llama3.2:latest"]
    llama = by_id["llama3.2:latest"]
    assert (llama.provider_id, llama.context_window, llama.max_output) == ("ollama", 8192, 4096)
    assert llama.supports_streaming and llama.supports_images
    assert not llama.supports_tool_calling and not llama.supports_thinking and not llama.supports_structured_output
    deepseek = by_id["deepseek-r1:latest"]  # /api/show failed: the conservative set, never tools or vision
    assert deepseek.supports_streaming and not deepseek.supports_tool_calling and not deepseek.supports_images
    assert deepseek.context_window == ModelSpec.CONSERVATIVE_CONTEXT
    assert ollama.get_context_window("llama3.2:latest") == 8192  # cached from /api/show
    assert set(ollama.supported_models) == {"llama3.2:latest", "deepseek-r1:latest"}
    specs = {s.id: s for s in await ollama.model_specs()}
    assert specs["llama3.2:latest"].to_phase2() == {
        "model": "llama3.2:latest",
        "display_name": "llama3.2:latest",
        "capabilities": [CHAT, STREAMING, VISION],
        "context_window": 8192,
        "max_output_tokens": 4096,
        "deprecated": False,
        "metadata": {
            "family": "llama",
            "parameter_size": "8.0B",
            "quantization_level": "Q4_0",
            "format": "gguf",
            "context_length": 8192,
            "ollama_capabilities": ["completion", "vision"],
        },
    }
    shows = [json.loads(r.content) for r in server.requests if r.url.path == "/api/show"]
    assert {"model": "llama3.2:latest"} in shows and {"model": "deepseek-r1:latest"} in shows


async def test_model_capabilities_context_and_embedding_models() -> None:
    show_qwen = {
        "capabilities": ["completion", "tools", "thinking"],
        "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960},
        "parameters": 'num_ctx                        12288\nstop                           "<|im_end|>"',
        "details": {"family": "qwen3"},
    }
    show_old = {"model_info": {"general.architecture": "llama", "llama.context_length": 131072}}  # no capabilities
    tags = {"models": [{"name": "qwen3:8b"}, {"name": "all-minilm:latest"}, {"name": "old:latest"}, {"bad": 1}]}
    server = Server(
        routes={
            "/api/tags": json_route(tags),
            "/api/show": show_route(
                {
                    "qwen3:8b": json_route(show_qwen),
                    "all-minilm:latest": json_route({"capabilities": ["embedding"]}),
                    "old:latest": json_route(show_old),
                }
            ),
        }
    )
    ollama = adapter(server)
    specs = {s.id: s for s in await ollama.model_specs()}
    assert list(specs) == ["qwen3:8b", "old:latest"]  # the embedding model is not a chat model
    assert specs["qwen3:8b"].capabilities == (CHAT, STREAMING, TOOL_CALLING, THINKING)
    assert specs["qwen3:8b"].context_window == 12288  # the Modelfile's num_ctx, not the trained 40960
    assert specs["qwen3:8b"].metadata["context_length"] == 40960
    assert specs["old:latest"].capabilities == (CHAT, STREAMING)
    assert specs["old:latest"].context_window == 131072
    configured = OllamaAdapter(
        ProviderConfig("ollama", "ollama", "ollama", BASE_URL, options={"num_ctx": 4096}),
        transport=httpx.MockTransport(server),
    )
    spec = await configured.show("qwen3:8b")
    assert spec is not None and spec.context_window == 4096
    assert configured.get_context_window("qwen3:8b") == 4096


async def test_think_is_not_sent_to_a_model_shown_without_thinking() -> None:
    tags = {"models": [{"name": "llama3.2:latest"}, {"name": "qwen3:latest"}]}
    server = Server(
        recording("plain_text"),
        {
            "/api/tags": json_route(tags),
            "/api/show": show_route(
                {
                    "llama3.2:latest": json_route({"capabilities": ["completion", "tools"]}),
                    "qwen3:latest": json_route({"capabilities": ["completion", "tools", "thinking"]}),
                }
            ),
        },
    )
    ollama = adapter(server)
    await ollama.model_specs()
    sent: list[dict[str, Any]] = []
    for model, params in [
        ("llama3.2", {"thinkingEffort": "high"}),
        ("llama3.2", {"thinkingEnabled": False}),
        ("qwen3", {"thinkingEffort": "high"}),
        ("unknown-model", {"thinkingEnabled": True}),
    ]:
        response = await ollama.send_stream(make_request(params=params), lambda e: None, model=model)
        assert response.error is None
        sent.append(json.loads(server.requests[-1].content))
    assert [p.get("think", "absent") for p in sent] == ["absent", False, "high", True]


async def test_bad_tags_answer_is_typed() -> None:
    ollama = adapter(Server(routes={"/api/tags": json_route({"nope": True})}))
    with pytest.raises(ProviderError) as caught:
        await ollama.list_models()
    assert caught.value.error.code is C.INVALID_RESPONSE
    html = adapter(Server(routes={"/api/tags": lambda r: httpx.Response(200, text="<html>proxy</html>")}))
    with pytest.raises(ProviderError) as caught:
        await html.list_models()
    assert caught.value.error.code is C.INVALID_RESPONSE


async def test_health_check() -> None:
    ok = adapter(Server(routes={"/api/version": json_route({"version": "0.12.6"})}))
    assert await ok.health_check() is True
    broken = adapter(Server(routes={"/api/version": json_route({"error": "boom"}, 500)}))
    assert await broken.health_check() is False
