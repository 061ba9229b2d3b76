"""Wire types of the resource event logs (ARCHITECTURE.md §5, seed §4.3/§4.4). snake_case."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from sidecar.core.common import AfterSequence, Params, Phase2Model

TERMINAL_EVENTS: frozenset[str] = frozenset(
    {"Completed", "Failed", "Cancelled", "RunCompleted", "RunFailed", "RunCancelled"}
)


class StoredEvent(Phase2Model):
    """One persisted event of one resource; ``sequence`` rises by 1 per resource, starting at 1."""

    sequence: int
    resource_id: str
    event: str
    data: dict[str, Any] = Field(default_factory=dict)
    timestamp: str

    @property
    def terminal(self) -> bool:
        return self.event in TERMINAL_EVENTS


class EventData(Phase2Model):
    """The SSE ``data`` of seed §4.4: ``{"sequence", "resource_id", "data", "timestamp"}``."""

    sequence: int
    resource_id: str
    data: dict[str, Any] = Field(default_factory=dict)
    timestamp: str


class EventNotificationParams(Phase2Model):
    """Params of the ``event`` notification: ``{"subscription_id", "id", "event", "data"}``."""

    subscription_id: str
    id: int = Field(description="The event's sequence (the SSE id).")
    event: str
    data: EventData

    @classmethod
    def of(cls, subscription_id: str, ev: StoredEvent) -> EventNotificationParams:
        return cls(
            subscription_id=subscription_id,
            id=ev.sequence,
            event=ev.event,
            data=EventData(sequence=ev.sequence, resource_id=ev.resource_id, data=ev.data, timestamp=ev.timestamp),
        )


class SubscribeParams(Params):
    resource_id: str = Field(min_length=1, max_length=256)
    after_sequence: AfterSequence = 0


class SubscribeResult(Phase2Model):
    subscription_id: str


class UnsubscribeParams(Params):
    subscription_id: str = Field(min_length=1, max_length=256)


class UnsubscribeResult(Phase2Model):
    unsubscribed: bool = True
