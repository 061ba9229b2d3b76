"""The one embedded LanceDB database (``<data_dir>/lancedb``) that memory and retrieval share.

``lancedb`` (and pyarrow) take ~1 s to import, so they are imported on first use, in a worker thread.
Every call into LanceDB is blocking: run it with ``anyio.to_thread.run_sync``.

The connection's caches are bounded (:data:`INDEX_CACHE_BYTES`, :data:`METADATA_CACHE_BYTES`). LanceDB's default
session allows 6 GB of index cache and 1 GB of metadata cache, and every write makes a table version whose
manifest (listing every fragment) is cached: measured, 1,500 single-row adds to one table grew the cache to
557 MB and the process to 829 MB; the stdio fuzz's sidecar grew from ~460 to ~800 MB over 150,000 lines with no
Python object growing. With these bounds the same adds stay at 30 MB of cache (281 MB resident).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import lancedb

LANCEDB_DIRNAME = "lancedb"
INDEX_CACHE_BYTES = 256 << 20
"""Most bytes of vector and full-text index pages the connection keeps (LanceDB's default: 6 GB)."""
METADATA_CACHE_BYTES = 64 << 20
"""Most bytes of manifests, fragment and deletion metadata it keeps (LanceDB's default: 1 GB, which the versions
of a table that is written often fill)."""

_connections: dict[Path, lancedb.DBConnection] = {}
_sessions: dict[Path, lancedb.Session] = {}
_lock = threading.Lock()


def connect(data_dir: str | Path) -> lancedb.DBConnection:
    """The process-wide connection to ``<data_dir>/lancedb`` (created on first use), its caches bounded. Blocking."""
    path = (Path(data_dir) / LANCEDB_DIRNAME).resolve()
    with _lock:
        conn = _connections.get(path)
        if conn is None:
            import lancedb

            path.mkdir(parents=True, exist_ok=True)
            session = lancedb.Session(
                index_cache_size_bytes=INDEX_CACHE_BYTES, metadata_cache_size_bytes=METADATA_CACHE_BYTES
            )
            conn = lancedb.connect(str(path), session=session)
            _connections[path] = conn
            _sessions[path] = session
        return conn


def cache_bytes(data_dir: str | Path) -> int:
    """What the connection to ``<data_dir>/lancedb`` holds in its caches now (0 before it is opened)."""
    session = _sessions.get((Path(data_dir) / LANCEDB_DIRNAME).resolve())
    return int(session.size_bytes) if session is not None else 0
