"""The one embedded LanceDB database (``<data_dir>/lancedb``) that memory and retrieval share.

``lancedb`` (and pyarrow) take ~1 s to import, so they are imported on first use, in a worker thread.
Every call into LanceDB is blocking: run it with ``anyio.to_thread.run_sync``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import lancedb

LANCEDB_DIRNAME = "lancedb"

_connections: dict[Path, lancedb.DBConnection] = {}
_lock = threading.Lock()


def connect(data_dir: str | Path) -> lancedb.DBConnection:
    """The process-wide connection to ``<data_dir>/lancedb`` (created on first use). Blocking."""
    path = (Path(data_dir) / LANCEDB_DIRNAME).resolve()
    with _lock:
        conn = _connections.get(path)
        if conn is None:
            import lancedb

            path.mkdir(parents=True, exist_ok=True)
            conn = lancedb.connect(str(path))
            _connections[path] = conn
        return conn
