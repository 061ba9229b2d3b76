"""MetonaRequest: what the agent loop sends a provider adapter, one per ReAct iteration (IR standard 📤)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .base import WireModel
from .messages import MetonaMessage
from .tools import MetonaToolDef

MetonaThinkingEffort = Literal["low", "medium", "high", "max"]


class MetonaRequestMeta(WireModel):
    session_id: str
    iteration: int = Field(ge=1)
    """The ReAct iteration, from 1."""
    request_id: str
    timestamp: int = Field(ge=0)
    agent_version: str


class MetonaSystemPrompt(WireModel):
    role_definition: str
    output_constraints: str
    safety_guidelines: str
    dynamic_reminders: str | None = None


class MetonaGenerationParams(WireModel):
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, ge=0, le=1)
    stream: bool | None = None
    stop_sequences: list[str] | None = None
    thinking_enabled: bool | None = None
    thinking_effort: MetonaThinkingEffort | None = None


class MetonaConstraints(WireModel):
    allowed_tools: list[str] | None = None
    max_tool_calls: int | None = Field(default=None, ge=0)
    timeout_ms: int | None = Field(default=None, ge=0)


class MetonaResponseFormat(WireModel):
    """IR extension (issue 15; not in the seed, see ipc_schema/README "Structured output"): the answer must be
    one JSON object (``json_object``), optionally following ``jsonSchema``. Adapters map it to the vendor's JSON
    mode: OpenAI-compatible ``response_format``, Ollama ``format``, the local model's constrained decoding;
    Anthropic has no JSON mode and ignores it."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: dict[str, Any] | None = None
    name: str | None = None
    """The schema's name (OpenAI ``json_schema.name``; default ``answer``)."""


class MetonaRequest(WireModel):
    meta: MetonaRequestMeta
    system_prompt: MetonaSystemPrompt
    messages: list[MetonaMessage]
    tools: list[MetonaToolDef] | None = None
    params: MetonaGenerationParams
    constraints: MetonaConstraints | None = None
    response_format: MetonaResponseFormat | None = None
    """IR extension: structured (JSON) output, the parse chain's second step."""
