"""Fixture plugins (folders with a plugin.json around tests/plugins/fixtures/server.py) and agent-run helpers."""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.sidecar_proc import Sidecar

SERVER = Path(__file__).resolve().parent / "fixtures" / "server.py"
_ids = itertools.count(1)


def make_plugin(root: Path, plugin_id: str, mode: str = "good", **extra: Any) -> Path:
    """A plugin folder whose server is the fixture in ``mode``; ``extra`` keys go into the manifest."""
    folder = root / f"{plugin_id}-{next(_ids)}"
    folder.mkdir(parents=True)
    manifest: dict[str, Any] = {
        "id": plugin_id,
        "name": plugin_id.title(),
        "version": "1.0.0",
        "description": "a fixture plugin",
        "min_app_version": "0.1.0",
        "backend": {"type": "mcp", "transport": "stdio", "command": sys.executable, "args": [str(SERVER), mode]},
        "permissions": ["tools", "prompts"],
        "tools": {
            "timeout_ms": 4000,
            "max_result_bytes": 65536,
            "risk": {"wipe": "critical"},
            "examples": {"add": ["What is 2 plus 3?", "3 加 4 等于几？"]},
        },
    }
    manifest.update(extra)
    (folder / "plugin.json").write_text(json.dumps(manifest), "utf-8")
    return folder


def ir_request(text: str) -> dict[str, Any]:
    return {
        "meta": {"sessionId": "plugins", "iteration": 1, "requestId": "host-1", "timestamp": 1, "agentVersion": "e2e"},
        "systemPrompt": {"roleDefinition": "", "outputConstraints": "", "safetyGuidelines": ""},
        "messages": [{"role": "user", "content": text, "timestamp": 1}],
        "params": {"stream": False},
    }


def mock_provider(sc: Sidecar, calls: list[tuple[str, str, dict[str, Any]]], final: str = "done") -> str:
    """A mock provider whose first turn makes ``calls`` (id, name, args) and whose second answers ``final``."""
    provider_id = f"mock-{next(_ids)}"
    turns = [
        {"tool_calls": [{"id": i, "name": n, "args": a} for i, n, a in calls]},
        {"text": final},
    ]
    sc.result(
        "providers/create", {"preset": "mock", "provider_id": provider_id, "options": {"script": {"turns": turns}}}
    )
    return provider_id


def events(sc: Sidecar, resource_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = 0
    while True:
        page = sc.result("agent/runs/events", {"run_id": resource_id, "after_sequence": cursor, "limit": 1000})
        items += page["items"]
        cursor = page["next_sequence"]
        if not page["has_more"]:
            return items


def run_agent(
    sc: Sidecar,
    calls: list[tuple[str, str, dict[str, Any]]],
    *,
    timeout: float = 40,
    resolve: str | None = "allow_once",
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Run the agent once; (the finished run, ToolResult data by tool_call_id). ``resolve`` answers permissions."""
    provider_id = mock_provider(sc, calls)
    run_id = sc.result("agent/runs/create", {"provider_id": provider_id, "request": ir_request("go")})["run_id"]
    deadline = time.monotonic() + timeout
    while True:
        run = sc.result("agent/runs/get", {"run_id": run_id})
        if run["status"] not in ("running", "queued"):
            break
        pending = run.get("pending_permission")
        if pending and resolve:
            sc.result(
                "agent/permissions/resolve",
                {"run_id": run_id, "request_id": pending["request_id"], "decision": resolve},
            )
        assert time.monotonic() < deadline, run
        time.sleep(0.05)
    results = {e["data"]["tool_call_id"]: e["data"] for e in events(sc, run_id) if e["event"] == "ToolResult"}
    return run, results


def wait_status(sc: Sidecar, plugin_id: str, wanted: set[str], timeout: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        host = sc.result("plugins/host/get", {"plugin_id": plugin_id})
        if host["status"] in wanted:
            return host
        assert time.monotonic() < deadline, host
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def group_members(pgid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(entry))
    return out


def loopback_run(
    sc: Sidecar, registry_name: str, wire_name: str, args: dict[str, Any], provider_id: str
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """An agent run against a loopback OpenAI-format server that calls the tool by the wire name it was sent.

    Returns (the finished run, the request bodies the server saw, the run's trace events)."""
    import json

    from tests.support.http_stub import Answer, stub_server

    sent: list[dict[str, Any]] = []

    def respond(body: Any) -> Answer:
        sent.append(body)
        names = [t["function"]["name"] for t in body.get("tools", [])]
        if len(sent) == 1:
            assert wire_name in names and registry_name not in names, names
            function = {"name": wire_name, "arguments": json.dumps(args)}
            calls = [{"id": "call_1", "type": "function", "function": function}]
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": calls}
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": "Done."}, "stop"
        completion = {"id": "c", "object": "chat.completion", "model": "deepseek-chat",
                      "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                      "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}  # fmt: skip
        return Answer(chunks=[json.dumps(completion).encode()])

    with stub_server() as stub:
        stub.respond("/chat/completions", respond)
        sc.result("providers/create", {"provider_id": provider_id, "preset": "deepseek", "base_url": stub.url,
                                       "api_key": "sk-test", "default_model": "deepseek-chat"})  # fmt: skip
        run_id = sc.result("agent/runs/create", {"provider_id": provider_id, "request": ir_request("go")})["run_id"]
        deadline = time.monotonic() + 30
        while (run := sc.result("agent/runs/get", {"run_id": run_id}))["status"] == "running":
            pending = run.get("pending_permission")
            if pending:
                answer = {"run_id": run_id, "request_id": pending["request_id"], "decision": "allow_once"}
                sc.result("agent/permissions/resolve", answer)
            assert time.monotonic() < deadline, run
            time.sleep(0.05)
    return run, sent, events(sc, run_id)
