"""A math worker (sidecar/render/mathworker.py) on its own supervisor and task group, stopped on leaving."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from sidecar.render.mathworker import MATH_SVG_TIMEOUT_S, MathWorker
from sidecar.workers.supervisor import ChildSupervisor


@asynccontextmanager
async def math_worker(timeout_s: float = MATH_SVG_TIMEOUT_S) -> AsyncIterator[MathWorker]:
    children = ChildSupervisor()
    async with anyio.create_task_group() as tg:
        worker = MathWorker(children, tg, timeout_s=timeout_s)
        try:
            yield worker
        finally:
            await worker.aclose()
            await children.stop_all(0.5)
            assert children.pids == []
