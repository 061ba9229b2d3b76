"""``search/query``, ``index/status``, ``index/configure``, ``index/rebuild`` (+ its ``get``/``cancel``/``events``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sidecar.core.common import CursorPage, CursorParams, EmptyParams, OperationResponse
from sidecar.ipc.router import Method
from sidecar.jobs.models import Job
from sidecar.trace.models import StoredEvent

from .models import IndexConfigureParams, IndexStatus, RebuildJobParams, RebuildParams, SearchParams, SearchResult

if TYPE_CHECKING:
    from sidecar.ipc.context import RequestContext
    from sidecar.jobs import JobManager

    from .service import RetrievalService


JOB_NOT_FOUND = "INDEX_JOB_NOT_FOUND"


class RebuildEventsParams(CursorParams):
    job_id: str


def methods(retrieval: RetrievalService, jobs: JobManager) -> list[Method[Any, Any]]:
    from .rebuild import REBUILD_KIND

    async def query(ctx: RequestContext, p: SearchParams) -> SearchResult:
        return await retrieval.search(p.query, p.mode, p.profile_id, p.top_k, p.filters)

    async def status(ctx: RequestContext, p: EmptyParams) -> IndexStatus:
        return await retrieval.status()

    async def configure(ctx: RequestContext, p: IndexConfigureParams) -> IndexStatus:
        return await retrieval.configure(p.embedder)

    async def rebuild(ctx: RequestContext, p: RebuildParams) -> Job:
        return await retrieval.rebuild(p.scope)

    async def get(ctx: RequestContext, p: RebuildJobParams) -> Job:
        return await jobs.get(p.job_id, kind=REBUILD_KIND, not_found_code=JOB_NOT_FOUND)

    async def cancel(ctx: RequestContext, p: RebuildJobParams) -> OperationResponse:
        return await jobs.cancel(p.job_id, kind=REBUILD_KIND, not_found_code=JOB_NOT_FOUND)

    async def events(ctx: RequestContext, p: RebuildEventsParams) -> CursorPage[StoredEvent]:
        return await jobs.events(p.job_id, p.after_sequence, p.limit, kind=REBUILD_KIND, not_found_code=JOB_NOT_FOUND)

    return [
        Method(
            "search/query",
            SearchParams,
            SearchResult,
            query,
            summary="Search note blocks: fts (ICU, Chinese + English), vector, or hybrid (RRF + rerank) per profile.",
        ),
        Method(
            "index/status",
            EmptyParams,
            IndexStatus,
            status,
            summary="Index state, the configured embedding model vs the vector index's, and compatibility.",
        ),
        Method(
            "index/configure",
            IndexConfigureParams,
            IndexStatus,
            configure,
            summary="Switch the embedder (default, hash-v1, openai-compatible, ollama); rebuild vectors after.",
        ),
        Method(
            "index/rebuild",
            RebuildParams,
            Job,
            rebuild,
            summary="Rebuild the vector and/or full-text index as a job (progress events, cancellable, atomic swap).",
        ),
        Method("index/rebuild/get", RebuildJobParams, Job, get, summary="An index rebuild job."),
        Method(
            "index/rebuild/cancel",
            RebuildJobParams,
            OperationResponse,
            cancel,
            summary="Cancel an index rebuild job (the old index stays active).",
        ),
        Method(
            "index/rebuild/events",
            RebuildEventsParams,
            CursorPage[StoredEvent],
            events,
            summary="An index rebuild job's events after after_sequence.",
        ),
    ]
