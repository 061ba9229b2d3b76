"""``media/transcriptions/*`` and ``media/profiles/list`` (phase-2 §5, ARCHITECTURE.md §6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sidecar.core.common import CursorPage, OperationResponse, Page
from sidecar.ipc.router import Method
from sidecar.knowledge.models import Note
from sidecar.trace.models import StoredEvent

from .models import (
    CreateTranscriptionParams,
    EmptyMediaParams,
    ListTranscriptionsParams,
    ProfileList,
    TranscriptionEventsParams,
    TranscriptionIdParams,
    TranscriptionJob,
    TranscriptionJobSummary,
    TranscriptNoteParams,
)

if TYPE_CHECKING:
    from sidecar.ipc.context import RequestContext

    from .service import MediaService


def methods(media: MediaService) -> list[Method[Any, Any]]:
    async def create(ctx: RequestContext, p: CreateTranscriptionParams) -> TranscriptionJob:
        return await media.create(p)

    async def list_jobs(ctx: RequestContext, p: ListTranscriptionsParams) -> Page[TranscriptionJobSummary]:
        return await media.list(p.status, p.limit, p.offset)

    async def get(ctx: RequestContext, p: TranscriptionIdParams) -> TranscriptionJob:
        return await media.get(p.job_id)

    async def events(ctx: RequestContext, p: TranscriptionEventsParams) -> CursorPage[StoredEvent]:
        return await media.events(p.job_id, p.after_sequence, p.limit)

    async def cancel(ctx: RequestContext, p: TranscriptionIdParams) -> OperationResponse:
        return await media.cancel(p.job_id)

    async def notes(ctx: RequestContext, p: TranscriptNoteParams) -> Note:
        return await media.to_note(p)

    async def profiles(ctx: RequestContext, p: EmptyMediaParams) -> ProfileList:
        return ProfileList(items=media.profiles())

    return [
        Method(
            "media/transcriptions/create",
            CreateTranscriptionParams,
            TranscriptionJob,
            create,
            summary="Queue a transcription of an audio attachment (answers at once, status queued); runs in a worker.",
        ),
        Method(
            "media/transcriptions/list",
            ListTranscriptionsParams,
            Page[TranscriptionJobSummary],
            list_jobs,
            summary="Transcription jobs, newest first (status/limit/offset).",
        ),
        Method(
            "media/transcriptions/get",
            TranscriptionIdParams,
            TranscriptionJob,
            get,
            summary="A transcription job with its segments (segments and text once completed).",
        ),
        Method(
            "media/transcriptions/events",
            TranscriptionEventsParams,
            CursorPage[StoredEvent],
            events,
            summary="The job's event log after after_sequence (Queued, ModelLoading, ..., Completed|Failed|Cancelled).",
        ),
        Method(
            "media/transcriptions/cancel",
            TranscriptionIdParams,
            OperationResponse,
            cancel,
            summary="Request cancellation (kills the worker's work); the job or its Cancelled event has the end.",
        ),
        Method(
            "media/transcriptions/notes",
            TranscriptNoteParams,
            Note,
            notes,
            summary="Turn a completed transcript into a note; each block cites source_audio, start/end time, speaker.",
        ),
        Method(
            "media/profiles/list",
            EmptyMediaParams,
            ProfileList,
            profiles,
            summary="Server-side transcription profiles (model, compute type, beam, VAD, diarization) + availability.",
        ),
    ]
