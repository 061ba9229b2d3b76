"""``initialize``, ``shutdown``, ``ping`` (``exit`` and ``$/cancelRequest`` live on the read loop)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..common import EmptyParams, Params
from ..errors import ConflictError
from .context import RequestContext
from .dispatcher import SHUTTING_DOWN, UNINITIALIZED, Dispatcher
from .router import Method


class ClientInfo(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str
    version: str | None = None


class InitializeParams(Params):
    model_config = ConfigDict(extra="ignore")  # hosts may send more than we read (LSP habit)
    process_id: int | None = Field(None, description="the host's pid; the sidecar exits when it dies")
    client_info: ClientInfo | None = None
    protocol_version: str | None = None
    capabilities: dict[str, Any] = Field(default_factory=dict)


class ServerInfo(BaseModel):
    name: str
    version: str


class Limits(BaseModel):
    max_line_bytes: int


class ServerCapabilities(BaseModel):
    methods: list[str]
    notifications: list[str]
    stream_events: bool = True
    components: dict[str, Any]
    limits: Limits


class InitializeResult(BaseModel):
    server_info: ServerInfo
    protocol_version: str
    data_dir: str
    pid: int
    capabilities: ServerCapabilities


class PingResult(BaseModel):
    pass


class CancelRequestParams(BaseModel):
    """``$/cancelRequest``: the id of an in-flight request; it answers -32800 REQUEST_CANCELLED."""

    id: int | str


class ExitParams(BaseModel):
    """``exit`` takes no params. Exit code 0 after ``shutdown``, else 1; stdin EOF also exits 0."""


CLIENT_NOTIFICATIONS: dict[str, type[BaseModel]] = {"$/cancelRequest": CancelRequestParams, "exit": ExitParams}
"""Notifications the host sends (handled on the read loop, not in the method table)."""


def methods(
    dispatcher: Dispatcher,
    *,
    server_info: ServerInfo,
    protocol_version: str,
    data_dir: str,
    max_line_bytes: int,
    components: Callable[[], dict[str, Any]],
    on_initialized: Callable[[InitializeParams], None] | None = None,
    grace_s: float = 2.0,
) -> list[Method[Any, Any]]:
    async def initialize(ctx: RequestContext, p: InitializeParams) -> InitializeResult:
        if dispatcher.state != UNINITIALIZED:
            raise ConflictError("The sidecar is already initialized.", code="ALREADY_INITIALIZED")
        if on_initialized is not None:
            on_initialized(p)
        result = InitializeResult(
            server_info=server_info,
            protocol_version=protocol_version,
            data_dir=data_dir,
            pid=os.getpid(),
            capabilities=ServerCapabilities(
                methods=[m.name for m in dispatcher.router if not m.dev],
                notifications=[n.method for n in dispatcher.router.notifications],
                components={
                    k: v.model_dump(exclude_none=True) if isinstance(v, BaseModel) else v
                    for k, v in components().items()
                },
                limits=Limits(max_line_bytes=max_line_bytes),
            ),
        )
        dispatcher.mark_initialized()
        return result

    async def shutdown(ctx: RequestContext, p: EmptyParams) -> None:
        if dispatcher.state == SHUTTING_DOWN:
            return None
        dispatcher.state = SHUTTING_DOWN
        dispatcher.shutdown_requested = True
        dispatcher.cancel_inflight(keep=ctx.request_id)
        await dispatcher.run_shutdown_hooks(grace_s)
        return None

    async def ping(ctx: RequestContext, p: EmptyParams) -> PingResult:
        return PingResult()

    return [
        Method("initialize", InitializeParams, InitializeResult, initialize, "Handshake; must come first."),
        Method("shutdown", EmptyParams, None, shutdown, "Cancel work, stop children, flush; then send `exit`."),
        Method("ping", EmptyParams, PingResult, ping, "Liveness; served at any time."),
    ]
