"""Framing: UTF-8 JSON lines in, one JSON value per line out. The only code that touches fd 0 and fd 1.

At start-up :func:`claim_stdio` takes a private duplicate of fd 1 for the wire and points fd 1 (and
``sys.stdout``) at stderr, so a stray ``print`` from any library lands in the log, never the protocol.
"""

from __future__ import annotations

import io
import os
import sys
from dataclasses import dataclass

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream

CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class OversizedLine:
    """A line longer than the configured limit; its bytes were discarded up to the newline."""

    size: int


Incoming = bytes | OversizedLine


def claim_stdio() -> tuple[int, int]:
    """Return ``(in_fd, out_fd)`` for the wire; afterwards fd 1 and ``sys.stdout`` write to stderr."""
    out_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), encoding="utf-8", line_buffering=True)
    in_fd = os.dup(0)
    # Nobody else may read the host's stdin either (a library reading fd 0 would steal requests).
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdin = io.TextIOWrapper(os.fdopen(0, "rb", closefd=False), encoding="utf-8")
    return in_fd, out_fd


class LineSplitter:
    """Incremental splitter: feed chunks, get complete lines; lines over ``max_bytes`` are skipped."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buf = bytearray()
        self._skipping = 0  # > 0 while discarding an oversized line (bytes seen so far)

    def feed(self, chunk: bytes) -> list[Incoming]:
        out: list[Incoming] = []
        start = 0
        n = len(chunk)
        while start < n:
            nl = chunk.find(b"\n", start)
            end = n if nl < 0 else nl
            piece = chunk[start:end]
            if self._skipping:
                self._skipping += len(piece)
            elif len(self._buf) + len(piece) > self.max_bytes:
                self._skipping = len(self._buf) + len(piece)
                self._buf.clear()
            else:
                self._buf += piece
            if nl < 0:
                break
            if self._skipping:
                out.append(OversizedLine(self._skipping))
                self._skipping = 0
            else:
                out.append(bytes(self._buf))
                self._buf.clear()
            start = nl + 1
        return out

    def finish(self) -> list[Incoming]:
        """At EOF: a last line without its newline still counts."""
        if self._skipping:
            size, self._skipping = self._skipping, 0
            return [OversizedLine(size)]
        if self._buf.strip():
            line = bytes(self._buf)
            self._buf.clear()
            return [line]
        return []


async def read_lines(fd: int, max_bytes: int, send: ObjectSendStream[Incoming]) -> None:
    """Read ``fd`` until EOF, sending complete lines; closes ``send`` at EOF (the caller sees EOF)."""
    splitter = LineSplitter(max_bytes)
    async with send:
        while True:
            chunk = await anyio.to_thread.run_sync(_read, fd, abandon_on_cancel=True)
            if not chunk:
                for item in splitter.finish():
                    await send.send(item)
                return
            for item in splitter.feed(chunk):
                await send.send(item)


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, CHUNK)
    except OSError:
        return b""


class LineWriter:
    """The single writer of the wire. Producers queue finished lines; one task writes them in batches.

    Batching matters for throughput: every queued line that is ready is joined into one ``write``
    made off the event loop, so a slow reader on the other end never blocks the loop.
    """

    def __init__(self, fd: int, buffer: int = 1024) -> None:
        self._fd = fd
        send, receive = anyio.create_memory_object_stream[bytes](buffer)
        self._send: ObjectSendStream[bytes] = send
        self._receive: ObjectReceiveStream[bytes] = receive
        self.lines_written = 0
        self.broken = False
        self._drained = anyio.Event()

    async def send(self, line: bytes) -> None:
        """Queue one line (without its newline)."""
        if self.broken:
            return
        try:
            await self._send.send(line)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.broken = True

    def close(self) -> None:
        """No more lines; :meth:`run` returns once everything queued is written."""
        self._send.close()

    async def run(self) -> None:
        receive = self._receive
        async with receive:
            async for first in receive:
                batch = [first]
                size = len(first)
                while size < (1 << 20):
                    try:
                        line = receive.receive_nowait()
                    except anyio.WouldBlock:
                        break
                    except anyio.EndOfStream:
                        break
                    batch.append(line)
                    size += len(line)
                batch.append(b"")
                data = b"\n".join(batch)
                if not self.broken:
                    ok = await anyio.to_thread.run_sync(_write_all, self._fd, data)
                    if not ok:
                        self.broken = True  # host closed its end; keep draining so producers never block
                self.lines_written += len(batch) - 1
        self._drained.set()

    async def wait_drained(self) -> None:
        """Wait until :meth:`run` has written everything queued before :meth:`close`."""
        await self._drained.wait()


def _write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    try:
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except (BrokenPipeError, OSError):
        return False
    return True
