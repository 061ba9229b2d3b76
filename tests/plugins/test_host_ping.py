"""The host's liveness ping beside a call (sidecar/mcp_host/host.py): a server busy with a call answers the ping
after the call's result, so a ping outstanding while a call ran keeps the call's allowance after the call ends."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from mcp.types import CallToolResult, TextContent

from sidecar.mcp_host.host import PING_TIMEOUT_S, TICK_S, HostSpec, McpHost

pytestmark = pytest.mark.anyio


class BusyServer:
    """A session whose ping and call answers are released by the test."""

    def __init__(self) -> None:
        self.ping_sent = anyio.Event()
        self.answer_ping = anyio.Event()
        self.call_started = anyio.Event()
        self.answer_call = anyio.Event()

    async def send_ping(self) -> None:
        self.ping_sent.set()
        await self.answer_ping.wait()

    async def call_tool(self, name: str, args: dict[str, Any]) -> CallToolResult:
        self.call_started.set()
        await self.answer_call.wait()
        return CallToolResult(content=[TextContent(type="text", text="woke up")])


async def noop(*_: Any) -> None:
    return None


async def test_a_ping_sent_before_a_call_ends_keeps_the_calls_allowance(tmp_path: Path) -> None:
    manifest = SimpleNamespace(
        backend=None, permissions=(), tools=SimpleNamespace(timeout_ms=30_000, max_result_bytes=1 << 20)
    )
    host = McpHost(
        HostSpec("busy", manifest, tmp_path),  # type: ignore[arg-type]
        publish=lambda *_: [],
        unpublish=lambda *_: None,
        on_status=noop,
        adopt=lambda *_: None,
        forget=lambda *_: None,
    )
    server = BusyServer()
    host.state, host._session = "ready", server
    process = SimpleNamespace(returncode=None)
    reasons: list[str | None] = []
    outputs: list[Any] = []
    called = anyio.Event()

    async def watch() -> None:
        reasons.append(await host._watch(server, process))  # type: ignore[arg-type]

    async def call() -> None:
        outputs.append(await host.call("hang", {}, None))  # type: ignore[arg-type]
        called.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        await server.ping_sent.wait()
        tg.start_soon(call)
        await server.call_started.wait()
        await anyio.sleep(PING_TIMEOUT_S + 3 * TICK_S)  # the ping is past 1 s, the call is within its bound
        server.answer_call.set()  # the call's result comes first ...
        await called.wait()
        await anyio.sleep(3 * TICK_S)  # ... then ticks pass before the ping's answer (a loaded machine)
        assert reasons == [], f"the host gave up on a server busy with a call: {reasons}"
        server.answer_ping.set()
        await anyio.sleep(3 * TICK_S)
        host._stop.set()
    assert reasons == [None]
    assert outputs[0].summary == "woke up"
