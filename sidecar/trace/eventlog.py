"""Append-only, persisted event logs, one per resource (a job, an agent run, a benchmark run).

Every event gets ``sequence = previous + 1`` (starting at 1) inside the writing transaction, so
concurrent appends never share a number. An event is published to in-memory live listeners only
after its transaction has committed, and in commit order: a listener never sees an event that a
reader of the database could not see.

A terminal event (:data:`TERMINAL_EVENTS`) ends a log: later appends raise ``ConflictError``
(code ``EVENT_LOG_ENDED``) and the resource's live listeners are closed after receiving it.

Slow-listener policy
--------------------
Each listener has a bounded buffer (``listener_buffer``, default 256 events). ``append`` never waits
for a listener: when an event does not fit, the listener is *dropped* — unregistered, marked
``overflowed = True`` and its stream closed. The consumer still receives everything that was buffered,
then the iteration ends; it must resync from the database (``read(after_sequence=<last seen>)``) and
``listen`` again. The database is the source of truth, the live stream only a shortcut, so nothing
is lost and a stuck consumer costs at most ``listener_buffer`` events of memory.
:class:`~sidecar.trace.subscriptions.SubscriptionManager` implements that resync.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import anyio
from pydantic_core import to_jsonable_python

from sidecar.core.common import CursorPage, now_iso
from sidecar.core.errors import BadRequestError, ConflictError, NotFoundError
from sidecar.storage.sqlite import Database

from .models import TERMINAL_EVENTS, StoredEvent

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_LISTENER_BUFFER = 256
MAX_EVENT_NAME = 64

MIGRATIONS: list[str] = [
    """
    CREATE TABLE resources (
        resource_id TEXT PRIMARY KEY NOT NULL,
        kind        TEXT NOT NULL,
        created_at  TEXT NOT NULL
    );
    CREATE INDEX resources_kind ON resources (kind, created_at);
    CREATE TABLE events (
        resource_id TEXT NOT NULL REFERENCES resources (resource_id) ON DELETE CASCADE,
        sequence    INTEGER NOT NULL CHECK (sequence >= 1),
        event       TEXT NOT NULL,
        data        TEXT NOT NULL,
        timestamp   TEXT NOT NULL,
        PRIMARY KEY (resource_id, sequence)
    );
    """,
]


def _not_found(resource_id: str, code: str = "RESOURCE_NOT_FOUND") -> NotFoundError:
    return NotFoundError("Resource was not found.", code=code, details={"resource_id": resource_id})


def _encode(data: Mapping[str, Any] | None) -> tuple[dict[str, Any], str]:
    if data is None:
        return {}, "{}"
    plain = to_jsonable_python(data)
    if not isinstance(plain, dict):
        raise TypeError("event data must be a JSON object")
    return plain, json.dumps(plain, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _check_name(event: str) -> None:
    if not isinstance(event, str) or not event or len(event) > MAX_EVENT_NAME:
        raise ValueError(f"bad event name {event!r}")


class EventWriter:
    """Writes events inside one :meth:`EventLog.transaction`; they are published after its commit.

    Only valid inside the transaction callback (it runs in a worker thread, under the DB lock).
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.events: list[StoredEvent] = []
        self._state: dict[str, tuple[int, bool]] = {}  # resource_id -> (last sequence, ended)

    def exists(self, resource_id: str) -> bool:
        if resource_id in self._state:
            return True
        row = self.conn.execute("SELECT 1 FROM resources WHERE resource_id = ?", (resource_id,)).fetchone()
        return row is not None

    def create_resource(self, resource_id: str, kind: str, *, exist_ok: bool = False) -> bool:
        """Create a resource's (empty) log; return False if it already existed and ``exist_ok``."""
        if not resource_id or not kind:
            raise ValueError("resource_id and kind must not be empty")
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO resources (resource_id, kind, created_at) VALUES (?, ?, ?)",
            (resource_id, kind, now_iso()),
        )
        if cur.rowcount == 0:
            if exist_ok:
                return False
            raise ConflictError(
                "Resource already exists.", code="RESOURCE_ALREADY_EXISTS", details={"resource_id": resource_id}
            )
        self._state[resource_id] = (0, False)
        return True

    def _load(self, resource_id: str) -> tuple[int, bool]:
        state = self._state.get(resource_id)
        if state is not None:
            return state
        row = self.conn.execute(
            "SELECT sequence, event FROM events WHERE resource_id = ? ORDER BY sequence DESC LIMIT 1",
            (resource_id,),
        ).fetchone()
        if row is None:
            if not self.exists(resource_id):
                raise _not_found(resource_id)
            state = (0, False)
        else:
            state = (int(row[0]), row[1] in TERMINAL_EVENTS)
        self._state[resource_id] = state
        return state

    def last_sequence(self, resource_id: str) -> int:
        return self._load(resource_id)[0]

    def ended(self, resource_id: str) -> bool:
        return self._load(resource_id)[1]

    def append(self, resource_id: str, event: str, data: Mapping[str, Any] | None = None) -> StoredEvent:
        _check_name(event)
        plain, encoded = _encode(data)
        last, ended = self._load(resource_id)
        if ended:
            raise ConflictError(
                "The resource's event log has ended.", code="EVENT_LOG_ENDED", details={"resource_id": resource_id}
            )
        seq = last + 1
        ts = now_iso()
        self.conn.execute(
            "INSERT INTO events (resource_id, sequence, event, data, timestamp) VALUES (?, ?, ?, ?, ?)",
            (resource_id, seq, event, encoded, ts),
        )
        stored = StoredEvent(sequence=seq, resource_id=resource_id, event=event, data=plain, timestamp=ts)
        self._state[resource_id] = (seq, event in TERMINAL_EVENTS)
        self.events.append(stored)
        return stored


class EventListener:
    """Live events of one resource, fed after commit; iterate with ``async for``; always close.

    Iteration ends when the log ends (``ended``: a terminal event was delivered), when the listener
    was dropped for slowness (``overflowed``: resync from the database), or when the log closes
    (``closed_by_log``). Events may include ones the consumer already read from the database:
    dedupe by ``sequence``.
    """

    def __init__(self, log: EventLog, resource_id: str, buffer: int) -> None:
        self.resource_id = resource_id
        self.overflowed = False
        self.ended = False
        self.closed_by_log = False
        self._log = log
        self._send, self._recv = anyio.create_memory_object_stream[StoredEvent](buffer)

    async def receive(self) -> StoredEvent:
        """The next event; raises ``anyio.EndOfStream`` once the listener has ended."""
        try:
            return await self._recv.receive()
        except anyio.EndOfStream:
            self.close()  # nothing more can come: release it even if the owner forgets
            raise
        except anyio.ClosedResourceError:
            raise anyio.EndOfStream from None

    def __aiter__(self) -> EventListener:
        return self

    async def __anext__(self) -> StoredEvent:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._log._unregister(self)
        self._send.close()
        self._recv.close()

    async def aclose(self) -> None:
        self.close()

    def __enter__(self) -> EventListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> EventListener:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # called by EventLog on the event loop
    def _offer(self, ev: StoredEvent) -> bool:
        """Deliver without waiting; False when the listener is gone (dropped or closed)."""
        try:
            self._send.send_nowait(ev)
        except anyio.WouldBlock:
            self.overflowed = True
            self._send.close()
            logger.info("event listener on %s dropped: buffer full (resync from the log)", self.resource_id)
            return False
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        return True


class EventLog:
    """Per-resource append-only event logs in the shared :class:`Database`, plus live listeners."""

    def __init__(self, db: Database, *, listener_buffer: int = DEFAULT_LISTENER_BUFFER) -> None:
        if listener_buffer < 1:
            raise ValueError("listener_buffer must be >= 1")
        self.db = db
        self.listener_buffer = listener_buffer
        self._listeners: dict[str, set[EventListener]] = {}
        self._order = anyio.Lock()  # commit + publish as one step: listeners see commit order
        self._migrated = False

    async def migrate(self) -> None:
        await self.db.migrate("events", MIGRATIONS)
        self._migrated = True

    async def _ready(self) -> None:
        if not self._migrated:
            await self.migrate()

    # -- writing -----------------------------------------------------------------------------------

    async def transaction(self, fn: Callable[[sqlite3.Connection, EventWriter], T]) -> T:
        """Run ``fn(conn, writer)`` in one transaction; publish the events it appended after commit.

        Lets a domain update its own rows and append the matching event atomically (a job's status
        and its ``Completed`` event can never disagree after a crash). Once the write has started it
        completes and is published even if the caller is cancelled meanwhile.
        """
        await self._ready()

        def work(conn: sqlite3.Connection) -> tuple[T, list[StoredEvent]]:
            writer = EventWriter(conn)
            result = fn(conn, writer)
            return result, writer.events

        async with self._order:
            with anyio.CancelScope(shield=True):
                result, events = await self.db.run(work)
                self._publish(events)
        return result

    async def create_resource(self, resource_id: str, kind: str, *, exist_ok: bool = False) -> bool:
        return await self.transaction(lambda _c, w: w.create_resource(resource_id, kind, exist_ok=exist_ok))

    async def append(self, resource_id: str, event: str, data: Mapping[str, Any] | None = None) -> StoredEvent:
        """Append one event (committed, then published); ``NotFoundError`` / ``ConflictError``."""
        return await self.transaction(lambda _c, w: w.append(resource_id, event, data))

    async def append_many(
        self, resource_id: str, items: Iterable[tuple[str, Mapping[str, Any] | None]]
    ) -> list[StoredEvent]:
        """Append several events in one transaction (all or none). A terminal event may only be last."""
        batch = list(items)

        def work(_conn: sqlite3.Connection, w: EventWriter) -> list[StoredEvent]:
            return [w.append(resource_id, event, data) for event, data in batch]

        return await self.transaction(work)

    # -- reading -----------------------------------------------------------------------------------

    async def read(
        self,
        resource_id: str,
        after_sequence: int = 0,
        limit: int = 200,
        *,
        not_found_code: str = "RESOURCE_NOT_FOUND",
    ) -> CursorPage[StoredEvent]:
        """Events with ``sequence > after_sequence``, oldest first, at most ``limit``."""
        if limit < 1 or after_sequence < 0:
            raise BadRequestError("limit must be >= 1 and after_sequence >= 0.")
        await self._ready()

        def work(conn: sqlite3.Connection) -> tuple[list[StoredEvent], bool]:
            rows = conn.execute(
                "SELECT sequence, event, data, timestamp FROM events"
                " WHERE resource_id = ? AND sequence > ? ORDER BY sequence LIMIT ?",
                (resource_id, after_sequence, limit + 1),
            ).fetchall()
            if (
                not rows
                and conn.execute("SELECT 1 FROM resources WHERE resource_id = ?", (resource_id,)).fetchone() is None
            ):
                raise _not_found(resource_id, not_found_code)
            items = [
                StoredEvent(sequence=r[0], resource_id=resource_id, event=r[1], data=json.loads(r[2]), timestamp=r[3])
                for r in rows[:limit]
            ]
            return items, len(rows) > limit

        items, has_more = await self.db.read(work)
        next_sequence = items[-1].sequence if items else after_sequence
        return CursorPage[StoredEvent](items=items, next_sequence=next_sequence, has_more=has_more)

    async def last_event(self, resource_id: str) -> StoredEvent | None:
        """The newest event (``None`` for an empty log); ``NotFoundError`` for an unknown resource."""
        await self._ready()

        def work(conn: sqlite3.Connection) -> StoredEvent | None:
            row = conn.execute(
                "SELECT sequence, event, data, timestamp FROM events"
                " WHERE resource_id = ? ORDER BY sequence DESC LIMIT 1",
                (resource_id,),
            ).fetchone()
            if row is None:
                if conn.execute("SELECT 1 FROM resources WHERE resource_id = ?", (resource_id,)).fetchone() is None:
                    raise _not_found(resource_id)
                return None
            return StoredEvent(
                sequence=row[0], resource_id=resource_id, event=row[1], data=json.loads(row[2]), timestamp=row[3]
            )

        return await self.db.read(work)

    async def exists(self, resource_id: str) -> bool:
        return await self.kind_of(resource_id) is not None

    async def kind_of(self, resource_id: str) -> str | None:
        """The resource's kind, or ``None`` if it does not exist."""
        await self._ready()

        def work(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT kind FROM resources WHERE resource_id = ?", (resource_id,)).fetchone()
            return None if row is None else str(row[0])

        return await self.db.read(work)

    # -- live listeners ----------------------------------------------------------------------------

    def listen(self, resource_id: str, *, buffer: int | None = None) -> EventListener:
        """Register a live listener for events committed from now on (see the slow-listener policy).

        Does not check that the resource exists, nor replay anything: read the log after
        registering to close the gap (register first, then read, then dedupe by sequence).
        """
        listener = EventListener(self, resource_id, buffer or self.listener_buffer)
        self._listeners.setdefault(resource_id, set()).add(listener)
        return listener

    def listener_count(self, resource_id: str | None = None) -> int:
        if resource_id is not None:
            return len(self._listeners.get(resource_id, ()))
        return sum(len(s) for s in self._listeners.values())

    def _unregister(self, listener: EventListener) -> None:
        group = self._listeners.get(listener.resource_id)
        if group is not None:
            group.discard(listener)
            if not group:
                del self._listeners[listener.resource_id]

    def _publish(self, events: list[StoredEvent]) -> None:
        for ev in events:
            group = self._listeners.get(ev.resource_id)
            if not group:
                continue
            for listener in list(group):
                if not listener._offer(ev):
                    group.discard(listener)
            if ev.event in TERMINAL_EVENTS:
                for listener in group:
                    listener.ended = True
                    listener._send.close()
                group.clear()
            if not group:
                self._listeners.pop(ev.resource_id, None)

    def close(self) -> None:
        """End every live listener (``closed_by_log``); the database stays open (the owner closes it)."""
        groups, self._listeners = self._listeners, {}
        for group in groups.values():
            for listener in group:
                listener.closed_by_log = True
                listener._send.close()
