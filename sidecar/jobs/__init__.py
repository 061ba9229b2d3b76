"""One Job model and manager shared by transcription, export, benchmarks and index rebuild."""

from .manager import JobCancelled, JobContext, JobManager, Runner
from .models import ACTIVE_STATUSES, TERMINAL_STATUSES, Job, JobProgress, JobStatus

__all__ = [
    "ACTIVE_STATUSES",
    "TERMINAL_STATUSES",
    "Job",
    "JobCancelled",
    "JobContext",
    "JobManager",
    "JobProgress",
    "JobStatus",
    "Runner",
]
