"""Issue 21 canary sweep: one secret of each kind (a provider key in the sidecar's environment and in a provider's
config, a plugin secret its server prints on stderr and returns as a tool result, the master key) — none of them
appears on stdout, on stderr, in any file under the data dir, or in any child's environment except the plugin
server it belongs to (§7.6)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.support import make_plugin, run_agent, wait_status
from tests.support.render_check import req
from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e

PROVIDER_ENV = "canary-ProviderEnv-3f9a1c77"
PROVIDER_KEY = "canary-ProviderKey-8b2e4d10"
PLUGIN_SECRET = "canary-PluginSecret-5c7f2a93"
MASTER = base64.b64encode(b"canary-master-key-32-bytes-long!").decode()  # 32 bytes
SECRET_FIELD = {"key": "api_key", "label": "Key", "type": "secret", "env": "FIXTURE_API_KEY"}
SETTINGS = {"schema_version": 1, "fields": [SECRET_FIELD]}
NAME_PARAM = {"type": "object", "properties": {"name": {"type": "string"}}}
COMMANDS = [{"command_id": "leak", "title": "Leak", "tool": "leak", "locations": ["command_palette"],
             "parameters": NAME_PARAM, "effect": "notification"}]  # fmt: skip


@pytest.fixture(scope="module")
def sc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    data = tmp_path_factory.mktemp("canary") / "data"
    data.mkdir()
    env = {"METONA_SECRET_KEY": MASTER, "OPENAI_API_KEY": PROVIDER_ENV}
    sidecar = Sidecar(data, args=["--development"], env=env)
    try:
        sidecar.components = sidecar.initialize()["capabilities"]["components"]  # type: ignore[attr-defined]
        yield sidecar
    finally:
        sidecar.close()


def _descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        kids = [p for p, parent in parents.items() if parent == pid]
        found += kids
        frontier += kids
    return found


def _environ(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _install(sc: Sidecar, root: Path, plugin_id: str, mode: str) -> dict[str, Any]:
    folder = make_plugin(root, plugin_id, mode, contributes={"settings": SETTINGS, "commands": COMMANDS})
    return sc.call("plugins/install", {"package_path": str(folder), "start": False}, timeout=40)


def _set_secret(sc: Sidecar, plugin_id: str) -> None:
    params = {"plugin_id": plugin_id, "key": "api_key", "secret": PLUGIN_SECRET}
    sc.result("plugins/settings/secret/set", params)


def test_no_secret_leaves_its_place(sc: Sidecar, tmp_path: Path) -> None:
    data = Path(sc.stderr_path).parent / "data"
    created = sc.result("providers/create", {"preset": "openai", "provider_id": "keyed",
                                            "base_url": "http://127.0.0.1:9/v1", "api_key": PROVIDER_KEY})  # fmt: skip
    assert created["api_key_configured"] is True

    # a plugin whose server prints its key on stderr and returns it from a tool
    assert "result" in _install(sc, tmp_path, "leaky", "good")
    _set_secret(sc, "leaky")
    sc.result("plugins/host/restart", {"plugin_id": "leaky"})
    wait_status(sc, "leaky", {"ready"})
    leak = {"command_id": "leaky.leak", "arguments": {"name": "FIXTURE_API_KEY"}, "approved": True}
    ran = sc.call("plugin-contributions/commands/execute", leak, timeout=20)
    assert "result" in ran, ran
    assert ran["result"]["effect"]["payload"]["message"] == "[redacted]", ran
    deadline = time.monotonic() + 10
    while "invalid API key" not in (host := sc.result("plugins/host/get", {"plugin_id": "leaky"}))["stderr_tail"]:
        assert time.monotonic() < deadline, host
        time.sleep(0.05)
    assert "invalid API key [redacted]" in host["stderr_tail"]
    run, results = run_agent(sc, [("c1", "leaky.leak", {"name": "FIXTURE_API_KEY"})])
    assert run["status"] == "completed" and results["c1"]["success"], (run, results)

    # a plugin whose server prints its key and gives up: MCP_INITIALIZE_FAILED, persisted in HostStatusChanged
    assert "result" in _install(sc, tmp_path, "quitter", "leak-at-start")
    _set_secret(sc, "quitter")
    sc.result("plugins/host/restart", {"plugin_id": "quitter"})
    host = wait_status(sc, "quitter", {"error"})
    assert host["error"]["code"] == "MCP_INITIALIZE_FAILED", host
    assert "invalid API key [redacted]" in host["error"]["details"]["stderr_tail"]
    events = sc.result("plugins/events", {"plugin_id": "quitter"})["items"]
    failed = [e for e in events if (e["data"].get("error") or {}).get("code") == "MCP_INITIALIZE_FAILED"]
    assert failed and "invalid API key [redacted]" in failed[-1]["data"]["error"]["details"]["stderr_tail"]

    if sc.components["mermaid"]["available"]:  # type: ignore[attr-defined]  # Playwright's driver and Chromium
        sc.result("render/static", req("mermaid", "flowchart TD\n  A --> B"), timeout=90)

    # a worker kind too (issue 33: every spawn is scrubbed by default): the export worker stays up after its export
    source = {"type": "markdown", "markdown": "# Canary\n\ntext"}
    job = sc.result("exports/create", {"source": source, "format": "html"})
    deadline = time.monotonic() + 60
    while sc.result("exports/get", {"job_id": job["job_id"]})["status"] != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.05)

    # every child: no provider key, no master key; the plugin secret only in its own server
    children = _descendants(sc.proc.pid)
    assert any(b"export" in _cmdline(pid) for pid in children), "the export worker was not found"
    assert children
    servers = {sc.result("plugins/host/get", {"plugin_id": "leaky"})["pid"]}
    for pid in children:
        env = _environ(pid)
        assert PROVIDER_ENV not in env and PROVIDER_KEY not in env and MASTER not in env, pid
        if pid not in servers:
            assert PLUGIN_SECRET not in env, pid
    assert any(PLUGIN_SECRET in _environ(pid) for pid in servers), "the plugin's own server has its secret"

    sc.close()
    everything = b"".join(sc.raw_lines).decode("utf-8", "replace") + "\n" + sc.stderr_path.read_text(errors="replace")
    for path in data.rglob("*"):
        if path.is_file():
            everything += "\n" + path.read_bytes().decode("utf-8", "replace")
    for secret in (PROVIDER_ENV, PROVIDER_KEY, PLUGIN_SECRET, MASTER):
        assert secret not in everything, secret
    assert json.dumps(PLUGIN_SECRET)[1:-1] not in everything
