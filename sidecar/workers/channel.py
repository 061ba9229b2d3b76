"""The sidecar's side of a worker child: one class for the transcription, local-model, math and export workers.

:class:`WorkerChannel` starts the worker through the :class:`~sidecar.workers.supervisor.ChildSupervisor` (its own
process group, stopped with the sidecar) on the first request, waits for its :class:`~.protocol.Hello` within
``hello_timeout_s``, then multiplexes requests by id over the worker's stdin/stdout (:mod:`.protocol`): progress
and deltas go to the request's callback, the result is returned. A cancelled request sends :class:`~.protocol.Cancel`
(a domain that must stop at once also stops the worker). The worker's stderr is copied to the sidecar's stderr as
it comes, and its last lines are kept for the log when the worker fails.

Every failure of the worker itself — it does not start, does not say hello in time, prints a line that is not a
message, dies mid-request, or does not answer within a request's timeout — fails the requests in flight with the
error the domain builds from a :class:`WorkerFault` (its own code, never ``INTERNAL_ERROR``); an answer
:class:`~.protocol.Error` becomes the domain's error through ``on_error``. After a fault the next request starts a
fresh worker. With ``idle_s`` > 0 the worker is stopped after that long without a request.
"""

from __future__ import annotations

import contextlib
import logging
import math
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import Process, TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from . import protocol
from .protocol import Cancel, Delta, Error, Hello, Progress, Request, Result
from .supervisor import ChildSupervisor

logger = logging.getLogger(__name__)

MAX_LINE = 256 * 1024 * 1024
"""A worker line longer than this is a broken worker (a transcript of hours is a few MB)."""
STDERR_TAIL_BYTES = 8192
STDERR_WAIT_S = 1.0
"""After a worker failed: how long to wait for the rest of its stderr (a grandchild may hold it open)."""
EXIT_WAIT_S = 2.0
"""After EOF on the worker's stdout: how long to wait for its exit status (for the error message)."""

START_FAILED = "WORKER_START_FAILED"
START_TIMEOUT = "WORKER_START_TIMEOUT"
DIED = "WORKER_DIED"
PROTOCOL_ERROR = "WORKER_PROTOCOL_ERROR"
TIMEOUT = "WORKER_TIMEOUT"
STOPPED = "WORKER_STOPPED"


@dataclass(frozen=True)
class WorkerFault:
    """Why the channel failed a request (the worker's own answers are :class:`~.protocol.Error`)."""

    reason: str
    """One of ``WORKER_START_FAILED``, ``WORKER_START_TIMEOUT``, ``WORKER_DIED``, ``WORKER_PROTOCOL_ERROR``,
    ``WORKER_TIMEOUT``, ``WORKER_STOPPED``."""
    message: str
    """Safe to show: says what happened to the worker, never what it printed."""
    exit_code: int | None = None

    @property
    def at_start(self) -> bool:
        return self.reason in (START_FAILED, START_TIMEOUT)


OnEvent = Callable[[Progress | Delta], Awaitable[None]]
OnFault = Callable[[WorkerFault], Exception]
OnError = Callable[[Error], Exception]
_Item = Progress | Delta | Result | Error | WorkerFault


def _exited(session: _Session) -> bool:
    """The worker has exited though its reader has not seen it yet: a zombie, or reaped by asyncio's watcher thread
    a moment ago (its exit status not yet on the loop). A request sent now would be lost with it, and asyncio
    reports the broken pipe only a loop turn after the write. Linux: its ``/proc`` entry says (``waitid`` with
    ``WNOWAIT`` does not, while the watcher thread waits on the pid); elsewhere only the known exit status."""
    if session.process.returncode is not None:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        with open(f"/proc/{session.process.pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # gone: reaped
    return state in (b"Z", b"X")


def exit_reason(name: str, returncode: int | None) -> str:
    if returncode is None:
        return f"the {name} stopped answering"
    if returncode < 0:
        return f"the {name} was killed by signal {-returncode}"
    return f"the {name} exited with status {returncode}"


class _Session:
    """One worker process and what is in flight on it."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.hello: Hello | None = None
        self.ready = anyio.Event()
        self.fault: WorkerFault | None = None
        self.stopping = False
        self.pending: dict[str, MemoryObjectSendStream[_Item]] = {}
        self.stderr_tail = bytearray()
        self.stderr_done = anyio.Event()

    @property
    def alive(self) -> bool:
        return self.fault is None and not self.stopping and self.process.returncode is None

    def fail(self, fault: WorkerFault) -> None:
        """Fail everything in flight (once); a request that registers later sees ``fault`` at once."""
        if self.fault is None:
            self.fault = fault
        self.ready.set()
        for waiter in self.pending.values():
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                waiter.send_nowait(self.fault)


class WorkerChannel:
    def __init__(
        self,
        children: ChildSupervisor,
        task_group: TaskGroup,
        *,
        name: str,
        argv: Sequence[str],
        env: Callable[[], Mapping[str, str]],
        on_fault: OnFault,
        on_error: OnError,
        hello_timeout_s: float = 60.0,
        idle_s: float = 0.0,
        stop_grace_s: float = 2.0,
    ) -> None:
        """``name`` (e.g. ``transcription worker``) is how messages and the supervisor call it; ``env`` builds the
        child's environment at each start (see :func:`sidecar.workers.env.worker_env`)."""
        self._children = children
        self._tg = task_group
        self.name = name
        self._argv = list(argv)
        self._env = env
        self._on_fault = on_fault
        self._on_error = on_error
        self.hello_timeout_s = hello_timeout_s
        self.idle_s = idle_s
        self._grace_s = stop_grace_s
        self._session: _Session | None = None
        self._start_lock = anyio.Lock()
        self._next_id = 0
        self._in_flight = 0
        self._last_used = 0.0
        self._watching = False
        self._closed = False
        self.starts = 0
        """Workers started so far."""

    @property
    def pid(self) -> int | None:
        s = self._session
        return s.process.pid if s is not None and s.alive else None

    # ---- requests ------------------------------------------------------------------------------------------------

    async def request(
        self,
        op: str,
        params: Mapping[str, Any],
        on_event: OnEvent | None = None,
        *,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Run ``op`` in the worker (starting it if needed) and return its result's data.

        Raises the domain's error (``on_error`` / ``on_fault``); a request that is cancelled sends a cancel to the
        worker and re-raises the cancellation."""
        self._in_flight += 1
        try:
            session = await self._ensure()
            self._next_id += 1
            request_id = f"r{self._next_id}"
            send, receive = anyio.create_memory_object_stream[_Item](math.inf)
            request = Request(id=request_id, op=op, params=dict(params))
            session.pending[request_id] = send
            logger.debug("%s: request %s (%s)", self.name, request_id, op)
            try:
                sent = await self._write(session, request)
                if not sent and session.fault is None:
                    # nothing was sent: the worker died while idle and its reader has not seen the EOF yet. The
                    # request never reached it, so a fresh worker gets it (once)
                    session.pending.pop(request_id, None)
                    await self._drop(session)
                    session = await self._ensure()
                    session.pending[request_id] = send
                    sent = await self._write(session, request)
                return await self._exchange(session, sent, receive, on_event, timeout_s)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await self._write(session, Cancel(id=request_id))
                raise
            finally:
                session.pending.pop(request_id, None)
                send.close()
                receive.close()
        finally:
            self._in_flight -= 1
            self.touch()

    async def _exchange(
        self,
        session: _Session,
        sent: bool,
        receive: MemoryObjectReceiveStream[_Item],
        on_event: OnEvent | None,
        timeout_s: float | None,
    ) -> dict[str, Any]:
        if session.fault is not None:
            raise self._on_fault(session.fault)
        if not sent:  # the worker is gone: its reader reports how
            await self._kill(session)
        with anyio.move_on_after(math.inf if timeout_s is None else timeout_s) as scope:
            async for item in receive:
                if isinstance(item, (Progress, Delta)):
                    if on_event is not None:
                        await on_event(item)
                elif isinstance(item, Result):
                    return item.data
                elif isinstance(item, Error):
                    raise self._on_error(item)
                else:
                    raise self._on_fault(item)
        if scope.cancelled_caught:
            fault = WorkerFault(TIMEOUT, f"the {self.name} did not answer within {timeout_s:g} s")
            session.fail(fault)
            self._log_fault(session, fault)
            with anyio.CancelScope(shield=True):
                await self._drop(session)
        # (the stream only ends when closed: a fault is on record for anything else)
        raise self._on_fault(session.fault or WorkerFault(DIED, exit_reason(self.name, session.process.returncode)))

    async def _write(self, session: _Session, message: Request | Cancel) -> bool:
        """Write one line. Nothing is awaited before the bytes are in the pipe's buffer (no lock: a whole line is one
        synchronous write), so a cancel written while its request is being cancelled always goes out."""
        stdin = session.process.stdin
        if stdin is None or not session.alive:
            return False
        try:
            await stdin.send(protocol.encode(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            return False
        return True

    # ---- the worker's lifetime -----------------------------------------------------------------------------------

    async def start(self) -> Hello:
        """Start the worker now (a request starts it anyway) and return its hello."""
        session = await self._ensure()
        assert session.hello is not None
        return session.hello

    async def _ensure(self) -> _Session:
        async with self._start_lock:
            session = self._session
            if session is not None and session.alive and session.hello is not None and not _exited(session):
                return session
            if session is not None:
                await self._drop(session)
            return await self._spawn()

    async def _spawn(self) -> _Session:
        process = await self._children.spawn(
            self._argv,
            name=self.name,
            env=dict(self._env()),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        session = _Session(process)
        self._session = session
        self.starts += 1
        self._tg.start_soon(self._copy_stderr, session)
        self._tg.start_soon(self._read, session)
        try:
            with anyio.move_on_after(self.hello_timeout_s):
                await session.ready.wait()
        except BaseException:  # cancelled while it starts: never keep a worker that did not say hello
            with anyio.CancelScope(shield=True):
                await self._drop(session)
            raise
        if session.hello is None:
            if session.fault is None:
                timeout = WorkerFault(START_TIMEOUT, f"the {self.name} did not start within {self.hello_timeout_s:g} s")
                session.fail(timeout)
                self._log_fault(session, timeout)
            with anyio.CancelScope(shield=True):
                await self._drop(session)
            raise self._on_fault(session.fault or WorkerFault(START_FAILED, f"the {self.name} could not start"))
        logger.debug("%s started (pid %s)", self.name, process.pid)
        return session

    async def _read(self, session: _Session) -> None:
        """Route the worker's lines to their requests until EOF; then fail what is still in flight."""
        stdout = session.process.stdout
        assert stdout is not None
        buffer = bytearray()
        fault: WorkerFault | None = None
        ended = False
        try:
            async for chunk in stdout:
                buffer += chunk
                fault = self._route_lines(session, buffer)
                if fault is None and len(buffer) > MAX_LINE:
                    fault = self._broken(session, f"wrote a line longer than {MAX_LINE} bytes")
                if fault is not None:
                    break
            ended = True
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            ended = True
        finally:
            with anyio.CancelScope(shield=True):
                await self._reader_ended(session, fault, waited=ended)

    def _route_lines(self, session: _Session, buffer: bytearray) -> WorkerFault | None:
        while (end := buffer.find(b"\n")) >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            if not line.strip():
                continue
            try:
                message = protocol.from_worker(line)
            except protocol.ProtocolViolation as exc:
                logger.warning("%s: %s", self.name, exc)
                return self._broken(session, "wrote a line that is not a worker message")
            if isinstance(message, Hello):
                if message.protocol != protocol.PROTOCOL_VERSION:
                    logger.warning(
                        "%s speaks protocol %s, not %s", self.name, message.protocol, protocol.PROTOCOL_VERSION
                    )
                    return self._broken(session, "speaks another protocol version")
                if session.hello is None:
                    session.hello = message
                    session.ready.set()
                continue
            if session.hello is None:
                return self._broken(session, "answered before it said hello")
            waiter = session.pending.get(message.id)
            if isinstance(message, (Result, Error)):
                logger.debug("%s: %s of %s%s", self.name, message.type, message.id, "" if waiter else " (dropped)")
            if waiter is None:  # a request that was given up (cancelled, timed out): its late lines are dropped
                continue
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                waiter.send_nowait(message)
        return None

    def _broken(self, session: _Session, what: str) -> WorkerFault:
        """A worker that breaks the protocol: before its hello it did not start, after it is a protocol error."""
        return WorkerFault(PROTOCOL_ERROR if session.hello is not None else START_FAILED, f"the {self.name} {what}")

    async def _reader_ended(self, session: _Session, fault: WorkerFault | None, *, waited: bool) -> None:
        process = session.process
        if fault is None:
            if not waited:  # our own task group ends (shutdown): not the worker's failure
                session.stopping = True
            code = process.returncode
            if waited and code is None and not session.stopping:
                with anyio.move_on_after(EXIT_WAIT_S):
                    code = await process.wait()
            if session.stopping:
                fault = WorkerFault(STOPPED, f"the {self.name} was stopped", code)
            else:
                reason = DIED if session.hello is not None else START_FAILED
                fault = WorkerFault(reason, exit_reason(self.name, code), code)
        await self._drop(session)  # gone before its requests hear of it: a retry gets a fresh worker
        if session.fault is None and not session.stopping:
            with anyio.move_on_after(STDERR_WAIT_S):  # its last words, for the log
                await session.stderr_done.wait()
            self._log_fault(session, fault)
        session.fail(fault)

    async def _copy_stderr(self, session: _Session) -> None:
        """The worker's stderr goes to ours as it comes (as when it inherited it); its tail is kept for the log."""
        stream = session.process.stderr
        assert stream is not None
        out = getattr(sys.stderr, "buffer", None)
        try:
            async for chunk in stream:
                session.stderr_tail += chunk
                del session.stderr_tail[:-STDERR_TAIL_BYTES]
                with contextlib.suppress(OSError, ValueError):
                    if out is not None:
                        out.write(chunk)
                        out.flush()
                    else:
                        sys.stderr.write(chunk.decode("utf-8", "replace"))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            session.stderr_done.set()

    def _log_fault(self, session: _Session, fault: WorkerFault) -> None:
        tail = session.stderr_tail.decode("utf-8", "replace").strip()
        logger.warning(
            "%s failed (%s): %s%s",
            self.name,
            fault.reason,
            fault.message,
            f"; its last stderr:\n{tail}" if tail else "",
        )

    async def _kill(self, session: _Session) -> None:
        await self._children.stop(session.process.pid, self._grace_s)

    async def _drop(self, session: _Session) -> None:
        """Make sure ``session``'s process group is gone and forgotten (idempotent)."""
        if self._session is session:
            self._session = None
        if session.process.returncode is None or session.process.pid in self._children.pids:
            await self._kill(session)

    async def stop(self) -> None:
        """Stop the worker: EOF on its stdin, then its process group (SIGTERM, ``stop_grace_s``, SIGKILL).

        Requests still in flight fail with ``WORKER_STOPPED``."""
        session, self._session = self._session, None
        if session is None:
            return
        session.stopping = True
        stdin = session.process.stdin
        if stdin is not None:
            with contextlib.suppress(Exception):
                await stdin.aclose()
        await self._kill(session)
        session.fail(WorkerFault(STOPPED, f"the {self.name} was stopped", session.process.returncode))

    async def aclose(self) -> None:
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self.stop()

    # ---- idle stop -----------------------------------------------------------------------------------------------

    def touch(self) -> None:
        """Restart the idle countdown (each request does); one watcher per channel."""
        self._last_used = anyio.current_time()
        if self.idle_s > 0 and not self._watching and not self._closed and self._session is not None:
            self._watching = True
            self._tg.start_soon(self._idle_watch)

    async def _idle_watch(self) -> None:
        try:
            while self._session is not None and not self._closed:
                left = self._last_used + self.idle_s - anyio.current_time()
                if left > 0 or self._in_flight or self._start_lock.locked():
                    await anyio.sleep(max(left, min(self.idle_s, 0.5)))
                    continue
                logger.info("%s idle for %g s: stopping it", self.name, self.idle_s)
                await self.stop()
        finally:
            self._watching = False
