"""``initialize``, ``shutdown``, ``ping`` (``exit`` and ``$/cancelRequest`` live on the read loop).

These handlers import no pydantic model machinery on purpose: ``initialize`` answers while the domain
layer is still loading (see ``sidecar.app``). Their params/results are described by the models in
:mod:`.lifecycle_models`; a contract test keeps the two in step.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from .context import RequestContext
from .dispatcher import SHUTTING_DOWN, UNINITIALIZED, Dispatcher
from .jsonrpc import NOT_AN_OBJECT, RawMethod, Reply, failure, invalid_params, success


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


def _check_empty(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    if args:
        return [NOT_AN_OBJECT]
    return [_err([key], "extra_forbidden", "Extra inputs are not permitted") for key in kwargs]


class Lifecycle:
    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        server_name: str,
        server_version: str,
        protocol_version: str,
        data_dir: str,
        max_line_bytes: int,
        components: Callable[[], dict[str, dict[str, Any]]],
        on_initialized: Callable[[int | None], None] | None = None,
        grace_s: float = 2.0,
    ) -> None:
        self.dispatcher = dispatcher
        self.server_name = server_name
        self.server_version = server_version
        self.protocol_version = protocol_version
        self.data_dir = data_dir
        self.max_line_bytes = max_line_bytes
        self.components = components
        self.on_initialized = on_initialized
        self.grace_s = grace_s
        self._before_shutdown: list[Callable[[], Awaitable[None]]] = []

    def before_shutdown(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Awaited (bounded) before the shutdown hooks run, e.g. to let the domain layer finish loading."""
        self._before_shutdown.append(fn)

    def raw_methods(self) -> dict[str, RawMethod]:
        return {"initialize": self.initialize, "shutdown": self.shutdown, "ping": self.ping}

    async def initialize(self, ctx: RequestContext, /, *args: Any, **kwargs: Any) -> Reply:
        errors = check_initialize_params(args, kwargs)
        if errors:
            return invalid_params(errors)
        if self.dispatcher.state != UNINITIALIZED:
            return failure(409, "The sidecar is already initialized.", {"code": "ALREADY_INITIALIZED", "details": {}})
        pid = kwargs.get("process_id")
        if self.on_initialized is not None:
            self.on_initialized(pid)
        result = {
            "server_info": {"name": self.server_name, "version": self.server_version},
            "protocol_version": self.protocol_version,
            "data_dir": self.data_dir,
            "pid": os.getpid(),
            "capabilities": {
                "stream_events": True,
                "components": self.components(),
                "limits": {"max_line_bytes": self.max_line_bytes},
            },
        }
        self.dispatcher.mark_initialized()
        return success(result)

    async def shutdown(self, ctx: RequestContext, /, *args: Any, **kwargs: Any) -> Reply:
        errors = _check_empty(args, kwargs)
        if errors:
            return invalid_params(errors)
        d = self.dispatcher
        if d.state == SHUTTING_DOWN:
            return success(None)
        d.state = SHUTTING_DOWN
        d.shutdown_requested = True
        d.cancel_inflight(keep=ctx.request_id)
        with anyio.move_on_after(self.grace_s, shield=True):
            for fn in self._before_shutdown:
                await fn()
        await d.run_shutdown_hooks(self.grace_s)
        return success(None)

    async def ping(self, ctx: RequestContext, /, *args: Any, **kwargs: Any) -> Reply:
        errors = _check_empty(args, kwargs)
        if errors:
            return invalid_params(errors)
        return success({})
