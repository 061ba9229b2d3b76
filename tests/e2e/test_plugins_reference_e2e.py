"""The bridge against reference MCP servers nobody here wrote, installed by scripts/setup (step h):
PyPI ``mcp-server-time`` and npm ``@modelcontextprotocol/server-everything`` (pinned in tools/mcp-ref/).
One agent run (mock provider) calls a tool of each; killing a server mid-run fails the call and marks the host
unhealthy; a restart republishes; after shutdown no process the sidecar started is left. Also: a bare command
found only on the user's login-shell PATH (a desktop-launched app's bare PATH)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.support import SERVER, alive, group_members, loopback_run, make_plugin, run_agent, wait_status
from tests.support.sidecar_proc import ROOT, Sidecar

pytestmark = pytest.mark.e2e

REF = ROOT / "tools" / "mcp-ref"
TIME_SERVER = REF / ".venv" / "bin" / "mcp-server-time"
EVERYTHING = REF / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert TIME_SERVER.exists() and EVERYTHING.exists(), "run scripts/setup (step h installs the reference servers)"
    return tmp_path_factory.mktemp("plugins-ref")


@pytest.fixture(scope="module")
def sc(home: Path) -> Iterator[Sidecar]:
    data = home / "data"
    data.mkdir()
    sidecar = Sidecar(data, args=["--development"])
    try:
        sidecar.initialize()
        yield sidecar
    finally:
        sidecar.close()


def reference(home: Path, plugin_id: str, command: str, args: list[str]) -> Path:
    backend = {"type": "mcp", "transport": "stdio", "command": command, "args": args}
    return make_plugin(home / "pkgs", plugin_id, backend=backend, tools={"timeout_ms": 10000})


def test_agent_calls_both_reference_servers_then_survives_a_kill(sc: Sidecar, home: Path) -> None:
    started = time.monotonic()
    everything = sc.result(
        "plugins/install", {"package_path": str(reference(home, "everything", "node", [str(EVERYTHING), "stdio"]))},
        timeout=30,
    )["host"]  # fmt: skip
    published_s = time.monotonic() - started
    assert everything["status"] == "ready", everything
    assert "everything.echo" in everything["tools"] and "everything.get-sum" in everything["tools"]
    clock = sc.result(
        "plugins/install", {"package_path": str(reference(home, "time", str(TIME_SERVER), []))}, timeout=30
    )["host"]
    assert clock["status"] == "ready" and "time.get_current_time" in clock["tools"], clock
    print(f"server-everything: install -> tools published in {published_s:.2f} s (node start included)")

    run, results = run_agent(sc, [
        ("e1", "everything.echo", {"message": "hi from metona"}),
        ("e2", "everything.get-sum", {"a": 2, "b": 40}),
        ("t1", "time.get_current_time", {"timezone": "Europe/Berlin"}),
    ])  # fmt: skip
    assert run["status"] == "completed", run
    assert results["e1"]["success"] and "hi from metona" in results["e1"]["summary"]
    assert results["e2"]["success"] and "42" in results["e2"]["summary"]
    assert results["t1"]["success"] and "Europe/Berlin" in results["t1"]["summary"]

    # the same through a loopback OpenAI-format vendor that calls the tools by their wire names
    for registry_name, wire_name, args, provider_id in (
        ("everything.echo", "everything__echo", {"message": "via the wire"}, "loop-e"),
        ("time.get_current_time", "time__get_current_time", {"timezone": "UTC"}, "loop-t"),
    ):
        looped, _, trace = loopback_run(sc, registry_name, wire_name, args, provider_id)
        assert looped["status"] == "completed", looped
        call = next(e["data"] for e in trace if e["event"] == "ToolCall")
        result = next(e["data"] for e in trace if e["event"] == "ToolResult")
        assert call["tool_name"] == registry_name and result["success"], result

    # kill the node server mid-run: the run's call fails readably, the host turns unhealthy
    pid = everything["pid"]
    from tests.plugins.support import ir_request, mock_provider

    tools = {t["name"]: t for t in sc.result("tools/list")["items"]}
    long_op = next((n for n in tools if n.startswith("everything.") and "long" in n), None)
    assert long_op is not None, sorted(tools)
    # its readOnlyHint is the server's own word (issue 33): it asks; under way = past its PermissionResolved
    # (ToolCall is traced before the question is opened, so "ToolCall and nothing pending" can be read in between)
    under_way = "PermissionResolved" if tools[long_op]["requiresPermission"] else "ToolCall"
    provider_calls = [("slow", long_op, {"duration": 30, "steps": 3})]
    provider_id = mock_provider(sc, provider_calls)
    run_id = sc.result("agent/runs/create", {"provider_id": provider_id, "request": ir_request("go")})["run_id"]
    deadline = time.monotonic() + 20
    while True:  # the call is under way (its permission answered) before the kill
        got = sc.result("agent/runs/get", {"run_id": run_id})
        if got.get("pending_permission"):
            sc.result("agent/permissions/resolve", {"run_id": run_id, "request_id":
                      got["pending_permission"]["request_id"], "decision": "allow_once"})  # fmt: skip
        items = sc.result("agent/runs/events", {"run_id": run_id})["items"]
        names = [e["event"] for e in items]
        assert "ToolResult" not in names, items
        if under_way in names and not got.get("pending_permission"):
            break
        assert time.monotonic() < deadline, names
        time.sleep(0.05)
    time.sleep(0.3)
    os.killpg(pid, 9)
    killed_at = time.monotonic()
    while (got := sc.result("agent/runs/get", {"run_id": run_id}))["status"] == "running":
        assert time.monotonic() - killed_at < 10
        time.sleep(0.05)
    items = sc.result("agent/runs/events", {"run_id": run_id, "limit": 1000})["items"]
    result = next(e["data"] for e in items if e["event"] == "ToolResult")
    assert not result["success"] and "stopped" in result["error"]
    while "unhealthy" not in [
        e["data"]["status"] for e in sc.result("plugins/events", {"plugin_id": "everything"})["items"]
    ]:
        assert time.monotonic() - killed_at < 2.0, "a dead server is noticed within 2 s"
        time.sleep(0.02)

    sc.result("plugins/host/restart", {"plugin_id": "everything"})
    again = wait_status(sc, "everything", {"ready"}, timeout=30)
    assert again["pid"] != pid and "everything.echo" in again["tools"]
    _, results = run_agent(sc, [("e3", "everything.echo", {"message": "back"})])
    assert results["e3"]["success"]

    pids = [again["pid"], sc.result("plugins/host/get", {"plugin_id": "time"})["pid"]]
    sc.result("shutdown")
    sc.notify("exit")
    assert sc.wait(15) == 0
    for p in pids:
        assert not alive(p) and group_members(p) == [], p


def test_a_bare_command_is_found_on_the_login_shell_path(home: Path) -> None:
    bin_dir = home / "login-bin"
    bin_dir.mkdir()
    launcher = bin_dir / "metona-fixture-server"
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} {SERVER} good\n")
    launcher.chmod(0o755)
    shell = home / "login-shell"  # a "login shell" whose profile adds bin_dir to PATH
    shell.write_text(f'#!/bin/sh\nPATH="{bin_dir}:$PATH"; export PATH\n[ "$1" = -l ] && shift\nexec /bin/sh "$@"\n')
    shell.chmod(0o755)
    data = home / "login-data"
    data.mkdir()
    side = Sidecar(data, args=["--development"], env={"SHELL": str(shell), "PATH": "/usr/bin:/bin"})
    try:
        side.initialize()
        folder = make_plugin(home / "pkgs", "login", backend={"type": "mcp", "transport": "stdio",
                                                              "command": "metona-fixture-server"})  # fmt: skip
        host: dict[str, Any] = side.result("plugins/install", {"package_path": str(folder)}, timeout=30)["host"]
        assert host["status"] == "ready", host
        side.close_stdin()  # stdin EOF ends the sidecar: its server goes with it
        assert side.wait(15) == 0
        assert not alive(host["pid"]) and group_members(host["pid"]) == []
    finally:
        side.close()
