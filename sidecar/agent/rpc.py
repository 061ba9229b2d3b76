"""``agent/runs/*``, ``agent/permissions/resolve``, ``agent/artifacts/get`` and ``tools/list`` (ARCHITECTURE.md §6)."""

from __future__ import annotations

from typing import Any

from sidecar.core.common import CursorPage, EmptyParams
from sidecar.ipc.context import RequestContext
from sidecar.ipc.router import Method
from sidecar.trace.models import StoredEvent

from .models import (
    AgentRun,
    AgentRunCreateParams,
    AgentRunList,
    AgentRunListParams,
    Artifact,
    ArtifactParams,
    PermissionResolveParams,
    PermissionResolveResult,
    RunCancelResult,
    RunEventsParams,
    RunIdParams,
    ToolListResult,
    TraceSnapshot,
)
from .service import AgentService


def methods(agent: AgentService) -> list[Method[Any, Any]]:
    async def create(ctx: RequestContext, p: AgentRunCreateParams) -> AgentRun:
        stream = ctx.outbox.send_line if p.request.params.stream else None
        run, start = await agent.create(p, stream=stream, notify=ctx.notify)
        ctx.after_response(start)  # the answer goes out before the first stream line
        return run

    async def get(ctx: RequestContext, p: RunIdParams) -> AgentRun:
        return await agent.get(p.run_id)

    async def list_(ctx: RequestContext, p: AgentRunListParams) -> AgentRunList:
        return await agent.list(status=p.status, session_id=p.session_id, limit=p.limit, offset=p.offset)

    async def cancel(ctx: RequestContext, p: RunIdParams) -> RunCancelResult:
        return await agent.cancel(p.run_id)

    async def events(ctx: RequestContext, p: RunEventsParams) -> CursorPage[StoredEvent]:
        return await agent.events(p.run_id, p.after_sequence, p.limit)

    async def trace(ctx: RequestContext, p: RunEventsParams) -> TraceSnapshot:
        return await agent.trace(p.run_id, p.after_sequence, p.limit)

    async def resolve(ctx: RequestContext, p: PermissionResolveParams) -> PermissionResolveResult:
        await agent.answer_permission(p.run_id, p.request_id, p.decision)
        return PermissionResolveResult(run_id=p.run_id, request_id=p.request_id, decision=p.decision)

    async def artifact(ctx: RequestContext, p: ArtifactParams) -> Artifact:
        return await agent.artifact(p.run_id, p.artifact_id)

    async def tools(ctx: RequestContext, p: EmptyParams) -> ToolListResult:
        return await agent.tools()

    return [
        Method(
            "agent/runs/create",
            AgentRunCreateParams,
            AgentRun,
            create,
            summary="Start an agent run; answers at once. Model output streams as MetonaStreamEvent lines when "
            "request.params.stream; the trace is the run's event log (events/subscribe, agent/runs/events).",
        ),
        Method(
            "agent/runs/get", RunIdParams, AgentRun, get, summary="One agent run: status, summary, pending permission."
        ),
        Method("agent/runs/list", AgentRunListParams, AgentRunList, list_, summary="Agent runs, newest first."),
        Method(
            "agent/runs/cancel",
            RunIdParams,
            RunCancelResult,
            cancel,
            summary="Cancel a running run (RunCancelled); answers once it has stopped.",
        ),
        Method(
            "agent/runs/events",
            RunEventsParams,
            CursorPage[StoredEvent],
            events,
            summary="The run's AgentEvents after after_sequence (cursor page).",
        ),
        Method(
            "agent/runs/trace",
            RunEventsParams,
            TraceSnapshot,
            trace,
            summary="Trace snapshot (phase-2 §6.2): a page of events, summary and config_snapshot.",
        ),
        Method(
            "agent/permissions/resolve",
            PermissionResolveParams,
            PermissionResolveResult,
            resolve,
            summary="Answer a run's PermissionRequired: allow_once, allow_always (this session) or deny.",
        ),
        Method(
            "agent/artifacts/get",
            ArtifactParams,
            Artifact,
            artifact,
            summary="A tool result too large for its trace event (referenced by ToolResult.artifact).",
        ),
        Method(
            "tools/list", EmptyParams, ToolListResult, tools, summary="The tools agent runs can use (MetonaToolDef)."
        ),
    ]
