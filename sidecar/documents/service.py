"""Document imports (issue 31) over the JobManager, the document worker and the Knowledge Core.

``create`` checks the attachment and its format at once (``ATTACHMENT_NOT_FOUND``, ``DOCUMENT_FORMAT_UNSUPPORTED``)
and answers the queued job; the job reads the file in the worker child (``Page`` events, progress per page), turns
its blocks into one note — every block citing ``{attachment_id, page, label}`` — in a single transaction, and
records the note on the job. A cancel, a kill or a crash before that transaction leaves no note; the note and the
job's row are two writes, so a kill between them leaves a whole note and a job that start-up marks interrupted.

Table (namespace ``documents``): ``doc_imports`` — one row per job: attachment, format, the request's title,
folder, OCR mode and languages, then the result's note, pages, OCR'd pages, block count and warnings. Status,
progress, error and the event log are the JobManager's.
"""

from __future__ import annotations

import base64
import json
import logging
import shutil
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import anyio

from sidecar.core.common import CursorPage, ErrorInfo, OperationResponse
from sidecar.jobs import JobContext, JobManager
from sidecar.jobs.models import Job, JobStatus
from sidecar.knowledge.models import MAX_BLOCK_CHARS, MAX_BLOCKS_PER_NOTE, BlockInput, Citation, CreateNoteParams
from sidecar.knowledge.service import KnowledgeService
from sidecar.storage.sqlite import Database
from sidecar.trace.models import StoredEvent

from . import errors
from .blocks import DocBlock, split_long
from .client import DocumentWorker
from .formats import sniff
from .models import (
    DOCUMENT_IMPORT_KIND,
    MAX_EXPANDED_BYTES,
    MAX_PAGES,
    MAX_TEXT_BYTES,
    CreateDocumentImportParams,
    DocumentImportJob,
    DocumentImportPage,
)

logger = logging.getLogger(__name__)

NOT_FOUND_CODE = errors.DOCUMENT_IMPORT_JOB_NOT_FOUND
CANCELLED_ERROR = ErrorInfo(code=errors.DOCUMENT_IMPORT_CANCELLED, message="The import was cancelled.")

MIGRATIONS: list[str] = [
    """
    CREATE TABLE doc_imports (
        job_id        TEXT PRIMARY KEY NOT NULL,
        attachment_id TEXT NOT NULL,
        format        TEXT NOT NULL,
        title         TEXT,
        folder        TEXT,
        ocr           TEXT NOT NULL,
        languages     TEXT,
        note_id       TEXT,
        pages         INTEGER,
        ocr_pages     TEXT NOT NULL DEFAULT '[]',
        block_count   INTEGER NOT NULL DEFAULT 0,
        warnings      TEXT NOT NULL DEFAULT '[]'
    );
    CREATE INDEX doc_imports_attachment ON doc_imports (attachment_id);
    """,
]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(_dumps({"o": offset}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> int:
    if cursor is None:
        return 0
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        offset = json.loads(raw)["o"]
        if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset < 2**31:
            raise ValueError
    except (ValueError, KeyError, TypeError):
        from sidecar.core.errors import BadRequestError

        raise BadRequestError(
            "The cursor is not one this method gave.", code="VALIDATION_ERROR", details={"field": "cursor"}
        ) from None
    return offset


def to_note_blocks(blocks: list[DocBlock], attachment_id: str) -> list[BlockInput]:
    """The worker's blocks as note blocks, each citing its attachment, page and label. A block over the
    Knowledge Core's size is split; beyond its block count, consecutive paragraphs of one page share a block."""
    parts = [p for b in blocks for p in split_long(b, MAX_BLOCK_CHARS)]
    if len(parts) > MAX_BLOCKS_PER_NOTE:
        parts = _merge_paragraphs(parts, MAX_BLOCKS_PER_NOTE)
    if len(parts) > MAX_BLOCKS_PER_NOTE:
        raise errors.DocumentTooLarge(
            "The document has more blocks than one note holds.",
            details={"reason": "TOO_MANY_BLOCKS", "blocks": len(parts), "limit": MAX_BLOCKS_PER_NOTE},
        )
    out = []
    for b in parts:
        cite = Citation(attachment_id=attachment_id, page=b.page, label=(b.label or None) and b.label[:500])
        out.append(BlockInput(text=b.text, kind=b.kind, citations=[cite]))  # type: ignore[arg-type]
    return out


def _merge_paragraphs(parts: list[DocBlock], limit: int) -> list[DocBlock]:
    out: list[DocBlock] = []
    excess = len(parts) - limit
    for b in parts:
        prev = out[-1] if out else None
        if (
            excess > 0
            and prev is not None
            and prev.kind == b.kind == "paragraph"
            and prev.page == b.page
            and prev.label == b.label
            and len(prev.text) + len(b.text) + 2 <= MAX_BLOCK_CHARS
        ):
            prev.text = f"{prev.text}\n\n{b.text}"
            excess -= 1
        else:
            out.append(DocBlock(b.kind, b.text, b.page, b.label))
    return out


class DocumentService:
    def __init__(
        self,
        db: Database,
        jobs: JobManager,
        knowledge: KnowledgeService,
        worker: DocumentWorker,
        *,
        tmp_dir: Path,
        concurrency: int = 1,
    ) -> None:
        self._db = db
        self._jobs = jobs
        self._knowledge = knowledge
        self._worker = worker
        self._tmp_dir = tmp_dir
        jobs.register_kind(DOCUMENT_IMPORT_KIND, concurrency, failure_code=errors.DOCUMENT_IMPORT_FAILED)

    async def migrate(self) -> None:
        await self._jobs.migrate()
        await self._db.migrate("documents", MIGRATIONS)
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(self._tmp_dir, ignore_errors=True))

    # -- create ------------------------------------------------------------------------------------

    async def _format(self, attachment_id: str) -> str:
        att = await self._knowledge.get_attachment(attachment_id)
        path = await self._knowledge.attachment_path(attachment_id)
        try:
            fmt = await anyio.to_thread.run_sync(sniff, path, att.filename)
        except OSError:
            raise errors.AttachmentFileMissing(
                "The attachment's file is missing.", details={"attachment_id": attachment_id}
            ) from None
        if fmt is None:
            raise errors.DocumentFormatUnsupported(
                "This kind of file cannot be imported (PDF, DOCX, HTML, Markdown, plain text or an image can).",
                details={"attachment_id": attachment_id, "mime_type": att.mime_type, "filename": att.filename},
            )
        return fmt

    async def create(self, p: CreateDocumentImportParams) -> DocumentImportJob:
        fmt = await self._format(p.attachment_id)
        job_id = f"docimp_{uuid.uuid4().hex}"
        row = {
            "job_id": job_id,
            "attachment_id": p.attachment_id,
            "format": fmt,
            "title": p.title,
            "folder": p.folder,
            "ocr": p.ocr,
            "languages": _dumps(p.languages) if p.languages else None,
            "note_id": None,
            "pages": None,
            "ocr_pages": "[]",
            "block_count": 0,
            "warnings": "[]",
        }

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO doc_imports (job_id, attachment_id, format, title, folder, ocr, languages)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (job_id, p.attachment_id, fmt, p.title, p.folder, p.ocr, row["languages"]),
            )

        with anyio.CancelScope(shield=True):
            await self._db.run(insert)
            try:
                job = await self._jobs.submit(
                    DOCUMENT_IMPORT_KIND, {**p.model_dump(), "format": fmt}, self._runner, job_id=job_id
                )
            except BaseException:
                await self._db.run(lambda c: c.execute("DELETE FROM doc_imports WHERE job_id = ?", (job_id,)))
                raise
        return self._view(job, row)

    # -- the job ------------------------------------------------------------------------------------

    async def _runner(self, ctx: JobContext) -> dict[str, Any]:
        p = CreateDocumentImportParams.model_validate({k: v for k, v in ctx.params.items() if k != "format"})
        fmt = str(ctx.params["format"])
        att = await self._knowledge.get_attachment(p.attachment_id)
        path = await self._knowledge.attachment_path(p.attachment_id)
        tmp = self._tmp_dir / ctx.job_id
        await ctx.progress("reading", 0, None, "Reading the document")

        async def on_page(data: dict[str, Any]) -> None:
            page, pages, done = data.get("page"), data.get("pages"), data.get("done")
            how = " (OCR)" if data.get("ocr") else ""
            await ctx.progress("reading", done, pages, f"Page {page} of {pages}{how}")
            await ctx.emit("Page", {"page": page, "pages": pages, "done": done, "ocr": bool(data.get("ocr"))})

        request = {
            "path": str(path),
            "format": fmt,
            "ocr": p.ocr,
            "languages": p.languages,
            "tmp_dir": str(tmp),
            "limits": {
                "max_pages": MAX_PAGES,
                "max_expanded_bytes": MAX_EXPANDED_BYTES,
                "max_text_bytes": MAX_TEXT_BYTES,
                "page_timeout_s": self._worker.page_timeout_s,
            },
        }
        try:
            result = await self._worker.parse(request, on_page)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(lambda: shutil.rmtree(tmp, ignore_errors=True))
        warnings = [ErrorInfo.model_validate(w) for w in result.get("warnings", [])]
        blocks = [DocBlock(**b) for b in result.get("blocks", [])]
        if not blocks:
            raise errors.DocumentUnreadable(
                "No text was found in the document.",
                details={"reason": "NO_TEXT", "warnings": [w.model_dump(mode="json") for w in warnings]},
            )
        note_blocks = to_note_blocks(blocks, p.attachment_id)
        title = (p.title or result.get("title") or att.filename or "Imported document")[:500]
        await ctx.progress("writing", None, None, "Writing the note")
        with anyio.CancelScope(shield=True):  # the note and the job's row, once the document is read
            note = await self._knowledge.create_note(CreateNoteParams(title=title, folder=p.folder, blocks=note_blocks))
            pages = result.get("pages")
            ocr_pages = [int(n) for n in result.get("ocr_pages", [])]
            warn_json = _dumps([w.model_dump(mode="json") for w in warnings])
            await self._db.run(
                lambda c: c.execute(
                    "UPDATE doc_imports SET note_id = ?, pages = ?, ocr_pages = ?, block_count = ?, warnings = ?"
                    " WHERE job_id = ?",
                    (note.note_id, pages, _dumps(ocr_pages), len(note.blocks), warn_json, ctx.job_id),
                )
            )
        return {
            "job_id": ctx.job_id,
            "note_id": note.note_id,
            "pages": pages,
            "ocr_pages": ocr_pages,
            "block_count": len(note.blocks),
            "warnings": [w.model_dump(mode="json") for w in warnings],
        }

    # -- reads -------------------------------------------------------------------------------------

    @staticmethod
    def _error_of(job: Job) -> ErrorInfo | None:
        if job.status is JobStatus.CANCELLED:
            return job.error or CANCELLED_ERROR
        return job.error

    def _view(self, job: Job, row: Any) -> DocumentImportJob:
        completed = job.status is JobStatus.COMPLETED
        return DocumentImportJob(
            job_id=job.job_id,
            attachment_id=row["attachment_id"],
            status=job.status,
            progress=job.progress,
            format=row["format"],
            title=row["title"],
            folder=row["folder"],
            ocr=row["ocr"],
            languages=json.loads(row["languages"]) if row["languages"] else None,
            note_id=row["note_id"] if completed else None,
            pages=row["pages"] if completed else None,
            ocr_pages=json.loads(row["ocr_pages"]) if completed else [],
            block_count=row["block_count"] if completed else 0,
            warnings=[ErrorInfo.model_validate(w) for w in json.loads(row["warnings"])] if completed else [],
            error=self._error_of(job),
            created_at=job.created_at,
            started_at=job.started_at,
            updated_at=job.updated_at,
            completed_at=job.completed_at,
        )

    async def _row(self, job_id: str) -> sqlite3.Row:
        row = await self._db.read(
            lambda c: c.execute("SELECT * FROM doc_imports WHERE job_id = ?", (job_id,)).fetchone()
        )
        if row is None:
            raise errors.DocumentImportJobNotFound("Document import job was not found.", details={"job_id": job_id})
        return row

    async def get(self, job_id: str) -> DocumentImportJob:
        job = await self._jobs.get(job_id, kind=DOCUMENT_IMPORT_KIND, not_found_code=NOT_FOUND_CODE)
        return self._view(job, await self._row(job_id))

    async def list(self, status: JobStatus | None, cursor: str | None, limit: int) -> DocumentImportPage:
        offset = decode_cursor(cursor)
        page = await self._jobs.list(DOCUMENT_IMPORT_KIND, status, limit, offset)
        ids = [j.job_id for j in page.items]
        marks = ",".join("?" for _ in ids)
        rows = (
            await self._db.read(
                lambda c: {
                    r["job_id"]: r for r in c.execute(f"SELECT * FROM doc_imports WHERE job_id IN ({marks})", ids)
                }
            )
            if ids
            else {}
        )
        items = [self._view(j, rows[j.job_id]) for j in page.items if j.job_id in rows]
        more = offset + len(page.items) < page.page.total
        return DocumentImportPage(
            items=items, next_cursor=encode_cursor(offset + len(page.items)) if more else None, has_more=more
        )

    async def events(self, job_id: str, after_sequence: int = 0, limit: int = 200) -> CursorPage[StoredEvent]:
        return await self._jobs.events(
            job_id, after_sequence, limit, kind=DOCUMENT_IMPORT_KIND, not_found_code=NOT_FOUND_CODE
        )

    async def cancel(self, job_id: str) -> OperationResponse:
        return await self._jobs.cancel(job_id, kind=DOCUMENT_IMPORT_KIND, not_found_code=NOT_FOUND_CODE)

    async def wait(self, job_id: str) -> DocumentImportJob:
        await self._jobs.wait(job_id, kind=DOCUMENT_IMPORT_KIND, not_found_code=NOT_FOUND_CODE)
        return await self.get(job_id)
