"""The wire's reader (on the loop for a pipe, in a worker thread for a file) and writer on real pipes."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import anyio
import pytest

from sidecar.ipc.stdio import Incoming, LineWriter, OversizedLine, read_lines

LINES = [b'{"n":%d,"text":"\xe6\xb5\x81\xe5\xbc\x8f"}' % i for i in range(3000)] + [b"x" * (1 << 20), b"last"]


def _drain(fd: int, into: list[bytes]) -> threading.Thread:
    def run() -> None:
        with os.fdopen(fd, "rb") as f:
            into.append(f.read())

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.anyio
@pytest.mark.parametrize("direct", [False, True], ids=["thread", "loop"])
async def test_the_writer_puts_every_line_on_a_pipe_in_order_and_byte_exact(direct: bool) -> None:
    """direct=True: batches are written on the loop (the 1 MiB line in many partial writes); else in a thread."""
    r, w = os.pipe()
    got: list[bytes] = []
    reader = _drain(r, got)
    writer = LineWriter(w, high_water=64, direct=direct)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        for i, line in enumerate(LINES):
            await writer.send(line, priority=i == 1500)
        writer.close()
        await writer.wait_drained()
    os.close(w)
    await anyio.to_thread.run_sync(reader.join)
    data = got[0]
    assert data.endswith(b"\n")
    lines = data.split(b"\n")[:-1]
    # the priority line may overtake lines still queued; nothing else moves
    assert lines.index(LINES[1500]) <= 1500
    lines.remove(LINES[1500])
    assert lines == LINES[:1500] + LINES[1501:]


@pytest.mark.anyio
@pytest.mark.parametrize("direct", [False, True], ids=["thread", "loop"])
async def test_the_writer_keeps_draining_once_the_host_closed_its_end(direct: bool) -> None:
    r, w = os.pipe()
    os.close(r)
    writer = LineWriter(w, high_water=4, direct=direct)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        for line in LINES[:100]:
            await writer.send(line)  # never blocks on the dead pipe
        writer.close()
        await writer.wait_drained()
    os.close(w)
    assert writer.broken


async def _read_all(fd: int, max_bytes: int) -> tuple[list[Incoming], bool]:
    """The lines read, and whether ``fd`` was in blocking mode while they were read."""
    send, receive = anyio.create_memory_object_stream[Incoming](8)
    got: list[Incoming] = []
    blocking_while_reading = True
    async with anyio.create_task_group() as tg:
        tg.start_soon(read_lines, fd, max_bytes, send)
        async with receive:
            async for item in receive:
                if not got:
                    blocking_while_reading = os.get_blocking(fd)
                got.append(item)
    return got, blocking_while_reading


@pytest.mark.anyio
async def test_the_reader_takes_lines_from_a_pipe_until_eof() -> None:
    r, w = os.pipe()
    payload = b"\n".join(LINES)  # the last line has no newline: it still counts at EOF

    def feed() -> None:
        with os.fdopen(w, "wb") as f:
            for i in range(0, len(payload), 7777):
                f.write(payload[i : i + 7777])
                f.flush()

    feeder = threading.Thread(target=feed)
    feeder.start()
    got, blocking_while_reading = await _read_all(r, max_bytes=1 << 19)
    await anyio.to_thread.run_sync(feeder.join)
    assert not blocking_while_reading  # read by the loop itself, no thread hop per chunk
    assert os.get_blocking(r)  # switched back at EOF: the pipe may be shared with whoever started us
    os.close(r)
    assert got == [*LINES[:-2], OversizedLine(1 << 20), b"last"]


@pytest.mark.anyio
async def test_the_reader_takes_lines_from_a_file_in_a_thread(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_bytes(b"\n".join(LINES[:50]) + b"\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        got, blocking_while_reading = await _read_all(fd, max_bytes=1 << 10)
        assert blocking_while_reading  # a regular file is never switched to non-blocking mode
    finally:
        os.close(fd)
    assert got == LINES[:50]


@pytest.mark.anyio
async def test_a_direct_writer_puts_priority_lines_out_at_once_and_finishes_a_partial_one_first() -> None:
    """direct=True (issue 22): while no batch is being written, a priority line is written on the loop itself; one
    too long for the pipe is finished by the writer before anything else, so every line stays whole."""
    r, w = os.pipe()
    writer = LineWriter(w, direct=True)
    await writer.send(b'{"ping":1}', priority=True)  # the writer task is not even running: written already
    assert os.read(r, 100) == b'{"ping":1}\n'
    big = b"p" * (300 << 10)  # more than a pipe holds: written in part, the rest is the writer's head
    await writer.send(big, priority=True)
    await writer.send(b"bulk", priority=False)
    await writer.send(b'{"ping":2}', priority=True)  # the head is pending: queued behind it, not interleaved
    got: list[bytes] = []
    reader = _drain(r, got)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        writer.close()
        await writer.wait_drained()
    assert os.get_blocking(w)  # left as it was found
    os.close(w)
    await anyio.to_thread.run_sync(reader.join)
    assert got[0].split(b"\n") == [big, b'{"ping":2}', b"bulk", b""]


@pytest.mark.anyio
async def test_a_direct_writer_gathers_a_busy_producers_lines_and_writes_a_quiet_one_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 22: while a producer keeps adding lines (yielding every 16), the writer writes them 64 at a time; a
    line after which the producer goes quiet is written in the next loop turn, not held back."""
    writes: list[int] = []
    real = LineWriter._write_on_loop

    async def counting(self: LineWriter, data: bytes | memoryview) -> None:
        writes.append(len(data))
        await real(self, data)

    monkeypatch.setattr(LineWriter, "_write_on_loop", counting)
    r, w = os.pipe()
    writer = LineWriter(w, direct=True)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        for i in range(640):
            await writer.send(b"%d" % i)
        await anyio.wait_readable(r)  # the producer is quiet now: what it sent goes out
        got = b""
        while got.count(b"\n") < 640:
            await anyio.wait_readable(r)
            got += os.read(r, 1 << 20)
        assert got.split(b"\n")[:-1] == [b"%d" % i for i in range(640)]
        assert len(writes) <= 640 // 64 + 1  # not one write per 16-line yield (40)
        await writer.send(b"alone")
        with anyio.fail_after(5):
            await anyio.wait_readable(r)  # written although nothing else comes
        assert os.read(r, 100) == b"alone\n"
        writer.close()
        await writer.wait_drained()
    os.close(w)
    os.close(r)
