"""Run a writer script in a child process and SIGKILL it mid-write (the durability tests' crash)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

ROOT = Path(__file__).resolve().parents[2]
READY = "ready"


async def run_and_kill(writer: Path, args: list[str], stderr_path: Path, min_reported: int) -> list[str]:
    """Start ``writer`` (it prints one line per committed write, and ``ready`` somewhere among them), SIGKILL it
    once ``min_reported`` writes were reported, and return every line it printed, ``ready`` included — lines
    still in the pipe after the kill are commits too."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    lines_out: list[str] = []
    with stderr_path.open("ab") as err:
        proc = await anyio.open_process(
            [sys.executable, str(writer), *args],
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
                while sum(line != READY for line in lines_out) < min_reported:
                    lines_out.append((await lines.receive_until(b"\n", 128)).decode())
                proc.send_signal(signal.SIGKILL)  # the writer is still writing as fast as it can
                assert await proc.wait() == -signal.SIGKILL
                while True:
                    try:
                        lines_out.append((await lines.receive_until(b"\n", 128)).decode())
                    except (anyio.EndOfStream, anyio.IncompleteRead):
                        break
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            await proc.aclose()
    return lines_out
