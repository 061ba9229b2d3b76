"""``events/subscribe`` and ``events/unsubscribe`` (ARCHITECTURE.md §5) and the ``event`` notification."""

from __future__ import annotations

from typing import Any

from sidecar.ipc.context import RequestContext
from sidecar.ipc.router import Method, Notification

from .models import (
    EventData,
    EventNotificationParams,
    SubscribeParams,
    SubscribeResult,
    UnsubscribeParams,
    UnsubscribeResult,
)
from .subscriptions import EVENT_NOTIFICATION, SubscriptionManager

__all__ = [
    "EventData",
    "EventNotificationParams",
    "SubscribeParams",
    "SubscribeResult",
    "UnsubscribeParams",
    "UnsubscribeResult",
    "methods",
    "notifications",
]


def methods(subs: SubscriptionManager) -> list[Method[Any, Any]]:
    async def subscribe(ctx: RequestContext, p: SubscribeParams) -> SubscribeResult:
        sub = await subs.subscribe(p.resource_id, p.after_sequence)
        # Events flow only once the answer (carrying subscription_id) is on the wire.
        ctx.after_response(sub.start)
        return SubscribeResult(subscription_id=sub.subscription_id)

    async def unsubscribe(ctx: RequestContext, p: UnsubscribeParams) -> UnsubscribeResult:
        await subs.unsubscribe(p.subscription_id)
        return UnsubscribeResult(unsubscribed=True)

    return [
        Method(
            "events/subscribe",
            SubscribeParams,
            SubscribeResult,
            subscribe,
            summary="Replay a resource's events after after_sequence, then push live ones as `event` notifications.",
        ),
        Method(
            "events/unsubscribe",
            UnsubscribeParams,
            UnsubscribeResult,
            unsubscribe,
            summary="End an event subscription early.",
        ),
    ]


def notifications() -> list[Notification]:
    return [
        Notification(
            EVENT_NOTIFICATION,
            EventNotificationParams,
            summary="One resource event of a subscription (SSE id/event/data of seed §4.4).",
        )
    ]
