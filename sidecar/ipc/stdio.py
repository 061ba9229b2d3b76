"""Framing: UTF-8 JSON lines in, one JSON value per line out. With :mod:`.early` (which claims fd 0 and fd 1 at
start-up and may answer the first request before the event loop exists), the only code that touches the wire.

When the host's stdin is a pipe or a socket (what a host spawning us gives), it is switched to
non-blocking mode and read by the event loop itself (``wait_readable``): a request costs no thread
hop to arrive. Anything else (a file, a terminal, Windows) is read in a worker thread. Writes are
batched; on such a pipe each batch is written on the loop too (what the pipe does not take waits for
room while the loop runs on), elsewhere in a worker thread.
"""

from __future__ import annotations

import contextlib
import os
import select
import stat
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
import anyio.lowlevel
from anyio.abc import ObjectSendStream

CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class OversizedLine:
    """A line longer than the configured limit; its bytes were discarded up to the newline."""

    size: int


Incoming = bytes | OversizedLine


class LineSplitter:
    """Incremental splitter: feed chunks, get complete lines; lines over ``max_bytes`` are skipped."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        # the pieces of the line so far, joined once at its newline (issue 22: a growing bytearray re-copied a
        # 10 MB line many times over as it grew)
        self._parts: list[bytes] = []
        self._size = 0
        self._skipping = 0  # > 0 while discarding an oversized line (bytes seen so far)

    def feed(self, chunk: bytes) -> list[Incoming]:
        out: list[Incoming] = []
        start = 0
        n = len(chunk)
        while start < n:
            nl = chunk.find(b"\n", start)
            end = n if nl < 0 else nl
            size = end - start
            if self._skipping:
                self._skipping += size
            elif self._size + size > self.max_bytes:
                self._skipping = self._size + size
                self._parts.clear()
                self._size = 0
            elif nl < 0 or self._parts:
                self._parts.append(chunk[start:end])
                self._size += size
            if nl < 0:
                break
            if self._skipping:
                out.append(OversizedLine(self._skipping))
                self._skipping = 0
            elif self._parts:
                out.append(self._take())
            else:
                out.append(chunk[start:end])  # a whole line in this chunk: one copy
            start = nl + 1
        return out

    def _take(self) -> bytes:
        line = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
        self._parts.clear()
        self._size = 0
        return line

    def finish(self) -> list[Incoming]:
        """At EOF: a last line without its newline still counts."""
        if self._skipping:
            size, self._skipping = self._skipping, 0
            return [OversizedLine(size)]
        line = self._take()
        return [line] if line.strip() else []


def on_the_loop(fd: int) -> bool:
    """Switch ``fd`` to non-blocking mode if the event loop can wait on it (a pipe or a socket on POSIX).

    A regular file is always "ready" to the poller and a terminal is shared with the user's shell, so
    both (and every fd on Windows) stay blocking and are served from a worker thread instead.
    """
    if os.name != "posix":
        return False
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            return False
        os.set_blocking(fd, False)
    except OSError:
        return False
    return True


async def _read_on_loop(fd: int) -> bytes:
    while True:
        try:
            return os.read(fd, CHUNK)
        except BlockingIOError:
            await anyio.wait_readable(fd)
        except OSError:
            return b""


async def _read_in_thread(fd: int) -> bytes:
    return await anyio.to_thread.run_sync(_read, fd, abandon_on_cancel=True)


async def read_lines(fd: int, max_bytes: int, send: ObjectSendStream[Incoming], pending: bytes = b"") -> None:
    """Read ``fd`` until EOF, sending complete lines; closes ``send`` at EOF (the caller sees EOF).

    ``pending``: bytes already read from ``fd`` (before the event loop started), split first."""
    splitter = LineSplitter(max_bytes)
    nonblocking = on_the_loop(fd)
    read: Callable[[int], Awaitable[bytes]] = _read_on_loop if nonblocking else _read_in_thread
    async with send:
        try:
            for item in splitter.feed(pending):
                await send.send(item)
            while True:
                chunk = await read(fd)
                if not chunk:
                    for item in splitter.finish():
                        await send.send(item)
                    return
                for item in splitter.feed(chunk):
                    await send.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return  # the dispatcher stopped reading (exit): what the host sends now is dropped
        finally:
            if nonblocking:  # the pipe may be shared with whoever started us: leave it as we found it
                with contextlib.suppress(OSError):
                    os.set_blocking(fd, True)


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, CHUNK)
    except OSError:
        return b""


class LineWriter:
    """The single writer of the wire. Producers queue finished lines; one task writes them in batches.

    * Batching: every line that is ready is joined into one ``write``, so throughput is not bound by
      per-line writes. ``direct`` (a pipe or socket the loop can wait on): written on the loop, without a
      thread hop; a host that reads slowly never blocks the loop (the rest of a partial write is written
      once the pipe has room, before anything else). Otherwise the write is made in a worker thread.
    * Backpressure: ``send`` returns at once while fewer than ``high_water`` lines wait, else it
      waits for the writer to catch up (a runaway stream cannot eat memory); every ``yield_every``
      lines it yields to the loop so a fast producer never starves the read loop.
    * Gathering (``direct``): while a producer keeps adding lines, the writer waits a loop turn at a time, up
      to ``gather_lines`` lines, so that a fast stream is written in fewer, bigger writes while the read loop
      still gets in every ``yield_every`` lines; a turn without new lines, or a priority line, writes at once.
    * A priority lane for control answers (``ping``): they go out ahead of bulk lines already
      queued. Only use it for lines whose order relative to others does not matter.
    """

    def __init__(
        self,
        fd: int,
        high_water: int = 1024,
        batch_bytes: int = 64 << 10,
        yield_every: int = 16,
        gather_lines: int = 64,
        *,
        direct: bool = False,
    ) -> None:
        self._fd = fd
        # direct: a pipe/socket switched to non-blocking mode, written on the loop itself; a priority line is written
        # at once unless part of a write waits for room (no thread hop: the ping's tail and the stream, issue 22)
        self._direct = direct and on_the_loop(fd)
        self._writing = False  # a batch is in a worker thread's write
        self._head: bytes | memoryview = b""  # the rest of a write the pipe took in part: goes out before anything
        self._high_water = high_water
        self._batch_bytes = batch_bytes
        self._queue: deque[bytes] = deque()
        self._priority: deque[bytes] = deque()
        self._wake = anyio.Event()
        self._space = anyio.Event()
        self._space.set()
        self._closed = False
        self._yield_every = yield_every
        self._since_yield = 0
        self._gather_lines = gather_lines
        self._sent = 0  # lines queued so far (the writer's way to see whether a producer is still going)
        self._drained = anyio.Event()
        self.broken = False

    async def send(self, line: bytes, *, priority: bool = False) -> None:
        """Queue one line (without its newline)."""
        if self._closed:
            return
        if priority and self._direct and self._try_direct(line):
            return
        while len(self._queue) >= self._high_water and not priority:
            if self._space.is_set():
                self._space = anyio.Event()
            await self._space.wait()
            if self._closed:
                return
        (self._priority if priority else self._queue).append(line)
        self._sent += 1
        self._wake.set()
        self._since_yield += 1
        if self._since_yield >= self._yield_every:
            # Fairness: a producer streaming as fast as it can must still let the read loop (cancel,
            # ping) and the writer run; without this it would hold the loop until high water.
            self._since_yield = 0
            await anyio.lowlevel.checkpoint()

    def _try_direct(self, line: bytes) -> bool:
        """Write ``line`` now if nothing is being written and nothing waits ahead of it in the priority lane (a
        partial write leaves the rest as the head of the next batch); False if it must be queued."""
        if self._writing or self._head or self._priority or self.broken:
            return False
        data = line + b"\n"
        try:
            n = os.write(self._fd, data)
        except BlockingIOError:
            return False
        except OSError:
            self.broken = True
            return True
        if n < len(data):
            self._head = data[n:]
            self._wake.set()
        return True

    async def _write_on_loop(self, data: bytes | memoryview) -> None:
        """Write what the pipe takes now, without a thread hop; the rest becomes the head of the next write, once
        the pipe has room (the loop runs meanwhile: a ping answer waits only for the line being written)."""
        try:
            n = os.write(self._fd, data)
        except BlockingIOError:
            n = 0
        except OSError:
            self.broken = True  # host closed its end; keep draining so producers never block
            return
        if n < len(data):
            self._head = memoryview(data)[n:]
            await anyio.wait_writable(self._fd)

    def close(self) -> None:
        """No more lines; :meth:`run` returns once everything queued is written."""
        self._closed = True
        self._wake.set()
        self._space.set()

    async def wait_drained(self) -> None:
        """Wait until :meth:`run` has written everything queued before :meth:`close`."""
        await self._drained.wait()

    def _take_batch(self) -> list[bytes]:
        batch: list[bytes] = []
        size = 0
        for q in (self._priority, self._queue):
            while q and size < self._batch_bytes:
                line = q.popleft()
                batch.append(line)
                size += len(line) + 1
        return batch

    async def run(self) -> None:
        seen = -1
        try:
            while True:
                if not self._queue and not self._priority and not self._head:
                    if self._closed:
                        return
                    self._wake = anyio.Event()
                    await self._wake.wait()
                    continue
                if (
                    self._direct
                    and self._sent != seen
                    and len(self._queue) < self._gather_lines
                    and not (self._priority or self._head or self._closed)
                ):
                    # Lines came in since the last look: a producer is still going. Let it run one more turn and
                    # write what it made together (one write per gather_lines, not per yield_every); a turn that
                    # brings nothing new, a priority line or a full gather is written at once (issue 22).
                    seen = self._sent
                    await anyio.lowlevel.checkpoint()
                    continue
                if self._head:  # the rest of a line (or batch) the pipe took in part: alone, nothing may overtake it
                    data, self._head = self._head, b""
                else:
                    batch = self._take_batch()
                    if len(self._queue) < self._high_water:
                        self._space.set()
                    batch.append(b"")
                    data = b"\n".join(batch)
                if self._direct and not self.broken:
                    await self._write_on_loop(data)
                elif not self.broken:
                    # abandonable: if the host stopped reading, a write blocked on a full pipe must
                    # not keep the process alive at exit (the thread is left behind; we _exit).
                    self._writing = True
                    try:
                        ok = await anyio.to_thread.run_sync(_write_all, self._fd, data, abandon_on_cancel=True)
                    finally:
                        self._writing = False
                    if not ok:
                        self.broken = True  # host closed its end; keep draining so producers never block
                else:
                    await anyio.lowlevel.checkpoint()
        finally:
            self._space.set()
            self._drained.set()
            if self._direct:  # the pipe may be shared with whoever started us: leave it as we found it
                with contextlib.suppress(OSError):
                    os.set_blocking(self._fd, True)


def _write_all(fd: int, data: bytes | memoryview) -> bool:
    view = memoryview(data)
    try:
        while view:
            try:
                n = os.write(fd, view)
            except BlockingIOError:  # a non-blocking fd (LineWriter's direct mode) that is full: wait for room
                select.select([], [fd], [])
                continue
            view = view[n:]
    except (BrokenPipeError, OSError):
        return False
    return True
