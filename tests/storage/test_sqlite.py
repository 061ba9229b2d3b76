"""Database: pragmas, transactions off the event loop, namespaced migrations, corrupt files."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import anyio
import anyio.from_thread
import pytest

from sidecar.core.errors import SidecarError, UnavailableError
from sidecar.storage.sqlite import DB_FILENAME, Database, StorageCorruptError, StorageError, split_sql

pytestmark = pytest.mark.anyio


async def test_open_sets_durability_pragmas(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "data")
    try:
        assert db.path == tmp_path / "data" / DB_FILENAME
        assert db.path.exists()
        assert await db.pragma("journal_mode") == "wal"
        assert await db.pragma("synchronous") == 1  # NORMAL
        assert await db.pragma("foreign_keys") == 1
        assert await db.pragma("busy_timeout") == 5000
        assert await db.integrity_check() == ["ok"]
    finally:
        await db.close()
    assert db.closed


async def test_run_commits_and_rolls_back(tmp_path: Path) -> None:
    db = await Database.open(tmp_path)
    try:
        await db.run(lambda c: c.execute("CREATE TABLE t (x INTEGER)"))
        await db.run(lambda c: c.execute("INSERT INTO t VALUES (1)"))

        def boom(c: sqlite3.Connection) -> None:
            c.execute("INSERT INTO t VALUES (2)")
            raise ValueError("no")

        with pytest.raises(ValueError):
            await db.run(boom)
        rows = await db.read(lambda c: [r[0] for r in c.execute("SELECT x FROM t")])
        assert rows == [1]
    finally:
        await db.close()


async def test_run_executes_in_a_worker_thread_not_on_the_loop(tmp_path: Path) -> None:
    db = await Database.open(tmp_path)
    loop_thread = threading.get_ident()
    entered = anyio.Event()
    release = threading.Event()
    seen: list[int] = []

    def slow(c: sqlite3.Connection) -> int:
        seen.append(threading.get_ident())
        anyio.from_thread.run_sync(entered.set)
        # the loop must stay free while we hold the transaction: it is what sets `release`
        assert release.wait(10)
        return 7

    try:
        result: list[int] = []

        async def call() -> None:
            result.append(await db.run(slow))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(10):
                await entered.wait()
            release.set()
        assert result == [7]
        assert seen[0] != loop_thread
    finally:
        await db.close()


async def test_migrations_are_namespaced_and_applied_once(tmp_path: Path) -> None:
    calls: list[str] = []

    def data_step(c: sqlite3.Connection) -> None:
        calls.append("data")
        c.execute("INSERT INTO a_items (name) VALUES ('seed; with semicolon')")

    steps_a = [
        "CREATE TABLE a_items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
        "CREATE TABLE a_log (msg TEXT);"
        "CREATE TRIGGER a_items_ins AFTER INSERT ON a_items BEGIN INSERT INTO a_log VALUES ('ins'); END;",
        data_step,
    ]
    db = await Database.open(tmp_path)
    try:
        assert await db.migrate("a", steps_a) == 2
        assert await db.migrate("a", steps_a) == 2  # idempotent
        assert calls == ["data"]
        assert await db.migrate("b", ["CREATE TABLE b_items (id INTEGER PRIMARY KEY)"]) == 1
        assert await db.schema_version("a") == 2
        assert await db.schema_version("b") == 1
        assert await db.schema_version("c") == 0
        log = await db.read(lambda c: [r[0] for r in c.execute("SELECT msg FROM a_log")])
        assert log == ["ins"]
        name = await db.read(lambda c: c.execute("SELECT name FROM a_items").fetchone()[0])
        assert name == "seed; with semicolon"
    finally:
        await db.close()

    # later code adds a step: only that one runs
    db = await Database.open(tmp_path)
    try:
        assert await db.migrate("a", [*steps_a, "ALTER TABLE a_items ADD COLUMN extra TEXT"]) == 3
        assert calls == ["data"]
        cols = await db.read(lambda c: [r[1] for r in c.execute("PRAGMA table_info(a_items)")])
        assert "extra" in cols
        # an older build seeing a newer schema refuses clearly
        with pytest.raises(StorageError) as ei:
            await db.migrate("a", steps_a)
        assert ei.value.code == "STORAGE_SCHEMA_TOO_NEW"
    finally:
        await db.close()


async def test_failed_migration_applies_nothing(tmp_path: Path) -> None:
    db = await Database.open(tmp_path)
    try:
        with pytest.raises(sqlite3.OperationalError):
            await db.migrate("x", ["CREATE TABLE x1 (a)", "THIS IS NOT SQL"])
        assert await db.schema_version("x") == 0
        tables = await db.read(lambda c: [r[0] for r in c.execute("SELECT name FROM sqlite_master")])
        assert "x1" not in tables
    finally:
        await db.close()


async def test_foreign_keys_are_enforced(tmp_path: Path) -> None:
    db = await Database.open(tmp_path)
    try:
        await db.migrate(
            "fk",
            ["CREATE TABLE p (id TEXT PRIMARY KEY);CREATE TABLE ch (pid TEXT NOT NULL REFERENCES p (id), v INTEGER)"],
        )
        with pytest.raises(sqlite3.IntegrityError):
            await db.run(lambda c: c.execute("INSERT INTO ch VALUES ('nope', 1)"))
    finally:
        await db.close()


@pytest.mark.parametrize(
    "content",
    [
        b"this is definitely not an sqlite database, just some text" * 200,
        b"\x00\xff" * 4096,
    ],
)
async def test_opening_a_non_sqlite_file_raises_a_clear_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / DB_FILENAME).write_bytes(content)
    with pytest.raises(StorageCorruptError) as ei:
        await Database.open(tmp_path)
    err = ei.value
    assert isinstance(err, SidecarError)
    assert err.code == "STORAGE_CORRUPT"
    assert err.details == {"file": DB_FILENAME}
    assert "sqlite" not in err.message.lower()  # a safe message, not the library's text


async def test_damaged_pages_surface_as_storage_corrupt(tmp_path: Path) -> None:
    db = await Database.open(tmp_path)
    await db.migrate("d", ["CREATE TABLE big (id INTEGER PRIMARY KEY, blob TEXT)"])
    await db.run(lambda c: c.executemany("INSERT INTO big (blob) VALUES (?)", [("x" * 500,)] * 400))
    await db.close()
    # checkpointed on close; smash some pages in the middle (the header stays valid)
    raw = bytearray(db.path.read_bytes())
    assert len(raw) > 4096 * 8
    raw[4096 * 3 : 4096 * 6] = b"\xa5" * (4096 * 3)
    db.path.write_bytes(bytes(raw))
    db = await Database.open(tmp_path)
    try:
        with pytest.raises(StorageCorruptError):
            await db.read(lambda c: c.execute("SELECT count(*), max(length(blob)) FROM big").fetchall())
    finally:
        await db.close()


async def test_closed_database_refuses_work(tmp_path: Path) -> None:
    db = await Database.open(tmp_path)
    await db.close()
    await db.close()  # idempotent
    with pytest.raises(UnavailableError) as ei:
        await db.run(lambda c: None)
    assert ei.value.code == "STORAGE_CLOSED"


async def test_concurrent_runs_are_serialised(tmp_path: Path) -> None:
    db = await Database.open(tmp_path)
    try:
        await db.migrate("c", ["CREATE TABLE counter (n INTEGER NOT NULL); INSERT INTO counter VALUES (0)"])

        def bump(c: sqlite3.Connection) -> None:
            n = c.execute("SELECT n FROM counter").fetchone()[0]
            c.execute("UPDATE counter SET n = ?", (n + 1,))

        async with anyio.create_task_group() as tg:
            for _ in range(100):
                tg.start_soon(db.run, bump)
        assert await db.read(lambda c: c.execute("SELECT n FROM counter").fetchone()[0]) == 100
    finally:
        await db.close()


def test_split_sql() -> None:
    assert split_sql("CREATE TABLE a (x); ; INSERT INTO a VALUES ('a;b');\n") == [
        "CREATE TABLE a (x);",
        "INSERT INTO a VALUES ('a;b');",
    ]
    trig = "CREATE TRIGGER t AFTER INSERT ON a BEGIN INSERT INTO a VALUES (1); INSERT INTO a VALUES (2); END"
    assert split_sql(trig) == [trig + ";"]
    with pytest.raises(ValueError):
        split_sql("CREATE TRIGGER t AFTER INSERT ON a BEGIN INSERT INTO a VALUES (1);")
