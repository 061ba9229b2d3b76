"""Our seam over jsonrpcserver: one parsed JSON-RPC message in, one response object (or None) out.

jsonrpcserver does the JSON-RPC 2.0 message handling (request validation, method lookup, argument
binding, notifications, response objects). Around it we: split batches before dispatch (it rejects
a whole batch for one bad element), and normalise protocol errors into the wire's error shape
``{"code", "message", "data": {"code": <NAME>, "details"}}`` (ARCHITECTURE.md §4).
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from . import codes

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # importlib.resources.read_text in 5.0.9
    from jsonrpcserver import Error, Result, Success
    from jsonrpcserver.async_main import dispatch_to_serializable

RawMethod = Callable[..., Awaitable[Any]]

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
    """Dispatch one already-parsed, non-batch message. Returns the response object, or None."""
    response = await dispatch_to_serializable(message, methods=methods, context=context, deserializer=_identity)
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


NOT_AN_OBJECT = {"loc": [], "type": "object_type", "msg": "params must be a JSON object"}
"""The validation error of a method given positional params (every method takes an object)."""


def invalid_params(errors: list[dict[str, Any]]) -> Result:
    """-32602 VALIDATION_ERROR with field paths only (never the offending input)."""
    return Error(codes.INVALID_PARAMS, "Invalid params", {"code": "VALIDATION_ERROR", "details": {"errors": errors}})


def success(value: Any) -> Result:
    return Success(value)


def failure(code: int, message: str, data: Any) -> Result:
    return Error(code, message, data)
