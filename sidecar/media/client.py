"""The sidecar's side of the transcription worker: start it, hand it a job, relay its events, kill it.

One worker process at a time (jobs of the kind run one after another by default), started on the first job
through the :class:`~sidecar.workers.supervisor.ChildSupervisor` (its own process group, stopped with the sidecar) and
kept with its models loaded for the next job; it is stopped after ``idle_s`` without work. A cancelled job
kills the worker's group at once (the next job starts a fresh one); a worker that dies mid-job fails that job
with ``TRANSCRIPTION_FAILED``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from anyio.abc import Process, TaskGroup

from sidecar.core.errors import SidecarError, UnavailableError
from sidecar.workers.supervisor import ChildSupervisor

logger = logging.getLogger(__name__)

OnEvent = Callable[[str, dict[str, Any]], Awaitable[None]]
MAX_LINE = 256 * 1024 * 1024
DEFAULT_IDLE_S = 300.0
KILL_GRACE_S = 0.3


class TranscriptionFailed(SidecarError):
    status = 500
    default_code = "TRANSCRIPTION_FAILED"


def worker_argv() -> list[str]:
    """How to start the worker: the same interpreter (or the frozen binary) with the worker entry."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "media-worker"]
    return [sys.executable, "-m", "sidecar.media.worker"]


_SECRET_MARKERS = ("SECRET", "API_KEY", "TOKEN", "PASSWORD", "CREDENTIAL")


def worker_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The sidecar's environment minus anything secret (the master key, API keys): the worker needs none."""
    return {k: v for k, v in environ.items() if not any(m in k.upper() for m in _SECRET_MARKERS)}


def _exit_reason(returncode: int | None) -> str:
    if returncode is None:
        return "the transcription worker stopped answering"
    if returncode < 0:
        return f"the transcription worker was killed by signal {-returncode}"
    return f"the transcription worker exited with status {returncode}"


class _Lines:
    def __init__(self, process: Process) -> None:
        assert process.stdout is not None
        self._stream = process.stdout
        self._buf = bytearray()

    async def next(self) -> dict[str, Any] | None:
        while True:
            i = self._buf.find(b"\n")
            if i >= 0:
                line = bytes(self._buf[:i])
                del self._buf[: i + 1]
                if line.strip():
                    return json.loads(line)
                continue
            if len(self._buf) > MAX_LINE:
                raise ValueError("worker line too long")
            try:
                chunk = await self._stream.receive(1 << 20)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return None
            self._buf += chunk


class WorkerClient:
    def __init__(
        self, children: ChildSupervisor, task_group: TaskGroup | None = None, *, idle_s: float = DEFAULT_IDLE_S
    ) -> None:
        self._children = children
        self._tg = task_group
        self._idle_s = idle_s
        self._process: Process | None = None
        self._lines: _Lines | None = None
        self._lock = anyio.Lock()
        self._generation = 0

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    async def _start(self) -> None:
        env = worker_env(os.environ)
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("TRANSFORMERS_OFFLINE", "1")
        env.setdefault("PYANNOTE_METRICS_ENABLED", "false")
        env["PYTHONUNBUFFERED"] = "1"
        process = await self._children.spawn(worker_argv(), name="transcription-worker", env=env, stdin=-1, stdout=-1)
        self._process, self._lines = process, _Lines(process)
        hello = await self._lines.next()
        if not hello or "ready" not in hello:
            await self.stop()
            raise UnavailableError(
                "The transcription worker could not start.",
                code="TRANSCRIPTION_FAILED",
                details={"reason": "WORKER_START_FAILED"},
            )

    async def stop(self) -> None:
        process, self._process, self._lines = self._process, None, None
        if process is not None:
            await self._children.stop(process.pid, KILL_GRACE_S)

    async def run(self, request: dict[str, Any], on_event: OnEvent) -> dict[str, Any]:
        """Run one job in the worker; cancellation kills the worker (within ``KILL_GRACE_S`` + a kill)."""
        async with self._lock:
            self._generation += 1
            in_flight = True
            try:
                if self._process is None or self._process.returncode is not None:
                    await self.stop()
                    await self._start()
                assert self._process is not None and self._process.stdin is not None and self._lines is not None
                line = json.dumps(request, ensure_ascii=False, separators=(",", ":")) + "\n"
                await self._process.stdin.send(line.encode("utf-8"))
                while True:
                    msg = await self._lines.next()
                    if msg is None:
                        raise await self._died()
                    if "event" in msg:
                        await on_event(str(msg["event"]), dict(msg.get("data") or {}))
                    elif "result" in msg:
                        in_flight = False
                        self._schedule_idle_stop()
                        return dict(msg["result"])
                    elif "error" in msg:
                        err = msg["error"]
                        in_flight = False
                        self._schedule_idle_stop()
                        raise SidecarError(
                            str(err.get("message") or "The transcription failed."),
                            code=str(err.get("code") or "TRANSCRIPTION_FAILED"),
                            details=dict(err.get("details") or {}),
                            status=_status_of(str(err.get("code"))),
                        )
            except BaseException:
                if in_flight:  # cancelled (or our own failure) while the worker still works: kill it
                    with anyio.CancelScope(shield=True):
                        await self.stop()
                raise

    async def _died(self) -> TranscriptionFailed:
        process = self._process
        code = None
        if process is not None:
            with anyio.move_on_after(2, shield=True):
                code = await process.wait()
        with anyio.CancelScope(shield=True):
            await self.stop()
        reason = _exit_reason(code)
        logger.warning("transcription worker died mid-job: %s", reason)
        return TranscriptionFailed(
            f"The transcription failed: {reason}.", details={"reason": "WORKER_DIED", "exit_code": code}
        )

    def _schedule_idle_stop(self) -> None:
        if self._tg is None or self._idle_s <= 0:
            return
        generation = self._generation

        async def later() -> None:
            await anyio.sleep(self._idle_s)
            if generation == self._generation and not self._lock.locked():
                await self.stop()

        self._tg.start_soon(later)


def _status_of(code: str) -> int:
    return {
        "UNSUPPORTED_AUDIO_FORMAT": 400,
        "TRANSCRIPTION_MODEL_UNAVAILABLE": 503,
    }.get(code, 500)
