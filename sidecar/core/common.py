"""Phase-2 common contracts (seed §4): model bases, paging, cursor pages, the error body.

Objects defined by the phase-2 seed (and objects neither seed defines) are snake_case on the wire
(ARCHITECTURE.md §3). IR objects (camelCase) live in :mod:`sidecar.ir`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")


class Phase2Model(BaseModel):
    """A phase-2 wire object: snake_case, ``null`` kept where the seed shows it."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, defer_build=True)


class Params(BaseModel):
    """Base of every method's params: unknown keys are refused (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


class EmptyParams(Params):
    pass


class PageInfo(Phase2Model):
    total: int
    limit: int
    offset: int


class Page(Phase2Model, Generic[T]):
    """``{"items": [...], "page": {"total", "limit", "offset"}}`` (seed §4.3)."""

    items: list[T]
    page: PageInfo


class CursorPage(Phase2Model, Generic[T]):
    """``{"items": [...], "next_sequence", "has_more"}`` (seed §4.3)."""

    items: list[T]
    next_sequence: int
    has_more: bool


class PageParams(Params):
    limit: int = Field(50, ge=1, le=500)
    offset: int = Field(0, ge=0, le=2**31 - 1)


MAX_SEQUENCE = 2**63 - 1
"""The largest event sequence: an SQLite INTEGER."""
AfterSequence = Annotated[int, Field(ge=0, le=MAX_SEQUENCE, description="events after this sequence (0: all)")]
"""The one bounded cursor type of every events method (issue 21): above an SQLite INTEGER is -32602, never
an OverflowError deep in a query or a subscription pump that dies silently."""


class CursorParams(Params):
    after_sequence: AfterSequence = 0
    limit: int = Field(200, ge=1, le=1000)


class ErrorInfo(Phase2Model):
    """The phase-2 error body ``{"code", "message", "details"}`` (seed §4.5), used inside jobs."""

    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class OperationResponse(Phase2Model):
    """Answer of an accepted command (cancel, restart): final state comes from the resource."""

    accepted: bool = True
    status: str | None = None


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(dt: datetime) -> str:
    """UTC ISO 8601 with a ``Z`` suffix and millisecond precision."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def now_iso() -> str:
    return iso(utc_now())
