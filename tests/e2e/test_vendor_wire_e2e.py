"""chat/send and chat/stream over real stdio against a loopback server speaking each vendor's wire format
(the recorded answers of tests/providers/recordings), for every adapter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_chat_e2e import ir_request, stream_lines
from tests.support.http_stub import Answer, stub_server
from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e

RECORDINGS = Path(__file__).parents[1] / "providers" / "recordings"

# vendor → (preset, protocol, base path under the stub, request path, model)
VENDORS = {
    "deepseek": ("deepseek", "openai", "", "/chat/completions", "deepseek-chat"),
    "agnes-openai": ("agnes-ai", "openai", "/v1", "/v1/chat/completions", "agnes-model"),
    "openai": ("openai", "openai", "/v1", "/v1/chat/completions", "gpt-4o-mini"),
    "anthropic": ("anthropic", "anthropic", "", "/v1/messages", "claude-sonnet-4-5"),
    "agnes-anthropic": ("agnes-ai", "anthropic", "", "/v1/messages", "agnes-model"),
    "ollama": ("ollama", "ollama", "", "/api/chat", "llama3.2"),
}


def recorded(vendor: str, scenario: str) -> Answer:
    data = yaml.safe_load((RECORDINGS / vendor / f"{scenario}.yaml").read_text("utf-8"))
    return Answer(
        status=int(data.get("status", 200)),
        headers={str(k): str(v) for k, v in (data.get("headers") or {}).items()},
        chunks=[c.encode("utf-8") if isinstance(c, str) else c for c in data["chunks"]],
    )


def test_every_vendor_over_stdio(ready: Sidecar) -> None:
    ready.result("config/update", {"values": {"llm.maxRetries": 0}})  # the 429 below is not waited for
    with stub_server() as stub:
        for vendor, (preset, protocol, base, path, model) in VENDORS.items():
            stub.answer(path, recorded(vendor, "plain_text_nonstream"))
            created = ready.result(
                "providers/create",
                {
                    "provider_id": vendor,
                    "preset": preset,
                    "protocol": protocol,
                    "base_url": stub.url + base,
                    "api_key": "sk-e2e",
                    "default_model": model,
                },
            )
            assert created["protocol"] == protocol
            sent = ready.result("chat/send", {"provider_id": vendor, "request": ir_request("Hello", stream=False)})
            assert sent["content"], vendor
            assert sent["finishReason"] == "stop" and sent["meta"]["provider"] == vendor
            body = stub.seen[-1].body
            assert stub.seen[-1].path == path and body["model"] == model and body.get("stream") in (False, None)

            stub.answer(path, recorded(vendor, "plain_text"))
            rid = ready.request("chat/stream", {"provider_id": vendor, "request": ir_request("Hello")})
            seen: list[Any] = []
            reply = ready.response(rid, collect=seen)
            assert "result" in reply, (vendor, reply)
            lines = stream_lines(seen)
            types = [line["type"] for line in lines]
            assert types[-1] == "done" and types.count("done") == 1 and "error" not in types, (vendor, types)
            assert [line["seq"] for line in lines] == list(range(len(lines)))
            text = "".join(line.get("delta", "") for line in lines if line["type"] == "text_delta")
            assert text and text == reply["result"]["content"], vendor
            assert stub.seen[-1].body["stream"] is True

            stub.answer(path, recorded(vendor, "error_429" if vendor != "ollama" else "error_404"))
            failed = ready.call("chat/send", {"provider_id": vendor, "request": ir_request("x", stream=False)}, 30)
            assert failed["error"]["data"]["code"] in ("PROVIDER_RATE_LIMITED", "MODEL_NOT_FOUND"), (vendor, failed)
