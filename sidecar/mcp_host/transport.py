"""What the MCP SDK's stdio transport lacks, added around it (the SDK still frames, spawns and stops the server).

- **The process**: ``stdio_client`` does not expose the server process. A small hook around the SDK's spawn
  function (looked up from a context variable, so only our hosts see it) hands us the process: its pid for the
  child supervisor, its ``returncode`` for health, and a filtered stdout.
- **Stdout hygiene**: a line that is not JSON (a stray ``print`` of the server) is dropped and counted instead
  of reaching the session; a line longer than the host's limit is never held beyond it — it is discarded as it
  streams and, when its JSON-RPC id can be read from its start or end, answered with a synthetic error
  (:data:`RESULT_TOO_LARGE_CODE`) so the waiting call fails at once instead of timing out.
- **Stderr**: a pipe read by a thread into a bounded ring (last 64 KiB) shown in diagnostics; never our stdout.
- **PATH**: a bare command is resolved on the user's login-shell PATH (a desktop-launched app often has a bare
  one: the ``spawn npx ENOENT`` complaint), merged with ours.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

from sidecar.core.childenv import scrubbed_environ
from sidecar.core.redact import redact_tail

logger = logging.getLogger(__name__)

STDERR_RING_BYTES = 64 * 1024
RING_SLACK_BYTES = 4096
"""What the stderr ring keeps beyond what it shows: the redaction's look past the cut (see ``redact_tail``)."""
RESULT_TOO_LARGE_CODE = -32099
"""JSON-RPC error code of the synthetic answer to a response line over the limit (never sent by a server)."""
_ID_HEAD = re.compile(rb'^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')
_ID_TAIL = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")\s*\}\s*$')
_KEEP = 512

SpawnHook = Callable[[Process], Process]
spawn_hook: ContextVar[SpawnHook | None] = ContextVar("metona_mcp_spawn_hook", default=None)


def install_spawn_hook() -> None:
    """Wrap the SDK's spawn function once (idempotent). The wrapper changes nothing unless a hook is set."""
    from mcp.client import stdio

    original = stdio._create_platform_compatible_process
    if getattr(original, "_metona_hooked", False):
        return

    @functools.wraps(original)
    async def spawn(*args: Any, **kwargs: Any) -> Any:
        process = await original(*args, **kwargs)
        hook = spawn_hook.get()
        # the SDK's FallbackProcess is Windows-only; here it spawns an anyio Process
        return hook(process) if hook is not None else process  # type: ignore[arg-type]

    spawn._metona_hooked = True  # type: ignore[attr-defined]
    stdio._create_platform_compatible_process = spawn


class StdoutFilter(ByteReceiveStream):
    """The server's stdout, line-filtered: non-JSON lines dropped (counted), over-long lines never buffered."""

    def __init__(self, inner: ByteReceiveStream, max_line_bytes: int) -> None:
        self._inner = inner
        self._max = max_line_bytes
        self._line = bytearray()
        self._out: deque[bytes] = deque()
        self._dropping: bytearray | None = None  # the head of an over-long line being discarded
        self._tail = b""
        self.garbage_lines = 0
        self.oversized_lines = 0
        self.last_garbage = ""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while not self._out:
            self._feed(await self._inner.receive(max_bytes))
        return self._out.popleft()

    def _feed(self, chunk: bytes) -> None:
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            piece = chunk[start:] if nl < 0 else chunk[start:nl]
            if self._dropping is not None:
                if len(self._dropping) < _KEEP:
                    self._dropping += piece[: _KEEP - len(self._dropping)]
                self._tail = (self._tail + piece)[-_KEEP:]
            else:
                self._line += piece
                if len(self._line) > self._max:
                    self._dropping = bytearray(self._line[:_KEEP])
                    self._tail = bytes(self._line[-_KEEP:])
                    self._line.clear()
            if nl < 0:
                return
            self._end_line()
            start = nl + 1

    def _end_line(self) -> None:
        if self._dropping is not None:
            self.oversized_lines += 1
            match = _ID_HEAD.match(self._dropping) or _ID_TAIL.search(self._tail)
            self._dropping, self._tail = None, b""
            if match is not None:
                message = f"the server's answer exceeded the limit of {self._max} bytes and was discarded"
                error = f'{{"code":{RESULT_TOO_LARGE_CODE},"message":"{message}"}}'
                self._out.append(b'{"jsonrpc":"2.0","id":' + match.group(1) + b',"error":' + error.encode() + b"}\n")
            return
        line = bytes(self._line)
        self._line.clear()
        head = line.lstrip()[:1]
        if not head:
            return
        if head not in (b"{", b"["):
            self.garbage_lines += 1
            self.last_garbage = line[:200].decode("utf-8", "replace")
            return
        self._out.append(line + b"\n")

    async def aclose(self) -> None:
        await self._inner.aclose()


class HookedProcess(Process):
    """The SDK's process with our stdout filter in front (everything else delegated)."""

    def __init__(self, inner: Process, stdout: StdoutFilter) -> None:
        self._inner = inner
        self._stdout = stdout
        self._process = getattr(inner, "_process", None)  # the SDK closes the asyncio transport through it

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def wait(self) -> int:
        return await self._inner.wait()

    def terminate(self) -> None:
        self._inner.terminate()

    def kill(self) -> None:
        self._inner.kill()

    def send_signal(self, signal: int) -> None:
        self._inner.send_signal(signal)  # type: ignore[arg-type]

    @property
    def pid(self) -> int:
        return self._inner.pid

    @property
    def returncode(self) -> int | None:
        return self._inner.returncode

    @property
    def stdin(self) -> ByteSendStream | None:
        return self._inner.stdin

    @property
    def stdout(self) -> ByteReceiveStream | None:
        return self._stdout

    @property
    def stderr(self) -> ByteReceiveStream | None:
        return self._inner.stderr


class StderrRing:
    """The server's stderr through a pipe, into a ring of the last ``limit`` bytes (a reader thread)."""

    def __init__(self, limit: int = STDERR_RING_BYTES) -> None:
        self._limit = limit
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._lock = threading.Lock()
        self.total_bytes = 0
        read_fd, write_fd = os.pipe()
        self._read_fd = read_fd
        self.writer = os.fdopen(write_fd, "wb", buffering=0)
        """Pass to the SDK as ``errlog``; :meth:`spawned` closes our copy once the child holds its own."""
        self._thread = threading.Thread(target=self._pump, name="mcp-stderr", daemon=True)
        self._thread.start()

    def spawned(self) -> None:
        with contextlib.suppress(OSError):
            self.writer.close()

    def _pump(self) -> None:
        try:
            while True:
                data = os.read(self._read_fd, 65536)
                if not data:
                    return
                with self._lock:
                    self.total_bytes += len(data)
                    self._chunks.append(data)
                    self._size += len(data)
                    while self._size - len(self._chunks[0]) >= self._limit + RING_SLACK_BYTES:
                        self._size -= len(self._chunks.popleft())
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                os.close(self._read_fd)

    def text(self, secrets: Sequence[str] = (), chars: int | None = None) -> str:
        """The last ``chars`` (default: the ring's limit) characters the server wrote, redacted before the cut:
        the ring keeps :data:`RING_SLACK_BYTES` more than it shows, so a secret across the cut is seen whole."""
        with self._lock:
            data = b"".join(self._chunks)
            dropped = self.total_bytes > self._size
        text = data.decode("utf-8", "replace")
        return redact_tail(text, self._limit if chars is None else chars, secrets, head_cut=dropped)

    def drain(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the reader to reach the pipe's end (the server gone, what it wrote all
        read): a server that exited at start is quoted whole (:func:`settled_stderr`)."""
        self._thread.join(timeout)

    def close(self) -> None:
        self.spawned()


STDERR_SETTLE_S = 1.0
"""How long a failed start waits for the server to exit, and for its stderr to be read to the end
(:func:`settled_stderr`)."""


async def settled_stderr(process: Process, ring: StderrRing) -> None:
    """Before a failed start quotes the server's stderr: where the server has exited (or does within
    :data:`STDERR_SETTLE_S`), the ring's reader is given that long to read what it wrote to the end. Under load the
    error had been built before the reader thread ran, and the tail of a server that wrote why it gave up came empty."""
    with anyio.move_on_after(STDERR_SETTLE_S):
        await process.wait()
    if process.returncode is not None:
        await anyio.to_thread.run_sync(ring.drain, STDERR_SETTLE_S)


# --- PATH ------------------------------------------------------------------------------------------------------


@functools.cache
def login_shell_path() -> str:
    """The PATH of the user's login shell (``$SHELL -l -c``), or ``""`` when it cannot be had within 3 s."""
    if sys.platform == "win32":
        return ""
    shell = os.environ.get("SHELL") or "/bin/sh"
    if not Path(shell).is_file():
        return ""
    marker = "__METONA_PATH__"
    try:
        done = subprocess.run(
            [shell, "-l", "-c", f'printf "{marker}%s{marker}" "$PATH"'],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=3,
            check=False,
            start_new_session=True,
            env=scrubbed_environ(),  # a login shell runs the user's profile scripts: no master key, no API key
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    out = done.stdout.decode("utf-8", "replace")
    parts = out.split(marker)
    return parts[1] if len(parts) >= 3 else ""


def merged_path(current: str | None = None) -> str:
    """Our PATH first, then what the login shell adds (deduplicated, order kept)."""
    seen: list[str] = []
    for source in ((current if current is not None else os.environ.get("PATH", "")), login_shell_path()):
        for entry in source.split(os.pathsep):
            if entry and entry not in seen:
                seen.append(entry)
    return os.pathsep.join(seen)


def resolve_command(command: str, plugin_dir: Path, path: str) -> str | None:
    """An absolute executable for ``command``: absolute, relative to the plugin folder, or a bare name on ``path``."""
    if os.sep in command or (os.altsep and os.altsep in command):
        candidate = Path(command) if Path(command).is_absolute() else (plugin_dir / command)
        candidate = Path(os.path.abspath(candidate))  # not resolve(): a venv's python is a symlink that must stay
        return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None
    return shutil.which(command, path=path)


async def aresolve_command(command: str, plugin_dir: Path) -> tuple[str | None, str]:
    """(executable or None, the PATH used) off the event loop (the login shell is asked once per process)."""
    return await anyio.to_thread.run_sync(_resolve_sync, command, plugin_dir)


def _resolve_sync(command: str, plugin_dir: Path) -> tuple[str | None, str]:
    path = merged_path()
    return resolve_command(command, plugin_dir, path), path
