"""Issue 33 §1 over real stdio: an MCP server's annotations are hints, not trust.

The fixture server annotates ``add`` ``readOnlyHint: true`` and ``wipe`` ``destructiveHint: true``; a plugin
whose manifest gives no risk for them cannot run either without a permission answer (agent run, plugin command).
"Allow always" is stored per plugin and tool: the next run does not ask (trace source ``plugin_rule``), nor does the
command, nor a sidecar started again on the same data; uninstalling forgets it. Trusting the plugin's annotations
is the user's setting (``plugins/trust/update``), never the package's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.support import events, make_plugin, run_agent, wait_status
from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e

COMMANDS = [
    {"command_id": "add", "title": "Add", "tool": "add", "locations": ["command_palette"],
     "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}},
]  # fmt: skip


def _start(data: Path) -> Sidecar:
    sidecar = Sidecar(data, env={"METONA_DEVELOPMENT": "1"})
    sidecar.initialize()
    return sidecar


def _install(sc: Sidecar, home: Path) -> dict[str, Any]:
    folder = make_plugin(home / "pkgs", "trusty", tools={"timeout_ms": 4000}, contributes={"commands": COMMANDS})
    info = sc.result("plugins/install", {"package_path": str(folder)}, timeout=30)
    assert info["host"]["status"] == "ready", info
    return info


def _tools(sc: Sidecar) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in sc.result("tools/list")["items"] if t["name"].startswith("trusty.")}


def _permission_events(sc: Sidecar, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e["event"], e["data"]) for e in events(sc, run_id) if e["event"].startswith("Permission")]


def _run(sc: Sidecar, resolve: str | None) -> tuple[dict[str, Any], dict[str, Any], list[tuple[str, Any]]]:
    run, results = run_agent(sc, [("c1", "trusty.add", {"a": 2, "b": 3})], resolve=resolve, timeout=30)
    return run, results["c1"], _permission_events(sc, run["run_id"])


def _command(sc: Sidecar, approved: bool) -> dict[str, Any]:
    params = {"command_id": "trusty.add", "arguments": {"a": 1, "b": 1}, "approved": approved}
    return sc.call("plugin-contributions/commands/execute", params, timeout=20)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("trust")


@pytest.fixture(scope="module")
def sc(home: Path) -> Iterator[Sidecar]:
    (home / "data").mkdir()
    sidecar = _start(home / "data")
    try:
        yield sidecar
    finally:
        sidecar.close()


def test_self_declared_read_only_still_asks_and_allow_always_is_remembered(sc: Sidecar, home: Path) -> None:
    _install(sc, home)
    tools = _tools(sc)
    assert (tools["trusty.add"]["riskLevel"], tools["trusty.add"]["requiresPermission"]) == ("medium", True)
    assert tools["trusty.wipe"]["riskLevel"] == "high"  # a hint asking for more caution is honoured
    asked = _command(sc, approved=False)["error"]
    assert asked["code"] == 403 and asked["data"]["code"] == "PLUGIN_COMMAND_PERMISSION_REQUIRED", asked

    run, result, perms = _run(sc, resolve="deny")
    assert run["status"] == "completed" and not result["success"] and result["error_code"] == "PERMISSION_DENIED"

    run, result, perms = _run(sc, resolve="allow_always")
    assert run["status"] == "completed" and result["success"], result
    assert perms[0][0] == "PermissionRequired" and perms[0][1]["risk_rule"] == "default"
    assert (perms[1][1]["decision"], perms[1][1]["source"]) == ("allow_always", "user")
    trust = sc.result("plugins/trust/get", {"plugin_id": "trusty"})
    assert trust == {"plugin_id": "trusty", "annotations_trusted": False, "always_allowed_tools": ["add"]}

    run, result, perms = _run(sc, resolve="deny")  # a new run; a question would be denied: the rule decides
    assert run["status"] == "completed" and result["success"], result
    assert [(n, d["decision"], d["source"], d["request_id"]) for n, d in perms] == [
        ("PermissionResolved", "allow_always", "plugin_rule", None)
    ]
    assert _command(sc, approved=False)["result"]["status"] == "completed"  # the command honours it too


def test_allow_always_survives_a_restart_and_goes_with_the_plugin_then_trust(sc: Sidecar, home: Path) -> None:
    sc.close()
    again = _start(home / "data")
    try:
        wait_status(again, "trusty", {"ready"}, timeout=30)
        _, result, perms = _run(again, resolve="deny")
        assert result["success"] and [d["source"] for _, d in perms] == ["plugin_rule"], perms

        again.result("plugins/uninstall", {"plugin_id": "trusty"}, timeout=30)
        _install(again, home)
        assert again.result("plugins/trust/get", {"plugin_id": "trusty"})["always_allowed_tools"] == []
        _, result, perms = _run(again, resolve="deny")
        assert not result["success"] and result["error_code"] == "PERMISSION_DENIED"
        assert perms[0][0] == "PermissionRequired"
        _trust_annotations(again)
    finally:
        again.close()


def _trust_annotations(sc: Sidecar) -> None:
    """The user's setting (never the package's): the server's readOnlyHint now makes ``add`` safe."""
    trust = sc.result("plugins/trust/update", {"plugin_id": "trusty", "annotations_trusted": True})
    assert trust["annotations_trusted"] is True
    deadline = time.monotonic() + 30
    while _tools(sc).get("trusty.add", {}).get("riskLevel") != "safe":  # the host restarts, republishes
        assert time.monotonic() < deadline, _tools(sc)
        time.sleep(0.05)
    assert _tools(sc)["trusty.add"]["requiresPermission"] is False
    wait_status(sc, "trusty", {"ready"}, timeout=30)
    run, result, perms = _run(sc, resolve="deny")
    assert result["success"] and perms == []
    calls = [e["data"] for e in events(sc, run["run_id"]) if e["event"] == "ToolCall"]
    assert (calls[0]["risk_level"], calls[0]["risk_rule"]) == ("safe", "trusted_annotations")
    bad = sc.call("plugins/trust/update", {"plugin_id": "nope", "annotations_trusted": True})["error"]
    assert bad["code"] == 404 and bad["data"]["code"] == "PLUGIN_NOT_FOUND"
