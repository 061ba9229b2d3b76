"""The ``index-rebuild`` job: new tables built off to the side from a snapshot of the blocks, what changed
meanwhile applied, then the active name switched in one SQLite transaction (see :mod:`.store`)."""

from __future__ import annotations

import functools
import sqlite3
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from sidecar.core.common import now_iso
from sidecar.core.errors import ConflictError, UnavailableError

from .models import RebuildScope
from .state import TABLE_KEY, BlockRow, IndexState, mismatch, set_meta
from .store import TOKENIZER, TableKind

if TYPE_CHECKING:
    from sidecar.embeddings import Embedder
    from sidecar.jobs import Job, JobContext, JobManager

    from .vectors import VectorCache

REBUILD_KIND = "index-rebuild"
REBUILD_FAILED = "INDEX_REBUILD_FAILED"
"""500: the rebuild broke unexpectedly (``details {exception, incident}``, see :mod:`sidecar.jobs.manager`)."""
REBUILD_BATCH = 256


def _all_blocks(conn: sqlite3.Connection) -> tuple[list[BlockRow], int]:
    """Every block, and the queue position this snapshot covers."""
    rows = conn.execute("SELECT block_id, note_id, text, text_hash FROM kn_blocks ORDER BY rowid").fetchall()
    last = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM rt_queue").fetchone()[0]
    return [tuple(r) for r in rows], int(last)


class Rebuilder:
    def __init__(self, state: IndexState, jobs: JobManager | None = None) -> None:
        self._state = state
        self._jobs = jobs
        self.jobs: dict[str, str] = {}
        """Rebuild job_id -> "queued" | "running" (at most one)."""

    def register(self) -> None:
        if self._jobs is not None:
            self._jobs.register_kind(REBUILD_KIND, concurrency=1, failure_code=REBUILD_FAILED)

    async def rebuild(self, scope: RebuildScope = "vectors") -> Job:
        """Submit the ``index-rebuild`` job (one at a time: 409 INDEX_REBUILD_IN_PROGRESS)."""
        if self._jobs is None:
            raise UnavailableError("Jobs are not available.", code="INDEX_UNAVAILABLE")
        if self.jobs:
            raise ConflictError(
                "An index rebuild is already queued or running.",
                code="INDEX_REBUILD_IN_PROGRESS",
                details={"job_id": next(iter(self.jobs))},
            )
        job_id = f"{REBUILD_KIND}_{uuid.uuid4().hex}"
        self.jobs[job_id] = "queued"
        try:
            return await self._jobs.submit(
                REBUILD_KIND, {"scope": scope}, functools.partial(self._run, scope), job_id=job_id
            )
        except BaseException:
            self.jobs.pop(job_id, None)
            raise

    async def _run(self, scope: RebuildScope, ctx: JobContext) -> dict[str, Any]:
        state = self._state
        self.jobs[ctx.job_id] = "running"
        try:
            kinds: list[TableKind] = {"vectors": ["vec"], "fts": ["fts"], "all": ["fts", "vec"]}[scope]  # type: ignore[assignment]
            result: dict[str, Any] = {"scope": scope}
            async with state.write_lock:
                await state.check_store()
            for kind in kinds:
                result["vectors" if kind == "vec" else "fts"] = await self._rebuild_kind(ctx, kind)
            now = now_iso()
            await state.db.run(lambda conn: set_meta(conn, "last_completed_at", now))
            state.last_completed_at = now
            return result
        finally:
            self.jobs.pop(ctx.job_id, None)

    async def _rebuild_kind(self, ctx: JobContext, kind: TableKind) -> dict[str, Any]:
        state = self._state
        embedder = state.embedder
        info = embedder.info
        dim = info.dimension if kind == "vec" else None
        phase = "embedding" if kind == "vec" else "indexing"
        snapshot, _ = await state.db.read(_all_blocks)
        total = len(snapshot)
        name = state.store.new_name(kind)
        state.building.add(name)
        cache: VectorCache | None = None
        if kind == "vec":
            from .vectors import VectorCache

            cache = VectorCache(info.dimension, capacity=total + 1024)
        swapped = False
        try:
            await anyio.to_thread.run_sync(state.store.create, name, kind, dim)
            await ctx.progress(phase, 0, total, f"{kind}: 0/{total} blocks")
            for start in range(0, total, REBUILD_BATCH):
                ctx.check_cancelled()
                batch = snapshot[start : start + REBUILD_BATCH]
                await state.write(name, kind, batch, embedder, cache, append=True)
                done = start + len(batch)
                await ctx.progress(phase, done, total, f"{kind}: {done}/{total} blocks")
            if kind == "fts":
                await anyio.to_thread.run_sync(state.store.create_fts_index, name)
            ctx.check_cancelled()
            await ctx.progress("swapping", total, total)
            # The swap is shielded: once started, it finishes (or fails) as a whole.
            with anyio.CancelScope(shield=True):
                async with state.write_lock:
                    count, old = await self._swap(kind, name, snapshot, embedder, cache)
                    swapped = True
            if old:
                await anyio.to_thread.run_sync(state.store.drop, old)
            return {"blocks": count, "model": info.as_dict() if kind == "vec" else {"tokenizer": TOKENIZER}}
        finally:
            state.building.discard(name)
            if not swapped:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(state.store.drop, name)

    async def _swap(
        self,
        kind: TableKind,
        name: str,
        snapshot: list[BlockRow],
        embedder: Embedder,
        cache: VectorCache | None,
    ) -> tuple[int, str | None]:
        """Apply what changed since the snapshot to the new table, then make it the active one (one commit)."""
        state = self._state
        if kind == "vec" and state.embedder.info != embedder.info:
            raise mismatch(state.embedder.info.as_dict(), embedder.info.as_dict())
        current, covered = await state.db.read(_all_blocks)
        seen = {r[0]: r[3] for r in snapshot}
        now_ids = {r[0] for r in current}
        changed = [r for r in current if seen.get(r[0]) != r[3]]
        removed = [bid for bid in seen if bid not in now_ids]
        for start in range(0, len(changed), REBUILD_BATCH):
            await state.write(name, kind, changed[start : start + REBUILD_BATCH], embedder, cache, append=False)
        if removed:
            await anyio.to_thread.run_sync(state.store.delete, name, removed)
            if cache is not None:
                cache.delete(removed)
        await anyio.to_thread.run_sync(functools.partial(state.store.maybe_optimize, name, force=True))
        old = state.meta.get(TABLE_KEY[kind])
        info = embedder.info.as_dict()

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM rt_state WHERE kind = ?", (kind,))
            conn.executemany(
                "INSERT INTO rt_state (kind, block_id, hash) VALUES (?, ?, ?)", [(kind, r[0], r[3]) for r in current]
            )
            conn.execute("DELETE FROM rt_queue WHERE kind = ? AND seq <= ?", (kind, covered))
            set_meta(conn, TABLE_KEY[kind], name)
            if kind == "vec":
                set_meta(conn, "vec_model", info)

        await state.db.run(work)
        state.meta[TABLE_KEY[kind]] = name
        if kind == "vec":
            state.meta["vec_model"] = info
            state.cache, state.cache_table = cache, name
        return len(current), old
