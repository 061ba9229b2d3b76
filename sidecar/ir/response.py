"""MetonaResponse: what a provider adapter returns to the agent loop (IR standard 📥)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from .base import WireModel
from .errors import MetonaError
from .tools import MetonaToolCall


class MetonaFinishReason(StrEnum):
    STOP = "stop"
    LENGTH = "length"
    TOOL_CALLS = "tool_calls"
    CONTENT_FILTER = "content_filter"
    ERROR = "error"


class MetonaPerfStats(WireModel):
    """``MetonaResponseMeta.perfStats``: the provider's own timings (mainly Ollama; ns converted to ms)."""

    load_duration_ms: float | None = Field(default=None, ge=0)
    prompt_eval_duration_ms: float | None = Field(default=None, ge=0)
    eval_duration_ms: float | None = Field(default=None, ge=0)
    tokens_per_second: float | None = Field(default=None, ge=0)


class MetonaResponseMeta(WireModel):
    request_id: str
    provider: str
    model: str
    latency_ms: int = Field(ge=0)
    timestamp: int = Field(ge=0)
    perf_stats: MetonaPerfStats | None = None


class MetonaTokenUsage(WireModel):
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    total_tokens: int = Field(ge=0)
    reasoning_tokens: int | None = Field(default=None, ge=0)
    cache_hit_tokens: int | None = Field(default=None, ge=0)
    cache_miss_tokens: int | None = Field(default=None, ge=0)


class MetonaResponse(WireModel):
    meta: MetonaResponseMeta
    content: str
    reasoning_content: str | None = None
    reasoning_signature: str | None = None
    """A Metona extension: the provider's opaque signature of ``reasoningContent`` (Anthropic thinking blocks);
    the caller copies it onto the assistant message it appends to the history."""
    structured_output: Any = None
    """``unknown`` in the seed: an explicitly set ``None`` is sent as JSON ``null``; never set, it is omitted."""
    tool_calls: list[MetonaToolCall] | None = None
    usage: MetonaTokenUsage
    finish_reason: MetonaFinishReason
    error: MetonaError | None = None
