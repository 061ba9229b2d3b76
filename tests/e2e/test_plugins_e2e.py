"""Plugins over real stdio: a fixture MCP server (written with the SDK's MCPServer) installed as a plugin, its
tools called by agent runs (mock provider) through the bridge, and its faults: a crash mid-call, a hang, stray
stdout lines, a stderr flood, a huge result, an error result, invalid arguments, a tool-list change, restarts.
One sidecar and one fixture plugin serve the whole module (a Python MCP server takes ~1-2 s to start)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.support import (
    SERVER,
    alive,
    events,
    group_members,
    loopback_run,
    make_plugin,
    run_agent,
    wait_status,
)
from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("plugins")


@pytest.fixture(scope="module")
def sc(home: Path) -> Iterator[Sidecar]:
    data = home / "data"
    data.mkdir()
    sidecar = Sidecar(data, env={"METONA_DEVELOPMENT": "1"})
    try:
        sidecar.initialize()
        yield sidecar
    finally:
        sidecar.close()


@pytest.fixture(scope="module")
def fixture_plugin(sc: Sidecar, home: Path) -> dict[str, Any]:
    backend = {"type": "mcp", "transport": "stdio", "command": sys.executable, "args": [str(SERVER)],
               "env": {"FIXTURE_MARKER": str(home / "cancelled.txt")}}  # fmt: skip
    folder = make_plugin(home / "pkgs", "fixture", backend=backend)
    info = sc.result("plugins/install", {"package_path": str(folder)}, timeout=30)
    assert info["host"]["status"] == "ready", info
    return info


def ready_host(sc: Sidecar) -> dict[str, Any]:
    return wait_status(sc, "fixture", {"ready"}, timeout=30)


def test_install_publishes_namespaced_tools_with_risk(sc: Sidecar, fixture_plugin: dict[str, Any]) -> None:
    host = fixture_plugin["host"]
    assert host["tools_count"] == len(host["tools"]) >= 10 and "fixture.add" in host["tools"]
    assert host["backend_type"] == "mcp" and host["transport"] == "stdio" and host["error"] is None
    assert host["started_at"] and host["last_seen_at"] and host["pid"] > 0
    tools = {t["name"]: t for t in sc.result("tools/list")["items"]}
    # readOnlyHint is the server's own word: a hint, not trust (issue 33) — medium, asks, like an unannotated tool
    assert tools["fixture.add"]["riskLevel"] == "medium" and tools["fixture.add"]["category"] == "mcp"
    assert tools["fixture.add"]["requiresPermission"] is True
    assert tools["fixture.add"]["parameters"]["properties"]["a"]["type"] == "number"
    assert tools["fixture.wipe"]["riskLevel"] == "critical"  # the manifest wins over destructiveHint
    assert tools["fixture.wipe"]["requiresPermission"] is True
    assert tools["fixture.shout"]["riskLevel"] == "medium"  # no annotations
    assert tools["fixture.add"]["examples"] == ["What is 2 plus 3?", "3 加 4 等于几？"]  # the manifest's (extension)
    assert tools["fixture.shout"].get("examples") is None
    assert tools["read_file"]["category"] == "filesystem"  # built-ins unchanged
    listed = sc.result("plugins/list")["items"]
    assert [p["plugin_id"] for p in listed] == ["fixture"] and listed[0]["host"]["status"] == "ready"
    got = sc.result("plugins/get", {"plugin_id": "fixture"})
    assert got["version"] == "1.0.0" and got["permissions"] == ["tools", "prompts"]


def test_reinstalling_the_same_version_is_a_conflict(sc: Sidecar, fixture_plugin: dict[str, Any], home: Path) -> None:
    error = sc.call("plugins/install", {"package_path": str(make_plugin(home / "pkgs", "fixture"))})["error"]
    assert error["code"] == 409 and error["data"]["code"] == "PLUGIN_ALREADY_INSTALLED"
    missing = sc.call("plugins/get", {"plugin_id": "nope"})["error"]
    assert missing["code"] == 404 and missing["data"]["code"] == "PLUGIN_NOT_FOUND"


def test_an_agent_run_calls_plugin_tools(sc: Sidecar, fixture_plugin: dict[str, Any]) -> None:
    ready_host(sc)
    run, results = run_agent(
        sc,
        [
            ("c1", "fixture.add", {"a": 2, "b": 40}),
            ("c2", "fixture.shout", {"text": "hi"}),
            ("c3", "fixture.image", {}),
            ("c4", "fixture.structured", {"n": 7}),
        ],
    )
    assert run["status"] == "completed", run
    assert results["c1"]["success"] and "42" in results["c1"]["summary"]
    assert results["c2"]["summary"] == "HI"
    image = results["c3"]["result"]["content"]
    assert [p["type"] for p in image] == ["text", "image"] and image[1]["mimeType"] == "image/png"
    assert "[image image/png" in results["c3"]["summary"]
    assert results["c4"]["result"]["structured_content"] == {"n": 7, "square": 49}


def test_call_faults_become_failed_tool_results(sc: Sidecar, fixture_plugin: dict[str, Any], home: Path) -> None:
    ready_host(sc)
    run, results = run_agent(
        sc,
        [
            ("big", "fixture.big", {"size": 70_000}),  # over max_result_bytes, under the line cap
            ("huge", "fixture.big", {"size": 3_000_000}),  # over the line cap: never held whole
            ("fail", "fixture.fail", {"message": "boom from the server"}),
            ("args", "fixture.add", {"a": "two"}),
            ("unknown", "fixture.nope", {}),
            ("slow", "fixture.slow", {"seconds": 20}),  # over timeout_ms (4 s): cancelled
            ("garbage", "fixture.garbage", {"lines": 3}),
            ("flood", "fixture.flood", {"kib": 200}),
        ],
        timeout=60,
    )
    assert run["status"] == "completed", run
    assert not results["big"]["success"] and "65536" in results["big"]["error"]
    assert not results["huge"]["success"] and "limit" in results["huge"]["error"]
    assert not results["fail"]["success"] and "boom from the server" in results["fail"]["error"]
    codes = {k: results[k].get("error_code") for k in ("big", "huge", "fail", "args", "slow")}
    assert codes == {"big": "MCP_TOOL_RESULT_TOO_LARGE", "huge": "MCP_TOOL_RESULT_TOO_LARGE",
                     "fail": "MCP_TOOL_CALL_FAILED", "args": "INVALID_ARGUMENTS", "slow": "TOOL_TIMEOUT"}  # fmt: skip
    assert not results["args"]["success"] and "invalid arguments" in results["args"]["error"]
    assert not results["unknown"]["success"]
    assert not results["slow"]["success"] and "4000 ms" in results["slow"]["error"]
    deadline = time.monotonic() + 5
    while not (home / "cancelled.txt").exists():  # the timeout sent MCP notifications/cancelled
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert results["garbage"]["success"] and results["garbage"]["summary"] == "ok after garbage"
    assert results["flood"]["success"]
    host = sc.result("plugins/host/get", {"plugin_id": "fixture"})
    assert host["status"] == "ready" and host["stdout_garbage_lines"] >= 3
    tail = host["stderr_tail"]
    assert tail.endswith("FLOOD-END\n") and 60_000 <= len(tail.encode()) <= 64 * 1024
    _, again = run_agent(sc, [("after", "fixture.add", {"a": 1, "b": 1})])
    assert again["after"]["success"], "the server still works after every fault"


def test_list_changed_republishes(sc: Sidecar, fixture_plugin: dict[str, Any]) -> None:
    ready_host(sc)
    _, results = run_agent(sc, [("g", "fixture.grow", {})])
    assert results["g"]["success"]
    deadline = time.monotonic() + 10
    while "fixture.extra" not in {t["name"] for t in sc.result("tools/list")["items"]}:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    _, results = run_agent(sc, [("e", "fixture.extra", {"word": "ab"})])
    assert results["e"]["summary"] == "abab"


def test_a_crash_mid_call_fails_the_call_then_the_host_recovers(sc: Sidecar, fixture_plugin: dict[str, Any]) -> None:
    before = ready_host(sc)
    old_pid = before["pid"]
    count = len(plugin_statuses(sc))
    started = time.monotonic()
    run, results = run_agent(sc, [("x", "fixture.crash", {})])
    assert not results["x"]["success"] and "stopped" in results["x"]["error"], results
    assert results["x"]["error_code"] == "PLUGIN_HOST_UNHEALTHY"
    assert time.monotonic() - started < 5
    assert run["status"] == "completed"
    wait_for_status_event(sc, "unhealthy", after=count, within=2.0)
    after = ready_host(sc)  # restarted with backoff
    assert after["restarts"] >= before["restarts"] + 1 and after["pid"] != old_pid
    assert not alive(old_pid)
    assert "fixture.add" in after["tools"]


def test_a_hung_server_is_detected_once_its_call_may_no_longer_be_running(
    sc: Sidecar, fixture_plugin: dict[str, Any]
) -> None:
    """A server busy on a call has the call's time bound (timeout_ms: 4 s here) to answer a ping (issue 21: it was
    1 s, which killed servers busy on a legitimate synchronous call); silent beyond it, it is unhealthy, its call
    failed and it is restarted."""
    before = ready_host(sc)
    count = len(plugin_statuses(sc))
    rid = sc.request("ping")
    sc.response(rid)
    started = time.monotonic()
    _, results = run_agent(sc, [("h", "fixture.hang", {"seconds": 60})])
    elapsed = time.monotonic() - started
    assert not results["h"]["success"] and "PLUGIN_HOST" not in results["h"]["summary"]
    assert results["h"]["error_code"] in ("TOOL_TIMEOUT", "PLUGIN_HOST_UNHEALTHY"), results
    assert elapsed < 4 + 3.5, elapsed  # the 4 s call bound, then ping every 0.5 s, plus the run's own overhead
    wait_for_status_event(sc, "unhealthy", after=count, within=3.0)
    assert not alive(before["pid"]) or wait_gone(before["pid"])
    ready_host(sc)


def test_a_server_busy_on_a_call_within_its_bound_stays_healthy(sc: Sidecar, fixture_plugin: dict[str, Any]) -> None:
    """Issue 21: blocking its event loop 2 s (over the 1 s ping answer, under the 4 s call bound) is being busy,
    not dead: the call answers, no unhealthy status, the same process."""
    before = ready_host(sc)
    count = len(plugin_statuses(sc))
    _, results = run_agent(sc, [("b", "fixture.hang", {"seconds": 2})])
    assert results["b"]["success"] and results["b"]["summary"] == "woke up", results
    assert "unhealthy" not in plugin_statuses(sc)[count:]
    assert sc.result("plugins/host/get", {"plugin_id": "fixture"})["pid"] == before["pid"]


def test_a_server_error_is_the_servers_error_not_a_dead_server(sc: Sidecar, fixture_plugin: dict[str, Any]) -> None:
    """Issue 21: JSON-RPC -32000 from a live server is MCP_TOOL_CALL_FAILED with its message, the host stays."""
    before = ready_host(sc)
    _, results = run_agent(sc, [("e", "fixture.server_error", {"message": "quota exceeded"})])
    assert results["e"]["error_code"] == "MCP_TOOL_CALL_FAILED", results
    assert "quota exceeded" in results["e"]["error"]
    host = sc.result("plugins/host/get", {"plugin_id": "fixture"})
    assert host["status"] == "ready" and host["pid"] == before["pid"]


def test_restart_answers_at_once_and_republishes(sc: Sidecar, fixture_plugin: dict[str, Any]) -> None:
    before = ready_host(sc)
    started = time.monotonic()
    accepted = sc.result("plugins/host/restart", {"plugin_id": "fixture"})
    assert time.monotonic() - started < 0.5
    assert accepted["accepted"] is True and accepted["plugin_id"] == "fixture"
    names = {t["name"] for t in sc.result("tools/list")["items"]}
    assert not any(n.startswith("fixture.") for n in names) or wait_status(sc, "fixture", {"ready"})
    after = wait_status(sc, "fixture", {"ready"}, timeout=30)
    assert after["pid"] != before["pid"] and after["tools_count"] >= 10
    assert wait_gone(before["pid"])


def plugin_statuses(sc: Sidecar) -> list[str]:
    items = sc.result("plugins/events", {"plugin_id": "fixture", "after_sequence": 0, "limit": 1000})["items"]
    return [e["data"]["status"] for e in items if e["event"] == "HostStatusChanged"]


def wait_for_status_event(sc: Sidecar, status: str, *, after: int, within: float) -> None:
    deadline = time.monotonic() + within
    while status not in plugin_statuses(sc)[after:]:
        assert time.monotonic() < deadline, plugin_statuses(sc)
        time.sleep(0.05)


def wait_gone(pid: int, timeout: float = 8) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_status_changes_are_events(sc: Sidecar, fixture_plugin: dict[str, Any]) -> None:
    statuses = plugin_statuses(sc)
    assert statuses[:2] == ["starting", "ready"]
    sub = sc.result("events/subscribe", {"resource_id": "fixture", "after_sequence": 0})
    assert sub["subscription_id"]
    sc.result("events/unsubscribe", {"subscription_id": sub["subscription_id"]})


def test_permissions_apply_to_risky_plugin_tools(sc: Sidecar, fixture_plugin: dict[str, Any]) -> None:
    ready_host(sc)
    _, results = run_agent(sc, [("w", "fixture.wipe", {"target": "notes"})], resolve="deny")
    assert not results["w"]["success"]
    _, results = run_agent(sc, [("w2", "fixture.wipe", {"target": "notes"})], resolve="allow_once")
    assert results["w2"]["success"] and results["w2"]["summary"] == "wiped notes"


def test_uninstall_stops_the_server_and_removes_everything(sc: Sidecar, home: Path) -> None:
    info = sc.result("plugins/install", {"package_path": str(make_plugin(home / "pkgs", "gone"))}, timeout=30)
    pid = info["host"]["pid"]
    assert alive(pid)
    assert sc.result("plugins/uninstall", {"plugin_id": "gone"}) == {"plugin_id": "gone", "uninstalled": True}
    assert not alive(pid) and group_members(pid) == []
    assert not any(t["name"].startswith("gone.") for t in sc.result("tools/list")["items"])
    assert not (home / "data" / "plugins" / "gone").exists()
    assert sc.call("plugins/get", {"plugin_id": "gone"})["error"]["data"]["code"] == "PLUGIN_NOT_FOUND"


def test_a_vendor_sees_wire_names_and_its_calls_map_back(sc: Sidecar, fixture_plugin: dict[str, Any]) -> None:
    """A loopback OpenAI-format server: the registry's ``fixture.add`` goes out as a valid function name, the
    server calls it by that wire name, and the run's ToolCall/ToolResult carry the registry name."""
    import re

    ready_host(sc)
    run, sent, trace = loopback_run(sc, "fixture.add", "fixture__add", {"a": 20, "b": 22}, "loop")
    assert run["status"] == "completed" and run["output"] == "Done.", run
    wire_names = [t["function"]["name"] for t in sent[0]["tools"]]
    assert all(re.match(r"^[A-Za-z0-9_-]{1,64}$", n) for n in wire_names)
    assert len(set(wire_names)) == len(wire_names) and "calculator" in wire_names
    history = sent[1]["messages"]
    assert history[-2]["tool_calls"][0]["function"]["name"] == "fixture__add"
    call = next(e["data"] for e in trace if e["event"] == "ToolCall")
    result = next(e["data"] for e in trace if e["event"] == "ToolResult")
    assert call["tool_name"] == "fixture.add" and result["success"] and "42" in result["summary"]


def test_cancelling_a_run_cancels_the_mcp_call(sc: Sidecar, fixture_plugin: dict[str, Any], home: Path) -> None:
    from tests.plugins.support import ir_request, mock_provider

    ready_host(sc)
    marker = home / "cancelled.txt"
    before = marker.read_text().count("cancelled") if marker.exists() else 0
    provider_id = mock_provider(sc, [("s", "fixture.slow", {"seconds": 30})])
    run_id = sc.result("agent/runs/create", {"provider_id": provider_id, "request": ir_request("go")})["run_id"]
    deadline = time.monotonic() + 15
    while True:
        run = sc.result("agent/runs/get", {"run_id": run_id})
        if run["pending_permission"]:
            answer = {"run_id": run_id, "request_id": run["pending_permission"]["request_id"], "decision": "allow_once"}
            sc.result("agent/permissions/resolve", answer)
        elif any(e["event"] == "PermissionResolved" for e in events(sc, run_id)):
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)  # the call is with the server
    sc.result("agent/runs/cancel", {"run_id": run_id})
    deadline = time.monotonic() + 5
    while (marker.read_text().count("cancelled") if marker.exists() else 0) <= before:
        assert time.monotonic() < deadline, "the server never saw notifications/cancelled"
        time.sleep(0.05)
    assert wait_run(sc, run_id)["status"] == "cancelled"
    assert ready_host(sc)["status"] == "ready"


def wait_run(sc: Sidecar, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while (run := sc.result("agent/runs/get", {"run_id": run_id}))["status"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return run
