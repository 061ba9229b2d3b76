"""The sidecar's side of the document worker, over the one worker channel.

One child at a time, started on the first import and kept for the next (idle ``idle_s`` → stopped). Each import
has two clocks: :data:`~.models.PAGE_TIMEOUT_S` between two ``Page`` events (the first counts from the request,
once the worker is up) and :data:`~.models.IMPORT_TIMEOUT_S` for the whole; past either, or when the import is
cancelled, the child's process group is killed (a cancel takes well under a second) and the next import starts a
fresh child. A child that dies mid-import (a parser crashed on the file) fails the import with
``DOCUMENT_UNREADABLE``.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from sidecar.core.errors import SidecarError
from sidecar.workers import engines
from sidecar.workers.channel import WorkerChannel, WorkerFault
from sidecar.workers.env import worker_env
from sidecar.workers.protocol import Delta, Error, Progress
from sidecar.workers.single import SingleChild
from sidecar.workers.supervisor import ChildSupervisor

from . import errors
from .models import IMPORT_TIMEOUT_S, PAGE_TIMEOUT_S
from .worker import OP_PARSE

OnPage = Callable[[dict[str, Any]], Awaitable[None]]
WORKER_NAME = "document worker"
HELLO_TIMEOUT_S = 60.0
DEFAULT_IDLE_S = 120.0


def _fault(fault: WorkerFault) -> SidecarError:
    if fault.at_start:
        return errors.DocumentImportUnavailable(
            "The document worker could not start.", details={"reason": fault.reason}
        )
    return errors.DocumentUnreadable(
        "The document could not be read: the parser stopped on it.",
        details={"reason": fault.reason, "exit_code": fault.exit_code},
    )


def _error(error: Error) -> SidecarError:
    return errors.from_worker(error.code, error.message or "The document could not be read.", dict(error.details))


class DocumentWorker(SingleChild):
    def __init__(
        self,
        children: ChildSupervisor,
        task_group: TaskGroup,
        *,
        idle_s: float = DEFAULT_IDLE_S,
        page_timeout_s: float = PAGE_TIMEOUT_S,
        import_timeout_s: float = IMPORT_TIMEOUT_S,
    ) -> None:
        super().__init__(
            WorkerChannel(
                children,
                task_group,
                name=WORKER_NAME,
                argv=engines.worker_argv("document-worker"),
                env=lambda: worker_env(os.environ),
                on_fault=_fault,
                on_error=_error,
                hello_timeout_s=HELLO_TIMEOUT_S,
                idle_s=idle_s,
                stop_grace_s=0.2,
            )
        )
        self.page_timeout_s = page_timeout_s
        self.import_timeout_s = import_timeout_s

    async def parse(self, params: dict[str, Any], on_page: OnPage) -> dict[str, Any]:
        async with self._lock:
            await self._channel.start()  # a cold worker's start (its hello) does not count against the first page
            start = anyio.current_time()
            last_page = {"page": 0}
            overall = start + self.import_timeout_s

            def deadline() -> float:
                return min(anyio.current_time() + self.page_timeout_s, overall)

            with anyio.CancelScope(deadline=deadline()) as scope:

                async def relay(event: Progress | Delta) -> None:
                    if isinstance(event, Progress):
                        scope.deadline = deadline()
                        last_page["page"] = int(event.data.get("page") or 0)
                        await on_page(dict(event.data))

                try:
                    return await self._channel.request(OP_PARSE, params, relay)
                except BaseException as exc:
                    if not isinstance(exc, SidecarError):  # cancelled, or timed out: the child may still work
                        await self._kill()
                    raise
            await self._kill()
            whole = anyio.current_time() >= overall - 0.001
            raise errors.DocumentUnreadable(
                "The document took longer to read than the import allows.",
                details={
                    "reason": "IMPORT_TIMEOUT" if whole else "PAGE_TIMEOUT",
                    "limit_s": self.import_timeout_s if whole else self.page_timeout_s,
                    "page": last_page["page"] + 1 if not whole else None,
                },
            )
