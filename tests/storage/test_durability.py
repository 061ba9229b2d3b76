"""kill -9 durability: every sequence a writer saw committed is still there after SIGKILL."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sidecar.storage.sqlite import Database
from sidecar.trace.eventlog import EventLog
from tests.support.kill9 import READY, run_and_kill

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")]

WRITER = Path(__file__).with_name("kill9_writer.py")
RESOURCE = "job_kill9"


async def _run_and_kill(data_dir: Path, stderr_path: Path, min_reported: int) -> list[int]:
    """Start the writer, read committed sequences until at least ``min_reported``, then SIGKILL it."""
    lines = await run_and_kill(WRITER, [str(data_dir), RESOURCE], stderr_path, min_reported)
    assert lines[0] == READY
    return [int(line) for line in lines[1:]]


async def test_committed_events_survive_sigkill(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    stderr_path = tmp_path / "writer.stderr"
    all_reported: list[int] = []
    for round_no in range(3):  # three crashes in a row, each restart continues the same log
        try:
            reported = await _run_and_kill(data_dir, stderr_path, min_reported=300)
        except Exception:
            print(stderr_path.read_text(errors="replace"))
            raise
        assert reported, f"round {round_no}: writer reported nothing"
        all_reported.extend(reported)

        db = await Database.open(data_dir)
        try:
            assert await db.integrity_check() == ["ok"]
            log = EventLog(db)
            seqs: list[int] = []
            after = 0
            while True:
                page = await log.read(RESOURCE, after, 1000)
                seqs.extend(ev.sequence for ev in page.items)
                for ev in page.items:
                    assert ev.event == "Progress" and "pad" in ev.data
                after = page.next_sequence
                if not page.has_more:
                    break
        finally:
            await db.close()
        # no holes, no duplicates, and every sequence the writer saw committed is present
        assert seqs == list(range(1, len(seqs) + 1))
        assert set(all_reported) <= set(seqs), sorted(set(all_reported) - set(seqs))[:10]
        assert len(all_reported) == len(set(all_reported))
