"""An export worker (sidecar/export/worker.py) on its own supervisor and task group, stopped on leaving."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import anyio

from sidecar.export.worker import ExportWorker
from sidecar.workers.supervisor import ChildSupervisor


@asynccontextmanager
async def export_worker(argv: Sequence[str] | None = None) -> AsyncIterator[ExportWorker]:
    children = ChildSupervisor()
    async with anyio.create_task_group() as tg:
        worker = ExportWorker(children, tg, argv=argv)
        try:
            yield worker
        finally:
            await worker.aclose()
            await children.stop_all(0.5)
            assert children.pids == []
