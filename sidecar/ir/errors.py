"""MetonaError: an LLM-level failure inside a response or a stream (IR standard ❌)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from .base import WireModel


class MetonaErrorCode(StrEnum):
    # network
    NETWORK_TIMEOUT = "network_timeout"
    NETWORK_ERROR = "network_error"
    # auth
    AUTH_INVALID = "auth_invalid"
    AUTH_EXPIRED = "auth_expired"
    # rate limits
    RATE_LIMITED = "rate_limited"
    QUOTA_EXCEEDED = "quota_exceeded"
    # model
    MODEL_OVERLOADED = "model_overloaded"
    MODEL_NOT_FOUND = "model_not_found"
    CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
    OUTPUT_LENGTH_EXCEEDED = "output_length_exceeded"
    # content
    CONTENT_FILTERED = "content_filtered"
    # parsing
    PARSE_ERROR = "parse_error"
    INVALID_RESPONSE = "invalid_response"
    # agent
    MAX_ITERATIONS = "max_iterations"
    USER_ABORTED = "user_aborted"
    TIMEOUT = "timeout"
    UNKNOWN = "unknown"


class MetonaError(WireModel):
    code: MetonaErrorCode
    message: str
    provider: str | None = None
    provider_code: str | None = None
    retryable: bool
    retry_after_ms: int | None = Field(default=None, ge=0)
