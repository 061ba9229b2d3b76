from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from anyio.abc import TaskGroup

from sidecar.jobs.manager import JobManager
from sidecar.storage.sqlite import Database
from sidecar.trace.eventlog import EventLog


@dataclass
class JobEnv:
    db: Database
    log: EventLog
    jobs: JobManager
    tg: TaskGroup


@asynccontextmanager
async def open_env(data_dir: Path, *, recover: bool = True) -> AsyncIterator[JobEnv]:
    db = await Database.open(data_dir)
    try:
        log = EventLog(db)
        async with anyio.create_task_group() as tg:
            jobs = JobManager(db, log, tg)
            await jobs.migrate()
            if recover:
                await jobs.recover()
            try:
                yield JobEnv(db, log, jobs, tg)
            finally:
                await jobs.shutdown(5)
                tg.cancel_scope.cancel()
    finally:
        await db.close()


@pytest.fixture
def env_factory(tmp_path: Path) -> Callable[..., AbstractAsyncContextManager[JobEnv]]:
    def make(**kw: bool) -> AbstractAsyncContextManager[JobEnv]:
        return open_env(tmp_path / "data", **kw)

    return make
