"""A real HTTP/1.1 server on 127.0.0.1 that replays recorded vendor answers (tests and benchmarks).

It runs in its own thread (blocking sockets), so it serves an asyncio/anyio client in the test's event loop
and a separate process (the sidecar in ``bench_stream_e2e``) alike. Each answer goes out with
``Transfer-Encoding: chunked``, one HTTP chunk per recorded chunk, each written with its own ``sendall``: the
client's HTTP parser (h11) hands every chunk to the application on its own, so the recording's split points
(an SSE event or a JSON line cut in two) reach the adapter as they were recorded. ``cut: true`` closes the
connection after the last recorded chunk, without the terminating zero-size chunk (a stream cut mid-body).

Routing is explicit: ``answer(path, recording)`` queues the next answer for ``path`` (FIFO per path); a request
without a queued answer gets a 404 whose body names the path, so a wrong endpoint fails loudly. Every request
is recorded (method, path, lower-cased headers, raw body, decoded JSON body) before it is answered.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MAX_HEADER_BYTES = 64 * 1024
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    402: "Payment Required",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Site Overloaded",
}
_HOP_BY_HOP = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})


@dataclass(frozen=True)
class Recording:
    """One recorded HTTP answer (``tests/providers/recordings/<vendor>/<scenario>.yaml``)."""

    status: int
    headers: dict[str, str]
    chunks: tuple[bytes, ...]
    cut: bool = False
    stream: bool = True
    source: str = ""
    name: str = ""

    @classmethod
    def load(cls, path: Path) -> Recording:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a recording is a YAML mapping")
        chunks = data.get("chunks") or []
        if not isinstance(chunks, list) or not all(isinstance(c, str) for c in chunks):
            raise ValueError(f"{path}: chunks must be a list of strings")
        headers = {str(k).lower(): str(v) for k, v in (data.get("headers") or {}).items()}
        return cls(
            status=int(data.get("status", 200)),
            headers=headers,
            chunks=tuple(c.encode("utf-8") for c in chunks),
            cut=bool(data.get("cut", False)),
            stream=bool(data.get("stream", True)),
            source=str(data.get("source", "")),
            name=f"{path.parent.name}/{path.stem}",
        )

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


@dataclass
class ReceivedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any = None
    answered_status: int = 0
    first_chunk_ns: int | None = None
    """``time.perf_counter_ns()`` right after the first body chunk went out (first-event latency benchmark)."""
    extra: dict[str, Any] = field(default_factory=dict)


class LoopbackServer:
    """``with LoopbackServer() as server: server.answer("/v1/chat/completions", rec); ... server.url``."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._sock = socket.create_server((host, 0))
        self.host = host
        self.port: int = self._sock.getsockname()[1]
        self._lock = threading.Lock()
        self._answers: dict[str, deque[Recording]] = defaultdict(deque)
        self._conns: set[socket.socket] = set()
        self.requests: list[ReceivedRequest] = []
        self._closed = False
        self._thread = threading.Thread(target=self._accept_loop, name=f"loopback:{self.port}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # ---- test API ----------------------------------------------------------------------------------------

    def answer(self, path: str, recording: Recording) -> None:
        """Queue the next answer for a request to ``path`` (query strings are ignored for routing)."""
        with self._lock:
            self._answers[path].append(recording)

    def reset(self) -> None:
        with self._lock:
            self._answers.clear()
            self.requests.clear()

    def pending(self) -> dict[str, int]:
        """Answers queued and not yet served, by path."""
        with self._lock:
            return {p: len(q) for p, q in self._answers.items() if q}

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the blocking accept() (a bare close() does not)
        with contextlib.suppress(OSError):
            self._sock.close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                conn.close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LoopbackServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- serving -----------------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._conns.add(conn)
            threading.Thread(target=self._serve_conn, args=(conn,), daemon=True).start()

    def _serve_conn(self, conn: socket.socket) -> None:
        reader = _Reader(conn)
        try:
            while True:
                request = reader.read_request()
                if request is None:
                    return
                with self._lock:
                    self.requests.append(request)
                    queue = self._answers.get(request.path.split("?", 1)[0])
                    recording = queue.popleft() if queue else None
                if recording is None:
                    recording = _no_answer(request)
                keep_alive = self._respond(conn, request, recording)
                if not keep_alive:
                    return
        except OSError:
            return
        finally:
            with self._lock:
                self._conns.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()

    def _respond(self, conn: socket.socket, request: ReceivedRequest, recording: Recording) -> bool:
        request.answered_status = recording.status
        reason = _REASONS.get(recording.status, "Status")
        head = [f"HTTP/1.1 {recording.status} {reason}"]
        head += [f"{k}: {v}" for k, v in recording.headers.items() if k not in _HOP_BY_HOP]
        head.append("transfer-encoding: chunked")
        if recording.cut:
            head.append("connection: close")
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        first = True
        for chunk in recording.chunks:
            if not chunk:
                continue  # a zero-size chunk would end the body
            conn.sendall(b"%x\r\n%b\r\n" % (len(chunk), chunk))
            if first:
                request.first_chunk_ns = time.perf_counter_ns()
                first = False
        if recording.cut:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            return False
        conn.sendall(b"0\r\n\r\n")
        return request.headers.get("connection", "").lower() != "close"


def _no_answer(request: ReceivedRequest) -> Recording:
    body = json.dumps({"error": {"message": f"loopback: no answer queued for {request.method} {request.path}"}})
    return Recording(status=404, headers={"content-type": "application/json"}, chunks=(body.encode(),), name="")


class _Reader:
    """Reads HTTP/1.1 requests (Content-Length or chunked bodies) from a blocking socket."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self._buf = b""

    def _fill(self) -> bool:
        data = self._conn.recv(65536)
        if not data:
            return False
        self._buf += data
        return True

    def _read_until(self, marker: bytes) -> bytes | None:
        while marker not in self._buf:
            if len(self._buf) > MAX_HEADER_BYTES or not self._fill():
                return None
        head, _, self._buf = self._buf.partition(marker)
        return head

    def _read_exact(self, n: int) -> bytes | None:
        while len(self._buf) < n:
            if not self._fill():
                return None
        data, self._buf = self._buf[:n], self._buf[n:]
        return data

    def read_request(self) -> ReceivedRequest | None:
        head = self._read_until(b"\r\n\r\n")
        if head is None:
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, path, _version = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = self._read_chunked()
        else:
            body = self._read_exact(int(headers.get("content-length", "0") or 0))
        if body is None:
            return None
        decoded: Any = None
        if body:
            try:
                decoded = json.loads(body)
            except ValueError:
                decoded = None
        return ReceivedRequest(method=method, path=path, headers=headers, body=body, json=decoded)

    def _read_chunked(self) -> bytes | None:
        parts: list[bytes] = []
        while True:
            size_line = self._read_until(b"\r\n")
            if size_line is None:
                return None
            size = int(size_line.split(b";", 1)[0], 16)
            if size == 0:
                if self._read_until(b"\r\n") is None:  # no trailers expected
                    return None
                return b"".join(parts)
            data = self._read_exact(size + 2)
            if data is None:
                return None
            parts.append(data[:-2])
