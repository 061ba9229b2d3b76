"""Knowledge Core types: attachments, notes, blocks, citations (snake_case, phase-2 rules)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sidecar.core.common import PageParams, Params, Phase2Model

BlockKind = Literal["heading", "paragraph", "list", "code", "quote", "table"]

MAX_TITLE_CHARS = 500
MAX_FOLDER_CHARS = 500
MAX_BLOCK_CHARS = 20_000
MAX_BLOCKS_PER_NOTE = 5_000


class Attachment(Phase2Model):
    attachment_id: str
    filename: str
    mime_type: str
    size_bytes: int
    sha256: str
    created_at: str


class Citation(Phase2Model):
    """Where a block's content comes from. For transcripts: ``source_audio`` (the audio attachment's id),
    ``start_time``/``end_time`` in seconds and ``speaker`` (phase-2 §5.4); ``attachment_id`` cites any
    other attachment — with ``page`` (1-based, PDFs) and ``label`` (a short locator, e.g. the heading path) for an
    imported document. Every attachment reference is a controlled id that must exist."""

    source_audio: str | None = None
    start_time: float | None = Field(None, ge=0)
    end_time: float | None = Field(None, ge=0)
    speaker: str | None = Field(None, max_length=200)
    attachment_id: str | None = None
    page: int | None = Field(None, ge=1, description="The 1-based page of the cited attachment (PDFs).")
    label: str | None = Field(None, max_length=500)

    @model_validator(mode="after")
    def _time_range(self) -> Citation:
        if self.start_time is not None and self.end_time is not None and self.end_time < self.start_time:
            raise ValueError("end_time must not be before start_time")
        return self

    def attachment_refs(self) -> list[str]:
        return [ref for ref in (self.source_audio, self.attachment_id) if ref]


class NoteBlock(Phase2Model):
    block_id: str
    position: int
    kind: BlockKind
    text: str
    citations: list[Citation] = Field(default_factory=list)


class Note(Phase2Model):
    note_id: str
    title: str
    folder: str | None
    content: str
    blocks: list[NoteBlock]
    created_at: str
    updated_at: str


class NoteSummary(Phase2Model):
    note_id: str
    title: str
    folder: str | None
    block_count: int
    created_at: str
    updated_at: str


class DeleteResult(Phase2Model):
    deleted: bool = True


# -- params ------------------------------------------------------------------------------------------


class ImportAttachmentParams(Params):
    path: str = Field(min_length=1, max_length=4096, description="Absolute path chosen by the host's file picker.")
    filename: str | None = Field(None, min_length=1, max_length=255, description="Display name (default: the file's).")


class AttachmentIdParams(Params):
    attachment_id: str = Field(min_length=1, max_length=200)


class ListAttachmentsParams(PageParams):
    pass


class BlockInput(Params):
    """One block given explicitly. ``block_id`` (on update) keeps an existing block's identity."""

    text: str = Field(min_length=1, max_length=MAX_BLOCK_CHARS)
    kind: BlockKind = "paragraph"
    citations: list[Citation] = Field(default_factory=list, max_length=100)
    block_id: str | None = Field(None, min_length=1, max_length=200)


class _NoteContent(Params):
    content: str | None = Field(
        None, description="Markdown; split into blocks (headings, paragraphs, lists, code, quotes, tables)."
    )
    blocks: list[BlockInput] | None = Field(None, max_length=MAX_BLOCKS_PER_NOTE)


class CreateNoteParams(_NoteContent):
    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS)
    folder: str | None = Field(None, max_length=MAX_FOLDER_CHARS)

    @model_validator(mode="after")
    def _one_source(self) -> CreateNoteParams:
        if (self.content is None) == (self.blocks is None):
            raise ValueError("give exactly one of content or blocks")
        return self


class UpdateNoteParams(_NoteContent):
    note_id: str = Field(min_length=1, max_length=200)
    title: str | None = Field(None, min_length=1, max_length=MAX_TITLE_CHARS)
    folder: str | None = Field(None, max_length=MAX_FOLDER_CHARS)

    @model_validator(mode="after")
    def _at_most_one_source(self) -> UpdateNoteParams:
        if self.content is not None and self.blocks is not None:
            raise ValueError("give at most one of content or blocks")
        return self


class NoteIdParams(Params):
    note_id: str = Field(min_length=1, max_length=200)


class ListNotesParams(PageParams):
    folder: str | None = Field(None, max_length=MAX_FOLDER_CHARS, description="This folder and its subfolders.")
