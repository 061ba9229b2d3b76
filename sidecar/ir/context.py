"""MetonaContext: the context builder's output (IR standard 📋)."""

from __future__ import annotations

from pydantic import Field

from .base import WireModel
from .memory import MetonaMemoryItem
from .messages import MetonaMessage
from .request import MetonaSystemPrompt
from .tools import MetonaToolDef


class MetonaCurrentTask(WireModel):
    """``MetonaContext.currentTask``."""

    user_input: str
    iteration: int = Field(ge=1)
    task_goal: str | None = None


class MetonaContext(WireModel):
    id: str
    session_id: str
    system_prompt: MetonaSystemPrompt
    history: list[MetonaMessage]
    relevant_memories: list[MetonaMemoryItem]
    current_task: MetonaCurrentTask
    available_tools: list[MetonaToolDef]
    estimated_tokens: int = Field(ge=0)
    usage_ratio: float = Field(ge=0)
    """estimatedTokens / contextWindow (may exceed 1 before compression)."""
    needs_compression: bool
