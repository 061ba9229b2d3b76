"""Adversarial review of the agent runtime over its real stdio wire (issue 4).

Each bug it found has a regression test here (they failed before the fixes); the other tests pin behaviour that was
checked and found correct. Most tests share one sidecar process (module fixture) to keep the file fast; each test
uses its own provider ids and session ids so runs and session rules never interact.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.support.sidecar_proc import ROOT, Sidecar

pytestmark = pytest.mark.e2e

_ids = itertools.count(1)
STREAM_KEYS = ["type", "requestId", "sessionId", "iteration", "seq", "timestamp"]
TERMINAL = {"RunCompleted", "RunFailed", "RunCancelled"}


# -- helpers ------------------------------------------------------------------------------------------------------


def uid(prefix: str) -> str:
    return f"{prefix}{next(_ids)}"


def ir_request(text: str, *, stream: bool = False, session: str | None = None) -> dict[str, Any]:
    return {
        "meta": {
            "sessionId": session or uid("sess-"),
            "iteration": 1,
            "requestId": "host-1",
            "timestamp": 1,
            "agentVersion": "review",
        },
        "systemPrompt": {"roleDefinition": "", "outputConstraints": "", "safetyGuidelines": ""},
        "messages": [{"role": "user", "content": text, "timestamp": 1}],
        "params": {"stream": stream},
    }


def mock_provider(sc: Sidecar, turns: list[dict[str, Any]], **script: Any) -> str:
    pid = uid("mock-")
    sc.result(
        "providers/create",
        {"provider_id": pid, "preset": "mock", "options": {"script": {"turns": turns, **script}}},
    )
    return pid


def tool_turn(*calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"id": i, "name": n, "args": a} for i, n, a in calls]}


def create(sc: Sidecar, pid: str, request: dict[str, Any], **extra: Any) -> str:
    return sc.result("agent/runs/create", {"provider_id": pid, "request": request, **extra})["run_id"]


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def wait_end(sc: Sidecar, run_id: str, timeout: float = 10.0) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        run = sc.result("agent/runs/get", {"run_id": run_id})
        return run if run["status"] not in ("queued", "running") else None

    return wait_until(done, timeout, f"run {run_id} to end")


def all_events(sc: Sidecar, run_id: str) -> list[dict[str, Any]]:
    return sc.result("agent/runs/events", {"run_id": run_id, "after_sequence": 0, "limit": 1000})["items"]


def permission_request(sc: Sidecar, run_id: str, n: int = 1) -> dict[str, Any]:
    def find() -> dict[str, Any] | None:
        found = [e["data"] for e in all_events(sc, run_id) if e["event"] == "PermissionRequired"]
        return found[n - 1] if len(found) >= n else None

    return wait_until(find, what="PermissionRequired")


def resolve(sc: Sidecar, run_id: str, request_id: str, decision: str = "allow_once") -> dict[str, Any]:
    return sc.call("agent/permissions/resolve", {"run_id": run_id, "request_id": request_id, "decision": decision})


def error_of(reply: dict[str, Any]) -> tuple[int, str]:
    assert "error" in reply, reply
    return reply["error"]["code"], reply["error"]["data"]["code"]


def drain(sc: Sidecar, into: list[Any], quiet_s: float = 0.3) -> None:
    """Move every line that arrives until ``quiet_s`` of silence into ``into``."""
    while True:
        try:
            into.append(sc.next(timeout=quiet_s))
        except Exception:
            return


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Sidecar, Path]]:
    base = tmp_path_factory.mktemp("agent-review")
    data = base / "data"
    data.mkdir()
    workspace = base / "ws"
    workspace.mkdir()
    sc = Sidecar(data)
    try:
        sc.initialize()
        sc.result("config/update", {"values": {"agent.workspaceRoots": [str(workspace)]}})
        yield sc, workspace
    finally:
        sc.close()


@pytest.fixture
def sc(shared: tuple[Sidecar, Path]) -> Sidecar:
    shared[0].assert_alive()  # nothing left over from the previous test
    return shared[0]


@pytest.fixture
def workspace(shared: tuple[Sidecar, Path]) -> Path:
    return shared[1]


# == bad params ===================================================================================================


def test_create_rejects_bad_params_with_field_paths(sc: Sidecar) -> None:
    pid = mock_provider(sc, [{"text": "hi"}])
    good = ir_request("x")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"provider_id": pid, "request": good, "bogus": 1}, "bogus"),
        ({"provider_id": pid, "request": good, "max_iterations": 0}, "max_iterations"),
        ({"provider_id": pid, "request": good, "max_iterations": 10**30}, "max_iterations"),
        ({"provider_id": pid, "request": good, "session_id": ""}, "session_id"),
        ({"provider_id": pid, "request": good, "allowed_tools": "read_file"}, "allowed_tools"),
        ({"provider_id": pid, "request": None}, "request"),
        ({"provider_id": pid}, "request"),
        ({"provider_id": pid, "request": good, "token_budget": 0}, "token_budget"),
    ]
    for params, field in cases:
        reply = sc.call("agent/runs/create", params)
        assert error_of(reply) == (-32602, "VALIDATION_ERROR"), (params.keys(), reply)
        assert [e["loc"][0] for e in reply["error"]["data"]["details"]["errors"]] == [field]
    assert error_of(sc.call("agent/runs/create", [pid])) == (-32602, "VALIDATION_ERROR")
    reply = sc.call("agent/runs/create", {"provider_id": pid, "request": good, "allowed_tools": ["nope"]})
    assert error_of(reply) == (404, "TOOL_NOT_FOUND")
    assert error_of(sc.call("agent/runs/create", {"provider_id": "no-such", "request": good}))[1] == (
        "PROVIDER_NOT_FOUND"
    )
    sc.assert_alive()


@pytest.mark.parametrize("messages", [[], [{"role": "assistant", "content": "a", "timestamp": 1}]])
def test_create_without_a_user_message_is_refused(sc: Sidecar, messages: list[Any]) -> None:
    pid = mock_provider(sc, [{"text": "hi"}])
    request = ir_request("x")
    request["messages"] = messages
    reply = sc.call("agent/runs/create", {"provider_id": pid, "request": request})
    assert error_of(reply) == (400, "VALIDATION_ERROR")
    assert sc.result("agent/runs/list", {"session_id": request["meta"]["sessionId"]})["items"] == []


def test_huge_token_budget_is_a_validation_error(sc: Sidecar) -> None:
    pid = mock_provider(sc, [{"text": "hi"}])
    reply = sc.call("agent/runs/create", {"provider_id": pid, "request": ir_request("x"), "token_budget": 2**63})
    assert error_of(reply) == (-32602, "VALIDATION_ERROR")


@pytest.mark.parametrize("field", ["provider_id", "model"])
def test_empty_provider_or_model_is_refused(sc: Sidecar, field: str) -> None:
    pid = mock_provider(sc, [{"text": "hi"}])
    params = {"provider_id": pid, "request": ir_request("x"), field: ""}
    reply = sc.call("agent/runs/create", params)
    if "result" in reply:
        wait_end(sc, reply["result"]["run_id"])
    assert error_of(reply) == (-32602, "VALIDATION_ERROR")


def test_empty_meta_session_id_does_not_become_the_run_session(sc: Sidecar) -> None:
    pid = mock_provider(sc, [{"text": "hi"}])
    request = ir_request("x")
    request["meta"]["sessionId"] = ""
    reply = sc.call("agent/runs/create", {"provider_id": pid, "request": request})
    if "result" in reply:
        wait_end(sc, reply["result"]["run_id"])
        assert reply["result"]["session_id"] != ""
    else:
        assert reply["error"]["data"]["code"] == "VALIDATION_ERROR"


def test_other_agent_methods_reject_bad_params(sc: Sidecar) -> None:
    invalid = [
        ("agent/runs/get", {"run_id": ""}),
        ("agent/runs/get", {"run_id": 5}),
        ("agent/runs/get", {"run_id": "x" * 10_000}),
        ("agent/runs/get", {"run_id": "run_x", "extra": True}),
        ("agent/runs/cancel", {}),
        ("agent/runs/events", {"run_id": "run_x", "limit": 0}),
        ("agent/runs/events", {"run_id": "run_x", "limit": 1001}),
        ("agent/runs/events", {"run_id": "run_x", "after_sequence": -1}),
        ("agent/runs/trace", {"run_id": "run_x", "after_sequence": "a"}),
        ("agent/permissions/resolve", {"run_id": "run_x", "request_id": "p", "decision": "yes"}),
        ("agent/permissions/resolve", {"run_id": "run_x", "request_id": "", "decision": "deny"}),
        ("agent/runs/list", {"status": "bogus"}),
        ("agent/runs/list", {"limit": 0}),
        ("agent/runs/list", {"limit": 501}),
        ("agent/runs/list", {"offset": -1}),
        ("agent/runs/list", {"session_id": ""}),
        ("tools/list", {"x": 1}),
        ("agent/artifacts/get", {"run_id": "run_x"}),
    ]
    for method, params in invalid:
        assert error_of(sc.call(method, params)) == (-32602, "VALIDATION_ERROR"), (method, params)
    not_found = [
        ("agent/runs/get", {"run_id": "run_nope"}),
        ("agent/runs/cancel", {"run_id": "run_nope"}),
        ("agent/runs/events", {"run_id": "run_nope"}),
        ("agent/runs/trace", {"run_id": "run_nope"}),
        ("agent/permissions/resolve", {"run_id": "run_nope", "request_id": "p", "decision": "allow_once"}),
        ("agent/artifacts/get", {"run_id": "run_nope", "artifact_id": "a"}),
    ]
    for method, params in not_found:
        assert error_of(sc.call(method, params)) == (404, "AGENT_RUN_NOT_FOUND"), method
    sc.assert_alive()


# == tools/list ===================================================================================================


def test_tools_list_matches_the_schema_and_the_spec(sc: Sidecar) -> None:
    schema = json.loads((ROOT / "ipc_schema" / "metona-sidecar.schema.json").read_text())
    listed = sc.result("tools/list")
    validator = jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/ToolListResult"})
    assert list(validator.iter_errors(listed)) == []
    tools = {t["name"]: t for t in listed["items"]}
    assert len(tools) == len(listed["items"]) == 9
    assert set(listed["unavailable"]) <= set(tools)
    assert tools["write_file"]["requiresPermission"] and tools["write_file"]["riskLevel"] == "high"
    assert tools["http_get"]["requiresPermission"] and tools["http_get"]["category"] == "network"
    assert not tools["read_file"]["requiresPermission"]
    for tool in tools.values():
        seed = ["name", "description", "parameters", "category", "riskLevel", "requiresPermission", "timeoutMs"]
        assert list(tool) in (seed, [*seed, "examples"])  # the seed's fields, then the IR extension where given
        for name, field in tool["parameters"]["properties"].items():
            assert field["type"] != "integer", (tool["name"], name)
    assert tools["calculator"]["examples"] and "examples" not in tools["read_file"]
    assert "(integer" in tools["read_file"]["parameters"]["properties"]["start_line"]["description"]


# == streaming ====================================================================================================


def test_streaming_run_lines_are_well_formed_and_ping_stays_fast(sc: Sidecar) -> None:
    pid = mock_provider(
        sc,
        [
            {**tool_turn(("t1", "calculator", {"expression": "2+2"})), "text": "let me compute", "chunk_chars": 4},
            {"text": "abcdefghij" * 20, "reasoning": "think " * 10, "chunk_chars": 3, "delay_ms": 3},
        ],
    )
    seen: list[Any] = []
    rid = sc.request("agent/runs/create", {"provider_id": pid, "request": ir_request("go", stream=True)})
    run_id = sc.response(rid, collect=seen)["result"]["run_id"]
    assert seen == [], "no stream line precedes the create answer"
    latencies = []
    while not any(isinstance(m, dict) and m.get("type") == "done" and m["iteration"] == 2 for m in seen):
        t0 = time.monotonic()
        sc.response(sc.request("ping"), collect=seen)
        latencies.append(time.monotonic() - t0)
        time.sleep(0.01)
    assert max(latencies) < 0.25, latencies
    run = wait_end(sc, run_id)
    assert run["status"] == "completed" and run["output"] == "abcdefghij" * 20
    lines = [m for m in seen if isinstance(m, dict) and "jsonrpc" not in m]
    by_request: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        assert list(line)[:6] == STREAM_KEYS, line
        assert None not in line.values()
        assert line["sessionId"] == run["session_id"]
        by_request.setdefault(line["requestId"], []).append(line)
    assert sorted(by_request) == [f"{run_id}.m1", f"{run_id}.m2"]
    for request_id, items in by_request.items():
        assert [i["seq"] for i in items] == list(range(len(items)))
        assert [i["type"] for i in items].count("done") == 1 and items[-1]["type"] == "done"
        assert {i["iteration"] for i in items} == {int(request_id[-1])}
    # the raw bytes: no `null` anywhere in a stream line
    raw = [r for r in sc.raw_lines if run_id.encode() in r and b'"jsonrpc"' not in r]
    assert raw and not any(b"null" in r for r in raw)
    events = all_events(sc, run_id)
    text = "".join(e["data"]["delta"] for e in events if e["event"] == "TextDelta")
    assert text == "let me compute" + "abcdefghij" * 20


def test_cancel_mid_stream_ends_the_stream_with_error_then_done(sc: Sidecar) -> None:
    pid = mock_provider(sc, [{"text": "x" * 2000, "chunk_chars": 5, "delay_ms": 5}])
    seen: list[Any] = []
    rid = sc.request("agent/runs/create", {"provider_id": pid, "request": ir_request("go", stream=True)})
    run_id = sc.response(rid, collect=seen)["result"]["run_id"]
    while len([m for m in seen if "jsonrpc" not in m]) < 5:
        seen.append(sc.next())
    first = sc.response(sc.request("agent/runs/cancel", {"run_id": run_id}), collect=seen)["result"]
    assert first == {"accepted": True, "status": "cancelled"}
    assert sc.result("agent/runs/cancel", {"run_id": run_id}) == {"accepted": False, "status": "cancelled"}
    drain(sc, seen, 0.2)
    lines = [m for m in seen if isinstance(m, dict) and "jsonrpc" not in m]
    types = [m["type"] for m in lines]
    assert types[-2:] == ["error", "done"] and types.count("done") == 1
    assert lines[-2]["error"]["code"] == "user_aborted"
    events = all_events(sc, run_id)
    assert events[-1]["event"] == "RunCancelled"
    assert events[-1]["data"]["reason"] == "user_aborted" and events[-1]["data"]["code"] == "USER_ABORTED"
    run = sc.result("agent/runs/get", {"run_id": run_id})
    assert run["status"] == "cancelled" and run["pending_permission"] is None


def test_cancel_a_finished_run_reports_its_status(sc: Sidecar) -> None:
    pid = mock_provider(sc, [{"text": "done"}])
    run_id = create(sc, pid, ir_request("x"))
    wait_end(sc, run_id)
    for _ in range(2):
        assert sc.result("agent/runs/cancel", {"run_id": run_id}) == {"accepted": False, "status": "completed"}
    assert all_events(sc, run_id)[-1]["event"] == "RunCompleted"


# == events paging and subscriptions ==============================================================================


def test_events_paging_edges(sc: Sidecar) -> None:
    pid = mock_provider(sc, [tool_turn(("c", "calculator", {"expression": "1+1"})), {"text": "two"}])
    run_id = create(sc, pid, ir_request("x"))
    wait_end(sc, run_id)
    everything = sc.result("agent/runs/events", {"run_id": run_id, "limit": 1000})
    assert everything["has_more"] is False
    last = everything["items"][-1]["sequence"]
    assert [e["sequence"] for e in everything["items"]] == list(range(1, last + 1))
    # limit 1, one by one
    cursor, seen = 0, []
    while True:
        page = sc.result("agent/runs/events", {"run_id": run_id, "after_sequence": cursor, "limit": 1})
        assert len(page["items"]) == 1
        seen.append(page["items"][0]["sequence"])
        cursor = page["next_sequence"]
        if not page["has_more"]:
            break
    assert seen == list(range(1, last + 1))
    # after_sequence = last: an empty final page, not an error
    at_end = sc.result("agent/runs/events", {"run_id": run_id, "after_sequence": last})
    assert at_end == {"items": [], "next_sequence": last, "has_more": False}
    for beyond in (last + 1, last + 1000):
        reply = sc.call("agent/runs/events", {"run_id": run_id, "after_sequence": beyond, "limit": 1})
        assert error_of(reply) == (400, "TRACE_CURSOR_INVALID")
        assert reply["error"]["data"]["details"]["last_sequence"] == last
        assert error_of(sc.call("agent/runs/trace", {"run_id": run_id, "after_sequence": beyond}))[1] == (
            "TRACE_CURSOR_INVALID"
        )
    trace = sc.result("agent/runs/trace", {"run_id": run_id, "after_sequence": last - 1, "limit": 1})
    assert [e["event"] for e in trace["items"]] == ["RunCompleted"] and trace["has_more"] is False
    assert trace["summary"]["model_calls"] == 2 and trace["summary"]["tool_calls"] == 1
    assert trace["config_snapshot"]["provider_id"] == pid


def test_subscribe_to_a_finished_run_at_or_beyond_its_end_repeats_the_terminal_event(sc: Sidecar) -> None:
    pid = mock_provider(sc, [{"text": "done"}])
    run_id = create(sc, pid, ir_request("x"))
    wait_end(sc, run_id)
    last = all_events(sc, run_id)[-1]["sequence"]
    for after in (last, last + 50):
        seen: list[Any] = []
        sub = sc.response(
            sc.request("events/subscribe", {"resource_id": run_id, "after_sequence": after}), collect=seen
        )["result"]["subscription_id"]
        drain(sc, seen, 0.2)
        pushed = [m["params"] for m in seen if m.get("method") == "event" and m["params"]["subscription_id"] == sub]
        assert [(p["id"], p["event"]) for p in pushed] == [(last, "RunCompleted")]


def test_subscription_mid_run_replays_without_gaps(sc: Sidecar) -> None:
    pid = mock_provider(
        sc,
        [
            tool_turn(("a", "calculator", {"expression": "1+1"})),
            tool_turn(("b", "calculator", {"expression": "2+2"})),
            {"text": "y" * 300, "chunk_chars": 5, "delay_ms": 4},
        ],
    )
    seen: list[Any] = []
    rid = sc.request("agent/runs/create", {"provider_id": pid, "request": ir_request("x", stream=True)})
    run_id = sc.response(rid, collect=seen)["result"]["run_id"]
    wait_until(lambda: any(e["event"] == "ToolResult" for e in all_events(sc, run_id)), what="a tool result")
    sub = sc.response(sc.request("events/subscribe", {"resource_id": run_id, "after_sequence": 2}), collect=seen)[
        "result"
    ]["subscription_id"]

    def ended() -> bool:
        drain(sc, seen, 0.05)
        return any(
            m.get("method") == "event" and m["params"]["subscription_id"] == sub and m["params"]["event"] in TERMINAL
            for m in seen
            if isinstance(m, dict)
        )

    wait_until(ended, what="the terminal event")
    ids = sorted(
        {m["params"]["id"] for m in seen if m.get("method") == "event" and m["params"]["subscription_id"] == sub}
    )
    pulled = [e["sequence"] for e in all_events(sc, run_id)]
    assert ids == [s for s in pulled if s > 2]


def test_subscribe_beyond_the_end_of_a_running_run_still_reports_its_end(sc: Sidecar) -> None:
    pid = mock_provider(sc, [{"text": "z" * 200, "chunk_chars": 4, "delay_ms": 5}])
    run_id = create(sc, pid, ir_request("x", stream=True))  # streamed: the pauses keep it running meanwhile
    seen: list[Any] = []
    reply = sc.response(sc.request("events/subscribe", {"resource_id": run_id, "after_sequence": 500}), collect=seen)
    drain(sc, seen, 1.0)  # (not wait_end: its requests would drop the notifications)
    sub = reply["result"]["subscription_id"]
    pushed = [
        m["params"]["event"] for m in seen if m.get("method") == "event" and m["params"]["subscription_id"] == sub
    ]
    assert "RunCompleted" in pushed


# == permissions ==================================================================================================


def test_permission_resolve_wrong_ids_twice_and_after_the_end(sc: Sidecar, workspace: Path) -> None:
    name = uid("perm-") + ".txt"
    pid = mock_provider(
        sc, [tool_turn(("w1", "write_file", {"path": name, "content": "A", "mode": "create"})), {"text": "ok"}]
    )
    run_a = create(sc, pid, ir_request("a"))
    run_b = create(sc, pid, ir_request("b"))
    req_a = permission_request(sc, run_a)["request_id"]
    req_b = permission_request(sc, run_b)["request_id"]
    assert sc.result("agent/runs/get", {"run_id": run_a})["pending_permission"]["request_id"] == req_a
    assert error_of(resolve(sc, run_a, "perm_nope")) == (404, "PERMISSION_REQUEST_NOT_FOUND")
    assert error_of(resolve(sc, run_a, req_b)) == (404, "PERMISSION_REQUEST_NOT_FOUND"), "another run's request"
    assert error_of(resolve(sc, "run_nope", req_a)) == (404, "AGENT_RUN_NOT_FOUND")
    assert resolve(sc, run_a, req_a)["result"]["resolved"] is True
    second = resolve(sc, run_a, req_a, "deny")
    # which of the three depends on whether the run (one short mock turn left) ended between the two resolves
    assert error_of(second)[1] in ("PERMISSION_REQUEST_NOT_FOUND", "PERMISSION_ALREADY_RESOLVED", "AGENT_RUN_NOT_FOUND")
    assert wait_end(sc, run_a)["status"] == "completed"
    assert (workspace / name).read_text() == "A"
    assert error_of(resolve(sc, run_a, req_a)) == (404, "AGENT_RUN_NOT_FOUND"), "a finished run"
    # deny: a failed ToolResult, the run goes on
    assert resolve(sc, run_b, req_b, "deny")["result"]["decision"] == "deny"
    run = wait_end(sc, run_b)
    assert run["status"] == "completed"
    result = next(e["data"] for e in all_events(sc, run_b) if e["event"] == "ToolResult")
    assert result["success"] is False and result["error_code"] == "PERMISSION_DENIED"


def test_permission_cancel_while_waiting(sc: Sidecar) -> None:
    pid = mock_provider(sc, [tool_turn(("w", "write_file", {"path": uid("c-"), "content": "x"}))])
    run_id = create(sc, pid, ir_request("x"))
    request_id = permission_request(sc, run_id)["request_id"]
    assert sc.result("agent/runs/cancel", {"run_id": run_id}) == {"accepted": True, "status": "cancelled"}
    assert error_of(resolve(sc, run_id, request_id)) == (404, "AGENT_RUN_NOT_FOUND")
    run = sc.result("agent/runs/get", {"run_id": run_id})
    assert run["status"] == "cancelled" and run["pending_permission"] is None


def test_permission_timeout_is_a_deny_and_the_request_closes(data_dir: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    sc = Sidecar(data_dir)
    try:
        sc.initialize()
        sc.result(
            "config/update",
            {"values": {"agent.workspaceRoots": [str(workspace)], "agent.permissionTimeoutMs": 1000}},
        )
        pid = mock_provider(sc, [tool_turn(("w", "write_file", {"path": "t.txt", "content": "x"})), {"text": "ok"}])
        run_id = create(sc, pid, ir_request("x"))
        request_id = permission_request(sc, run_id)["request_id"]
        run = wait_end(sc, run_id, timeout=5)
        assert run["status"] == "completed" and not (workspace / "t.txt").exists()
        assert error_of(resolve(sc, run_id, request_id)) == (404, "AGENT_RUN_NOT_FOUND")
        events = all_events(sc, run_id)
        resolved = next(e["data"] for e in events if e["event"] == "PermissionResolved")
        assert resolved["source"] == "timeout" and resolved["decision"] == "deny"
        result = next(e["data"] for e in events if e["event"] == "ToolResult")
        assert result["error_code"] == "PERMISSION_DENIED"
    finally:
        sc.close()


def test_allow_always_is_remembered_for_later_calls_in_the_session_only(sc: Sidecar, workspace: Path) -> None:
    a, b = uid("aa-"), uid("ab-")
    pid = mock_provider(
        sc,
        [
            tool_turn(("w1", "write_file", {"path": a, "content": "1"})),
            tool_turn(("w2", "write_file", {"path": b, "content": "2"})),
            {"text": "ok"},
        ],
    )
    session = uid("always-")
    run_id = create(sc, pid, ir_request("x", session=session))
    assert resolve(sc, run_id, permission_request(sc, run_id)["request_id"], "allow_always")["result"]["resolved"]
    assert wait_end(sc, run_id)["status"] == "completed"
    resolved = [e["data"] for e in all_events(sc, run_id) if e["event"] == "PermissionResolved"]
    assert [(r["source"], r["request_id"]) for r in resolved][1] == ("session_rule", None)
    assert (workspace / b).read_text() == "2"
    # another session is asked again
    other = create(sc, mock_provider(sc, [tool_turn(("w", "write_file", {"path": uid("o-"), "content": "3"}))]),
                   ir_request("x"))  # fmt: skip
    assert permission_request(sc, other)["tool_name"] == "write_file"
    sc.result("agent/runs/cancel", {"run_id": other})


def test_allow_always_releases_the_same_sessions_other_open_request(sc: Sidecar) -> None:
    session = uid("par-")
    pid = mock_provider(sc, [tool_turn(("w", "write_file", {"path": uid("p-"), "content": "x"})), {"text": "ok"}])
    run_a = create(sc, pid, ir_request("a", session=session))
    run_b = create(sc, pid, ir_request("b", session=session))
    req_a = permission_request(sc, run_a)["request_id"]
    permission_request(sc, run_b)
    resolve(sc, run_a, req_a, "allow_always")
    wait_end(sc, run_a)
    try:
        time.sleep(0.3)
        assert sc.result("agent/runs/get", {"run_id": run_b})["pending_permission"] is None
    finally:
        sc.result("agent/runs/cancel", {"run_id": run_b})


def test_a_tool_that_ran_before_a_cancel_is_in_the_trace(sc: Sidecar, workspace: Path) -> None:
    content = "z" * (5 * 1024 * 1024 - 16)
    for attempt in range(4):
        name = uid("big-") + ".txt"
        pid = mock_provider(sc, [tool_turn(("w1", "write_file", {"path": name, "content": content})), {"text": "k"}])
        run_id = create(sc, pid, ir_request("x", session=uid("cw-")))
        request_id = permission_request(sc, run_id)["request_id"]
        allow = sc.request(
            "agent/permissions/resolve", {"run_id": run_id, "request_id": request_id, "decision": "allow_once"}
        )
        time.sleep(0.002 * attempt)
        cancel = sc.request("agent/runs/cancel", {"run_id": run_id})
        sc.response(allow)
        assert sc.response(cancel)["result"]["status"] in ("cancelled", "completed")
        if (workspace / name).exists():
            names = [e["event"] for e in all_events(sc, run_id)]
            assert "ToolResult" in names, names
            return
    pytest.skip("the write never started before the cancel: race not reproduced")


# == tools through the loop =======================================================================================


def test_tool_arguments_and_paths_are_confined(sc: Sidecar, workspace: Path) -> None:
    outside = workspace.parent / uid("outside-")
    outside.mkdir()
    (outside / "secret.txt").write_text("TOPSECRET-CONTENT")
    link = uid("link-")
    os.symlink(outside / "secret.txt", workspace / f"{link}.txt")
    os.symlink(outside, workspace / f"{link}-dir")
    (workspace / "inside.txt").write_text("hello")
    calls = [
        ("p1", "read_file", {"path": "../" + outside.name + "/secret.txt"}, "PATH_OUTSIDE_WORKSPACE", False),
        ("p2", "read_file", {"path": str(outside / "secret.txt")}, "PATH_OUTSIDE_WORKSPACE", False),
        ("p3", "read_file", {"path": f"{link}.txt"}, "PATH_OUTSIDE_WORKSPACE", False),
        ("p4", "read_file", {"path": f"{link}-dir/secret.txt"}, "PATH_OUTSIDE_WORKSPACE", False),
        ("p5", "list_directory", {"path": ".."}, "PATH_OUTSIDE_WORKSPACE", False),
        ("p6", "search_files", {"query": "TOPSECRET", "path": f"{link}-dir"}, "PATH_OUTSIDE_WORKSPACE", False),
        ("p7", "read_file", {"path": 5}, "INVALID_ARGUMENTS", True),
        ("p8", "read_file", {"path": "inside.txt", "start_line": "x"}, "INVALID_ARGUMENTS", True),
        ("p9", "read_file", {}, "INVALID_ARGUMENTS", True),
        ("p10", "read_file", {"path": "inside.txt", "extra": 1}, "INVALID_ARGUMENTS", True),
        ("p11", "read_file", {"path": "inside.txt\x00"}, "PATH_INVALID", False),
        ("p12", "calculator", {"expression": "__import__('os').system('true')"}, "INVALID_EXPRESSION", False),
        ("p13", "calculator", {"expression": "9**9**9**9"}, "RESULT_TOO_LARGE", False),
        ("p14", "no_such_tool", {}, "UNKNOWN_TOOL", True),
    ]
    pid = mock_provider(sc, [tool_turn(*[(i, n, a) for i, n, a, _, _ in calls]), {"text": "ok"}])
    run_id = create(sc, pid, ir_request("x"))
    run = wait_end(sc, run_id)
    assert run["status"] == "completed"
    results = {e["data"]["tool_call_id"]: e["data"] for e in all_events(sc, run_id) if e["event"] == "ToolResult"}
    for call_id, _name, _args, code, invalid in calls:
        assert results[call_id]["success"] is False, call_id
        assert (results[call_id]["error_code"], results[call_id]["invalid_arguments"]) == (code, invalid), call_id
    assert run["summary"]["invalid_tool_calls"] == 5
    # a search inside the workspace does not follow the link out
    pid = mock_provider(sc, [tool_turn(("s", "search_files", {"query": "TOPSECRET-CONTENT"})), {"text": "ok"}])
    run_id = create(sc, pid, ir_request("x"))
    wait_end(sc, run_id)
    result = next(e["data"] for e in all_events(sc, run_id) if e["event"] == "ToolResult")
    assert result["success"] and result["result"]["matches"] == []


def test_a_futile_loop_is_detected_and_max_iterations_ends_it(sc: Sidecar) -> None:
    pid = mock_provider(sc, [tool_turn(("x", "calculator", {"expression": "1/0"}))])
    run_id = create(sc, pid, ir_request("x"), max_iterations=4)
    run = wait_end(sc, run_id)
    assert run["status"] == "failed" and run["error"]["code"] == "MAX_ITERATIONS" and run["iterations"] == 4
    events = all_events(sc, run_id)
    loops = [e["data"] for e in events if e["event"] == "LoopDetected"]
    assert [d["repeats"] for d in loops] == [2, 3, 4] and loops[0]["tool_name"] == "calculator"
    assert events[-1]["event"] == "RunFailed" and events[-1]["data"]["error"]["code"] == "MAX_ITERATIONS"
    assert run["summary"]["model_calls"] == 4 and run["summary"]["tool_calls"] == 4


# == redaction ====================================================================================================

SECRET_KEY = "sk-abcdefghijklmnop1234567890XYZ"
BEARER = "abc123def456ghi789jkl"


def test_secrets_in_the_user_message_never_reach_the_trace(sc: Sidecar) -> None:
    text = f"my key is {SECRET_KEY} and the header is Authorization: Bearer {BEARER} ok"
    pid = mock_provider(sc, [{"echo": True, "chunk_chars": 7}])
    run_id = create(sc, pid, ir_request(text, stream=True))
    run = wait_end(sc, run_id)
    assert run["status"] == "completed" and run["output"].startswith("mock: my key is ")
    dumped = json.dumps(all_events(sc, run_id)) + json.dumps(sc.result("agent/runs/trace", {"run_id": run_id}))
    dumped += json.dumps(sc.result("agent/runs/list", {"session_id": run["session_id"]}))
    assert SECRET_KEY not in dumped and BEARER not in dumped


def test_image_data_uris_never_reach_the_trace(sc: Sidecar) -> None:
    uri = "data:image/png;base64," + "iVBORw0KGgo" * 200
    request = ir_request("look at " + uri)
    request["messages"][0]["images"] = [{"url": uri}]
    pid = mock_provider(sc, [{"text": "a picture"}])
    run_id = create(sc, pid, request)
    assert wait_end(sc, run_id)["status"] == "completed"
    dumped = json.dumps(sc.result("agent/runs/trace", {"run_id": run_id, "limit": 1000}))
    assert "iVBORw0KGgoiVBORw0KGgo" not in dumped
    request["messages"][0]["images"] = [uri]  # not a MetonaImageContent
    assert error_of(sc.call("agent/runs/create", {"provider_id": pid, "request": request})) == (
        -32602,
        "VALIDATION_ERROR",
    )


def test_a_5_mb_user_message_is_served_and_the_trace_stays_small(sc: Sidecar) -> None:
    pid = mock_provider(sc, [{"text": "read it"}])
    big = "word " * (1024 * 1024)
    rid = sc.request("agent/runs/create", {"provider_id": pid, "request": ir_request(big)})
    t0 = time.monotonic()
    assert sc.call("ping")["result"] == {}
    assert time.monotonic() - t0 < 2
    run_id = sc.response(rid, timeout=30)["result"]["run_id"]
    run = wait_end(sc, run_id, timeout=30)
    assert run["status"] == "completed" and run["output"] == "read it"
    events = all_events(sc, run_id)
    assert len(json.dumps(events)) < 50_000
    assert len(events[0]["data"]["input"]) < 2100


def test_the_runs_output_is_the_models_answer(sc: Sidecar) -> None:
    answer = "Here is the encoded file: " + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo" * 20
    pid = mock_provider(sc, [{"text": answer}])
    run = wait_end(sc, create(sc, pid, ir_request("encode it")))
    assert run["status"] == "completed"
    assert run["output"] == answer


# == list =========================================================================================================


def test_runs_list_filters_and_pages(sc: Sidecar) -> None:
    session = uid("list-")
    done = mock_provider(sc, [{"text": "ok"}])
    fail = mock_provider(sc, [{"error": {"code": "auth_invalid", "message": "nope", "retryable": False}}])
    ids = [create(sc, done, ir_request("x", session=session)) for _ in range(3)]
    failed = create(sc, fail, ir_request("x", session=session))
    for run_id in [*ids, failed]:
        wait_end(sc, run_id)
    listed = sc.result("agent/runs/list", {"session_id": session, "limit": 500})
    assert listed["page"]["total"] == 4
    assert {r["run_id"] for r in listed["items"]} == {*ids, failed}
    created = [r["created_at"] for r in listed["items"]]
    assert created == sorted(created, reverse=True), "newest first"
    only_failed = sc.result("agent/runs/list", {"session_id": session, "status": "failed"})
    assert [r["run_id"] for r in only_failed["items"]] == [failed] and only_failed["page"]["total"] == 1
    assert only_failed["items"][0]["error"]["code"].startswith(("PROVIDER_", "MODEL_"))
    paged = []
    for offset in range(0, 4):
        page = sc.result("agent/runs/list", {"session_id": session, "limit": 1, "offset": offset})
        assert page["page"] == {"total": 4, "limit": 1, "offset": offset}
        paged += [r["run_id"] for r in page["items"]]
    assert paged == [r["run_id"] for r in listed["items"]]
    beyond = sc.result("agent/runs/list", {"session_id": session, "offset": 2**31 - 1})
    assert beyond["items"] == [] and beyond["page"]["total"] == 4
    assert sc.result("agent/runs/list", {"session_id": session, "status": "queued"})["items"] == []
    assert sc.result("agent/runs/list", {"session_id": uid("none-")})["page"]["total"] == 0


# == shutdown =====================================================================================================


def test_shutdown_and_exit_during_a_streaming_run(data_dir: Path) -> None:
    sc = Sidecar(data_dir)
    try:
        sc.initialize()
        pid = mock_provider(sc, [{"text": "y" * 3000, "chunk_chars": 5, "delay_ms": 5}])
        seen: list[Any] = []
        rid = sc.request("agent/runs/create", {"provider_id": pid, "request": ir_request("go", stream=True)})
        run_id = sc.response(rid, collect=seen)["result"]["run_id"]
        while len([m for m in seen if "jsonrpc" not in m]) < 5:
            seen.append(sc.next())
        assert sc.response(sc.request("shutdown"), collect=seen)["result"] is None
        sc.notify("exit")
        assert sc.wait() == 0
        drain(sc, seen, 0.2)
        lines = [m for m in seen if isinstance(m, dict) and "jsonrpc" not in m]
        assert [m["type"] for m in lines][-2:] == ["error", "done"]
    finally:
        sc.close()
    again = Sidecar(data_dir)
    try:
        again.initialize()
        run = again.result("agent/runs/get", {"run_id": run_id})
        assert run["status"] == "cancelled"
        last = all_events(again, run_id)[-1]
        assert last["event"] == "RunCancelled" and last["data"]["reason"] == "shutdown"
    finally:
        again.close()
