"""The ``mock`` provider: scripted turns, offline, through the same assembler as every vendor adapter.

Used by tests, benchmarks and demos (phase-2 names ``mock``/``mock-1``). Its script lives in the provider's
``options.script``: one turn per ReAct iteration (``meta.iteration`` 1 → turn 0; the last turn repeats). A turn
may stream reasoning, text and tool calls in chunks, pause between chunks, report usage, or fail with a
MetonaError (before or after its visible output). Without a script it answers ``mock: <last user message>``.
A request whose ``meta.requestId`` ends with :data:`SUMMARY_REQUEST_SUFFIX` (the agent's context-compression
calls) is answered by the script's ``summary`` turn when it has one.
"""

from __future__ import annotations

from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field

from ..ir import MetonaErrorCode, MetonaFinishReason, MetonaMessage, MetonaRequest, MetonaTokenUsage
from .base import BaseAdapter, last_user_text
from .errors import provider_error
from .stream import StreamAssembler


class MockToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class MockError(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: MetonaErrorCode = MetonaErrorCode.MODEL_OVERLOADED
    message: str = "scripted failure"
    retryable: bool | None = None
    retry_after_ms: int | None = Field(default=None, ge=0)
    after_output: bool = False
    """Fail after the turn's text went out (a mid-stream failure) instead of before it."""
    times: int | None = Field(default=None, ge=1)
    """Fail only the first N calls of this turn (then answer normally): exercises retries."""


class MockTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = ""
    reasoning: str = ""
    tool_calls: list[MockToolCall] = Field(default_factory=list)
    chunk_chars: int = Field(default=8, ge=1)
    delay_ms: float = Field(default=0, ge=0)
    """Pause between chunks (lets a test cancel mid-stream)."""
    usage: tuple[int, int] | None = None
    """(input, output) tokens; default: an estimate from the characters."""
    finish: Literal["stop", "length", "tool_calls", "content_filter"] | None = None
    error: MockError | None = None
    echo: bool = False
    """Answer ``mock: <last user message>`` (the behaviour without a script)."""


class MockScript(BaseModel):
    model_config = ConfigDict(extra="forbid")
    turns: list[MockTurn] = Field(default_factory=lambda: [MockTurn(echo=True)], min_length=1)
    summary: MockTurn | None = None
    """The answer to context-compression calls (requests whose ``meta.requestId`` ends with ``:summary``)."""


SUMMARY_REQUEST_SUFFIX = ":summary"


class MockAdapter(BaseAdapter):
    protocol = "mock"
    stream_path = send_path = ""

    def __init__(self, config: Any, *, transport: Any = None, client: Any = None) -> None:
        super().__init__(config, transport=transport, client=client)
        raw = config.options.get("script")
        self.script = MockScript.model_validate(raw) if raw is not None else MockScript()
        self._failures: dict[int, int] = {}

    async def _call(self, request: MetonaRequest, model: str, asm: StreamAssembler, stream: bool) -> None:
        if self.script.summary is not None and request.meta.request_id.endswith(SUMMARY_REQUEST_SUFFIX):
            index, turn = -1, self.script.summary
        else:
            index = min(request.meta.iteration, len(self.script.turns)) - 1
            turn = self.script.turns[index]
        error = turn.error
        if error is not None and error.times is not None:
            seen = self._failures.get(index, 0)
            self._failures[index] = seen + 1
            if seen >= error.times:
                error = None
        if error is not None and not error.after_output:
            raise self._error(error)
        text = f"mock: {last_user_text(request.messages)}" if turn.echo else turn.text
        await self._chunks(turn.reasoning, turn, asm.reasoning, stream)
        await self._chunks(text, turn, asm.text, stream)
        if error is not None:
            raise self._error(error, interrupted=True)
        for i, call in enumerate(turn.tool_calls):
            await asm.tool_delta(i, id=call.id, name=call.name)
            await asm.tool_delta(i, args=_json(call.args))
        if turn.usage is not None:
            prompt, output = turn.usage
        else:
            prompt = _prompt_chars(request) // 4 + 1
            output = (len(text) + len(turn.reasoning)) // 4 + 1
        asm.usage(MetonaTokenUsage(input_tokens=prompt, output_tokens=output, total_tokens=prompt + output))
        if turn.finish is not None:
            asm.finish(MetonaFinishReason(turn.finish))

    async def _chunks(self, text: str, turn: MockTurn, sink: Any, stream: bool) -> None:
        if not text:
            return
        step = turn.chunk_chars if stream else len(text)
        for start in range(0, len(text), step):
            if turn.delay_ms and start:
                await anyio.sleep(turn.delay_ms / 1000)
            await sink(text[start : start + step])

    def _error(self, error: MockError, *, interrupted: bool = False) -> Exception:
        return provider_error(
            error.code,
            f"{self.config.provider_id}: {error.message}",
            self.config.provider_id,
            retryable=error.retryable,
            provider_code="mock",
            retry_after_ms=error.retry_after_ms,
            interrupted=interrupted,
        )


def _prompt_chars(request: MetonaRequest) -> int:
    """Characters the model would read of ``request``: system prompt, messages, tool definitions."""
    sp = request.system_prompt
    n = (
        len(sp.role_definition)
        + len(sp.output_constraints)
        + len(sp.safety_guidelines)
        + len(sp.dynamic_reminders or "")
    )
    n += sum(_chars(m) for m in request.messages)
    for tool in request.tools or ():
        n += len(tool.name) + len(tool.description) + len(tool.parameters.model_dump_json())
    return n


def _chars(message: MetonaMessage) -> int:
    """Characters the model would read of ``message`` (for the usage estimate)."""
    n = len(message.content)
    if message.tool_result is not None:
        n += len(message.tool_result.summary or message.tool_result.error or "")
    for call in message.tool_calls or ():
        n += len(call.name) + len(_json(call.args))
    return n


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)
