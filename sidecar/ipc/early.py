"""The first request, answered before the event loop exists: what lets ``initialize`` answer at ~1.5× the cost of
``python -c "import anyio"`` (issue 22). Standard library only, on purpose: this runs before anyio, asyncio,
logging, jsonrpcserver or any pydantic model is imported.

The host writes ``initialize`` right after spawning us, so it is usually in the pipe before the interpreter has
started. :func:`answer_first` waits (bounded) for the first line; if it is a plain, valid ``initialize`` request it
is answered here, on the wire, with the same bytes the dispatcher would write, and the domain layer loads after.
Anything else (another method, a batch, bad JSON, invalid params, a line that does not arrive in time) is left to
the dispatcher exactly as it came: the bytes read so far are handed back, and the event loop's reader starts from
them. A termination signal while waiting ends the process like stdin EOF would (nothing has started yet).

It also holds the JSON line codec the dispatcher uses (:func:`encode`, :func:`parse_json`) and the lifecycle's
``initialize`` rules (:func:`check_initialize_params`, :func:`initialize_result`), so both paths share them.
"""

from __future__ import annotations

import io
import json
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple  # records built before the answer: no dataclass machinery to run

from .codes import NOT_AN_OBJECT

FIRST_LINE_WAIT_S = 0.25
"""How long the first line may take to arrive before the event loop starts without it."""
_FIRST_LINE_MAX = 1 << 16
"""An ``initialize`` line is small: a longer first line is left to the dispatcher's splitter."""
_CHUNK = 1 << 16


def claim_stdio() -> tuple[int, int]:
    """Return ``(in_fd, out_fd)`` for the wire; afterwards fd 1 and ``sys.stdout`` write to stderr.

    A private duplicate of fd 1 carries the wire, and fd 1 (with ``sys.stdout``) points at stderr, so a stray
    ``print`` from any library lands in the log, never the protocol.
    """
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


# ---- the JSON line codec ----------------------------------------------------------------------------------------


def encode(obj: Any) -> bytes:
    """One compact JSON line (no newline). Lone surrogates from the input fall back to \\u escapes.

    Raises ValueError for what JSON cannot carry (NaN, Infinity, over-long integers); callers that
    write answers use the dispatcher's ``encode_answer``, which turns that into an internal error instead.
    """
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError("number out of range")
    return value


def parse_json(text: str) -> Any:
    """Strict JSON: no NaN/Infinity literals, no numbers that overflow to infinity."""
    return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)


# ---- initialize ------------------------------------------------------------------------------------------------


def _err(loc: list[Any], type_: str, msg: str) -> dict[str, Any]:
    return {"loc": loc, "type": type_, "msg": msg}


def check_initialize_params(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    """Validate like ``InitializeParams`` (unknown keys ignored); returns the errors (never the input)."""
    if args:
        return [NOT_AN_OBJECT]
    errors: list[dict[str, Any]] = []
    pid = kwargs.get("process_id")
    if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int)):
        errors.append(_err(["process_id"], "int_type", "Input should be a valid integer"))
    info = kwargs.get("client_info")
    if info is not None:
        if not isinstance(info, dict):
            errors.append(_err(["client_info"], "model_type", "Input should be an object"))
        else:
            if not isinstance(info.get("name"), str):
                kind = "missing" if "name" not in info else "string_type"
                errors.append(
                    _err(
                        ["client_info", "name"],
                        kind,
                        "Field required" if kind == "missing" else "Input should be a valid string",
                    )
                )
            version = info.get("version")
            if version is not None and not isinstance(version, str):
                errors.append(_err(["client_info", "version"], "string_type", "Input should be a valid string"))
    proto = kwargs.get("protocol_version")
    if proto is not None and not isinstance(proto, str):
        errors.append(_err(["protocol_version"], "string_type", "Input should be a valid string"))
    caps = kwargs.get("capabilities", {})
    if not isinstance(caps, dict):
        errors.append(_err(["capabilities"], "dict_type", "Input should be a valid dictionary"))
    return errors


class ServerInfo(NamedTuple):
    """What ``initialize`` says about this process (``components`` is computed when it answers)."""

    name: str
    version: str
    protocol_version: str
    data_dir: str
    max_line_bytes: int
    components: Callable[[], dict[str, dict[str, Any]]]


def initialize_result(info: ServerInfo) -> dict[str, Any]:
    return {
        "server_info": {"name": info.name, "version": info.version},
        "protocol_version": info.protocol_version,
        "data_dir": info.data_dir,
        "pid": os.getpid(),
        "capabilities": {
            "stream_events": True,
            "components": info.components(),
            "limits": {"max_line_bytes": info.max_line_bytes},
        },
    }


# ---- the first line ---------------------------------------------------------------------------------------------


class FirstRequest(NamedTuple):
    """What :func:`answer_first` did: ``pending`` is every byte read and not consumed (the reader starts with it);
    ``initialized`` says ``initialize`` was answered, with its ``process_id`` in ``process_id``."""

    pending: bytes = b""
    initialized: bool = False
    process_id: int | None = None


class _Stop(Exception):
    """A termination signal arrived while waiting for the first line."""


def _stop(signum: int, frame: Any) -> None:
    raise _Stop(signum)


def _plain_initialize(line: bytes) -> dict[str, Any] | None:
    """The message if ``line`` is a plain, valid ``initialize`` request the dispatcher would answer with a result."""
    try:
        message = parse_json(line.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.keys() - {"jsonrpc", "method", "params", "id"}:
        return None
    rid = message.get("id")
    if message.get("jsonrpc") != "2.0" or message.get("method") != "initialize":
        return None
    if isinstance(rid, bool) or not isinstance(rid, int | str):  # a notification, null or odd ids: the dispatcher
        return None
    params = message.get("params", {})
    if not isinstance(params, dict) or check_initialize_params((), params):
        return None
    return message


def _read_first_line(fd: int, wait_s: float) -> tuple[bytes, bool]:
    """Bytes read from ``fd`` (blocking mode) until a newline, EOF, ``_FIRST_LINE_MAX`` or ``wait_s``; and
    whether they hold a whole first line."""
    buffer = b""
    deadline = time.monotonic() + wait_s
    while len(buffer) < _FIRST_LINE_MAX:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return buffer, False
        try:
            chunk = os.read(fd, _CHUNK)
        except OSError:
            return buffer, False
        if not chunk:
            return buffer, False
        buffer += chunk
        if b"\n" in buffer:
            return buffer, True
    return buffer, False


def answer_first(
    in_fd: int, out_fd: int, info: ServerInfo, *, wait_s: float = FIRST_LINE_WAIT_S, on_stop: Callable[[int], None]
) -> FirstRequest:
    """Answer the first line here if it is a plain ``initialize`` (see the module's docstring).

    ``on_stop(signum)`` is called (and must not return) when SIGTERM/SIGINT/SIGHUP arrives while waiting.
    """
    if os.name != "posix":  # select() takes sockets only on Windows: the event loop reads from the start
        return FirstRequest()
    caught = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    previous = {s: signal.signal(s, _stop) for s in caught}
    try:
        buffer, whole = _read_first_line(in_fd, wait_s)
    except _Stop as stop:
        on_stop(int(stop.args[0]))
        raise
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if not whole:
        return FirstRequest(pending=buffer)
    line, _, rest = buffer.partition(b"\n")
    message = _plain_initialize(line) if len(line) <= info.max_line_bytes else None
    if message is None:
        return FirstRequest(pending=buffer)
    answer = encode({"jsonrpc": "2.0", "result": initialize_result(info), "id": message["id"]}) + b"\n"
    view = memoryview(answer)
    try:
        while view:
            view = view[os.write(out_fd, view) :]
    except OSError:
        pass  # the host is gone: the loop finds its EOF
    pid = message.get("params", {}).get("process_id")
    return FirstRequest(pending=rest, initialized=True, process_id=pid)


def exit_quietly(signum: int) -> None:
    """``on_stop`` for :func:`answer_first`: nothing runs yet, so leaving is all that stdin EOF would do."""
    sys.stderr.write(f"received {signal.Signals(signum).name} before the first request; exiting\n")
    sys.stderr.flush()
    os._exit(0)
