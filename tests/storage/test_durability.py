"""kill -9 durability: every sequence a writer saw committed is still there after SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from sidecar.storage.sqlite import Database
from sidecar.trace.eventlog import EventLog

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")]

ROOT = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).with_name("kill9_writer.py")
RESOURCE = "job_kill9"


async def _run_and_kill(data_dir: Path, stderr_path: Path, min_reported: int) -> list[int]:
    """Start the writer, read committed sequences until at least ``min_reported``, then SIGKILL it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    reported: list[int] = []
    with stderr_path.open("ab") as err:
        proc = await anyio.open_process(
            [sys.executable, str(WRITER), str(data_dir), RESOURCE],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=ROOT,
            env=env,
        )
        try:
            assert proc.stdout is not None
            lines = BufferedByteReceiveStream(proc.stdout)
            with anyio.fail_after(60):
                assert await lines.receive_until(b"\n", 64) == b"ready"
                while len(reported) < min_reported:
                    reported.append(int(await lines.receive_until(b"\n", 64)))
                # The writer is still appending as fast as it can: this kill lands mid-run.
                proc.send_signal(signal.SIGKILL)
                assert await proc.wait() == -signal.SIGKILL
                # Lines already in the pipe are commits too: drain them.
                while True:
                    try:
                        reported.append(int(await lines.receive_until(b"\n", 64)))
                    except (anyio.EndOfStream, anyio.IncompleteRead):
                        break
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            await proc.aclose()
    return reported


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
