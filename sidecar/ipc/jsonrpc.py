"""Our seam over jsonrpcserver: one parsed JSON-RPC message in, one response object (or None) out.

jsonrpcserver does the JSON-RPC 2.0 message handling (request validation, method lookup, argument
binding, notifications, response objects). Around it we: split batches before dispatch (it rejects
a whole batch for one bad element), and normalise protocol errors into the wire's error shape
``{"code", "message", "data": {"code": <NAME>, "details"}}`` (ARCHITECTURE.md §4).

jsonrpcserver (with its jsonschema import, most of the process's start-up cost) is imported on first
use, not with this module: methods answer a :class:`Reply` of ours, :func:`for_jsonrpcserver` adapts
them, and the lifecycle methods are answered by :func:`answer_direct` without it, so ``initialize``
can answer before it is loaded (:func:`load` imports it off the loop right after).
"""

from __future__ import annotations

import functools
import importlib
import logging
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import codes
from .codes import NOT_AN_OBJECT as NOT_AN_OBJECT  # re-exported: what a method answers for positional params

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Reply:
    """What a method answers: a ``result``, or an ``error`` object ``{"code", "message", "data"}``."""

    result: Any = None
    error: dict[str, Any] | None = None


RawMethod = Callable[..., Awaitable[Reply]]

_PLAIN_KEYS = frozenset({"jsonrpc", "method", "params", "id"})


def load() -> Any:
    """Import jsonrpcserver (blocking: call it from a worker thread, or accept the wait); returns the package."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # importlib.resources.read_text in 5.0.9
        importlib.import_module("jsonrpcserver.async_main")
        return importlib.import_module("jsonrpcserver")


def for_jsonrpcserver(fn: RawMethod) -> Callable[..., Awaitable[Any]]:
    """``fn`` in jsonrpcserver's convention (its Result). The signature stays ``fn``'s, so jsonrpcserver's
    argument binding (-32602 for arguments ``fn`` cannot take) sees the real one."""

    @functools.wraps(fn)
    async def adapted(*args: Any, **kwargs: Any) -> Any:
        reply = await fn(*args, **kwargs)
        server = load()  # imported by now: this runs inside jsonrpcserver's dispatch
        if reply.error is None:
            return server.Success(reply.result)
        return server.Error(reply.error["code"], reply.error["message"], reply.error["data"])

    return adapted


def is_plain_request(message: dict[str, Any]) -> bool:
    """A request jsonrpcserver would accept as it is (its request schema): then :func:`answer_direct` may answer
    it. The id was checked by the caller (a string, a number or null)."""
    return (
        message.keys() <= _PLAIN_KEYS
        and message.get("jsonrpc") == "2.0"
        and isinstance(message.get("method"), str)
        and isinstance(message.get("params", {}), dict | list)
    )


async def answer_direct(message: dict[str, Any], fn: RawMethod, context: Any) -> dict[str, Any] | None:
    """Answer a plain request (:func:`is_plain_request`) for ``fn`` as jsonrpcserver would, without it.

    Only for methods that take any arguments (``(ctx, /, *args, **kwargs)``): there is no binding to check.
    """
    params = message.get("params", {})
    try:
        reply = await (fn(context, *params) if isinstance(params, list) else fn(context, **params))
    except Exception:  # what jsonrpcserver does with an exception in a method (its text is never forwarded)
        logger.exception("unhandled error in %s", message["method"])
        reply = failure(codes.INTERNAL_ERROR, "Internal error", {"code": "INTERNAL_ERROR", "details": {}})
    if "id" not in message:
        return None
    if reply.error is None:
        return result_response(message["id"], reply.result)
    return normalise_error({"jsonrpc": "2.0", "error": dict(reply.error), "id": message["id"]})


_STANDARD_MESSAGES = {
    codes.PARSE_ERROR: ("Parse error", "PARSE_ERROR"),
    codes.INVALID_REQUEST: ("Invalid Request", "INVALID_REQUEST"),
    codes.METHOD_NOT_FOUND: ("Method not found", "METHOD_NOT_FOUND"),
    codes.INVALID_PARAMS: ("Invalid params", "VALIDATION_ERROR"),
    codes.INTERNAL_ERROR: ("Internal error", "INTERNAL_ERROR"),
}


def _identity(obj: Any) -> Any:
    return obj


async def dispatch_one(message: Any, methods: Mapping[str, RawMethod], context: Any) -> dict[str, Any] | None:
    """Dispatch one already-parsed, non-batch message through jsonrpcserver (``methods`` adapted by
    :func:`for_jsonrpcserver`). Returns the response object, or None."""
    response = await load().async_main.dispatch_to_serializable(
        message, methods=methods, context=context, deserializer=_identity
    )
    if response is None:
        return None
    if isinstance(response, list):  # cannot happen for a non-list message; keep the contract total
        raise TypeError("unexpected batch response")
    return normalise_error(response)


def normalise_error(response: dict[str, Any]) -> dict[str, Any]:
    """Give jsonrpcserver's protocol errors the wire's ``data`` shape; leave ours untouched."""
    error = response.get("error")
    if not isinstance(error, dict):
        return response
    code = error.get("code")
    data = error.get("data")
    if isinstance(data, dict) and "code" in data and "details" in data:
        return response
    if code in _STANDARD_MESSAGES:
        message, name = _STANDARD_MESSAGES[code]
        details: dict[str, Any] = {}
        if code == codes.METHOD_NOT_FOUND and isinstance(data, str):
            details["method"] = data
        elif code == codes.INVALID_PARAMS and isinstance(data, str):
            details["errors"] = [{"loc": [], "type": "arguments", "msg": data}]
        # Internal errors from inside jsonrpcserver carry exception text: never forward it.
        error["message"] = message
        error["data"] = {"code": name, "details": details}
    return response


def error_response(
    code: int, message: str, name: str, details: dict[str, Any] | None = None, id: Any = None
) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "error": {"code": code, "message": message, "data": {"code": name, "details": details or {}}},
        "id": id,
    }


def result_response(id: Any, result: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "result": result, "id": id}


def invalid_params(errors: list[dict[str, Any]]) -> Reply:
    """-32602 VALIDATION_ERROR with field paths only (never the offending input)."""
    return failure(codes.INVALID_PARAMS, "Invalid params", {"code": "VALIDATION_ERROR", "details": {"errors": errors}})


def success(value: Any) -> Reply:
    return Reply(result=value)


def failure(code: int, message: str, data: Any) -> Reply:
    return Reply(error={"code": code, "message": message, "data": data})
