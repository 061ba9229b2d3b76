"""What the indexer, the search and the rebuild share: the bookkeeping in SQLite (``rt_meta``, ``rt_state``,
``rt_queue``; see :mod:`.service`), the LanceDB tables, the embedder, and the in-memory cache of the active vector
table. One :class:`IndexState` per :class:`~sidecar.retrieval.service.RetrievalService`."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from sidecar.core.errors import ConflictError, UnavailableError, UpstreamError
from sidecar.storage.sqlite import Database

from .models import EmbedderConfig
from .store import PREFIX, IndexStore, TableKind

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np

    from sidecar.embeddings import Embedder

    from .vectors import VectorCache

logger = logging.getLogger(__name__)

EMBED_MAX_CHARS = 4_000
"""A block's vector is the embedding of its first characters: a block split from pasted text can run to megabytes
(USE: ~54 s per MB; remote endpoints refuse inputs over ~8k tokens, failing the whole batch on every retry).
Full-text search always indexes the whole block."""

TABLE_KEY: dict[TableKind, str] = {"fts": "fts_table", "vec": "vec_table"}

BlockRow = tuple[str, str, str, str]  # block_id, note_id, text, text_hash


def mismatch(embedding: dict[str, Any], index: dict[str, Any] | None) -> ConflictError:
    return ConflictError(
        "The vector index was built with another embedding model; rebuild it (scope vectors) or use fts.",
        code="INDEX_MODEL_MISMATCH",
        details={"embedding": embedding, "vector_index": index},
    )


def pending(conn: sqlite3.Connection, kind: str) -> int:
    """Blocks queued for (re)indexing or removal in the index of ``kind``."""
    return int(conn.execute("SELECT count(DISTINCT block_id) FROM rt_queue WHERE kind = ?", (kind,)).fetchone()[0])


def set_meta(conn: sqlite3.Connection, key: str, value: Any) -> None:
    if value is None:
        conn.execute("DELETE FROM rt_meta WHERE key = ?", (key,))
    else:
        conn.execute(
            "INSERT INTO rt_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, json.dumps(value, ensure_ascii=False)),
        )


class IndexState:
    def __init__(self, db: Database, data_dir: str | Path, config: EmbedderConfig) -> None:
        self.db = db
        self.store = IndexStore(data_dir)
        self.config = config
        self.embedder_or_none: Embedder | None = None
        self.meta: dict[str, Any] = {}
        """``rt_meta`` as last written: the active table of each kind, ``vec_model``, ``embedder``."""
        self.cache: VectorCache | None = None
        self.cache_table: str | None = None
        self.cache_lock = anyio.Lock()
        # while the cache of a table loads: that table's name and the writes committed meanwhile (replayed on it)
        self.cache_loading: str | None = None
        self.cache_backlog: list[Callable[[VectorCache], None]] = []
        self.write_lock = anyio.Lock()
        self.store_checked = False
        self.building: set[str] = set()
        """Tables a rebuild is filling (not orphans)."""
        self.last_completed_at: str | None = None

    @property
    def embedder(self) -> Embedder:
        if self.embedder_or_none is None:
            raise UnavailableError("The retrieval service is not started.", code="INDEX_UNAVAILABLE")
        return self.embedder_or_none

    @property
    def compatible(self) -> bool:
        model = self.meta.get("vec_model")
        return model is None or model == self.embedder.info.as_dict()

    def check_compatible(self) -> None:
        if not self.compatible:
            raise mismatch(self.embedder.info.as_dict(), self.meta.get("vec_model"))

    def active_cache(self) -> VectorCache | None:
        """The loaded cache, if it is the active vector table's."""
        return self.cache if self.cache_table == self.meta.get("vec_table") else None

    def forget_cache(self) -> None:
        self.cache, self.cache_table = None, None

    async def check_store(self) -> None:
        """Once per process: drop tables a crash left behind (a rebuild's unfinished table, a replaced one)."""
        if self.store_checked:
            return
        active = {self.meta.get("fts_table"), self.meta.get("vec_table")}

        def work() -> list[str]:
            dropped = []
            for name in self.store.table_names():
                if name.startswith(tuple(PREFIX.values())) and name not in active and name not in self.building:
                    self.store.drop(name)
                    dropped.append(name)
            return dropped

        dropped = await anyio.to_thread.run_sync(work)
        if dropped:
            logger.info("dropped %d orphaned index table(s)", len(dropped))
        self.store_checked = True

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        vectors = embedder.embed([t[:EMBED_MAX_CHARS] for t in texts])
        dim = embedder.info.dimension
        if vectors.shape != (len(texts), dim):
            raise UpstreamError(
                "The embedder returned vectors of the wrong shape.",
                code="EMBEDDER_FAILED",
                details={"expected_dimension": dim},
            )
        return vectors

    async def write(
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
        ``mirror``: into the active table's cache, see :meth:`mirror`)."""
        ids = [r[0] for r in rows]
        cols: dict[str, Any] = {"block_id": ids, "note_id": [r[1] for r in rows]}
        if kind == "fts":
            cols["text"] = [r[2] for r in rows]
            cols["text_hash"] = [r[3] for r in rows]
            dim = None
        else:
            vectors = await anyio.to_thread.run_sync(self.embed, embedder, [r[2] for r in rows])
            cols["text_hash"] = [r[3] for r in rows]
            cols["vector"] = vectors
            dim = embedder.info.dimension
        write = self.store.add if append else self.store.upsert
        await anyio.to_thread.run_sync(write, name, kind, cols, dim)
        if cache is not None:
            cache.upsert(ids, cols["note_id"], cols["text_hash"], cols["vector"])
        elif kind == "vec" and mirror:
            self.mirror(name, lambda c: c.upsert(ids, cols["note_id"], cols["text_hash"], cols["vector"]))

    def mirror(self, name: str, op: Callable[[VectorCache], None]) -> None:
        """Apply a committed write of the active vector table to its in-memory cache: now if it is loaded,
        after the load if it is loading (the load may have read the table before the commit), else never
        (a later load reads it from LanceDB)."""
        if self.cache is not None and self.cache_table == name:
            op(self.cache)
        elif self.cache_loading == name:
            self.cache_backlog.append(op)
