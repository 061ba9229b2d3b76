"""One assembler turns any vendor's increments into MetonaStreamEvent lines and the final MetonaResponse.

Adapters only say what arrived (``text``, ``reasoning``, ``tool_delta``, ``tool_call``, ``usage``, ``finish``);
the assembler owns the IR's stream rules (IR ⚡ 流式传输协议 / 流式工具调用拼接策略):

* ``seq`` from 0, rising by 1, per request; every event carries requestId/sessionId/iteration/timestamp;
* reasoning is framed ``thinking_start`` · ``reasoning_delta``… · ``thinking_end`` (closed as soon as text or a
  tool call follows, or at the end);
* tool calls are buffered by index (``Map<index, {name, argsBuffer}>``): fragments go out as
  ``tool_call_delta``, the assembled calls as ``tool_call_complete`` when the vendor says a call ended or at
  the end; arguments that are not a JSON object fail the stream with ``parse_error``;
* ``usage`` goes out right before ``done``; exactly one ``done`` per stream, ``error`` then ``done`` on failure.

Events are forwarded as they are made (no batching): the first upstream chunk reaches the wire at once.
The same assembler builds the response of a non-streaming ``send`` (``emit=None``): one code path for both.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import orjson

from ..ir import (
    MetonaError,
    MetonaErrorCode,
    MetonaFinishReason,
    MetonaPerfStats,
    MetonaResponse,
    MetonaResponseMeta,
    MetonaStreamEvent,
    MetonaStreamEventType,
    MetonaTokenUsage,
    MetonaToolCall,
    MetonaToolDef,
    ToolCallDelta,
)
from ..ir.events import delta_line, line_head
from .errors import ProviderError, provider_error
from .toolparse import ToolTextFallback

Emit = Callable[[MetonaStreamEvent], Awaitable[None] | None]


class LineEmit:
    """An :data:`Emit` whose consumer only writes each event's wire line (``chat/stream``): the assembler hands it a
    text delta's line without building the event first (issue 22: the event object and its rendering were a sixth
    of the stream path). Called with an event, it writes that event's line."""

    __slots__ = ("send_line",)

    def __init__(self, send_line: Callable[[bytes], Awaitable[None]]) -> None:
        self.send_line = send_line

    def __call__(self, event: MetonaStreamEvent) -> Awaitable[None]:
        return self.send_line(event.to_line())


T = MetonaStreamEventType
_new = object.__new__
_set = object.__setattr__
_EVENT_FIELDS = frozenset(MetonaStreamEvent.model_fields)

_CLOSE_GRACE_S = 5.0  # how long a failing stream may wait to write its error and done when cancelled


def _make_event(fields: dict[str, Any]) -> MetonaStreamEvent:
    """A MetonaStreamEvent from already-valid values, without pydantic's construct machinery.

    What ``model_construct`` does, minus its per-call field/default walk (it was a third of an adapter's
    per-chunk cost): every field is given, so there are no defaults to fill and no extras to sort.
    """
    event = _new(MetonaStreamEvent)
    _set(event, "__dict__", fields)
    _set(event, "__pydantic_fields_set__", set(_EVENT_FIELDS))
    _set(event, "__pydantic_extra__", None)
    _set(event, "__pydantic_private__", None)
    return event


_OPEN_TAG = "<think>"
_CLOSE_TAG = "</think>"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def new_tool_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


class _ToolBuffer:
    __slots__ = ("args", "completed", "id", "name", "parsed")

    def __init__(self) -> None:
        self.parsed: dict[str, Any] | None = None
        self.id: str | None = None
        self.name = ""
        self.args: list[str] = []
        self.completed = False


class StreamAssembler:
    def __init__(
        self,
        *,
        provider: str,
        model: str,
        request_id: str,
        session_id: str,
        iteration: int,
        emit: Emit | None = None,
        think_tags: bool = False,
    ) -> None:
        self.provider = provider
        self.model = model
        self._rid = request_id
        self._sid = session_id
        self._iteration = iteration
        self._emit = emit
        self._send_line: Callable[[bytes], Awaitable[None]] | None = None  # text deltas' lines, written directly
        self._text_head = b""
        if type(emit) is LineEmit:
            try:
                self._text_head = line_head(T.TEXT_DELTA, request_id, session_id, iteration)
                self._send_line = emit.send_line
            except UnicodeEncodeError:  # a lone surrogate in an id: every line takes the event's escaping path
                pass
        self._seq = 0
        self._started_ns = time.perf_counter_ns()
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._thinking = False
        self._tools: dict[int, _ToolBuffer] = {}
        self._completed: list[MetonaToolCall] = []
        self._usage: MetonaTokenUsage | None = None
        self._finish: MetonaFinishReason | None = None
        self._signature: str | None = None
        self._perf: MetonaPerfStats | None = None
        self._closed = False
        self.tool_names: dict[str, str] = {}
        """Wire name → registry name, for the tool names the adapter had to change for the vendor."""
        self.visible = False
        """True once any content (text, reasoning, a tool call) was emitted: failing over now would duplicate."""
        # <think>…</think> inside the text of OpenAI-compatible servers (vLLM, llama.cpp, LM Studio, …)
        # -1 off, 0 undecided (start of text), 1 inside, 2 after, 3 right after </think> (line breaks dropped)
        self._tag_state = 0 if think_tags else -1
        self._tag_buffer = ""
        self._fallback: ToolTextFallback | None = None

    def tool_fallback(self, tools: Sequence[MetonaToolDef]) -> None:
        """Tool calls arrive as text (no native tool calling): route the text through the lenient parser
        (:mod:`.toolparse`), which turns valid calls of ``tools`` into tool calls at the end."""
        if tools:
            self._fallback = ToolTextFallback(tools, self._emit_text)

    # ---- what adapters call ------------------------------------------------------------------------------

    async def text(self, delta: str) -> None:
        if not delta:
            return
        if type(delta) is not str:  # a vendor's number or object where text belongs: a malformed answer
            raise TypeError("a text delta is not a string")
        if self._tag_state >= 0 and self._tag_state != 2:
            await self._text_with_tags(delta)
            return
        if self._fallback is not None:
            await self._fallback.feed(delta)
            return
        # the hot path of every stream (one call per upstream chunk): _plain_text and _event, inlined
        if self._thinking:
            await self._end_thinking()
        self.visible = True
        self._text.append(delta)
        seq = self._seq
        self._seq = seq + 1
        timestamp = time.time_ns() // 1_000_000
        send_line = self._send_line
        if send_line is not None:
            try:
                line = delta_line(self._text_head, seq, timestamp, delta)
            except orjson.JSONEncodeError:  # a lone surrogate: the event's line escapes it
                pass
            else:
                await send_line(line)
                return
        emit = self._emit
        if emit is None:
            return
        result = emit(
            _make_event(
                {
                    "type": T.TEXT_DELTA,
                    "request_id": self._rid,
                    "session_id": self._sid,
                    "iteration": self._iteration,
                    "seq": seq,
                    "timestamp": timestamp,
                    "delta": delta,
                    "tool_call_delta": None,
                    "tool_call": None,
                    "usage": None,
                    "error": None,
                }
            )
        )
        if result is not None:
            await result

    async def reasoning(self, delta: str) -> None:
        if not delta:
            return
        if type(delta) is not str:
            raise TypeError("a reasoning delta is not a string")
        if not self._thinking:
            self._thinking = True
            await self._event(T.THINKING_START)
        self.visible = True
        self._reasoning.append(delta)
        await self._event(T.REASONING_DELTA, delta)

    async def tool_delta(
        self, index: int, *, id: str | None = None, name: str | None = None, args: str | None = None
    ) -> None:
        """A fragment of tool call ``index`` (name and id usually on the first fragment)."""
        for value in (id, name, args):
            if value is not None and type(value) is not str:
                raise TypeError("a tool call fragment is not a string")
        await self._end_thinking()
        buf = self._tools.get(index)
        if buf is None:
            buf = self._tools[index] = _ToolBuffer()
        if id:
            buf.id = id
        if name:
            buf.name += name
        if args:
            buf.args.append(args)
        if name or args:
            self.visible = True
            shown = self.tool_names.get(name, name) if name else name
            delta = ToolCallDelta(index=index, name=shown, args_delta=args)
            await self._event(T.TOOL_CALL_DELTA, tool_call_delta=delta)

    async def complete_tool(self, index: int) -> None:
        """The vendor says call ``index`` is whole (e.g. Anthropic ``content_block_stop``)."""
        buf = self._tools.get(index)
        if buf is not None and not buf.completed:
            await self._complete(buf)

    async def tool_call(self, *, name: str, args: Any, id: str | None = None) -> None:
        """A whole tool call in one piece (Ollama; any non-streaming answer): no tool_call_delta."""
        if type(name) is not str or (id is not None and type(id) is not str):
            raise TypeError("a tool call's name or id is not a string")
        await self._end_thinking()
        buf = _ToolBuffer()
        buf.id = id
        buf.name = name
        self._tools[-1 - len(self._tools)] = buf  # negative keys never collide with a vendor's indexes
        if isinstance(args, dict):
            buf.parsed = args
        elif isinstance(args, str):
            buf.args.append(args)
        elif args is not None:
            buf.completed = True
            raise self._parse_error(name, "the arguments are not a JSON object")
        await self._complete(buf)

    def usage(self, usage: MetonaTokenUsage) -> None:
        self._usage = usage

    def finish(self, reason: MetonaFinishReason) -> None:
        self._finish = reason

    def signature(self, signature: str) -> None:
        if type(signature) is not str:
            raise TypeError("a reasoning signature is not a string")
        self._signature = (self._signature or "") + signature

    def perf(self, stats: MetonaPerfStats) -> None:
        self._perf = stats

    @property
    def has_tool_calls(self) -> bool:
        return bool(self._tools)

    # ---- the end -----------------------------------------------------------------------------------------

    async def done(self) -> MetonaResponse:
        """Close the stream successfully: pending tool calls, thinking_end, usage, done; the response.

        A pending tool call whose arguments do not parse fails the stream instead (``error`` · ``done``) and
        the ProviderError is raised: the stream is closed either way.
        """
        await self._flush_tags()
        try:
            if self._fallback is not None:
                fallback, self._fallback = self._fallback, None
                for call in await fallback.finish():
                    await self.tool_call(name=call.name, args=call.args)
            for index in sorted(self._tools):
                buf = self._tools[index]
                if not buf.completed:
                    await self._complete(buf)
        except ProviderError as exc:
            await self.fail(exc.error)
            raise
        await self._end_thinking()
        usage = self._usage
        if usage is not None:
            await self._event(T.USAGE, usage=usage)
        self._closed = True
        await self._event(T.DONE)
        finish = self._finish
        if finish is None:
            finish = MetonaFinishReason.TOOL_CALLS if self._completed else MetonaFinishReason.STOP
        elif finish is MetonaFinishReason.STOP and self._completed:
            finish = MetonaFinishReason.TOOL_CALLS  # some servers say "stop" after tool calls
        return self._response(finish, None)

    async def fail(self, error: MetonaError) -> MetonaResponse:
        """Close the stream with ``error`` then ``done``; the partial response carries the error."""
        if self._closed:
            return self._response(MetonaFinishReason.ERROR, error)
        # Shielded (bounded): a failure is often closed from a cancelled request (the local runtime raises its
        # cancellation as a ProviderError), and the emitter may yield to the loop at any line; a cancellation
        # landing between the two lines used to drop the ``done`` (1 in 16 local-model cancels, where the wire
        # writer yields).
        with anyio.move_on_after(_CLOSE_GRACE_S, shield=True):
            await self._end_thinking()
            self._closed = True
            await self._event(T.ERROR, error=error)
            await self._event(T.DONE)
        return self._response(MetonaFinishReason.ERROR, error)

    @property
    def closed(self) -> bool:
        return self._closed

    def _response(self, finish: MetonaFinishReason, error: MetonaError | None) -> MetonaResponse:
        reasoning = "".join(self._reasoning)
        return MetonaResponse(
            meta=MetonaResponseMeta(
                request_id=self._rid,
                provider=self.provider,
                model=self.model,
                latency_ms=(time.perf_counter_ns() - self._started_ns) // 1_000_000,
                timestamp=now_ms(),
                perf_stats=self._perf,
            ),
            content="".join(self._text),
            reasoning_content=reasoning or None,
            reasoning_signature=self._signature,
            tool_calls=list(self._completed) or None,
            usage=self._usage or MetonaTokenUsage(input_tokens=0, output_tokens=0, total_tokens=0),
            finish_reason=finish,
            error=error,
        )

    # ---- internals ---------------------------------------------------------------------------------------

    async def _event(
        self,
        type_: MetonaStreamEventType,
        delta: str | None = None,
        *,
        tool_call_delta: ToolCallDelta | None = None,
        tool_call: MetonaToolCall | None = None,
        usage: MetonaTokenUsage | None = None,
        error: MetonaError | None = None,
    ) -> None:
        seq = self._seq
        self._seq = seq + 1
        if self._emit is None:
            return
        result = self._emit(
            _make_event(
                {
                    "type": type_,
                    "request_id": self._rid,
                    "session_id": self._sid,
                    "iteration": self._iteration,
                    "seq": seq,
                    "timestamp": time.time_ns() // 1_000_000,
                    "delta": delta,
                    "tool_call_delta": tool_call_delta,
                    "tool_call": tool_call,
                    "usage": usage,
                    "error": error,
                }
            )
        )
        if result is not None:
            await result

    async def _plain_text(self, delta: str) -> None:
        if self._fallback is not None:
            await self._fallback.feed(delta)
            return
        await self._emit_text(delta)

    async def _emit_text(self, delta: str) -> None:
        await self._end_thinking()
        self.visible = True
        self._text.append(delta)
        await self._event(T.TEXT_DELTA, delta)

    async def _end_thinking(self) -> None:
        if self._thinking:
            self._thinking = False
            await self._event(T.THINKING_END)

    async def _complete(self, buf: _ToolBuffer) -> None:
        buf.completed = True
        raw = "".join(buf.args).strip()
        if not buf.name:
            raise self._parse_error("?", "a tool call arrived without a name")
        if buf.parsed is not None:
            args: Any = buf.parsed
        elif not raw:
            args = {}
        else:
            try:
                args = json.loads(raw)
            except (ValueError, RecursionError):
                raise self._parse_error(buf.name, "the arguments are not valid JSON") from None
            if not isinstance(args, dict):
                raise self._parse_error(buf.name, "the arguments are not a JSON object")
        self.visible = True
        name = self.tool_names.get(buf.name, buf.name)
        call = MetonaToolCall(
            id=buf.id or new_tool_call_id(), name=name, args=args, iteration=self._iteration, timestamp=now_ms()
        )
        self._completed.append(call)
        await self._event(T.TOOL_CALL_COMPLETE, tool_call=call)

    def _parse_error(self, name: str, why: str) -> ProviderError:
        return provider_error(
            MetonaErrorCode.PARSE_ERROR,
            f"{self.provider}: tool call {name!r}: {why}",
            self.provider,
            retryable=False,
            interrupted=False,
        )

    async def _text_with_tags(self, delta: str) -> None:
        """Route ``<think>…</think>`` at the start of the text to reasoning; tags may be split across chunks."""
        data = self._tag_buffer + delta
        self._tag_buffer = ""
        if self._tag_state == 3:  # just after </think>: drop the separating line breaks
            data = data.lstrip("\r\n")
            if data:
                self._tag_state = 2
                await self._plain_text(data)
            return
        if self._tag_state == 0:
            stripped = data.lstrip()
            if not stripped:
                self._tag_buffer = data
                return
            if stripped.startswith(_OPEN_TAG):
                self._tag_state = 1
                data = stripped[len(_OPEN_TAG) :]
            elif _OPEN_TAG.startswith(stripped):
                self._tag_buffer = data  # maybe the start of "<think>"
                return
            else:
                self._tag_state = 2
                await self._plain_text(data)
                return
        # inside the thinking block
        end = data.find(_CLOSE_TAG)
        if end >= 0:
            await self.reasoning(data[:end])
            self._tag_state = 2
            rest = data[end + len(_CLOSE_TAG) :].lstrip("\r\n")
            await self._end_thinking()
            if rest:
                await self._plain_text(rest)
            else:
                self._tag_state = 3  # the blank lines after </think> may come in the next chunks
            return
        keep = _partial_suffix(data, _CLOSE_TAG)
        if keep:
            self._tag_buffer = data[-keep:]
            data = data[:-keep]
        await self.reasoning(data)

    async def _flush_tags(self) -> None:
        if self._tag_buffer:
            pending, self._tag_buffer = self._tag_buffer, ""
            if self._tag_state == 1:
                await self.reasoning(pending)
            else:
                self._tag_state = 2
                await self._plain_text(pending)


def _partial_suffix(data: str, tag: str) -> int:
    """How many trailing characters of ``data`` could begin ``tag``."""
    for n in range(min(len(tag) - 1, len(data)), 0, -1):
        if tag.startswith(data[-n:]):
            return n
    return 0
