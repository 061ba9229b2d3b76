"""``attachments/*`` and ``notes/*``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sidecar.core.common import Page
from sidecar.ipc.router import Method

from .models import (
    Attachment,
    AttachmentIdParams,
    CreateNoteParams,
    DeleteResult,
    ImportAttachmentParams,
    ListAttachmentsParams,
    ListNotesParams,
    Note,
    NoteIdParams,
    NoteSummary,
    UpdateNoteParams,
)

if TYPE_CHECKING:
    from sidecar.ipc.context import RequestContext

    from .service import KnowledgeService


def methods(knowledge: KnowledgeService) -> list[Method[Any, Any]]:
    async def import_(ctx: RequestContext, p: ImportAttachmentParams) -> Attachment:
        return await knowledge.import_attachment(p.path, p.filename)

    async def get_attachment(ctx: RequestContext, p: AttachmentIdParams) -> Attachment:
        return await knowledge.get_attachment(p.attachment_id)

    async def list_attachments(ctx: RequestContext, p: ListAttachmentsParams) -> Page[Attachment]:
        return await knowledge.list_attachments(p.limit, p.offset)

    async def delete_attachment(ctx: RequestContext, p: AttachmentIdParams) -> DeleteResult:
        return await knowledge.delete_attachment(p.attachment_id)

    async def create(ctx: RequestContext, p: CreateNoteParams) -> Note:
        return await knowledge.create_note(p)

    async def get(ctx: RequestContext, p: NoteIdParams) -> Note:
        return await knowledge.get_note(p.note_id)

    async def list_notes(ctx: RequestContext, p: ListNotesParams) -> Page[NoteSummary]:
        return await knowledge.list_notes(p.folder, p.limit, p.offset)

    async def update(ctx: RequestContext, p: UpdateNoteParams) -> Note:
        return await knowledge.update_note(p)

    async def delete(ctx: RequestContext, p: NoteIdParams) -> DeleteResult:
        return await knowledge.delete_note(p.note_id)

    return [
        Method(
            "attachments/import",
            ImportAttachmentParams,
            Attachment,
            import_,
            summary="Copy a host-chosen file into the data directory (sha256, mime type, size limit) → attachment.",
        ),
        Method("attachments/get", AttachmentIdParams, Attachment, get_attachment, summary="One attachment."),
        Method("attachments/list", ListAttachmentsParams, Page[Attachment], list_attachments, summary="Attachments."),
        Method(
            "attachments/delete",
            AttachmentIdParams,
            DeleteResult,
            delete_attachment,
            summary="Delete an attachment and its file (409 ATTACHMENT_IN_USE while a block cites it).",
        ),
        Method(
            "notes/create",
            CreateNoteParams,
            Note,
            create,
            summary="Create a note from Markdown (split into blocks) or explicit blocks with citations; indexes it.",
        ),
        Method("notes/get", NoteIdParams, Note, get, summary="A note with its blocks and citations."),
        Method("notes/list", ListNotesParams, Page[NoteSummary], list_notes, summary="Notes, newest first."),
        Method(
            "notes/update",
            UpdateNoteParams,
            Note,
            update,
            summary="Update title/folder/content; unchanged blocks keep their ids; only changed blocks re-index.",
        ),
        Method("notes/delete", NoteIdParams, DeleteResult, delete, summary="Delete a note and its blocks."),
    ]
