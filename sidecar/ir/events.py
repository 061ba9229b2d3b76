"""MetonaStreamEvent and its wire line (IR standard ⚡, "流式传输协议"; ARCHITECTURE.md §2.3).

A stream line is a bare JSON object on one line: keys in the order
``type, requestId, sessionId, iteration, seq, timestamp``, then the payload field(s) of that type
(``delta``, ``toolCallDelta``, ``toolCall``, ``usage``, ``error``), absent ones omitted.
:meth:`MetonaStreamEvent.to_line` builds that line directly (it is on the hot path).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import StrEnum
from typing import Any, Self

import orjson
from pydantic import Field

from .base import WireModel
from .errors import MetonaError
from .response import MetonaTokenUsage
from .tools import MetonaToolCall

# The json module's C string escapers, and shared encoders for nested payloads (json.dumps with
# non-default options would build a new encoder on every call).
_esc: Callable[[str], str] = json.encoder.encode_basestring
_dumps = orjson.dumps
_esc_ascii: Callable[[str], str] = json.encoder.encode_basestring_ascii
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
_ASCII_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), check_circular=False)

# The fixed head of every line (%d also renders a stray bool as a JSON number), then the nested payloads.
_HEAD = '{"type":%s,"requestId":%s,"sessionId":%s,"iteration":%d,"seq":%d,"timestamp":%d'
_HEAD_TO_SEQ = '{"type":%s,"requestId":%s,"sessionId":%s,"iteration":%d,"seq":'
_SEQ_TIMESTAMP = b'%d,"timestamp":%d'
_HEADS: dict[tuple[str, str, str, int], bytes] = {}
_HEADS_MAX = 1024
_NESTED = (
    ("tool_call_delta", b',"toolCallDelta":'),
    ("tool_call", b',"toolCall":'),
    ("usage", b',"usage":'),
    ("error", b',"error":'),
)


def line_head(type_: str, request_id: str, session_id: str, iteration: int) -> bytes:
    """The bytes of a stream line up to ``"seq":`` (the same for every event of a type in one request; cached).
    UnicodeEncodeError when a string holds a lone surrogate (:meth:`MetonaStreamEvent.to_line` escapes those)."""
    key = (type_, request_id, session_id, iteration)
    head = _HEADS.get(key)
    if head is None:
        if len(_HEADS) >= _HEADS_MAX:
            _HEADS.clear()
        head = _HEADS[key] = (_HEAD_TO_SEQ % (_esc(type_), _esc(request_id), _esc(session_id), iteration)).encode()
    return head


def delta_line(head: bytes, seq: int, timestamp: int, delta: str) -> bytes:
    """The line of a delta event (:func:`line_head` gives ``head``), as :meth:`MetonaStreamEvent.to_line` writes it;
    orjson.JSONEncodeError for a lone surrogate in ``delta``."""
    return head + _SEQ_TIMESTAMP % (seq, timestamp) + b',"delta":' + _dumps(delta) + b"}"


class MetonaStreamEventType(StrEnum):
    TEXT_DELTA = "text_delta"
    REASONING_DELTA = "reasoning_delta"
    TOOL_CALL_DELTA = "tool_call_delta"
    TOOL_CALL_COMPLETE = "tool_call_complete"
    THINKING_START = "thinking_start"
    THINKING_END = "thinking_end"
    ERROR = "error"
    DONE = "done"
    USAGE = "usage"


class ToolCallDelta(WireModel):
    """``MetonaStreamEvent.toolCallDelta``: one streamed fragment of a tool call."""

    index: int = Field(ge=0)
    """Which tool call of this turn (a turn may have several)."""
    name: str | None = None
    """The tool name (carried by the first fragment)."""
    args_delta: str | None = None
    """A fragment of the arguments' JSON text."""


class MetonaStreamEvent(WireModel):
    type: MetonaStreamEventType
    request_id: str
    session_id: str
    iteration: int = Field(ge=1)
    seq: int = Field(ge=0)
    """Starts at 0 per requestId and rises by 1."""
    timestamp: int = Field(ge=0)
    delta: str | None = None
    """text_delta / reasoning_delta."""
    tool_call_delta: ToolCallDelta | None = None
    """tool_call_delta."""
    tool_call: MetonaToolCall | None = None
    """tool_call_complete: the assembled call."""
    usage: MetonaTokenUsage | None = None
    """usage."""
    error: MetonaError | None = None
    """error."""

    # ---- wire line --------------------------------------------------------------------------------

    def to_line(self) -> bytes:
        """The compact UTF-8 JSON line of this event, without its trailing newline.

        Built as bytes: the head up to ``seq`` once per request, strings through orjson (its string escaping is
        the json module's with ``ensure_ascii=False``, byte for byte), ~0.8 µs for a text_delta against ~1.4 µs
        through the json module's C escapers (issue 22); the line equals
        ``json.dumps(<the dict>, ensure_ascii=False, separators=(",", ":"))``.
        """
        f = self.__dict__
        try:
            head = line_head(f["type"], f["request_id"], f["session_id"], f["iteration"])
            line = head + _SEQ_TIMESTAMP % (f["seq"], f["timestamp"])
            delta = f["delta"]
            if delta is not None:
                line += b',"delta":' + _dumps(delta)
            for name, wire_key in _NESTED:
                value = f[name]
                if value is not None:
                    line += wire_key + _ENCODER.encode(value.model_dump(mode="json", by_alias=True)).encode("utf-8")
            return line + b"}"
        except (UnicodeEncodeError, orjson.JSONEncodeError):
            # A lone surrogate (e.g. an emoji split across provider chunks) is not encodable as UTF-8;
            # \u-escaping keeps the line valid JSON and valid UTF-8.
            return self._render_ascii().encode("ascii")

    def _render_ascii(self) -> str:
        f = self.__dict__
        line = _HEAD % (
            _esc_ascii(f["type"]),
            _esc_ascii(f["request_id"]),
            _esc_ascii(f["session_id"]),
            f["iteration"],
            f["seq"],
            f["timestamp"],
        )
        if f["delta"] is not None:
            line += ',"delta":' + _esc_ascii(f["delta"])
        for name, wire_key in _NESTED:
            value = f[name]
            if value is not None:
                line += wire_key.decode() + _ASCII_ENCODER.encode(value.model_dump(mode="json", by_alias=True))
        return line + "}"

    @classmethod
    def from_line(cls, line: bytes | str) -> Self:
        """Parse one stream line (a trailing newline is allowed)."""
        return cls.model_validate_json(line)

    # ---- constructors -----------------------------------------------------------------------------

    @classmethod
    def _make(
        cls,
        type_: MetonaStreamEventType,
        request_id: str,
        session_id: str,
        iteration: int,
        seq: int,
        timestamp: int,
        **payload: Any,
    ) -> Self:
        return cls(
            type=type_,
            request_id=request_id,
            session_id=session_id,
            iteration=iteration,
            seq=seq,
            timestamp=timestamp,
            **payload,
        )

    @classmethod
    def text_delta(cls, request_id: str, session_id: str, iteration: int, seq: int, timestamp: int, delta: str) -> Self:
        return cls._make(
            MetonaStreamEventType.TEXT_DELTA, request_id, session_id, iteration, seq, timestamp, delta=delta
        )

    @classmethod
    def reasoning_delta(
        cls, request_id: str, session_id: str, iteration: int, seq: int, timestamp: int, delta: str
    ) -> Self:
        return cls._make(
            MetonaStreamEventType.REASONING_DELTA, request_id, session_id, iteration, seq, timestamp, delta=delta
        )

    @classmethod
    def tool_call_delta_event(
        cls,
        request_id: str,
        session_id: str,
        iteration: int,
        seq: int,
        timestamp: int,
        tool_call_delta: ToolCallDelta,
    ) -> Self:
        return cls._make(
            MetonaStreamEventType.TOOL_CALL_DELTA,
            request_id,
            session_id,
            iteration,
            seq,
            timestamp,
            tool_call_delta=tool_call_delta,
        )

    @classmethod
    def tool_call_complete(
        cls, request_id: str, session_id: str, iteration: int, seq: int, timestamp: int, tool_call: MetonaToolCall
    ) -> Self:
        return cls._make(
            MetonaStreamEventType.TOOL_CALL_COMPLETE,
            request_id,
            session_id,
            iteration,
            seq,
            timestamp,
            tool_call=tool_call,
        )

    @classmethod
    def thinking_start(cls, request_id: str, session_id: str, iteration: int, seq: int, timestamp: int) -> Self:
        return cls._make(MetonaStreamEventType.THINKING_START, request_id, session_id, iteration, seq, timestamp)

    @classmethod
    def thinking_end(cls, request_id: str, session_id: str, iteration: int, seq: int, timestamp: int) -> Self:
        return cls._make(MetonaStreamEventType.THINKING_END, request_id, session_id, iteration, seq, timestamp)

    @classmethod
    def usage_event(
        cls, request_id: str, session_id: str, iteration: int, seq: int, timestamp: int, usage: MetonaTokenUsage
    ) -> Self:
        return cls._make(MetonaStreamEventType.USAGE, request_id, session_id, iteration, seq, timestamp, usage=usage)

    @classmethod
    def error_event(
        cls, request_id: str, session_id: str, iteration: int, seq: int, timestamp: int, error: MetonaError
    ) -> Self:
        return cls._make(MetonaStreamEventType.ERROR, request_id, session_id, iteration, seq, timestamp, error=error)

    @classmethod
    def done(cls, request_id: str, session_id: str, iteration: int, seq: int, timestamp: int) -> Self:
        return cls._make(MetonaStreamEventType.DONE, request_id, session_id, iteration, seq, timestamp)
