"""Tools: MetonaToolDef (+ params JSON Schema), MetonaToolCall, MetonaToolResult (IR standard 🔧 / 🔌)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field

from .base import WireModel

MetonaParamType = Literal["string", "number", "boolean", "object", "array"]


class MetonaToolCategory(StrEnum):
    FILESYSTEM = "filesystem"
    SEARCH = "search"
    CALCULATION = "calculation"
    CODE_EXECUTION = "code_execution"
    NETWORK = "network"
    DATABASE = "database"
    MCP = "mcp"
    CUSTOM = "custom"


class MetonaRiskLevel(StrEnum):
    SAFE = "safe"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class MetonaParamField(WireModel):
    type: MetonaParamType
    description: str
    enum: list[str] | None = None
    items: MetonaParamField | None = None
    properties: dict[str, MetonaParamField] | None = None
    """IR extension: the keys of an ``object`` field (a nested schema, as a plugin's tool declares it); absent
    where the object's keys are not declared."""
    required: list[str] | None = None
    """IR extension: the keys of ``properties`` that an ``object`` field must have."""


class MetonaToolParams(WireModel):
    type: Literal["object"] = "object"
    properties: dict[str, MetonaParamField]
    required: list[str] | None = None


class MetonaToolDef(WireModel):
    name: str
    description: str
    parameters: MetonaToolParams
    category: MetonaToolCategory
    risk_level: MetonaRiskLevel
    requires_permission: bool
    timeout_ms: int = Field(ge=0)
    examples: list[str] | None = None
    """IR extension: requests this tool serves, in its author's words (a built-in tool's own; a plugin's from its
    manifest's ``tools.examples``). A model that decides between tools from a short prompt (the embedded local
    model) is shown them beside the tool; absent where the author gave none."""


class MetonaToolCall(WireModel):
    id: str
    name: str
    args: dict[str, Any]
    iteration: int = Field(ge=1)
    timestamp: int = Field(ge=0)


class MetonaToolResult(WireModel):
    tool_call_id: str
    tool_name: str
    result: Any
    """The tool's raw return value (``unknown`` in the seed: JSON ``null`` is a valid value)."""
    summary: str | None = None
    success: bool
    error: str | None = None
    duration_ms: int = Field(ge=0)
    timestamp: int = Field(ge=0)
