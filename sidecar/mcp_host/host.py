"""One MCP host per plugin: the server process, its ``ClientSession``, its tools, its health.

A host's lifetime is one task (the SDK's context managers must be entered and left in the same task):

    start → spawn (own process group) → ``initialize`` → capabilities (no ``tools`` → MCP_CAPABILITY_UNSUPPORTED)
          → ``tools/list`` (every page) → every input schema checked (invalid → MCP_TOOL_SCHEMA_INVALID)
          → all tools published at once (or none) → ready → watch (exit poll, periodic ``ping``, list_changed)

A server that exits or stops answering is noticed within :data:`DETECT_S` (its tools are unregistered, running
calls fail with a readable ToolResult, status ``unhealthy``) and restarted with backoff; failures to start
(missing command, initialize, capabilities, schemas) are ``error`` and are not retried until a restart is asked.
Stopping closes the server's stdin, waits, then SIGTERM and SIGKILL to its whole process group.

While a call is in flight a server may be too busy to answer a ping for as long as a call may take (the
manifest's ``timeout_ms``): its silence counts only after that (issue 21: a synchronous tool that works 2 s is not
a dead server). The ping runs beside the watch, so an exit is still noticed within a tick meanwhile. Only a
transport that is really closed fails a call as ``PLUGIN_HOST_UNHEALTHY``; the server's own JSON-RPC error
(-32000 included, the generic "server error") is ``MCP_TOOL_CALL_FAILED``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process, TaskGroup

from sidecar.agent.tools.base import ToolError, ToolOutput
from sidecar.core.common import now_iso
from sidecar.core.errors import SidecarError
from sidecar.core.redact import cut_credentials, redact_head, sanitize

from .models import HostManifest, HostState, PluginHostStatus
from .tools import McpTool, check_tool, map_result, tool_description, tool_risk
from .transport import (
    RESULT_TOO_LARGE_CODE,
    HookedProcess,
    StderrRing,
    StdoutFilter,
    aresolve_command,
    install_spawn_hook,
    settled_stderr,
    spawn_hook,
)

logger = logging.getLogger(__name__)

TICK_S = 0.1
PING_EVERY_S = 0.5
PING_TIMEOUT_S = 1.0
DETECT_S = 2.0
"""A dead or silent server is noticed within this (exit polled every tick; ping every 0.5 s, 1 s to answer) —
with no call in flight; during a call, a ping may take up to the call's time bound."""
INITIALIZE_TIMEOUT_S = 15.0
LIST_TIMEOUT_S = 15.0
MAX_TOOL_PAGES = 100
MAX_TOOLS = 512
BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 16.0)
"""Delays of the automatic restarts after a crash; a host ready for STABLE_S starts again from the first."""
STABLE_S = 60.0
STDOUT_OVERHEAD_BYTES = 64 * 1024
"""A response line may exceed ``max_result_bytes`` by this much (the JSON-RPC envelope and escaping)."""


def host_error(code: str, message: str, status: int = 502, **details: Any) -> SidecarError:
    return SidecarError(message, code=code, status=status, details=details)


@dataclass
class HostSpec:
    plugin_id: str
    manifest: HostManifest
    plugin_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment for the server: the plugin's settings and secrets (never logged)."""
    secrets: tuple[str, ...] = ()
    """The secret values among ``env``: cut out of agent traces (a server may echo them in a result)."""
    annotations_trusted: bool = False
    """The user trusts this plugin's tool annotations (``readOnlyHint`` may then lower a tool's risk)."""


Publish = Callable[[str, list[McpTool]], list[str]]
Unpublish = Callable[[str], None]
OnStatus = Callable[["McpHost"], Awaitable[None]]


class _Crashed(Exception):
    """The server went away after it was ready (auto-restart applies)."""


class McpHost:
    def __init__(
        self,
        spec: HostSpec,
        *,
        publish: Publish,
        unpublish: Unpublish,
        on_status: OnStatus,
        adopt: Callable[[int, str], None],
        forget: Callable[[int], None],
        grace_s: float = 2.0,
    ) -> None:
        install_spawn_hook()
        self.spec = spec
        self._publish = publish
        self._unpublish = unpublish
        self._on_status = on_status
        self._adopt = adopt
        self._forget = forget
        self._grace_s = grace_s
        self.state: HostState = "stopped"
        self.error: dict[str, Any] | None = None
        self.started_at: str | None = None
        self.last_seen_at: str | None = None
        self.tool_names: list[str] = []
        self.restarts = 0
        self.pid: int | None = None
        self._session: Any = None
        self._process: Process | None = None
        self._ring: StderrRing | None = None
        self._stdout: StdoutFilter | None = None
        self._calls: set[anyio.CancelScope] = set()
        self._call_ended_at: float | None = None  # when the last call ended (see _ping_allowance)
        self._stop = anyio.Event()
        self._done = anyio.Event()
        self._done.set()
        self._settled = anyio.Event()
        self._list_changed = anyio.Event()

    @property
    def plugin_id(self) -> str:
        return self.spec.plugin_id

    def status(self) -> PluginHostStatus:
        return PluginHostStatus(
            plugin_id=self.plugin_id,
            status=self.state,
            tools_count=len(self.tool_names),
            started_at=self.started_at,
            last_seen_at=self.last_seen_at,
            error=self.error,
            pid=self.pid,
            restarts=self.restarts,
            tools=list(self.tool_names),
            stderr_tail=self._ring.text(self.spec.secrets) if self._ring else "",
            stdout_garbage_lines=self._stdout.garbage_lines if self._stdout else 0,
        )

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    # --- lifetime ----------------------------------------------------------------------------------------------

    def start(self, tg: TaskGroup) -> anyio.Event:
        """Start the host's task; the event is set once the first start settled (ready or failed)."""
        if self.running:
            return self._settled
        self._stop = anyio.Event()
        self._done = anyio.Event()
        self._settled = anyio.Event()
        tg.start_soon(self._serve)
        return self._settled

    async def stop(self) -> None:
        """Stop the server (and every descendant) and unregister its tools; returns when it is gone."""
        self._stop.set()
        await self._done.wait()

    async def _serve(self) -> None:
        attempt = 0
        try:
            while not self._stop.is_set():
                ready_at: float | None = None
                try:
                    ready_at = await self._once_unwrapped()
                    break  # stopped on request
                except _Crashed as crash:
                    ready_at = crash.args[0]
                except SidecarError as exc:
                    await self._set("error", _error_dict(exc))
                    break
                finally:
                    self._settled.set()
                if ready_at is not None and anyio.current_time() - ready_at >= STABLE_S:
                    attempt = 0
                if attempt >= len(BACKOFF_S):
                    await self._set(
                        "error",
                        {"code": "PLUGIN_HOST_UNHEALTHY", "message": "the server kept crashing; restart it by hand",
                         "details": {"restarts": self.restarts}},
                    )  # fmt: skip
                    break
                with anyio.move_on_after(BACKOFF_S[attempt]):
                    await self._stop.wait()
                attempt += 1
                if not self._stop.is_set():
                    self.restarts += 1
        except Exception:
            logger.exception("host of plugin %s failed", self.plugin_id)
            await self._set("error", {"code": "PLUGIN_HOST_UNAVAILABLE", "message": "the host failed", "details": {}})
        finally:
            self._unpublish(self.plugin_id)
            self.tool_names = []
            if self._stop.is_set() and self.state != "error":
                with anyio.CancelScope(shield=True):
                    await self._set("stopped", None)
            self._settled.set()
            self._done.set()

    async def _once_unwrapped(self) -> float | None:
        """:meth:`_once` with our own errors taken out of the SDK's task-group exception groups."""
        try:
            return await self._once()
        except BaseExceptionGroup as group:
            leaf = _leaf(group)
            if leaf is not None:
                raise leaf from None
            raise

    async def _once(self) -> float | None:
        """One server process from spawn to exit. Returns on a requested stop; raises ``_Crashed`` (after ready)
        or a SidecarError (start failed)."""
        spec = self.spec
        backend = spec.manifest.backend
        await self._set("starting", None)
        self.started_at = now_iso()
        executable, path = await aresolve_command(backend.command, spec.plugin_dir)
        if executable is None:
            raise host_error(
                "PLUGIN_HOST_START_FAILED",
                f"the plugin's command {backend.command!r} was not found (searched the plugin folder and PATH)",
                command=backend.command,
            )
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import get_default_environment, stdio_client
        from mcp_types import Implementation

        from sidecar import __version__

        env = {**get_default_environment(), "PATH": path, **backend.env, **spec.env}
        cwd = (spec.plugin_dir / backend.cwd).resolve() if backend.cwd else spec.plugin_dir
        params = StdioServerParameters(command=executable, args=list(backend.args), env=env, cwd=cwd)
        limit = spec.manifest.tools.max_result_bytes + STDOUT_OVERHEAD_BYTES
        box: dict[str, Any] = {}

        def hook(process: Process) -> Process:
            stdout = StdoutFilter(process.stdout, limit)  # type: ignore[arg-type]
            box["process"], box["stdout"] = process, stdout
            return HookedProcess(process, stdout)

        ring = self._ring = StderrRing()
        ready_at: float | None = None
        async with AsyncExitStack() as stack:
            stack.callback(ring.close)
            token = spawn_hook.set(hook)
            try:
                # typed TextIO, used only as the child's stderr file (its fd): the ring's binary pipe end is fine
                errlog: Any = ring.writer
                read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            except OSError as exc:
                raise host_error(
                    "PLUGIN_HOST_START_FAILED",
                    f"the plugin's server could not be started: {exc.strerror or exc}",
                    command=backend.command,
                ) from None
            finally:
                spawn_hook.reset(token)
            ring.spawned()
            process: Process = box["process"]
            self._stdout = box["stdout"]
            self.pid = process.pid
            self._adopt(process.pid, f"mcp:{self.plugin_id}")
            stack.callback(self._forget, process.pid)
            stack.push_async_callback(self._reap, process)
            session = await stack.enter_async_context(
                ClientSession(
                    read,
                    write,
                    message_handler=self._on_message,
                    client_info=Implementation(name="metona-sidecar", version=__version__),
                )
            )
            try:
                with anyio.fail_after(INITIALIZE_TIMEOUT_S):
                    init = await session.initialize()
            except Exception as exc:
                await settled_stderr(process, ring)  # the server's last words read whole before they are quoted
                raise host_error(
                    "MCP_INITIALIZE_FAILED",
                    f"the server did not complete MCP initialize: {_reason(exc, process, spec.secrets)}",
                    stderr_tail=ring.text(spec.secrets, chars=2000),  # redacted, then cut
                ) from None
            if init.capabilities.tools is None:
                raise host_error(
                    "MCP_CAPABILITY_UNSUPPORTED",
                    "the server does not offer the MCP tools capability",
                    capabilities=sorted(
                        k for k, v in init.capabilities.model_dump(exclude_none=True).items() if v is not None
                    ),
                )
            await self._discover(session)
            self._session, self._process = session, process
            self._list_changed = anyio.Event()
            self.last_seen_at = now_iso()
            ready_at = anyio.current_time()
            await self._set("ready", None)
            self._settled.set()
            try:
                reason = await self._watch(session, process)
            finally:
                self._session = self._process = None
                self._unpublish(self.plugin_id)
                self.tool_names = []
                for scope in list(self._calls):
                    scope.cancel()
            if reason is None:
                return ready_at
            await self._set("unhealthy", {"code": "PLUGIN_HOST_UNHEALTHY", "message": reason, "details": {}})
        raise _Crashed(ready_at)

    async def _discover(self, session: Any) -> list[McpTool]:
        """Every page of ``tools/list``, checked, converted and published at once; nothing for a plugin whose
        manifest does not declare the ``tools`` permission (§7.1: undeclared permission, no registration)."""
        from mcp_types import PaginatedRequestParams

        if "tools" not in self.spec.manifest.permissions:
            self._unpublish(self.plugin_id)
            self.tool_names = []
            return []

        found: list[Any] = []
        cursor: str | None = None
        try:
            with anyio.fail_after(LIST_TIMEOUT_S):
                for _ in range(MAX_TOOL_PAGES):
                    page = await session.list_tools(
                        params=PaginatedRequestParams(cursor=cursor) if cursor is not None else None
                    )
                    found += page.tools
                    cursor = page.next_cursor
                    if cursor is None or len(found) > MAX_TOOLS:
                        break
        except Exception as exc:
            reason = _reason(exc, None, self.spec.secrets)
            raise host_error("MCP_TOOL_SCHEMA_INVALID", f"tools/list failed: {reason}") from None
        if len(found) > MAX_TOOLS:
            raise host_error("MCP_TOOL_SCHEMA_INVALID", f"the server lists more than {MAX_TOOLS} tools")
        names = [t.name for t in found]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise host_error("MCP_TOOL_SCHEMA_INVALID", f"duplicate tool names: {', '.join(duplicates)}")
        problems = [p for p in (check_tool(t) for t in found) if p]
        if problems:
            raise host_error(
                "MCP_TOOL_SCHEMA_INVALID", f"{len(problems)} tool(s) cannot be published: {problems[0]}",
                problems=problems[:20],
            )  # fmt: skip
        policy = self.spec.manifest.tools
        tools = [
            McpTool(
                plugin_id=self.plugin_id,
                mcp_name=t.name,
                description=tool_description(t),
                input_schema=t.input_schema,
                risk=risk,
                risk_rule=rule,
                timeout_ms=policy.timeout_ms,
                call=self.call,
                secrets=self.spec.secrets,
                examples=policy.examples.get(t.name, ()),
            )
            for t in found
            for risk, rule in [tool_risk(t, policy.risk, annotations_trusted=self.spec.annotations_trusted)]
        ]
        try:
            self.tool_names = self._publish(self.plugin_id, tools)
        except SidecarError as exc:
            raise host_error("MCP_TOOL_SCHEMA_INVALID", exc.message) from None
        return tools

    def _ping_allowance(self, sent_at: float) -> float:
        """How long a ping sent at ``sent_at`` may go unanswered: 1 s, or as long as a call may take if a call was in
        flight since it was sent (a server busy with a call answers the ping after the call's result: the call
        ending first must not leave the ping 1 s)."""
        if self._calls or (self._call_ended_at is not None and self._call_ended_at >= sent_at):
            return max(PING_TIMEOUT_S, self.spec.manifest.tools.timeout_ms / 1000)
        return PING_TIMEOUT_S

    async def _watch(self, session: Any, process: Process) -> str | None:
        """Until stop (``None``) or the server is gone/silent (the reason)."""
        ping = _Ping()
        async with anyio.create_task_group() as tg:
            try:
                reason = await self._watch_loop(session, process, ping, tg)
            finally:
                tg.cancel_scope.cancel()
        return reason

    async def _watch_loop(self, session: Any, process: Process, ping: _Ping, tg: TaskGroup) -> str | None:
        next_ping = anyio.current_time() + PING_EVERY_S
        while True:
            with anyio.move_on_after(TICK_S):
                await self._stop.wait()
            if self._stop.is_set():
                return None
            if process.returncode is not None:
                return f"the server exited (code {process.returncode})"
            if self._list_changed.is_set():
                self._list_changed = anyio.Event()
                await self._refresh(session)
            now = anyio.current_time()
            if ping.failure is not None:
                if process.returncode is not None:
                    return f"the server exited (code {process.returncode})"
                return f"the connection to the server failed: {_reason(ping.failure, process, self.spec.secrets)}"
            if ping.sent_at is not None:
                allowance = self._ping_allowance(ping.sent_at)
                if now - ping.sent_at > allowance:
                    return f"the server did not answer a ping within {allowance:g} s"
            elif ping.answered_at is not None:
                self.last_seen_at = now_iso()
                next_ping = ping.answered_at + PING_EVERY_S
                ping.answered_at = None
            elif now >= next_ping:
                ping.sent_at = now
                tg.start_soon(ping.send, session)

    async def _refresh(self, session: Any) -> None:
        """``notifications/tools/list_changed``: rediscover and republish at once (the old set stays on failure)."""
        try:
            await self._discover(session)
        except SidecarError as exc:
            logger.warning("plugin %s: the changed tool list was refused: %s", self.plugin_id, exc.message)
            self.error = self._clean(_error_dict(exc))
        else:
            self.error = None
        await self._notify()

    async def _on_message(self, message: Any) -> None:
        from mcp_types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._list_changed.set()
        elif isinstance(message, Exception):
            logger.debug("plugin %s: unreadable message from the server: %s", self.plugin_id, message)

    async def _reap(self, process: Process) -> None:
        """Stop the server's whole process group: stdin closed, a grace, SIGTERM, a grace, SIGKILL."""
        with anyio.CancelScope(shield=True):
            if process.returncode is None and process.stdin is not None:
                with contextlib.suppress(Exception):
                    await process.stdin.aclose()
            half = max(0.1, self._grace_s / 2)
            for sig in (None, signal.SIGTERM, signal.SIGKILL):
                if sig is not None:
                    _killpg(process.pid, sig)
                with anyio.move_on_after(half):
                    while process.returncode is None:  # noqa: ASYNC110 - the SDK polls the same way
                        await anyio.sleep(0.02)
                if process.returncode is not None and not _group_alive(process.pid):
                    return
            _killpg(process.pid, signal.SIGKILL)

    # --- calls -------------------------------------------------------------------------------------------------

    async def call(self, name: str, args: dict[str, Any], tool: McpTool) -> ToolOutput:
        session = self._session
        if session is None or self.state != "ready":
            raise ToolError(f"the plugin's server is not ready (status {self.state})", "PLUGIN_HOST_UNHEALTHY")
        from mcp.shared.exceptions import MCPError
        from mcp_types.jsonrpc import CONNECTION_CLOSED

        with anyio.CancelScope() as scope:
            self._calls.add(scope)
            try:
                result = await session.call_tool(name, args)
            except MCPError as exc:
                if exc.code == RESULT_TOO_LARGE_CODE:
                    limit = self.spec.manifest.tools.max_result_bytes
                    raise ToolError(
                        f"the tool's result is over the plugin's limit of {limit} bytes", "MCP_TOOL_RESULT_TOO_LARGE"
                    ) from None
                if self._session is None or (exc.code == CONNECTION_CLOSED and self._transport_closed(session)):
                    raise ToolError("the plugin's server stopped during the call", "PLUGIN_HOST_UNHEALTHY") from None
                raise ToolError(
                    "the server failed the call: " + redact_head(exc.message, 1000, self.spec.secrets),
                    "MCP_TOOL_CALL_FAILED",
                ) from None
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
                raise ToolError("the plugin's server stopped during the call", "PLUGIN_HOST_UNHEALTHY") from None
            except RuntimeError as exc:  # e.g. the SDK refusing an input-required result
                raise ToolError(
                    "the server's answer cannot be used: " + redact_head(str(exc), 300, self.spec.secrets),
                    "MCP_TOOL_CALL_FAILED",
                ) from None
            finally:
                self._calls.discard(scope)
                self._call_ended_at = anyio.current_time()
        if scope.cancelled_caught:
            raise ToolError("the plugin's server stopped or stopped answering during the call", "PLUGIN_HOST_UNHEALTHY")
        return map_result(result, self.spec.manifest.tools.max_result_bytes)

    def _transport_closed(self, session: Any) -> bool:
        """Whether the connection to the server is really gone (its process exited, or the SDK saw EOF): -32000 is
        both the SDK's connection-closed code and the generic "server error" many servers answer with."""
        process = self._process
        if process is not None and process.returncode is not None:
            return True
        dispatcher = getattr(session, "_dispatcher", None)
        closed = getattr(dispatcher, "_closed", None)
        return closed is True or closed is None  # an SDK without the flag: the old reading

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> str:
        session = self._session
        if session is None or self.state != "ready":
            raise host_error("PLUGIN_HOST_UNHEALTHY", f"the plugin's server is not ready (status {self.state})", 503)
        try:
            with anyio.fail_after(self.spec.manifest.tools.timeout_ms / 1000):
                result = await session.get_prompt(name, arguments)
        except TimeoutError:
            raise host_error("MCP_TOOL_CALL_FAILED", f"prompt {name!r} did not answer in time", 504) from None
        except Exception as exc:
            raise host_error(
                "MCP_TOOL_CALL_FAILED", self._redact(f"prompt {name!r} failed: {_reason(exc, None, self.spec.secrets)}")
            ) from None
        texts = [m.content.text for m in result.messages if getattr(m.content, "type", "") == "text"]
        return self._redact("\n".join(texts))

    # --- status ------------------------------------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        """What the server said (stderr, an error message, a prompt) without the plugin's secrets or credentials."""
        return cut_credentials(text, self.spec.secrets)

    def _clean(self, error: dict[str, Any] | None) -> dict[str, Any] | None:
        """An error for the status and its persisted event: everything in it redacted (it may quote the server)."""
        return None if error is None else sanitize(error, secrets=self.spec.secrets)

    async def _set(self, state: HostState, error: dict[str, Any] | None) -> None:
        error = self._clean(error)
        changed = state != self.state or error != self.error
        self.state, self.error = state, error
        if state in ("stopped", "error"):
            self.pid = None if state == "stopped" else self.pid
        if changed:
            await self._notify()

    async def _notify(self) -> None:
        try:
            await self._on_status(self)
        except Exception:
            logger.exception("status listener of plugin %s failed", self.plugin_id)


class _Ping:
    """One outstanding ping at a time: when it was sent, when it was answered, or how it failed."""

    def __init__(self) -> None:
        self.sent_at: float | None = None
        self.answered_at: float | None = None
        self.failure: BaseException | None = None

    async def send(self, session: Any) -> None:
        try:
            await session.send_ping()
        except Exception as exc:
            self.failure = exc
            return
        self.sent_at, self.answered_at = None, anyio.current_time()


def _leaf(group: BaseExceptionGroup) -> BaseException | None:
    for exc in group.exceptions:
        if isinstance(exc, SidecarError | _Crashed):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _leaf(exc)
            if found is not None:
                return found
    return None


def _error_dict(exc: SidecarError) -> dict[str, Any]:
    return {"code": exc.code, "message": exc.message, "details": exc.details}


def _reason(exc: BaseException, process: Process | None, secrets: Sequence[str] = ()) -> str:
    """Why a step failed, for a message: redacted (the plugin's secrets, credentials), then cut to 500 chars."""
    if process is not None and process.returncode is not None:
        return f"the server exited (code {process.returncode})"
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return redact_head(str(text), 500, secrets)


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError, OSError):
        return False
    return True
