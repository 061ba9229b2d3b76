"""EventLog: sequences, atomic batches, cursor reads, terminal events, live listeners."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from sidecar.core.errors import ConflictError, NotFoundError
from sidecar.storage.sqlite import Database
from sidecar.trace.eventlog import EventLog
from sidecar.trace.models import TERMINAL_EVENTS, StoredEvent

pytestmark = pytest.mark.anyio


async def test_sequences_start_at_one_and_rise(log: EventLog) -> None:
    await log.create_resource("job_1", "transcription")
    await log.create_resource("job_2", "transcription")
    a = [await log.append("job_1", "Progress", {"n": i}) for i in range(5)]
    b = await log.append("job_2", "Queued", {})
    assert [e.sequence for e in a] == [1, 2, 3, 4, 5]
    assert b.sequence == 1  # per resource
    ev = a[0]
    assert isinstance(ev, StoredEvent)
    assert (ev.resource_id, ev.event, ev.data) == ("job_1", "Progress", {"n": 0})
    assert ev.timestamp.endswith("Z") and "T" in ev.timestamp


async def test_create_resource_twice(log: EventLog) -> None:
    assert await log.create_resource("r", "run") is True
    with pytest.raises(ConflictError) as ei:
        await log.create_resource("r", "run")
    assert ei.value.code == "RESOURCE_ALREADY_EXISTS"
    assert await log.create_resource("r", "run", exist_ok=True) is False


async def test_concurrent_appends_never_duplicate(log: EventLog) -> None:
    await log.create_resource("r", "run")
    got: list[int] = []

    async def writer(w: int) -> None:
        for i in range(25):
            if i % 5 == 0:
                evs = await log.append_many("r", [("Progress", {"w": w, "i": i, "k": k}) for k in range(3)])
                got.extend(e.sequence for e in evs)
            else:
                got.append((await log.append("r", "Progress", {"w": w, "i": i})).sequence)

    async with anyio.create_task_group() as tg:
        for w in range(8):
            tg.start_soon(writer, w)
    n = 8 * (20 + 5 * 3)
    assert sorted(got) == list(range(1, n + 1))
    page = await log.read("r", 0, 1000)
    assert [e.sequence for e in page.items] == list(range(1, n + 1))


async def test_two_connections_on_one_file_never_duplicate(tmp_path: Path) -> None:
    db1 = await Database.open(tmp_path)
    db2 = await Database.open(tmp_path)
    try:
        log1, log2 = EventLog(db1), EventLog(db2)
        await log1.create_resource("r", "run")
        await log2.migrate()
        got: list[int] = []

        async def writer(lg: EventLog) -> None:
            for i in range(40):
                got.append((await lg.append("r", "Progress", {"i": i})).sequence)

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer, log1)
            tg.start_soon(writer, log2)
        assert sorted(got) == list(range(1, 81))
    finally:
        await db1.close()
        await db2.close()


async def test_read_pages_with_cursor(log: EventLog) -> None:
    await log.create_resource("r", "run")
    await log.append_many("r", [("Progress", {"i": i}) for i in range(25)])
    p1 = await log.read("r", 0, 10)
    assert [e.sequence for e in p1.items] == list(range(1, 11))
    assert (p1.next_sequence, p1.has_more) == (10, True)
    p2 = await log.read("r", p1.next_sequence, 10)
    assert [e.sequence for e in p2.items] == list(range(11, 21))
    assert (p2.next_sequence, p2.has_more) == (20, True)
    p3 = await log.read("r", p2.next_sequence, 10)
    assert [e.sequence for e in p3.items] == list(range(21, 26))
    assert (p3.next_sequence, p3.has_more) == (25, False)
    p4 = await log.read("r", 25, 10)
    assert (p4.items, p4.next_sequence, p4.has_more) == ([], 25, False)
    exact = await log.read("r", 15, 10)
    assert (exact.next_sequence, exact.has_more) == (25, False)
    assert p1.items[3].data == {"i": 3}
    # the wire shape of seed §4.3
    assert set(p1.model_dump(mode="json")) == {"items", "next_sequence", "has_more"}


async def test_empty_log_and_unknown_resource(log: EventLog) -> None:
    await log.create_resource("empty", "run")
    page = await log.read("empty", 7, 10)
    assert (page.items, page.next_sequence, page.has_more) == ([], 7, False)
    with pytest.raises(NotFoundError) as ei:
        await log.read("nope", 0, 10)
    assert ei.value.code == "RESOURCE_NOT_FOUND" and ei.value.status == 404
    with pytest.raises(NotFoundError) as ei:
        await log.read("nope", 0, 10, not_found_code="RUN_NOT_FOUND")
    assert ei.value.code == "RUN_NOT_FOUND"
    with pytest.raises(NotFoundError) as ei:
        await log.append("nope", "Progress", {})
    assert ei.value.code == "RESOURCE_NOT_FOUND"
    assert await log.exists("empty") and not await log.exists("nope")
    assert await log.kind_of("empty") == "run" and await log.kind_of("nope") is None
    assert await log.last_event("empty") is None


async def test_terminal_event_ends_the_log(log: EventLog) -> None:
    assert {"Completed", "Failed", "Cancelled", "RunCompleted", "RunFailed", "RunCancelled"} == TERMINAL_EVENTS
    for terminal in sorted(TERMINAL_EVENTS):
        rid = f"r_{terminal}"
        await log.create_resource(rid, "run")
        await log.append(rid, "Progress", {})
        end = await log.append(rid, terminal, {"ok": True})
        assert end.terminal
        with pytest.raises(ConflictError) as ei:
            await log.append(rid, "Progress", {})
        assert ei.value.code == "EVENT_LOG_ENDED"
        last = await log.last_event(rid)
        assert last is not None and last.sequence == 2 and last.event == terminal


async def test_append_many_is_all_or_nothing(log: EventLog) -> None:
    await log.create_resource("r", "run")
    with pytest.raises(ConflictError):
        await log.append_many("r", [("Progress", {}), ("Completed", {}), ("Progress", {})])
    assert (await log.read("r", 0, 10)).items == []
    evs = await log.append_many("r", [("Progress", {"a": 1}), ("Completed", {})])
    assert [e.sequence for e in evs] == [1, 2]


async def test_event_data_is_json(log: EventLog) -> None:
    class Detail(BaseModel):
        percent: float
        phase: str

    await log.create_resource("r", "run")
    ev = await log.append("r", "Progress", {"detail": Detail(percent=5.0, phase="x"), "t": (1, 2)})
    assert ev.data == {"detail": {"percent": 5.0, "phase": "x"}, "t": [1, 2]}
    assert (await log.read("r", 0, 1)).items[0].data == ev.data
    assert (await log.append("r", "Marker")).data == {}
    with pytest.raises(TypeError):
        await log.append("r", "Progress", ["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await log.append("r", "Progress", {"x": float("nan")})
    with pytest.raises(ValueError):
        await log.append("r", "", {})


async def test_persisted_across_reopen(tmp_path: Path) -> None:
    db = await Database.open(tmp_path)
    log = EventLog(db)
    await log.create_resource("r", "transcription")
    await log.append_many("r", [("Queued", {}), ("Progress", {"percent": 50.0}), ("Completed", {"text": "hi"})])
    await db.close()
    db = await Database.open(tmp_path)
    try:
        log = EventLog(db)
        page = await log.read("r", 0, 10)
        assert [(e.sequence, e.event) for e in page.items] == [(1, "Queued"), (2, "Progress"), (3, "Completed")]
        assert page.items[2].data == {"text": "hi"}
        assert await log.kind_of("r") == "transcription"
        with pytest.raises(ConflictError):
            await log.append("r", "Progress", {})
    finally:
        await db.close()


async def test_listener_gets_committed_events_in_order_then_ends_at_terminal(log: EventLog) -> None:
    await log.create_resource("r", "run")
    await log.append("r", "Before", {})
    received: list[StoredEvent] = []
    with log.listen("r") as listener:
        assert log.listener_count("r") == 1

        async def writer(w: int) -> None:
            for i in range(20):
                await log.append("r", "Progress", {"w": w, "i": i})

        async with anyio.create_task_group() as tg:
            for w in range(4):
                tg.start_soon(writer, w)
        await log.append("r", "Completed", {})
        with anyio.fail_after(5):
            async for ev in listener:
                received.append(ev)
                # published only after commit: a reader already sees it
                assert (await log.read("r", ev.sequence - 1, 1)).items[0] == ev
        assert listener.ended and not listener.overflowed
    assert [e.sequence for e in received] == list(range(2, 83))  # commit order, no gap, no "Before"
    assert received[-1].event == "Completed"
    assert log.listener_count() == 0


async def test_slow_listener_is_dropped_and_append_never_blocks(db: Database) -> None:
    log = EventLog(db, listener_buffer=4)
    await log.create_resource("r", "run")
    slow = log.listen("r")
    fast = log.listen("r", buffer=100)
    with anyio.fail_after(5):  # nobody reads, yet appends go through
        for i in range(10):
            await log.append("r", "Progress", {"i": i})
    assert slow.overflowed and log.listener_count("r") == 1
    got = [ev.sequence async for ev in _take(slow)]
    assert got == [1, 2, 3, 4]  # what was buffered is delivered, then the stream ends
    assert not fast.overflowed
    fast_got = []
    with anyio.fail_after(5):
        for _ in range(10):
            fast_got.append((await fast.receive()).sequence)
    assert fast_got == list(range(1, 11))
    # a dropped listener resyncs from the log
    page = await log.read("r", got[-1], 100)
    assert [e.sequence for e in page.items] == list(range(5, 11))
    fast.close()
    slow.close()
    assert log.listener_count() == 0


async def _take(listener):  # type: ignore[no-untyped-def]
    with anyio.fail_after(5):
        async for ev in listener:
            yield ev


async def test_closing_the_log_ends_listeners(log: EventLog) -> None:
    await log.create_resource("r", "run")
    listener = log.listen("r")
    log.close()
    with anyio.fail_after(5):
        assert [ev async for ev in listener] == []
    assert listener.closed_by_log
    with pytest.raises(anyio.EndOfStream):
        await listener.receive()
