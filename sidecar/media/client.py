"""The sidecar's side of the transcription worker, over the one worker channel (:mod:`sidecar.workers.channel`).

One worker process at a time (jobs of the kind run one after another by default), started on the first job (its
own process group, stopped with the sidecar) and kept with its models loaded for the next job; it is stopped
after ``idle_s`` without work (env ``METONA_MEDIA_IDLE_S``, default 300 s; 0 keeps it until the sidecar stops:
a warm worker starts a job's first words without the worker's start and the model's load). A cancelled job
kills the worker's group at once (the next job starts a fresh one);
a worker that cannot start, breaks the protocol or dies mid-job fails that job with ``TRANSCRIPTION_FAILED``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from anyio.abc import TaskGroup

from sidecar.core.errors import SidecarError
from sidecar.workers import engines
from sidecar.workers.channel import WorkerChannel, WorkerFault
from sidecar.workers.env import worker_env
from sidecar.workers.protocol import Delta, Error, Progress
from sidecar.workers.supervisor import ChildSupervisor

from . import errors

logger = logging.getLogger(__name__)
OnEvent = Callable[[str, dict[str, Any]], Awaitable[None]]
DEFAULT_IDLE_S = 300.0


def idle_from_env(environ: Mapping[str, str] = os.environ) -> float:
    """``METONA_MEDIA_IDLE_S`` (seconds ≥ 0) or the default; a bad value is logged and ignored."""
    raw = environ.get("METONA_MEDIA_IDLE_S")
    if raw is None or not raw.strip():
        return DEFAULT_IDLE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        logger.warning("METONA_MEDIA_IDLE_S=%r is not a number of seconds >= 0: using %g s", raw, DEFAULT_IDLE_S)
        return DEFAULT_IDLE_S
    return value


KILL_GRACE_S = 0.3
HELLO_TIMEOUT_S = 60.0
"""The worker imports its pipeline (PyAV, numpy) before it says hello: seconds on a busy machine."""
WORKER_NAME = "transcription worker"


def _fault(fault: WorkerFault) -> SidecarError:
    if fault.at_start:
        return errors.TranscriptionWorkerUnavailable(
            "The transcription worker could not start.", details={"reason": "WORKER_START_FAILED"}
        )
    return errors.TranscriptionFailed(
        f"The transcription failed: {fault.message}.", details={"reason": fault.reason, "exit_code": fault.exit_code}
    )


def _error(error: Error) -> SidecarError:
    return errors.from_worker(error.code, error.message or "The transcription failed.", dict(error.details))


class WorkerClient:
    def __init__(self, children: ChildSupervisor, task_group: TaskGroup, *, idle_s: float | None = None) -> None:
        self._channel = WorkerChannel(
            children,
            task_group,
            name=WORKER_NAME,
            argv=engines.worker_argv("media-worker"),
            env=lambda: worker_env(os.environ),
            on_fault=_fault,
            on_error=_error,
            hello_timeout_s=HELLO_TIMEOUT_S,
            idle_s=idle_from_env() if idle_s is None else idle_s,
            stop_grace_s=KILL_GRACE_S,
        )
        self._lock = anyio.Lock()

    @property
    def pid(self) -> int | None:
        return self._channel.pid

    async def stop(self) -> None:
        await self._channel.stop()

    async def run(self, request: dict[str, Any], on_event: OnEvent) -> dict[str, Any]:
        """Run one job in the worker; cancellation kills the worker (within ``KILL_GRACE_S`` + a kill)."""

        in_callback = False

        async def relay(event: Progress | Delta) -> None:
            nonlocal in_callback
            if isinstance(event, Progress):
                in_callback = True
                await on_event(event.stage, dict(event.data))
                in_callback = False

        async with self._lock:
            try:
                return await self._channel.request("transcribe", request, relay)
            except BaseException as exc:
                if in_callback or not isinstance(exc, SidecarError):
                    # cancelled (or our own failure) while the worker still works: kill it. A SidecarError from the
                    # channel means the worker answered, or the channel has stopped it already.
                    with anyio.CancelScope(shield=True):
                        await self._channel.stop()
                raise
