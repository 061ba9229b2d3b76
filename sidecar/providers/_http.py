"""HTTP plumbing shared by the adapters: the httpx client, SSE and NDJSON framing, transport-error mapping.

``httpx`` takes 0.2–0.6 s to import, so it is imported here only, on first use (STYLE: keep start-up fast).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..ir import MetonaErrorCode
from .errors import ProviderError, provider_error

if TYPE_CHECKING:
    import httpx

DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_READ_TIMEOUT_S = 120.0
"""Between two chunks of a stream (a reasoning model can think silently for a while)."""

MAX_ERROR_BODY = 64 * 1024
MAX_LINE = 16 * 1024 * 1024


def make_client(transport: Any = None, *, read_timeout_s: float = DEFAULT_READ_TIMEOUT_S) -> httpx.AsyncClient:
    import httpx

    timeout = httpx.Timeout(DEFAULT_CONNECT_TIMEOUT_S, read=read_timeout_s, write=30.0, pool=10.0)
    return httpx.AsyncClient(
        timeout=timeout,
        transport=transport,
        follow_redirects=False,
        trust_env=False,  # no proxy env surprises for loopback Ollama; the user configures base_url
        limits=httpx.Limits(max_connections=32, max_keepalive_connections=8),
    )


def coalesce_chunks(response: httpx.Response) -> bool:
    """Let ``response``'s chunked body arrive in as few pieces as the network gives (see :mod:`._chunked`)."""
    try:  # it leans on h11's private reader: another h11 keeps its own reader rather than break every stream
        from ._chunked import coalesce_chunks
    except ImportError:
        return False
    return coalesce_chunks(response)


@contextmanager
def transport_errors(provider: str, *, started: bool = False) -> Iterator[None]:
    """Map httpx's transport exceptions to ProviderError (network_timeout / network_error).

    ``started`` marks failures after the first byte of a stream arrived (PROVIDER_STREAM_INTERRUPTED).
    """
    import httpx

    try:
        yield
    except ProviderError:
        raise
    except httpx.TimeoutException as exc:
        raise provider_error(
            MetonaErrorCode.NETWORK_TIMEOUT,
            f"{provider}: the request timed out ({type(exc).__name__})",
            provider,
            interrupted=started,
        ) from None
    except httpx.TransportError as exc:  # ConnectError, ReadError, RemoteProtocolError (cut stream), ...
        reason = "the stream was cut" if started else "could not reach the server"
        raise provider_error(
            MetonaErrorCode.NETWORK_ERROR,
            f"{provider}: {reason} ({type(exc).__name__})",
            provider,
            interrupted=started,
        ) from None


async def iter_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Split a byte stream into lines at ``\n`` (a ``\r`` before it is dropped), without the line end.

    Every vendor we speak ends lines with ``\n`` or ``\r\n``; a bare ``\r`` line end (allowed by the SSE spec,
    used by nobody) is not recognised.
    """
    buffer = b""
    async for chunk in chunks:
        if b"\n" not in chunk:
            buffer += chunk
            if len(buffer) > MAX_LINE:
                raise ValueError("a line of the stream is too long")
            continue
        *lines, rest = (buffer + chunk).split(b"\n")
        buffer = rest
        for line in lines:
            yield line[:-1] if line.endswith(b"\r") else line
    if buffer:
        yield buffer[:-1] if buffer.endswith(b"\r") else buffer


class SseEvent:
    __slots__ = ("data", "event")

    def __init__(self, event: str, data: str) -> None:
        self.event = event
        self.data = data


async def iter_sse(chunks: AsyncIterator[bytes]) -> AsyncIterator[SseEvent]:
    """Server-sent events (WHATWG framing): ``event:``/``data:`` fields, comments ignored, blank line dispatches.

    Lines are split here rather than through :func:`iter_lines`: one generator layer less per line is a
    measurable share of the per-chunk cost of a fast stream.
    """
    event = ""
    data: list[str] = []
    buffer = b""
    async for chunk in chunks:
        if b"\n" not in chunk:
            buffer += chunk
            if len(buffer) > MAX_LINE:
                raise ValueError("a line of the stream is too long")
            continue
        *lines, buffer = (buffer + chunk).split(b"\n") if buffer else chunk.split(b"\n")
        for raw in lines:
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            if not raw:
                if data:
                    yield SseEvent(event or "message", "\n".join(data))
                event, data = "", []
                continue
            if raw[0] == 58:  # b":" — a comment / keep-alive
                continue
            name, sep, value = raw.decode("utf-8").partition(":")
            if sep and value.startswith(" "):
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "event":
                event = value
            # id / retry are not used by any vendor we speak
    if buffer.endswith(b"\r"):
        buffer = buffer[:-1]
    if buffer and buffer[0] != 58:
        name, sep, value = buffer.decode("utf-8").partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield SseEvent(event or "message", "\n".join(data))


async def iter_ndjson_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Non-empty lines of an NDJSON stream (Ollama)."""
    async for line in iter_lines(chunks):
        if line.strip():
            yield line


async def read_error_body(response: httpx.Response) -> bytes:
    """At most MAX_ERROR_BODY bytes of an error answer's body."""
    body = b""
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= MAX_ERROR_BODY:
            break
    return body[:MAX_ERROR_BODY]
