"""providers/* and chat/* over real stdio: the mock provider, an OpenAI-protocol loopback server, cancel,
failover, and a canary API key that must never appear on stdout, stderr or in the data directory."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.http_stub import Answer, sse, stub_server
from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e

CANARY = "sk-CANARY-5b1e0d77c2a94f8e-leak-check"


def ir_request(text: str, *, stream: bool = True, iteration: int = 1) -> dict[str, Any]:
    return {
        "meta": {"sessionId": "s1", "iteration": iteration, "requestId": "r1", "timestamp": 1, "agentVersion": "e2e"},
        "systemPrompt": {"roleDefinition": "You help.", "outputConstraints": "", "safetyGuidelines": ""},
        "messages": [{"role": "user", "content": text, "timestamp": 1}],
        "params": {"stream": stream},
    }


def stream(sc: Sidecar, params: dict[str, Any], timeout: float = 20) -> tuple[dict[str, Any], list[Any]]:
    rid = sc.request("chat/stream", params)
    seen: list[Any] = []
    reply = sc.response(rid, timeout=timeout, collect=seen)
    return reply, seen


def stream_lines(seen: list[Any]) -> list[dict[str, Any]]:
    return [m for m in seen if isinstance(m, dict) and "jsonrpc" not in m]


def test_presets_crud_and_mock_chat(ready: Sidecar) -> None:
    presets = ready.result("providers/presets")["items"]
    assert {p["preset"] for p in presets} >= {"deepseek", "agnes-ai", "ollama", "anthropic", "openai", "mock"}
    agnes = next(p for p in presets if p["preset"] == "agnes-ai")
    assert agnes["protocols"] == ["openai", "anthropic"]

    script = {"turns": [{"reasoning": "hmm", "text": "你好！Hello.", "chunk_chars": 2}]}
    created = ready.result("providers/create", {"preset": "mock", "options": {"script": script}})
    assert created["provider_id"] == "mock" and created["api_key_configured"] is False
    models = ready.result("providers/models", {"provider_id": "mock"})["items"]
    assert models[0]["model"] == "mock-1" and "chat" in models[0]["capabilities"]

    response = ready.result("chat/send", {"provider_id": "mock", "request": ir_request("hi", stream=False)})
    assert response["content"] == "你好！Hello." and response["reasoningContent"] == "hmm"
    assert response["finishReason"] == "stop" and response["meta"]["provider"] == "mock"

    reply, seen = stream(ready, {"provider_id": "mock", "request": ir_request("hi")})
    lines = stream_lines(seen)
    assert [line["seq"] for line in lines] == list(range(len(lines)))
    assert lines[0]["type"] == "thinking_start" and lines[-1]["type"] == "done"
    assert list(lines[1])[:6] == ["type", "requestId", "sessionId", "iteration", "seq", "timestamp"]
    assert "".join(line.get("delta", "") for line in lines if line["type"] == "text_delta") == "你好！Hello."
    assert reply["result"]["content"] == "你好！Hello."

    health = ready.result("providers/health")["items"]
    assert health[0]["provider_id"] == "mock" and health[0]["healthy"] is True
    assert ready.result("providers/delete", {"provider_id": "mock"}) == {"provider_id": "mock", "deleted": True}
    missing = ready.call("providers/get", {"provider_id": "mock"})["error"]
    assert missing["code"] == 404 and missing["data"]["code"] == "PROVIDER_NOT_FOUND"


def test_bad_inputs_are_typed(ready: Sidecar) -> None:
    bad = ready.call("providers/create", {"preset": "nope"})["error"]
    assert bad["code"] == 400 and bad["data"]["code"] == "PROVIDER_PRESET_UNKNOWN"
    bad = ready.call("providers/create", {"preset": "openai", "base_url": "ftp://x"})["error"]
    assert bad["code"] == -32602
    bad = ready.call("chat/send", {"request": ir_request("x")})["error"]
    assert bad["data"]["code"] == "PROVIDER_NOT_CONFIGURED"
    bad = ready.call("chat/send", {"provider_id": "mock", "request": {"meta": {}}})["error"]
    assert bad["code"] == -32602 and bad["data"]["code"] == "VALIDATION_ERROR"
    bad = ready.call("config/update", {"values": {"llm.fallbackApiKey": "x"}})["error"]
    assert bad["data"]["code"] == "CONFIG_SECRET_WRITE_ONLY"


def test_cancel_a_running_stream(ready: Sidecar) -> None:
    script = {"turns": [{"text": "x" * 2000, "chunk_chars": 1, "delay_ms": 2}]}
    ready.result("providers/create", {"preset": "mock", "options": {"script": script}})
    rid = ready.request("chat/stream", {"provider_id": "mock", "request": ir_request("go")})
    seen: list[Any] = []
    while len(stream_lines(seen)) < 5:
        seen.append(ready.next())
    ready.notify("$/cancelRequest", {"id": rid})
    reply = ready.response(rid, collect=seen)
    assert reply["error"]["code"] == -32800
    lines = stream_lines(seen)
    assert [line["type"] for line in lines[-2:]] == ["error", "done"]
    assert lines[-2]["error"]["code"] == "user_aborted"
    assert [line["seq"] for line in lines] == list(range(len(lines)))
    ready.assert_alive()


def test_failover_sends_provider_switched(ready: Sidecar) -> None:
    failing = {"turns": [{"text": "x", "error": {"code": "model_overloaded"}}]}
    ready.result("providers/create", {"preset": "mock", "provider_id": "primary", "options": {"script": failing}})
    ready.result("providers/create", {"preset": "mock", "provider_id": "backup"})
    ready.result("config/update", {"values": {"llm.fallbackProvider": "backup", "llm.maxRetries": 0}})
    reply, seen = stream(ready, {"provider_id": "primary", "request": ir_request("hello")})
    switched = [m for m in seen if isinstance(m, dict) and m.get("method") == "agent/providerSwitched"]
    assert switched == [
        {
            "jsonrpc": "2.0",
            "method": "agent/providerSwitched",
            "params": {
                "from_provider": "primary",
                "to_provider": "backup",
                "model": "mock-1",
                "reason": "model_overloaded",
            },
        }
    ]
    assert reply["result"]["content"] == "mock: hello" and reply["result"]["meta"]["provider"] == "backup"


def test_canary_key_never_leaks(sidecar: Sidecar, data_dir: Path) -> None:
    sidecar.initialize()
    with stub_server() as stub:
        # a server that echoes the key back in its error message, as some proxies do
        echo = json.dumps({"error": {"message": f"Incorrect API key provided: {CANARY}", "code": "invalid_api_key"}})
        stub.answer("/v1/chat/completions", Answer(401, chunks=[echo.encode()]))
        stub.answer("/v1/models", Answer(401, chunks=[echo.encode()]))
        created = sidecar.result(
            "providers/create", {"preset": "openai", "base_url": stub.url + "/v1", "api_key": CANARY}
        )
        assert "api_key" not in created and created["api_key_configured"] is True
        seen: list[Any] = []
        for method in ("chat/send", "chat/stream"):
            rid = sidecar.request(method, {"provider_id": "openai", "request": ir_request("hi")})
            reply = sidecar.response(rid, collect=seen)
            assert reply["error"]["data"]["code"] == "PROVIDER_AUTH_FAILED"
            assert reply["error"]["data"]["details"]["error"]["code"] == "auth_invalid"
            seen.append(reply)
        test = sidecar.result("providers/test", {"provider_id": "openai"})
        assert test["ok"] is False and test["error"]["code"] == "PROVIDER_AUTH_FAILED"
        seen.append(test)
        seen += [sidecar.result("providers/list"), sidecar.result("providers/get", {"provider_id": "openai"})]
        seen.append(sidecar.result("config/get"))
        # the key did reach the vendor, in the Authorization header
        assert stub.seen[0].headers["authorization"] == f"Bearer {CANARY}"
    sidecar.call("shutdown")
    sidecar.notify("exit")
    assert sidecar.wait() == 0
    assert CANARY not in json.dumps(seen, ensure_ascii=False)
    assert CANARY not in sidecar.stderr_text()
    time.sleep(0)  # the process is gone: every file is final
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path


def test_cancel_closes_the_upstream_request(ready: Sidecar) -> None:
    events = [{"choices": [{"index": 0, "delta": {"content": f"w{i} "}, "finish_reason": None}]} for i in range(500)]
    with stub_server() as stub:
        stub.answer(
            "/v1/chat/completions",
            Answer(200, headers={"content-type": "text/event-stream"}, chunks=sse(*events), delay_s=0.01),
        )
        ready.result("providers/create", {"preset": "openai", "base_url": stub.url + "/v1", "api_key": "sk-x"})
        rid = ready.request("chat/stream", {"provider_id": "openai", "request": ir_request("go")})
        seen: list[Any] = []
        while len(stream_lines(seen)) < 5:
            seen.append(ready.next())
        cancelled_at = time.monotonic()
        ready.notify("$/cancelRequest", {"id": rid})
        reply = ready.response(rid, collect=seen)
        assert reply["error"]["code"] == -32800
        assert stub.disconnected.wait(5), "the upstream connection was not closed"
        assert stub.disconnected_at is not None and stub.disconnected_at - cancelled_at < 1.0
    lines = stream_lines(seen)
    assert [line["type"] for line in lines[-2:]] == ["error", "done"]
    assert lines[-2]["error"]["code"] == "user_aborted"
