"""Media (transcription) wire types (phase-2 §5, snake_case) and the server-side profiles.

A request names a profile by ``profile_id``; it never carries a model path (§5.1). Profiles are data:
which Whisper model, compute type, beam size, VAD and diarization settings.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, field_validator

from sidecar.core.common import AfterSequence, ErrorInfo, PageParams, Params, Phase2Model
from sidecar.jobs.models import JobProgress, JobStatus

TRANSCRIPTION_KIND = "transcription"

# Whisper's language codes (faster_whisper.tokenizer._LANGUAGE_CODES, copied so the sidecar can check a request
# without importing faster-whisper).
WHISPER_LANGUAGES: frozenset[str] = frozenset(
    "af am ar as az ba be bg bn bo br bs ca cs cy da de el en es et eu fa fi fo fr gl gu ha haw he hi hr ht hu hy id"
    " is it ja jw ka kk km kn ko la lb ln lo lt lv mg mi mk ml mn mr ms mt my ne nl nn no oc pa pl ps pt ro ru sa sd"
    " si sk sl sn so sq sr su sv sw ta te tg th tk tl tr tt uk ur uz vi yi yo zh yue".split()
)


# -- profiles --------------------------------------------------------------------------------------


class DiarizationSettings(Phase2Model):
    """pyannote ``SpeakerDiarization`` built from local weights (segmentation-3.0 + CAM++ embeddings)."""

    segmentation_step: float = Field(0.5, description="Sliding-window step as a ratio of the 10 s window.")
    clustering_threshold: float = 0.7
    min_cluster_size: int = 2
    min_duration_off: float = 0.0


class TranscriptionProfile(Phase2Model):
    profile_id: str
    description: str
    model: Literal["whisper-base", "whisper-tiny.en"]
    multilingual: bool
    languages: list[str] = Field(description="The Whisper language codes this profile transcribes.")
    compute_type: str = "int8"
    beam_size: int = 5
    vad_filter: bool = True
    vad_min_silence_ms: int = 500
    condition_on_previous_text: bool = Field(
        False, description="Off: a hallucinated phrase cannot feed the next window (fewer repeats)."
    )
    diarization: DiarizationSettings = Field(default_factory=DiarizationSettings)
    available: bool = Field(True, description="Whether this machine has the profile's model.")
    unavailable_reason: str | None = None


PROFILES: dict[str, TranscriptionProfile] = {
    p.profile_id: p
    for p in (
        TranscriptionProfile(
            profile_id="default",
            description="Whisper base, multilingual (99 languages, Mandarin included), language auto-detected; Chinese"
            " in simplified characters unless the locale asks for traditional. The default for Chinese and for an"
            " undetected language: the only multilingual model the packages ship (Mandarin CER and RTF:"
            " scripts/bench/bench_transcription.py --real).",
            model="whisper-base",
            multilingual=True,
            languages=sorted(WHISPER_LANGUAGES),
        ),
        TranscriptionProfile(
            profile_id="en-fast",
            description="Whisper tiny.en: English only, about 4x faster than base.",
            model="whisper-tiny.en",
            multilingual=False,
            languages=["en"],
        ),
    )
}


class ProfileList(Phase2Model):
    items: list[TranscriptionProfile]


# -- jobs ------------------------------------------------------------------------------------------


class Word(Phase2Model):
    word: str
    start: float
    end: float
    probability: float | None = None
    speaker: str | None = None


class TranscriptSegment(Phase2Model):
    """§5.2: ordered by ``start_time``, never overlapping, no negative duration."""

    segment_id: str
    speaker: str | None = None
    start_time: float
    end_time: float
    text: str
    confidence: float | None = None
    words: list[Word] = Field(default_factory=list)


class TranscriptionJob(Phase2Model):
    """§5.1's response object; the full job of ``get``."""

    job_id: str
    attachment_id: str
    profile_id: str
    status: JobStatus
    progress: JobProgress | None = None
    language: str | None = None
    script: Literal["simplified", "traditional"] = Field(
        "simplified", description="The characters a Chinese (zh, yue) transcript is written in (from the locale)."
    )
    diarization_enabled: bool
    word_timestamps: bool = False
    duration: float | None = Field(None, description="Seconds of decoded audio (once known).")
    segments: list[TranscriptSegment] = Field(default_factory=list)
    text: str | None = None
    warnings: list[ErrorInfo] = Field(default_factory=list)
    error: ErrorInfo | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: str
    started_at: str | None = None
    updated_at: str
    completed_at: str | None = None


class TranscriptionJobSummary(Phase2Model):
    """A row of ``list``: the job without its segments and text."""

    job_id: str
    attachment_id: str
    profile_id: str
    status: JobStatus
    progress: JobProgress | None = None
    language: str | None = None
    diarization_enabled: bool
    duration: float | None = None
    segment_count: int = 0
    warnings: list[ErrorInfo] = Field(default_factory=list)
    error: ErrorInfo | None = None
    created_at: str
    started_at: str | None = None
    updated_at: str
    completed_at: str | None = None


METADATA_MAX_BYTES = 16 * 1024


# -- params ----------------------------------------------------------------------------------------


class CreateTranscriptionParams(Params):
    attachment_id: str = Field(min_length=1, max_length=200)
    language: str | None = Field(None, description="null = auto-detect; else a Whisper language code.")
    diarization: bool = True
    word_timestamps: bool = False
    profile_id: str = Field("default", min_length=1, max_length=100)
    locale: str | None = Field(
        None,
        max_length=35,
        pattern=r"^[A-Za-z]{2,8}([-_][A-Za-z0-9]{1,8})*$",
        description="The reader's BCP 47 locale; decides the script of a Chinese transcript: zh-TW, zh-HK, zh-MO,"
        " zh-Hant → traditional characters; anything else → the app's locale (config app.locale), else simplified.",
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Business context only; not model input (at most 16 KiB as JSON)."
    )

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, v: dict[str, Any]) -> dict[str, Any]:
        # stored on the job row and returned by every get/list: a bound keeps a pasted blob from bloating both
        if len(json.dumps(v, ensure_ascii=False, default=str).encode()) > METADATA_MAX_BYTES:
            raise ValueError(f"metadata is larger than {METADATA_MAX_BYTES // 1024} KiB as JSON")
        return v

    @field_validator("language")
    @classmethod
    def _language(cls, v: str | None) -> str | None:
        if v is None:
            return None
        v = v.strip().lower()
        if v not in WHISPER_LANGUAGES:
            raise ValueError("not a Whisper language code")
        return v


class TranscriptionIdParams(Params):
    job_id: str = Field(min_length=1, max_length=200)


class ListTranscriptionsParams(PageParams):
    status: str | None = Field(None, description="queued, running (or processing), completed, failed, cancelled")


class TranscriptionEventsParams(Params):
    job_id: str = Field(min_length=1, max_length=200)
    after_sequence: AfterSequence = 0
    limit: int = Field(200, ge=1, le=1000)


class TranscriptNoteParams(Params):
    job_id: str = Field(min_length=1, max_length=200)
    title: str | None = Field(None, min_length=1, max_length=500, description="Default: the audio's file name.")
    folder: str | None = Field(None, max_length=500)
    include_timestamps: bool = True
    include_speakers: bool = True
    template_id: str | None = Field(None, description="Only null (the built-in layout) is supported.")


class EmptyMediaParams(Params):
    pass
