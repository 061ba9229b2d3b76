"""The ReAct loop of one agent run (IR 架构概览 steps 3-5; phase-2 §6 events).

Per iteration (``meta.iteration`` from 1): build the context (system prompt sections, the history the model
sees, relevant memories, available tools), compress it when it fills the window, make one model call (retry
and failover happen inside the provider layer and are recorded), then run the tool calls of the answer one by
one — asking the host's permission first where a tool requires it — and append the assistant message and one
``tool`` message per call (``summary`` for the model, the raw ``result`` kept for audit). The run ends on a
final answer (no tool calls), on ``max_iterations``, on the token budget, on its timeout, on cancel, or on a
non-recoverable provider error. Every step is a trace event.

The full transcript is kept (``messages``); compression only changes the view the model is sent (``view``),
so nothing is destroyed.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from sidecar.common import ErrorInfo
from sidecar.errors import SidecarError
from sidecar.ir import (
    MetonaContext,
    MetonaGenerationParams,
    MetonaMemoryItem,
    MetonaMessage,
    MetonaRequest,
    MetonaRequestMeta,
    MetonaResponse,
    MetonaStreamEvent,
    MetonaStreamEventType,
    MetonaSystemPrompt,
    MetonaToolCall,
    MetonaToolDef,
    MetonaToolResult,
)
from sidecar.providers.errors import ProviderError, phase2_code
from sidecar.providers.mock import SUMMARY_REQUEST_SUFFIX
from sidecar.trace.redact import cut_credentials

from . import models as ev
from .context import ContextBuilder
from .models import RunSummary
from .permissions import PermissionBroker
from .store import RunEnd, RunStore
from .tokens import TokenCalibrator
from .tools.base import ToolContext
from .tools.registry import ToolExecution, ToolRegistry
from .tracing import TraceWriter

logger = logging.getLogger(__name__)

AGENT_VERSION = "metona-sidecar-agent/1"
TRACE_RESULT_MAX_BYTES = 16_384
"""A tool result larger than this (as JSON) goes to an artifact; the event keeps its summary and reference."""
TRACE_SUMMARY_CHARS = 1_000
"""The tool summary kept in ToolCall/ToolResult events (the model got the full one)."""
START_GRACE_S = 30.0
"""A run whose create answer never went out (the request was cancelled) ends ``RunCancelled`` after this."""
FUTILE_REPEATS = 2
"""The same tool, arguments and error this many times: the model is told to change course."""

MemorySource = Callable[[str, str, int], Awaitable[list[MetonaMemoryItem]]]
LineSink = Callable[[bytes], Awaitable[None]]
Notify = Callable[[str, Any], Awaitable[None]]


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class RunSpec:
    run_id: str
    session_id: str
    provider_id: str
    model: str
    request: MetonaRequest
    max_iterations: int
    tools: list[MetonaToolDef]
    token_budget: int | None
    context_window: int
    permission_timeout_s: float
    workspace_roots: Sequence[str] = ()
    stream: LineSink | None = None
    notify: Notify | None = None


@dataclass
class Outcome:
    event: str
    status: str
    data: dict[str, Any]
    output: str | None = None
    error: ErrorInfo | None = None


class _Stop(Exception):
    """Ends the loop with ``outcome``."""

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome


@dataclass
class _Counters:
    model_calls: int = 0
    tool_calls: int = 0
    tokens: int = 0
    errors: int = 0
    invalid_tool_calls: int = 0
    failures: dict[tuple[str, str, str], int] = field(default_factory=dict)


class AgentLoop:
    def __init__(
        self,
        spec: RunSpec,
        *,
        providers: Any,
        registry: ToolRegistry,
        builder: ContextBuilder,
        broker: PermissionBroker,
        trace: TraceWriter,
        memories: MemorySource | None = None,
        services: Any = None,
        calibrator: TokenCalibrator | None = None,
    ) -> None:
        self.spec = spec
        self._providers = providers
        self._registry = registry
        self._builder = builder
        self._broker = broker
        self.trace = trace
        self._memories = memories
        self._services = services
        self._calibrator = calibrator
        self._tool_names = {t.name for t in spec.tools}
        self.counters = _Counters()
        self.iterations = 0
        self.ready: anyio.Event | None = None
        """Set once the run may start (its create answer is queued); ``None``: at once."""
        self.cancel_reason = "user_aborted"
        """What a cancellation means (``shutdown`` when the sidecar stops)."""
        self.started = time.perf_counter()
        self.messages: list[MetonaMessage] = list(spec.request.messages)
        """The whole transcript (never compressed)."""
        self.view: list[MetonaMessage] = list(spec.request.messages)
        """What the model is sent (compressed when the window fills)."""

    # -- the run ----------------------------------------------------------------------------------------------

    def summary(self) -> RunSummary:
        c = self.counters
        return RunSummary(
            model_calls=c.model_calls,
            tool_calls=c.tool_calls,
            duration_ms=round((time.perf_counter() - self.started) * 1000),
            token_usage=c.tokens,
            errors=c.errors,
            invalid_tool_calls=c.invalid_tool_calls,
        )

    async def run(self) -> Outcome:
        """Run to the end and commit the terminal event with the run row. Cancellation: ``RunCancelled``, re-raised."""
        timeout_ms = self.spec.request.constraints.timeout_ms if self.spec.request.constraints else None
        outcome: Outcome
        try:
            if not await self._released():
                raise _Stop(self._cancelled("not_started", "REQUEST_CANCELLED"))
            with anyio.move_on_after(timeout_ms / 1000 if timeout_ms else None) as scope:
                outcome = await self._loop()
            if scope.cancelled_caught:
                outcome = self._failed("TIMEOUT", f"The run exceeded its time limit of {timeout_ms} ms.")
        except _Stop as stop:
            outcome = stop.outcome
        except anyio.get_cancelled_exc_class():
            code = "USER_ABORTED" if self.cancel_reason == "user_aborted" else "SHUTTING_DOWN"
            await self._end(self._cancelled(self.cancel_reason, code))
            raise
        except SidecarError as exc:  # e.g. the provider was deleted while the run used it
            outcome = self._failed(exc.code, exc.message, exc.details)
        except Exception:
            logger.exception("agent run %s failed unexpectedly", self.spec.run_id)
            outcome = self._failed("AGENT_INTERNAL_ERROR", "The agent run failed unexpectedly.")
        await self._end(outcome)
        return outcome

    async def _end(self, outcome: Outcome) -> None:
        summary = self.summary()
        data = {**outcome.data, "iterations": self.iterations, "summary": summary.model_dump()}
        error = outcome.error and ErrorInfo.model_validate(self.trace.sanitize(outcome.error.model_dump()))
        output = outcome.output and cut_credentials(outcome.output, self.trace.secrets)  # the whole answer, no keys
        end = RunEnd(outcome.status, self.iterations, summary, output=output, error=error)
        await self.trace.finish(outcome.event, data, lambda conn: RunStore.finish(conn, self.spec.run_id, end))

    async def _released(self) -> bool:
        """Wait until the create answer is on the wire (stream lines must not precede it); False if it never was."""
        if self.ready is None:
            return True
        with anyio.move_on_after(START_GRACE_S):
            await self.ready.wait()
        return self.ready.is_set()

    def _cancelled(self, reason: str, code: str) -> Outcome:
        return Outcome(ev.RUN_CANCELLED, "cancelled", {"reason": reason, "code": code})

    def _failed(self, code: str, message: str, details: dict[str, Any] | None = None) -> Outcome:
        error = ErrorInfo(code=code, message=message, details=details or {})
        return Outcome(ev.RUN_FAILED, "failed", {"error": error.model_dump()}, error=error)

    async def _loop(self) -> Outcome:
        spec = self.spec
        user_input = last_user_text(self.messages)
        memories = await self._relevant_memories(user_input)
        reminders: list[str] = []
        for iteration in range(1, spec.max_iterations + 1):
            self.iterations = iteration
            context = self._builder.build(
                context_id=f"{spec.run_id}.c{iteration}",
                session_id=spec.session_id,
                base_prompt=spec.request.system_prompt,
                history=self.view,
                memories=memories,
                tools=spec.tools,
                user_input=user_input,
                iteration=iteration,
                context_window=spec.context_window,
                reminders=reminders,
            )
            if context.needs_compression:
                context = await self._compress(context, iteration, memories, reminders)
            call_id, response = await self._ask(context, iteration, memories, reminders)
            reminders = []
            assistant = MetonaMessage(
                role="assistant",
                content=response.content,
                reasoning_content=response.reasoning_content,
                reasoning_signature=response.reasoning_signature,
                tool_calls=response.tool_calls or None,
                timestamp=now_ms(),
                iteration=iteration,
            )
            self.messages.append(assistant)
            self.view.append(assistant)
            if not response.tool_calls:
                return Outcome(
                    ev.RUN_COMPLETED,
                    "completed",
                    {"output": response.content, "finish_reason": response.finish_reason.value},
                    output=response.content,
                )
            limit = spec.request.constraints.max_tool_calls if spec.request.constraints else None
            for n, call in enumerate(response.tool_calls):
                over = limit is not None and n >= limit
                message, repeated = await self._tool(call, call_id, iteration, over_limit=limit if over else None)
                self.messages.append(message)
                self.view.append(message)
                if repeated:
                    reminders.append(repeated)
            if spec.token_budget is not None and self.counters.tokens >= spec.token_budget:
                return self._failed(
                    "TOKEN_BUDGET_EXCEEDED",
                    f"The run used {self.counters.tokens} tokens, over its budget of {spec.token_budget}.",
                    {"token_usage": self.counters.tokens, "token_budget": spec.token_budget},
                )
        return self._failed(
            "MAX_ITERATIONS",
            f"The run stopped after {spec.max_iterations} iterations without a final answer.",
            {"max_iterations": spec.max_iterations},
        )

    async def _ask(
        self, context: MetonaContext, iteration: int, memories: list[MetonaMemoryItem], reminders: list[str]
    ) -> tuple[str, MetonaResponse]:
        """The iteration's model call. When the provider says the context is too long although the estimate fit,
        the context is compressed against what was sent and the call made once more (then the error stands)."""
        spec = self.spec
        for attempt in (1, 2):
            call_id = f"{spec.run_id}.m{self.counters.model_calls + 1}"
            request = MetonaRequest(
                meta=MetonaRequestMeta(
                    session_id=spec.session_id,
                    iteration=iteration,
                    request_id=call_id,
                    timestamp=now_ms(),
                    agent_version=AGENT_VERSION,
                ),
                system_prompt=context.system_prompt,
                messages=context.history,
                tools=context.available_tools or None,
                params=spec.request.params,
                constraints=spec.request.constraints,
            )
            try:
                return call_id, await self._model_call(call_id, iteration, request, context.estimated_tokens)
            except _Stop as stop:
                if attempt == 2 or not _context_too_long(stop.outcome):
                    raise
            # what was sent counts as a full window now: compress to half of it
            context = await self._compress(
                context,
                iteration,
                memories,
                reminders,
                window=max(1, min(spec.context_window, context.estimated_tokens)),
            )
        raise AssertionError("unreachable")

    # -- context ----------------------------------------------------------------------------------------------

    async def _relevant_memories(self, query: str) -> list[MetonaMemoryItem]:
        if self._memories is None or not query.strip():
            return []
        try:
            return await self._memories(query, self.spec.session_id, 5)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception:  # memory is an aid, not a precondition of the run
            logger.warning("run %s: relevant memories unavailable", self.spec.run_id, exc_info=True)
            return []

    async def _compress(
        self,
        context: MetonaContext,
        iteration: int,
        memories: list[MetonaMemoryItem],
        reminders: list[str],
        *,
        window: int | None = None,
    ) -> MetonaContext:
        async def summarise(transcript: str) -> str | None:
            return await self._summarise(transcript, iteration)

        compressed, record = await self._builder.compress(
            context,
            summarise,
            context_window=window or self.spec.context_window,
            base_prompt=self.spec.request.system_prompt,
            memories=memories,
            reminders=reminders,
        )
        self.view = list(compressed.history)
        forced = {"forced_by": "context_length_exceeded", "window": window} if window is not None else {}
        self.trace.emit(ev.CONTEXT_COMPRESSED, {"iteration": iteration, **record.to_event(), **forced})
        return compressed

    async def _summarise(self, transcript: str, iteration: int) -> str | None:
        """One model call that summarises earlier rounds (a ``ModelCall*`` pair with ``purpose`` compression)."""
        spec = self.spec
        call_id = f"{spec.run_id}.m{self.counters.model_calls + 1}"
        request = MetonaRequest(
            meta=MetonaRequestMeta(
                session_id=spec.session_id,
                iteration=iteration,
                request_id=call_id + SUMMARY_REQUEST_SUFFIX,
                timestamp=now_ms(),
                agent_version=AGENT_VERSION,
            ),
            system_prompt=MetonaSystemPrompt(
                role_definition="You condense an assistant's earlier conversation for its own later use.",
                output_constraints=(
                    "Write a compact summary in the conversation's language: the user's goals and requests, "
                    "facts and decisions established, file paths, numbers and names that were mentioned, and what "
                    "is still open. No preamble."
                ),
                safety_guidelines="Never include API keys, passwords or other secrets.",
            ),
            messages=[MetonaMessage(role="user", content=transcript, timestamp=now_ms())],
            params=MetonaGenerationParams(max_tokens=1024, temperature=0.2, stream=False),
        )
        try:
            response = await self._model_call(call_id, iteration, request, None, purpose="compression")
        except _Stop:
            return None  # the deterministic summary stands in; the run goes on
        return response.content or None

    # -- model calls ------------------------------------------------------------------------------------------

    async def _model_call(
        self,
        call_id: str,
        iteration: int,
        request: MetonaRequest,
        estimated_tokens: int | None,
        *,
        purpose: str = "react",
    ) -> MetonaResponse:
        spec = self.spec
        self.counters.model_calls += 1
        started = {"model_call_id": call_id, "provider_id": spec.provider_id, "model": spec.model, "step": iteration}
        if purpose != "react":
            started["purpose"] = purpose
        self.trace.emit(ev.MODEL_CALL_STARTED, started)
        streaming = bool(request.params.stream) and spec.stream is not None
        t0 = time.perf_counter()
        try:
            response = await self._providers.chat(
                spec.provider_id,
                spec.model,
                request,
                emit=self._emitter(call_id) if streaming else None,
                notify=spec.notify,
                observe=self._observer(call_id),
            )
        except ProviderError as exc:
            code, _status = phase2_code(exc.error, interrupted=exc.interrupted)
            details = {"error": exc.error.model_dump(mode="json")}
            raise self._call_failed(call_id, t0, ErrorInfo(code=code, message=exc.error.message, details=details),
                                    exc.error.retryable) from None  # fmt: skip
        except SidecarError as exc:  # not the model's failure: the provider is gone, a setting is wrong, ...
            error = ErrorInfo(code=exc.code, message=exc.message, details=exc.details)
            raise self._call_failed(call_id, t0, error, False) from None
        except anyio.get_cancelled_exc_class():
            error = ErrorInfo(code="REQUEST_CANCELLED", message="The model call was cancelled with its run.")
            self._call_failed(call_id, t0, error, False, counts=False)
            raise
        usage = response.usage
        self.counters.tokens += usage.total_tokens
        if not streaming:  # the trace still gets what the model said
            if response.reasoning_content:
                self.trace.emit(ev.THINKING_DELTA, {"model_call_id": call_id, "delta": response.reasoning_content})
            if response.content:
                self.trace.emit(ev.TEXT_DELTA, {"model_call_id": call_id, "delta": response.content})
        self.trace.emit(
            ev.MODEL_CALL_COMPLETED,
            {
                "model_call_id": call_id,
                "duration_ms": _ms(t0),
                "finish_reason": response.finish_reason.value,
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "provider_id": response.meta.provider,
                "model": response.meta.model,
            },
        )
        self.trace.emit(
            ev.USAGE,
            {
                "model_call_id": call_id,
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "total_tokens": usage.total_tokens,
                "cumulative_tokens": self.counters.tokens,
            },
        )
        if estimated_tokens and usage.input_tokens and self._calibrator is not None:
            self._calibrator.observe(round(estimated_tokens / self._calibrator.factor), usage.input_tokens)
        return response

    def _call_failed(self, call_id: str, t0: float, error: ErrorInfo, retryable: bool, *, counts: bool = True) -> _Stop:
        """Record a failed model call (``counts``: as an error of the run); the :class:`_Stop` that fails the run."""
        self.counters.errors += counts
        data = {"model_call_id": call_id, "duration_ms": _ms(t0), "error": error.model_dump(), "retryable": retryable}
        self.trace.emit(ev.MODEL_CALL_FAILED, data)
        return _Stop(Outcome(ev.RUN_FAILED, "failed", {"error": error.model_dump()}, error=error))

    def _emitter(self, call_id: str) -> Callable[[MetonaStreamEvent], Awaitable[None]]:
        sink = self.spec.stream
        assert sink is not None
        trace = self.trace

        async def emit(event: MetonaStreamEvent) -> None:
            kind = event.type
            if kind is MetonaStreamEventType.TEXT_DELTA and event.delta:
                await trace.emit_bounded(ev.TEXT_DELTA, {"model_call_id": call_id, "delta": event.delta})
            elif kind is MetonaStreamEventType.REASONING_DELTA and event.delta:
                await trace.emit_bounded(ev.THINKING_DELTA, {"model_call_id": call_id, "delta": event.delta})
            await sink(event.to_line())

        return emit

    def _observer(self, call_id: str) -> Callable[[str, dict[str, Any]], Awaitable[None]]:
        async def observe(kind: str, data: dict[str, Any]) -> None:
            self.counters.errors += 1  # the attempt (or the provider) that failed
            name = ev.PROVIDER_RETRY if kind == "retry" else ev.PROVIDER_SWITCHED
            self.trace.emit(name, {"model_call_id": call_id, **data})

        return observe

    # -- tools ------------------------------------------------------------------------------------------------

    async def _tool(
        self, call: MetonaToolCall, parent_id: str, iteration: int, *, over_limit: int | None = None
    ) -> tuple[MetonaMessage, str | None]:
        """Run one tool call (after permission); its ``tool`` message and, when futile, a reminder for the model."""
        spec = self.spec
        self.counters.tool_calls += 1
        tool = self._registry.get(call.name)
        self.trace.emit(
            ev.TOOL_CALL,
            {
                "tool_call_id": call.id,
                "tool_name": call.name,
                "args": self.trace.sanitize(call.args, max_chars=500),
                "parent_model_call_id": parent_id,
                "step": iteration,
            },
        )
        ctx = ToolContext(
            run_id=spec.run_id,
            session_id=spec.session_id,
            tool_call_id=call.id,
            workspace_roots=spec.workspace_roots,
            services=self._services,
        )
        execution: ToolExecution | None = None
        if over_limit is not None:
            execution = _refused(
                call,
                "TOOL_CALL_LIMIT",
                f"not run: at most {over_limit} tool call(s) per turn (constraints.maxToolCalls)",
            )
        elif call.name not in self._tool_names or tool is None:
            execution = _refused(
                call,
                "TOOL_NOT_ALLOWED" if tool is not None else "UNKNOWN_TOOL",
                f"tool {call.name!r} is not available in this run; available: {', '.join(sorted(self._tool_names))}",
                invalid=True,
            )
        elif (execution := self._registry.check(call, ctx)) is not None:
            pass  # refused as it stands (invalid arguments, ...): nothing to ask the user about
        elif tool.requires_permission:
            decision = await self._permission(call, tool, parent_id)
            if decision not in ("allow_once", "allow_always"):
                reason = "timed out waiting for the user's permission" if decision is None else "denied by the user"
                execution = _refused(call, "PERMISSION_DENIED", f"permission for {call.name} was {reason}")
        if execution is None:
            try:
                execution = await self._registry.execute(call, ctx)
            except anyio.get_cancelled_exc_class():
                self.trace.emit(
                    ev.TOOL_RESULT,
                    {
                        "tool_call_id": call.id,
                        "tool_name": call.name,
                        "parent_model_call_id": parent_id,
                        "step": iteration,
                        "success": False,
                        "error": "the run was cancelled while the tool ran (its work may be done)",
                        "error_code": "CANCELLED",
                    },
                )
                raise
        with anyio.CancelScope(shield=True):  # what a tool did is recorded even if the run is cancelled meanwhile
            return await self._record_result(call, execution, parent_id, iteration)

    async def _permission(self, call: MetonaToolCall, tool: Any, parent_id: str) -> str | None:
        spec = self.spec
        base = {"tool_call_id": call.id, "tool_name": call.name, "permission": tool.permission}
        if self._broker.remembered(spec.session_id, call.name):
            self.trace.emit(
                ev.PERMISSION_RESOLVED,
                {"request_id": None, **base, "decision": "allow_always", "source": "session_rule"},
            )
            return "allow_always"
        request = self._broker.open(
            spec.run_id,
            spec.session_id,
            tool_call_id=call.id,
            tool_name=call.name,
            permission=tool.permission,
            risk_level=str(tool.risk_level),
        )
        self.trace.emit(
            ev.PERMISSION_REQUIRED,
            {
                "request_id": request.request_id,
                **base,
                "risk_level": str(tool.risk_level),
                "args": self.trace.sanitize(call.args, max_chars=500),
                "parent_model_call_id": parent_id,
                "timeout_ms": round(spec.permission_timeout_s * 1000),
            },
        )
        await self.trace.flush()  # durable (and pushed to subscribers) before the run waits on it
        resolved = {"request_id": request.request_id, **base}
        try:
            decision = await self._broker.wait(request, spec.permission_timeout_s)
        except anyio.get_cancelled_exc_class():
            self.trace.emit(ev.PERMISSION_RESOLVED, {**resolved, "decision": "deny", "source": "cancelled"})
            raise
        source = request.source if decision is not None else "timeout"
        self.trace.emit(ev.PERMISSION_RESOLVED, {**resolved, "decision": decision or "deny", "source": source})
        return decision

    async def _record_result(
        self, call: MetonaToolCall, execution: ToolExecution, parent_id: str, iteration: int
    ) -> tuple[MetonaMessage, str | None]:
        result = execution.result
        if execution.invalid_arguments:
            self.counters.invalid_tool_calls += 1
        if not result.success:
            self.counters.errors += 1
        trace = self.trace
        data: dict[str, Any] = {
            "tool_call_id": call.id,
            "tool_name": call.name,
            "parent_model_call_id": parent_id,
            "step": iteration,
            "success": result.success,
            "duration_ms": result.duration_ms,
            "summary": trace.sanitize(result.summary or "", max_chars=TRACE_SUMMARY_CHARS),
        }
        if not result.success:
            data["error"] = trace.sanitize(result.error or "")
            data["error_code"] = execution.error_code
            data["invalid_arguments"] = execution.invalid_arguments

        def prepare() -> tuple[Any, int]:  # a result may be megabytes: redact and measure it off the event loop
            clean = trace.sanitize(result.result, max_chars=None)
            return clean, len(json.dumps(clean, ensure_ascii=False, default=str).encode())

        clean, size = await anyio.to_thread.run_sync(prepare)
        if size > TRACE_RESULT_MAX_BYTES:
            artifact_id = f"art_{uuid.uuid4().hex}"
            run_id = self.spec.run_id

            def store(conn: Any, _writer: Any) -> None:
                RunStore.add_artifact(conn, artifact_id, run_id, call.id, clean)

            await trace.flush(store)
            data["artifact"] = {"artifact_id": artifact_id, "size_bytes": size}
        else:
            data["result"] = clean
        trace.emit(ev.TOOL_RESULT, data, clean=True)
        for citation in execution.citations:
            self.trace.emit(ev.CITATION, {"tool_call_id": call.id, "parent_model_call_id": parent_id, **citation})
        message = MetonaMessage(role="tool", content="", tool_result=result, timestamp=now_ms(), iteration=iteration)
        return message, self._futile(call, result)

    def _futile(self, call: MetonaToolCall, result: MetonaToolResult) -> str | None:
        """A reminder once the same call failed the same way ``FUTILE_REPEATS`` times (trace ``LoopDetected``)."""
        if result.success:
            return None
        key = (call.name, json.dumps(call.args, sort_keys=True, default=str), result.error or "")
        seen = self.counters.failures.get(key, 0) + 1
        self.counters.failures[key] = seen
        if seen < FUTILE_REPEATS:
            return None
        self.trace.emit(
            ev.LOOP_DETECTED,
            {"tool_name": call.name, "tool_call_id": call.id, "repeats": seen, "error": result.error or ""},
        )
        return (
            f"You called {call.name} {seen} times with the same arguments and it failed the same way each time "
            f"({result.error}). Do not call it like that again: change the arguments, use another tool, or answer "
            "the user with what you know and say what is missing."
        )


def _refused(call: MetonaToolCall, code: str, message: str, *, invalid: bool = False) -> ToolExecution:
    return ToolExecution(
        result=MetonaToolResult(
            tool_call_id=call.id,
            tool_name=call.name,
            result=None,
            summary=f"{call.name} failed: {message}",
            success=False,
            error=message,
            duration_ms=0,
            timestamp=now_ms(),
        ),
        error_code=code,
        invalid_arguments=invalid,
        citations=[],
    )


def _context_too_long(outcome: Outcome) -> bool:
    error = outcome.error
    return error is not None and error.details.get("error", {}).get("code") == "context_length_exceeded"


def last_user_text(messages: list[MetonaMessage]) -> str:
    for message in reversed(messages):
        if message.role == "user":
            return message.content
    return ""


def _ms(t0: float) -> int:
    return round((time.perf_counter() - t0) * 1000)
