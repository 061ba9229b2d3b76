"""Export types (phase-2 §10.1–10.2; snake_case): ExportJob, its file metadata, the options, the chunked download
of ARCHITECTURE.md (``exports/file {job_id, offset, length}`` → base64 + ``eof``).

``source``, ``format`` and ``options`` are taken loosely by the params model and checked by the service, so a bad
value answers the seed's code (``EXPORT_FORMAT_UNSUPPORTED`` / ``EXPORT_OPTIONS_INVALID``), not a generic
validation error.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from sidecar.core.common import ErrorInfo, Params, Phase2Model
from sidecar.jobs.models import JobProgress

FORMATS = ("html", "pdf", "docx")
MIME_TYPES = {
    "html": "text/html; charset=utf-8",
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}
PAGE_SIZES = ("A3", "A4", "A5", "Letter", "Legal", "Tabloid")
MAX_MARKDOWN_CHARS = 2 * 1024 * 1024
MAX_CHUNK = 1024 * 1024
DEFAULT_CHUNK = 256 * 1024


class ExportOptions(Phase2Model):
    """§10.1 options (``theme_id``, ``include_title``, ``include_metadata``, ``page_size``, ``code_theme``) and
    ours: ``margin_mm`` (PDF), ``title`` (overrides the note title / first heading), ``expires_in_s``."""

    model_config = ConfigDict(extra="forbid")

    theme_id: str | None = Field(None, min_length=1, max_length=100)
    include_title: bool = True
    include_metadata: bool = False
    page_size: Literal["A3", "A4", "A5", "Letter", "Legal", "Tabloid"] = "A4"
    code_theme: str = Field("github-light", min_length=1, max_length=64)
    margin_mm: float = Field(18.0, ge=0, le=60)
    title: str | None = Field(None, max_length=300)
    expires_in_s: int | None = Field(None, ge=1, le=30 * 24 * 3600)


class ExportSource(Phase2Model):
    model_config = ConfigDict(extra="forbid")

    type: Literal["note", "markdown"]
    note_id: str | None = Field(None, min_length=1, max_length=200)
    markdown: str | None = Field(None, max_length=MAX_MARKDOWN_CHARS)
    title: str | None = Field(None, max_length=300)


class ExportCreateParams(Params):
    source: dict[str, Any]
    format: str = Field(max_length=40)
    options: dict[str, Any] = Field(default_factory=dict)


class ExportFile(Phase2Model):
    file_name: str
    mime_type: str
    size: int
    sha256: str
    expires_at: str


class ExportJob(Phase2Model):
    job_id: str
    status: str
    format: str
    progress: JobProgress | None = None
    file: ExportFile | None = None
    warnings: list[str] = Field(default_factory=list)
    error: ErrorInfo | None = None
    created_at: str
    started_at: str | None = None
    completed_at: str | None = None


class ExportListParams(Params):
    status: str | None = Field(None, max_length=20)
    format: str | None = Field(None, max_length=20)
    limit: int = Field(50, ge=1, le=500)
    offset: int = Field(0, ge=0, le=2**31 - 1)


class ExportIdParams(Params):
    job_id: str = Field(min_length=1, max_length=200)


class ExportFileParams(Params):
    job_id: str = Field(min_length=1, max_length=200)
    offset: int = Field(0, ge=0)
    length: int = Field(DEFAULT_CHUNK, ge=1, le=MAX_CHUNK)


class ExportFileChunk(Phase2Model):
    job_id: str
    file_name: str
    mime_type: str
    size: int
    sha256: str
    offset: int
    length: int
    data_base64: str
    eof: bool


ExportFormat = Literal["html", "pdf", "docx"]
