"""MetonaMemoryItem (IR standard 🧩)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import WireModel

MetonaMemoryType = Literal["episodic", "semantic", "working"]
MetonaMemorySource = Literal["user_input", "tool_result", "agent_thought", "imported"]


class MetonaMemoryItem(WireModel):
    id: str
    type: MetonaMemoryType
    content: str
    summary: str | None = None
    source: MetonaMemorySource
    importance: float = Field(ge=0, le=1)
    relevance_score: float | None = None
    """Only present in search results."""
    session_id: str | None = None
    created_at: int = Field(ge=0)
    expires_at: int | None = Field(default=None, ge=0)
