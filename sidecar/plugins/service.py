"""Installed plugins (phase-2 §7): install / list / get / uninstall, host control, settings, secrets, commands.

A plugin lives in ``<data-dir>/plugins/<id>/<version>/`` (a copy of its package) and in the ``plugins`` table;
its non-secret settings in ``plugin_settings``; its secrets in the encrypted secret store as
``plugin:<id>:<key>`` (never returned, logged or traced; handed to the server through its environment at
start). Host status changes are events (``HostStatusChanged``) on the resource named by the plugin id.
"""

from __future__ import annotations

import builtins
import json
import logging
import re
import shutil
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from sidecar import __version__
from sidecar.core.common import CursorPage, now_iso
from sidecar.core.errors import BadRequestError, ConflictError, ForbiddenError, NotFoundError, SidecarError
from sidecar.core.redact import cut_credentials, redact_head, sanitize
from sidecar.mcp_host.host import HostSpec, host_error
from sidecar.mcp_host.rules import PluginToolRules
from sidecar.mcp_host.service import McpBridge
from sidecar.storage.secrets import SecretStore
from sidecar.storage.sqlite import Database
from sidecar.trace.eventlog import EventLog
from sidecar.trace.models import StoredEvent

from .models import (
    CONTEXT_KEYS,
    CommandContribution,
    CommandEffect,
    CommandExecuteResult,
    PluginCommand,
    PluginHostStatus,
    PluginInfo,
    PluginManifest,
    PluginSettings,
    PluginTrust,
    SecretConfigured,
    SettingsField,
    field_value_problem,
)
from .package import parse_manifest, read_manifest, stage

logger = logging.getLogger(__name__)

_MIGRATIONS = [
    """
    CREATE TABLE plugins (
        plugin_id TEXT PRIMARY KEY,
        version TEXT NOT NULL,
        manifest TEXT NOT NULL,
        enabled INTEGER NOT NULL DEFAULT 1,
        installed_at TEXT NOT NULL
    );
    CREATE TABLE plugin_settings (
        plugin_id TEXT PRIMARY KEY,
        schema_version INTEGER NOT NULL,
        "values" TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    """
]
PACKAGE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
EFFECTS = ("none", "notification", "navigate", "refresh", "job")
MAX_CONTEXT_CHARS = 256 * 1024


def _version_tuple(v: str) -> tuple[int, ...]:
    """``1.2.3-beta`` → (1, 2, 3); a part that is not a number counts as 0 (a host's odd version string)."""
    core = re.split(r"[-+]", v.strip(), maxsplit=1)[0]
    return tuple(int(m.group()) if (m := re.match(r"\d+", part)) else 0 for part in core.split("."))


class PluginService:
    def __init__(
        self,
        db: Database,
        events: EventLog,
        secrets: SecretStore,
        bridge: McpBridge,
        data_dir: Path,
        *,
        development: bool,
        app_version: str = __version__,
        rules: PluginToolRules | None = None,
    ) -> None:
        self._db = db
        self._rules = rules if rules is not None else PluginToolRules(db)
        self._events = events
        self._secrets = secrets
        self._bridge = bridge
        self._root = data_dir / "plugins"
        self._development = development
        self._app_version = app_version or __version__
        self._lock = anyio.Lock()
        bridge.on_status = self._status_event

    async def migrate(self) -> None:
        await self._db.migrate("plugins", _MIGRATIONS)
        await self._rules.start()

    async def start(self) -> None:
        """Start the hosts of the installed plugins (in the background: ``initialize`` must not wait on them)."""
        installed = await self._installed()
        await anyio.to_thread.run_sync(self._clear_leftovers, {(i, m.version) for i, m in installed})
        for plugin_id, manifest in installed:
            try:
                await self._bridge.start(await self._spec(plugin_id, manifest), wait=False)
            except SidecarError as exc:
                logger.warning("plugin %s: host not started: %s", plugin_id, exc.message)

    def _clear_leftovers(self, installed: set[tuple[str, str]]) -> None:
        """What a crash (kill -9) during an install or upgrade can leave: staged copies, and a ``<id>/<version>``
        folder moved in before its row was written (or an old version's, not yet removed). ``.incoming`` (packages
        the host handed over) stays."""
        shutil.rmtree(self._root / ".staging", ignore_errors=True)
        ids = {plugin_id for plugin_id, _ in installed}
        for folder in self._root.iterdir() if self._root.is_dir() else []:
            if not folder.is_dir() or folder.name.startswith("."):
                continue
            if folder.name not in ids:
                shutil.rmtree(folder, ignore_errors=True)
                continue
            for version in folder.iterdir():
                if version.is_dir() and (folder.name, version.name) not in installed:
                    shutil.rmtree(version, ignore_errors=True)

    # --- records -----------------------------------------------------------------------------------------------

    async def _installed(self) -> list[tuple[str, PluginManifest]]:
        rows = await self._db.read(
            lambda c: c.execute("SELECT plugin_id, manifest FROM plugins ORDER BY plugin_id").fetchall()
        )
        return [(r[0], parse_manifest(json.loads(r[1]))) for r in rows]

    async def _row(self, plugin_id: str) -> tuple[PluginManifest, str, bool]:
        row = await self._db.read(
            lambda c: c.execute(
                "SELECT manifest, installed_at, enabled FROM plugins WHERE plugin_id = ?", (plugin_id,)
            ).fetchone()
        )
        if row is None:
            raise NotFoundError("Plugin was not found.", code="PLUGIN_NOT_FOUND", details={"plugin_id": plugin_id})
        return parse_manifest(json.loads(row[0])), row[1], bool(row[2])

    async def manifest(self, plugin_id: str) -> PluginManifest:
        return (await self._row(plugin_id))[0]

    def _dir(self, manifest: PluginManifest) -> Path:
        return self._root / manifest.id / manifest.version

    def _info(self, manifest: PluginManifest, installed_at: str, enabled: bool) -> PluginInfo:
        return PluginInfo(
            plugin_id=manifest.id,
            name=manifest.name,
            version=manifest.version,
            description=manifest.description,
            enabled=enabled,
            installed_at=installed_at,
            permissions=list(manifest.permissions),
            commands_count=len(manifest.contributes.commands),
            host=self._bridge.status(manifest.id),
        )

    async def get(self, plugin_id: str) -> PluginInfo:
        return self._info(*await self._row(plugin_id))

    async def list(self) -> list[PluginInfo]:
        rows = await self._db.read(
            lambda c: c.execute("SELECT manifest, installed_at, enabled FROM plugins ORDER BY plugin_id").fetchall()
        )
        return [self._info(parse_manifest(json.loads(r[0])), r[1], bool(r[2])) for r in rows]

    # --- install / uninstall -----------------------------------------------------------------------------------

    async def install(self, package_path: str | None, package_id: str | None, start: bool = True) -> PluginInfo:
        if package_path is not None:
            if not self._development:
                raise ForbiddenError(
                    "package_path is accepted only when the sidecar runs in development mode "
                    "(--development or METONA_DEVELOPMENT=1); production installs take a package_id",
                    code="PLUGIN_INSTALL_PATH_FORBIDDEN",
                )
            source = Path(package_path)
            if not source.is_absolute():
                raise BadRequestError("package_path must be absolute", code="PLUGIN_PACKAGE_INVALID")
        else:
            assert package_id is not None
            if not PACKAGE_ID.match(package_id):
                raise BadRequestError("invalid package_id", code="PLUGIN_PACKAGE_INVALID")
            source = self._root / ".incoming" / package_id
            if not source.exists():
                raise NotFoundError(
                    "No package with this id was handed over by the host.",
                    code="PLUGIN_PACKAGE_NOT_FOUND",
                    details={"package_id": package_id},
                )
        async with self._lock:
            staging = self._root / ".staging" / uuid.uuid4().hex
            try:
                root = await anyio.to_thread.run_sync(stage, source, staging)
                manifest = await anyio.to_thread.run_sync(read_manifest, root)
                self._check_compatible(manifest)
                target = self._dir(manifest)
                existing = await self._db.read(
                    lambda c: c.execute("SELECT version FROM plugins WHERE plugin_id = ?", (manifest.id,)).fetchone()
                )
                if existing is not None and existing[0] == manifest.version:
                    raise ConflictError(
                        f"plugin {manifest.id} {manifest.version} is already installed",
                        code="PLUGIN_ALREADY_INSTALLED",
                        details={"plugin_id": manifest.id, "version": manifest.version},
                    )
                if existing is not None:  # another version: an upgrade replaces it
                    await self._bridge.stop(manifest.id)
                await anyio.to_thread.run_sync(_move_into, root, target)
            finally:
                await anyio.to_thread.run_sync(lambda: shutil.rmtree(staging, ignore_errors=True))
            installed_at = now_iso()
            data = manifest.model_dump_json()

            def save(conn: sqlite3.Connection) -> None:
                conn.execute(
                    "INSERT INTO plugins (plugin_id, version, manifest, enabled, installed_at) VALUES (?, ?, ?, 1, ?) "
                    "ON CONFLICT(plugin_id) DO UPDATE SET version = excluded.version, manifest = excluded.manifest, "
                    "installed_at = excluded.installed_at",
                    (manifest.id, manifest.version, data, installed_at),
                )

            await self._db.run(save)
            if existing is not None and existing[0] != manifest.version:
                old = self._root / manifest.id / existing[0]
                await anyio.to_thread.run_sync(lambda: shutil.rmtree(old, ignore_errors=True))
            await self._events.create_resource(manifest.id, "plugin", exist_ok=True)
            if package_id is not None:
                await anyio.to_thread.run_sync(_remove, source)
        if start:
            await self._bridge.start(await self._spec(manifest.id, manifest), wait=True)
        return self._info(manifest, installed_at, True)

    def _check_compatible(self, manifest: PluginManifest) -> None:
        wanted = manifest.min_app_version
        if wanted and _version_tuple(wanted) > _version_tuple(self._app_version):
            raise ConflictError(
                f"the plugin needs version {wanted} or later (this is {self._app_version})",
                code="PLUGIN_INCOMPATIBLE",
                details={"min_app_version": wanted, "app_version": self._app_version},
            )

    async def uninstall(self, plugin_id: str) -> None:
        async with self._lock:
            manifest = await self.manifest(plugin_id)
            await self._bridge.stop(plugin_id)
            names = await self._secrets.names(f"plugin:{plugin_id}:")

            def drop(conn: sqlite3.Connection) -> None:
                conn.execute("DELETE FROM plugins WHERE plugin_id = ?", (plugin_id,))
                conn.execute("DELETE FROM plugin_settings WHERE plugin_id = ?", (plugin_id,))
                for name in names:
                    SecretStore.delete_in(conn, name)
                self._rules.forget_in(conn, plugin_id)  # "allow always" and trusted annotations go with it

            await self._db.run(drop)
            self._rules.forgotten(plugin_id)
            folder = self._root / manifest.id
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(folder, ignore_errors=True))

    # --- host --------------------------------------------------------------------------------------------------

    async def host_status(self, plugin_id: str) -> PluginHostStatus:
        await self._row(plugin_id)
        return self._bridge.status(plugin_id)

    async def events(self, plugin_id: str, after_sequence: int, limit: int) -> CursorPage[StoredEvent]:
        await self._row(plugin_id)
        await self._events.create_resource(plugin_id, "plugin", exist_ok=True)
        return await self._events.read(plugin_id, after_sequence, limit)

    async def restart(self, plugin_id: str) -> None:
        manifest = await self.manifest(plugin_id)
        self._bridge.restart_soon(await self._spec(plugin_id, manifest))

    async def _spec(self, plugin_id: str, manifest: PluginManifest) -> HostSpec:
        env = await self._server_env(plugin_id, manifest)
        secret_vars = {
            f.env or f"METONA_{f.key.upper()}" for f in manifest.contributes.settings.fields if f.type == "secret"
        }
        secrets = tuple(v for k, v in env.items() if k in secret_vars)
        return HostSpec(
            plugin_id,
            manifest,
            self._dir(manifest),
            env=env,
            secrets=secrets,
            annotations_trusted=self._rules.annotations_trusted(plugin_id),
        )

    # --- trust (the user's decisions) --------------------------------------------------------------------------

    async def trust(self, plugin_id: str) -> PluginTrust:
        await self._row(plugin_id)
        return PluginTrust(
            plugin_id=plugin_id,
            annotations_trusted=self._rules.annotations_trusted(plugin_id),
            always_allowed_tools=self._rules.allowed_tools(plugin_id),
        )

    async def update_trust(
        self, plugin_id: str, annotations_trusted: bool | None, revoke_tools: builtins.list[str]
    ) -> PluginTrust:
        async with self._lock:
            manifest = await self.manifest(plugin_id)
            if revoke_tools:
                await self._rules.revoke(plugin_id, revoke_tools)
            if annotations_trusted is not None and annotations_trusted != self._rules.annotations_trusted(plugin_id):
                await self._rules.set_annotations_trusted(plugin_id, annotations_trusted)
                await self._restart_if_started(plugin_id, manifest)  # its tools are republished with the new risks
        return await self.trust(plugin_id)

    async def _server_env(self, plugin_id: str, manifest: PluginManifest) -> dict[str, str]:
        env: dict[str, str] = {}
        values = await self._values(plugin_id, manifest)
        for f in manifest.contributes.settings.fields:
            name = f.env or f"METONA_{f.key.upper()}"
            if f.type == "secret":
                secret = await self._secrets.get(_secret_name(plugin_id, f.key))
                if secret is not None:
                    env[name] = secret
            elif f.key in values and values[f.key] is not None:
                v = values[f.key]
                env[name] = json.dumps(v) if isinstance(v, bool) else str(v)
        return env

    async def _status_event(self, status: PluginHostStatus) -> None:
        data = {
            "plugin_id": status.plugin_id,
            "status": status.status,
            "tools_count": status.tools_count,
            "error": status.error,
        }
        try:
            await self._events.create_resource(status.plugin_id, "plugin", exist_ok=True)
            await self._events.append(status.plugin_id, "HostStatusChanged", data)
        except SidecarError as exc:
            logger.warning("plugin %s: status event not stored: %s", status.plugin_id, exc.message)

    async def _restart_if_started(self, plugin_id: str, manifest: PluginManifest) -> None:
        """A started host (running, or failed: a new secret may be what it lacked) restarts with the new values."""
        if self._bridge.host(plugin_id) is not None:
            self._bridge.restart_soon(await self._spec(plugin_id, manifest))

    # --- settings (§7.5-7.6) -----------------------------------------------------------------------------------

    async def _values(self, plugin_id: str, manifest: PluginManifest) -> dict[str, Any]:
        row = await self._db.read(
            lambda c: c.execute('SELECT "values" FROM plugin_settings WHERE plugin_id = ?', (plugin_id,)).fetchone()
        )
        stored = json.loads(row[0]) if row else {}
        out: dict[str, Any] = {}
        for f in manifest.contributes.settings.fields:
            if f.type == "secret":
                continue
            if f.key in stored:
                out[f.key] = stored[f.key]
            elif f.default is not None:
                out[f.key] = f.default
        return out

    async def settings(self, plugin_id: str) -> PluginSettings:
        manifest = await self.manifest(plugin_id)
        schema = manifest.contributes.settings
        secrets = {}
        for f in schema.fields:
            if f.type == "secret":
                secrets[f.key] = SecretConfigured(configured=await self._secrets.has(_secret_name(plugin_id, f.key)))
        return PluginSettings(
            plugin_id=plugin_id,
            schema_version=schema.schema_version,
            fields=list(schema.fields),
            values=await self._values(plugin_id, manifest),
            secrets=secrets,
        )

    async def update_settings(self, plugin_id: str, schema_version: int, values: dict[str, Any]) -> PluginSettings:
        manifest = await self.manifest(plugin_id)
        schema = manifest.contributes.settings
        if schema_version != schema.schema_version:
            raise ConflictError(
                f"the settings schema is at version {schema.schema_version}",
                code="PLUGIN_SETTINGS_VERSION_CONFLICT",
                details={"schema_version": schema.schema_version, "current_schema_version": schema.schema_version},
            )
        fields = {f.key: f for f in schema.fields}
        errors: list[dict[str, str]] = []
        for key, value in values.items():
            f = fields.get(key)
            if f is None:
                errors.append({"path": f"values/{key}", "message": "no such setting"})
            elif f.type == "secret":
                errors.append({"path": f"values/{key}", "message": "a secret: use plugins/settings/secret/set"})
            elif value is None:
                if f.required:
                    errors.append({"path": f"values/{key}", "message": "required"})
            elif problem := field_value_problem(f, value):
                errors.append({"path": f"values/{key}", "message": problem})
        if errors:
            raise BadRequestError(
                f"invalid settings: {errors[0]['path']}: {errors[0]['message']}",
                code="PLUGIN_SETTINGS_SCHEMA_INVALID",
                details={"errors": errors},
            )
        current = await self._values(plugin_id, manifest)
        merged = {k: v for k, v in {**current, **values}.items() if v is not None}

        def save(conn: sqlite3.Connection) -> None:
            conn.execute(
                'INSERT INTO plugin_settings (plugin_id, schema_version, "values", updated_at) VALUES (?, ?, ?, ?) '
                "ON CONFLICT(plugin_id) DO UPDATE SET schema_version = excluded.schema_version, "
                '"values" = excluded."values", updated_at = excluded.updated_at',
                (plugin_id, schema.schema_version, json.dumps(merged), now_iso()),
            )

        await self._db.run(save)
        if merged != current:
            await self._restart_if_started(plugin_id, manifest)
        return await self.settings(plugin_id)

    def _secret_field(self, manifest: PluginManifest, key: str) -> SettingsField:
        for f in manifest.contributes.settings.fields:
            if f.key == key and f.type == "secret":
                return f
        raise NotFoundError(
            "The plugin has no secret setting with this key.",
            code="PLUGIN_SECRET_FIELD_NOT_FOUND",
            details={"plugin_id": manifest.id, "key": key[:64]},
        )

    async def set_secret(self, plugin_id: str, key: str, secret: str) -> None:
        manifest = await self.manifest(plugin_id)
        self._secret_field(manifest, key)
        await self._secrets.set(_secret_name(plugin_id, key), secret)
        await self._restart_if_started(plugin_id, manifest)

    async def delete_secret(self, plugin_id: str, key: str) -> None:
        manifest = await self.manifest(plugin_id)
        self._secret_field(manifest, key)
        if await self._secrets.delete(_secret_name(plugin_id, key)):
            await self._restart_if_started(plugin_id, manifest)

    # --- commands (§7.3-7.4) -----------------------------------------------------------------------------------

    async def commands(self, location: str | None, when: builtins.list[str] | None) -> builtins.list[PluginCommand]:
        out: list[PluginCommand] = []
        true_now = set(when or ())
        for plugin_id, manifest in await self._installed():
            ready = self._bridge.status(plugin_id).status == "ready"
            for c in manifest.contributes.commands:
                if location is not None and location not in c.locations:
                    continue
                holds = when is None or all(t in true_now for t in c.when)
                out.append(
                    PluginCommand(
                        command_id=f"{plugin_id}.{c.command_id}",
                        plugin_id=plugin_id,
                        title=c.title,
                        description=c.description,
                        icon=c.icon,
                        locations=list(c.locations),
                        when=list(c.when),
                        parameters=c.parameters,
                        enabled=ready and holds,
                    )
                )
        return out

    async def _command(self, command_id: str) -> tuple[PluginManifest, CommandContribution]:
        plugin_id, _, local = command_id.partition(".")
        try:
            manifest = await self.manifest(plugin_id)
        except NotFoundError:
            manifest = None
        for c in manifest.contributes.commands if manifest else ():
            if c.command_id == local:
                return manifest, c  # type: ignore[return-value]
        raise NotFoundError(
            "Plugin command was not found.", code="PLUGIN_COMMAND_NOT_FOUND", details={"command_id": command_id[:200]}
        )

    async def execute(
        self, command_id: str, arguments: dict[str, Any], context: dict[str, Any], *, approved: bool = False
    ) -> CommandExecuteResult:
        manifest, command = await self._command(command_id)
        trimmed = _trim_context(command, context)
        _check_arguments(command, arguments)
        host = self._bridge.host(manifest.id)
        if host is None or host.state != "ready":
            state = host.state if host else "stopped"
            raise host_error(
                "PLUGIN_HOST_UNAVAILABLE", f"the plugin's host is not ready (status {state})", 503, host_status=state
            )
        if command.prompt is not None:
            prompt_args = {k: str(v) for k, v in {**arguments, **trimmed}.items() if v is not None}
            text = await host.get_prompt(command.prompt, prompt_args)
            return _completed(command_id, command, text, None)
        from sidecar.agent.tools.base import ToolError

        tool = self._bridge.tool(manifest.id, command.tool or "")
        if tool is None:
            raise host_error(
                "MCP_TOOL_CALL_FAILED", f"the plugin's server has no tool {command.tool!r}", 502, tool=command.tool
            )
        if tool.requires_permission and not approved and not self._rules.allows(tool):  # the agent's rule
            raise ForbiddenError(
                f"the command runs the {tool.risk_level} risk tool {command.tool!r}: the user must approve it",
                code="PLUGIN_COMMAND_PERMISSION_REQUIRED",
                details={"command_id": command_id, "tool": command.tool, "risk_level": str(tool.risk_level),
                         "permission": tool.permission},
            )  # fmt: skip
        try:
            args = tool.parse_args({**arguments, **trimmed})
            with anyio.fail_after(tool.timeout_ms / 1000):
                output = await tool.run(args, None)  # type: ignore[arg-type]
        except ToolError as exc:
            message = redact_head(exc.message, 2000, tool.trace_secrets())
            return CommandExecuteResult(
                command_id=command_id,
                status="failed",
                effect=CommandEffect(type="notification", payload={"level": "error", "message": message,
                                                                    "code": exc.code}),
            )  # fmt: skip
        except TimeoutError:
            return CommandExecuteResult(
                command_id=command_id,
                status="failed",
                effect=CommandEffect(type="notification", payload={"level": "error", "message": "timed out"}),
            )
        structured = output.result.get("structured_content") if isinstance(output.result, dict) else None
        secrets = tool.trace_secrets()  # a server may echo its own secret: never on the wire
        return _completed(
            command_id, command, cut_credentials(output.summary, secrets), sanitize(structured, secrets=secrets)
        )


def _secret_name(plugin_id: str, key: str) -> str:
    return f"plugin:{plugin_id}:{key}"


def _move_into(root: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        shutil.rmtree(target)
    shutil.move(str(root), str(target))


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _trim_context(command: CommandContribution, context: dict[str, Any]) -> dict[str, Any]:
    """The context cut to the keys the command declares; unknown keys or values that are not scalars refused."""
    unknown = sorted(k for k in context if k not in CONTEXT_KEYS)
    problems = [f"context/{k}: not a context key the host knows" for k in unknown[:10]]
    total = 0
    for key, value in context.items():
        if value is not None and not isinstance(value, str | int | float | bool):
            problems.append(f"context/{key}: must be a string, number or boolean")
        total += len(str(value))
    if total > MAX_CONTEXT_CHARS:
        problems.append(f"context: larger than {MAX_CONTEXT_CHARS} characters")
    if problems:
        raise BadRequestError(
            f"invalid command context: {problems[0]}",
            code="PLUGIN_COMMAND_CONTEXT_INVALID",
            details={"errors": problems, "accepted_keys": list(command.context)},
        )
    return {k: v for k, v in context.items() if k in command.context and v is not None}


def _check_arguments(command: CommandContribution, arguments: dict[str, Any]) -> None:
    import jsonschema
    from referencing import Registry
    from referencing.exceptions import Unresolvable

    cls = jsonschema.validators.validator_for(command.parameters, default=jsonschema.Draft202012Validator)
    try:  # an empty registry: a $ref out of the schema is never fetched (the default one urlopen()s it)
        errors = list(cls(command.parameters, registry=Registry()).iter_errors(arguments))
    except Unresolvable as exc:
        raise BadRequestError(
            f"the command's parameters schema has a $ref that cannot be resolved: {str(exc)[:200]}",
            code="PLUGIN_COMMAND_ARGUMENTS_INVALID",
            details={"errors": [str(exc)[:300]]},
        ) from None
    if errors:
        raise BadRequestError(
            f"invalid command arguments: {errors[0].message[:300]}",
            code="PLUGIN_COMMAND_ARGUMENTS_INVALID",
            details={"errors": [e.message[:300] for e in errors[:10]]},
        )


def _completed(command_id: str, command: CommandContribution, text: str, structured: Any) -> CommandExecuteResult:
    """The effect: the tool's own (``structured_content.effect`` of an allowed type), else the command's."""
    if isinstance(structured, dict) and isinstance(structured.get("effect"), dict):
        wanted = structured["effect"]
        if wanted.get("type") in EFFECTS and isinstance(wanted.get("payload", {}), dict):
            return CommandExecuteResult(
                command_id=command_id,
                status="completed",
                effect=CommandEffect(type=wanted["type"], payload=wanted.get("payload", {})),
            )
    if command.effect == "notification":
        effect = CommandEffect(type="notification", payload={"level": "success", "message": text[:2000]})
    else:
        effect = CommandEffect(type=command.effect, payload={})
    return CommandExecuteResult(command_id=command_id, status="completed", effect=effect)
