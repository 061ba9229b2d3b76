"""The one JSON-lines protocol between the sidecar and a worker child (transcription, local model, maths SVG, export).

Both sides import these models: the parent (:mod:`sidecar.workers.channel`) and the worker (through
:class:`WorkerOutput` and :func:`read_requests`). Only pydantic and the standard library are imported here, so a
worker loads it before any heavy library and never pulls the sidecar's domain layer.

One message per line, on the worker's own stdin/stdout pipes (never the sidecar's wire):

* worker → parent, first line: :class:`Hello` (the parent waits for it with a timeout);
* parent → worker: :class:`Request` (an ``id`` the parent chose, an ``op``, its ``params``) and :class:`Cancel`;
* worker → parent, per request: any number of :class:`Progress` and :class:`Delta`, then exactly one
  :class:`Result` or :class:`Error` (a project error code of the worker's domain).

A line that is not one of these is a broken worker: the parent stops it and fails what it had in flight.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Annotated, Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from ..core.redact import redact_head

PROTOCOL_VERSION = 1

logger = logging.getLogger(__name__)


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Hello(_Message):
    """The worker is up and reads requests."""

    type: Literal["hello"] = "hello"
    worker: str
    pid: int
    protocol: int = PROTOCOL_VERSION


class Request(_Message):
    type: Literal["request"] = "request"
    id: str
    op: str
    params: dict[str, Any] = Field(default_factory=dict)


class Cancel(_Message):
    """Stop request ``id`` as soon as possible (it still ends with a result or an error)."""

    type: Literal["cancel"] = "cancel"
    id: str


class Progress(_Message):
    """A named step of a request (``stage``), with its data (e.g. ``fraction``, ``current``/``total``)."""

    type: Literal["progress"] = "progress"
    id: str
    stage: str
    data: dict[str, Any] = Field(default_factory=dict)


class Delta(_Message):
    """A piece of streamed text."""

    type: Literal["delta"] = "delta"
    id: str
    text: str


class Result(_Message):
    type: Literal["result"] = "result"
    id: str
    data: dict[str, Any] = Field(default_factory=dict)


class Error(_Message):
    """The request failed in the worker; ``code`` is the worker domain's own error code."""

    type: Literal["error"] = "error"
    id: str
    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


ToWorker = Annotated[Request | Cancel, Field(discriminator="type")]
FromWorker = Annotated[Hello | Progress | Delta | Result | Error, Field(discriminator="type")]
Event = Progress | Delta
"""What a request streams before its end."""

_TO_WORKER: TypeAdapter[Request | Cancel] = TypeAdapter(ToWorker)
_FROM_WORKER: TypeAdapter[Hello | Progress | Delta | Result | Error] = TypeAdapter(FromWorker)


class ProtocolViolation(ValueError):
    """A line that is not a message of this protocol."""


def encode(message: _Message) -> bytes:
    return message.model_dump_json().encode("utf-8") + b"\n"


def from_worker(line: bytes | str) -> Hello | Progress | Delta | Result | Error:
    try:
        return _FROM_WORKER.validate_json(line)
    except ValidationError as exc:
        raise ProtocolViolation(_summary(line, exc)) from None


def to_worker(line: bytes | str) -> Request | Cancel:
    try:
        return _TO_WORKER.validate_json(line)
    except ValidationError as exc:
        raise ProtocolViolation(_summary(line, exc)) from None


def _summary(line: bytes | str, exc: ValidationError) -> str:
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    return f"not a worker message ({exc.error_count()} error(s)): {redact_head(text, 120)!r}"


# ---- the worker's side ------------------------------------------------------------------------------------------


class WorkerOutput:
    """The worker's protocol stream (the real stdout, see :func:`sidecar.workers.io.claim_stdout`); thread-safe."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()

    def send(self, message: Hello | Progress | Delta | Result | Error) -> None:
        line = message.model_dump_json() + "\n"
        with self._lock:
            self._out.write(line)
            self._out.flush()

    def hello(self, worker: str, pid: int) -> None:
        self.send(Hello(worker=worker, pid=pid))

    def progress(self, request_id: str, stage: str, data: dict[str, Any]) -> None:
        self.send(Progress(id=request_id, stage=stage, data=data))

    def delta(self, request_id: str, text: str) -> None:
        self.send(Delta(id=request_id, text=text))

    def result(self, request_id: str, data: dict[str, Any]) -> None:
        self.send(Result(id=request_id, data=data))

    def error(self, request_id: str, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        self.send(Error(id=request_id, code=code, message=message, details=details or {}))


def run_worker(serve: Callable[[TextIO, WorkerOutput], None]) -> None:
    """A one-op worker's entry (maths SVG, export): the real stdout becomes the protocol (what libraries print
    goes to stderr), the process leaves when its parent changes (the sidecar died, even by SIGKILL), warnings go
    to stderr; then ``serve`` reads stdin until EOF."""
    import os
    import sys

    from .io import claim_stdout, exit_with_parent

    proto = claim_stdout()
    exit_with_parent(lambda: os._exit(3))
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    serve(sys.stdin, WorkerOutput(proto))


def serve_requests(
    lines: Iterable[str],
    out: WorkerOutput,
    op: str,
    handle: Callable[[dict[str, Any]], dict[str, Any]],
    failed_code: str,
    unexpected: Callable[[Exception], str],
) -> None:
    """A one-op worker's loop (maths SVG, export): answer each ``op`` request in turn with ``handle``'s data until
    EOF; a project error is answered with its code, message and details, any other exception with
    ``failed_code`` and ``unexpected(exc)`` (its traceback goes to stderr). Cancels are not read: a domain that
    gives a request up kills the worker."""
    from sidecar.core.errors import SidecarError

    for message in read_requests(lines):
        if not isinstance(message, Request):
            continue
        if message.op != op:
            out.error(message.id, failed_code, "unknown worker op")
            continue
        try:
            data = handle(message.params)
        except SidecarError as exc:
            out.error(message.id, exc.code, exc.message, exc.details)
        except Exception as exc:
            logger.warning("%s failed", op, exc_info=True)
            out.error(message.id, failed_code, unexpected(exc), {"exception": type(exc).__name__})
        else:
            out.result(message.id, data)


def read_requests(lines: Iterable[str]) -> Iterator[Request | Cancel]:
    """The parent's messages, in order, until EOF; a line that is not one is logged (stderr) and skipped."""
    for line in lines:
        if not line.strip():
            continue
        try:
            yield to_worker(line)
        except ProtocolViolation as exc:
            logger.warning("ignored a line from the sidecar: %s", exc)
