"""Index the Knowledge Core's blocks and search them. Knows nothing of JSON-RPC.

Source of truth and bookkeeping (SQLite, namespace ``retrieval``):
  * ``rt_meta``: the active LanceDB table of each kind, the model that filled the vector table, the
    configured embedder, the last completion time;
  * ``rt_state(kind, block_id, hash)``: which text (by hash) each block has in the active table of ``kind``;
  * ``rt_queue(seq, kind, block_id)``: filled by triggers on ``kn_blocks`` (insert, text change, delete; also
    cascaded note deletes), so finding the work costs nothing at 100k blocks. A queued block is written when its
    ``text_hash`` differs from ``rt_state`` (or it has no row), removed when it no longer exists, and dequeued
    up to the sequence that was read (a newer edit stays queued). Only changed blocks are re-embedded.
    (The triggers live in this namespace's migration, so ``KnowledgeService.migrate`` must run first.)

Order of writes: LanceDB first (one commit per batch), then ``rt_state``. A crash between the two leaves the
block dirty and the next sync rewrites it (idempotent upsert). Queries join every hit against ``kn_blocks``
and drop hits whose hash is not the block's current one, so a result never carries text or vectors that no
longer belong to the block, and a deleted block never appears.

Vector and hybrid search answer INDEX_MODEL_MISMATCH while the configured embedder differs from the model
recorded for the vector table (full-text search still works); ``rebuild`` builds new tables off to the side
and switches the active name in one SQLite transaction (see :mod:`.store`).

:class:`RetrievalService` is the facade (setup, status, embedder configuration) over three rooms that share one
:class:`~.state.IndexState`: :mod:`.indexer` (incremental sync), :mod:`.search` (recall, fusion, rerank) and
:mod:`.rebuild` (the ``index-rebuild`` job).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from sidecar.storage.sqlite import Database

from .indexer import Indexer
from .models import (
    EmbedderConfig,
    EmbeddingInfo,
    FtsIndexInfo,
    IndexStatus,
    RebuildScope,
    SearchFilters,
    SearchMode,
    SearchResult,
    VectorIndexInfo,
)
from .profile import RetrievalProfile
from .rebuild import Rebuilder
from .search import Searcher
from .state import IndexState, pending, set_meta
from .store import TOKENIZER

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskGroup

    from sidecar.embeddings import Embedder
    from sidecar.jobs import Job, JobManager

    from .rerank import Reranker

MIGRATIONS: list[str] = [
    """
    CREATE TABLE rt_meta (
        key   TEXT PRIMARY KEY NOT NULL,
        value TEXT NOT NULL
    );
    CREATE TABLE rt_state (
        kind     TEXT NOT NULL,
        block_id TEXT NOT NULL,
        hash     TEXT NOT NULL,
        PRIMARY KEY (kind, block_id)
    );
    CREATE TABLE rt_queue (
        seq      INTEGER PRIMARY KEY AUTOINCREMENT,
        kind     TEXT NOT NULL,
        block_id TEXT NOT NULL
    );
    CREATE INDEX rt_queue_block ON rt_queue (kind, block_id);
    CREATE TRIGGER rt_blocks_inserted AFTER INSERT ON kn_blocks BEGIN
        INSERT INTO rt_queue (kind, block_id) VALUES ('fts', NEW.block_id), ('vec', NEW.block_id);
    END;
    CREATE TRIGGER rt_blocks_changed AFTER UPDATE OF text_hash ON kn_blocks
    WHEN OLD.text_hash IS NOT NEW.text_hash BEGIN
        INSERT INTO rt_queue (kind, block_id) VALUES ('fts', NEW.block_id), ('vec', NEW.block_id);
    END;
    CREATE TRIGGER rt_blocks_deleted AFTER DELETE ON kn_blocks BEGIN
        INSERT INTO rt_queue (kind, block_id) VALUES ('fts', OLD.block_id), ('vec', OLD.block_id);
    END;
    INSERT INTO rt_queue (kind, block_id) SELECT 'fts', block_id FROM kn_blocks;
    INSERT INTO rt_queue (kind, block_id) SELECT 'vec', block_id FROM kn_blocks;
    """,
]


class RetrievalService:
    def __init__(
        self,
        db: Database,
        data_dir: str | Path,
        *,
        jobs: JobManager | None = None,
        default_embedder: EmbedderConfig | None = None,
        embedder_factory: Callable[[EmbedderConfig], Embedder] | None = None,
        reranker: Reranker | None = None,
        task_group: TaskGroup | None = None,
    ) -> None:
        self._db = db
        self._jobs = jobs
        self._default_config = default_embedder or EmbedderConfig()
        self._factory = embedder_factory
        self._state = IndexState(db, data_dir, self._default_config)
        self._indexer = Indexer(self._state, task_group)
        self._searcher = Searcher(self._state, reranker)
        self._rebuilder = Rebuilder(self._state, jobs)

    # -- setup -------------------------------------------------------------------------------------

    def _build(self, config: EmbedderConfig) -> Embedder:
        if self._factory is not None:
            return self._factory(config)
        from .embedders import build_embedder

        return build_embedder(config)

    async def start(self) -> None:
        """Migrate, load the configured embedder (weights load on first use) and register the rebuild job."""
        state = self._state
        await self._db.migrate("retrieval", MIGRATIONS)
        state.meta = await self._db.read(
            lambda conn: {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM rt_meta")}
        )
        if "embedder" in state.meta:
            state.config = EmbedderConfig.model_validate(state.meta["embedder"])
        state.embedder_or_none = self._build(state.config)
        state.last_completed_at = state.meta.get("last_completed_at")
        self._rebuilder.register()

    async def catch_up(self) -> None:
        """Index what a previous run left unindexed (crash, failed embedder). Imports LanceDB only if needed."""
        await self._indexer.catch_up()

    @property
    def embedder(self) -> Embedder:
        return self._state.embedder

    @property
    def embedder_config(self) -> EmbedderConfig:
        return self._state.config

    @property
    def compatible(self) -> bool:
        return self._state.compatible

    # -- the rooms ---------------------------------------------------------------------------------

    async def changed(self) -> None:
        """The Knowledge Core's change listener: index now; if the request is cancelled meanwhile, the
        indexing finishes in the background (the change itself is already committed)."""
        await self._indexer.changed()

    async def wait_background(self) -> None:
        """Wait for the last background sync (started by a cancelled change) to finish."""
        await self._indexer.wait_background()

    async def sync(self) -> None:
        """Bring the active tables up to date with the blocks (never raises; see :meth:`.Indexer.sync`)."""
        await self._indexer.sync()

    async def search(
        self,
        query: str,
        mode: SearchMode = "hybrid",
        profile: RetrievalProfile | str | None = None,
        top_k: int | None = None,
        filters: SearchFilters | Mapping[str, Any] | None = None,
    ) -> SearchResult:
        """Search the blocks (the one entry point for ``search/query``, the agent's tool and benchmarks)."""
        return await self._searcher.search(query, mode, profile, top_k, filters)

    async def rebuild(self, scope: RebuildScope = "vectors") -> Job:
        """Submit the ``index-rebuild`` job (one at a time: 409 INDEX_REBUILD_IN_PROGRESS)."""
        return await self._rebuilder.rebuild(scope)

    # -- status and configuration ------------------------------------------------------------------

    async def status(self) -> IndexStatus:
        def work(conn: sqlite3.Connection) -> dict[str, int]:
            counts = dict(conn.execute("SELECT kind, count(*) FROM rt_state GROUP BY kind").fetchall())
            return {
                "fts": int(counts.get("fts", 0)),
                "vec": int(counts.get("vec", 0)),
                "fts_pending": pending(conn, "fts"),
                "vec_pending": pending(conn, "vec"),
            }

        counts = await self._db.read(work)
        info = self.embedder.info
        model = self._state.meta.get("vec_model")
        rebuilds = self._rebuilder.jobs
        running = [j for j, s in rebuilds.items() if s == "running"]
        if running:
            state = "rebuilding"
        elif self._indexer.syncing:
            state = "indexing"
        elif self._indexer.error:
            state = "error"
        else:
            state = "idle"
        return IndexStatus(
            status=state,
            pending_jobs=len(rebuilds) - len(running),
            active_job_id=running[0] if running else next(iter(rebuilds), None),
            embedding=EmbeddingInfo(**info.as_dict()),
            vector_index=VectorIndexInfo(
                model_id=model["model_id"] if model else None,
                model_version=model["model_version"] if model else None,
                dimension=model["dimension"] if model else None,
                normalization=model["normalization"] if model else None,
                compatible=self.compatible,
                block_count=counts["vec"],
                pending_blocks=counts["vec_pending"],
            ),
            fts_index=FtsIndexInfo(
                tokenizer=TOKENIZER, block_count=counts["fts"], pending_blocks=counts["fts_pending"]
            ),
            embedder=self._state.config,
            last_completed_at=self._state.last_completed_at,
            error_message=self._indexer.error,
        )

    async def configure(self, config: EmbedderConfig) -> IndexStatus:
        """Switch the embedder. An empty vector index adopts it at once; otherwise vector/hybrid search answer
        INDEX_MODEL_MISMATCH until ``rebuild(scope="vectors")`` (switching back makes the index usable again)."""
        embedder = self._build(config)
        probe = getattr(embedder, "probe", None)
        if probe is not None and config.dimension is None:
            dimension = await anyio.to_thread.run_sync(probe)
            config = config.model_copy(update={"dimension": dimension})
        state = self._state
        async with state.write_lock:
            vec_rows = await self._db.read(
                lambda conn: conn.execute("SELECT count(*) FROM rt_state WHERE kind = 'vec'").fetchone()[0]
            )
            old_table = state.meta.get("vec_table") if not vec_rows else None

            def work(conn: sqlite3.Connection) -> None:
                set_meta(conn, "embedder", config.model_dump(mode="json"))
                if old_table:
                    set_meta(conn, "vec_table", None)
                    set_meta(conn, "vec_model", None)

            await self._db.run(work)
            state.config, state.embedder_or_none = config, embedder
            if old_table:
                state.meta.pop("vec_table", None)
                state.meta.pop("vec_model", None)
                state.forget_cache()
                await anyio.to_thread.run_sync(state.store.drop, old_table)
        if self.compatible:
            await self.sync()
        return await self.status()
