"""The lifecycle methods' params and results as pydantic models — for ``ipc_schema/`` and the tests.

The handlers themselves (:mod:`sidecar.ipc.lifecycle`) do not import pydantic: ``initialize`` is
answered before the domain layer (and pydantic's model machinery, ~170 ms of imports) is loaded.
``tests/ipc/test_lifecycle_contract.py`` checks that the handlers accept and produce exactly these.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, StrictInt, StrictStr

from ..core.common import EmptyParams, Params, Phase2Model
from .router import Method


class ClientInfo(Phase2Model):
    name: StrictStr
    version: StrictStr | None = None


class InitializeParams(Params):
    model_config = ConfigDict(extra="ignore", defer_build=True)  # hosts may send more than we read (LSP habit)
    process_id: StrictInt | None = Field(None, description="The host's pid: the sidecar exits when that process dies.")
    client_info: ClientInfo | None = None
    protocol_version: StrictStr | None = None
    capabilities: dict[str, Any] = Field(default_factory=dict)


class ServerInfo(Phase2Model):
    name: str
    version: str


class ComponentStatus(Phase2Model):
    """An optional component of this machine (a package, a browser, model weights)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    available: bool
    version: str | None = None
    path: str | None = None
    detail: str | None = None


class Limits(Phase2Model):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    max_line_bytes: int


class ServerCapabilities(Phase2Model):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    stream_events: bool = True
    components: dict[str, ComponentStatus]
    limits: Limits


class InitializeResult(Phase2Model):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    server_info: ServerInfo
    protocol_version: str
    data_dir: str
    pid: int
    capabilities: ServerCapabilities


class PingResult(Phase2Model):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class CancelRequestParams(Params):
    """``$/cancelRequest``: the id of an in-flight request; it answers -32800 REQUEST_CANCELLED."""

    id: int | str


class ExitParams(Params):
    """``exit`` takes no params. Exit code 0 after ``shutdown``, else 1; stdin EOF also exits 0."""


CLIENT_NOTIFICATIONS: dict[str, type[Params]] = {"$/cancelRequest": CancelRequestParams, "exit": ExitParams}
"""Notifications the host sends (handled on the read loop, not in the method table)."""


async def _served_raw(ctx: Any, p: Any) -> Any:  # pragma: no cover - never called
    raise RuntimeError("lifecycle methods are served by sidecar.ipc.lifecycle, not through the router")


def schema_methods() -> list[Method[Any, Any]]:
    """Method records for the schema generator (dispatch goes to the raw handlers)."""
    return [
        Method("initialize", InitializeParams, InitializeResult, _served_raw, "Handshake; must come first."),
        Method("shutdown", EmptyParams, None, _served_raw, "Cancel work, stop children, flush; then send `exit`."),
        Method("ping", EmptyParams, PingResult, _served_raw, "Liveness; served at any time."),
    ]
