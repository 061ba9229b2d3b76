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
"""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from sidecar.core.common import now_iso
from sidecar.core.errors import ConflictError, SidecarError, UnavailableError, UpstreamError
from sidecar.knowledge.models import Citation
from sidecar.knowledge.service import normalize_folder
from sidecar.storage.sqlite import Database

from .models import (
    EmbedderConfig,
    EmbeddingInfo,
    FtsIndexInfo,
    IndexStatus,
    RankDetails,
    RebuildScope,
    SearchFilters,
    SearchHit,
    SearchMode,
    SearchResult,
    VectorIndexInfo,
)
from .profile import RetrievalProfile, get_profile
from .store import PREFIX, TOKENIZER, IndexStore, TableKind

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np
    from anyio.abc import TaskGroup

    from sidecar.embeddings import Embedder
    from sidecar.jobs import Job, JobContext, JobManager

    from .rerank import Reranker
    from .vectors import VectorCache

logger = logging.getLogger(__name__)

REBUILD_KIND = "index-rebuild"
SYNC_BATCH = 256
REBUILD_BATCH = 256
EMBED_MAX_CHARS = 4_000
"""A block's vector is the embedding of its first characters: a block split from pasted text can run to megabytes
(USE: ~54 s per MB; remote endpoints refuse inputs over ~8k tokens, failing the whole batch on every retry).
Full-text search always indexes the whole block."""

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

_TABLE_KEY: dict[TableKind, str] = {"fts": "fts_table", "vec": "vec_table"}

BlockRow = tuple[str, str, str, str]  # block_id, note_id, text, text_hash


def _mismatch(embedding: dict[str, Any], index: dict[str, Any] | None) -> ConflictError:
    return ConflictError(
        "The vector index was built with another embedding model; rebuild it (scope vectors) or use fts.",
        code="INDEX_MODEL_MISMATCH",
        details={"embedding": embedding, "vector_index": index},
    )


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


def _pending(conn: sqlite3.Connection, kind: str) -> int:
    """Blocks queued for (re)indexing or removal in the index of ``kind``."""
    return int(conn.execute("SELECT count(DISTINCT block_id) FROM rt_queue WHERE kind = ?", (kind,)).fetchone()[0])


def _all_blocks(conn: sqlite3.Connection) -> tuple[list[BlockRow], int]:
    """Every block, and the queue position this snapshot covers."""
    rows = conn.execute("SELECT block_id, note_id, text, text_hash FROM kn_blocks ORDER BY rowid").fetchall()
    last = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM rt_queue").fetchone()[0]
    return [tuple(r) for r in rows], int(last)


def _set_meta(conn: sqlite3.Connection, key: str, value: Any) -> None:
    if value is None:
        conn.execute("DELETE FROM rt_meta WHERE key = ?", (key,))
    else:
        conn.execute(
            "INSERT INTO rt_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, json.dumps(value, ensure_ascii=False)),
        )


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
        self._tg = task_group
        self._store = IndexStore(data_dir)
        self._jobs = jobs
        self._default_config = default_embedder or EmbedderConfig()
        self._factory = embedder_factory
        self._reranker = reranker
        self._config = self._default_config
        self._embedder: Embedder | None = None
        self._meta: dict[str, Any] = {}
        self._cache: VectorCache | None = None
        self._cache_table: str | None = None
        self._cache_lock = anyio.Lock()
        # while the cache of a table loads: that table's name and the writes committed meanwhile (replayed on it)
        self._cache_loading: str | None = None
        self._cache_backlog: list[Callable[[VectorCache], None]] = []
        self._write_lock = anyio.Lock()
        self._store_checked = False
        self._building: set[str] = set()
        self._rebuild_jobs: dict[str, str] = {}  # job_id -> "queued" | "running"
        self._syncing = False
        self._background: anyio.Event | None = None
        self._error: str | None = None
        self._last_completed_at: str | None = None

    # -- setup -------------------------------------------------------------------------------------

    def _build(self, config: EmbedderConfig) -> Embedder:
        if self._factory is not None:
            return self._factory(config)
        from .embedders import build_embedder

        return build_embedder(config)

    async def start(self) -> None:
        """Migrate, load the configured embedder (weights load on first use) and register the rebuild job."""
        await self._db.migrate("retrieval", MIGRATIONS)
        self._meta = await self._db.read(
            lambda conn: {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM rt_meta")}
        )
        if "embedder" in self._meta:
            self._config = EmbedderConfig.model_validate(self._meta["embedder"])
        self._embedder = self._build(self._config)
        self._last_completed_at = self._meta.get("last_completed_at")
        if self._jobs is not None:
            self._jobs.register_kind(REBUILD_KIND, concurrency=1)

    async def catch_up(self) -> None:
        """Index what a previous run left unindexed (crash, failed embedder). Imports LanceDB only if needed."""
        compatible = self.compatible

        def work(conn: sqlite3.Connection) -> int:
            return _pending(conn, "fts") + (_pending(conn, "vec") if compatible else 0)

        if await self._db.read(work):
            await self.sync()

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            raise UnavailableError("The retrieval service is not started.", code="INDEX_UNAVAILABLE")
        return self._embedder

    @property
    def embedder_config(self) -> EmbedderConfig:
        return self._config

    @property
    def compatible(self) -> bool:
        model = self._meta.get("vec_model")
        return model is None or model == self.embedder.info.as_dict()

    def _reranker_or_default(self) -> Reranker:
        if self._reranker is None:
            from .rerank import CosineTermReranker

            self._reranker = CosineTermReranker()
        return self._reranker

    async def _check_store(self) -> None:
        """Once per process: drop tables a crash left behind (a rebuild's unfinished table, a replaced one)."""
        if self._store_checked:
            return
        active = {self._meta.get("fts_table"), self._meta.get("vec_table")}

        def work() -> list[str]:
            dropped = []
            for name in self._store.table_names():
                if name.startswith(tuple(PREFIX.values())) and name not in active and name not in self._building:
                    self._store.drop(name)
                    dropped.append(name)
            return dropped

        dropped = await anyio.to_thread.run_sync(work)
        if dropped:
            logger.info("dropped %d orphaned index table(s)", len(dropped))
        self._store_checked = True

    # -- incremental indexing ----------------------------------------------------------------------

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
        async with self._write_lock:
            self._syncing = True
            try:
                await self._check_store()
                await self._sync_kind("fts")
                if self.compatible:
                    await self._sync_kind("vec")
                self._error = None
                self._last_completed_at = now_iso()
            except Exception as exc:
                self._error = exc.message if isinstance(exc, SidecarError) else "Indexing failed."
                logger.exception("indexing failed")
            finally:
                self._syncing = False

    async def _ensure_table(self, kind: TableKind) -> str:
        name = self._meta.get(_TABLE_KEY[kind])
        if name:
            return str(name)
        name = self._store.new_name(kind)
        info = self.embedder.info
        dim = info.dimension if kind == "vec" else None
        await anyio.to_thread.run_sync(self._store.create, name, kind, dim)

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM rt_state WHERE kind = ?", (kind,))
            conn.execute("DELETE FROM rt_queue WHERE kind = ?", (kind,))  # a fresh table gets every block
            conn.execute("INSERT INTO rt_queue (kind, block_id) SELECT ?, block_id FROM kn_blocks", (kind,))
            _set_meta(conn, _TABLE_KEY[kind], name)
            if kind == "vec":
                _set_meta(conn, "vec_model", info.as_dict())

        await self._db.run(work)
        self._meta[_TABLE_KEY[kind]] = name
        if kind == "vec":
            self._meta["vec_model"] = info.as_dict()
            self._cache, self._cache_table = None, None
        return name

    def _embed(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        vectors = embedder.embed([t[:EMBED_MAX_CHARS] for t in texts])
        dim = embedder.info.dimension
        if vectors.shape != (len(texts), dim):
            raise UpstreamError(
                "The embedder returned vectors of the wrong shape.",
                code="EMBEDDER_FAILED",
                details={"expected_dimension": dim},
            )
        return vectors

    async def _write(
        self,
        name: str,
        kind: TableKind,
        rows: Sequence[BlockRow],
        embedder: Embedder,
        cache: VectorCache | None,
        *,
        append: bool,
        mirror: bool = False,
    ) -> None:
        """Write ``rows`` into table ``name`` (one LanceDB commit), then mirror them into ``cache`` (with
        ``mirror``: into the active table's cache, see :meth:`_mirror`)."""
        ids = [r[0] for r in rows]
        cols: dict[str, Any] = {"block_id": ids, "note_id": [r[1] for r in rows]}
        if kind == "fts":
            cols["text"] = [r[2] for r in rows]
            cols["text_hash"] = [r[3] for r in rows]
            dim = None
        else:
            vectors = await anyio.to_thread.run_sync(self._embed, embedder, [r[2] for r in rows])
            cols["text_hash"] = [r[3] for r in rows]
            cols["vector"] = vectors
            dim = embedder.info.dimension
        write = self._store.add if append else self._store.upsert
        await anyio.to_thread.run_sync(write, name, kind, cols, dim)
        if cache is not None:
            cache.upsert(ids, cols["note_id"], cols["text_hash"], cols["vector"])
        elif kind == "vec" and mirror:
            self._mirror(name, lambda c: c.upsert(ids, cols["note_id"], cols["text_hash"], cols["vector"]))

    def _mirror(self, name: str, op: Callable[[VectorCache], None]) -> None:
        """Apply a committed write of the active vector table to its in-memory cache: now if it is loaded,
        after the load if it is loading (the load may have read the table before the commit), else never
        (a later load reads it from LanceDB)."""
        if self._cache is not None and self._cache_table == name:
            op(self._cache)
        elif self._cache_loading == name:
            self._cache_backlog.append(op)

    async def _sync_kind(self, kind: TableKind) -> None:
        fts_index_checked = False
        while True:
            name = await self._ensure_table(kind)
            batch = await self._db.read(functools.partial(_next_batch, kind=kind, limit=SYNC_BATCH))
            if not batch.settled:
                return
            dirty, gone = batch.dirty, batch.gone
            if dirty:
                await self._write(name, kind, dirty, self.embedder, None, append=False, mirror=True)
            if gone:
                await anyio.to_thread.run_sync(self._store.delete, name, gone)
                if kind == "vec":

                    def forget(cache: VectorCache, gone: list[str] = gone) -> None:
                        cache.delete(gone)

                    self._mirror(name, forget)

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

            await self._db.run(record)
            if kind == "fts" and not fts_index_checked:
                fts_index_checked = True
                if not await anyio.to_thread.run_sync(self._store.has_fts_index, name):
                    await anyio.to_thread.run_sync(self._store.create_fts_index, name)
            await anyio.to_thread.run_sync(self._store.maybe_optimize, name)

    # -- search ------------------------------------------------------------------------------------

    def _check_compatible(self) -> None:
        if not self.compatible:
            raise _mismatch(self.embedder.info.as_dict(), self._meta.get("vec_model"))

    async def _vector_cache(self) -> VectorCache | None:
        name = self._meta.get("vec_table")
        if not name:
            return None
        if self._cache is not None and self._cache_table == name:
            return self._cache
        async with self._cache_lock:
            if self._cache is not None and self._cache_table == name:
                return self._cache
            from .vectors import VectorCache

            def load() -> VectorCache:
                ids, notes, hashes, matrix = self._store.load_vectors(name)
                cache = VectorCache(matrix.shape[1], capacity=len(ids) + 1024)  # the table's, not the embedder's
                cache.upsert(ids, notes, hashes, matrix)
                return cache

            self._cache_loading, self._cache_backlog = name, []
            try:
                cache = await anyio.to_thread.run_sync(load)
                for op in self._cache_backlog:  # writes committed while it loaded
                    op(cache)
            except Exception:
                if self._meta.get("vec_table") == name:
                    raise
                cache = None  # a rebuild swapped in a new table (and dropped this one) meanwhile
            finally:
                self._cache_loading, self._cache_backlog = None, []
            if cache is None or self._meta.get("vec_table") != name:  # swapped or dropped meanwhile
                return self._cache if self._cache_table == self._meta.get("vec_table") else None
            self._cache, self._cache_table = cache, name
            return cache

    async def _filter_note_ids(self, filters: SearchFilters | None) -> list[str] | None:
        folder = normalize_folder(filters.folder) if filters is not None else None  # "" and "/": the root
        if filters is None or (filters.note_ids is None and folder is None):
            return None

        def work(conn: sqlite3.Connection) -> list[str]:
            if folder is None:
                return list(dict.fromkeys(filters.note_ids or []))
            rows = conn.execute(
                "SELECT note_id FROM kn_notes WHERE folder = ? OR substr(folder, 1, ?) = ?",
                (folder, len(folder) + 1, folder + "/"),
            ).fetchall()
            ids = [r[0] for r in rows]
            if filters.note_ids is not None:
                wanted = set(filters.note_ids)
                ids = [i for i in ids if i in wanted]
            return ids

        return await self._db.read(work)

    async def _fts_hits(self, query: str, limit: int, note_ids: list[str] | None) -> list[tuple[str, str, float]]:
        while name := self._meta.get("fts_table"):
            try:
                return await anyio.to_thread.run_sync(self._store.fts_search, name, query, limit, note_ids)
            except Exception:
                if self._meta.get("fts_table") == name:
                    raise
                # a rebuild swapped in a new table (and dropped this one) under the query: ask the new one
        return []

    async def _vector_hits(
        self, query: str, limit: int, note_ids: list[str] | None, embedder: Embedder
    ) -> tuple[list[tuple[str, str, float]], np.ndarray]:
        """``embedder``: the one whose model the search found compatible (a switch meanwhile does not count)."""
        cache = await self._vector_cache()
        model = self._meta.get("vec_model")
        if model is not None and model != embedder.info.as_dict():  # a rebuild swapped in another model meanwhile
            raise _mismatch(embedder.info.as_dict(), model)

        def work() -> tuple[list[tuple[str, str, float]], np.ndarray]:  # one thread hop for both steps
            qvec = self._embed(embedder, [query])[0]
            return ([] if cache is None else cache.search(qvec, limit, note_ids)), qvec

        return await anyio.to_thread.run_sync(work)

    async def search(
        self,
        query: str,
        mode: SearchMode = "hybrid",
        profile: RetrievalProfile | str | None = None,
        top_k: int | None = None,
        filters: SearchFilters | Mapping[str, Any] | None = None,
    ) -> SearchResult:
        """Search the blocks (the one entry point for ``search/query``, the agent's tool and benchmarks).

        ``profile`` is a profile id or a :class:`RetrievalProfile` (benchmarks vary one); ``top_k`` defaults to
        the profile's ``context_top_k``; ``filters`` narrows to notes (``note_ids``) or a folder subtree.
        """
        started = time.perf_counter()
        if filters is not None and not isinstance(filters, SearchFilters):
            filters = SearchFilters.model_validate(filters)
        prof = profile if isinstance(profile, RetrievalProfile) else get_profile(profile)
        k = top_k or prof.context_top_k
        embedder = self.embedder  # the query is embedded by the model checked here, even if switched meanwhile
        if mode != "fts":
            self._check_compatible()
        note_ids = await self._filter_note_ids(filters)
        fts: list[tuple[str, str, float]] = []
        vec: list[tuple[str, str, float]] = []
        qvec: np.ndarray | None = None
        if note_ids != []:
            fts_limit = max(prof.fts_recall, k)  # every stage sees at least top_k candidates
            vec_limit = max(prof.vector_recall, k)

            async def run_fts() -> None:
                nonlocal fts
                fts = await self._fts_hits(query, fts_limit, note_ids)

            async def run_vec() -> None:
                nonlocal vec, qvec
                vec, qvec = await self._vector_hits(query, vec_limit, note_ids, embedder)

            async with anyio.create_task_group() as tg:
                if mode != "vector":
                    tg.start_soon(run_fts)
                if mode != "fts":
                    tg.start_soon(run_vec)
        hits = await self._rank(query, mode, prof, k, fts, vec, qvec)
        return SearchResult(
            query=query,
            mode=mode,
            profile_id=prof.profile_id,
            items=hits,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )

    async def _hydrate(self, ids: Sequence[str]) -> dict[str, sqlite3.Row]:
        if not ids:
            return {}

        def work(conn: sqlite3.Connection) -> dict[str, sqlite3.Row]:
            marks = ", ".join("?" for _ in ids)
            rows = conn.execute(
                "SELECT b.block_id, b.note_id, b.position, b.kind, b.text, b.text_hash, b.citations,"
                f" n.title, n.folder FROM kn_blocks b JOIN kn_notes n ON n.note_id = b.note_id"
                f" WHERE b.block_id IN ({marks})",
                list(ids),
            ).fetchall()
            return {r["block_id"]: r for r in rows}

        return await self._db.read(work)

    async def _rank(
        self,
        query: str,
        mode: SearchMode,
        prof: RetrievalProfile,
        k: int,
        fts: list[tuple[str, str, float]],
        vec: list[tuple[str, str, float]],
        qvec: np.ndarray | None,
    ) -> list[SearchHit]:
        rows = await self._hydrate(list(dict.fromkeys([h[0] for h in fts] + [h[0] for h in vec])))
        # a hit counts only if it was indexed from the block's current text (no stale or deleted rows)
        fts = [h for h in fts if h[0] in rows and rows[h[0]]["text_hash"] == h[1]]
        vec = [h for h in vec if h[0] in rows and rows[h[0]]["text_hash"] == h[1]]
        details: dict[str, RankDetails] = {}
        for rank, (bid, _, score) in enumerate(fts, 1):
            d = details.setdefault(bid, RankDetails())
            d.fts_rank, d.fts_score = rank, score
        for rank, (bid, _, score) in enumerate(vec, 1):
            d = details.setdefault(bid, RankDetails())
            d.vector_rank, d.vector_score = rank, score
        if mode == "fts":
            order = [(h[0], h[2]) for h in fts]
        elif mode == "vector":
            order = [(h[0], h[2]) for h in vec]
        else:
            for d in details.values():
                d.rrf_score = sum(1.0 / (prof.rrf_k + r) for r in (d.fts_rank, d.vector_rank) if r is not None)
            fused = sorted(
                details,
                key=lambda b: (
                    -(details[b].rrf_score or 0.0),
                    min(r for r in (details[b].fts_rank, details[b].vector_rank) if r is not None),
                ),
            )
            order = [(b, details[b].rrf_score or 0.0) for b in fused]
            if prof.rerank and order:
                order = await self._rerank(query, qvec, order, prof, k, rows, details)
        hits: list[SearchHit] = []
        for bid, score in order:
            if score < prof.score_threshold:
                continue
            r = rows[bid]
            hits.append(
                SearchHit(
                    note_id=r["note_id"],
                    note_title=r["title"],
                    folder=r["folder"],
                    block_id=bid,
                    position=r["position"],
                    kind=r["kind"],
                    text=r["text"],
                    score=score,
                    ranks=details[bid],
                    citations=[Citation.model_validate(c) for c in json.loads(r["citations"])],
                )
            )
            if len(hits) >= k:
                break
        return hits

    async def _rerank(
        self,
        query: str,
        qvec: np.ndarray | None,
        order: list[tuple[str, float]],
        prof: RetrievalProfile,
        k: int,
        rows: dict[str, sqlite3.Row],
        details: dict[str, RankDetails],
    ) -> list[tuple[str, float]]:
        from .rerank import Candidate

        head = order[: max(prof.rerank_candidates, k)]
        cache = self._cache if self._cache_table == self._meta.get("vec_table") else None
        candidates = [
            Candidate(bid, rows[bid]["text"], cache.vector_of(bid) if cache is not None else None) for bid, _ in head
        ]
        reranker = self._reranker_or_default()
        scores = await anyio.to_thread.run_sync(reranker.scores, query, qvec, candidates)
        for (bid, _), s in zip(head, scores, strict=True):
            details[bid].rerank_score = s
        reranked = sorted(zip([b for b, _ in head], scores, strict=True), key=lambda x: -x[1])
        return reranked

    # -- status and configuration ------------------------------------------------------------------

    async def status(self) -> IndexStatus:
        def work(conn: sqlite3.Connection) -> dict[str, int]:
            counts = dict(conn.execute("SELECT kind, count(*) FROM rt_state GROUP BY kind").fetchall())
            return {
                "fts": int(counts.get("fts", 0)),
                "vec": int(counts.get("vec", 0)),
                "fts_pending": _pending(conn, "fts"),
                "vec_pending": _pending(conn, "vec"),
            }

        counts = await self._db.read(work)
        info = self.embedder.info
        model = self._meta.get("vec_model")
        running = [j for j, s in self._rebuild_jobs.items() if s == "running"]
        if running:
            state = "rebuilding"
        elif self._syncing:
            state = "indexing"
        elif self._error:
            state = "error"
        else:
            state = "idle"
        return IndexStatus(
            status=state,
            pending_jobs=len(self._rebuild_jobs) - len(running),
            active_job_id=running[0] if running else next(iter(self._rebuild_jobs), None),
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
            embedder=self._config,
            last_completed_at=self._last_completed_at,
            error_message=self._error,
        )

    async def configure(self, config: EmbedderConfig) -> IndexStatus:
        """Switch the embedder. An empty vector index adopts it at once; otherwise vector/hybrid search answer
        INDEX_MODEL_MISMATCH until ``rebuild(scope="vectors")`` (switching back makes the index usable again)."""
        embedder = self._build(config)
        probe = getattr(embedder, "probe", None)
        if probe is not None and config.dimension is None:
            dimension = await anyio.to_thread.run_sync(probe)
            config = config.model_copy(update={"dimension": dimension})
        async with self._write_lock:
            vec_rows = await self._db.read(
                lambda conn: conn.execute("SELECT count(*) FROM rt_state WHERE kind = 'vec'").fetchone()[0]
            )
            old_table = self._meta.get("vec_table") if not vec_rows else None

            def work(conn: sqlite3.Connection) -> None:
                _set_meta(conn, "embedder", config.model_dump(mode="json"))
                if old_table:
                    _set_meta(conn, "vec_table", None)
                    _set_meta(conn, "vec_model", None)

            await self._db.run(work)
            self._config, self._embedder = config, embedder
            if old_table:
                self._meta.pop("vec_table", None)
                self._meta.pop("vec_model", None)
                self._cache, self._cache_table = None, None
                await anyio.to_thread.run_sync(self._store.drop, old_table)
        if self.compatible:
            await self.sync()
        return await self.status()

    # -- rebuild -----------------------------------------------------------------------------------

    async def rebuild(self, scope: RebuildScope = "vectors") -> Job:
        """Submit the ``index-rebuild`` job (one at a time: 409 INDEX_REBUILD_IN_PROGRESS)."""
        if self._jobs is None:
            raise UnavailableError("Jobs are not available.", code="INDEX_UNAVAILABLE")
        if self._rebuild_jobs:
            raise ConflictError(
                "An index rebuild is already queued or running.",
                code="INDEX_REBUILD_IN_PROGRESS",
                details={"job_id": next(iter(self._rebuild_jobs))},
            )
        job_id = f"{REBUILD_KIND}_{uuid.uuid4().hex}"
        self._rebuild_jobs[job_id] = "queued"
        try:
            return await self._jobs.submit(
                REBUILD_KIND, {"scope": scope}, functools.partial(self._run_rebuild, scope), job_id=job_id
            )
        except BaseException:
            self._rebuild_jobs.pop(job_id, None)
            raise

    async def _run_rebuild(self, scope: RebuildScope, ctx: JobContext) -> dict[str, Any]:
        self._rebuild_jobs[ctx.job_id] = "running"
        try:
            kinds: list[TableKind] = {"vectors": ["vec"], "fts": ["fts"], "all": ["fts", "vec"]}[scope]  # type: ignore[assignment]
            result: dict[str, Any] = {"scope": scope}
            async with self._write_lock:
                await self._check_store()
            for kind in kinds:
                result["vectors" if kind == "vec" else "fts"] = await self._rebuild_kind(ctx, kind)
            now = now_iso()
            await self._db.run(lambda conn: _set_meta(conn, "last_completed_at", now))
            self._last_completed_at = now
            return result
        finally:
            self._rebuild_jobs.pop(ctx.job_id, None)

    async def _rebuild_kind(self, ctx: JobContext, kind: TableKind) -> dict[str, Any]:
        embedder = self.embedder
        info = embedder.info
        dim = info.dimension if kind == "vec" else None
        phase = "embedding" if kind == "vec" else "indexing"
        snapshot, _ = await self._db.read(_all_blocks)
        total = len(snapshot)
        name = self._store.new_name(kind)
        self._building.add(name)
        cache: VectorCache | None = None
        if kind == "vec":
            from .vectors import VectorCache

            cache = VectorCache(info.dimension, capacity=total + 1024)
        swapped = False
        try:
            await anyio.to_thread.run_sync(self._store.create, name, kind, dim)
            await ctx.progress(phase, 0, total, f"{kind}: 0/{total} blocks")
            for start in range(0, total, REBUILD_BATCH):
                ctx.check_cancelled()
                batch = snapshot[start : start + REBUILD_BATCH]
                await self._write(name, kind, batch, embedder, cache, append=True)
                done = start + len(batch)
                await ctx.progress(phase, done, total, f"{kind}: {done}/{total} blocks")
            if kind == "fts":
                await anyio.to_thread.run_sync(self._store.create_fts_index, name)
            ctx.check_cancelled()
            await ctx.progress("swapping", total, total)
            # The swap is shielded: once started, it finishes (or fails) as a whole.
            with anyio.CancelScope(shield=True):
                async with self._write_lock:
                    count, old = await self._swap(kind, name, snapshot, embedder, cache)
                    swapped = True
            if old:
                await anyio.to_thread.run_sync(self._store.drop, old)
            return {"blocks": count, "model": info.as_dict() if kind == "vec" else {"tokenizer": TOKENIZER}}
        finally:
            self._building.discard(name)
            if not swapped:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._store.drop, name)

    async def _swap(
        self,
        kind: TableKind,
        name: str,
        snapshot: list[BlockRow],
        embedder: Embedder,
        cache: VectorCache | None,
    ) -> tuple[int, str | None]:
        """Apply what changed since the snapshot to the new table, then make it the active one (one commit)."""
        if kind == "vec" and self.embedder.info != embedder.info:
            raise _mismatch(self.embedder.info.as_dict(), embedder.info.as_dict())
        current, covered = await self._db.read(_all_blocks)
        seen = {r[0]: r[3] for r in snapshot}
        now_ids = {r[0] for r in current}
        changed = [r for r in current if seen.get(r[0]) != r[3]]
        removed = [bid for bid in seen if bid not in now_ids]
        for start in range(0, len(changed), REBUILD_BATCH):
            await self._write(name, kind, changed[start : start + REBUILD_BATCH], embedder, cache, append=False)
        if removed:
            await anyio.to_thread.run_sync(self._store.delete, name, removed)
            if cache is not None:
                cache.delete(removed)
        await anyio.to_thread.run_sync(functools.partial(self._store.maybe_optimize, name, force=True))
        old = self._meta.get(_TABLE_KEY[kind])
        info = embedder.info.as_dict()

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM rt_state WHERE kind = ?", (kind,))
            conn.executemany(
                "INSERT INTO rt_state (kind, block_id, hash) VALUES (?, ?, ?)", [(kind, r[0], r[3]) for r in current]
            )
            conn.execute("DELETE FROM rt_queue WHERE kind = ? AND seq <= ?", (kind, covered))
            _set_meta(conn, _TABLE_KEY[kind], name)
            if kind == "vec":
                _set_meta(conn, "vec_model", info)

        await self._db.run(work)
        self._meta[_TABLE_KEY[kind]] = name
        if kind == "vec":
            self._meta["vec_model"] = info
            self._cache, self._cache_table = cache, name
        return len(current), old
