"""The user's own trust decisions about plugin tools, stored (issue 33 §1).

* **Allow always** for one tool of one plugin: given on a permission answer (``allow_always``), remembered across
  restarts, so that tool no longer asks (agent runs, plugin commands); revoked one by one or with the plugin.
* **Trusted annotations** for one plugin: the user (never the package) lets the server's own ``readOnlyHint`` /
  ``destructiveHint`` set its tools' risk (see :func:`~sidecar.mcp_host.tools.tool_risk`).

Both are keyed by the plugin id and forgotten when the plugin is uninstalled. Lookups are synchronous (a cache of
the table, loaded at start; every change is written to SQLite first): the agent asks before each tool call.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from sidecar.core.common import now_iso
from sidecar.storage.sqlite import Database

_MIGRATIONS = [
    """
    CREATE TABLE plugin_tool_rules (
        plugin_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        decision TEXT NOT NULL,
        decided_at TEXT NOT NULL,
        PRIMARY KEY (plugin_id, tool_name)
    );
    CREATE TABLE plugin_annotation_trust (
        plugin_id TEXT PRIMARY KEY,
        trusted_at TEXT NOT NULL
    );
    """
]


def plugin_tool_key(tool: Any) -> tuple[str, str] | None:
    """``(plugin_id, MCP tool name)`` of a plugin's tool (an :class:`~sidecar.mcp_host.tools.McpTool`), else None."""
    plugin_id, name = getattr(tool, "plugin_id", None), getattr(tool, "mcp_name", None)
    return (plugin_id, name) if isinstance(plugin_id, str) and isinstance(name, str) else None


class PluginToolRules:
    """The stored decisions; implements the agent's ``StandingRules`` (``allows`` / ``allow_always``)."""

    source = "plugin_rule"
    """How the trace names a decision these rules made (``PermissionResolved.source``)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._allowed: set[tuple[str, str]] = set()
        self._trusted: set[str] = set()
        self._started = False

    async def start(self) -> None:
        """Migrate and load (once; later calls do nothing)."""
        if self._started:
            return
        self._started = True
        await self._db.migrate("plugin_rules", _MIGRATIONS)

        def load(conn: sqlite3.Connection) -> tuple[list[Any], list[Any]]:
            rules = conn.execute("SELECT plugin_id, tool_name FROM plugin_tool_rules WHERE decision = 'allow'")
            trusted = conn.execute("SELECT plugin_id FROM plugin_annotation_trust")
            return rules.fetchall(), trusted.fetchall()

        rules, trusted = await self._db.read(load)
        self._allowed = {(r[0], r[1]) for r in rules}
        self._trusted = {r[0] for r in trusted}

    # --- allow always ------------------------------------------------------------------------------------------

    def allows(self, tool: Any) -> bool:
        key = plugin_tool_key(tool)
        return key is not None and key in self._allowed

    async def allow_always(self, tool: Any) -> bool:
        """Remember "allow always" for ``tool``; False (nothing stored) when it is not a plugin's tool."""
        key = plugin_tool_key(tool)
        if key is None:
            return False
        await self._db.run(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO plugin_tool_rules (plugin_id, tool_name, decision, decided_at) "
                "VALUES (?, ?, 'allow', ?)",
                (*key, now_iso()),
            )
        )
        self._allowed.add(key)
        return True

    def allowed_tools(self, plugin_id: str) -> list[str]:
        return sorted(name for pid, name in self._allowed if pid == plugin_id)

    async def revoke(self, plugin_id: str, tools: list[str]) -> None:
        def drop(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "DELETE FROM plugin_tool_rules WHERE plugin_id = ? AND tool_name = ?", [(plugin_id, t) for t in tools]
            )

        await self._db.run(drop)
        self._allowed -= {(plugin_id, t) for t in tools}

    # --- annotations -------------------------------------------------------------------------------------------

    def annotations_trusted(self, plugin_id: str) -> bool:
        return plugin_id in self._trusted

    async def set_annotations_trusted(self, plugin_id: str, trusted: bool) -> None:
        def save(conn: sqlite3.Connection) -> None:
            if trusted:
                conn.execute(
                    "INSERT OR REPLACE INTO plugin_annotation_trust (plugin_id, trusted_at) VALUES (?, ?)",
                    (plugin_id, now_iso()),
                )
            else:
                conn.execute("DELETE FROM plugin_annotation_trust WHERE plugin_id = ?", (plugin_id,))

        await self._db.run(save)
        (self._trusted.add if trusted else self._trusted.discard)(plugin_id)

    # --- uninstall ---------------------------------------------------------------------------------------------

    def forget_in(self, conn: sqlite3.Connection, plugin_id: str) -> None:
        """Delete the plugin's decisions inside the caller's transaction (the uninstall's); then :meth:`forgotten`."""
        conn.execute("DELETE FROM plugin_tool_rules WHERE plugin_id = ?", (plugin_id,))
        conn.execute("DELETE FROM plugin_annotation_trust WHERE plugin_id = ?", (plugin_id,))

    def forgotten(self, plugin_id: str) -> None:
        self._allowed = {key for key in self._allowed if key[0] != plugin_id}
        self._trusted.discard(plugin_id)
