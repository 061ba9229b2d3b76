"""The sidecar's one SQLite database (``<data_dir>/metona.sqlite3``) and its namespaced migrations.

Durability
----------
The file runs in ``journal_mode=WAL`` with ``synchronous=NORMAL``. In WAL mode a transaction commits by
appending its pages and a commit frame to ``metona.sqlite3-wal`` with ``write()``; with ``NORMAL`` SQLite
does not ``fsync`` on every commit, only when it checkpoints the WAL back into the main file. Once
``COMMIT`` has returned, the commit frame therefore sits at least in the operating system's page cache,
which belongs to the kernel, not to our process: if the sidecar is killed (``kill -9``, a crash, the
Electron host dying) the kernel still writes those pages out, and the next ``open`` replays the WAL up to
the last complete commit frame. So a process kill never loses a committed transaction and never corrupts
the file. Only an operating-system crash or power loss can roll back the last few commits (never
corruption: WAL frames are checksummed and a torn tail is ignored); that is the documented trade of
``NORMAL`` against ``FULL`` and buys several times the commit rate, which the event logs need.
``tests/storage/test_durability.py`` kills a writer with SIGKILL and checks every reported commit.

Threading
---------
One connection (``check_same_thread=False``), guarded by a :class:`threading.Lock`. Every call goes
through :meth:`Database.run`, which runs ``fn(conn)`` inside one transaction in a worker thread
(``anyio.to_thread.run_sync`` with a one-token limiter, so waiting callers queue on the event loop
instead of parking worker threads). The event loop never touches SQLite.

Migrations
----------
``await db.migrate("events", [sql1, sql2, ...])``: each domain owns a namespace; step ``i`` (1-based) is
applied once, in order, and recorded in ``schema_migrations(namespace, version, applied_at)``. Never edit
or reorder a released step; append new ones. A step is SQL text (several statements allowed) or a
callable ``fn(conn)`` for data migrations. All pending steps of one call apply in one transaction.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from sidecar.core.common import now_iso
from sidecar.core.errors import SidecarError, UnavailableError

logger = logging.getLogger(__name__)

T = TypeVar("T")

DB_FILENAME = "metona.sqlite3"
DEFAULT_BUSY_TIMEOUT_MS = 5000

MigrationStep = str | Callable[[sqlite3.Connection], None]

# sqlite3 primary result codes (``exc.sqlite_errorcode & 0xFF``)
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_IOERR = 10
_SQLITE_CORRUPT = 11
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
_SQLITE_NOTADB = 26


class StorageError(SidecarError):
    """The local database failed (I/O, disk full, unusable file)."""

    status = 500
    default_code = "STORAGE_ERROR"


class StorageCorruptError(StorageError):
    """The database file is not SQLite, or is damaged."""

    default_code = "STORAGE_CORRUPT"


def _translate(exc: sqlite3.Error, path: Path) -> SidecarError | None:
    """Map an sqlite3 error that is about the storage itself to a safe SidecarError (else ``None``)."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    details = {"file": path.name}
    if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return StorageCorruptError("The local database file is damaged or is not a Metona database.", details=details)
    if primary in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return UnavailableError("The local database is busy; try again.", code="STORAGE_BUSY", details=details)
    if primary == _SQLITE_FULL:
        return StorageError("The disk holding the local database is full.", code="STORAGE_FULL", details=details)
    if primary in (_SQLITE_IOERR, _SQLITE_CANTOPEN):
        return StorageError("The local database could not be read or written.", details=details)
    return None


def split_sql(script: str) -> list[str]:
    """Split SQL text into complete statements (honours string literals and trigger bodies)."""
    statements: list[str] = []
    buf = ""
    for piece in script.split(";"):
        buf += piece + ";"
        if sqlite3.complete_statement(buf):
            stmt = buf.strip()
            if stmt.strip(";").strip():
                statements.append(stmt)
            buf = ""
    if buf.strip(";").strip():
        raise ValueError("incomplete SQL statement in migration")
    return statements


class Database:
    """One SQLite file shared by every domain. Create with :meth:`open`; always :meth:`close`."""

    def __init__(self, path: Path, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(1)

    # -- lifecycle ---------------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        data_dir: str | Path,
        *,
        filename: str = DB_FILENAME,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    ) -> Database:
        """Open (creating if needed) ``<data_dir>/<filename>``; raise :class:`StorageError` if unusable."""
        db = cls(Path(data_dir) / filename, busy_timeout_ms=busy_timeout_ms)
        await anyio.to_thread.run_sync(db._open_sync, limiter=db._limiter)
        return db

    def _open_sync(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError("The data directory could not be created.", details={"file": self.path.name}) from exc
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(
                str(self.path),
                timeout=self.busy_timeout_ms / 1000,
                isolation_level=None,  # we issue BEGIN/COMMIT ourselves
                check_same_thread=False,  # used from anyio worker threads, one at a time (self._lock)
                cached_statements=256,
            )
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            # Reading the schema forces SQLite to parse the header: a non-SQLite file fails here.
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                logger.warning("SQLite refused WAL mode for %s (got %s)", self.path.name, mode)
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " namespace TEXT NOT NULL, version INTEGER NOT NULL, applied_at TEXT NOT NULL,"
                " PRIMARY KEY (namespace, version))"
            )
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            mapped = _translate(exc, self.path) or StorageError(
                "The local database could not be opened.", details={"file": self.path.name}
            )
            logger.error("opening %s failed: %s", self.path, exc)
            raise mapped from exc
        self._conn = conn

    async def close(self) -> None:
        """Close the connection (waits for the running transaction). Idempotent."""
        if self._conn is None:
            return
        await anyio.to_thread.run_sync(self._close_sync, limiter=self._limiter)

    def _close_sync(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is None:
                return
            try:
                conn.execute("PRAGMA optimize")
            except sqlite3.Error:
                pass
            conn.close()

    @property
    def closed(self) -> bool:
        return self._conn is None

    # -- transactions ------------------------------------------------------------------------------

    async def run(self, fn: Callable[[sqlite3.Connection], T], *, write: bool = True) -> T:
        """Run ``fn(conn)`` inside one transaction in a worker thread and return its result.

        ``write=True`` opens ``BEGIN IMMEDIATE`` (takes the write lock up front, so no upgrade
        deadlock); ``write=False`` opens a deferred read transaction (a consistent snapshot).
        If ``fn`` raises, the transaction rolls back and the exception propagates; storage-level
        sqlite3 errors (corrupt, busy, full, I/O) are turned into :class:`SidecarError`.
        Cancelling the caller waits for ``fn`` to finish (a transaction is never abandoned halfway).
        """
        return await anyio.to_thread.run_sync(self._run_sync, fn, write, limiter=self._limiter)

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Shorthand for ``run(fn, write=False)``."""
        return await self.run(fn, write=False)

    def _run_sync(self, fn: Callable[[sqlite3.Connection], T], write: bool) -> T:
        with self._lock:
            conn = self._conn
            if conn is None:
                raise UnavailableError("The local database is closed.", code="STORAGE_CLOSED")
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    result = fn(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        try:
                            conn.execute("ROLLBACK")
                        except sqlite3.Error:
                            logger.exception("rollback failed")
                    raise
            except sqlite3.Error as exc:
                mapped = _translate(exc, self.path)
                if mapped is None:
                    raise
                logger.error("SQLite error on %s: %s", self.path.name, exc)
                raise mapped from exc
            return result

    # -- migrations --------------------------------------------------------------------------------

    async def migrate(self, namespace: str, steps: Sequence[MigrationStep]) -> int:
        """Apply the pending steps of ``namespace`` (1-based versions); return the resulting version."""
        if not namespace:
            raise ValueError("namespace must not be empty")
        steps = list(steps)

        def work(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT COALESCE(MAX(version), 0) FROM schema_migrations WHERE namespace = ?", (namespace,)
            ).fetchone()
            current = int(row[0])
            if current > len(steps):
                raise StorageError(
                    "The local database was written by a newer version of Metona.",
                    code="STORAGE_SCHEMA_TOO_NEW",
                    details={"namespace": namespace, "version": current, "supported": len(steps)},
                )
            for version in range(current + 1, len(steps) + 1):
                step = steps[version - 1]
                if callable(step):
                    step(conn)
                else:
                    for stmt in split_sql(step):
                        conn.execute(stmt)
                conn.execute(
                    "INSERT INTO schema_migrations (namespace, version, applied_at) VALUES (?, ?, ?)",
                    (namespace, version, now_iso()),
                )
                logger.info("applied migration %s/%d", namespace, version)
            return len(steps)

        return await self.run(work)

    async def schema_version(self, namespace: str) -> int:
        def work(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT COALESCE(MAX(version), 0) FROM schema_migrations WHERE namespace = ?", (namespace,)
            ).fetchone()
            return int(row[0])

        return await self.read(work)

    # -- maintenance -------------------------------------------------------------------------------

    async def integrity_check(self) -> list[str]:
        """``PRAGMA integrity_check``: ``["ok"]`` when the file is sound."""

        def work(conn: sqlite3.Connection) -> list[str]:
            return [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()]

        return await self.read(work)

    async def pragma(self, name: str) -> Any:
        """Read one pragma's value (diagnostics, benchmarks). ``name`` must be a bare identifier."""
        if not name.replace("_", "").isalnum():
            raise ValueError("bad pragma name")

        def work(conn: sqlite3.Connection) -> Any:
            row = conn.execute(f"PRAGMA {name}").fetchone()
            return None if row is None else row[0]

        return await self.read(work)
