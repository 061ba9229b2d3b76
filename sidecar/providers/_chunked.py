"""A chunked-body reader for h11 that hands over every complete chunk in the receive buffer as one ``Data`` event.

h11 turns each HTTP chunk into its own event, and httpcore and httpx pass each one up through five async
generators: a vendor that sends one SSE event per chunk (OpenAI, DeepSeek, Ollama…) paid that per event, about
half of the sidecar's per-line cost (issue 22). Chunk boundaries carry no meaning in HTTP, and the SSE parser
splits lines itself, so the body's bytes are the same; only how many pieces they arrive in changes.

Installed per response by :func:`coalesce_chunks` only when the response is read through the exact chain it knows
(httpx → httpcore's HTTP/1.1 connection → h11 with a fresh ``ChunkedReader``); anything else (HTTP/2, a mock
transport, a length-delimited body, other library versions) keeps its reader. Every byte the fast scan does not
vouch for — a partial chunk, the last chunk and its trailer, anything malformed — goes through h11's own reader,
so errors and the connection's state (reused after ``EndOfMessage``) are h11's.
"""

from __future__ import annotations

from typing import Any

from h11._events import Data, EndOfMessage
from h11._readers import ChunkedReader, chunk_header_re

__all__ = ["CoalescingChunkedReader", "coalesce_chunks"]


class CoalescingChunkedReader(ChunkedReader):
    """h11's ``ChunkedReader``, returning all complete chunks at hand as one ``Data`` (``chunk_start`` and
    ``chunk_end`` are not kept: httpcore does not read them)."""

    def __init__(self) -> None:
        super().__init__()
        self._pending: EndOfMessage | Exception | None = None  # what comes after the Data being returned

    def __call__(self, buf: Any) -> Data | EndOfMessage | None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            if isinstance(pending, Exception):
                raise pending
            return pending
        parts: list[bytes] = []
        while True:
            if not (self._reading_trailer or self._bytes_in_chunk):
                piece = _whole_chunks(buf, self._bytes_to_discard)
                if piece is not None:
                    self._bytes_to_discard = b""
                    if piece:
                        parts.append(piece)
                        continue
            try:
                event = ChunkedReader.__call__(self, buf)
            except Exception as exc:  # malformed: what came before it still goes out first, as with h11's reader
                if not parts:
                    raise
                self._pending = exc
                return Data(data=b"".join(parts))
            if isinstance(event, Data):
                parts.append(event.data)
                continue
            if not parts:
                return event
            self._pending = event
            return Data(data=parts[0] if len(parts) == 1 else b"".join(parts))


def _whole_chunks(buf: Any, footer: bytes) -> bytes | None:
    """The payloads of the complete, well-formed, non-empty chunks at the start of ``buf`` (after ``footer``, the
    end of the chunk before them), removed from it; b"" when the first is not such a chunk, None when ``footer``
    is not all there (h11's reader then takes over)."""
    data = bytes(buf)
    size = len(data)
    if footer and not data.startswith(footer):
        return None
    pos = len(footer)
    parts: list[bytes] = []
    fullmatch = chunk_header_re.fullmatch
    while True:
        nl = data.find(b"\r\n", pos)
        if nl < 0:
            break
        match = fullmatch(data, pos, nl + 2)
        if match is None:
            break
        n = int(match["chunk_size"], 16)
        start = nl + 2
        end = start + n
        if n == 0 or end + 2 > size or data[end : end + 2] != b"\r\n":
            break
        parts.append(data[start:end])
        pos = end + 2
    if pos:
        buf.maybe_extract_at_most(pos)
    return b"".join(parts)


def coalesce_chunks(response: Any) -> bool:
    """Give ``response`` (an httpx streaming response whose body is not read yet) the coalescing reader if it is
    read through httpcore's HTTP/1.1 connection with h11's chunked reader; False (nothing changed) otherwise."""
    stream = getattr(getattr(getattr(response, "stream", None), "_stream", None), "_httpcore_stream", None)
    connection = getattr(getattr(stream, "_stream", None), "_connection", None)
    state: Any = getattr(connection, "_h11_state", None)
    reader = getattr(state, "_reader", None)
    if type(reader) is not ChunkedReader or reader._bytes_in_chunk or reader._bytes_to_discard:
        return False
    if reader._reading_trailer:
        return False
    state._reader = CoalescingChunkedReader()
    return True
