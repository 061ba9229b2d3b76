"""Agent runs over real stdio, with the mock provider and with a loopback server speaking the OpenAI (DeepSeek)
wire format: a run reads a file, calls two tools in one turn, asks permission for a risky tool, is resumed by
``agent/permissions/resolve``, compresses its context when the window fills and completes. Its trace pages
through with cursors and replays through a subscription that starts mid-run, with no gaps or duplicates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.http_stub import Answer, sse, stub_server
from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e

CANARY = "sk-CANARY-agent-e2e-71c3d9a0b8-leak-check"
BIG_WORDS = 900  # ~1.1k tokens of file text per read: a few reads fill the small window below
WINDOW = 6000


def ir_request(text: str, *, stream: bool = True) -> dict[str, Any]:
    return {
        "meta": {"sessionId": "e2e", "iteration": 1, "requestId": "host-1", "timestamp": 1, "agentVersion": "e2e"},
        "systemPrompt": {"roleDefinition": "", "outputConstraints": "", "safetyGuidelines": ""},
        "messages": [{"role": "user", "content": text, "timestamp": 1}],
        "params": {"stream": stream},
    }


# what the model does, turn by turn: (tool calls as (id, name, args)) or a final text
SCRIPT: list[list[tuple[str, str, dict[str, Any]]] | str] = [
    [("c1", "read_file", {"path": "big.txt"})],
    [("c2", "calculator", {"expression": "(17 + 4) * 2"}), ("c3", "get_current_time", {"timezone": "UTC"})],
    [("c4", "read_file", {"path": "big.txt", "start_line": 1})],
    [("c5", "read_file", {"path": "big.txt", "max_lines": 100})],
    [("c6", "write_file", {"path": "answer.txt", "content": "42", "mode": "create"})],
    [("c7", "read_file", {"path": "answer.txt"})],
    "The answer is 42; I wrote it to answer.txt.",
]
SUMMARY = "Earlier: the user asked to read big.txt (many repeated words) and to compute (17 + 4) * 2 = 42."


def mock_turns() -> dict[str, Any]:
    turns: list[dict[str, Any]] = []
    for step in SCRIPT:
        if isinstance(step, str):
            turns.append({"text": step, "chunk_chars": 6})
        else:
            turns.append({"tool_calls": [{"id": i, "name": n, "args": a} for i, n, a in step]})
    return {"turns": turns, "summary": {"text": SUMMARY}}


def openai_turn(step: list[tuple[str, str, dict[str, Any]]] | str, prompt_tokens: int) -> Answer:
    chunks: list[Any] = []
    if isinstance(step, str):
        for i in range(0, len(step), 8):
            chunks.append({"choices": [{"index": 0, "delta": {"content": step[i : i + 8]}, "finish_reason": None}]})
        finish = "stop"
    else:
        for n, (cid, name, args) in enumerate(step):
            call = {"index": n, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
            chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]})
            text = json.dumps(args)
            for i in range(0, len(text), 10):
                part = {"index": n, "function": {"arguments": text[i : i + 10]}}
                chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [part]}, "finish_reason": None}]})
        finish = "tool_calls"
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append(
        {
            "choices": [],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 20, "total_tokens": prompt_tokens + 20},
        }
    )
    for c in chunks:
        c.update({"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "model": "deepseek-chat"})
    return Answer(headers={"content-type": "text/event-stream"}, chunks=sse(*chunks))


class OpenAIScript:
    """Answers the agent's calls in order; a context-compression call gets the summary instead."""

    def __init__(self) -> None:
        self.turn = 0
        self.summaries = 0

    def __call__(self, body: Any) -> Answer:
        system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
        prompt_tokens = len(json.dumps(body)) // 4
        if "condense" in system:
            self.summaries += 1
            assert body.get("stream") is not True and "tools" not in body
            completion = {
                "id": "chatcmpl-summary",
                "object": "chat.completion",
                "model": "deepseek-chat",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": SUMMARY}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 30, "total_tokens": prompt_tokens + 30},
            }
            return Answer(chunks=[json.dumps(completion).encode()])
        step = SCRIPT[min(self.turn, len(SCRIPT) - 1)]
        self.turn += 1
        return openai_turn(step, prompt_tokens)


def events_notifications(seen: list[Any], subscription_id: str) -> list[dict[str, Any]]:
    return [
        m["params"]
        for m in seen
        if isinstance(m, dict) and m.get("method") == "event" and m["params"]["subscription_id"] == subscription_id
    ]


def read_until(sc: Sidecar, seen: list[Any], done: Any, timeout: float = 30) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        seen.append(sc.next(timeout=max(0.1, deadline - time.monotonic())))


def page_all(sc: Sidecar, run_id: str, limit: int = 4) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = 0
    while True:
        page = sc.result("agent/runs/events", {"run_id": run_id, "after_sequence": cursor, "limit": limit})
        items += page["items"]
        cursor = page["next_sequence"]
        if not page["has_more"]:
            return items


def drive_run(sc: Sidecar, workspace: Path, provider_id: str) -> tuple[dict[str, Any], list[Any]]:
    """Create the run, subscribe mid-run, resolve the permission, read to the end; (run, everything seen)."""
    sc.result("config/update", {"values": {"agent.workspaceRoots": [str(workspace)]}})
    seen: list[Any] = []
    rid = sc.request(
        "agent/runs/create", {"provider_id": provider_id, "request": ir_request("Compute and save the answer.")}
    )
    created = sc.response(rid, collect=seen)["result"]
    assert created["status"] == "running" and created["run_id"].startswith("run_")
    run_id = created["run_id"]

    # poll the pull API until the permission request shows up: the run is waiting mid-way
    def permission() -> dict[str, Any] | None:
        for item in sc.result("agent/runs/events", {"run_id": run_id, "after_sequence": 0, "limit": 1000})["items"]:
            if item["event"] == "PermissionRequired":
                return item
        return None

    import time

    deadline = time.monotonic() + 30
    while (required := permission()) is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert required["data"]["tool_name"] == "write_file" and required["data"]["permission"] == "filesystem.write"
    run = sc.result("agent/runs/get", {"run_id": run_id})
    assert run["status"] == "running" and run["pending_permission"]["request_id"] == required["data"]["request_id"]

    sid = sc.request("events/subscribe", {"resource_id": run_id, "after_sequence": 0})
    subscription = sc.response(sid, collect=seen)["result"]["subscription_id"]
    answer = {"run_id": run_id, "request_id": required["data"]["request_id"], "decision": "allow_once"}
    resolved = sc.response(sc.request("agent/permissions/resolve", answer), collect=seen)["result"]
    assert resolved["resolved"] is True
    read_until(sc, seen, lambda: any(e["event"] == "RunCompleted" for e in events_notifications(seen, subscription)))
    pushed = events_notifications(seen, subscription)
    ids = sorted({e["id"] for e in pushed})
    assert ids == list(range(1, ids[-1] + 1)), "no gaps after dedupe"
    pulled = page_all(sc, run_id)
    assert [e["sequence"] for e in pulled] == ids
    by_id = {e["id"]: e for e in pushed}
    assert [by_id[e["sequence"]]["event"] for e in pulled] == [e["event"] for e in pulled]
    return sc.result("agent/runs/get", {"run_id": run_id}), seen


def check_run(sc: Sidecar, run: dict[str, Any], seen: list[Any], workspace: Path) -> list[dict[str, Any]]:
    assert run["status"] == "completed", run
    assert run["output"] == SCRIPT[-1]
    assert (workspace / "answer.txt").read_text() == "42"
    events = page_all(sc, run["run_id"], limit=50)
    names = [e["event"] for e in events]
    assert names[0] == "RunStarted" and names[-1] == "RunCompleted"
    for needed in ("ToolCall", "ToolResult", "PermissionRequired", "PermissionResolved", "ModelCallStarted",
                   "ModelCallCompleted", "Usage", "TextDelta", "ContextCompressed"):  # fmt: skip
        assert needed in names, needed
    calls = [e["data"] for e in events if e["event"] == "ToolCall"]
    two = [c for c in calls if c["tool_call_id"] in ("c2", "c3")]
    assert len(two) == 2 and two[0]["parent_model_call_id"] == two[1]["parent_model_call_id"]
    results = {e["data"]["tool_call_id"]: e["data"] for e in events if e["event"] == "ToolResult"}
    assert results["c1"]["success"] and results["c2"]["result"]["value"] == 42 and results["c6"]["success"]
    compressed = next(e["data"] for e in events if e["event"] == "ContextCompressed")
    assert compressed["usage_ratio_before"] > 0.8 and compressed["usage_ratio_after"] < 0.5
    assert compressed["summary_source"] == "model" and "17 + 4" in compressed["summary"]
    trace = sc.result("agent/runs/trace", {"run_id": run["run_id"], "after_sequence": 0, "limit": 3})
    assert trace["status"] == "completed" and len(trace["items"]) == 3 and trace["has_more"] is True
    assert trace["summary"]["tool_calls"] == 7 and trace["summary"]["model_calls"] >= 8
    assert trace["config_snapshot"]["context_window"] == WINDOW

    # stream lines: one requestId per model call, seq from 0, each ending with done
    every = [json.loads(raw) for raw in list(sc.raw_lines)]
    lines = [m for m in every if "jsonrpc" not in m and m["requestId"].startswith(run["run_id"])]
    by_request: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        by_request.setdefault(line["requestId"], []).append(line)
    model_calls = [e["data"]["model_call_id"] for e in events if e["event"] == "ModelCallStarted"]
    react_calls = [
        e["data"]["model_call_id"]
        for e in events
        if e["event"] == "ModelCallStarted" and e["data"].get("purpose") is None
    ]
    assert set(by_request) == set(react_calls) and set(react_calls) < set(model_calls)
    for request_id, stream in by_request.items():
        assert [x["seq"] for x in stream] == list(range(len(stream))), request_id
        assert stream[-1]["type"] == "done" and stream[0]["sessionId"] == "e2e"
    iterations = [by_request[c][0]["iteration"] for c in react_calls]
    assert iterations == list(range(1, len(react_calls) + 1))
    final_text = "".join(x.get("delta", "") for x in by_request[react_calls[-1]] if x["type"] == "text_delta")
    assert final_text == SCRIPT[-1]
    return events


def make_workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "big.txt").write_text(" ".join(f"word{i % 50}" for i in range(BIG_WORDS)) + "\n", "utf-8")
    return workspace.resolve()


def test_agent_run_with_the_mock_provider(ready: Sidecar, tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    tools = ready.result("tools/list")
    names = [t["name"] for t in tools["items"]]
    assert len(names) >= 9 and {"read_file", "write_file", "calculator", "http_get"} <= set(names)
    write = next(t for t in tools["items"] if t["name"] == "write_file")
    assert write["requiresPermission"] is True and write["riskLevel"] == "high"
    assert write["parameters"]["type"] == "object" and "path" in write["parameters"]["properties"]
    ready.result(
        "providers/create",
        {"preset": "mock", "options": {"script": mock_turns(), "models": [
            {"id": "mock-1", "context_window": WINDOW, "capabilities": ["chat", "streaming", "tool_calling"]}]}},
    )  # fmt: skip
    run, seen = drive_run(ready, workspace, "mock")
    check_run(ready, run, seen, workspace)
    listed = ready.result("agent/runs/list", {"limit": 10})
    assert listed["items"][0]["run_id"] == run["run_id"] and listed["page"]["total"] == 1


def test_agent_run_against_an_openai_format_loopback_server(ready: Sidecar, tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    script = OpenAIScript()
    with stub_server() as stub:
        stub.respond("/chat/completions", script)
        ready.result(
            "providers/create",
            {
                "provider_id": "ds",
                "preset": "deepseek",
                "base_url": stub.url,
                "api_key": CANARY,
                "default_model": "deepseek-chat",
                "options": {"models": [{"id": "deepseek-chat", "context_window": WINDOW,
                                        "capabilities": ["chat", "streaming", "tool_calling"]}]},
            },
        )  # fmt: skip
        run, seen = drive_run(ready, workspace, "ds")
        check_run(ready, run, seen, workspace)
        assert script.summaries >= 1
        sent = [s for s in stub.seen if s.path == "/chat/completions"]
        assert all(s.headers["authorization"] == f"Bearer {CANARY}" for s in sent)
        tool_names = {t["function"]["name"] for t in sent[0].body["tools"]}
        assert {"read_file", "write_file", "calculator"} <= tool_names
        assert any(m["role"] == "tool" for m in sent[1].body["messages"])
    dumped = json.dumps(page_all(ready, run["run_id"], limit=100))
    assert CANARY not in dumped


def test_cursor_errors_and_unknown_runs(ready: Sidecar) -> None:
    ready.result("providers/create", {"preset": "mock"})
    created = ready.result("agent/runs/create", {"request": ir_request("hello", stream=False)})
    run_id = created["run_id"]
    sub = ready.result("events/subscribe", {"resource_id": run_id})
    seen: list[Any] = []
    read_until(
        ready,
        seen,
        lambda: any(e["event"] == "RunCompleted" for e in events_notifications(seen, sub["subscription_id"])),
    )
    assert ready.result("agent/runs/get", {"run_id": run_id})["output"] == "mock: hello"
    bad = ready.call("agent/runs/events", {"run_id": run_id, "after_sequence": 999})["error"]
    assert bad["code"] == 400 and bad["data"]["code"] == "TRACE_CURSOR_INVALID"
    missing = ready.call("agent/runs/trace", {"run_id": "run_nope"})["error"]
    assert missing["code"] == 404 and missing["data"]["code"] == "AGENT_RUN_NOT_FOUND"
    missing = ready.call("agent/runs/get", {"run_id": "run_nope"})["error"]
    assert missing["data"]["code"] == "AGENT_RUN_NOT_FOUND"
    perm = ready.call("agent/permissions/resolve", {"run_id": run_id, "request_id": "x", "decision": "allow_once"})
    assert perm["error"]["data"]["code"] == "AGENT_RUN_NOT_FOUND"
    bad = ready.call("agent/permissions/resolve", {"run_id": run_id, "request_id": "x", "decision": "maybe"})
    assert bad["error"]["code"] == -32602
    bad = ready.call("agent/runs/create", {"request": ir_request("x"), "allowed_tools": ["nope"]})["error"]
    assert bad["data"]["code"] == "TOOL_NOT_FOUND"
    bad = ready.call("agent/runs/create", {"request": ir_request("x"), "max_iterations": 0})["error"]
    assert bad["code"] == -32602


def test_kill_9_during_a_run_then_restart(data_dir: Path, tmp_path: Path) -> None:
    """Every event committed before the kill survives; the run is failed on the next start; the log reads."""
    import time

    workspace = make_workspace(tmp_path)

    def turn(i: int) -> dict[str, Any]:
        call = {"id": f"k{i}", "name": "calculator", "args": {"expression": f"{i}+1"}}
        return {"tool_calls": [call], "text": "thinking about it " * 4, "chunk_chars": 3, "delay_ms": 2}

    turns = {"turns": [turn(i) for i in range(300)]}
    sc = Sidecar(data_dir)
    try:
        sc.initialize()
        sc.result("config/update", {"values": {"agent.workspaceRoots": [str(workspace)]}})
        sc.result("providers/create", {"preset": "mock", "options": {"script": turns}})
        run_id = sc.result("agent/runs/create", {"request": ir_request("go"), "max_iterations": 200})["run_id"]
        deadline = time.monotonic() + 30
        while True:
            committed = sc.result("agent/runs/events", {"run_id": run_id, "after_sequence": 0, "limit": 1000})["items"]
            if sum(e["event"] == "ToolResult" for e in committed) >= 5:
                break
            assert time.monotonic() < deadline
            time.sleep(0.02)
        sc.kill_9()  # mid-run: the model is still streaming
    finally:
        sc.close()
    again = Sidecar(data_dir)
    try:
        again.initialize()
        run = again.result("agent/runs/get", {"run_id": run_id})
        assert run["status"] == "failed" and run["error"]["code"] == "AGENT_RUN_INTERRUPTED"
        events = page_all(again, run_id, limit=500)
        seqs = [e["sequence"] for e in events]
        assert seqs == list(range(1, len(seqs) + 1)), "the log reads back whole"
        assert events[: len(committed)] == committed, "every event read before the kill is still there"
        assert events[-1]["event"] == "RunFailed" and len(events) > len(committed)
        assert again.call("agent/runs/cancel", {"run_id": run_id})["result"] == {"accepted": False, "status": "failed"}
    finally:
        again.close()


def test_shutdown_cancels_a_waiting_run_cleanly(data_dir: Path, tmp_path: Path) -> None:
    import time

    workspace = make_workspace(tmp_path)
    sc = Sidecar(data_dir)
    try:
        sc.initialize()
        sc.result("config/update", {"values": {"agent.workspaceRoots": [str(workspace)]}})
        write = {"id": "w", "name": "write_file", "args": {"path": "x.txt", "content": "x"}}
        sc.result("providers/create", {"preset": "mock", "options": {"script": {"turns": [{"tool_calls": [write]}]}}})
        run_id = sc.result("agent/runs/create", {"request": ir_request("write", stream=False)})["run_id"]
        deadline = time.monotonic() + 20
        while sc.result("agent/runs/get", {"run_id": run_id})["pending_permission"] is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert sc.result("shutdown") is None
        sc.notify("exit")
        assert sc.wait() == 0
    finally:
        sc.close()
    again = Sidecar(data_dir)
    try:
        again.initialize()
        run = again.result("agent/runs/get", {"run_id": run_id})
        assert run["status"] == "cancelled" and run["pending_permission"] is None
        last = page_all(again, run_id)[-1]
        assert last["event"] == "RunCancelled" and last["data"]["reason"] == "shutdown"
        assert not (workspace / "x.txt").exists()
    finally:
        again.close()


def anthropic_turn(*blocks: dict[str, Any], stop: str) -> Answer:
    """An Anthropic Messages SSE stream with the given content blocks (thinking with its signature, tool_use, text)."""

    def event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    message = {"id": "msg_e2e", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5",
               "stop_reason": None, "usage": {"input_tokens": 200, "output_tokens": 1}}  # fmt: skip
    chunks = [event("message_start", {"type": "message_start", "message": message})]
    for i, block in enumerate(blocks):
        kind = block["type"]
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}} if kind == "tool_use" else {
            "type": kind, kind: ""}  # fmt: skip
        chunks.append(event("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}))
        if kind == "thinking":
            deltas = [{"type": "thinking_delta", "thinking": block["thinking"]},
                      {"type": "signature_delta", "signature": block["signature"]}]  # fmt: skip
        elif kind == "tool_use":
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        else:
            deltas = [{"type": "text_delta", "text": block["text"]}]
        for delta in deltas:
            chunks.append(event("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        chunks.append(event("content_block_stop", {"type": "content_block_stop", "index": i}))
    chunks.append(event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop},
                                          "usage": {"output_tokens": 30}}))  # fmt: skip
    chunks.append(event("message_stop", {"type": "message_stop"}))
    return Answer(headers={"content-type": "text/event-stream"}, chunks=chunks)


def test_agent_run_over_the_anthropic_format_passes_signed_thinking_back(ready: Sidecar, tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    (workspace / "a.txt").write_text("the answer is 42\n", "utf-8")
    thinking = {"type": "thinking", "thinking": "I should read a.txt first.", "signature": "SIG-e2e-0123"}
    read = {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "a.txt"}}
    with stub_server() as stub:
        stub.answer(
            "/v1/messages",
            anthropic_turn(thinking, read, stop="tool_use"),
            anthropic_turn({"type": "text", "text": "It says 42."}, stop="end_turn"),
        )
        ready.result(
            "providers/create",
            {"provider_id": "claude", "preset": "anthropic", "base_url": stub.url, "api_key": CANARY,
             "default_model": "claude-sonnet-4-5"},
        )  # fmt: skip
        ready.result("config/update", {"values": {"agent.workspaceRoots": [str(workspace)]}})
        request = ir_request("What does a.txt say?")
        request["params"]["thinkingEnabled"] = True
        run_id = ready.result("agent/runs/create", {"provider_id": "claude", "request": request})["run_id"]
        seen: list[Any] = []
        sub = ready.result("events/subscribe", {"resource_id": run_id})["subscription_id"]
        read_until(ready, seen, lambda: any(e["event"] == "RunCompleted" for e in events_notifications(seen, sub)))
        run = ready.result("agent/runs/get", {"run_id": run_id})
        assert run["status"] == "completed" and run["output"] == "It says 42.", run
        second = [s for s in stub.seen if s.path == "/v1/messages"][1].body
        assistant = next(m for m in second["messages"] if m["role"] == "assistant")
        assert assistant["content"][0] == {
            "type": "thinking", "thinking": thinking["thinking"], "signature": thinking["signature"]}  # fmt: skip
        assert assistant["content"][1]["type"] == "tool_use" and assistant["content"][1]["id"] == "toolu_01"
        result = second["messages"][-1]["content"][0]
        assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_01"
        assert "the answer is 42" in result["content"]
    events = page_all(ready, run_id)
    thought = "".join(e["data"]["delta"] for e in events if e["event"] == "ThinkingDelta")
    assert thought == thinking["thinking"]
