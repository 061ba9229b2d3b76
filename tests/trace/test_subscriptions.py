"""SubscriptionManager and events/subscribe|unsubscribe: replay then live, no gaps, terminal end."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from pydantic import TypeAdapter, ValidationError

from sidecar.core.errors import NotFoundError, UnavailableError
from sidecar.ipc.context import RequestContext
from sidecar.storage.sqlite import Database
from sidecar.trace import rpc
from sidecar.trace.eventlog import EventLog
from sidecar.trace.subscriptions import SubscriptionManager

pytestmark = pytest.mark.anyio


class Recorder:
    """A ``send`` that records notifications; ``gate`` (if set) holds every send until it is set."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.gate: anyio.Event | None = None
        self.first_blocked = anyio.Event()
        self._waiters: list[tuple[int, anyio.Event]] = []

    async def __call__(self, method: str, params: Any) -> None:
        if self.gate is not None and not self.gate.is_set():
            self.first_blocked.set()
            await self.gate.wait()
        self.sent.append((method, params))
        for n, ev in self._waiters:
            if len(self.sent) >= n:
                ev.set()

    async def wait_for(self, n: int) -> None:
        ev = anyio.Event()
        self._waiters.append((n, ev))
        if len(self.sent) >= n:
            ev.set()
        with anyio.fail_after(5):
            await ev.wait()

    def ids(self, sub_id: str | None = None) -> list[int]:
        return [p["id"] for _, p in self.sent if sub_id is None or p["subscription_id"] == sub_id]


@asynccontextmanager
async def manager(log: EventLog, send: Recorder, **kw: Any) -> AsyncIterator[SubscriptionManager]:
    async with anyio.create_task_group() as tg:
        subs = SubscriptionManager(log, send, tg, **kw)
        try:
            yield subs
        finally:
            await subs.close_all()


async def test_replay_then_live_then_terminal_end(log: EventLog) -> None:
    await log.create_resource("job_1", "transcription")
    await log.append_many("job_1", [("Queued", {}), ("ModelLoading", {}), ("Progress", {"percent": 10.0})])
    rec = Recorder()
    async with manager(log, rec) as subs:
        sub = await subs.subscribe("job_1", after_sequence=1)
        assert sub.subscription_id.startswith("sub_") and not sub.started
        sub.start()
        await rec.wait_for(2)  # replayed 2 and 3
        await log.append("job_1", "Progress", {"percent": 50.0})
        await log.append("job_1", "Completed", {"text": "hi"})
        with anyio.fail_after(5):
            await sub.wait()
        assert sub.done and subs.get(sub.subscription_id) is None
    assert rec.ids() == [2, 3, 4, 5]
    method, params = rec.sent[2]
    assert method == "event"
    ts = params["data"]["timestamp"]
    assert params == {
        "subscription_id": sub.subscription_id,
        "id": 4,
        "event": "Progress",
        "data": {"sequence": 4, "resource_id": "job_1", "data": {"percent": 50.0}, "timestamp": ts},
    }
    assert list(params) == ["subscription_id", "id", "event", "data"]
    assert list(params["data"]) == ["sequence", "resource_id", "data", "timestamp"]
    assert rec.sent[-1][1]["event"] == "Completed"


async def test_no_gap_no_duplicate_while_writing_concurrently(log: EventLog) -> None:
    await log.create_resource("r", "run")
    await log.append_many("r", [("Progress", {"i": -k}) for k in range(30)])
    rec = Recorder()
    async with manager(log, rec, page_size=7) as subs:
        subs_list = [await subs.subscribe("r", after_sequence=a) for a in (0, 5, 29)]

        async def writer() -> None:
            for i in range(150):
                await log.append("r", "Progress", {"i": i})
            await log.append("r", "RunCompleted", {})

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            for s in subs_list:
                s.start()
        with anyio.fail_after(10):
            for s in subs_list:
                await s.wait()
    for s, after in zip(subs_list, (0, 5, 29), strict=True):
        assert rec.ids(s.subscription_id) == list(range(after + 1, 182))


async def test_slow_consumer_is_resynced_from_the_log(db: Database) -> None:
    log = EventLog(db, listener_buffer=3)
    await log.create_resource("r", "run")
    rec = Recorder()
    rec.gate = anyio.Event()
    async with manager(log, rec) as subs:
        sub = await subs.subscribe("r")
        sub.start()
        await log.append("r", "Progress", {"i": 0})
        with anyio.fail_after(5):
            await rec.first_blocked.wait()  # the consumer is stuck sending event 1
            # appends never wait for it, though its buffer holds only 3
            for i in range(1, 40):
                await log.append("r", "Progress", {"i": i})
            await log.append("r", "Failed", {"error": {"code": "X", "message": "m", "details": {}}})
        assert log.listener_count("r") == 0  # dropped for slowness
        rec.gate.set()
        with anyio.fail_after(5):
            await sub.wait()
    assert rec.ids() == list(range(1, 42))
    assert rec.sent[-1][1]["event"] == "Failed"


async def test_subscribing_after_the_end_resends_the_terminal_event(log: EventLog) -> None:
    await log.create_resource("r", "run")
    await log.append_many("r", [("Progress", {}), ("Cancelled", {})])
    rec = Recorder()
    async with manager(log, rec) as subs:
        for after in (2, 9):
            sub = await subs.subscribe("r", after_sequence=after)
            sub.start()
            with anyio.fail_after(5):
                await sub.wait()
    assert rec.ids() == [2, 2]
    assert {p["event"] for _, p in rec.sent} == {"Cancelled"}


async def test_waits_for_events_after_a_future_cursor(log: EventLog) -> None:
    await log.create_resource("r", "run")
    await log.append("r", "Progress", {})
    rec = Recorder()
    async with manager(log, rec) as subs:
        sub = await subs.subscribe("r", after_sequence=3)
        sub.start()
        for _ in range(3):
            await log.append("r", "Progress", {})
        await log.append("r", "Completed", {})
        with anyio.fail_after(5):
            await sub.wait()
    assert rec.ids() == [4, 5]


async def test_unsubscribe_ends_early(log: EventLog) -> None:
    await log.create_resource("r", "run")
    await log.append("r", "Progress", {})
    rec = Recorder()
    async with manager(log, rec) as subs:
        sub = await subs.subscribe("r")
        sub.start()
        await rec.wait_for(1)
        await subs.unsubscribe(sub.subscription_id)
        assert sub.done and len(subs) == 0
        assert log.listener_count("r") == 0
        await log.append("r", "Progress", {})
        await wait_all_tasks_blocked()
        assert rec.ids() == [1]
        with pytest.raises(NotFoundError) as ei:
            await subs.unsubscribe(sub.subscription_id)
        assert ei.value.code == "SUBSCRIPTION_NOT_FOUND"
        # a subscription that never started can be dropped too
        idle = await subs.subscribe("r")
        await subs.unsubscribe(idle.subscription_id)
        idle.start()  # too late: no-op
        assert idle.done and not idle.started


async def test_nothing_is_sent_before_start(log: EventLog) -> None:
    await log.create_resource("r", "run")
    await log.append_many("r", [("Progress", {}), ("Progress", {})])
    rec = Recorder()
    async with manager(log, rec) as subs:
        sub = await subs.subscribe("r")
        await log.append("r", "Progress", {})
        await wait_all_tasks_blocked()
        assert rec.sent == []
        sub.start()
        await rec.wait_for(3)
        assert rec.ids() == [1, 2, 3]


async def test_unknown_resource_and_closed_manager(log: EventLog) -> None:
    rec = Recorder()
    async with manager(log, rec) as subs:
        with pytest.raises(NotFoundError) as ei:
            await subs.subscribe("missing")
        assert ei.value.code == "RESOURCE_NOT_FOUND"
        await log.create_resource("r", "run")
        a = await subs.subscribe("r")
        a.start()
        b = await subs.subscribe("r")
        b.start()
        await wait_all_tasks_blocked()
        await subs.close_all()
        assert a.done and b.done and len(subs) == 0
        with pytest.raises(UnavailableError):
            await subs.subscribe("r")


async def test_a_failing_send_ends_only_that_subscription(log: EventLog) -> None:
    await log.create_resource("r", "run")
    await log.append("r", "Progress", {})

    async def broken(method: str, params: Any) -> None:
        raise anyio.BrokenResourceError

    async with anyio.create_task_group() as tg:
        subs = SubscriptionManager(log, broken, tg)
        sub = await subs.subscribe("r")
        sub.start()
        with anyio.fail_after(5):
            await sub.wait()
        assert len(subs) == 0
    # the task group survived (no exception escaped)


class FakeOutbox:
    def __init__(self) -> None:
        self.notes: list[tuple[str, Any]] = []

    async def send_notification(self, method: str, params: Any) -> None:
        self.notes.append((method, params))

    async def send_line(self, line: bytes) -> None:  # pragma: no cover - unused
        raise AssertionError


async def test_rpc_methods_answer_first_then_notify(log: EventLog) -> None:
    await log.create_resource("run_1", "agent_run")
    await log.append_many("run_1", [("RunStarted", {}), ("RunCompleted", {})])
    outbox = FakeOutbox()
    async with anyio.create_task_group() as tg:
        ctx = RequestContext(request_id=1, method="events/subscribe", outbox=outbox)
        subs = SubscriptionManager(log, ctx.notify, tg)
        table = {m.name: m for m in rpc.methods(subs)}
        assert set(table) == {"events/subscribe", "events/unsubscribe"}
        sub_m = table["events/subscribe"]
        params = sub_m.params.model_validate({"resource_id": "run_1"})
        result = await sub_m.handler(ctx, params)
        dumped = sub_m.dump_result(result)
        assert set(dumped) == {"subscription_id"}
        await wait_all_tasks_blocked()
        assert outbox.notes == []  # nothing before the answer is on the wire
        assert len(ctx._after_response) == 1
        for fn in ctx._after_response:  # what the dispatcher does once the answer is queued
            fn()
        with anyio.fail_after(5):
            await subs.get(dumped["subscription_id"]).wait()  # type: ignore[union-attr]
        assert [(m, p["id"], p["event"]) for m, p in outbox.notes] == [
            ("event", 1, "RunStarted"),
            ("event", 2, "RunCompleted"),
        ]
        # every notification validates against the exported schema model
        for _, p in outbox.notes:
            rpc.EventNotificationParams.model_validate(p)

        unsub_m = table["events/unsubscribe"]
        live = await subs.subscribe("run_1", 5)
        res = await unsub_m.handler(ctx, unsub_m.params.model_validate({"subscription_id": live.subscription_id}))
        assert unsub_m.dump_result(res) == {"unsubscribed": True}
        with pytest.raises(NotFoundError):
            await unsub_m.handler(ctx, unsub_m.params.model_validate({"subscription_id": "sub_nope"}))
        with pytest.raises(NotFoundError) as ei:
            await sub_m.handler(ctx, sub_m.params.model_validate({"resource_id": "nope"}))
        assert ei.value.code == "RESOURCE_NOT_FOUND"


def test_params_models_and_schema() -> None:
    with pytest.raises(ValidationError):
        rpc.SubscribeParams.model_validate({"resource_id": "r", "after_seq": 1})  # typo refused
    with pytest.raises(ValidationError):
        rpc.SubscribeParams.model_validate({"resource_id": "r", "after_sequence": -1})
    assert rpc.SubscribeParams.model_validate({"resource_id": "r"}).after_sequence == 0
    notes = rpc.notifications()
    assert [n.method for n in notes] == ["event"] and notes[0].params is rpc.EventNotificationParams
    schema = TypeAdapter(rpc.EventNotificationParams).json_schema()
    assert set(schema["required"]) == {"subscription_id", "id", "event", "data"}
