"""The shared LanceDB connection keeps its caches bounded: a table written often must not grow the process."""

from __future__ import annotations

import pyarrow as pa

from sidecar.storage import lancedb as store

WRITES = 150
"""Single-row adds: each makes a table version whose manifest the session caches. Measured with LanceDB's
default session: ~6 MB of cache after 150 of them (and growing quadratically), against the 2 MiB this test allows."""


def test_a_table_written_often_stays_within_the_bounded_caches(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(store, "INDEX_CACHE_BYTES", 1 << 20)
    monkeypatch.setattr(store, "METADATA_CACHE_BYTES", 1 << 20)
    monkeypatch.setattr(store, "_connections", {})
    monkeypatch.setattr(store, "_sessions", {})
    assert store.cache_bytes(tmp_path) == 0
    conn = store.connect(tmp_path)
    assert store.connect(tmp_path) is conn
    schema = pa.schema([("id", pa.string()), ("v", pa.list_(pa.float32(), 8)), ("text", pa.string())])
    table = conn.create_table("t", schema=schema)
    for i in range(WRITES):
        table.add([{"id": f"r{i}", "v": [float(i)] * 8, "text": f"row {i}"}])
    assert table.count_rows() == WRITES
    assert 0 < store.cache_bytes(tmp_path) <= 2 << 20
