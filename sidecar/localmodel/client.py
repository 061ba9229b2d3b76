"""The sidecar's side of the local model: starts the worker on first use (a supervised child in its own process
group), loads the model, streams generations, cancels them, and stops the worker after an idle timeout and on
shutdown, over the one worker channel (:mod:`sidecar.workers.channel`). openvino lives in the worker."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..workers import engines
from ..workers.channel import WorkerChannel, WorkerFault
from ..workers.env import worker_env
from ..workers.protocol import Delta, Error, Progress
from ..workers.supervisor import ChildSupervisor
from . import assets

IDLE_TIMEOUT_S = float(os.environ.get("METONA_LOCAL_IDLE_S", "300"))
HELLO_TIMEOUT_S = 60.0
LOAD_TIMEOUT_S = 900.0
"""A first use converts the model (about a minute on 2 cores); later loads take a few seconds."""
STOP_GRACE_S = 2.0

_SOURCE_ROOT = str(Path(__file__).resolve().parents[2])
"""The folder that holds the ``sidecar`` package: the worker imports the same code."""
MAIN, ARGUMENTS = assets.MAIN_SLOT, assets.ARGUMENTS_SLOT
OnProgress = Callable[[dict[str, Any]], Awaitable[None]]


class LocalModelError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        """``model_unavailable``, ``context_length_exceeded``, ``worker_died``, ``runtime_error``."""


def _fault(fault: WorkerFault) -> LocalModelError:
    return LocalModelError("worker_died", f"{fault.message} (see the sidecar's log)")


def _error(error: Error) -> LocalModelError:
    return LocalModelError(error.code, error.message)


class LocalRuntime:
    """One worker process for the whole sidecar; one generation at a time."""

    def __init__(
        self,
        children: ChildSupervisor,
        models_dir: Path,
        *,
        progress: OnProgress | None = None,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        task_group: TaskGroup,
    ) -> None:
        self.root = assets.model_root(models_dir)
        self._progress = progress
        self._channel = WorkerChannel(
            children,
            task_group,
            name="local model worker",
            argv=engines.worker_argv("local-model-worker"),
            env=lambda: worker_env(os.environ, source_root=None if engines.frozen() else _SOURCE_ROOT),
            on_fault=_fault,
            on_error=_error,
            hello_timeout_s=HELLO_TIMEOUT_S,
            idle_s=idle_timeout_s,
            stop_grace_s=STOP_GRACE_S,
        )
        self._start_lock = anyio.Lock()
        self._job_lock = anyio.Lock()
        self._loaded: dict[str, tuple[dict[str, Any], str | None, int]] = {}
        """Per slot (``main``, ``arguments``): what the worker reported, the model path it loaded (None: the
        packaged model) and which worker (its start number) loaded it: a restarted worker has nothing loaded."""

    @property
    def worker_pid(self) -> int | None:
        return self._channel.pid

    @property
    def loads(self) -> int:
        """Workers started (tests: the model loads once per sidecar)."""
        return self._channel.starts

    def loaded_info(self, model_path: str | None, slot: str = MAIN) -> dict[str, Any] | None:
        """What the worker reported when it loaded ``model_path`` (None: the packaged model) in ``slot``, if it is
        loaded."""
        loaded = self._loaded.get(slot)
        if loaded is None:
            return None
        info, path, by = loaded
        alive = self._channel.pid is not None and by == self._channel.starts
        return info if path == model_path and alive else None

    async def stop(self) -> None:
        """Stop the worker (shutdown, idle timeout): EOF, then its process group, SIGTERM then SIGKILL."""
        await self._channel.stop()

    async def aclose(self) -> None:
        await self._channel.aclose()

    def _touch(self) -> None:
        """Restart the idle countdown (each job does)."""
        self._channel.touch()

    async def ensure_loaded(self, model_path: str | None = None, slot: str = MAIN) -> dict[str, Any]:
        """Start the worker and load the model (assembling and converting it on first use); ``slot``
        ``arguments``: the packaged arguments model, beside the main one."""
        async with self._start_lock:
            loaded = self.loaded_info(model_path, slot)
            if loaded is not None:
                return loaded
            if slot == ARGUMENTS:
                ok, why = assets.arguments_status()
                if not ok:
                    raise LocalModelError("model_unavailable", f"the arguments model: {why}")
            elif model_path is None:
                ok, why = assets.status()
                if not ok:
                    raise LocalModelError("model_unavailable", why or "the local model is not installed")
            elif not assets.runtime_available():
                raise LocalModelError("model_unavailable", "python package 'openvino-genai' is not installed")

            async def progress(event: Progress | Delta) -> None:
                if self._progress is not None and isinstance(event, Progress):
                    await self._progress({"stage": event.stage, "fraction": event.data.get("fraction")})

            params: dict[str, Any] = {"root": str(self.root)}
            if slot == ARGUMENTS:
                params["slot"] = ARGUMENTS
                model_path = None
                prepared = assets.prepared_arguments_model()
            else:
                prepared = None if model_path else assets.prepared_model()
            if model_path:
                params["path"] = model_path
            elif prepared is not None:
                params["prepared"] = str(prepared)
            threads = os.environ.get("METONA_LOCAL_THREADS")
            if threads:
                params["threads"] = int(threads)
            precision = os.environ.get("METONA_LOCAL_PRECISION")
            if precision:  # e.g. "f32": the same greedy output on CPUs with and without bf16 (AMX/AVX512-BF16)
                params["precision"] = precision
            loaded = await self._channel.request("load", params, progress, timeout_s=LOAD_TIMEOUT_S)
            self._loaded[slot] = (loaded, model_path, self._channel.starts)
            return loaded

    async def generate(
        self, payload: dict[str, Any], on_delta: Callable[[str], Awaitable[None]], *, model_path: str | None = None
    ) -> dict[str, Any]:
        """One generation: ``on_delta`` per piece of text; the end (token counts, finish, timings). The payload's
        ``slot`` ``arguments`` runs it on the arguments model (``model_path`` does not apply there)."""
        slot = ARGUMENTS if payload.get("slot") == ARGUMENTS else MAIN
        await self.ensure_loaded(model_path if slot == MAIN else None, slot)

        async def on_event(event: Progress | Delta) -> None:
            if isinstance(event, Delta):
                await on_delta(event.text)

        async with self._job_lock:
            return await self._channel.request("generate", payload, on_event)
