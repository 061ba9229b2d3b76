"""Provider failures: the IR's MetonaError raised as an exception, the HTTP status tables, Retry-After, and the
one table from IR error codes to the phase-2 PROVIDER_*/MODEL_* codes (ARCHITECTURE.md §4).

Vendor errors are mapped once, at the adapter edge: an adapter raises :class:`ProviderError` and nothing else.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from typing import Any

from ..core.errors import SidecarError
from ..ir import MetonaError, MetonaErrorCode

C = MetonaErrorCode

RETRY_AFTER_CAP_MS = 60_000
"""A Retry-After longer than this is reported as is, but the retry loop never waits longer."""


class ProviderError(Exception):
    """A MetonaError raised by an adapter (or by the retry/failover layer)."""

    def __init__(self, error: MetonaError, *, interrupted: bool = False, status: int | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.interrupted = interrupted
        """The stream was cut after it started (phase-2 PROVIDER_STREAM_INTERRUPTED)."""
        self.status = status
        """The vendor's HTTP status, when the failure was an HTTP error answer."""

    @property
    def retryable(self) -> bool:
        return self.error.retryable


def provider_error(
    code: MetonaErrorCode,
    message: str,
    provider: str,
    *,
    retryable: bool | None = None,
    provider_code: str | None = None,
    retry_after_ms: int | None = None,
    interrupted: bool = False,
    status: int | None = None,
) -> ProviderError:
    if retryable is None:
        retryable = code in DEFAULT_RETRYABLE
    return ProviderError(
        MetonaError(
            code=code,
            message=message,
            provider=provider,
            provider_code=provider_code,
            retryable=retryable,
            retry_after_ms=retry_after_ms,
        ),
        interrupted=interrupted,
        status=status,
    )


DEFAULT_RETRYABLE = frozenset({C.NETWORK_TIMEOUT, C.NETWORK_ERROR, C.RATE_LIMITED, C.MODEL_OVERLOADED})


def retryable_for(code: MetonaErrorCode, status: int) -> bool:
    """Whether an error answer is worth retrying: a transient code, or an unclassified server-side (5xx) failure."""
    return code in DEFAULT_RETRYABLE or (code is C.UNKNOWN and status >= 500)


# HTTP status → IR code, shared by the OpenAI-compatible, Anthropic and Ollama protocols; each adapter refines it
# from the body (e.g. OpenAI's 429 ``insufficient_quota`` is QUOTA_EXCEEDED, not RATE_LIMITED).
HTTP_STATUS_CODES: dict[int, MetonaErrorCode] = {
    400: C.UNKNOWN,
    401: C.AUTH_INVALID,
    402: C.QUOTA_EXCEEDED,  # DeepSeek: insufficient balance
    403: C.AUTH_INVALID,
    404: C.MODEL_NOT_FOUND,
    408: C.NETWORK_TIMEOUT,
    413: C.CONTEXT_LENGTH_EXCEEDED,
    422: C.UNKNOWN,
    429: C.RATE_LIMITED,
    500: C.UNKNOWN,
    502: C.NETWORK_ERROR,
    503: C.MODEL_OVERLOADED,
    504: C.NETWORK_TIMEOUT,
    529: C.MODEL_OVERLOADED,  # Anthropic: overloaded_error
}
RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


def code_for_status(status: int) -> MetonaErrorCode:
    code = HTTP_STATUS_CODES.get(status)
    if code is not None:
        return code
    if status >= 500:
        return C.NETWORK_ERROR
    return C.UNKNOWN


def retry_after_ms(headers: Mapping[str, str], *, now: float | None = None) -> int | None:
    """``retry-after-ms`` (OpenAI), else ``Retry-After`` in seconds or as an HTTP date; None when absent/bad."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            value = float(raw_ms)
        except ValueError:
            value = -1
        if value >= 0:
            return int(value)
    raw = headers.get("retry-after")
    if not raw:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(raw) if _looks_like_date(raw) else None
        if parsed is None:
            return None
        seconds = parsed.timestamp() - (time.time() if now is None else now)
    return max(0, int(seconds * 1000))


def _looks_like_date(raw: str) -> bool:
    try:
        return email.utils.parsedate_to_datetime(raw) is not None
    except (TypeError, ValueError, IndexError):
        return False


def json_body(body: bytes | str) -> Any:
    """The decoded JSON of an error body, or None (vendors sometimes answer HTML from a proxy)."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: absurdly deep nesting
        return None


def safe_message(text: str, limit: int = 500) -> str:
    """A vendor message made safe for the wire: one line, bounded."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---- the phase-2 view (ARCHITECTURE.md §4: one table) ------------------------------------------------------

PHASE2_CODES: dict[MetonaErrorCode, tuple[str, int]] = {
    C.AUTH_INVALID: ("PROVIDER_AUTH_FAILED", 502),
    C.AUTH_EXPIRED: ("PROVIDER_AUTH_FAILED", 502),
    C.RATE_LIMITED: ("PROVIDER_RATE_LIMITED", 429),
    C.QUOTA_EXCEEDED: ("PROVIDER_RATE_LIMITED", 429),
    C.NETWORK_TIMEOUT: ("PROVIDER_TIMEOUT", 504),
    C.TIMEOUT: ("PROVIDER_TIMEOUT", 504),
    C.NETWORK_ERROR: ("PROVIDER_UNAVAILABLE", 503),
    C.MODEL_OVERLOADED: ("PROVIDER_UNAVAILABLE", 503),
    C.MODEL_NOT_FOUND: ("MODEL_NOT_FOUND", 404),
    C.CONTEXT_LENGTH_EXCEEDED: ("MODEL_CONTEXT_LENGTH_EXCEEDED", 413),
    C.OUTPUT_LENGTH_EXCEEDED: ("MODEL_CONTEXT_LENGTH_EXCEEDED", 413),
    C.PARSE_ERROR: ("PROVIDER_PROTOCOL_ERROR", 502),
    C.INVALID_RESPONSE: ("PROVIDER_PROTOCOL_ERROR", 502),
    C.CONTENT_FILTERED: ("PROVIDER_CONTENT_FILTERED", 502),
    C.USER_ABORTED: ("REQUEST_CANCELLED", -32800),  # the JSON-RPC code of a cancelled request
    C.MAX_ITERATIONS: ("MAX_ITERATIONS", 409),
    C.UNKNOWN: ("PROVIDER_PROTOCOL_ERROR", 502),
}


def phase2_code(error: MetonaError, *, interrupted: bool = False) -> tuple[str, int]:
    """The phase-2 code and HTTP status that report ``error`` on a phase-2 surface."""
    if interrupted and error.code not in (C.USER_ABORTED, C.TIMEOUT):
        return "PROVIDER_STREAM_INTERRUPTED", 502
    if error.code is C.UNKNOWN and (error.provider_code is None or error.retryable):
        return "PROVIDER_UNAVAILABLE", 503  # a server-side failure (5xx), not a malformed answer
    return PHASE2_CODES.get(error.code, ("PROVIDER_PROTOCOL_ERROR", 502))


def to_sidecar_error(exc: ProviderError) -> SidecarError:
    """The JSON-RPC error for a failed ``chat/send``/``chat/stream``: the phase-2 code, the MetonaError in details."""
    code, status = phase2_code(exc.error, interrupted=exc.interrupted)
    details: dict[str, Any] = {"error": exc.error.model_dump(mode="json")}
    return SidecarError(exc.error.message, code=code, status=status, details=details)
