"""The sidecar's own error hierarchy (the business plane of ARCHITECTURE.md §4).

Handlers and services raise these; only the IPC layer turns them into JSON-RPC error objects
(``{"code": <http status>, "message", "data": {"code": <PHASE2_CODE>, "details"}}``).
Messages must be safe to show: no secrets, no stack traces, no raw third-party text.
"""

from __future__ import annotations

from typing import Any, ClassVar


class SidecarError(Exception):
    """Base of every error the sidecar reports on purpose."""

    status: ClassVar[int] = 500
    default_code: ClassVar[str] = "INTERNAL_ERROR"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: dict[str, Any] | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.details: dict[str, Any] = details or {}
        if status is not None:
            self.status = status  # type: ignore[misc]

    def to_data(self) -> dict[str, Any]:
        return {"code": self.code, "details": self.details}


class BadRequestError(SidecarError):
    status = 400
    default_code = "BAD_REQUEST"


class UnauthorizedError(SidecarError):
    status = 401
    default_code = "UNAUTHORIZED"


class ForbiddenError(SidecarError):
    status = 403
    default_code = "FORBIDDEN"


class NotFoundError(SidecarError):
    status = 404
    default_code = "RESOURCE_NOT_FOUND"


class ConflictError(SidecarError):
    status = 409
    default_code = "CONFLICT"


class PayloadTooLargeError(SidecarError):
    status = 413
    default_code = "PAYLOAD_TOO_LARGE"


class CapacityError(SidecarError):
    status = 429
    default_code = "CAPACITY_EXCEEDED"


class NotImplementedYetError(SidecarError):
    """501: the contract names the capability but this host cannot provide it (phase-2 §14)."""

    status = 501
    default_code = "NOT_IMPLEMENTED"


class UpstreamError(SidecarError):
    status = 502
    default_code = "UPSTREAM_ERROR"


class UnavailableError(SidecarError):
    status = 503
    default_code = "SERVICE_UNAVAILABLE"


class UpstreamTimeoutError(SidecarError):
    status = 504
    default_code = "UPSTREAM_TIMEOUT"
