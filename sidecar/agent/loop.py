"""The ReAct loop of one agent run (IR 架构概览 steps 3-5; phase-2 §6 events).

Per iteration (``meta.iteration`` from 1): build the context (system prompt sections, the history the model
sees, relevant memories, available tools), compress it when it fills the window, make one model call (retry
and failover happen inside the provider layer and are recorded), then run the tool calls of the answer one by
one — asking the host's permission first where a tool requires it — and append the assistant message and one
``tool`` message per call (``summary`` for the model, the raw ``result`` kept for audit). The run ends on a
final answer (no tool calls), on ``max_iterations``, on the token budget, on its timeout, on cancel, or on a
non-recoverable provider error. Every step is a trace event. The tool step itself is :mod:`.toolsteps`.

The full transcript is kept (``messages``); compression only changes the view the model is sent (``view``),
so nothing is destroyed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from sidecar.core.common import ErrorInfo
from sidecar.core.errors import SidecarError
from sidecar.core.redact import cut_credentials
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
)
from sidecar.providers.base import last_user_text
from sidecar.providers.errors import ProviderError, phase2_code
from sidecar.providers.mock import SUMMARY_REQUEST_SUFFIX

from . import models as ev
from .context import SUMMARISE_INSTRUCTIONS, ContextBuilder
from .models import RunSummary
from .permissions import PermissionBroker
from .runspec import Counters, MemorySource, RunSpec, now_ms
from .store import RunEnd, RunStore
from .tokens import TokenCalibrator
from .tools.registry import ToolRegistry
from .toolsteps import ToolSteps
from .tracing import TraceWriter

logger = logging.getLogger(__name__)

AGENT_VERSION = "metona-sidecar-agent/1"
START_GRACE_S = 30.0
"""A run whose create answer never went out (the request was cancelled) ends ``RunCancelled`` after this."""


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
        self._builder = builder
        self.trace = trace
        self._memories = memories
        self._calibrator = calibrator
        self.counters = Counters()
        self._tools = ToolSteps(
            spec, registry=registry, broker=broker, trace=trace, counters=self.counters, services=services
        )
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
                message, repeated = await self._tools.run(call, call_id, iteration, over_limit=limit if over else None)
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
                output_constraints=SUMMARISE_INSTRUCTIONS,
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


def _context_too_long(outcome: Outcome) -> bool:
    error = outcome.error
    return error is not None and error.details.get("error", {}).get("code") == "context_length_exceeded"


def _ms(t0: float) -> int:
    return round((time.perf_counter() - t0) * 1000)
