from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sidecar.storage.sqlite import Database
from sidecar.trace.eventlog import EventLog


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await Database.open(tmp_path / "data")
    try:
        yield database
    finally:
        await database.close()


@pytest.fixture
async def log(db: Database) -> EventLog:
    eventlog = EventLog(db)
    await eventlog.migrate()
    return eventlog
