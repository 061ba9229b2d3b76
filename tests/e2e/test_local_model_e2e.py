"""The embedded local model over real stdio, no network: ``providers/create {preset: "local"}``, streamed Chinese
and English answers with real token counts, an agent run whose calculator call is parsed, run and fed back, a
cancel mid-generation within 1 s, and no worker left after shutdown or after the sidecar is SIGKILLed. One sidecar
(one model load) serves the module. Against the binary the same tests run with the worker and the model
(converted at build time) from the engines folder beside it; a binary without engines reports the model unavailable."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.sidecar_proc import ROOT, Sidecar, worker_pids

pytestmark = pytest.mark.e2e

FROZEN = os.environ.get("SIDECAR_CMD", "").endswith("metona-sidecar")
MODEL_DIR = ROOT / ".cache" / "local-model"
"""Where scripts/setup prepared the model once (a fresh checkout converts it here on first use instead)."""
MODEL_ENV = {"METONA_LOCAL_MODEL_DIR": str(MODEL_DIR), "METONA_LOCAL_PRECISION": "f32"}
"""f32 everywhere: openvino's CPU default is bf16 on CPUs that have it (AMX, AVX512-BF16) and f32 elsewhere, so greedy
decoding would differ between machines. The tests still assert structure, never the model's wording."""
FIRST_USE_S = 600.0
CJK = re.compile(r"[\u4e00-\u9fff]")


def ir_request(text: str, *, max_tokens: int = 64, rid: str = "r1", system: str = "") -> dict[str, Any]:
    return {
        "meta": {"sessionId": "local", "iteration": 1, "requestId": rid, "timestamp": 1, "agentVersion": "e2e"},
        "systemPrompt": {
            "roleDefinition": system or "You are a helpful assistant.",
            "outputConstraints": "",
            "safetyGuidelines": "",
        },
        "messages": [{"role": "user", "content": text, "timestamp": 1}],
        "params": {"stream": True, "maxTokens": max_tokens},
    }


def stream(sc: Sidecar, request: dict[str, Any], timeout: float = FIRST_USE_S) -> tuple[dict[str, Any], list[Any]]:
    rid = sc.request("chat/stream", {"provider_id": "local", "request": request})
    seen: list[Any] = []
    reply = sc.response(rid, timeout=timeout, collect=seen)
    return reply, [m for m in seen if isinstance(m, dict) and "jsonrpc" not in m]


def workers(parent: int | None = None) -> list[int]:
    """Live local-model worker processes (optionally only those of the sidecar ``parent``)."""
    return worker_pids(parent, "sidecar.localmodel.worker", "local-model-worker")


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def wait_gone(pids: list[int], timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        current = set(workers())
        alive = [p for p in pids if p in current]
    return alive


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    data_dir = tmp_path_factory.mktemp("local") / "data"
    data_dir.mkdir()
    sc = Sidecar(data_dir, env=MODEL_ENV)
    try:
        sc.components = sc.initialize()["capabilities"]["components"]  # type: ignore[attr-defined]
        sc.result("providers/create", {"preset": "local"})
        yield sc
    finally:
        sc.close()


@pytest.mark.skipif(not FROZEN, reason="the binary's view")
def test_the_binary_without_engines_reports_the_local_model_unavailable(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    sc = Sidecar(data_dir, env={**MODEL_ENV, "METONA_ENGINES_DIR": str(tmp_path / "no-engines-here")})
    try:
        component = sc.initialize()["capabilities"]["components"]["local_model"]
        assert component["available"] is False and "no engines folder" in component["detail"]
        sc.result("providers/create", {"preset": "local"})
        err = sc.call("providers/models", {"provider_id": "local"})["error"]
        assert err["data"]["code"] == "MODEL_NOT_FOUND", err
        assert err["data"]["details"]["error"]["providerCode"] == "LOCAL_MODEL_UNAVAILABLE"
        test = sc.result("providers/test", {"provider_id": "local"})
        assert test["ok"] is False and test["error"]["code"] == "MODEL_NOT_FOUND"
        reply, lines = stream(sc, ir_request("hello"), timeout=30)
        assert reply["error"]["data"]["code"] == "MODEL_NOT_FOUND"
        assert [line["type"] for line in lines] == ["error", "done"]
        assert lines[0]["error"]["code"] == "model_not_found"
        assert workers(sc.proc.pid) == []
    finally:
        sc.close()


def test_models_and_test_report_the_embedded_model(local: Sidecar) -> None:
    assert local.components["local_model"]["available"] is True  # type: ignore[attr-defined]
    (model,) = local.result("providers/models", {"provider_id": "local"})["items"]
    assert model["model"] == "qwen2.5-coder-0.5b-instruct"
    assert model["context_window"] == 32768  # from the GGUF's own metadata
    assert "vision" not in model["capabilities"] and "thinking" not in model["capabilities"]
    # setup installs the arguments model with the local-model extra: it writes the tool calls' arguments where the
    # machine has the memory for it (options.arguments_model "auto")
    from sidecar.localmodel import assets

    enough = (assets.physical_memory() or 0) >= assets.ARGUMENTS_MIN_MEMORY
    assert (model["metadata"].get("arguments_model") or {}).get("id") == (assets.ARGUMENTS_MODEL_ID if enough else None)
    test = local.result("providers/test", {"provider_id": "local"})
    assert test["ok"] is True and test["model_count"] == 1


def test_chinese_and_english_answers_stream_with_real_usage(local: Sidecar) -> None:
    reply, lines = stream(local, ir_request("用一句话介绍北京。"))
    result = reply["result"]
    assert CJK.search(result["content"]), result["content"]
    types = [line["type"] for line in lines]
    assert types.count("done") == 1 and types[-1] == "done" and types[-2] == "usage" and "text_delta" in types
    assert [line["seq"] for line in lines] == list(range(len(lines)))
    usage = lines[-2]["usage"]
    assert usage["inputTokens"] > 10 and 0 < usage["outputTokens"] <= 64
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
    assert "".join(x["delta"] for x in lines if x["type"] == "text_delta") == result["content"]

    reply, lines = stream(local, ir_request("What is the capital of France? Answer in one short sentence.", rid="r2"))
    content = reply["result"]["content"]
    assert re.search(r"[A-Za-z]{3,}", content) and not CJK.search(content), content
    assert lines[-2]["type"] == "usage" and lines[-2]["usage"]["outputTokens"] > 0


def test_agent_run_parses_a_calculator_call_and_feeds_its_result_back(local: Sidecar) -> None:
    """What the runtime guarantees, not what a 0.5B model writes: the first turn's constrained decision and
    arguments make a calculator call with JSON arguments, the tool runs on exactly those arguments, its result goes
    back to the model in a second turn, and the run ends in a typed state (an answer, or MAX_ITERATIONS if the model
    keeps calling)."""
    request = ir_request("What is 37*43? Use the calculator tool.", max_tokens=128, rid="host-agent")
    created = local.result(
        "agent/runs/create",
        {"provider_id": "local", "request": request, "allowed_tools": ["calculator"], "max_iterations": 4},
    )
    run_id = created["run_id"]
    deadline = time.monotonic() + 300
    while (run := local.result("agent/runs/get", {"run_id": run_id}))["status"] == "running":
        assert time.monotonic() < deadline, run
        time.sleep(0.2)
    events = local.result("agent/runs/events", {"run_id": run_id, "after_sequence": 0, "limit": 1000})["items"]
    names = [e["event"] for e in events]
    assert run["status"] in ("completed", "failed"), (run, names)
    if run["status"] == "failed":
        assert run["error"]["code"] == "MAX_ITERATIONS", run["error"]
    else:
        assert isinstance(run["output"], str) and run["output"].strip(), run
    first_call = next(e["data"] for e in events if e["event"] == "ModelCallCompleted")
    assert first_call["finish_reason"] == "tool_calls", first_call
    call = next(e["data"] for e in events if e["event"] == "ToolCall")
    assert call["tool_name"] == "calculator" and isinstance(call["args"].get("expression"), str), call
    result = next(e["data"] for e in events if e["event"] == "ToolResult")
    assert result["tool_call_id"] == call["tool_call_id"] and result["success"] is True, result
    assert result["result"]["expression"] == call["args"]["expression"]
    assert isinstance(result["result"]["value"], int | float)
    # the result went back to the model: a second turn starts after it
    assert "ModelCallStarted" in names[names.index("ToolResult") :], names
    assert run["summary"]["tool_calls"] >= 1 and run["summary"]["invalid_tool_calls"] == 0
    trace = local.result("agent/runs/trace", {"run_id": run_id, "after_sequence": 0, "limit": 1000})
    traced = [item["event"] for item in trace["items"]]
    assert "ToolCall" in traced and "ToolResult" in traced


BOOKING = {
    "name": "book_room",
    "description": "Book a meeting room for a number of people.",
    "parameters": {
        "type": "object",
        "properties": {
            "room": {"type": "string", "description": "Room name.", "enum": ["Oak", "Pine", "Elm"]},
            "people": {"type": "number", "description": "How many people."},
            "title": {"type": "string", "description": "Meeting title."},
            "projector": {"type": "boolean", "description": "A projector is needed."},
        },
        "required": ["room", "people"],
    },
    "category": "custom",
    "riskLevel": "safe",
    "requiresPermission": False,
    "timeoutMs": 1000,
}


def test_a_constrained_tool_call_validates_against_the_tools_schema(local: Sidecar) -> None:
    """The decision names an offered tool and the arguments are constrained by its schema: a single whole call
    whose arguments validate (required present, enum respected, nothing undeclared); nothing of the steps is
    streamed as text."""
    import jsonschema

    request = ir_request("Book the Pine room for 6 people for the design review.", max_tokens=128, rid="r-book")
    request["tools"] = [BOOKING, {**BOOKING, "name": "cancel_room", "description": "Cancel a room booking."}]
    reply, lines = stream(local, request)
    result = reply["result"]
    (call,) = result["toolCalls"]
    assert call["name"] in ("book_room", "cancel_room"), call
    schema = {**BOOKING["parameters"], "additionalProperties": False}
    jsonschema.validate(call["args"], schema)
    assert result["finishReason"] == "tool_calls" and not result["content"]
    assert "text_delta" not in [line["type"] for line in lines]


def test_cancel_mid_generation_ends_the_stream_within_a_second(local: Sidecar) -> None:
    request = ir_request("Write a long story about a dragon who learns to cook.", max_tokens=800, rid="r-cancel")
    rid = local.request("chat/stream", {"provider_id": "local", "request": request})
    seen: list[Any] = []
    while sum(1 for m in seen if isinstance(m, dict) and m.get("type") == "text_delta") < 3:
        seen.append(local.next(timeout=FIRST_USE_S))
    started = time.monotonic()
    local.notify("$/cancelRequest", {"id": rid})
    reply = local.response(rid, timeout=5, collect=seen)
    elapsed = time.monotonic() - started
    assert reply["error"]["code"] == -32800
    lines = [m for m in seen if isinstance(m, dict) and "jsonrpc" not in m]
    assert [line["type"] for line in lines[-2:]] == ["error", "done"]
    assert lines[-2]["error"]["code"] == "user_aborted"
    assert elapsed < 1.0, elapsed
    # the worker stopped generating: the next call is answered at once, not after 800 tokens
    reply, lines = stream(local, ir_request("Say OK.", max_tokens=8, rid="r-after"), timeout=30)
    assert "result" in reply and lines[-1]["type"] == "done"


def test_json_schema_output_is_constrained(local: Sidecar) -> None:
    import json

    request = ir_request("Which city is the capital of France?", max_tokens=40, rid="r-json")
    request["responseFormat"] = {
        "type": "json_schema",
        "jsonSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
    result = local.result("chat/send", {"provider_id": "local", "request": request}, timeout=60)
    answer = json.loads(result["content"])
    assert isinstance(answer, dict) and isinstance(answer["city"], str), result["content"]


def test_no_worker_after_shutdown(local: Sidecar) -> None:
    runtime = ["openvino", "openvino_genai", "openvino_tokenizers", "gguf"]
    assert local.result("dev/modules", {"names": runtime}) == {"loaded": []}  # only the worker imports them
    pids = workers(local.proc.pid)
    assert len(pids) == 1, pids  # one worker, started on first use, serving every call of this module
    assert local.result("shutdown") is None
    local.notify("exit")
    assert local.wait(10) == 0
    assert wait_gone(pids) == []


def test_the_worker_dies_with_a_killed_sidecar(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    sc = Sidecar(data_dir, env=MODEL_ENV)
    try:
        sc.initialize()
        sc.result("providers/create", {"preset": "local"})
        reply, _ = stream(sc, ir_request("Say OK.", max_tokens=4), timeout=FIRST_USE_S)
        assert "result" in reply
        pids = workers(sc.proc.pid)
        assert len(pids) == 1
        group = os.getpgid(pids[0])
        assert group == pids[0]  # its own process group
        sc.kill_9()  # no clean-up runs: the worker notices its parent is gone
        assert wait_gone(pids, timeout=5) == []
        assert wait_gone([p for p in workers() if _pgid(p) == group], timeout=5) == []  # nor anything it forked
    finally:
        sc.close()
