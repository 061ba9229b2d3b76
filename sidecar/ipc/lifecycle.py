"""``initialize``, ``shutdown``, ``ping`` (``exit`` and ``$/cancelRequest`` live on the read loop).

These handlers import no pydantic model machinery on purpose: ``initialize`` answers while the domain
layer is still loading (see ``sidecar.app``). Their params/results are described by the models in
:mod:`.lifecycle_models`; a contract test keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from .context import RequestContext
from .dispatcher import SHUTTING_DOWN, UNINITIALIZED, Dispatcher
from .early import ServerInfo, check_initialize_params, initialize_result
from .jsonrpc import NOT_AN_OBJECT, RawMethod, Reply, failure, invalid_params, success


def _check_empty(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    if args:
        return [NOT_AN_OBJECT]
    return [{"loc": [key], "type": "extra_forbidden", "msg": "Extra inputs are not permitted"} for key in kwargs]


class Lifecycle:
    def __init__(
        self,
        dispatcher: Dispatcher,
        info: ServerInfo,
        *,
        on_initialized: Callable[[int | None], None] | None = None,
        grace_s: float = 2.0,
    ) -> None:
        self.dispatcher = dispatcher
        self.info = info
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
        result = initialize_result(self.info)  # the same as an initialize answered before the loop
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
