"""``documents/imports/*`` (issue 31): a document the user already has becomes a cited, searchable note."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sidecar.core.common import CursorPage, OperationResponse
from sidecar.ipc.router import Method
from sidecar.trace.models import StoredEvent

from .models import (
    CreateDocumentImportParams,
    DocumentImportEventsParams,
    DocumentImportIdParams,
    DocumentImportJob,
    DocumentImportPage,
    ListDocumentImportsParams,
)

if TYPE_CHECKING:
    from sidecar.ipc.context import RequestContext

    from .service import DocumentService


def methods(documents: DocumentService) -> list[Method[Any, Any]]:
    async def create(ctx: RequestContext, p: CreateDocumentImportParams) -> DocumentImportJob:
        return await documents.create(p)

    async def get(ctx: RequestContext, p: DocumentImportIdParams) -> DocumentImportJob:
        return await documents.get(p.job_id)

    async def list_jobs(ctx: RequestContext, p: ListDocumentImportsParams) -> DocumentImportPage:
        return await documents.list(p.status, p.cursor, p.limit)

    async def cancel(ctx: RequestContext, p: DocumentImportIdParams) -> OperationResponse:
        return await documents.cancel(p.job_id)

    async def events(ctx: RequestContext, p: DocumentImportEventsParams) -> CursorPage[StoredEvent]:
        return await documents.events(p.job_id, p.after_sequence, p.limit)

    return [
        Method(
            "documents/imports/create",
            CreateDocumentImportParams,
            DocumentImportJob,
            create,
            summary="Import an attachment (PDF, DOCX, HTML, Markdown, text, image) as a cited note; answers the"
            " queued job at once, reads it in a worker.",
        ),
        Method(
            "documents/imports/get",
            DocumentImportIdParams,
            DocumentImportJob,
            get,
            summary="A document import job: status, progress, and once completed note_id, pages, ocr_pages, warnings.",
        ),
        Method(
            "documents/imports/list",
            ListDocumentImportsParams,
            DocumentImportPage,
            list_jobs,
            summary="Document import jobs, newest first (status filter; cursor paging with next_cursor).",
        ),
        Method(
            "documents/imports/cancel",
            DocumentImportIdParams,
            OperationResponse,
            cancel,
            summary="Cancel an import: its worker is killed at once and no note is made.",
        ),
        Method(
            "documents/imports/events",
            DocumentImportEventsParams,
            CursorPage[StoredEvent],
            events,
            summary="The import's event log after after_sequence (Queued, Started, Progress, Page per page, then"
            " Completed|Failed|Cancelled).",
        ),
    ]
