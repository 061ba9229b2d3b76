"""The tool seam: what a tool declares and how the registry calls it.

A tool is a class with a pydantic parameter model (``Params``) and an async ``run``. The registry exports its
declaration as an IR ``MetonaToolDef`` (JSON Schema parameters), validates the model's arguments against
``Params`` before every call, bounds the call by ``timeout_ms`` and turns what happens into an IR
``MetonaToolResult``. Permissions are the agent loop's business: a tool only says ``requires_permission`` and
which ``permission`` it needs (phase-2 ``PermissionResolved.permission``, e.g. ``filesystem.write``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from sidecar.ir import MetonaRiskLevel, MetonaToolCategory, MetonaToolDef


class ToolParams(BaseModel):
    """Base of a tool's parameter model: unknown arguments are refused (a model's typo must not pass)."""

    model_config = ConfigDict(extra="forbid")


class ToolError(Exception):
    """A tool failed in a way the model should read (it goes back as a failed ToolResult, ``error`` = message).

    ``code`` is a short UPPER_SNAKE reason for the trace (``PATH_OUTSIDE_WORKSPACE``, ``NOT_FOUND``, ...).
    """

    def __init__(self, message: str, code: str = "TOOL_FAILED") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass
class ToolOutput:
    """What a tool returns: the raw ``result`` (JSON-able; kept for audit) and the ``summary`` the model reads."""

    result: Any
    summary: str
    citations: list[dict[str, Any]] = field(default_factory=list)
    """Sources the result came from (knowledge search): each becomes a trace ``Citation`` event."""


@dataclass
class ToolContext:
    """What a running tool may know and reach. Built by the agent loop per call."""

    run_id: str
    session_id: str
    tool_call_id: str
    workspace_roots: Sequence[str] = ()
    """Absolute, resolved folders the file tools are confined to (config ``agent.workspaceRoots``)."""
    services: Any = None
    """The domain services a tool may use (``memory``, ``retrieval``): attributes, possibly absent."""


class Tool:
    """Subclass, set the class attributes, implement :meth:`run`.

    Not ``ClassVar``: a tool whose description comes at run time (an MCP server's) sets them per instance."""

    name: str
    description: str
    Params: ClassVar[type[ToolParams]]
    category: MetonaToolCategory
    risk_level: MetonaRiskLevel
    requires_permission: bool = False
    permission: str = ""
    """The permission asked for when ``requires_permission`` (e.g. ``filesystem.write``, ``network.http``)."""
    timeout_ms: int = 30_000
    examples: tuple[str, ...] = ()
    """Requests the tool serves, in the user's words (the declaration's ``examples``): shown to the local model's
    decision beside the tool. A few, each a different kind of request; never a benchmark's prompts."""

    def declaration(self, name: str) -> MetonaToolDef | None:
        """The IR declaration under ``name``, for a tool without a pydantic ``Params`` (MCP); ``None``: derive it."""
        return None

    def parse_args(self, args: dict[str, Any]) -> Any:
        """The validated arguments (raises ``pydantic.ValidationError`` or ``ToolError``)."""
        return self.Params.model_validate(args)

    def trace_secrets(self) -> Sequence[str]:
        """Values the run's trace must never show in clear, wherever they appear (a plugin's secrets: its server
        has them in its environment and may echo them in a result). Read when a run starts and again when a
        result of this tool is recorded."""
        return ()

    def unavailable_reason(self, ctx: ToolContext) -> str | None:
        """Why the tool cannot run now (a missing service or configuration), or ``None`` when it can."""
        return None

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:  # args: an instance of ``Params``
        raise NotImplementedError
