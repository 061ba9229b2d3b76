from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sidecar.knowledge.service import KnowledgeService
from sidecar.storage.sqlite import Database


@pytest.fixture
async def knowledge(data_dir: Path) -> AsyncIterator[KnowledgeService]:
    db = await Database.open(data_dir)
    svc = KnowledgeService(db, data_dir, max_attachment_bytes=64 * 1024)
    await svc.migrate()
    try:
        yield svc
    finally:
        await db.close()
