"""A worker domain's client (sidecar.workers.single.SingleChild) on its own supervisor and task group, stopped on
leaving; and whether a pid still runs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import anyio
from anyio.abc import TaskGroup

from sidecar.workers.single import SingleChild
from sidecar.workers.supervisor import ChildSupervisor

C = TypeVar("C", bound=SingleChild)


@asynccontextmanager
async def single_child(make: Callable[[ChildSupervisor, TaskGroup], C]) -> AsyncIterator[C]:
    children = ChildSupervisor()
    async with anyio.create_task_group() as tg:
        worker = make(children, tg)
        try:
            yield worker
        finally:
            await worker.aclose()
            await children.stop_all(0.5)
            assert children.pids == []


def alive(pid: int) -> bool:
    """Running (a zombie not yet reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
