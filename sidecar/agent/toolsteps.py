"""The tool step of a ReAct turn: one model tool call → checks, permission, execution, trace events, and the
``tool`` message the model reads next (``summary``; the raw ``result`` kept for audit, an artifact when large).

A call is refused without running when it exceeds ``constraints.maxToolCalls``, names a tool the run does not
offer, or has invalid arguments (before the user is asked anything); a tool that ``requires_permission`` waits for
``agent/permissions/resolve`` (bounded; a deny or no answer goes back to the model as a failed result). The same
call failing the same way :data:`FUTILE_REPEATS` times gives a reminder for the model (trace ``LoopDetected``).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import anyio
import anyio.to_thread

from sidecar.ir import MetonaMessage, MetonaToolCall, MetonaToolResult

from . import models as ev
from .permissions import PermissionBroker
from .runspec import Counters, RunSpec, now_ms
from .store import RunStore
from .tools.base import ToolContext
from .tools.registry import ToolExecution, ToolRegistry
from .tracing import TraceWriter

TRACE_RESULT_MAX_BYTES = 16_384
"""A tool result larger than this (as JSON) goes to an artifact; the event keeps its summary and reference."""
TRACE_ARGS_CHARS = 500
"""The longest argument string kept in ToolCall/PermissionRequired events."""
TRACE_SUMMARY_CHARS = 1_000
"""The tool summary kept in ToolCall/ToolResult events (the model got the full one)."""
FUTILE_REPEATS = 2
"""The same tool, arguments and error this many times: the model is told to change course."""


class ToolSteps:
    def __init__(
        self,
        spec: RunSpec,
        *,
        registry: ToolRegistry,
        broker: PermissionBroker,
        trace: TraceWriter,
        counters: Counters,
        services: Any = None,
    ) -> None:
        self.spec = spec
        self._registry = registry
        self._broker = broker
        self.trace = trace
        self.counters = counters
        self._services = services
        self._tool_names = {t.name for t in spec.tools}

    async def run(
        self, call: MetonaToolCall, parent_id: str, iteration: int, *, over_limit: int | None = None
    ) -> tuple[MetonaMessage, str | None]:
        """Run one tool call (after permission); its ``tool`` message and, when futile, a reminder for the model."""
        spec = self.spec
        self.counters.tool_calls += 1
        tool = self._registry.get(call.name)
        data: dict[str, Any] = {
            "tool_call_id": call.id,
            "tool_name": call.name,
            "args": call.args,
            "parent_model_call_id": parent_id,
            "step": iteration,
        }
        risk_rule = getattr(tool, "risk_rule", None)
        if tool is not None and risk_rule is not None:  # a plugin tool: which rule set its risk (asks or not)
            data |= {"risk_level": str(tool.risk_level), "risk_rule": risk_rule}
        self.trace.emit(ev.TOOL_CALL, data, max_chars=TRACE_ARGS_CHARS)
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
            for source in (tool, self._registry.get(call.name)):  # the tool as called, and as now published
                if source is not None:  # a plugin restarted with a new secret since the run started
                    self.trace.add_secrets(source.trace_secrets())
            recorded = await self._record_result(call, execution, parent_id, iteration)
        return recorded

    async def _permission(self, call: MetonaToolCall, tool: Any, parent_id: str) -> str | None:
        spec = self.spec
        base = {"tool_call_id": call.id, "tool_name": call.name, "permission": tool.permission}
        rule = getattr(tool, "risk_rule", None)  # a plugin tool: which rule set its risk (manifest, default, ...)
        if rule is not None:
            base["risk_rule"] = rule
        rules = self._broker.rules
        if rules is not None and rules.allows(tool):  # the user's stored "allow always" for this plugin tool
            self.trace.emit(
                ev.PERMISSION_RESOLVED,
                {"request_id": None, **base, "decision": "allow_always", "source": rules.source},
            )
            return "allow_always"
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
            tool=tool,
        )
        self.trace.emit(
            ev.PERMISSION_REQUIRED,
            {
                "request_id": request.request_id,
                **base,
                "risk_level": str(tool.risk_level),
                "args": call.args,
                "parent_model_call_id": parent_id,
                "timeout_ms": round(spec.permission_timeout_s * 1000),
            },
            max_chars=TRACE_ARGS_CHARS,
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
