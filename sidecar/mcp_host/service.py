"""The MCP bridge (phase-2 §7.1 ``McpBridge``): one :class:`McpHost` per plugin, tools into the agent's registry.

The bridge knows nothing of installation: the plugin service hands it a :class:`HostSpec` (manifest, folder,
environment from settings and secrets) and asks it to start, stop or restart. Tools go into the registry as
``<plugin_id>.<tool_name>``, a plugin's whole set at once (``ToolRegistry.replace_namespace``); status changes
are reported to ``on_status`` (the plugin service turns them into events on the plugin's resource).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskGroup

from sidecar.agent.tools.registry import ToolRegistry
from sidecar.workers.supervisor import ChildSupervisor

from .host import HostSpec, McpHost, host_error
from .models import PluginHostStatus
from .tools import McpTool

logger = logging.getLogger(__name__)

StatusListener = Callable[[PluginHostStatus], Awaitable[None]]


class McpBridge:
    def __init__(
        self,
        registry: ToolRegistry,
        children: ChildSupervisor,
        tg: TaskGroup,
        *,
        grace_s: float = 2.0,
        on_status: StatusListener | None = None,
    ) -> None:
        self._registry = registry
        self._children = children
        self._tg = tg
        self._grace_s = grace_s
        self._hosts: dict[str, McpHost] = {}
        self._restarting: set[str] = set()
        self._pending: dict[str, HostSpec] = {}  # the newest spec a restart was asked with, not applied yet
        self._locks: dict[str, anyio.Lock] = {}
        self.on_status = on_status
        self._closed = False

    def _publish(self, plugin_id: str, tools: list[McpTool]) -> list[str]:
        return self._registry.replace_namespace(plugin_id, list(tools))

    def _unpublish(self, plugin_id: str) -> None:
        self._registry.remove_namespace(plugin_id)

    async def _status_changed(self, host: McpHost) -> None:
        if self.on_status is not None:
            await self.on_status(host.status())

    def host(self, plugin_id: str) -> McpHost | None:
        return self._hosts.get(plugin_id)

    def tool(self, plugin_id: str, name: str) -> McpTool | None:
        tool = self._registry.get(f"{plugin_id}.{name}")
        return tool if isinstance(tool, McpTool) else None

    def status(self, plugin_id: str) -> PluginHostStatus:
        host = self._hosts.get(plugin_id)
        if host is None:
            return PluginHostStatus(
                plugin_id=plugin_id, status="stopped", tools_count=0, started_at=None, last_seen_at=None, error=None
            )
        status = host.status()
        if plugin_id in self._restarting:  # accepted, the old server still stopping: the new one is on its way
            status = status.model_copy(update={"status": "starting", "tools_count": 0, "tools": [], "error": None})
        return status

    def _lock(self, plugin_id: str) -> anyio.Lock:
        return self._locks.setdefault(plugin_id, anyio.Lock())

    async def start(self, spec: HostSpec, *, wait: bool = True) -> PluginHostStatus:
        """Start the plugin's host (stopping a running one first); with ``wait``, until it is ready or failed."""
        async with self._lock(spec.plugin_id):
            settled, host = await self._replace(spec)
        if wait:
            await settled.wait()
        return host.status()

    async def _replace(self, spec: HostSpec) -> tuple[anyio.Event, McpHost]:
        if self._closed:
            raise host_error("PLUGIN_HOST_UNAVAILABLE", "the sidecar is shutting down", 503)
        old = self._hosts.get(spec.plugin_id)
        restarts = 0
        if old is not None:
            restarts = old.restarts + 1
            await old.stop()
        host = McpHost(
            spec,
            publish=self._publish,
            unpublish=self._unpublish,
            on_status=self._status_changed,
            adopt=self._children.adopt,
            forget=self._children.forget,
            grace_s=self._grace_s,
        )
        host.restarts = restarts
        self._hosts[spec.plugin_id] = host
        if spec.plugin_id not in self._pending:
            self._restarting.discard(spec.plugin_id)
        return host.start(self._tg), host

    def restart_soon(self, spec: HostSpec) -> None:
        """``plugins/host/restart``: answered at once; old tools go first, the new set only after discovery."""
        if self._closed:
            raise host_error("PLUGIN_HOST_UNAVAILABLE", "the sidecar is shutting down", 503)
        self._registry.remove_namespace(spec.plugin_id)
        self._restarting.add(spec.plugin_id)
        self._pending[spec.plugin_id] = spec  # two quick changes (a secret, then another): the newest one wins
        self._tg.start_soon(self._restart, spec.plugin_id)

    async def _restart(self, plugin_id: str) -> None:
        try:
            async with self._lock(plugin_id):
                spec = self._pending.pop(plugin_id, None)
                if spec is None:  # stopped (uninstalled) meanwhile, or an earlier task applied the newest spec
                    return
                settled, _ = await self._replace(spec)
            await settled.wait()
        except Exception:
            logger.exception("restart of plugin %s failed", plugin_id)
        finally:
            if plugin_id not in self._pending:
                self._restarting.discard(plugin_id)

    async def stop(self, plugin_id: str) -> None:
        self._restarting.discard(plugin_id)
        self._pending.pop(plugin_id, None)
        async with self._lock(plugin_id):
            host = self._hosts.pop(plugin_id, None)
            if host is not None:
                await host.stop()
            self._registry.remove_namespace(plugin_id)

    async def shutdown(self) -> None:
        """Stop every host at once (each: stdin closed, grace, SIGTERM, SIGKILL to its process group)."""
        self._closed = True
        hosts = list(self._hosts)
        if hosts:
            logger.info("stopping %d plugin host(s)", len(hosts))
        async with anyio.create_task_group() as tg:
            for plugin_id in hosts:
                tg.start_soon(self.stop, plugin_id)
