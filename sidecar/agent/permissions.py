"""Permission requests of running agents and the host's answers (``agent/permissions/resolve``).

A tool that ``requires_permission`` makes the loop open a request (trace ``PermissionRequired``) and wait for
the host's decision: ``allow_once``, ``allow_always`` (remembered for that tool for the rest of the session, in
this process) or ``deny``. Waiting is bounded (config ``agent.permissionTimeoutMs``: no answer counts as a deny)
and cancellable (cancelling the run ends the wait).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import anyio

from sidecar.core.common import now_iso
from sidecar.core.errors import ConflictError, NotFoundError

from .models import PendingPermission, PermissionDecision


@dataclass
class PermissionRequest:
    run_id: str
    session_id: str
    pending: PendingPermission
    decision: PermissionDecision | None = None
    source: str = "user"
    """Who decided: ``user``, or ``session_rule`` (an ``allow_always`` given to another request of the session)."""
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
    def __init__(self) -> None:
        self._open: dict[tuple[str, str], PermissionRequest] = {}
        self._always: dict[str, set[str]] = {}  # session_id -> tool names allowed for the session

    def remembered(self, session_id: str, tool_name: str) -> bool:
        return tool_name in self._always.get(session_id, ())

    def open(
        self, run_id: str, session_id: str, *, tool_call_id: str, tool_name: str, permission: str, risk_level: str
    ) -> PermissionRequest:
        request = PermissionRequest(
            run_id=run_id,
            session_id=session_id,
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
