"""The sidecar's side of the local model: starts the worker on first use (a supervised child in its own process
group), loads the model, streams generations, cancels them, and stops the worker after an idle timeout and on
shutdown. Stdlib + anyio only: openvino lives in the worker."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectSendStream

from ..workers.supervisor import ChildSupervisor
from . import assets

logger = logging.getLogger(__name__)

IDLE_TIMEOUT_S = float(os.environ.get("METONA_LOCAL_IDLE_S", "300"))
LOAD_TIMEOUT_S = 900.0
"""A first use converts the model (about a minute on 2 cores); later loads take a few seconds."""

_SOURCE_ROOT = str(Path(__file__).resolve().parents[2])
"""The folder that holds the ``sidecar`` package: the worker imports the same code."""
Progress = Callable[[dict[str, Any]], Awaitable[None]]


class LocalModelError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        """``model_unavailable``, ``context_length_exceeded``, ``worker_died``, ``runtime_error``."""


class LocalRuntime:
    """One worker process for the whole sidecar; one job at a time."""

    def __init__(
        self,
        children: ChildSupervisor,
        models_dir: Path,
        *,
        progress: Progress | None = None,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        task_group: Any = None,
    ) -> None:
        self._children = children
        self.root = assets.model_root(models_dir)
        self._progress = progress
        self._idle_timeout_s = idle_timeout_s
        self._tg = task_group
        self._process: Process | None = None
        self._waiters: dict[str, MemoryObjectSendStream[dict[str, Any]]] = {}
        self._start_lock = anyio.Lock()
        self._job_lock = anyio.Lock()
        self._loaded: dict[str, Any] | None = None
        self._loaded_path: str | None = None
        self._next_id = 0
        self._last_used = 0.0
        self._watching = False
        self._closed = False
        self.loads = 0
        """Workers started (tests: the model loads once per sidecar)."""

    @property
    def worker_pid(self) -> int | None:
        return self._process.pid if self._process is not None and self._process.returncode is None else None

    def loaded_info(self, model_path: str | None) -> dict[str, Any] | None:
        """What the worker reported when it loaded ``model_path`` (None: the packaged model), if it is loaded."""
        if self._loaded is not None and self._loaded_path == model_path and self.worker_pid:
            return self._loaded
        return None

    def _new_id(self) -> str:
        self._next_id += 1
        return f"j{self._next_id}"

    # ---- worker lifetime -------------------------------------------------------------------------------------

    async def _ensure_worker(self) -> Process:
        if self._process is not None and self._process.returncode is None:
            return self._process
        self._loaded = None
        argv = [sys.executable, "-m", "sidecar.localmodel.worker"]
        env = dict(os.environ)
        src = _SOURCE_ROOT
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        process = await self._children.spawn(
            argv, name="local-model-worker", env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self._process = process
        self.loads += 1
        ready = anyio.Event()
        if self._tg is not None:
            self._tg.start_soon(self._read, process, ready)
        else:  # pragma: no cover - the composition root always passes its task group
            raise RuntimeError("LocalRuntime needs a task group")
        with anyio.fail_after(60):
            await ready.wait()
        if process.returncode is not None:
            raise LocalModelError("worker_died", "the local model worker exited at start (see the sidecar's log)")
        return process

    async def _read(self, process: Process, ready: anyio.Event) -> None:
        assert process.stdout is not None
        buffer = b""
        try:
            async for chunk in process.stdout:
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    try:
                        message = json.loads(line)
                    except ValueError:
                        continue
                    if message.get("event") == "ready":
                        ready.set()
                        continue
                    waiter = self._waiters.get(str(message.get("id")))
                    if waiter is not None:
                        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                            await waiter.send(message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            ready.set()
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(Exception):
                    await process.wait()
            self._children.forget(process.pid)
            if self._process is process:
                self._process = None
                self._loaded = None
            for waiter in list(self._waiters.values()):
                with contextlib.suppress(Exception):
                    waiter.send_nowait({"event": "error", "code": "worker_died", "message": "the worker exited"})

    async def _send(self, message: dict[str, Any]) -> None:
        process = self._process
        if process is None or process.stdin is None:
            raise LocalModelError("worker_died", "the local model worker is not running")
        try:
            await process.stdin.send((json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8"))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise LocalModelError("worker_died", f"the local model worker is gone ({exc})") from None

    async def stop(self) -> None:
        """Stop the worker (shutdown, idle timeout): its process group, SIGTERM then SIGKILL."""
        process = self._process
        self._process = None
        self._loaded = None
        if process is not None and process.returncode is None:
            with contextlib.suppress(Exception):
                if process.stdin is not None:
                    await process.stdin.aclose()  # EOF: the worker exits by itself
            await self._children.stop(process.pid, grace_s=2.0)

    async def aclose(self) -> None:
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self.stop()

    def _touch(self) -> None:
        """Restart the idle countdown (after each job); one watcher per worker."""
        self._last_used = anyio.current_time()
        if not self._watching and self._tg is not None and not self._closed:
            self._watching = True
            self._tg.start_soon(self._idle_watch)

    async def _idle_watch(self) -> None:
        try:
            while self._process is not None and not self._closed:
                left = self._last_used + self._idle_timeout_s - anyio.current_time()
                if left > 0 or self._job_lock.locked() or self._start_lock.locked():
                    await anyio.sleep(max(left, 0.5))
                    continue
                logger.info("local model idle for %.0f s: stopping its worker", self._idle_timeout_s)
                await self.stop()
        finally:
            self._watching = False

    # ---- jobs --------------------------------------------------------------------------------------------------

    async def _job(self, message: dict[str, Any], on_event: Callable[[dict[str, Any]], Awaitable[None]]) -> dict:
        job_id = message["id"]
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](1000)
        self._waiters[job_id] = send
        try:
            await self._send(message)
            async with receive:
                async for event in receive:
                    kind = event.get("event")
                    if kind in ("end", "loaded"):
                        return event
                    if kind == "error":
                        raise LocalModelError(str(event.get("code")), str(event.get("message")))
                    await on_event(event)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), contextlib.suppress(LocalModelError):
                await self._send({"op": "cancel", "id": job_id})
            raise
        finally:
            self._waiters.pop(job_id, None)
            send.close()
        raise LocalModelError("worker_died", "the local model worker stopped answering")

    async def ensure_loaded(self, model_path: str | None = None) -> dict[str, Any]:
        """Start the worker and load the model (assembling and converting it on first use)."""
        async with self._start_lock:
            if self._loaded is not None and self._loaded_path == model_path and self.worker_pid:
                return self._loaded
            if model_path is None:
                ok, why = assets.status()
                if not ok:
                    raise LocalModelError("model_unavailable", why or "the local model is not installed")
            elif not assets.runtime_available():
                raise LocalModelError("model_unavailable", "python package 'openvino-genai' is not installed")
            await self._ensure_worker()

            async def progress(event: dict[str, Any]) -> None:
                if self._progress is not None:
                    await self._progress({"stage": event.get("stage"), "fraction": event.get("fraction")})

            message: dict[str, Any] = {"op": "load", "id": self._new_id(), "root": str(self.root)}
            if model_path:
                message["path"] = model_path
            threads = os.environ.get("METONA_LOCAL_THREADS")
            if threads:
                message["threads"] = int(threads)
            precision = os.environ.get("METONA_LOCAL_PRECISION")
            if precision:  # e.g. "f32": the same greedy output on CPUs with and without bf16 (AMX/AVX512-BF16)
                message["precision"] = precision
            with anyio.fail_after(LOAD_TIMEOUT_S):
                loaded = await self._job(message, progress)
            self._loaded = loaded
            self._loaded_path = model_path
            self._touch()
            return loaded

    async def generate(
        self, payload: dict[str, Any], on_delta: Callable[[str], Awaitable[None]], *, model_path: str | None = None
    ) -> dict[str, Any]:
        """One generation: ``on_delta`` per piece of text; the ``end`` answer (token counts, finish, timings)."""
        await self.ensure_loaded(model_path)

        async def on_event(event: dict[str, Any]) -> None:
            if event.get("event") == "delta":
                await on_delta(str(event.get("text", "")))

        async with self._job_lock:
            try:
                return await self._job({"op": "generate", "id": self._new_id(), **payload}, on_event)
            finally:
                self._touch()
