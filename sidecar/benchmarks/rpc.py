"""``benchmarks/*`` (phase-2 §9; the seed's HTTP routes become methods, its SSE the run's event log)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sidecar.core.common import CursorPage, OperationResponse, Page
from sidecar.ipc.router import Method
from sidecar.trace.models import StoredEvent

from .models import (
    AgentRunCreateParams,
    BenchmarkReport,
    BenchmarkRun,
    DatasetList,
    DatasetListParams,
    RagRunCreateParams,
    ReportParams,
    RunEventsParams,
    RunIdParams,
    RunListParams,
)

if TYPE_CHECKING:
    from sidecar.ipc.context import RequestContext

    from .service import BenchmarkService


def methods(bench: BenchmarkService) -> list[Method[Any, Any]]:
    async def datasets(ctx: RequestContext, p: DatasetListParams) -> DatasetList:
        return await bench.datasets(p.kind)

    async def create_rag(ctx: RequestContext, p: RagRunCreateParams) -> BenchmarkRun:
        return await bench.create_rag(p)

    async def create_agent(ctx: RequestContext, p: AgentRunCreateParams) -> BenchmarkRun:
        return await bench.create_agent(p)

    async def list_runs(ctx: RequestContext, p: RunListParams) -> Page[BenchmarkRun]:
        return await bench.list(p.kind, p.status, p.limit, p.offset)

    async def get(ctx: RequestContext, p: RunIdParams) -> BenchmarkRun:
        return await bench.get(p.run_id)

    async def events(ctx: RequestContext, p: RunEventsParams) -> CursorPage[StoredEvent]:
        return await bench.events(p.run_id, p.after_sequence, p.limit)

    async def cancel(ctx: RequestContext, p: RunIdParams) -> OperationResponse:
        return await bench.cancel(p.run_id)

    async def report(ctx: RequestContext, p: ReportParams) -> BenchmarkReport:
        return await bench.report(p.run_id, p.compare_to)

    return [
        Method(
            "benchmarks/datasets/list",
            DatasetListParams,
            DatasetList,
            datasets,
            summary="Registered benchmark datasets (shipped and imported) with version, case count and content_hash.",
        ),
        Method(
            "benchmarks/rag/runs/create",
            RagRunCreateParams,
            BenchmarkRun,
            create_rag,
            summary="Start a RAG benchmark run (a job): the corpus in an isolated index, every case in every mode.",
        ),
        Method(
            "benchmarks/agent/runs/create",
            AgentRunCreateParams,
            BenchmarkRun,
            create_agent,
            summary="Start an agent benchmark run (a job): each case a real agent run in an isolated workspace.",
        ),
        Method(
            "benchmarks/runs/list",
            RunListParams,
            Page[BenchmarkRun],
            list_runs,
            summary="Benchmark runs, newest first (filter by kind and status).",
        ),
        Method("benchmarks/runs/get", RunIdParams, BenchmarkRun, get, summary="A run's status, progress and metrics."),
        Method(
            "benchmarks/runs/events",
            RunEventsParams,
            CursorPage[StoredEvent],
            events,
            summary="A run's events: Progress, one CaseCompleted per case, then the terminal event.",
        ),
        Method(
            "benchmarks/runs/cancel",
            RunIdParams,
            OperationResponse,
            cancel,
            summary="Cancel a run; it ends cancelled and keeps the finished cases' results.",
        ),
        Method(
            "benchmarks/runs/report",
            ReportParams,
            BenchmarkReport,
            report,
            summary="The full report: metrics, per-tag metrics, every case's result, failures with reasons.",
        ),
    ]
