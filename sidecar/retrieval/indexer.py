"""Incremental indexing: the blocks queued in ``rt_queue`` (by triggers on ``kn_blocks``) written into the active
tables. Only changed blocks are re-embedded; LanceDB is written first, ``rt_state`` second (see :mod:`.service`)."""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from sidecar.core.common import now_iso
from sidecar.core.errors import SidecarError

from .state import TABLE_KEY, BlockRow, IndexState, pending, set_meta
from .store import TableKind

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from .vectors import VectorCache

logger = logging.getLogger(__name__)

SYNC_BATCH = 256


@dataclass
class _Batch:
    """Queued blocks of one kind: what to write, what to delete, and the queue entries they settle."""

    dirty: list[BlockRow]
    gone: list[str]
    settled: dict[str, int]  # block_id -> highest queue seq read


def _in_chunks(conn: sqlite3.Connection, sql: str, head: Sequence[Any], ids: Sequence[str]) -> list[sqlite3.Row]:
    rows: list[sqlite3.Row] = []
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        rows += conn.execute(sql.format(marks=", ".join("?" for _ in chunk)), [*head, *chunk]).fetchall()
    return rows


def _next_batch(conn: sqlite3.Connection, kind: str, limit: int) -> _Batch:
    """The oldest queued blocks of ``kind``, checked against what the active table holds (by text hash)."""
    settled: dict[str, int] = {}
    for seq, block_id in conn.execute(
        "SELECT seq, block_id FROM rt_queue WHERE kind = ? ORDER BY seq LIMIT ?", (kind, limit)
    ):
        settled[block_id] = max(seq, settled.get(block_id, 0))
    ids = list(settled)
    blocks = {
        r[0]: tuple(r)
        for r in _in_chunks(
            conn, "SELECT block_id, note_id, text, text_hash FROM kn_blocks WHERE block_id IN ({marks})", [], ids
        )
    }
    state = {
        r[0]: r[1]
        for r in _in_chunks(
            conn, "SELECT block_id, hash FROM rt_state WHERE kind = ? AND block_id IN ({marks})", [kind], ids
        )
    }
    dirty = [b for bid, b in blocks.items() if state.get(bid) != b[3]]
    gone = [bid for bid in ids if bid not in blocks and bid in state]
    return _Batch(dirty, gone, settled)


class Indexer:
    def __init__(self, state: IndexState, task_group: TaskGroup | None = None) -> None:
        self._state = state
        self._tg = task_group
        self.syncing = False
        self.error: str | None = None
        """The last sync's failure (``index/status`` ``error_message``); None once a sync succeeds."""
        self._background: anyio.Event | None = None

    async def catch_up(self) -> None:
        """Index what a previous run left unindexed (crash, failed embedder). Imports LanceDB only if needed."""
        compatible = self._state.compatible

        def work(conn: sqlite3.Connection) -> int:
            return pending(conn, "fts") + (pending(conn, "vec") if compatible else 0)

        if await self._state.db.read(work):
            await self.sync()

    async def changed(self) -> None:
        """The Knowledge Core's change listener: index now; if the request is cancelled meanwhile, the
        indexing finishes in the background (the change itself is already committed)."""
        try:
            await self.sync()
        except anyio.get_cancelled_exc_class():
            if self._tg is not None:
                done = self._background = anyio.Event()
                self._tg.start_soon(self._sync_then_set, done, name="index sync")
            raise

    async def _sync_then_set(self, done: anyio.Event) -> None:
        try:
            await self.sync()
        finally:
            done.set()

    async def wait_background(self) -> None:
        """Wait for the last background sync (started by a cancelled change) to finish."""
        if self._background is not None:
            await self._background.wait()

    async def sync(self) -> None:
        """Bring the active tables up to date with the blocks (fts always; vectors while compatible).

        Never raises: a failure is kept for ``index/status`` (``error_message``) and retried by the next sync.
        """
        state = self._state
        async with state.write_lock:
            self.syncing = True
            try:
                await state.check_store()
                await self._sync_kind("fts")
                if state.compatible:
                    await self._sync_kind("vec")
                self.error = None
                state.last_completed_at = now_iso()
            except Exception as exc:
                self.error = exc.message if isinstance(exc, SidecarError) else "Indexing failed."
                logger.exception("indexing failed")
            finally:
                self.syncing = False

    async def _ensure_table(self, kind: TableKind) -> str:
        state = self._state
        name = state.meta.get(TABLE_KEY[kind])
        if name:
            return str(name)
        name = state.store.new_name(kind)
        info = state.embedder.info
        dim = info.dimension if kind == "vec" else None
        await anyio.to_thread.run_sync(state.store.create, name, kind, dim)

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM rt_state WHERE kind = ?", (kind,))
            conn.execute("DELETE FROM rt_queue WHERE kind = ?", (kind,))  # a fresh table gets every block
            conn.execute("INSERT INTO rt_queue (kind, block_id) SELECT ?, block_id FROM kn_blocks", (kind,))
            set_meta(conn, TABLE_KEY[kind], name)
            if kind == "vec":
                set_meta(conn, "vec_model", info.as_dict())

        await state.db.run(work)
        state.meta[TABLE_KEY[kind]] = name
        if kind == "vec":
            state.meta["vec_model"] = info.as_dict()
            state.forget_cache()
        return name

    async def _sync_kind(self, kind: TableKind) -> None:
        state = self._state
        batches = 0
        fts_index_built = False  # on this sync's first batch
        while True:
            name = await self._ensure_table(kind)
            batch = await state.db.read(functools.partial(_next_batch, kind=kind, limit=SYNC_BATCH))
            if not batch.settled:
                if fts_index_built and batches > 1:
                    # the index was built on this sync's first batch (so the rest could be searched meanwhile);
                    # built again over every row, a block's BM25 score no longer depends on where the batches
                    # happened to split (rows outside the index are scored on their own statistics)
                    await anyio.to_thread.run_sync(state.store.create_fts_index, name)
                return
            batches += 1
            dirty, gone = batch.dirty, batch.gone
            if dirty:
                await state.write(name, kind, dirty, state.embedder, None, append=False, mirror=True)
            if gone:
                await anyio.to_thread.run_sync(state.store.delete, name, gone)
                if kind == "vec":

                    def forget(cache: VectorCache, gone: list[str] = gone) -> None:
                        cache.delete(gone)

                    state.mirror(name, forget)

            def record(conn: sqlite3.Connection, batch: _Batch = batch) -> None:
                conn.executemany(
                    "INSERT INTO rt_state (kind, block_id, hash) VALUES (?, ?, ?)"
                    " ON CONFLICT (kind, block_id) DO UPDATE SET hash = excluded.hash",
                    [(kind, r[0], r[3]) for r in batch.dirty],
                )
                conn.executemany(
                    "DELETE FROM rt_state WHERE kind = ? AND block_id = ?", [(kind, g) for g in batch.gone]
                )
                # entries queued after the batch was read (a newer edit) stay queued
                conn.executemany(
                    "DELETE FROM rt_queue WHERE kind = ? AND block_id = ? AND seq <= ?",
                    [(kind, bid, seq) for bid, seq in batch.settled.items()],
                )

            await state.db.run(record)
            if kind == "fts" and batches == 1:
                if not await anyio.to_thread.run_sync(state.store.has_fts_index, name):
                    await anyio.to_thread.run_sync(state.store.create_fts_index, name)
                    fts_index_built = True
            await anyio.to_thread.run_sync(state.store.maybe_optimize, name)
