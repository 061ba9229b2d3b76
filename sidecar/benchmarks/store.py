"""Benchmark runs in SQLite (namespace ``benchmarks``). A run is also a job (same id): the job row holds status,
progress, error and times; ``bench_runs`` holds what a job does not (dataset, hash, config snapshot, final
metrics) and ``bench_cases`` every finished case, written as it finishes — so a cancelled or failed run keeps the
results it had."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from sidecar.core.common import now_iso
from sidecar.storage.sqlite import Database

from .models import CaseResult

MIGRATIONS: list[str] = [
    """
    CREATE TABLE bench_runs (
        run_id          TEXT PRIMARY KEY NOT NULL,
        kind            TEXT NOT NULL,
        dataset_id      TEXT NOT NULL,
        dataset_hash    TEXT NOT NULL,
        config_snapshot TEXT NOT NULL,
        metrics         TEXT,
        created_at      TEXT NOT NULL
    );
    CREATE INDEX bench_runs_created ON bench_runs (created_at);
    CREATE TABLE bench_cases (
        run_id  TEXT NOT NULL REFERENCES bench_runs (run_id) ON DELETE CASCADE,
        seq     INTEGER NOT NULL,
        case_id TEXT NOT NULL,
        result  TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    """,
]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class RunRows:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def migrate(self) -> None:
        await self._db.migrate("benchmarks", MIGRATIONS)

    async def insert(
        self, run_id: str, kind: str, dataset_id: str, dataset_hash: str, snapshot: dict[str, Any]
    ) -> None:
        now = now_iso()
        await self._db.run(
            lambda conn: conn.execute(
                "INSERT INTO bench_runs (run_id, kind, dataset_id, dataset_hash, config_snapshot, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, kind, dataset_id, dataset_hash, _dumps(snapshot), now),
            )
        )

    async def update_snapshot(self, run_id: str, snapshot: dict[str, Any]) -> None:
        await self._db.run(
            lambda conn: conn.execute(
                "UPDATE bench_runs SET config_snapshot = ? WHERE run_id = ?", (_dumps(snapshot), run_id)
            )
        )

    async def set_metrics(self, run_id: str, metrics: dict[str, Any]) -> None:
        await self._db.run(
            lambda conn: conn.execute("UPDATE bench_runs SET metrics = ? WHERE run_id = ?", (_dumps(metrics), run_id))
        )

    async def add_case(self, run_id: str, seq: int, result: CaseResult) -> None:
        plain = result.model_dump(mode="json")
        await self._db.run(
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO bench_cases (run_id, seq, case_id, result) VALUES (?, ?, ?, ?)",
                (run_id, seq, result.case_id, _dumps(plain)),
            )
        )

    async def get(self, run_id: str) -> dict[str, Any] | None:
        def work(conn: sqlite3.Connection) -> dict[str, Any] | None:
            r = conn.execute("SELECT * FROM bench_runs WHERE run_id = ?", (run_id,)).fetchone()
            if r is None:
                return None
            return {
                "run_id": r["run_id"],
                "kind": r["kind"],
                "dataset_id": r["dataset_id"],
                "dataset_hash": r["dataset_hash"],
                "config_snapshot": json.loads(r["config_snapshot"]),
                "metrics": json.loads(r["metrics"]) if r["metrics"] else None,
            }

        return await self._db.read(work)

    async def cases(self, run_id: str) -> list[CaseResult]:
        rows = await self._db.read(
            lambda conn: conn.execute(
                "SELECT result FROM bench_cases WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
        )
        return [CaseResult.model_validate_json(r[0]) for r in rows]

    async def page(self, kind: str | None, status: str | None, limit: int, offset: int) -> tuple[int, list[str]]:
        """Run ids newest first (status from the job row: a run is its job)."""
        where, args = [], []
        if kind:
            where.append("r.kind = ?")
            args.append(kind)
        if status:
            where.append("j.status = ?")
            args.append(status)
        cond = f"WHERE {' AND '.join(where)}" if where else ""

        def work(conn: sqlite3.Connection) -> tuple[int, list[str]]:
            base = f"FROM bench_runs r JOIN jobs j ON j.job_id = r.run_id {cond}"
            total = conn.execute(f"SELECT count(*) {base}", args).fetchone()[0]
            ids = conn.execute(
                f"SELECT r.run_id {base} ORDER BY r.created_at DESC, r.rowid DESC LIMIT ? OFFSET ?",
                [*args, limit, offset],
            ).fetchall()
            return int(total), [i[0] for i in ids]

        return await self._db.read(work)
