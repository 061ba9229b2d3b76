"""Plugins (phase-2 §7): the manifest (``plugin.json``), installed plugins, host status, commands, settings.

The seed names ``PluginManifest`` but leaves its shape to us (issue 11 fixes it). Every object here is a
phase-2 object: snake_case. The manifest refuses unknown keys (with their path) so a typo in a plugin never
passes silently.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from sidecar.core.common import AfterSequence, OperationResponse, Params, Phase2Model
from sidecar.mcp_host.models import (
    BackendSpec,
    HostState,
    ManifestModel,
    PluginHostStatus,
    ToolsPolicy,
    json_schema_problem,
)

PLUGIN_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,63}$"
VERSION_PATTERN = r"^[0-9]+\.[0-9]+\.[0-9]+(?:[-+][0-9A-Za-z.-]+)?$"
SETTING_KEY_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,63}$"
COMMAND_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,127}$"

FieldType = Literal["string", "number", "boolean", "select", "secret"]
EffectType = Literal["none", "notification", "navigate", "refresh", "job"]
CommandLocation = Literal["command_palette", "context_menu", "editor_toolbar", "sidebar"]
Permission = Literal["tools", "prompts", "network", "filesystem"]

WHEN_TOKENS = (
    "workspace.has_vault",
    "editor.has_selection",
    "editor.has_note",
    "editor.focused",
    "note.is_markdown",
)
"""The condition tokens the host evaluates (§7.3: a fixed set, never plugin JavaScript)."""

CONTEXT_KEYS = ("note_id", "selection", "vault_id", "attachment_id", "cursor_line", "language")
"""The context keys a command may declare it receives (§7.4: the host trims the context to them)."""


class SettingsField(ManifestModel):
    """A §7.5 settings field."""

    key: str = Field(pattern=SETTING_KEY_PATTERN)
    label: str = Field(min_length=1, max_length=200)
    description: str | None = Field(None, max_length=2000)
    type: FieldType
    required: bool = False
    default: Any = None
    minimum: float | None = None
    maximum: float | None = None
    options: list[str] = Field(default_factory=list, max_length=200)
    env: str | None = Field(None, pattern=r"^[A-Z_][A-Z0-9_]{0,127}$")
    """The environment variable the value (or secret) is handed to the server in (default ``METONA_<KEY>``)."""

    @model_validator(mode="after")
    def _consistent(self) -> SettingsField:
        if self.type == "select" and not self.options:
            raise ValueError("a select field needs options")
        if self.type == "secret" and self.default is not None:
            raise ValueError("a secret field cannot have a default")
        if self.default is not None:
            problem = field_value_problem(self, self.default)
            if problem:
                raise ValueError(f"default: {problem}")
        return self


class SettingsSchema(ManifestModel):
    schema_version: int = Field(1, ge=1)
    fields: list[SettingsField] = Field(default_factory=list, max_length=200)

    @field_validator("fields")
    @classmethod
    def _unique(cls, fields: list[SettingsField]) -> list[SettingsField]:
        keys = [f.key for f in fields]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ValueError(f"duplicate setting keys: {', '.join(dup)}")
        return fields


class CommandContribution(ManifestModel):
    """A §7.3 command, plus the MCP ``tool`` (or ``prompt``) of this plugin it runs and the ``context`` it gets."""

    command_id: str = Field(pattern=COMMAND_NAME_PATTERN)
    """Local to the plugin; the wire id is ``<plugin_id>.<command_id>``."""
    title: str = Field(min_length=1, max_length=200)
    description: str | None = Field(None, max_length=2000)
    icon: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")
    """A host icon id."""
    locations: list[CommandLocation] = Field(
        default_factory=lambda: list[CommandLocation](["command_palette"]), min_length=1
    )
    when: list[str] = Field(default_factory=list)
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    tool: str | None = Field(None, min_length=1, max_length=128)
    prompt: str | None = Field(None, min_length=1, max_length=128)
    context: list[str] = Field(default_factory=list)
    effect: EffectType = "notification"
    """What the host does with the result: ``notification`` shows the tool's text; ``none`` nothing."""

    @model_validator(mode="after")
    def _consistent(self) -> CommandContribution:
        if (self.tool is None) == (self.prompt is None):
            raise ValueError("a command runs exactly one of 'tool' or 'prompt'")
        unknown = [t for t in self.when if t not in WHEN_TOKENS]
        if unknown:
            raise ValueError(f"unknown when tokens {unknown}; supported: {list(WHEN_TOKENS)}")
        bad = [k for k in self.context if k not in CONTEXT_KEYS]
        if bad:
            raise ValueError(f"unknown context keys {bad}; supported: {list(CONTEXT_KEYS)}")
        problem = json_schema_problem(self.parameters)
        if problem or self.parameters.get("type") != "object":
            raise ValueError(f"parameters must be a JSON Schema object: {problem or 'type is not object'}")
        return self


class Contributions(ManifestModel):
    commands: list[CommandContribution] = Field(default_factory=list, max_length=200)
    settings: SettingsSchema = Field(default_factory=SettingsSchema)

    @field_validator("commands")
    @classmethod
    def _unique(cls, commands: list[CommandContribution]) -> list[CommandContribution]:
        ids = [c.command_id for c in commands]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"duplicate command ids: {', '.join(dup)}")
        return commands


class PluginManifest(ManifestModel):
    """``plugin.json`` at the root of a plugin package."""

    id: str = Field(pattern=PLUGIN_ID_PATTERN)
    name: str = Field(min_length=1, max_length=200)
    version: str = Field(pattern=VERSION_PATTERN, max_length=64)
    description: str = Field("", max_length=4000)
    min_app_version: str | None = Field(None, pattern=VERSION_PATTERN)
    backend: BackendSpec
    permissions: list[Permission] = Field(default_factory=lambda: list[Permission](["tools"]))
    tools: ToolsPolicy = Field(default_factory=ToolsPolicy)
    contributes: Contributions = Field(default_factory=Contributions)

    @model_validator(mode="after")
    def _consistent(self) -> PluginManifest:
        if any(c.tool for c in self.contributes.commands) and "tools" not in self.permissions:
            raise ValueError("commands that run tools need the 'tools' permission")
        if any(c.prompt for c in self.contributes.commands) and "prompts" not in self.permissions:
            raise ValueError("commands that run prompts need the 'prompts' permission")
        return self


def field_value_problem(f: SettingsField, value: Any) -> str | None:
    """Why ``value`` does not fit the field, or ``None``."""
    if f.type in ("string", "secret"):
        if not isinstance(value, str):
            return "must be a string"
        if len(value) > 65_536:
            return "too long"
    elif f.type == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "must be a number"
        if f.minimum is not None and value < f.minimum:
            return f"must be >= {f.minimum:g}"
        if f.maximum is not None and value > f.maximum:
            return f"must be <= {f.maximum:g}"
    elif f.type == "boolean":
        if not isinstance(value, bool):
            return "must be a boolean"
    elif f.type == "select" and value not in f.options:
        return f"must be one of {f.options}"
    return None


# --- wire objects --------------------------------------------------------------------------------------------


class PluginInfo(Phase2Model):
    plugin_id: str
    name: str
    version: str
    description: str
    enabled: bool
    installed_at: str
    permissions: list[str]
    commands_count: int
    host: PluginHostStatus


class PluginInstallParams(Params):
    package_path: str | None = Field(None, min_length=1, max_length=4096)
    """Development only (deprecated in production, §7.1): a plugin folder or a ``.zip``."""
    package_id: str | None = Field(None, min_length=1, max_length=200)
    """Production: a package handle produced by the host's file picker."""
    start: bool = True
    """Start the host (and publish its tools) after installing."""

    @model_validator(mode="after")
    def _one(self) -> PluginInstallParams:
        if (self.package_path is None) == (self.package_id is None):
            raise ValueError("give exactly one of package_path or package_id")
        return self


class PluginIdParams(Params):
    plugin_id: str = Field(pattern=PLUGIN_ID_PATTERN)


class PluginEventsParams(Params):
    plugin_id: str = Field(pattern=PLUGIN_ID_PATTERN)
    after_sequence: AfterSequence = 0
    limit: int = Field(200, ge=1, le=1000)


class PluginListResult(Phase2Model):
    items: list[PluginInfo]


class PluginUninstallResult(Phase2Model):
    plugin_id: str
    uninstalled: bool = True


class HostRestartResult(OperationResponse):
    """202-style: accepted at once; the outcome shows in ``plugins/host/get`` and the plugin's events."""

    plugin_id: str


# --- settings (§7.5-7.6) --------------------------------------------------------------------------------------


class SecretConfigured(Phase2Model):
    configured: bool


class PluginSettings(Phase2Model):
    plugin_id: str
    schema_version: int
    fields: list[SettingsField]
    values: dict[str, Any]
    secrets: dict[str, SecretConfigured]


class SettingsUpdateParams(Params):
    plugin_id: str = Field(pattern=PLUGIN_ID_PATTERN)
    schema_version: int = Field(ge=1)
    values: dict[str, Any]


class SecretSetParams(Params):
    plugin_id: str = Field(pattern=PLUGIN_ID_PATTERN)
    key: str = Field(min_length=1, max_length=64)
    secret: str = Field(min_length=1, max_length=65_536)


class SecretDeleteParams(Params):
    plugin_id: str = Field(pattern=PLUGIN_ID_PATTERN)
    key: str = Field(min_length=1, max_length=64)


class SecretStateResult(Phase2Model):
    plugin_id: str
    key: str
    configured: bool


# --- trust (issue 33: the user's decisions, never the package's) ---------------------------------------------


class PluginTrust(Phase2Model):
    plugin_id: str
    annotations_trusted: bool
    """The user lets the server's own tool annotations (``readOnlyHint``/``destructiveHint``) set its tools' risk;
    off by default: an annotated read-only tool still asks (risk medium) unless the manifest's ``tools.risk`` says
    otherwise."""
    always_allowed_tools: list[str]
    """MCP tool names answered "allow always" (they run without asking until revoked or the plugin is uninstalled)."""


class PluginTrustUpdateParams(Params):
    plugin_id: str = Field(pattern=PLUGIN_ID_PATTERN)
    annotations_trusted: bool | None = None
    """Set (or clear) the trust in the server's annotations; a running host restarts to republish its tools."""
    revoke_tools: list[str] = Field(default_factory=list, max_length=256)
    """MCP tool names whose "allow always" is withdrawn (they ask again)."""


# --- commands (§7.3-7.4) --------------------------------------------------------------------------------------


class PluginCommand(Phase2Model):
    command_id: str
    plugin_id: str
    title: str
    description: str | None
    icon: str | None
    locations: list[str]
    when: list[str]
    parameters: dict[str, Any]
    enabled: bool


class CommandListParams(Params):
    location: str | None = Field(None, max_length=64)
    when: list[str] | None = Field(None, max_length=64)
    """The condition tokens true now (the host's UI state); a command shows as enabled when all of its hold."""


class CommandListResult(Phase2Model):
    items: list[PluginCommand]


class CommandExecuteParams(Params):
    command_id: str = Field(min_length=3, max_length=200)
    arguments: dict[str, Any] = Field(default_factory=dict)
    context: dict[str, Any] = Field(default_factory=dict)
    approved: bool = Field(
        False,
        description="the user confirmed this run of the command's tool; a tool that requires permission (risk "
        "medium or above) without it is 403 PLUGIN_COMMAND_PERMISSION_REQUIRED",
    )


class CommandEffect(Phase2Model):
    type: EffectType
    payload: dict[str, Any] = Field(default_factory=dict)


class CommandExecuteResult(Phase2Model):
    command_id: str
    status: Literal["completed", "failed"]
    effect: CommandEffect


class HostStatusEvent(Phase2Model):
    """Data of the ``HostStatusChanged`` event on the plugin's resource (``events/subscribe`` on the plugin id)."""

    plugin_id: str
    status: HostState
    tools_count: int
    error: dict[str, Any] | None = None
