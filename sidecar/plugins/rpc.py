"""``plugins/*`` and ``plugin-contributions/commands/*`` (phase-2 §7, ARCHITECTURE.md §6)."""

from __future__ import annotations

from typing import Any

from ..core.common import CursorPage, EmptyParams
from ..ipc.context import RequestContext
from ..ipc.router import Method
from ..trace.models import StoredEvent
from .models import (
    CommandExecuteParams,
    CommandExecuteResult,
    CommandListParams,
    CommandListResult,
    HostRestartResult,
    PluginEventsParams,
    PluginHostStatus,
    PluginIdParams,
    PluginInfo,
    PluginInstallParams,
    PluginListResult,
    PluginSettings,
    PluginTrust,
    PluginTrustUpdateParams,
    PluginUninstallResult,
    SecretDeleteParams,
    SecretSetParams,
    SecretStateResult,
    SettingsUpdateParams,
)
from .service import PluginService


def methods(plugins: PluginService) -> list[Method[Any, Any]]:
    async def install(ctx: RequestContext, p: PluginInstallParams) -> PluginInfo:
        return await plugins.install(p.package_path, p.package_id, p.start)

    async def list_(ctx: RequestContext, p: EmptyParams) -> PluginListResult:
        return PluginListResult(items=await plugins.list())

    async def get(ctx: RequestContext, p: PluginIdParams) -> PluginInfo:
        return await plugins.get(p.plugin_id)

    async def uninstall(ctx: RequestContext, p: PluginIdParams) -> PluginUninstallResult:
        await plugins.uninstall(p.plugin_id)
        return PluginUninstallResult(plugin_id=p.plugin_id)

    async def host_get(ctx: RequestContext, p: PluginIdParams) -> PluginHostStatus:
        return await plugins.host_status(p.plugin_id)

    async def events(ctx: RequestContext, p: PluginEventsParams) -> CursorPage[StoredEvent]:
        return await plugins.events(p.plugin_id, p.after_sequence, p.limit)

    async def host_restart(ctx: RequestContext, p: PluginIdParams) -> HostRestartResult:
        await plugins.restart(p.plugin_id)
        return HostRestartResult(plugin_id=p.plugin_id, status="starting")

    async def settings_get(ctx: RequestContext, p: PluginIdParams) -> PluginSettings:
        return await plugins.settings(p.plugin_id)

    async def settings_update(ctx: RequestContext, p: SettingsUpdateParams) -> PluginSettings:
        return await plugins.update_settings(p.plugin_id, p.schema_version, p.values)

    async def secret_set(ctx: RequestContext, p: SecretSetParams) -> SecretStateResult:
        await plugins.set_secret(p.plugin_id, p.key, p.secret)
        return SecretStateResult(plugin_id=p.plugin_id, key=p.key, configured=True)

    async def secret_delete(ctx: RequestContext, p: SecretDeleteParams) -> SecretStateResult:
        await plugins.delete_secret(p.plugin_id, p.key)
        return SecretStateResult(plugin_id=p.plugin_id, key=p.key, configured=False)

    async def commands_list(ctx: RequestContext, p: CommandListParams) -> CommandListResult:
        return CommandListResult(items=await plugins.commands(p.location, p.when))

    async def trust_get(ctx: RequestContext, p: PluginIdParams) -> PluginTrust:
        return await plugins.trust(p.plugin_id)

    async def trust_update(ctx: RequestContext, p: PluginTrustUpdateParams) -> PluginTrust:
        return await plugins.update_trust(p.plugin_id, p.annotations_trusted, p.revoke_tools)

    async def commands_execute(ctx: RequestContext, p: CommandExecuteParams) -> CommandExecuteResult:
        return await plugins.execute(p.command_id, p.arguments, p.context, approved=p.approved)

    return [
        Method(
            "plugins/install",
            PluginInstallParams,
            PluginInfo,
            install,
            summary="Install a plugin (package_path: development only; package_id: a package the host handed over).",
        ),
        Method("plugins/list", EmptyParams, PluginListResult, list_, summary="Installed plugins with host status."),
        Method("plugins/get", PluginIdParams, PluginInfo, get, summary="One installed plugin."),
        Method(
            "plugins/uninstall",
            PluginIdParams,
            PluginUninstallResult,
            uninstall,
            summary="Stop the plugin's host, remove its tools, settings, secrets and files.",
        ),
        Method("plugins/host/get", PluginIdParams, PluginHostStatus, host_get, summary="MCP host health (§7.2)."),
        Method(
            "plugins/events",
            PluginEventsParams,
            CursorPage[StoredEvent],
            events,
            summary="The plugin's host status events (HostStatusChanged), oldest first (pull; push: events/subscribe).",
        ),
        Method(
            "plugins/host/restart",
            PluginIdParams,
            HostRestartResult,
            host_restart,
            summary="Restart the host (202-style): old tools go at once, new ones after full discovery.",
        ),
        Method("plugins/settings/get", PluginIdParams, PluginSettings, settings_get, summary="Settings schema (§7.5)."),
        Method(
            "plugins/settings/update",
            SettingsUpdateParams,
            PluginSettings,
            settings_update,
            summary="Update non-secret settings (§7.6); a stale schema_version is a conflict.",
        ),
        Method(
            "plugins/settings/secret/set",
            SecretSetParams,
            SecretStateResult,
            secret_set,
            summary="Store a secret setting, encrypted; never returned. Restarts a running host.",
        ),
        Method(
            "plugins/settings/secret/delete",
            SecretDeleteParams,
            SecretStateResult,
            secret_delete,
            summary="Remove a secret setting.",
        ),
        Method(
            "plugins/trust/get",
            PluginIdParams,
            PluginTrust,
            trust_get,
            summary="The user's trust decisions for a plugin: its annotations, its tools allowed always.",
        ),
        Method(
            "plugins/trust/update",
            PluginTrustUpdateParams,
            PluginTrust,
            trust_update,
            summary="Trust (or not) the plugin's tool annotations; revoke tools' allow-always. Kept until uninstall.",
        ),
        Method(
            "plugin-contributions/commands/list",
            CommandListParams,
            CommandListResult,
            commands_list,
            summary="Commands plugins contribute (§7.3).",
        ),
        Method(
            "plugin-contributions/commands/execute",
            CommandExecuteParams,
            CommandExecuteResult,
            commands_execute,
            summary="Run a command (§7.4): context trimmed to what it declares; a whitelisted effect.",
        ),
    ]
