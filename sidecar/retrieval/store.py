"""The LanceDB side of the index (blocking; call from worker threads).

Two kinds of table, each replaced as a whole by a rebuild (a new table is filled, then the active name in
SQLite is switched in one transaction, so a query sees either the old or the new table, never a mix):

* ``kb_fts_<suffix>``: ``block_id, note_id, text, text_hash`` with a native inverted index on ``text``, ICU
  word segmentation (Chinese without a dictionary download, English words), lower-cased, ASCII-folded, English
  stemming and stop words (they do not touch CJK tokens). Chinese is folded to simplified characters (OpenCC) in
  the indexed text and in the query alike, so either script finds the other (issue 34). Rows added after the
  index was built are still searched (LanceDB scans unindexed fragments); :meth:`maybe_optimize` folds them in.
* ``kb_vec_<suffix>``: ``block_id, note_id, text_hash, vector`` (fixed-size float32 list).

Each write is one LanceDB commit (a new table version); a crash mid-write leaves the previous version, so no
half-written row can ever be read.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from sidecar.core.chinese import fold
from sidecar.storage.lancedb import connect

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa

logger = logging.getLogger(__name__)

TableKind = Literal["fts", "vec"]
PREFIX: dict[TableKind, str] = {"fts": "kb_fts_", "vec": "kb_vec_"}
TOKENIZER = "icu"
_OPTIMIZE_EVERY_WRITES = 16
_OPTIMIZE_EVERY_ROWS = 1_000


def _quote(values: Sequence[str]) -> str:
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)


class IndexStore:
    def __init__(self, data_dir: str | Path) -> None:
        self._data_dir = Path(data_dir)
        self._writes: dict[str, int] = {}
        self._rows: dict[str, int] = {}
        # one handle per table for reads and writes alike: a handle sees its own writes at once, and
        # re-opening per query costs ~0.5 ms (manifest read)
        self._handles: dict[str, lancedb.table.Table] = {}
        self._handles_lock = threading.Lock()

    @property
    def conn(self) -> lancedb.DBConnection:
        """The shared connection. Every path into LanceDB starts here: ``connect`` imports lancedb under a lock,
        and lancedb's circular imports break when two threads import its submodules first at the same time."""
        return connect(self._data_dir)

    @staticmethod
    def new_name(kind: TableKind) -> str:
        return PREFIX[kind] + uuid.uuid4().hex[:12]

    def _open(self, name: str) -> lancedb.table.Table:
        conn = self.conn
        with self._handles_lock:
            tbl = self._handles.get(name)
            if tbl is None:
                tbl = self._handles[name] = conn.open_table(name)
            return tbl

    def table_names(self) -> list[str]:
        names: list[str] = []
        token: str | None = None
        while True:
            page = self.conn.list_tables(page_token=token)
            names += list(page.tables)
            token = page.page_token
            if not token:
                return names

    def exists(self, name: str) -> bool:
        return name in self.table_names()

    def drop(self, name: str) -> None:
        with self._handles_lock:
            self._handles.pop(name, None)
        try:
            self.conn.drop_table(name, ignore_missing=True)  # type: ignore[call-arg]  # LanceDBConnection has it
        except Exception:
            logger.exception("could not drop index table %s", name)

    # -- schemas -----------------------------------------------------------------------------------

    @staticmethod
    def _schema(kind: TableKind, dimension: int | None) -> pa.Schema:
        import pyarrow as pa

        fields = [pa.field("block_id", pa.string(), False), pa.field("note_id", pa.string(), False)]
        if kind == "fts":
            fields += [pa.field("text", pa.string(), False), pa.field("text_hash", pa.string(), False)]
        else:
            assert dimension
            fields += [
                pa.field("text_hash", pa.string(), False),
                pa.field("vector", pa.list_(pa.float32(), dimension), False),
            ]
        return pa.schema(fields)

    def create(self, name: str, kind: TableKind, dimension: int | None = None) -> None:
        tbl = self.conn.create_table(name, schema=self._schema(kind, dimension), mode="overwrite")
        with self._handles_lock:
            self._handles[name] = tbl

    def _rows_table(self, kind: TableKind, rows: dict[str, Any], dimension: int | None) -> pa.Table:
        import pyarrow as pa

        schema = self._schema(kind, dimension)
        cols: dict[str, Any] = dict(rows)
        if kind == "fts":
            cols["text"] = [fold(t) for t in rows["text"]]
        if kind == "vec":
            matrix = np.ascontiguousarray(rows["vector"], dtype=np.float32)
            cols["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), dimension)
        return pa.table(cols, schema=schema)

    # -- writes ------------------------------------------------------------------------------------

    def upsert(self, name: str, kind: TableKind, rows: dict[str, Any], dimension: int | None = None) -> None:
        """Insert or replace rows by ``block_id`` (one commit)."""
        if not rows["block_id"]:
            return
        tbl = self._open(name)
        data = self._rows_table(kind, rows, dimension)
        tbl.merge_insert("block_id").when_matched_update_all().when_not_matched_insert_all().execute(data)
        self._count(name, len(rows["block_id"]))

    def add(self, name: str, kind: TableKind, rows: dict[str, Any], dimension: int | None = None) -> None:
        """Append rows known to be new (rebuild; one commit)."""
        if rows["block_id"]:
            self._open(name).add(self._rows_table(kind, rows, dimension))
            self._count(name, len(rows["block_id"]))

    def delete(self, name: str, block_ids: Sequence[str]) -> None:
        if not block_ids:
            return
        tbl = self._open(name)
        for start in range(0, len(block_ids), 500):
            tbl.delete(f"block_id IN ({_quote(block_ids[start : start + 500])})")
        self._count(name, len(block_ids))

    def _count(self, name: str, rows: int) -> None:
        self._writes[name] = self._writes.get(name, 0) + 1
        self._rows[name] = self._rows.get(name, 0) + rows

    def create_fts_index(self, name: str) -> None:
        tbl = self._open(name)  # first: lancedb itself is imported under the connection lock
        from lancedb.index import FTS

        tbl.create_index(
            "text",
            config=FTS(
                base_tokenizer=TOKENIZER,
                language="English",
                lower_case=True,
                stem=True,
                remove_stop_words=True,
                ascii_folding=True,
            ),
            replace=True,
        )

    def has_fts_index(self, name: str) -> bool:
        return any(getattr(ix, "index_type", "") == "FTS" for ix in self._open(name).list_indices())

    def maybe_optimize(self, name: str, *, force: bool = False) -> bool:
        """Compact small fragments, fold new rows into the indices, drop old versions (after many writes)."""
        if not force and (
            self._writes.get(name, 0) < _OPTIMIZE_EVERY_WRITES and self._rows.get(name, 0) < _OPTIMIZE_EVERY_ROWS
        ):
            return False
        self._writes[name] = self._rows[name] = 0
        self._open(name).optimize(cleanup_older_than=timedelta(minutes=5))
        return True

    # -- reads -------------------------------------------------------------------------------------

    def count(self, name: str) -> int:
        return int(self._open(name).count_rows())

    def fts_search(
        self, name: str, query: str, limit: int, note_ids: Sequence[str] | None = None
    ) -> list[tuple[str, str, float]]:
        """BM25 top ``limit``: ``(block_id, text_hash, score)``; terms are OR-ed (no query syntax)."""
        tbl = self._open(name)  # first: lancedb itself is imported under the connection lock
        from lancedb.query import MatchQuery

        builder = (
            # MatchQuery's options are keyword-only fields with defaults, which mypy's pydantic support misses
            tbl.search(MatchQuery(fold(query), "text"), query_type="fts")  # type: ignore[call-arg]
            .select(["block_id", "text_hash", "_score"])
            .limit(limit)
        )
        if note_ids is not None:
            builder = builder.where(f"note_id IN ({_quote(note_ids)})", prefilter=True)
        table = builder.to_arrow()
        return list(
            zip(
                table.column("block_id").to_pylist(),
                table.column("text_hash").to_pylist(),
                (float(s) for s in table.column("_score").to_pylist()),
                strict=True,
            )
        )

    def load_vectors(self, name: str) -> tuple[list[str], list[str], list[str], np.ndarray]:
        table = self._open(name).to_arrow()
        ids = table.column("block_id").to_pylist()
        column = table.column("vector").combine_chunks()
        dim = column.type.list_size
        matrix = np.asarray(column.values.to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, dim)
        return ids, table.column("note_id").to_pylist(), table.column("text_hash").to_pylist(), matrix
