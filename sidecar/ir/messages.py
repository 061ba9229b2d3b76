"""MetonaMessage: one structure for every role (IR standard 💬)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import WireModel
from .tools import MetonaToolCall, MetonaToolResult

MetonaRole = Literal["system", "user", "assistant", "tool"]
MetonaImageDetail = Literal["low", "high", "auto"]


class MetonaImageContent(WireModel):
    url: str
    """A public URL or a base64 ``data:`` URI."""
    detail: MetonaImageDetail | None = None


class MetonaMessage(WireModel):
    role: MetonaRole
    content: str
    reasoning_content: str | None = None
    """Assistant only: the thinking text (some providers need it sent back with tool calls)."""
    reasoning_signature: str | None = None
    """Assistant only, a Metona extension: the provider's opaque signature of the thinking text (Anthropic
    ``thinking.signature``), copied from ``MetonaResponse.reasoningSignature`` so the thinking block can be sent
    back verbatim in a tool-use loop."""
    tool_calls: list[MetonaToolCall] | None = None
    """Assistant only."""
    tool_result: MetonaToolResult | None = None
    """Tool only."""
    timestamp: int = Field(ge=0)
    iteration: int | None = Field(default=None, ge=1)
    images: list[MetonaImageContent] | None = None
