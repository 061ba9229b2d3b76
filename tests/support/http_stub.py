"""A tiny threaded HTTP/1.1 server on 127.0.0.1 for stdio end-to-end tests: canned answers per path,
sent chunk by chunk (chunked encoding, optional pause between chunks), requests recorded."""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json"})
    chunks: list[bytes] = field(default_factory=list)
    delay_s: float = 0.0
    """Pause before every chunk after the first."""


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class StubServer:
    def __init__(self) -> None:
        self.answers: dict[str, list[Answer]] = {}
        self.responders: dict[str, Callable[[Any], Answer]] = {}
        self.seen: list[Seen] = []
        self.disconnected = threading.Event()
        self.disconnected_at: float | None = None
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # without it, Nagle + the client's delayed ACK hold small chunks back ~40-200 ms
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                stub.seen.append(Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                responder = stub.responders.get(self.path)
                if responder is not None:
                    answer = responder(body)
                else:
                    queue = stub.answers.get(self.path) or [Answer(404, chunks=[b'{"error":"no stub"}'])]
                    answer = queue.pop(0) if len(queue) > 1 else queue[0]
                self.send_response(answer.status)
                for k, v in answer.headers.items():
                    self.send_header(k, v)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                try:
                    for i, chunk in enumerate(answer.chunks):
                        if i and answer.delay_s and self._client_gone(answer.delay_s):
                            stub.disconnected_at = time.monotonic()
                            stub.disconnected.set()
                            return
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    stub.disconnected.set()

            def _client_gone(self, wait_s: float) -> bool:
                """Wait up to ``wait_s``; True if the client closed the connection meanwhile (EOF)."""
                readable, _, _ = select.select([self.connection], [], [], wait_s)
                if not readable:
                    return False
                try:
                    return self.connection.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    return True

            do_GET = do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, path: str, *answers: Answer) -> None:
        self.answers[path] = list(answers)

    def respond(self, path: str, responder: Callable[[Any], Answer]) -> None:
        """Answer ``path`` with ``responder(request_body)`` (called in the server's thread)."""
        self.responders[path] = responder


@contextmanager
def stub_server() -> Iterator[StubServer]:
    stub = StubServer()
    thread = threading.Thread(target=stub.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        stub.server.shutdown()
        stub.server.server_close()


def sse(*events: Any, done: bool = True) -> list[bytes]:
    """OpenAI-style SSE chunks from JSON-able objects."""
    out = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]
    if done:
        out.append(b"data: [DONE]\n\n")
    return out
