"""MetonaThinking: provider thinking/reasoning content, unified (IR standard 🧠)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import WireModel

MetonaThinkingStatus = Literal["thinking", "complete"]


class MetonaThinking(WireModel):
    content: str
    status: MetonaThinkingStatus
    duration_ms: int = Field(ge=0)
    tokens_used: int = Field(ge=0)
