"""The ``memories`` LanceDB table: schema, filters and the blocking operations (run them in a worker thread).

One table is the only source of truth: every field of a memory, its provenance links and its vector live in one
row, so a memory can never be half written across two stores. Every change that touches several rows (a new
memory and the ones it supersedes; a merged memory, the rows it replaces and the links repointed to it; a delete
that restores what it had superseded) is ONE ``merge_insert`` — one Lance commit, atomic under ``kill -9``: after
a crash a reader sees the table either before or after the change, never in between.

``lancedb``/``pyarrow`` are imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import lancedb.table
    import pyarrow as pa

logger = logging.getLogger(__name__)

TABLE = "memories"
REEMBED_BATCH = 64
COLUMNS = (
    "id",
    "type",
    "content",
    "summary",
    "source",
    "importance",
    "session_id",
    "created_at",
    "expires_at",
    "superseded_by",
    "superseded_at",
    "supersedes",
    "merged_from",
    "embedding_model",
)
Row = dict[str, Any]


def schema(dimension: int) -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("type", pa.string(), nullable=False),
            pa.field("content", pa.string(), nullable=False),
            pa.field("summary", pa.string()),
            pa.field("source", pa.string(), nullable=False),
            pa.field("importance", pa.float64(), nullable=False),
            pa.field("session_id", pa.string()),
            pa.field("created_at", pa.int64(), nullable=False),
            pa.field("expires_at", pa.int64()),
            pa.field("superseded_by", pa.string()),
            pa.field("superseded_at", pa.int64()),
            pa.field("supersedes", pa.list_(pa.string())),
            pa.field("merged_from", pa.list_(pa.string())),
            pa.field("embedding_model", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ]
    )


def quote(value: str) -> str:
    """A SQL string literal for a LanceDB filter."""
    return "'" + value.replace("'", "''") + "'"


def id_list(ids: Iterable[str]) -> str:
    return "(" + ", ".join(quote(i) for i in ids) + ")"


def _same_dimension(db: Any, dimension: int) -> bool:
    """False when ``memories`` exists with vectors of another dimension (then it must be rebuilt)."""
    try:
        existing = db.open_table(TABLE)
    except ValueError:  # not created yet
        return True
    return existing.schema.field("vector").type.list_size == dimension


class MemoryTable:
    """Blocking access to the ``memories`` table. Not thread-safe by itself: the service serialises calls."""

    def __init__(self, table: lancedb.table.Table, dimension: int) -> None:
        self._table = table
        self._schema = schema(dimension)

    @classmethod
    def open(
        cls,
        db: Any,
        dimension: int,
        model_key: str,
        embed: Callable[[Sequence[str]], np.ndarray],
    ) -> MemoryTable:
        """Open (or create) the table; re-embed every row when it was filled by another embedder.

        The re-embedded table replaces the old one in one commit (``mode="overwrite"``), so a query never sees
        vectors of two models side by side, and a crash during the re-embedding leaves the old table intact.
        """
        target = schema(dimension)
        table = db.create_table(TABLE, schema=target, exist_ok=True) if _same_dimension(db, dimension) else None
        if table is not None and not table.count_rows(f"embedding_model != {quote(model_key)}"):
            return cls(table, dimension)
        old = table if table is not None else db.open_table(TABLE)
        rows = old.search().select(list(COLUMNS)).limit(None).to_list()
        logger.warning("re-embedding %d memories for %s", len(rows), model_key)
        for start in range(0, len(rows), REEMBED_BATCH):
            batch = rows[start : start + REEMBED_BATCH]
            vectors = embed([r["content"] for r in batch])
            for row, vec in zip(batch, vectors, strict=True):
                row["vector"] = vec.tolist()
                row["embedding_model"] = model_key
        import pyarrow as pa

        table = db.create_table(TABLE, data=pa.Table.from_pylist(rows, schema=target), mode="overwrite")
        return cls(table, dimension)

    # -- reads ----------------------------------------------------------------------------------------------

    def get(self, memory_id: str) -> Row | None:
        rows = self._table.search().where(f"id = {quote(memory_id)}").select(list(COLUMNS)).limit(1).to_list()
        return rows[0] if rows else None

    def get_many(self, ids: Sequence[str], *, with_vectors: bool = False) -> list[Row]:
        if not ids:
            return []
        cols = [*COLUMNS, "vector"] if with_vectors else list(COLUMNS)
        return self._table.search().where(f"id IN {id_list(ids)}").select(cols).limit(None).to_list()

    def scan(self, where: str | None, *, with_vectors: bool = False) -> list[Row]:
        cols = [*COLUMNS, "vector"] if with_vectors else list(COLUMNS)
        query = self._table.search().select(cols).limit(None)
        if where:
            query = query.where(where)
        return query.to_list()

    def nearest(self, vector: np.ndarray, where: str | None, limit: int) -> list[tuple[Row, float]]:
        """Exact (flat) cosine k-NN over the rows matching ``where`` (prefiltered): ``[(row, similarity)]``."""
        # lancedb types Table.search as the base builder; a vector search returns a LanceVectorQueryBuilder
        builder = self._table.search(vector)
        query = builder.metric("cosine").select([*COLUMNS, "_distance"]).limit(limit)  # type: ignore[attr-defined]
        if where:
            query = query.where(where, prefilter=True)
        out = []
        for row in query.to_list():
            distance = float(row.pop("_distance"))
            out.append((row, 1.0 - distance))
        return out

    def count(self, where: str | None = None) -> int:
        return self._table.count_rows(where)

    # -- writes (each one commit) -----------------------------------------------------------------------------

    def upsert(self, rows: Sequence[Row], *, delete_ids: Sequence[str] = ()) -> None:
        """Insert or replace ``rows`` (by id) and delete ``delete_ids``, all in one commit."""
        if not rows:
            if delete_ids:
                self._table.delete(f"id IN {id_list(delete_ids)}")
            return
        import pyarrow as pa

        data = pa.Table.from_pylist([{k: r.get(k) for k in self._schema.names} for r in rows], schema=self._schema)
        merge = self._table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
        if delete_ids:
            merge = merge.when_not_matched_by_source_delete(f"id IN {id_list(delete_ids)}")
        merge.execute(data)

    def delete(self, where: str) -> None:
        self._table.delete(where)

    def optimize(self) -> None:
        """Compact small fragments (every write adds one) and drop versions older than a day."""
        self._table.optimize(cleanup_older_than=timedelta(days=1))
