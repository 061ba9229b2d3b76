"""What an MCP host needs of a plugin and what it reports: the manifest's ``backend`` and ``tools`` sections, the
host status (phase-2 §7.2) and the JSON Schema check shared by tool input schemas and command parameters.

These live below :mod:`sidecar.plugins` (which installs plugins and starts their hosts) so that the host never
imports the plugin service's folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from sidecar.core.common import Phase2Model

HostState = Literal["stopped", "starting", "ready", "unhealthy", "error"]
RiskLevel = Literal["safe", "low", "medium", "high", "critical"]


class ManifestModel(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class BackendSpec(ManifestModel):
    type: Literal["mcp"]
    transport: Literal["stdio"]
    command: str = Field(min_length=1, max_length=4096)
    """A bare name (resolved on the user's login-shell PATH), an absolute path, or a path relative to the plugin."""
    args: list[str] = Field(default_factory=list, max_length=256)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    """Relative to the plugin folder (default: the plugin folder)."""


class ToolsPolicy(ManifestModel):
    timeout_ms: int = Field(30_000, ge=100, le=600_000)
    max_result_bytes: int = Field(1_048_576, ge=1024, le=64 * 1024 * 1024)
    risk: dict[str, RiskLevel] = Field(default_factory=dict)
    """Risk per MCP tool name; wins over the tool's own annotations."""
    examples: dict[str, Annotated[list[Annotated[str, Field(min_length=1, max_length=500)]], Field(max_length=8)]] = (
        Field(default_factory=dict)
    )
    """Extension: example requests per MCP tool name (at most 8 a tool), in the users' words, carried in the tool's
    declaration (``examples``) and shown to the local model's decision beside the tool."""


def json_schema_problem(schema: Any) -> str | None:
    """Why ``schema`` is not a valid JSON Schema (2020-12 meta-schema), or ``None``."""
    if not isinstance(schema, dict):
        return "not an object"
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return f"{exc.message[:300]}" + (f" at {where}" if where else "")
    return None


class HostManifest(Protocol):
    """The parts of a plugin manifest (``PluginManifest``) a host reads: how to start the server, its tool policy."""

    @property
    def backend(self) -> BackendSpec: ...

    @property
    def tools(self) -> ToolsPolicy: ...

    @property
    def permissions(self) -> Sequence[str]: ...


class PluginHostStatus(Phase2Model):
    """§7.2 ``GET /api/plugins/{plugin_id}/host``, plus the diagnostics the issue asks for."""

    plugin_id: str
    backend_type: Literal["mcp"] = "mcp"
    transport: Literal["stdio"] = "stdio"
    status: HostState
    tools_count: int
    started_at: str | None
    last_seen_at: str | None
    error: dict[str, Any] | None
    """``{"code", "message", "details"}`` of the last failure (a §7.7 code), or ``null``."""
    pid: int | None = None
    restarts: int = 0
    tools: list[str] = Field(default_factory=list)
    """The registry names published for this plugin (``<plugin_id>.<tool_name>``)."""
    stderr_tail: str = ""
    """The last bytes of the server's stderr (a bounded ring of 64 KiB), for diagnostics."""
    stdout_garbage_lines: int = 0
    """Lines on the server's stdout that were not JSON-RPC (ignored; counted here)."""
