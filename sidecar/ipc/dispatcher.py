"""The receive loop: one task per request, each in its own cancel scope; one writer owns the wire.

Control never waits behind work: ``exit`` and ``$/cancelRequest`` are handled on the read loop
itself, ``ping`` and ``shutdown`` are tiny tasks, and every other request runs in its own task.
``initialize`` runs inline (the loop waits for it), as in LSP, so nothing overtakes it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import orjson
from anyio.abc import ObjectReceiveStream, TaskGroup

from ..core.errors import SidecarError
from . import codes
from .context import RequestContext, RequestId
from .early import encode, parse_json
from .jsonrpc import (
    NOT_AN_OBJECT,
    RawMethod,
    answer_direct,
    dispatch_one,
    error_response,
    failure,
    for_jsonrpcserver,
    invalid_params,
    is_plain_request,
    result_response,
    success,
)
from .router import Method, Router
from .stdio import Incoming, LineWriter, OversizedLine

if TYPE_CHECKING:
    from pydantic_core import ValidationError

logger = logging.getLogger(__name__)

UNINITIALIZED, READY, SHUTTING_DOWN = "uninitialized", "ready", "shutting_down"
_PRE_INIT_ALLOWED = frozenset({"initialize", "ping", "exit"})
_AFTER_SHUTDOWN_ALLOWED = frozenset({"ping", "exit", "shutdown", "$/cancelRequest"})
_LATE_START_GRACE_S = 0.1
MAX_BATCH = 10_000
_BATCH_CHUNK = 64
_CONTROL = frozenset({"ping", "shutdown"})
_NOTIFICATION = object()

ShutdownHook = Callable[[], Awaitable[None]]


_ORJSON_NODES = 20_000  # past this many values the check would cost what orjson saves: the json module encodes
_INT64 = (-(1 << 63), (1 << 64) - 1)  # what orjson encodes as integers


SLICE_CHARS = 1 << 17
"""A string longer than this is encoded in slices of this many characters, the loop let in between (issue 22:
orjson took ~25 ms for a 10 MB answer on the loop, and a ping waited; a slice takes well under a millisecond)."""


def _orjson_plan(obj: Any) -> int | None:
    """None unless orjson writes ``obj`` byte for byte as :func:`.early.encode` does (only objects with string
    keys, lists, strings, bools, None and integers orjson takes; no floats: orjson writes 1e16 where repr()
    writes 1e+16; nothing else: orjson writes dataclasses and datetimes that the json module refuses); else the
    length of its longest string."""
    stack = [obj]
    budget = _ORJSON_NODES
    low, high = _INT64
    longest = 0
    while stack:
        budget -= 1
        if budget < 0:
            return None
        node = stack.pop()
        kind = type(node)
        if kind is dict:
            for key in node:
                if type(key) is not str:
                    return None
            stack.extend(node.values())
        elif kind is list:
            stack.extend(node)
        elif kind is int:
            if not low <= node <= high:
                return None
        elif isinstance(node, str):
            longest = max(longest, len(node))
        elif not (node is None or kind is bool):
            return None
    return longest


def _orjson_writes_it_alike(obj: Any) -> bool:
    return _orjson_plan(obj) is not None


def _pieces(obj: Any) -> Iterator[bytes]:
    """orjson's bytes for ``obj`` (one :func:`_orjson_plan` accepts), in pieces: a long string in slices of
    :data:`SLICE_CHARS` characters (JSON escapes each character alone, so the slices' escapes are the whole's)."""
    kind = type(obj)
    if kind is dict:
        yield b"{"
        for i, (key, value) in enumerate(obj.items()):
            yield (b"," if i else b"") + orjson.dumps(key) + b":"
            yield from _pieces(value)
        yield b"}"
    elif kind is list:
        yield b"["
        for i, value in enumerate(obj):
            if i:
                yield b","
            yield from _pieces(value)
        yield b"]"
    elif kind is str and len(obj) > SLICE_CHARS:
        yield b'"'
        for start in range(0, len(obj), SLICE_CHARS):
            yield orjson.dumps(obj[start : start + SLICE_CHARS])[1:-1]
        yield b'"'
    else:
        yield orjson.dumps(obj)


WORK_PER_TURN = 500_000
"""How much encoding work (in :func:`_cost` units, ~1 ns each) runs before the loop is let in: ~0.5 ms."""
_JSON_NS_PER_BYTE = 40  # the json module writing floats (~0.7 µs for ~18 bytes); strings cost less: an overestimate
_SMALL_NODES = 1_000  # an answer the json module writes whole in about a millisecond at most
_WHOLE_CHARS = 4 * SLICE_CHARS  # the string characters orjson writes whole within a turn
_CHUNK = 256  # the elements of a list written by one json module call (~0.2 ms of floats)
_SCALARS = frozenset({int, float, bool, type(None)})


def _shape(obj: Any) -> tuple[bool, int, int]:
    """(whether orjson writes ``obj`` as the json module does, its node count — capped past
    :data:`_ORJSON_NODES` —, the characters of its strings): one walk, which decides how the answer is encoded."""
    stack = [obj]
    nodes = chars = 0
    alike = True
    low, high = _INT64
    while stack:
        nodes += 1
        if nodes > _ORJSON_NODES:
            return False, nodes, chars
        node = stack.pop()
        kind = type(node)
        if kind is dict:
            for key in node:
                if type(key) is not str:
                    alike = False
            stack.extend(node.values())
        elif kind is list:
            stack.extend(node)
        elif kind is int:
            alike = alike and low <= node <= high
        elif isinstance(node, str):
            chars += len(node)
        elif not (node is None or kind is bool):
            alike = False
    return alike, nodes, chars


def _dump(obj: Any) -> bytes:
    """The json module's bytes for ``obj`` (:func:`.early.encode`'s), raising where it would fall back (a lone
    surrogate: the whole answer is then written ASCII-escaped) or fail."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _json_pieces(obj: Any) -> Iterator[tuple[bytes, int]]:
    """The json module's bytes for any answer (floats, many nodes, batches), in pieces with their :func:`_cost`:
    a list a chunk of :data:`_CHUNK` scalars at a time, a long string in slices, containers walked."""
    kind = type(obj)
    if kind is dict and all(type(k) is str for k in obj):
        yield b"{", 0
        for i, (key, value) in enumerate(obj.items()):
            piece = (b"," if i else b"") + _dump(key) + b":"
            yield piece, len(piece) * _JSON_NS_PER_BYTE
            yield from _json_pieces(value)
        yield b"}", 0
    elif kind is list:
        yield b"[", 0
        for start in range(0, len(obj), _CHUNK):
            chunk = obj[start : start + _CHUNK]
            comma = b"," if start else b""
            if set(map(type, chunk)) <= _SCALARS:
                piece = comma + _dump(chunk)[1:-1]
                yield piece, len(piece) * _JSON_NS_PER_BYTE
                continue
            for i, value in enumerate(chunk):
                if i or start:
                    yield b",", 0
                yield from _json_pieces(value)
        yield b"]", 0
    elif kind is str and len(obj) > SLICE_CHARS:
        yield b'"', 0
        for start in range(0, len(obj), SLICE_CHARS):
            piece = _dump(obj[start : start + SLICE_CHARS])[1:-1]
            yield piece, len(piece) * 2
        yield b'"', 0
    else:
        piece = _dump(obj)
        yield piece, len(piece) * _JSON_NS_PER_BYTE


async def encode_answer_async(obj: Any) -> bytes:
    """:func:`encode_answer`'s bytes, with the loop let in every :data:`WORK_PER_TURN` of encoding work (a ping is
    answered meanwhile), whatever the answer holds: long strings (plain ASCII or base64 too), floats, more nodes
    than orjson's check walks, batches. A small answer is written in one go."""
    alike, nodes, chars = _shape(obj)
    if chars <= _WHOLE_CHARS and (nodes <= _SMALL_NODES or (alike and nodes <= _ORJSON_NODES)):
        return _encode_answer(obj, alike)
    pieces: list[bytes] = []
    work = 0
    try:
        source = ((p, len(p)) for p in _pieces(obj)) if alike else _json_pieces(obj)
        for piece, cost in source:
            pieces.append(piece)
            work += cost
            if work >= WORK_PER_TURN:
                work = 0
                await anyio.lowlevel.checkpoint()
    except (orjson.JSONEncodeError, RecursionError, ValueError, TypeError):  # a lone surrogate, NaN, an object
        return _encode_answer(obj, False)  # JSON cannot carry, nesting too deep: the json module's whole answer
    return b"".join(pieces)


def encode_answer(obj: Any) -> bytes:
    """Encode a response (or a batch of them); a part that JSON cannot carry becomes -32603.

    Through orjson when it writes the same bytes (issue 22: a 10 MB tool result took 33 ms of the json module's
    encoder on the loop, 10 ms of orjson's); a lone surrogate, which orjson refuses, takes the json module's path.
    """
    return _encode_answer(obj, _orjson_writes_it_alike(obj))


def _encode_answer(obj: Any, orjson_alike: bool) -> bytes:
    """:func:`encode_answer` once the walk has said whether orjson writes ``obj`` alike (walked once per answer)."""
    if orjson_alike:
        try:
            return orjson.dumps(obj)
        except orjson.JSONEncodeError:
            pass
    try:
        return encode(obj)
    except (ValueError, TypeError, RecursionError):
        if isinstance(obj, list):
            return b"[" + b",".join(encode_answer(part) for part in obj) + b"]"
        logger.exception("a response could not be encoded as JSON")
        rid = obj.get("id") if isinstance(obj, dict) and _valid_id(obj) else None
        return encode(error_response(codes.INTERNAL_ERROR, "Internal error", "INTERNAL_ERROR", id=rid))


_UNREAD = object()


def _read_fast(line: bytes) -> Any:
    """orjson's reading of a line where it is :func:`.early.parse_json`'s (issue 22: a 10 MB request line held the
    loop for the json module's decode and parse, twice orjson's time); ``_UNREAD`` for the json module to read:
    whatever orjson refuses (invalid UTF-8 or JSON, NaN, numbers out of range, lone surrogates, a BOM, deep
    nesting: the json module then gives its own answer) and any line holding a float (orjson reads integers past
    64 bits as floats). Duplicate keys: the last wins in both."""
    try:
        message = orjson.loads(line)
    except orjson.JSONDecodeError:
        return _UNREAD
    stack = [message]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is dict:
            stack.extend(node.values())
        elif kind is list:
            stack.extend(node)
        elif kind is float:
            return _UNREAD
    return message


OFF_LOOP_PARSE_BYTES = 256 * 1024
"""A line the json module must read (see :func:`_read_line`) longer than this is read on a worker thread."""


_BEYOND_INT64 = float(1 << 63)


def _read_line(line: bytes) -> Any:
    """:func:`_read_fast`, floats included (issue 33: 300,000 floats held the loop ~380 ms in the json module):
    orjson reads every number as the json module does — floats correctly rounded, the same ``-0.0``, overflow
    refused — except an integer past 64 bits, which it reads as a float: an integral float of magnitude 2**63 or
    more. A message holding none is orjson's; one that may (``1e19`` written as a float too) is the json
    module's. The walk looks at each list's element types and float range in C (``set(map(type))``, ``max``)."""
    try:
        message = orjson.loads(line)
    except orjson.JSONDecodeError:
        return _UNREAD
    stack: list[Any] = [[message]]
    while stack:
        node = stack.pop()
        values = list(node.values()) if type(node) is dict else node
        types = set(map(type, values))
        if float in types and _maybe_big_integer(values, types):
            return _UNREAD
        if dict in types or list in types:
            stack.extend(v for v in values if type(v) is dict or type(v) is list)
    return message


def _maybe_big_integer(values: list[Any], types: set[type]) -> bool:
    floats = values if types == {float} else [v for v in values if type(v) is float]
    if max(floats) < _BEYOND_INT64 and min(floats) > -_BEYOND_INT64:
        return False
    return any(abs(v) >= _BEYOND_INT64 and v.is_integer() for v in floats)


def _parse_text(line: bytes) -> Any:
    """The json module's reading of ``line``: the message, or the exception to answer a parse error with."""
    try:
        return parse_json(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return exc


def _valid_id(message: dict[str, Any]) -> bool:
    return "id" not in message or message["id"] is None or _id_key(message["id"]) is not None


def _id_key(value: Any) -> tuple[str, Any] | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    return None


def validation_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """Field paths and error types only: the offending input (maybe a secret) is never echoed."""
    return [{"loc": list(e["loc"]), "type": e["type"], "msg": e["msg"]} for e in exc.errors()]


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(value: Any, path: tuple[Any, ...] = ()) -> list[Any] | None:
    """Where a string (or key) of ``value`` holds a lone surrogate (``"\\ud800"`` is valid JSON, but no text: it
    reached SQLite and file names as UnicodeEncodeError → INTERNAL_ERROR, found by the schema fuzz, issue 21)."""
    stack = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return list(where)
        elif isinstance(node, dict):
            for key, item in node.items():
                if isinstance(key, str) and _SURROGATE.search(key):
                    return [*where, key]
                stack.append((item, (*where, key)))
        elif isinstance(node, list):
            stack.extend((item, (*where, i)) for i, item in enumerate(node))
    return None


def wrap_method(method: Method[Any, Any]) -> RawMethod:
    """Adapt a typed :class:`Method` to jsonrpcserver's calling convention (context first)."""
    # the same class as pydantic's, without pydantic's import cost; imported here, not with this module,
    # so that `initialize` answers before any of it is loaded
    from pydantic_core import ValidationError

    async def entry(ctx: RequestContext, /, *args: Any, **kwargs: Any) -> Any:
        if args:
            return invalid_params([NOT_AN_OBJECT])
        if not method.dev and (where := _lone_surrogate(kwargs)) is not None:
            return invalid_params([{"loc": where, "type": "string_unicode", "msg": "a string holds a lone surrogate"}])
        try:
            params = method.params.model_validate(kwargs)
            return success(method.dump_result(await method.handler(ctx, params)))
        except SidecarError as exc:
            return failure(exc.status, exc.message, exc.to_data())
        except ValidationError as exc:  # the params, or a service validating its own inputs deeper down
            return invalid_params(validation_errors(exc))
        except Exception:
            logger.exception("unhandled error in %s", method.name)
            return failure(codes.INTERNAL_ERROR, "Internal error", {"code": "INTERNAL_ERROR", "details": {}})

    entry.__name__ = method.name
    return entry


class Dispatcher:
    def __init__(self, router: Router, writer: LineWriter) -> None:
        self.router = router
        self.writer = writer
        self.state = UNINITIALIZED
        self.exit_code: int | None = None
        self.shutdown_requested = False
        self._methods: dict[str, RawMethod] = {}
        self._adapted: dict[str, Callable[..., Awaitable[Any]]] = {}  # _methods for jsonrpcserver
        self._direct: dict[str, RawMethod] = {}  # answered without jsonrpcserver (see add_raw_methods)
        # typed methods check their own arguments (wrap_method): a plain request for them skips jsonrpcserver, whose
        # request schema check walked every value of the params (issue 22: ~1/4 of a 10 MB request's time)
        self.add_raw_methods({m.name: wrap_method(m) for m in router}, direct=True)
        self._inflight: dict[tuple[str, Any], tuple[anyio.CancelScope, str]] = {}
        self._active = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._exiting = False
        self._exit_notified = False
        self._shutdown_hooks: list[ShutdownHook] = []
        self._read_scope = anyio.CancelScope()
        # The domain layer loads after `initialize` answers; requests for methods not yet
        # registered wait for it (or get its boot error).
        self.ready = anyio.Event()
        self.boot_error: SidecarError | None = None

    def add_methods(self, methods: list[Method[Any, Any]]) -> None:
        """Register methods built after the dispatcher (the domain layer loads after `initialize`)."""
        self.router.add(*methods)
        self.add_raw_methods({m.name: wrap_method(m) for m in methods}, direct=True)

    def add_raw_methods(self, methods: Mapping[str, RawMethod], *, direct: bool = False) -> None:
        """Register handlers in jsonrpcserver's convention (context first); names must be new.

        ``direct``: the handlers take any arguments (``(ctx, /, *args, **kwargs)``) and check them
        themselves, so a plain request for them is answered without jsonrpcserver (the lifecycle
        methods: ``initialize`` before it is loaded, ``ping`` without its per-request overhead; every typed
        :class:`Method`, through :func:`wrap_method`).
        """
        for name, fn in methods.items():
            if name in self._methods:
                raise ValueError(f"method {name!r} registered twice")
            self._methods[name] = fn
            self._adapted[name] = for_jsonrpcserver(fn)
            if direct:
                self._direct[name] = fn

    def mark_ready(self, error: SidecarError | None = None) -> None:
        """The domain layer is loaded (or failed to load: its requests then answer ``error``)."""
        self.boot_error = error
        self.ready.set()

    # -- outbox (what handlers see through RequestContext) ------------------------------------
    async def send_notification(self, method: str, params: Any) -> None:
        try:
            line = encode({"jsonrpc": "2.0", "method": method, "params": params})
        except (ValueError, TypeError, RecursionError):
            logger.exception("notification %s could not be encoded as JSON; dropped", method)
            return
        await self.writer.send(line)

    async def send_line(self, line: bytes) -> None:
        await self.writer.send(line)

    # -- lifecycle hooks -----------------------------------------------------------------------
    def on_shutdown(self, hook: ShutdownHook) -> None:
        """Register teardown work (cancel jobs, stop children...). Hooks run newest first."""
        self._shutdown_hooks.append(hook)

    def mark_initialized(self) -> None:
        self.state = READY

    def request_exit(self, code: int | None = None) -> None:
        """Stop reading and leave (``code`` None: decide from whether ``shutdown`` came first)."""
        if code is not None and self.exit_code is None and not self._exiting:
            self.exit_code = code
        self._exiting = True
        self._read_scope.cancel()

    def cancel_inflight(
        self, keep: RequestId | object = _NOTIFICATION, keep_control: bool = False, after_s: float = 0.0
    ) -> int:
        """Cancel in-flight requests (now, or after ``after_s`` so quick ones still finish)."""
        keep_key = _id_key(keep)
        n = 0
        deadline = anyio.current_time() + after_s
        for key, (scope, method) in list(self._inflight.items()):
            if key == keep_key or (keep_control and method in _CONTROL):
                continue
            if after_s > 0:
                scope.deadline = min(scope.deadline, deadline)
            else:
                scope.cancel()
            n += 1
        return n

    async def run_shutdown_hooks(self, grace_s: float) -> None:
        """Run each hook once, newest first, each bounded by ``grace_s`` on its own (a slow one
        cannot use up the time of those after it, e.g. stopping child processes)."""
        hooks, self._shutdown_hooks = list(reversed(self._shutdown_hooks)), []
        for hook in hooks:
            with anyio.move_on_after(grace_s, shield=True):
                try:
                    await hook()
                except Exception:
                    logger.exception("shutdown hook failed")

    # -- the loop ------------------------------------------------------------------------------
    async def serve(self, incoming: ObjectReceiveStream[Incoming], grace_s: float = 2.0) -> int:
        """Serve until ``exit``, EOF, or :meth:`request_exit`; returns the process exit code.

        On the way out every request already read is still answered (cancelled ones with -32800),
        the shutdown hooks run, and every wait is bounded by ``grace_s``.
        """
        async with anyio.create_task_group() as tg:
            with self._read_scope:
                async with incoming:
                    async for item in incoming:
                        await self._on_item(item, tg)
                        if self._exiting:
                            break
            self._exiting = True
            with anyio.CancelScope(shield=True):
                self.cancel_inflight(keep_control=True, after_s=_LATE_START_GRACE_S)
                with anyio.move_on_after(grace_s):
                    await self._idle.wait()
                await self.run_shutdown_hooks(grace_s)
            tg.cancel_scope.cancel()
        if self.exit_code is None:
            # `exit` answers 0 only after `shutdown` (LSP); EOF or a dead parent also end cleanly.
            self.exit_code = 0 if (self.shutdown_requested or not self._exit_notified) else 1
        return self.exit_code

    async def _on_item(self, item: Incoming, tg: TaskGroup) -> None:
        if isinstance(item, OversizedLine):
            await self._reply_invalid(
                "Invalid Request: line exceeds the size limit", "REQUEST_TOO_LARGE", size_bytes=item.size
            )
            return
        if not item.strip():
            return  # blank lines between messages are tolerated
        message = _read_line(item)
        if message is _UNREAD:
            if len(item) > OFF_LOOP_PARSE_BYTES:  # the json module calls back into Python per float: it lets go
                message = await anyio.to_thread.run_sync(_parse_text, item)  # of the GIL, the loop answers pings
            else:
                message = _parse_text(item)
            if isinstance(message, UnicodeDecodeError):
                await self._reply_parse_error(f"invalid UTF-8 at byte {message.start}")
                return
            if isinstance(message, RecursionError):
                await self._reply_parse_error("JSON nested too deeply")
                return
            if isinstance(message, ValueError):
                exc = message
                where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
                await self._reply_parse_error(f"invalid JSON{where}" if where else f"invalid JSON: {exc}")
                return
        if isinstance(message, list):
            if not message:
                await self._reply_invalid("Invalid Request", "INVALID_REQUEST", reason="empty batch")
                return
            if len(message) > MAX_BATCH:
                await self._reply_invalid(
                    "Invalid Request: batch too large", "BATCH_TOO_LARGE", size=len(message), limit=MAX_BATCH
                )
                return
            self._start(tg, self._run_batch, message)
            return
        if isinstance(message, dict):
            if message.get("method") == "ping" and await self._ping_inline(message):
                return
            if self._is_control(message):
                answer = self._control(message)
                if answer is not None:
                    await self.writer.send(encode(answer))
                return
            if message.get("method") == "initialize":
                await self._run_single(message)  # inline: nothing overtakes initialize
                return
        self._start(tg, self._run_single, message)

    async def _ping_inline(self, message: dict[str, Any]) -> bool:
        """Answer a plain ``ping`` on the read loop, as its own task would (issue 22: no task to start, no loop turn
        to wait); False for any other ping (params, no id, an id in flight...), which takes the normal path."""
        key = _id_key(message.get("id"))
        if key is None or key in self._inflight or message.get("params", {}) != {} or not is_plain_request(message):
            return False
        await self.writer.send(encode(result_response(message["id"], {})), priority=True)
        return True

    async def _reply_parse_error(self, reason: str) -> None:
        await self.writer.send(
            encode(error_response(codes.PARSE_ERROR, "Parse error", "PARSE_ERROR", {"reason": reason}))
        )

    async def _reply_invalid(self, message: str, name: str, **details: Any) -> None:
        await self.writer.send(encode(error_response(codes.INVALID_REQUEST, message, name, details)))

    def _is_control(self, message: dict[str, Any]) -> bool:
        """``exit`` and ``$/cancelRequest`` act on the read loop (a cancel sent with an id before
        ``initialize`` is a request like any other and answers -32002). Only a valid envelope does: one that is
        not (params neither object nor array, no ``"jsonrpc": "2.0"``, an unknown key) is an Invalid Request,
        answered with id null like any other method's, and never ends the process."""
        method = message.get("method")
        if method not in ("exit", "$/cancelRequest") or not (is_plain_request(message) and _valid_id(message)):
            return False
        return method == "exit" or not ("id" in message and self.state == UNINITIALIZED)

    def _control(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Act on ``exit`` / ``$/cancelRequest`` at once; sent with an id they are answered ``null``."""
        if message.get("method") == "exit":
            self._exit_notified = True
            self.request_exit()
        else:
            self._cancel_target(message)
        return result_response(message["id"]) if "id" in message and _valid_id(message) else None

    def _start(self, tg: TaskGroup, fn: Callable[[Any], Awaitable[None]], message: Any) -> None:
        self._active += 1
        self._idle = anyio.Event() if self._idle.is_set() else self._idle
        tg.start_soon(self._tracked, fn, message)

    async def _tracked(self, fn: Callable[[Any], Awaitable[None]], message: Any) -> None:
        try:
            await fn(message)
        finally:
            self._active -= 1
            if self._active == 0:
                self._idle.set()

    def _cancel_target(self, message: dict[str, Any]) -> None:
        """``$/cancelRequest {id}``: cancel that in-flight request; an unknown or finished id is ignored."""
        params = message.get("params")
        key = _id_key(params.get("id") if isinstance(params, dict) else None)
        entry = self._inflight.get(key) if key is not None else None
        if entry is not None:
            entry[0].cancel()

    async def _run_single(self, message: Any) -> None:
        response, ctx = await self.handle_message(message)
        if response is not None:
            # A ping answer owes no order to any other line: let it overtake queued stream lines.
            line = await encode_answer_async(response)
            await self.writer.send(line, priority=ctx is not None and ctx.method == "ping")
        if ctx is not None:
            await ctx.run_after_response()

    async def _run_batch(self, batch: list[Any]) -> None:
        results: list[tuple[dict[str, Any] | None, RequestContext | None]] = [(None, None)] * len(batch)

        async def one(i: int, element: Any) -> None:
            results[i] = await self.handle_message(element, in_batch=True)

        async with anyio.create_task_group() as tg:
            for i, element in enumerate(batch):
                tg.start_soon(one, i, element)
                if i % _BATCH_CHUNK == _BATCH_CHUNK - 1:
                    # let the read loop (ping, cancel, exit) in between chunks of a big batch
                    await anyio.lowlevel.checkpoint()
        answers = [r for r, _ in results if r is not None]
        if answers:
            await self.writer.send(await encode_answer_async(answers))
        for _, ctx in results:
            if ctx is not None:
                await ctx.run_after_response()

    async def handle_message(
        self, message: Any, in_batch: bool = False
    ) -> tuple[dict[str, Any] | None, RequestContext | None]:
        """Answer one non-batch message (also used directly by in-memory tests)."""
        if not isinstance(message, dict):
            return error_response(codes.INVALID_REQUEST, "Invalid Request", "INVALID_REQUEST"), None
        if not _valid_id(message):  # an id must be a string, a number or null
            return error_response(
                codes.INVALID_REQUEST, "Invalid Request", "INVALID_REQUEST", {"reason": "invalid id"}
            ), None
        is_notification = "id" not in message
        method = message.get("method")
        request_id = message.get("id")
        if in_batch and self._is_control(message):
            return self._control(message), None
        if isinstance(method, str) and message.get("jsonrpc") == "2.0":
            if self.state == UNINITIALIZED and method not in _PRE_INIT_ALLOWED:
                if is_notification:
                    return None, None
                return error_response(
                    codes.NOT_INITIALIZED, "Server not initialized", "NOT_INITIALIZED", id=request_id
                ), None
            if self.state == SHUTTING_DOWN and method not in _AFTER_SHUTDOWN_ALLOWED:
                if is_notification:
                    return None, None
                return error_response(
                    codes.INVALID_REQUEST, "Server is shutting down", "SHUTTING_DOWN", id=request_id
                ), None
        ctx = RequestContext(request_id=request_id, method=str(method), outbox=self)
        key = None if is_notification else _id_key(request_id)
        if key is not None and key in self._inflight:
            return error_response(
                codes.INVALID_REQUEST, "Invalid Request: id already in flight", "DUPLICATE_REQUEST_ID", id=request_id
            ), None
        response: dict[str, Any] | None = None
        with anyio.CancelScope() as scope:
            if key is not None:
                self._inflight[key] = (scope, ctx.method)
            if self._exiting and ctx.method not in _CONTROL:
                # Read before the exit but started after it: a quick request still gets its real
                # answer, a long one is cut short and answers -32800.
                scope.deadline = anyio.current_time() + _LATE_START_GRACE_S
            try:
                if (
                    self.state != UNINITIALIZED
                    and message.get("jsonrpc") == "2.0"
                    and isinstance(method, str)
                    and method not in self._methods
                    and not self.ready.is_set()
                ):
                    await self.ready.wait()  # inside the scope: a cancel or exit still reaches it
                err = self.boot_error
                if err is not None and isinstance(method, str) and method not in self._methods:
                    response = (
                        None
                        if is_notification
                        else error_response(err.status, err.message, err.code, err.details, id=request_id)
                    )
                elif isinstance(method, str) and method in self._direct and is_plain_request(message):
                    response = await answer_direct(message, self._direct[method], ctx)
                else:
                    response = await dispatch_one(message, self._adapted, ctx)
            finally:
                if key is not None:
                    self._inflight.pop(key, None)
        if scope.cancelled_caught:
            if is_notification:
                return None, None
            return error_response(
                codes.REQUEST_CANCELLED, "Request cancelled", "REQUEST_CANCELLED", id=request_id
            ), None
        return response, ctx
