"""Document import wire types (issue 31; snake_case, phase-2 rules) and the documented limits."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from sidecar.core.common import AfterSequence, ErrorInfo, Params, Phase2Model
from sidecar.jobs.models import JobProgress, JobStatus

DOCUMENT_IMPORT_KIND = "document_import"
OcrMode = Literal["auto", "off", "force"]
DocumentFormat = Literal["pdf", "docx", "html", "markdown", "text", "image"]

MAX_PAGES = 2_000
"""A PDF with more pages is ``DOCUMENT_TOO_LARGE`` (413): split it first."""
MAX_EXPANDED_BYTES = 256 * 1024**2
"""A DOCX whose parts would expand past this, or any part past a 200:1 ratio, is refused before it is expanded."""
MAX_TEXT_BYTES = 64 * 1024**2
"""Plain text, Markdown and HTML files past this are ``DOCUMENT_TOO_LARGE``."""
PAGE_TIMEOUT_S = 60.0
"""A page (its text, or its OCR) that takes longer fails the import with ``DOCUMENT_UNREADABLE`` (``PAGE_TIMEOUT``)."""
IMPORT_TIMEOUT_S = 1_800.0
"""A whole import that takes longer fails with ``DOCUMENT_UNREADABLE`` (``IMPORT_TIMEOUT``)."""
OCR_LANGUAGES = frozenset({"eng", "chi_sim", "chi_tra", "jpn", "kor", "fra", "deu", "spa", "rus"})


class CreateDocumentImportParams(Params):
    attachment_id: str = Field(min_length=1, max_length=200)
    title: str | None = Field(
        None, min_length=1, max_length=500, description="Default: the document's title, else its file name."
    )
    folder: str | None = Field(None, max_length=500)
    ocr: OcrMode = Field(
        "auto",
        description="auto: OCR the pages with no usable text layer (scans, mojibake); off: never; force: every page.",
    )
    languages: list[str] | None = Field(
        None,
        max_length=4,
        description="Tesseract language codes for OCR (eng, chi_sim, ...). Default: eng for a document whose text"
        " is Latin, else chi_sim + eng.",
    )

    @field_validator("languages")
    @classmethod
    def _languages(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return None
        out = []
        for code in v:
            code = code.strip().lower().replace("-", "_")
            if code not in OCR_LANGUAGES:
                raise ValueError(f"unknown OCR language {code!r} (one of {', '.join(sorted(OCR_LANGUAGES))})")
            if code not in out:
                out.append(code)
        return out or None


class DocumentImportJob(Phase2Model):
    job_id: str
    attachment_id: str
    status: JobStatus
    progress: JobProgress | None = None
    format: DocumentFormat
    title: str | None = None
    folder: str | None = None
    ocr: OcrMode = "auto"
    languages: list[str] | None = None
    note_id: str | None = Field(None, description="The note made from the document (once completed).")
    pages: int | None = Field(None, description="The PDF's page count (null for formats without pages).")
    ocr_pages: list[int] = Field(default_factory=list, description="The 1-based pages read by OCR.")
    block_count: int = 0
    warnings: list[ErrorInfo] = Field(default_factory=list)
    error: ErrorInfo | None = None
    created_at: str
    started_at: str | None = None
    updated_at: str
    completed_at: str | None = None


class DocumentImportPage(Phase2Model):
    """A page of ``documents/imports/list``, newest first; pass ``next_cursor`` back as ``cursor``."""

    items: list[DocumentImportJob]
    next_cursor: str | None = None
    has_more: bool = False


class DocumentImportIdParams(Params):
    job_id: str = Field(min_length=1, max_length=200)


class ListDocumentImportsParams(Params):
    status: JobStatus | None = None
    cursor: str | None = Field(None, max_length=100, description="next_cursor of the previous page.")
    limit: int = Field(50, ge=1, le=500)


class DocumentImportEventsParams(Params):
    job_id: str = Field(min_length=1, max_length=200)
    after_sequence: AfterSequence = 0
    limit: int = Field(200, ge=1, le=1000)
