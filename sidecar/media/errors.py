"""Transcription error codes (phase-2 §5) with their HTTP status.

The worker reports a failed job with one of these codes (and a stable ``details.reason``); :func:`from_worker`
turns it back into the typed error. A worker that cannot start is ``TRANSCRIPTION_FAILED`` with 503 (reason
``WORKER_START_FAILED``); one that dies, or breaks the protocol, mid-job is ``TRANSCRIPTION_FAILED`` with 500.
A job that is not found (or is another kind of job) is ``TRANSCRIPTION_JOB_NOT_FOUND`` (the not-found rule of
ipc_schema/README.md).
"""

from __future__ import annotations

from typing import Any

from sidecar.core.errors import BadRequestError, ConflictError, NotFoundError, SidecarError, UnavailableError

TRANSCRIPTION_FAILED = "TRANSCRIPTION_FAILED"
TRANSCRIPTION_MODEL_UNAVAILABLE = "TRANSCRIPTION_MODEL_UNAVAILABLE"
UNSUPPORTED_AUDIO_FORMAT = "UNSUPPORTED_AUDIO_FORMAT"
TRANSCRIPTION_CANCELLED = "TRANSCRIPTION_CANCELLED"
JOB_NOT_FOUND = "TRANSCRIPTION_JOB_NOT_FOUND"
DIARIZATION_UNAVAILABLE = "DIARIZATION_UNAVAILABLE"
"""A warning of a completed job (speakers not labelled), never an error."""


class TranscriptionFailed(SidecarError):
    status = 500
    default_code = TRANSCRIPTION_FAILED


class TranscriptionWorkerUnavailable(UnavailableError):
    """The worker could not be started (503)."""

    default_code = TRANSCRIPTION_FAILED


class TranscriptionModelUnavailable(UnavailableError):
    default_code = TRANSCRIPTION_MODEL_UNAVAILABLE


class UnsupportedAudioFormat(BadRequestError):
    default_code = UNSUPPORTED_AUDIO_FORMAT


class UnsupportedLanguage(BadRequestError):
    default_code = "UNSUPPORTED_LANGUAGE"


class TranscriptionProfileNotFound(NotFoundError):
    default_code = "TRANSCRIPTION_PROFILE_NOT_FOUND"


class AttachmentFileMissing(NotFoundError):
    default_code = "ATTACHMENT_NOT_FOUND"


class TranscriptionJobNotFound(NotFoundError):
    default_code = JOB_NOT_FOUND


class TranscriptNotReady(ConflictError):
    default_code = "TRANSCRIPT_NOT_READY"


class TemplateNotFound(NotFoundError):
    default_code = "TEMPLATE_NOT_FOUND"


_FROM_WORKER: dict[str, type[SidecarError]] = {
    UNSUPPORTED_AUDIO_FORMAT: UnsupportedAudioFormat,
    TRANSCRIPTION_MODEL_UNAVAILABLE: TranscriptionModelUnavailable,
}


def from_worker(code: str, message: str, details: dict[str, Any]) -> SidecarError:
    """The typed error for a job the worker failed with ``code`` (any other code: 500, the code kept)."""
    return _FROM_WORKER.get(code, TranscriptionFailed)(message, code=code, details=details)
