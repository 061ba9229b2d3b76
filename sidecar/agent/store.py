"""Persisted agent runs: one row per run (table ``agent_runs``), large tool results (``agent_artifacts``).

The run's trace is its event log in :class:`~sidecar.trace.eventlog.EventLog` (resource ``run_id``, kind
``agent_run``). A run's row and its terminal event are written in the same transaction, so after a crash the
status and the log agree; :meth:`RunStore.recover` fails the runs a crash left active.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from sidecar.core.common import ErrorInfo, Page, PageInfo, now_iso
from sidecar.core.errors import NotFoundError
from sidecar.storage.sqlite import Database
from sidecar.trace.eventlog import EventLog, EventWriter

from .models import ACTIVE_RUN_STATUSES, RUN_FAILED, AgentRun, Artifact, RunSummary

RESOURCE_KIND = "agent_run"
INTERRUPTED_CODE = "AGENT_RUN_INTERRUPTED"
INTERRUPTED_MESSAGE = "The run was interrupted because the sidecar stopped."

MIGRATIONS: list[str] = [
    """
    CREATE TABLE agent_runs (
        run_id          TEXT PRIMARY KEY NOT NULL,
        session_id      TEXT NOT NULL,
        status          TEXT NOT NULL,
        provider_id     TEXT NOT NULL,
        model           TEXT NOT NULL,
        max_iterations  INTEGER NOT NULL,
        allowed_tools   TEXT,
        token_budget    INTEGER,
        iterations      INTEGER NOT NULL DEFAULT 0,
        summary         TEXT NOT NULL DEFAULT '{}',
        output          TEXT,
        error           TEXT,
        config_snapshot TEXT NOT NULL DEFAULT '{}',
        trace_pruned    INTEGER NOT NULL DEFAULT 0,
        created_at      TEXT NOT NULL,
        started_at      TEXT,
        updated_at      TEXT NOT NULL,
        completed_at    TEXT
    );
    CREATE INDEX agent_runs_created ON agent_runs (created_at);
    CREATE INDEX agent_runs_session ON agent_runs (session_id, created_at);
    CREATE INDEX agent_runs_status ON agent_runs (status);
    CREATE TABLE agent_artifacts (
        artifact_id  TEXT PRIMARY KEY NOT NULL,
        run_id       TEXT NOT NULL REFERENCES agent_runs (run_id) ON DELETE CASCADE,
        tool_call_id TEXT NOT NULL,
        size_bytes   INTEGER NOT NULL,
        content      TEXT NOT NULL,
        created_at   TEXT NOT NULL
    );
    CREATE INDEX agent_artifacts_run ON agent_artifacts (run_id);
    """,
]

_COLUMNS = (
    "run_id, session_id, status, provider_id, model, max_iterations, allowed_tools, token_budget, iterations,"
    " summary, output, error, trace_pruned, created_at, started_at, updated_at, completed_at"
)


class RunNotFound(NotFoundError):
    def __init__(self, run_id: str) -> None:
        super().__init__("Agent run was not found.", code="AGENT_RUN_NOT_FOUND", details={"run_id": run_id})


@dataclass
class RunRecord:
    """What is written when a run is created."""

    run_id: str
    session_id: str
    provider_id: str
    model: str
    max_iterations: int
    allowed_tools: list[str] | None
    token_budget: int | None
    config_snapshot: dict[str, Any] = field(default_factory=dict)

    def new_run(self, created_at: str) -> AgentRun:
        """The run as it was just inserted (``running``, nothing done yet)."""
        return AgentRun(
            run_id=self.run_id,
            session_id=self.session_id,
            status="running",
            provider_id=self.provider_id,
            model=self.model,
            max_iterations=self.max_iterations,
            allowed_tools=self.allowed_tools,
            token_budget=self.token_budget,
            iterations=0,
            summary=RunSummary(),
            output=None,
            error=None,
            pending_permission=None,
            trace_available=True,
            created_at=created_at,
            started_at=created_at,
            updated_at=created_at,
            completed_at=None,
        )


@dataclass
class RunEnd:
    """What is written with a run's terminal event."""

    status: str
    iterations: int
    summary: RunSummary
    output: str | None = None
    error: ErrorInfo | None = None


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class RunStore:
    def __init__(self, db: Database, events: EventLog) -> None:
        self._db = db
        self._events = events

    async def migrate(self) -> None:
        await self._db.migrate("agent", MIGRATIONS)

    # -- writing (inside EventLog transactions, so rows and events commit together) ---------------------------

    @staticmethod
    def insert(conn: sqlite3.Connection, writer: EventWriter, record: RunRecord) -> str:
        now = now_iso()
        writer.create_resource(record.run_id, RESOURCE_KIND)
        conn.execute(
            "INSERT INTO agent_runs (run_id, session_id, status, provider_id, model, max_iterations, allowed_tools,"
            " token_budget, summary, config_snapshot, created_at, started_at, updated_at)"
            " VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.run_id,
                record.session_id,
                record.provider_id,
                record.model,
                record.max_iterations,
                None if record.allowed_tools is None else _dumps(record.allowed_tools),
                record.token_budget,
                RunSummary().model_dump_json(),
                _dumps(record.config_snapshot),
                now,
                now,
                now,
            ),
        )
        return now

    @staticmethod
    def finish(conn: sqlite3.Connection, run_id: str, end: RunEnd) -> None:
        now = now_iso()
        conn.execute(
            "UPDATE agent_runs SET status = ?, iterations = ?, summary = ?, output = ?, error = ?, updated_at = ?,"
            " completed_at = ? WHERE run_id = ?",
            (
                end.status,
                end.iterations,
                end.summary.model_dump_json(),
                end.output,
                None if end.error is None else end.error.model_dump_json(),
                now,
                now,
                run_id,
            ),
        )

    @staticmethod
    def progress(conn: sqlite3.Connection, run_id: str, iterations: int, summary: RunSummary) -> None:
        conn.execute(
            "UPDATE agent_runs SET iterations = ?, summary = ?, updated_at = ? WHERE run_id = ?",
            (iterations, summary.model_dump_json(), now_iso(), run_id),
        )

    @staticmethod
    def add_artifact(conn: sqlite3.Connection, artifact_id: str, run_id: str, tool_call_id: str, content: Any) -> int:
        encoded = _dumps(content)
        size = len(encoded.encode())
        conn.execute(
            "INSERT INTO agent_artifacts (artifact_id, run_id, tool_call_id, size_bytes, content, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (artifact_id, run_id, tool_call_id, size, encoded, now_iso()),
        )
        return size

    async def recover(self) -> list[str]:
        """Fail the runs a crash (or kill -9) left queued/running: row ``failed`` + a ``RunFailed`` event."""
        error = ErrorInfo(code=INTERRUPTED_CODE, message=INTERRUPTED_MESSAGE)

        def work(conn: sqlite3.Connection, writer: EventWriter) -> list[str]:
            marks = ",".join("?" * len(ACTIVE_RUN_STATUSES))
            rows = conn.execute(
                f"SELECT run_id, iterations, summary FROM agent_runs WHERE status IN ({marks})", ACTIVE_RUN_STATUSES
            ).fetchall()
            for run_id, iterations, summary_json in rows:
                summary = RunSummary.model_validate_json(summary_json)
                if writer.exists(run_id) and not writer.ended(run_id):
                    writer.append(run_id, RUN_FAILED, {"error": error.model_dump(), "iterations": iterations})
                RunStore.finish(conn, run_id, RunEnd("failed", iterations, summary, error=error))
            return [r[0] for r in rows]

        return await self._events.transaction(work)

    async def prune(self, before_iso: str) -> int:
        """Remove the trace events of runs finished before ``before_iso`` (their rows and summaries stay)."""

        def work(conn: sqlite3.Connection) -> int:
            ids = [
                r[0]
                for r in conn.execute(
                    "SELECT run_id FROM agent_runs WHERE completed_at IS NOT NULL AND completed_at < ?"
                    " AND trace_pruned = 0",
                    (before_iso,),
                ).fetchall()
            ]
            for run_id in ids:
                conn.execute("DELETE FROM events WHERE resource_id = ?", (run_id,))
                conn.execute("DELETE FROM resources WHERE resource_id = ?", (run_id,))  # subscribe: not found
                conn.execute("DELETE FROM agent_artifacts WHERE run_id = ?", (run_id,))
                conn.execute("UPDATE agent_runs SET trace_pruned = 1 WHERE run_id = ?", (run_id,))
            return len(ids)

        return await self._db.run(work)

    # -- reading -----------------------------------------------------------------------------------------------

    async def get(self, run_id: str) -> AgentRun:
        """The run (``trace_available`` false once retention pruned its trace); :class:`RunNotFound`."""
        return _run(await self._row(run_id, _COLUMNS))

    async def get_with_snapshot(self, run_id: str) -> tuple[AgentRun, dict[str, Any]]:
        """The run and its config snapshot, in one read."""
        row = await self._row(run_id, f"{_COLUMNS}, config_snapshot")
        return _run(row[:-1]), json.loads(row[-1])

    async def _row(self, run_id: str, columns: str) -> Any:
        row = await self._db.read(
            lambda conn: conn.execute(f"SELECT {columns} FROM agent_runs WHERE run_id = ?", (run_id,)).fetchone()
        )
        if row is None:
            raise RunNotFound(run_id)
        return row

    async def list(self, *, status: str | None, session_id: str | None, limit: int, offset: int) -> Page[AgentRun]:
        where: list[str] = []
        args: list[Any] = []
        if status is not None:
            where.append("status = ?")
            args.append(status)
        if session_id is not None:
            where.append("session_id = ?")
            args.append(session_id)
        clause = f" WHERE {' AND '.join(where)}" if where else ""

        def work(conn: sqlite3.Connection) -> tuple[int, list[Any]]:
            total = conn.execute(f"SELECT COUNT(*) FROM agent_runs{clause}", args).fetchone()[0]
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM agent_runs{clause} ORDER BY created_at DESC, run_id DESC LIMIT ? OFFSET ?",
                [*args, limit, offset],
            ).fetchall()
            return int(total), rows

        total, rows = await self._db.read(work)
        return Page[AgentRun](items=[_run(r) for r in rows], page=PageInfo(total=total, limit=limit, offset=offset))

    async def artifact(self, run_id: str, artifact_id: str) -> Artifact:
        row = await self._db.read(
            lambda conn: conn.execute(
                "SELECT artifact_id, run_id, tool_call_id, size_bytes, content, created_at FROM agent_artifacts"
                " WHERE artifact_id = ? AND run_id = ?",
                (artifact_id, run_id),
            ).fetchone()
        )
        if row is None:
            await self.get(run_id)  # AGENT_RUN_NOT_FOUND first
            raise NotFoundError(
                "Artifact was not found.",
                code="ARTIFACT_NOT_FOUND",
                details={"run_id": run_id, "artifact_id": artifact_id},
            )
        return Artifact(
            artifact_id=row[0],
            run_id=row[1],
            tool_call_id=row[2],
            size_bytes=row[3],
            content=json.loads(row[4]),
            created_at=row[5],
        )


def _run(row: Any) -> AgentRun:
    (run_id, session_id, status, provider_id, model, max_iterations, allowed, budget, iterations, summary, output,
     error, pruned, created, started, updated, completed) = row  # fmt: skip
    return AgentRun(
        run_id=run_id,
        session_id=session_id,
        status=status,
        provider_id=provider_id,
        model=model,
        max_iterations=max_iterations,
        allowed_tools=None if allowed is None else json.loads(allowed),
        token_budget=budget,
        iterations=iterations,
        summary=RunSummary.model_validate_json(summary),
        output=output,
        error=None if error is None else ErrorInfo.model_validate_json(error),
        pending_permission=None,
        trace_available=not pruned,
        created_at=created,
        started_at=started,
        updated_at=updated,
        completed_at=completed,
    )
