"""kill -9 in the middle of memory writes: every reported memory is there, and no change is half applied."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from sidecar.embeddings import HashEmbedder
from sidecar.memory.models import MemoryListParams, MemorySearchParams
from sidecar.memory.service import MemoryService

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")]

ROOT = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).with_name("kill9_writer.py")


async def _run_and_kill(data_dir: Path, stderr_path: Path, min_reported: int) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    reported: list[str] = []
    with stderr_path.open("ab") as err:
        proc = await anyio.open_process(
            [sys.executable, str(WRITER), str(data_dir)],
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
                while len(reported) < min_reported:
                    line = (await lines.receive_until(b"\n", 128)).decode()
                    if line != "ready":
                        reported.append(line)
                proc.send_signal(signal.SIGKILL)  # the writer is mid-way through its next add
                assert await proc.wait() == -signal.SIGKILL
                while True:
                    try:
                        line = (await lines.receive_until(b"\n", 128)).decode()
                    except (anyio.EndOfStream, anyio.IncompleteRead):
                        break
                    if line != "ready":
                        reported.append(line)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            await proc.aclose()
    return reported


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
