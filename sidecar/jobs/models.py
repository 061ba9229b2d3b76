"""The one Job model of phase 2 (seed §4.2), shared by transcription, export, benchmarks, index rebuild."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from sidecar.core.common import ErrorInfo, Phase2Model


class JobStatus(StrEnum):
    """``queued → running → completed | failed | cancelled``.

    Phase 1 transcription said ``processing``; it is still accepted on input and maps to ``running``
    (seed §4.2). It is never produced.
    """

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @classmethod
    def _missing_(cls, value: object) -> JobStatus | None:
        if isinstance(value, str):
            v = value.strip().lower()
            if v == "processing":
                return cls.RUNNING
            for member in cls:
                if member.value == v:
                    return member
        return None

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES: frozenset[JobStatus] = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED})
ACTIVE_STATUSES: frozenset[JobStatus] = frozenset({JobStatus.QUEUED, JobStatus.RUNNING})


class JobProgress(Phase2Model):
    """``{"phase", "current", "total", "percent", "message"}``; ``percent`` may be null (never 100 as "done")."""

    phase: str
    current: int | float | None = None
    total: int | float | None = None
    percent: float | None = None
    message: str | None = None


class Job(Phase2Model):
    job_id: str
    kind: str
    status: JobStatus
    progress: JobProgress | None = None
    result: dict[str, Any] | None = None
    error: ErrorInfo | None = None
    created_at: str
    started_at: str | None = None
    updated_at: str
    completed_at: str | None = None
