"""An Ollama model without the ``tools`` capability: its tool calls go through the shared lenient parser."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from sidecar.ir import MetonaFinishReason

from .test_ollama import TOOLS, Replay, Server, adapter, assert_framing, kinds, make_request, recorded_route

pytestmark = pytest.mark.anyio


def ndjson_chat(*contents: str) -> httpx.Response:
    lines = [
        {"model": "llama3.2:latest", "message": {"role": "assistant", "content": c}, "done": False} for c in contents
    ]
    lines.append(
        {
            "model": "llama3.2:latest",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 120,
            "eval_count": 21,
        }
    )
    chunks = [json.dumps(x) + "\n" for x in lines]
    return httpx.Response(200, headers={"content-type": "application/x-ndjson"}, stream=Replay(chunks))


HISTORY = [
    {"role": "user", "content": "the weather in Toronto?", "timestamp": 1},
    {
        "role": "assistant",
        "content": "",
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
]


def chat_payloads(server: Server) -> list[dict[str, Any]]:
    return [json.loads(r.content) for r in server.requests if r.url.path == "/api/chat"]


async def test_a_model_shown_without_tools_gets_them_as_text_and_its_json_answer_becomes_a_call() -> None:
    server = Server(
        routes={
            "/api/show": recorded_route("api_show"),  # capabilities: completion, vision — no tools
            "/api/chat": lambda r: ndjson_chat('{"name": "get_weather", ', '"arguments": {"city": "Toronto"}}'),
        }
    )
    ollama = adapter(server)
    assert await ollama.show("llama3.2") is not None
    events: list[Any] = []
    response = await ollama.send_stream(make_request(tools=TOOLS), events.append)
    assert_framing(events)
    assert kinds(events) == ["tool_call_complete", "usage", "done"]
    assert response.tool_calls and (response.tool_calls[0].name, response.tool_calls[0].args) == (
        "get_weather",
        {"city": "Toronto"},
    )
    assert response.finish_reason is MetonaFinishReason.TOOL_CALLS
    (payload,) = chat_payloads(server)
    assert "tools" not in payload
    system = payload["messages"][0]
    assert system["role"] == "system" and '"name": "get_weather"' in system["content"]
    assert system["content"].startswith("You are Metona.")


async def test_does_not_support_tools_is_retried_once_as_text_and_history_is_written_as_text() -> None:
    answers = iter(
        [
            httpx.Response(
                400,
                stream=Replay(['{"error":"registry.ollama.ai/library/llama3.2:latest does not support tools"}']),
            ),
            ndjson_chat("Toronto is ", "11 degrees."),
            ndjson_chat("Hello."),
        ]
    )
    server = Server(routes={"/api/chat": lambda r: next(answers)})
    ollama = adapter(server)
    events: list[Any] = []
    response = await ollama.send_stream(make_request(tools=TOOLS, messages=HISTORY), events.append)
    assert_framing(events)
    assert response.error is None and response.content == "Toronto is 11 degrees." and response.tool_calls is None
    first, second = chat_payloads(server)
    assert "tools" in first and "tools" not in second
    roles = [m["role"] for m in second["messages"]]
    assert "tool" not in roles
    assert any('{"name": "get_weather", "arguments": ' in m["content"] for m in second["messages"])
    assert any(m["content"].startswith("Result of the tool get_weather:") for m in second["messages"])
    # remembered: the next call goes straight to the text path
    await ollama.send_stream(make_request(tools=TOOLS), events.append)
    assert "tools" not in chat_payloads(server)[-1]


async def test_a_wrong_tool_from_a_model_without_tools_stays_text() -> None:
    server = Server(
        routes={
            "/api/show": recorded_route("api_show"),
            "/api/chat": lambda r: ndjson_chat('{"name": "rm_rf", "arguments": {}}'),
        }
    )
    ollama = adapter(server)
    await ollama.show("llama3.2")
    events: list[Any] = []
    response = await ollama.send_stream(make_request(tools=TOOLS), events.append)
    assert kinds(events) == ["text_delta", "usage", "done"]
    assert response.tool_calls is None and response.content == '{"name": "rm_rf", "arguments": {}}'
