"""``exports/create|list|get|cancel|file`` (phase-2 §10.1–10.2; the file stream becomes base64 chunks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sidecar.core.common import OperationResponse, Page
from sidecar.ipc.router import Method

from .models import ExportCreateParams, ExportFileChunk, ExportFileParams, ExportIdParams, ExportJob, ExportListParams

if TYPE_CHECKING:
    from sidecar.ipc.context import RequestContext

    from .service import ExportService


def methods(exports: ExportService) -> list[Method[Any, Any]]:
    async def create(ctx: RequestContext, p: ExportCreateParams) -> ExportJob:
        return await exports.create(p)

    async def list_jobs(ctx: RequestContext, p: ExportListParams) -> Page[ExportJob]:
        return await exports.list(p.status, p.format, p.limit, p.offset)

    async def get(ctx: RequestContext, p: ExportIdParams) -> ExportJob:
        return await exports.get(p.job_id)

    async def cancel(ctx: RequestContext, p: ExportIdParams) -> OperationResponse:
        return await exports.cancel(p.job_id)

    async def file(ctx: RequestContext, p: ExportFileParams) -> ExportFileChunk:
        return await exports.read(p.job_id, p.offset, p.length)

    return [
        Method(
            "exports/create",
            ExportCreateParams,
            ExportJob,
            create,
            summary="Start an export (a job): a note or unsaved markdown → html | pdf | docx; answers the queued job.",
        ),
        Method(
            "exports/list",
            ExportListParams,
            Page[ExportJob],
            list_jobs,
            summary="Export jobs, newest first (filter by status and format).",
        ),
        Method(
            "exports/get", ExportIdParams, ExportJob, get, summary="An export job: status, progress, file, warnings."
        ),
        Method(
            "exports/cancel",
            ExportIdParams,
            OperationResponse,
            cancel,
            summary="Cancel an export; a cancelled export leaves no file.",
        ),
        Method(
            "exports/file",
            ExportFileParams,
            ExportFileChunk,
            file,
            summary="A chunk of a completed export's file (base64, at most 1 MiB) and whether it is the last.",
        ),
    ]
