"""A run's trace writer: sanitised events, batched into few durable transactions, in order.

The loop calls :meth:`TraceWriter.emit` (no waiting: the event is buffered); a flusher task commits what is
buffered in one transaction per batch (``EventLog`` numbers them, then publishes them to live subscribers).
Adjacent text/thinking deltas of the same model call are merged while they wait, so a fast stream costs a
few events per batch instead of one per token. :meth:`flush` waits until everything emitted so far is
committed (the loop flushes before it waits for a permission and at the end); :meth:`finish` commits the
terminal event together with the run row's final state.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import anyio

from sidecar.core.redact import sanitize
from sidecar.trace.eventlog import EventLog, EventWriter

from .models import TEXT_DELTA, THINKING_DELTA

logger = logging.getLogger(__name__)

FLUSH_DELAY_S = 0.01
"""How long the flusher lets events gather after the first one of a batch."""
MAX_BUFFERED = 2_000
"""Emitting waits for a flush beyond this many buffered events (bounded memory)."""
MAX_STRING_CHARS = 4_000
"""Longest string kept in an event's data (deltas are merged up to this size too)."""

_MERGEABLE = frozenset({TEXT_DELTA, THINKING_DELTA})


class TraceWriter:
    def __init__(
        self,
        events: EventLog,
        run_id: str,
        *,
        secrets: Iterable[str] = (),
    ) -> None:
        self._events = events
        self.run_id = run_id
        self.secrets = tuple(s for s in secrets if s)
        self._on_commit: Callable[[sqlite3.Connection], None] | None = None
        self._buffer: list[tuple[str, dict[str, Any]]] = []
        self._open_delta: dict[str, Any] | None = None  # the last buffered delta, still raw (merging)
        self._lock = anyio.Lock()
        self._wake = anyio.Event()
        self._closed = False
        self.committed = 0

    def on_commit(self, fn: Callable[[sqlite3.Connection], None]) -> None:
        """Run ``fn(conn)`` in every batch's transaction (the run row's progress counters)."""
        self._on_commit = fn

    def add_secrets(self, secrets: Iterable[str]) -> None:
        """More values to cut out of every event from now on (a plugin secret learnt when its result is recorded)."""
        new = tuple(s for s in secrets if s and s not in self.secrets)
        if new:
            self.secrets += new

    def sanitize(self, value: Any, max_chars: int | None = MAX_STRING_CHARS) -> Any:
        return sanitize(value, secrets=self.secrets, max_chars=max_chars)

    def emit(
        self, event: str, data: Mapping[str, Any], *, clean: bool = False, max_chars: int = MAX_STRING_CHARS
    ) -> None:
        """Buffer one event. Its data is sanitised now, strings cut at ``max_chars`` (``clean``: the caller did it
        already), so later mutation cannot leak into the trace; adjacent deltas of one model call are merged first
        and sanitised as one text (a secret split across two chunks is still found)."""
        if event in _MERGEABLE:
            last = self._open_delta
            if (
                last is not None
                and self._buffer
                and self._buffer[-1][1] is last
                and self._buffer[-1][0] == event
                and last.get("model_call_id") == data.get("model_call_id")
                and len(last["delta"]) + len(data["delta"]) <= MAX_STRING_CHARS
            ):
                last["delta"] += data["delta"]
                return
            self._seal()
            self._open_delta = {"model_call_id": data.get("model_call_id"), "delta": str(data["delta"])}
            self._buffer.append((event, self._open_delta))
        else:
            self._seal()
            self._buffer.append((event, dict(data) if clean else self.sanitize(dict(data), max_chars)))
        self._wake.set()

    def _seal(self) -> None:
        """Sanitise the open delta in place (it is not merged into any more)."""
        if self._open_delta is not None:
            self._open_delta["delta"] = self.sanitize(self._open_delta["delta"])
            self._open_delta = None

    async def emit_bounded(self, event: str, data: Mapping[str, Any]) -> None:
        """:meth:`emit`, then wait for a flush if the buffer is full (back-pressure on a runaway stream)."""
        self.emit(event, data)
        if len(self._buffer) >= MAX_BUFFERED:
            await self.flush()

    async def run_flusher(self) -> None:
        """Commit batches until :meth:`close`; run it in the run's task group."""
        while not self._closed:
            await self._wake.wait()
            self._wake = anyio.Event()
            if self._closed:
                break
            await anyio.sleep(FLUSH_DELAY_S)
            try:
                await self.flush()
            except Exception:
                logger.exception("run %s: writing trace events failed", self.run_id)

    async def flush(self, extra: Callable[[sqlite3.Connection, EventWriter], None] | None = None) -> None:
        """Commit everything buffered (and run ``extra`` in the same transaction).

        Shielded from the moment the batch leaves the buffer until it is committed: a cancelled run never
        drops events it already emitted (the wait is bounded by the database, not by the run)."""
        with anyio.CancelScope(shield=True):
            async with self._lock:
                self._seal()
                batch, self._buffer = self._buffer, []
                if not batch and extra is None:
                    return

                def work(conn: sqlite3.Connection, writer: EventWriter) -> None:
                    for event, data in batch:
                        writer.append(self.run_id, event, data)
                    if self._on_commit is not None:
                        self._on_commit(conn)
                    if extra is not None:
                        extra(conn, writer)

                await self._events.transaction(work)
                self.committed += len(batch)

    async def finish(self, event: str, data: Mapping[str, Any], row: Callable[[sqlite3.Connection], None]) -> None:
        """Commit the buffered events, the terminal ``event`` and the run row's final state, atomically.

        If that transaction fails (a bad event in the buffer), the terminal event and the row are written alone:
        a run always ends."""
        self._closed = True
        self._wake.set()
        clean = self.sanitize(dict(data))

        def extra(conn: sqlite3.Connection, writer: EventWriter) -> None:
            writer.append(self.run_id, event, clean)
            row(conn)

        with anyio.CancelScope(shield=True):
            try:
                await self.flush(extra)
            except Exception:
                logger.exception("run %s: the last trace events could not be written; ending the run", self.run_id)
                self._buffer.clear()
                self._open_delta = None
                await self.flush(extra)

    def close(self) -> None:
        self._closed = True
        self._wake.set()
