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


def _run_row(r: sqlite3.Row) -> dict[str, Any]:
    return {
        "run_id": r["run_id"],
        "kind": r["kind"],
        "dataset_id": r["dataset_id"],
        "dataset_hash": r["dataset_hash"],
        "config_snapshot": json.loads(r["config_snapshot"]),
        "metrics": json.loads(r["metrics"]) if r["metrics"] else None,
    }


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
        return (await self.get_many([run_id])).get(run_id)

    async def get_many(self, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The rows of ``run_ids`` that exist, by id, in one query."""
        if not run_ids:
            return {}
        marks = ",".join("?" * len(run_ids))

        def work(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
            rows = conn.execute(f"SELECT * FROM bench_runs WHERE run_id IN ({marks})", run_ids).fetchall()
            return {r["run_id"]: _run_row(r) for r in rows}

        return await self._db.read(work)

    async def cases(self, run_id: str) -> list[CaseResult]:
        return (await self.cases_many([run_id])).get(run_id, [])

    async def cases_many(self, run_ids: list[str]) -> dict[str, list[CaseResult]]:
        """The finished cases of each of ``run_ids`` in ``seq`` order, in one query (runs without any are absent)."""
        if not run_ids:
            return {}
        marks = ",".join("?" * len(run_ids))
        rows = await self._db.read(
            lambda conn: conn.execute(
                f"SELECT run_id, result FROM bench_cases WHERE run_id IN ({marks}) ORDER BY run_id, seq", run_ids
            ).fetchall()
        )
        out: dict[str, list[CaseResult]] = {}
        for run_id, result in rows:
            out.setdefault(run_id, []).append(CaseResult.model_validate_json(result))
        return out

    async def page(self, job_kinds: list[str], status: str | None, limit: int, offset: int) -> tuple[int, list[str]]:
        """Run ids newest first, from the job rows of ``job_kinds`` (a run is its job: its row is written before the
        job is submitted and never deleted, so the jobs of these kinds are the runs). One index serves both the
        count and the page (``jobs_kind_status_created``), not a join over every run."""
        kinds = ",".join("?" * len(job_kinds))
        where, args = [f"kind IN ({kinds})"], list(job_kinds)
        if status:
            where.append("status = ?")
            args.append(status)
        cond = " AND ".join(where)

        def work(conn: sqlite3.Connection) -> tuple[int, list[str]]:
            total = conn.execute(f"SELECT count(*) FROM jobs WHERE {cond}", args).fetchone()[0]
            ids = conn.execute(
                f"SELECT job_id FROM jobs WHERE {cond} ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?",
                [*args, limit, offset],
            ).fetchall()
            return int(total), [i[0] for i in ids]

        return await self._db.read(work)
