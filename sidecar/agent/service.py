"""Agent runs: create (returns at once, the loop runs in the background), read, list, cancel, trace, permissions.

A run is a row in ``agent_runs`` plus its event log (resource ``run_id``); both are written together, so the
run's status and its terminal event agree after any crash. At start, runs a crash left active are failed
(``AGENT_RUN_INTERRUPTED``) and traces older than ``agent.traceRetentionDays`` are pruned.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import anyio
from anyio.abc import TaskGroup

from sidecar.core.common import CursorPage, Page, iso, utc_now
from sidecar.core.errors import BadRequestError, NotFoundError, SidecarError
from sidecar.ir import MetonaToolDef
from sidecar.providers.base import last_user_text
from sidecar.trace.eventlog import EventLog
from sidecar.trace.models import StoredEvent

from . import models as ev
from .context import ContextBuilder
from .loop import AGENT_VERSION, AgentLoop
from .models import (
    AgentRun,
    AgentRunCreateParams,
    Artifact,
    PermissionDecision,
    RunCancelResult,
    ToolListResult,
    TraceSnapshot,
)
from .permissions import PermissionBroker, PermissionRequest, StandingRules
from .runspec import LineSink, MemorySource, Notify, RunSpec
from .store import RunRecord, RunStore
from .tokens import TokenCalibrator
from .tools.base import ToolContext
from .tools.registry import ToolRegistry
from .tracing import TraceWriter

logger = logging.getLogger(__name__)


@dataclass
class _Live:
    loop: AgentLoop
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)


@dataclass(frozen=True)
class _Target:
    """The provider and model a run talks to."""

    provider_id: str
    adapter: Any
    model: str
    context_window: int


@dataclass(frozen=True)
class _Plan:
    """A run before it is persisted: its ids, target, tools and limits."""

    run_id: str
    session_id: str
    target: _Target
    tools: list[MetonaToolDef]
    unavailable: dict[str, str]
    max_iterations: int
    permission_timeout_s: float
    workspace_roots: Sequence[str]


def _validate(p: AgentRunCreateParams) -> None:
    if not any(m.role == "user" for m in p.request.messages):
        raise BadRequestError("request.messages must contain a user message (the task).", code="VALIDATION_ERROR")


class AgentService:
    def __init__(
        self,
        events: EventLog,
        providers: Any,
        config: Any,
        registry: ToolRegistry,
        task_group: TaskGroup,
        *,
        memories: MemorySource | None = None,
        services: Any = None,
        rules: StandingRules | None = None,
    ) -> None:
        self._events = events
        self._providers = providers
        self._config = config
        self.registry = registry
        self._tg = task_group
        self._memories = memories
        self._services = services
        self.store = RunStore(events.db, events)
        self.broker = PermissionBroker(rules)
        self._live: dict[str, _Live] = {}
        self._calibrators: dict[tuple[str, str], TokenCalibrator] = {}

    async def start(self) -> None:
        """Migrate, fail the runs a crash interrupted, prune old traces."""
        await self.store.migrate()
        interrupted = await self.store.recover()
        if interrupted:
            logger.warning("marked %d agent run(s) interrupted by the last exit as failed", len(interrupted))
        days = int(await self._config.get("agent.traceRetentionDays"))
        if days > 0:
            pruned = await self.store.prune(iso(utc_now() - timedelta(days=days)))
            if pruned:
                logger.info("pruned the traces of %d agent run(s) older than %d days", pruned, days)

    # -- tools ------------------------------------------------------------------------------------------------

    async def _tool_context(self) -> ToolContext:
        roots = await self._config.get("agent.workspaceRoots")
        return ToolContext(
            run_id="", session_id="", tool_call_id="", workspace_roots=tuple(roots or ()), services=self._services
        )

    async def tools(self) -> ToolListResult:
        ctx = await self._tool_context()
        return ToolListResult(items=self.registry.definitions(), unavailable=self.registry.unavailable(ctx))

    # -- runs -------------------------------------------------------------------------------------------------

    async def create(
        self, p: AgentRunCreateParams, *, stream: LineSink | None = None, notify: Notify | None = None
    ) -> tuple[AgentRun, Callable[[], None]]:
        """Validate, persist the run with its ``RunStarted`` event; return it and a ``start`` to call once the
        answer is on the wire (so stream lines never precede it)."""
        _validate(p)
        target = await self._resolve_target(p)
        plan = await self._plan(p, target)
        record, trace, created_at = await self._persist(p, plan)
        start = self._start(p, plan, trace, stream=stream, notify=notify)
        return record.new_run(created_at), start

    async def _resolve_target(self, p: AgentRunCreateParams) -> _Target:
        """The provider (PROVIDER_NOT_FOUND) and the model (MODEL_NOT_FOUND when none is given or configured)."""
        provider_id = p.provider_id or await self._providers.default_provider()
        adapter = await self._providers.adapter(provider_id)  # PROVIDER_NOT_FOUND
        model = adapter.resolve_model_or_none(p.model)
        if not model:
            raise NotFoundError(
                f"no model given and provider {provider_id!r} has no default_model",
                code="MODEL_NOT_FOUND",
                details={"provider_id": provider_id},
            )
        spec_of_model = adapter.model_spec(model)
        context_window = spec_of_model.context_window if spec_of_model else 8192
        return _Target(provider_id, adapter, model, context_window)

    async def _plan(self, p: AgentRunCreateParams, target: _Target) -> _Plan:
        """The run's tools (TOOL_NOT_FOUND), limits and ids, from the params and the configuration."""
        ctx = await self._tool_context()
        unavailable = self.registry.unavailable(ctx)
        wanted = self._wanted_tools(p)
        tools = [t for t in self.registry.definitions(wanted) if t.name not in unavailable]
        max_iterations = p.max_iterations or int(await self._config.get("agent.maxIterations"))
        timeout_s = int(await self._config.get("agent.permissionTimeoutMs")) / 1000
        run_id = f"run_{uuid.uuid4().hex}"
        session_id = p.session_id or p.request.meta.session_id or run_id  # no session: one of its own
        return _Plan(
            run_id=run_id,
            session_id=session_id,
            target=target,
            tools=tools,
            unavailable=unavailable,
            max_iterations=max_iterations,
            permission_timeout_s=timeout_s,
            workspace_roots=ctx.workspace_roots,
        )

    async def _snapshot(self, p: AgentRunCreateParams, plan: _Plan) -> dict[str, Any]:
        """What the run was configured with (its ``config_snapshot``, before secrets are cut out)."""
        request, target = p.request, plan.target
        return {
            "agent_version": AGENT_VERSION,
            "provider_id": target.provider_id,
            "preset": target.adapter.config.preset,
            "protocol": target.adapter.config.protocol,
            "base_url": target.adapter.config.base_url,
            "model": target.model,
            "context_window": target.context_window,
            "max_iterations": plan.max_iterations,
            "allowed_tools": p.allowed_tools,
            "tools": [t.name for t in plan.tools],
            "unavailable_tools": plan.unavailable,
            "token_budget": p.token_budget,
            "params": request.params.model_dump(mode="json"),
            "constraints": None if request.constraints is None else request.constraints.model_dump(mode="json"),
            "llm_max_retries": await self._config.get("llm.maxRetries"),
            "llm_fallback_provider": await self._config.get("llm.fallbackProvider"),
            "llm_fallback_model": await self._config.get("llm.fallbackModel"),
            "permission_timeout_ms": round(plan.permission_timeout_s * 1000),
            "workspace_roots": list(plan.workspace_roots),
        }

    async def _persist(self, p: AgentRunCreateParams, plan: _Plan) -> tuple[RunRecord, TraceWriter, str]:
        """Write the run's row and its ``RunStarted`` event in one transaction; its record, trace and creation time."""
        request, target, run_id = p.request, plan.target, plan.run_id
        snapshot = await self._snapshot(p, plan)
        record = RunRecord(
            run_id=run_id,
            session_id=plan.session_id,
            provider_id=target.provider_id,
            model=target.model,
            max_iterations=plan.max_iterations,
            allowed_tools=p.allowed_tools,
            token_budget=p.token_budget,
            config_snapshot={},
        )
        trace = TraceWriter(
            self._events, run_id, secrets=await self._known_secrets(target.adapter) + self._tool_secrets(plan.tools)
        )
        snapshot = trace.sanitize(snapshot, max_chars=None)
        started = {
            "run_id": run_id,
            "session_id": plan.session_id,
            "provider_id": target.provider_id,
            "model": target.model,
            "max_iterations": plan.max_iterations,
            "tools": [t.name for t in plan.tools],
            "token_budget": p.token_budget,
            "stream": bool(request.params.stream),
            "input": trace.sanitize(last_user_text(request.messages), max_chars=2000),
        }

        record.config_snapshot = snapshot

        def insert(conn: Any, writer: Any) -> str:
            created = RunStore.insert(conn, writer, record)
            writer.append(run_id, ev.RUN_STARTED, trace.sanitize(started))
            return created

        created_at = await self._events.transaction(insert)
        return record, trace, created_at

    def _start(
        self,
        p: AgentRunCreateParams,
        plan: _Plan,
        trace: TraceWriter,
        *,
        stream: LineSink | None,
        notify: Notify | None,
    ) -> Callable[[], None]:
        """Start the run's loop in the background, held until the returned ``start`` is called."""
        target, run_id = plan.target, plan.run_id
        calibrator = self._calibrators.setdefault((target.provider_id, target.model), TokenCalibrator())
        spec = RunSpec(
            run_id=run_id,
            session_id=plan.session_id,
            provider_id=target.provider_id,
            model=target.model,
            request=p.request,
            max_iterations=plan.max_iterations,
            tools=plan.tools,
            token_budget=p.token_budget,
            context_window=target.context_window,
            permission_timeout_s=plan.permission_timeout_s,
            workspace_roots=plan.workspace_roots,
            stream=stream,
            notify=notify,
        )
        loop = AgentLoop(
            spec,
            providers=self._providers,
            registry=self.registry,
            builder=ContextBuilder(calibrator=calibrator),
            broker=self.broker,
            trace=trace,
            memories=self._memories,
            services=self._services,
            calibrator=calibrator,
        )
        loop.ready = anyio.Event()
        trace.on_commit(lambda conn: RunStore.progress(conn, run_id, loop.iterations, loop.summary()))
        live = _Live(loop)
        self._live[run_id] = live
        # From the commit on, nothing here waits: the run task exists before this request could be cancelled, and
        # it ends RunCancelled by itself if the answer never goes out (``start`` is never called).
        self._tg.start_soon(self._run, live)
        return loop.ready.set

    async def _known_secrets(self, adapter: Any) -> list[str]:
        """Keys this run may use (its provider's, the fallback's): cut out of its trace wherever they appear."""
        keys = [adapter.config.api_key]
        try:
            keys.append(await self._config.secret("llm.fallbackApiKey"))
            fallback = await self._config.get("llm.fallbackProvider")
            if fallback:
                keys.append((await self._providers.adapter(str(fallback))).config.api_key)
        except SidecarError:
            logger.debug("the fallback provider's key is not available for redaction", exc_info=True)
        return [k for k in keys if k]

    def _tool_secrets(self, tools: list[Any]) -> list[str]:
        """Secrets of the tools this run may call (a plugin's, which its server may echo): cut out of its trace."""
        return [s for t in tools if (tool := self.registry.get(t.name)) is not None for s in tool.trace_secrets()]

    def _wanted_tools(self, p: AgentRunCreateParams) -> set[str] | None:
        """The intersection of ``allowed_tools``, ``request.constraints.allowedTools`` and ``request.tools``."""
        sets: list[set[str]] = []
        if p.allowed_tools is not None:
            sets.append(set(p.allowed_tools))
        if p.request.constraints is not None and p.request.constraints.allowed_tools is not None:
            sets.append(set(p.request.constraints.allowed_tools))
        if p.request.tools is not None:
            sets.append({t.name for t in p.request.tools})
        known = set(self.registry.names())
        unknown = sorted(set().union(*sets) - known) if sets else []
        if unknown:
            raise NotFoundError(
                f"unknown tool(s): {', '.join(unknown)}",
                code="TOOL_NOT_FOUND",
                details={"unknown": unknown, "known": sorted(known)},
            )
        return set.intersection(*sets) if sets else None

    async def _run(self, live: _Live) -> None:
        run_id = live.loop.spec.run_id
        flusher_scope = anyio.CancelScope()
        try:
            with live.scope:
                async with anyio.create_task_group() as tg:

                    async def flusher() -> None:
                        with flusher_scope:
                            await live.loop.trace.run_flusher()

                    tg.start_soon(flusher)
                    try:
                        await live.loop.run()
                    finally:
                        live.loop.trace.close()
                        flusher_scope.cancel()
        except Exception:
            logger.exception("agent run %s: the run task failed", run_id)
        finally:
            self._live.pop(run_id, None)
            live.done.set()

    async def get(self, run_id: str) -> AgentRun:
        return self._with_live(await self.store.get(run_id))

    def _with_live(self, run: AgentRun) -> AgentRun:
        live = self._live.get(run.run_id)
        if live is None or run.status not in ev.ACTIVE_RUN_STATUSES:
            return run
        return run.model_copy(
            update={
                "summary": live.loop.summary(),
                "iterations": live.loop.iterations,
                "pending_permission": self.broker.pending(run.run_id),
            }
        )

    async def list(self, *, status: str | None, session_id: str | None, limit: int, offset: int) -> Page[AgentRun]:
        page = await self.store.list(status=status, session_id=session_id, limit=limit, offset=offset)
        page.items = [self._with_live(r) for r in page.items]
        return page

    async def cancel(self, run_id: str) -> RunCancelResult:
        """Cancel a running run; answers once its ``RunCancelled`` is committed. A finished run: its status."""
        live = self._live.get(run_id)
        if live is None:
            return RunCancelResult(accepted=False, status=(await self.store.get(run_id)).status)
        live.scope.cancel()
        with anyio.move_on_after(10):
            await live.done.wait()
        return RunCancelResult(accepted=True, status=(await self.store.get(run_id)).status)

    def resolve_permission(self, run_id: str, request_id: str, decision: PermissionDecision) -> PermissionRequest:
        if run_id not in self._live:
            raise NotFoundError(
                "Agent run was not found or is not running.", code="AGENT_RUN_NOT_FOUND", details={"run_id": run_id}
            )
        return self.broker.resolve(run_id, request_id, decision)

    async def answer_permission(self, run_id: str, request_id: str, decision: PermissionDecision) -> None:
        """The host's answer (``agent/permissions/resolve``): :meth:`resolve_permission`, then an ``allow_always``
        for a plugin's tool is stored with the broker's standing rules (per plugin and tool, across restarts)."""
        await self.broker.remember(self.resolve_permission(run_id, request_id, decision))

    async def events(self, run_id: str, after_sequence: int, limit: int) -> CursorPage[StoredEvent]:
        if not (await self.store.get(run_id)).trace_available:
            raise _trace_gone(run_id, after_sequence)
        page = await self._events.read(run_id, after_sequence, limit, not_found_code="AGENT_RUN_NOT_FOUND")
        if not page.items and after_sequence > 0:
            last = await self._events.last_event(run_id)
            if last is None or after_sequence > last.sequence:
                raise BadRequestError(
                    "after_sequence is beyond the run's last event.",
                    code="TRACE_CURSOR_INVALID",
                    details={
                        "run_id": run_id,
                        "after_sequence": after_sequence,
                        "last_sequence": last.sequence if last else 0,
                    },
                )
        return page

    async def trace(self, run_id: str, after_sequence: int, limit: int) -> TraceSnapshot:
        page = await self.events(run_id, after_sequence, limit)
        stored, snapshot = await self.store.get_with_snapshot(run_id)  # read after the page: status is as new
        run = self._with_live(stored)
        return TraceSnapshot(
            run_id=run_id,
            status=run.status,
            items=page.items,
            next_sequence=page.next_sequence,
            has_more=page.has_more,
            summary=run.summary,
            config_snapshot=snapshot,
        )

    async def artifact(self, run_id: str, artifact_id: str) -> Artifact:
        return await self.store.artifact(run_id, artifact_id)

    async def shutdown(self, grace_s: float = 5.0) -> None:
        """Cancel every running run and wait (bounded) for their ``RunCancelled`` to be written."""
        lives = list(self._live.values())
        for live in lives:
            live.loop.cancel_reason = "shutdown"
            live.scope.cancel()
        with anyio.move_on_after(grace_s):
            for live in lives:
                await live.done.wait()


def _trace_gone(run_id: str, after_sequence: int) -> NotFoundError:
    if after_sequence > 0:
        return NotFoundError(
            "The trace this cursor points into was removed by the retention policy.",
            code="TRACE_CURSOR_EXPIRED",
            details={"run_id": run_id, "after_sequence": after_sequence},
        )
    return NotFoundError(
        "The run's trace is no longer available (removed by the retention policy).",
        code="TRACE_NOT_AVAILABLE",
        details={"run_id": run_id},
    )
