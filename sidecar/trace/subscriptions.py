"""Push delivery of resource events as ``event`` notifications (ARCHITECTURE.md §5).

A subscription is created by the ``events/subscribe`` handler and *started* only once that request's
answer is on the wire (``ctx.after_response(sub.start)``), so no notification precedes the answer.

The pump of a subscription:
1. registers a live listener on the event log (before reading anything, so nothing can fall between);
2. replays from the database every event after the last one sent (``after_sequence`` at first), in
   pages;
3. forwards live events, skipping those already sent (``sequence <= last sent``); on a gap it reads the
   missing events from the database;
4. when the listener was dropped for slowness (see :mod:`sidecar.trace.eventlog`), goes back to 1.

A terminal event ends the subscription after it is sent. If the log had already ended at or before
``after_sequence`` the terminal event is sent once more (a duplicate, which the contract allows) so the
client learns that nothing else will come. Seam duplicates are avoided by the ``sequence`` check.
A failing ``send`` (the output closed) ends the subscription quietly; nothing escapes into the task group.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from sidecar.core.errors import CapacityError, NotFoundError, UnavailableError

from .eventlog import EventLog
from .models import TERMINAL_EVENTS, EventNotificationParams, StoredEvent

logger = logging.getLogger(__name__)

SendFn = Callable[[str, Any], Awaitable[None]]

EVENT_NOTIFICATION = "event"
DEFAULT_PAGE_SIZE = 500
DEFAULT_MAX_SUBSCRIPTIONS = 1024
UNSUBSCRIBE_WAIT_S = 5.0


class Subscription:
    """One client's push stream of one resource's events. Created by :meth:`SubscriptionManager.subscribe`."""

    def __init__(self, manager: SubscriptionManager, subscription_id: str, resource_id: str, after_sequence: int):
        self.subscription_id = subscription_id
        self.resource_id = resource_id
        self.after_sequence = after_sequence
        self.last_sent = after_sequence
        self.sent = 0
        self._manager = manager
        self._scope = anyio.CancelScope()
        self._started = False
        self._done = anyio.Event()

    def start(self) -> None:
        """Start pumping (once). Call it after the subscribe answer went out."""
        if self._started or self._done.is_set():
            return
        self._started = True
        self._manager._task_group.start_soon(self._manager._pump, self, name=f"subscription {self.subscription_id}")

    @property
    def started(self) -> bool:
        return self._started

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def wait(self) -> None:
        """Wait until the subscription has ended (terminal event, unsubscribe, close, send failure)."""
        await self._done.wait()

    def _cancel(self) -> None:
        self._scope.cancel()
        if not self._started:
            self._done.set()


class SubscriptionManager:
    """Owns the live subscriptions; pumps run in ``task_group`` (the application's long-lived one)."""

    def __init__(
        self,
        eventlog: EventLog,
        send: SendFn,
        task_group: TaskGroup,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS,
    ) -> None:
        self._log = eventlog
        self._send = send
        self._task_group = task_group
        self._page_size = page_size
        self._max = max_subscriptions
        self._subs: dict[str, Subscription] = {}
        self._closed = False

    def __len__(self) -> int:
        return len(self._subs)

    def get(self, subscription_id: str) -> Subscription | None:
        return self._subs.get(subscription_id)

    async def subscribe(self, resource_id: str, after_sequence: int = 0) -> Subscription:
        """Create a (not yet started) subscription; ``NotFoundError`` RESOURCE_NOT_FOUND if unknown."""
        if self._closed:
            raise UnavailableError("The sidecar is shutting down.", code="SHUTTING_DOWN")
        if after_sequence < 0:
            after_sequence = 0
        if not await self._log.exists(resource_id):
            raise NotFoundError(
                "Resource was not found.", code="RESOURCE_NOT_FOUND", details={"resource_id": resource_id}
            )
        if len(self._subs) >= self._max:
            raise CapacityError("Too many event subscriptions.", details={"limit": self._max})
        sub = Subscription(self, f"sub_{uuid.uuid4().hex}", resource_id, after_sequence)
        self._subs[sub.subscription_id] = sub
        return sub

    async def unsubscribe(self, subscription_id: str) -> None:
        """End a subscription early and wait (bounded) until its pump has stopped."""
        sub = self._subs.pop(subscription_id, None)
        if sub is None:
            raise NotFoundError(
                "Subscription was not found.",
                code="SUBSCRIPTION_NOT_FOUND",
                details={"subscription_id": subscription_id},
            )
        sub._cancel()
        with anyio.move_on_after(UNSUBSCRIBE_WAIT_S):
            await sub.wait()

    async def close_all(self) -> None:
        """End every subscription (shutdown); new subscriptions are refused afterwards."""
        self._closed = True
        subs = list(self._subs.values())
        self._subs.clear()
        for sub in subs:
            sub._cancel()
        with anyio.move_on_after(UNSUBSCRIBE_WAIT_S):
            for sub in subs:
                await sub.wait()

    # -- the pump ----------------------------------------------------------------------------------

    async def _pump(self, sub: Subscription) -> None:
        try:
            with sub._scope:
                await self._pump_inner(sub)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.info("subscription %s ended: the output is closed", sub.subscription_id)
        except Exception:
            logger.exception("subscription %s on %s failed", sub.subscription_id, sub.resource_id)
        finally:
            self._subs.pop(sub.subscription_id, None)
            sub._done.set()

    async def _pump_inner(self, sub: Subscription) -> None:
        while True:
            with self._log.listen(sub.resource_id) as listener:
                if await self._replay(sub):
                    return
                async for ev in listener:
                    if ev.sequence <= sub.last_sent:
                        continue
                    if ev.sequence != sub.last_sent + 1:  # a gap: fetch what is missing from the log
                        if await self._replay(sub):
                            return
                        continue
                    if await self._deliver(sub, ev):
                        return
                if listener.closed_by_log:
                    return
                if not listener.overflowed:
                    # The log ended (terminal published): the database has the rest.
                    await self._replay(sub)
                    return
            logger.debug("subscription %s resyncing after overflow at %d", sub.subscription_id, sub.last_sent)

    async def _replay(self, sub: Subscription) -> bool:
        """Send everything after ``sub.last_sent`` from the database; True once a terminal event went out."""
        first = True
        while True:
            page = await self._log.read(sub.resource_id, sub.last_sent, self._page_size)
            if first and not page.items:
                last = await self._log.last_event(sub.resource_id)
                if last is not None and last.event in TERMINAL_EVENTS and last.sequence <= sub.last_sent:
                    # The client already has the end (after_sequence at or past it): say so again.
                    await self._send_event(sub, last)
                    return True
            first = False
            for ev in page.items:
                if await self._deliver(sub, ev):
                    return True
            if not page.has_more:
                return False

    async def _deliver(self, sub: Subscription, ev: StoredEvent) -> bool:
        await self._send_event(sub, ev)
        sub.last_sent = ev.sequence
        return ev.event in TERMINAL_EVENTS

    async def _send_event(self, sub: Subscription, ev: StoredEvent) -> None:
        params = EventNotificationParams.of(sub.subscription_id, ev).model_dump(mode="json")
        await self._send(EVENT_NOTIFICATION, params)
        sub.sent += 1
