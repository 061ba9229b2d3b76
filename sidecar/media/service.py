"""Transcription jobs (phase-2 §5) over the JobManager, the worker process and the Knowledge Core.

Tables (namespace ``media``): ``media_transcriptions`` (one row per job: attachment, profile, options, then the
result's language, duration, text and warnings) and ``media_segments``. The job's status, progress, error and
event log are the JobManager's (``jobs`` + the event log). A job's segments are written in one transaction
when the worker has finished, and shown only for a ``completed`` job, so a cancel or a crash never leaves a
half transcript visible.
"""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from sidecar.core.chinese import ScriptChoice, converter, resolve_script
from sidecar.core.common import CursorPage, ErrorInfo, OperationResponse, Page, PageInfo
from sidecar.jobs import JobContext, JobManager
from sidecar.jobs.models import Job, JobStatus
from sidecar.knowledge.models import MAX_BLOCK_CHARS, MAX_BLOCKS_PER_NOTE, BlockInput, Citation, CreateNoteParams, Note
from sidecar.knowledge.service import KnowledgeService
from sidecar.storage.sqlite import Database
from sidecar.trace.models import StoredEvent

from . import errors, resolve
from .audio import sniff_audio
from .client import WorkerClient
from .models import (
    PROFILES,
    TRANSCRIPTION_KIND,
    CreateTranscriptionParams,
    TranscriptionJob,
    TranscriptionJobSummary,
    TranscriptionProfile,
    TranscriptNoteParams,
    TranscriptSegment,
)
from .notes import pack_blocks, transcript_blocks

logger = logging.getLogger(__name__)

NOT_FOUND_CODE = errors.JOB_NOT_FOUND
CANCELLED_ERROR = ErrorInfo(code=errors.TRANSCRIPTION_CANCELLED, message="The transcription was cancelled.")
_FORWARDED_EVENTS = {
    "ModelLoading",
    "TranscriptionStarted",
    "Segment",
    "DiarizationStarted",
    "DiarizationCompleted",
    "SpeakersAssigned",
}
"""The worker's events that become the job's: ``Segment`` carries one TranscriptSegment as soon as it is recognised
(speaker null); ``SpeakersAssigned`` carries ``{"segments": [{"segment_id", "speaker"}]}`` once diarization ends."""
CHINESE = frozenset({"zh", "yue"})

MIGRATIONS: list[str] = [
    """
    CREATE TABLE media_transcriptions (
        job_id          TEXT PRIMARY KEY NOT NULL,
        attachment_id   TEXT NOT NULL,
        profile_id      TEXT NOT NULL,
        language_req    TEXT,
        diarization     INTEGER NOT NULL,
        word_timestamps INTEGER NOT NULL,
        metadata        TEXT NOT NULL DEFAULT '{}',
        language        TEXT,
        duration        REAL,
        text            TEXT,
        warnings        TEXT NOT NULL DEFAULT '[]',
        segment_count   INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX media_transcriptions_attachment ON media_transcriptions (attachment_id);
    CREATE TABLE media_segments (
        job_id     TEXT NOT NULL REFERENCES media_transcriptions (job_id) ON DELETE CASCADE,
        position   INTEGER NOT NULL,
        segment_id TEXT NOT NULL,
        speaker    TEXT,
        start_time REAL NOT NULL,
        end_time   REAL NOT NULL,
        text       TEXT NOT NULL,
        confidence REAL,
        words      TEXT NOT NULL DEFAULT '[]',
        PRIMARY KEY (job_id, position)
    );
    """,
    # issue 34: the reader's locale (request) and the script a Chinese transcript is written in
    """
    ALTER TABLE media_transcriptions ADD COLUMN locale TEXT;
    ALTER TABLE media_transcriptions ADD COLUMN script TEXT NOT NULL DEFAULT 'simplified';
    ALTER TABLE media_transcriptions ADD COLUMN script_config TEXT NOT NULL DEFAULT '';
    """,
]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class MediaService:
    def __init__(
        self,
        db: Database,
        jobs: JobManager,
        knowledge: KnowledgeService,
        worker: WorkerClient,
        *,
        models_dir: Path,
        tmp_dir: Path,
        whisper_model_dir: Path | None = None,
        diarization_model_dir: Path | None = None,
        concurrency: int = 1,
        app_locale: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:
        self._db = db
        self._jobs = jobs
        self._knowledge = knowledge
        self._worker = worker
        self._models_dir = models_dir
        self._tmp_dir = tmp_dir
        self._whisper_dir = whisper_model_dir
        self._diarization_dir = diarization_model_dir
        self._app_locale = app_locale
        jobs.register_kind(TRANSCRIPTION_KIND, concurrency, failure_code="TRANSCRIPTION_FAILED")

    async def migrate(self) -> None:
        await self._jobs.migrate()  # (idempotent) the tidy-up below reads the jobs table
        await self._db.migrate("media", MIGRATIONS)

        def tidy(conn: sqlite3.Connection) -> None:  # segments of a job that never completed (a crash mid-write)
            conn.execute(
                "DELETE FROM media_segments WHERE job_id IN (SELECT m.job_id FROM media_transcriptions m"
                " JOIN jobs j ON j.job_id = m.job_id WHERE j.status != 'completed')"
            )

        await self._db.run(tidy)
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(self._tmp_dir, ignore_errors=True))

    # -- profiles ----------------------------------------------------------------------------------

    def _unavailable(self, profile: TranscriptionProfile) -> str | None:
        reason = resolve.engine_unavailable_reason()
        if reason:
            return reason
        try:
            resolve.locate_whisper(profile.model, self._models_dir, self._whisper_dir)
        except resolve.ModelUnavailable as exc:
            return str(exc)
        return None

    def profiles(self) -> list[TranscriptionProfile]:
        out = []
        for p in PROFILES.values():
            reason = self._unavailable(p)
            out.append(p.model_copy(update={"available": reason is None, "unavailable_reason": reason}))
        return out

    def _profile(self, profile_id: str) -> TranscriptionProfile:
        profile = PROFILES.get(profile_id)
        if profile is None:
            raise errors.TranscriptionProfileNotFound(
                "Transcription profile was not found.", details={"profile_id": profile_id, "known": sorted(PROFILES)}
            )
        return profile

    # -- create ------------------------------------------------------------------------------------

    async def _check_audio(self, attachment_id: str) -> Path:
        att = await self._knowledge.get_attachment(attachment_id)
        path = await self._knowledge.attachment_path(attachment_id)

        def head() -> bytes:
            with open(path, "rb") as f:
                return f.read(64)

        try:
            first = await anyio.to_thread.run_sync(head)
        except OSError:
            raise errors.AttachmentFileMissing(
                "The attachment's file is missing.", details={"attachment_id": attachment_id}
            ) from None
        if not first:
            raise errors.UnsupportedAudioFormat("The file is empty.", details={"reason": "EMPTY_FILE"})
        if sniff_audio(first, att.filename) is None:
            raise errors.UnsupportedAudioFormat(
                "The file is not a supported audio format (wav, mp3, m4a/aac, ogg/opus, flac, webm).",
                details={"reason": "UNRECOGNISED_FORMAT", "mime_type": att.mime_type},
            )
        return path

    async def create(self, p: CreateTranscriptionParams) -> TranscriptionJob:
        profile = self._profile(p.profile_id)
        reason = self._unavailable(profile)
        if reason:
            raise errors.TranscriptionModelUnavailable(
                "The transcription model is not available on this machine.",
                details={"profile_id": profile.profile_id, "model": profile.model, "reason": reason},
            )
        if not profile.multilingual and p.language not in (None, "en"):
            raise errors.UnsupportedLanguage(
                "This profile transcribes English only.",
                details={"profile_id": profile.profile_id, "language": p.language},
            )
        await self._check_audio(p.attachment_id)
        job_id = f"{TRANSCRIPTION_KIND}_{uuid.uuid4().hex}"
        script = await self._script(p.locale)

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO media_transcriptions (job_id, attachment_id, profile_id, language_req, diarization,"
                " word_timestamps, metadata, locale, script, script_config) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    job_id,
                    p.attachment_id,
                    profile.profile_id,
                    p.language,
                    int(p.diarization),
                    int(p.word_timestamps),
                    _dumps(p.metadata),
                    p.locale,
                    script.script,
                    script.config,
                ),
            )

        with anyio.CancelScope(shield=True):
            await self._db.run(insert)
            try:
                job = await self._jobs.submit(TRANSCRIPTION_KIND, p.model_dump(), self._runner, job_id=job_id)
            except BaseException:
                await self._db.run(lambda c: c.execute("DELETE FROM media_transcriptions WHERE job_id = ?", (job_id,)))
                raise
        return self._view(job, self._row_defaults(job_id, p, profile, script), [])

    async def _script(self, locale: str | None) -> ScriptChoice:
        """The request's locale, else the app's (``app.locale``), else simplified."""
        if locale is not None or self._app_locale is None:
            app = None
        else:
            app = await self._app_locale()
        return resolve_script(locale, app if isinstance(app, str) else None)

    @staticmethod
    def _row_defaults(
        job_id: str, p: CreateTranscriptionParams, profile: TranscriptionProfile, script: ScriptChoice
    ) -> dict[str, Any]:
        return {
            "job_id": job_id,
            "attachment_id": p.attachment_id,
            "profile_id": profile.profile_id,
            "language_req": p.language,
            "diarization": int(p.diarization),
            "word_timestamps": int(p.word_timestamps),
            "metadata": _dumps(p.metadata),
            "locale": p.locale,
            "script": script.script,
            "script_config": script.config,
            "language": None,
            "duration": None,
            "text": None,
            "warnings": "[]",
            "segment_count": 0,
        }

    # -- the job ------------------------------------------------------------------------------------

    async def _runner(self, ctx: JobContext) -> dict[str, Any]:
        p = CreateTranscriptionParams.model_validate(ctx.params)
        profile = self._profile(p.profile_id)
        try:
            source = resolve.locate_whisper(profile.model, self._models_dir, self._whisper_dir)
        except resolve.ModelUnavailable as exc:
            raise errors.TranscriptionModelUnavailable(
                "The transcription model is not available on this machine.",
                details={"profile_id": profile.profile_id, "model": profile.model, "reason": str(exc)},
            ) from None
        audio_path = await self._knowledge.attachment_path(p.attachment_id)
        row = await self._row(ctx.job_id)
        request = {
            "job_id": ctx.job_id,
            "audio": str(audio_path),
            "tmp_dir": str(self._tmp_dir),
            "model": {
                "model": source.model,
                "ready": str(source.ready) if source.ready else None,
                "split_dirs": [str(d) for d in source.split_dirs],
                "target": str(source.target) if source.target else None,
            },
            "profile": profile.model_dump(mode="json"),
            "language": p.language,
            "diarize": p.diarization,
            "diarization_dir": str(self._diarization_dir) if self._diarization_dir else None,
            "word_timestamps": p.word_timestamps,
            "script": {"script": row["script"], "config": row["script_config"]},
        }

        async def on_event(event: str, data: dict[str, Any]) -> None:
            if event == "Progress":
                current, total = data.get("current"), data.get("total")
                await ctx.progress("transcribing", current, total, "Transcribing audio")
            elif event in _FORWARDED_EVENTS:
                await ctx.emit(event, data)

        result = await self._worker.run(request, on_event)
        segments = [TranscriptSegment.model_validate(s) for s in result.get("segments", [])]
        warnings = [ErrorInfo.model_validate(w) for w in result.get("warnings", [])]
        language = result.get("language")
        duration = result.get("duration")
        text = result.get("text") or ""

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM media_segments WHERE job_id = ?", (ctx.job_id,))
            conn.executemany(
                "INSERT INTO media_segments (job_id, position, segment_id, speaker, start_time, end_time, text,"
                " confidence, words) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        ctx.job_id,
                        i,
                        s.segment_id,
                        s.speaker,
                        s.start_time,
                        s.end_time,
                        s.text,
                        s.confidence,
                        _dumps([w.model_dump(mode="json") for w in s.words]),
                    )
                    for i, s in enumerate(segments)
                ],
            )
            conn.execute(
                "UPDATE media_transcriptions SET language = ?, duration = ?, text = ?, warnings = ?, segment_count = ?"
                " WHERE job_id = ?",
                (
                    language,
                    duration,
                    text,
                    _dumps([w.model_dump(mode="json") for w in warnings]),
                    len(segments),
                    ctx.job_id,
                ),
            )

        with anyio.CancelScope(shield=True):
            await self._db.run(write)
        return {
            "job_id": ctx.job_id,
            "language": language,
            "duration": duration,
            "segment_count": len(segments),
            "warnings": [w.model_dump(mode="json") for w in warnings],
        }

    # -- reads -------------------------------------------------------------------------------------

    @staticmethod
    def _error_of(job: Job) -> ErrorInfo | None:
        if job.status is JobStatus.CANCELLED:
            return job.error or CANCELLED_ERROR
        return job.error

    def _view(self, job: Job, row: Any, segments: list[TranscriptSegment]) -> TranscriptionJob:
        completed = job.status is JobStatus.COMPLETED
        return TranscriptionJob(
            job_id=job.job_id,
            attachment_id=row["attachment_id"],
            profile_id=row["profile_id"],
            status=job.status,
            progress=job.progress,
            language=row["language"] if completed else row["language_req"],
            script=row["script"],
            diarization_enabled=bool(row["diarization"]),
            word_timestamps=bool(row["word_timestamps"]),
            duration=row["duration"] if completed else None,
            segments=segments if completed else [],
            text=row["text"] if completed else None,
            warnings=[ErrorInfo.model_validate(w) for w in json.loads(row["warnings"])] if completed else [],
            error=self._error_of(job),
            metadata=json.loads(row["metadata"]),
            created_at=job.created_at,
            started_at=job.started_at,
            updated_at=job.updated_at,
            completed_at=job.completed_at,
        )

    async def _row(self, job_id: str) -> sqlite3.Row:
        row = await self._db.read(
            lambda c: c.execute("SELECT * FROM media_transcriptions WHERE job_id = ?", (job_id,)).fetchone()
        )
        if row is None:
            raise errors.TranscriptionJobNotFound("Transcription job was not found.", details={"job_id": job_id})
        return row

    async def _segments(self, job_id: str) -> list[TranscriptSegment]:
        rows = await self._db.read(
            lambda c: c.execute("SELECT * FROM media_segments WHERE job_id = ? ORDER BY position", (job_id,)).fetchall()
        )
        return [
            TranscriptSegment(
                segment_id=r["segment_id"],
                speaker=r["speaker"],
                start_time=r["start_time"],
                end_time=r["end_time"],
                text=r["text"],
                confidence=r["confidence"],
                words=json.loads(r["words"]),
            )
            for r in rows
        ]

    async def get(self, job_id: str) -> TranscriptionJob:
        job = await self._jobs.get(job_id, kind=TRANSCRIPTION_KIND, not_found_code=NOT_FOUND_CODE)
        row = await self._row(job_id)
        segments = await self._segments(job_id) if job.status is JobStatus.COMPLETED else []
        return self._view(job, row, segments)

    async def list(self, status: str | None = None, limit: int = 50, offset: int = 0) -> Page[TranscriptionJobSummary]:
        page = await self._jobs.list(TRANSCRIPTION_KIND, status, limit, offset)
        ids = [j.job_id for j in page.items]
        marks = ",".join("?" for _ in ids)
        rows = (
            await self._db.read(
                lambda c: {
                    r["job_id"]: r
                    for r in c.execute(f"SELECT * FROM media_transcriptions WHERE job_id IN ({marks})", ids)
                }
            )
            if ids
            else {}
        )
        items = []
        for job in page.items:
            row = rows.get(job.job_id)
            if row is None:
                continue
            view = self._view(job, row, [])
            items.append(
                TranscriptionJobSummary(
                    **view.model_dump(
                        include={
                            "job_id",
                            "attachment_id",
                            "profile_id",
                            "status",
                            "progress",
                            "language",
                            "diarization_enabled",
                            "duration",
                            "warnings",
                            "error",
                            "created_at",
                            "started_at",
                            "updated_at",
                            "completed_at",
                        }
                    ),
                    segment_count=row["segment_count"] if job.status is JobStatus.COMPLETED else 0,
                )
            )
        return Page[TranscriptionJobSummary](
            items=items, page=PageInfo(total=page.page.total, limit=limit, offset=offset)
        )

    async def events(self, job_id: str, after_sequence: int = 0, limit: int = 200) -> CursorPage[StoredEvent]:
        return await self._jobs.events(
            job_id, after_sequence, limit, kind=TRANSCRIPTION_KIND, not_found_code=NOT_FOUND_CODE
        )

    async def cancel(self, job_id: str) -> OperationResponse:
        return await self._jobs.cancel(job_id, kind=TRANSCRIPTION_KIND, not_found_code=NOT_FOUND_CODE)

    async def wait(self, job_id: str) -> TranscriptionJob:
        await self._jobs.wait(job_id, kind=TRANSCRIPTION_KIND, not_found_code=NOT_FOUND_CODE)
        return await self.get(job_id)

    # -- transcript → note ---------------------------------------------------------------------------

    async def to_note(self, p: TranscriptNoteParams) -> Note:
        job = await self.get(p.job_id)
        if job.status is not JobStatus.COMPLETED:
            raise errors.TranscriptNotReady(
                "Only a completed transcription can become a note.",
                details={"job_id": p.job_id, "status": job.status.value},
            )
        if p.template_id is not None:
            raise errors.TemplateNotFound("Note template was not found.", details={"template_id": p.template_id})
        att = await self._knowledge.get_attachment(job.attachment_id)
        segments = job.segments
        if job.language in CHINESE:  # a transcript made before the script was chosen (issue 34) reads the same
            row = await self._row(p.job_id)
            convert = converter(ScriptChoice(row["script"], row["script_config"]))
            segments = [s.model_copy(update={"text": convert(s.text)}) for s in segments]
        turns = transcript_blocks(
            segments,
            job.attachment_id,
            include_timestamps=p.include_timestamps,
            include_speakers=p.include_speakers,
        )
        packed = pack_blocks(turns, max_blocks=MAX_BLOCKS_PER_NOTE, max_chars=MAX_BLOCK_CHARS, max_citations=100)
        blocks = [BlockInput(text=text, citations=[Citation(**c) for c in cites]) for text, cites in packed]
        title = p.title or f"Transcript: {att.filename}"
        return await self._knowledge.create_note(CreateNoteParams(title=title, folder=p.folder, blocks=blocks))
