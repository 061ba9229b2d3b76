"""kill -9 in the middle of memory writes: every reported memory is there, and no change is half applied."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sidecar.embeddings import HashEmbedder
from sidecar.memory.models import MemoryListParams, MemorySearchParams
from sidecar.memory.service import MemoryService
from tests.support.kill9 import READY, run_and_kill

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")]

WRITER = Path(__file__).with_name("kill9_writer.py")


async def _run_and_kill(data_dir: Path, stderr_path: Path, min_reported: int) -> list[str]:
    lines = await run_and_kill(WRITER, [str(data_dir)], stderr_path, min_reported)
    return [line for line in lines if line != READY]


async def test_sigkill_leaves_no_half_applied_supersession(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    try:
        reported = await _run_and_kill(data_dir, tmp_path / "writer.stderr", min_reported=20)
    except Exception:
        print((tmp_path / "writer.stderr").read_text(errors="replace"))
        raise

    svc = MemoryService(data_dir, HashEmbedder())
    everything = await svc.list(MemoryListParams(include_superseded=True, include_expired=True, limit=500))
    rows = {r.item.id: r for r in everything.items}
    assert set(reported) <= set(rows), "a reported memory was lost"
    assert len(rows) - len(reported) <= 1  # at most the add the kill interrupted, if its commit landed
    for r in rows.values():
        for old in r.supersedes:
            assert rows[old].superseded_by == r.item.id, "a supersession was half applied"
        if r.superseded_by is not None:
            assert r.item.id in rows[r.superseded_by].supersedes
    # one chain: exactly its last memory is active, and it is what search finds
    active = [r.item.id for r in rows.values() if r.status == "active"]
    assert len(active) == 1
    found = await svc.search(MemorySearchParams(query="the counter value"))
    assert [h.item.id for h in found.items] == active
