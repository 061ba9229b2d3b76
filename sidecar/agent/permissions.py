"""Permission requests of running agents and the host's answers (``agent/permissions/resolve``).

A tool that ``requires_permission`` makes the loop open a request (trace ``PermissionRequired``) and wait for
the host's decision: ``allow_once``, ``allow_always`` (remembered for that tool for the rest of the session, in
this process; for a tool the broker's :class:`StandingRules` keep, a plugin's, stored per plugin and tool across
restarts) or ``deny``. Waiting is bounded (config ``agent.permissionTimeoutMs``: no answer counts as a deny)
and cancellable (cancelling the run ends the wait).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from sidecar.core.common import now_iso
from sidecar.core.errors import ConflictError, NotFoundError

from .models import PendingPermission, PermissionDecision


class StandingRules(Protocol):
    """Decisions the user stored for tools beyond a session (a plugin's tools: ``mcp_host.rules``)."""

    source: str
    """``PermissionResolved.source`` of a decision these rules made."""

    def allows(self, tool: Any) -> bool: ...

    async def allow_always(self, tool: Any) -> bool:
        """Store "allow always" for ``tool``; False when these rules do not keep that tool (a built-in)."""
        ...


@dataclass
class PermissionRequest:
    run_id: str
    session_id: str
    pending: PendingPermission
    decision: PermissionDecision | None = None
    source: str = "user"
    """Who decided: ``user``, ``session_rule`` (an ``allow_always`` given to another request of the session) or
    the standing rules' source (an ``allow_always`` for the same plugin tool given to another request)."""
    tool: Any = None
    """The tool asking (what :class:`StandingRules` key on)."""
    _answered: anyio.Event = field(default_factory=anyio.Event)

    @property
    def request_id(self) -> str:
        return self.pending.request_id

    def answer(self, decision: PermissionDecision, source: str | None = None) -> None:
        """Record the decision (and who made it) and wake :meth:`PermissionBroker.wait`."""
        self.decision = decision
        if source is not None:
            self.source = source
        self._answered.set()


class PermissionBroker:
    def __init__(self, rules: StandingRules | None = None) -> None:
        self._open: dict[tuple[str, str], PermissionRequest] = {}
        self._always: dict[str, set[str]] = {}  # session_id -> tool names allowed for the session
        self.rules = rules

    def remembered(self, session_id: str, tool_name: str) -> bool:
        return tool_name in self._always.get(session_id, ())

    def open(
        self,
        run_id: str,
        session_id: str,
        *,
        tool_call_id: str,
        tool_name: str,
        permission: str,
        risk_level: str,
        tool: Any = None,
    ) -> PermissionRequest:
        request = PermissionRequest(
            run_id=run_id,
            session_id=session_id,
            tool=tool,
            pending=PendingPermission(
                request_id=f"perm_{uuid.uuid4().hex[:16]}",
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                permission=permission,
                risk_level=risk_level,
                created_at=now_iso(),
            ),
        )
        self._open[(run_id, request.request_id)] = request
        return request

    def pending(self, run_id: str) -> PendingPermission | None:
        for (rid, _), request in self._open.items():
            if rid == run_id:
                return request.pending
        return None

    async def wait(self, request: PermissionRequest, timeout_s: float) -> PermissionDecision | None:
        """The host's decision, or ``None`` when none came within ``timeout_s``; the request is closed after."""
        try:
            with anyio.move_on_after(timeout_s):
                await request._answered.wait()
            return request.decision
        finally:
            self._open.pop((request.run_id, request.request_id), None)

    def resolve(self, run_id: str, request_id: str, decision: PermissionDecision) -> PermissionRequest:
        """Answer an open request (``PERMISSION_REQUEST_NOT_FOUND`` when it is not open, e.g. already answered)."""
        request = self._open.get((run_id, request_id))
        if request is None:
            raise NotFoundError(
                "Permission request was not found (it may have been answered or timed out).",
                code="PERMISSION_REQUEST_NOT_FOUND",
                details={"run_id": run_id, "request_id": request_id},
            )
        if request.decision is not None:
            raise ConflictError(
                "Permission request was already answered.",
                code="PERMISSION_ALREADY_RESOLVED",
                details={"run_id": run_id, "request_id": request_id, "decision": request.decision},
            )
        request.answer(decision)
        if decision == "allow_always":
            tool = request.pending.tool_name
            self._always.setdefault(request.session_id, set()).add(tool)
            for other in self._open.values():  # the session's other runs waiting on the same tool
                if (
                    other.session_id == request.session_id
                    and other.pending.tool_name == tool
                    and other.decision is None
                ):
                    other.answer("allow_always", "session_rule")
        return request

    async def remember(self, request: PermissionRequest) -> bool:
        """Store an ``allow_always`` answer with the standing rules (a plugin's tool: across sessions and
        restarts) and answer the other runs already waiting on that tool. False when no rule keeps the tool."""
        if request.decision != "allow_always" or self.rules is None or request.tool is None:
            return False
        if not await self.rules.allow_always(request.tool):
            return False
        for other in list(self._open.values()):
            if other.decision is None and other.tool is not None and self.rules.allows(other.tool):
                other.answer("allow_always", self.rules.source)
        return True
