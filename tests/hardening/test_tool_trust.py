"""Issue 33 §1: an MCP server's annotations are hints, not trust; "allow always" is the user's stored decision.

Unit level (the e2e side: tests/e2e/test_plugins_trust_e2e.py): the risk table, and the stored rules over a real
SQLite file (a second :class:`PluginToolRules` on the same file is a restart).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mcp_types import ToolAnnotations

from sidecar.agent.permissions import PermissionBroker
from sidecar.benchmarks.agent_run import BenchmarkBroker
from sidecar.ir import MetonaRiskLevel
from sidecar.mcp_host.rules import PluginToolRules
from sidecar.mcp_host.tools import tool_risk
from sidecar.storage.sqlite import Database

READ_ONLY = ToolAnnotations(read_only_hint=True)
NOT_DESTRUCTIVE = ToolAnnotations(destructive_hint=False)
DESTRUCTIVE = ToolAnnotations(destructive_hint=True)


def _tool(name: str, annotations: ToolAnnotations | None) -> Any:
    return SimpleNamespace(name=name, annotations=annotations)


@pytest.mark.parametrize(
    ("annotations", "overrides", "trusted", "expected"),
    [
        (READ_ONLY, {}, False, ("medium", "default")),  # delete_everything "read-only": still asks
        (NOT_DESTRUCTIVE, {}, False, ("medium", "default")),
        (None, {}, False, ("medium", "default")),
        (DESTRUCTIVE, {}, False, ("high", "destructive_hint")),  # more caution is always honoured
        (READ_ONLY, {"delete_everything": "critical"}, True, ("critical", "manifest")),  # the manifest wins
        (READ_ONLY, {"delete_everything": "safe"}, False, ("safe", "manifest")),
        (READ_ONLY, {}, True, ("safe", "trusted_annotations")),  # the user trusts this plugin's hints
        (NOT_DESTRUCTIVE, {}, True, ("low", "trusted_annotations")),
        (DESTRUCTIVE, {}, True, ("high", "trusted_annotations")),
        (None, {}, True, ("medium", "default")),
    ],
)
def test_annotations_are_hints_not_trust(
    annotations: ToolAnnotations | None, overrides: dict[str, str], trusted: bool, expected: tuple[str, str]
) -> None:
    risk, rule = tool_risk(_tool("delete_everything", annotations), overrides, annotations_trusted=trusted)
    assert (MetonaRiskLevel(risk).value, rule) == expected


def _plugin_tool(plugin_id: str, name: str) -> Any:
    return SimpleNamespace(plugin_id=plugin_id, mcp_name=name)


@pytest.mark.anyio
async def test_allow_always_is_stored_per_plugin_and_tool_and_forgotten_with_the_plugin(tmp_path: Path) -> None:
    db = await Database.open(tmp_path)
    try:
        rules = PluginToolRules(db)
        await rules.start()
        broker = PermissionBroker(rules)
        wipe, other = _plugin_tool("p1", "wipe"), _plugin_tool("p2", "wipe")
        first = broker.open("r1", "s1", tool_call_id="c1", tool_name="p1.wipe", permission="plugin.p1.tools",
                            risk_level="medium", tool=wipe)  # fmt: skip
        waiting = broker.open("r2", "s2", tool_call_id="c2", tool_name="p1.wipe", permission="plugin.p1.tools",
                              risk_level="medium", tool=_plugin_tool("p1", "wipe"))  # fmt: skip
        assert await broker.remember(broker.resolve("r1", first.request_id, "allow_always"))
        assert (waiting.decision, waiting.source) == ("allow_always", "plugin_rule")  # another session, same tool
        assert rules.allows(wipe) and not rules.allows(other) and not rules.allows(_plugin_tool("p1", "add"))
        builtin = broker.open("r3", "s3", tool_call_id="c3", tool_name="write_file", permission="fs",
                              risk_level="high", tool=SimpleNamespace(name="write_file"))  # fmt: skip
        assert not await broker.remember(broker.resolve("r3", builtin.request_id, "allow_always"))  # session only
        await rules.set_annotations_trusted("p2", True)

        restarted = PluginToolRules(db)
        await restarted.start()
        assert restarted.allows(wipe) and restarted.allowed_tools("p1") == ["wipe"]
        assert restarted.annotations_trusted("p2") and not restarted.annotations_trusted("p1")

        await db.run(lambda conn: restarted.forget_in(conn, "p1"))
        restarted.forgotten("p1")
        assert not restarted.allows(wipe) and restarted.annotations_trusted("p2")
        again = PluginToolRules(db)
        await again.start()
        assert again.allowed_tools("p1") == []
        await again.revoke("p2", ["x"])
    finally:
        await db.close()


def test_a_benchmark_never_uses_the_stored_rules() -> None:
    """A benchmark's broker has no standing rules: a self-declared read-only plugin tool (medium) not listed by
    the case is denied, and one listed gets the benchmark's allow_once, never a stored allow-always."""
    broker = BenchmarkBroker(["p1.add"])
    assert broker.rules is None
    listed = broker.open("r", "b", tool_call_id="c", tool_name="p1.add", permission="plugin.p1.tools",
                         risk_level="medium", tool=_plugin_tool("p1", "add"))  # fmt: skip
    unlisted = broker.open("r", "b", tool_call_id="d", tool_name="p1.rm", permission="plugin.p1.tools",
                           risk_level="medium", tool=_plugin_tool("p1", "rm"))  # fmt: skip
    assert (listed.decision, unlisted.decision) == ("allow_once", "deny")
