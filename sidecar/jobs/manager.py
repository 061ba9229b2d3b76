"""The job manager: persisted jobs, per-kind concurrency, progress and terminal events, cancellation.

A job's row (table ``jobs``) and its event log (resource ``job_id`` in :class:`EventLog`) are always
written in the same transaction, so after a crash the status and the last event agree.

Lifecycle: ``submit`` writes the ``queued`` row and a ``Queued`` event and returns at once; the runner
then waits for a slot of its kind (``register_kind(kind, concurrency)``, FIFO), the row turns
``running``, ``runner(ctx)`` runs in the manager's task group under the job's own CancelScope, and the
job task writes exactly one terminal state with ``completed_at`` and its terminal event:

* runner returns ``dict | None`` → ``completed``, event ``Completed`` with the result (or ``{}``);
* runner raises :class:`SidecarError` → ``failed`` with its code, message and details, event
  ``Failed {"error": ErrorInfo}``;
* any other exception → ``failed`` with the kind's ``failure_code`` (``register_kind``; e.g.
  ``EXPORT_RENDER_FAILED``) and details naming the exception's type and an incident id that the log line with
  the traceback carries too — never the exception's text, which may hold paths or keys; a kind without one is
  ``JOB_FAILED`` with a generic message and no details;
* cancelled (``cancel``, ``shutdown``, the task group) → ``cancelled``, event ``Cancelled``. Once a
  cancel was requested, an exception from the runner also counts as cancellation.

Terminal writes are shielded (bounded by ``write_grace_s``) so a cancelled job still records its end.
Work in threads cooperates through ``ctx.check_cancelled()`` (thread-safe), which raises
:class:`JobCancelled`. ``recover()`` at start-up fails jobs a crash left queued/running
(``JOB_INTERRUPTED``): runners live in memory only.
"""

from __future__ import annotations

import builtins
import functools
import json
import logging
import sqlite3
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.from_thread
from anyio.abc import TaskGroup
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from sidecar.core.common import CursorPage, ErrorInfo, OperationResponse, Page, PageInfo, now_iso
from sidecar.core.errors import BadRequestError, ConflictError, NotFoundError, SidecarError, UnavailableError
from sidecar.storage.sqlite import Database
from sidecar.trace.eventlog import EventLog, EventWriter
from sidecar.trace.models import TERMINAL_EVENTS, StoredEvent

from .models import ACTIVE_STATUSES, Job, JobProgress, JobStatus

logger = logging.getLogger(__name__)

Runner = Callable[["JobContext"], Awaitable[Mapping[str, Any] | BaseModel | None]]

DEFAULT_WRITE_GRACE_S = 5.0
JOB_FAILED_MESSAGE = "The job failed unexpectedly."
JOB_INTERRUPTED_MESSAGE = "The job was interrupted because the sidecar stopped."

MIGRATIONS: list[str] = [
    """
    CREATE TABLE jobs (
        job_id       TEXT PRIMARY KEY NOT NULL,
        kind         TEXT NOT NULL,
        status       TEXT NOT NULL,
        params       TEXT NOT NULL DEFAULT '{}',
        progress     TEXT,
        result       TEXT,
        error        TEXT,
        created_at   TEXT NOT NULL,
        started_at   TEXT,
        updated_at   TEXT NOT NULL,
        completed_at TEXT
    );
    CREATE INDEX jobs_kind_created ON jobs (kind, created_at);
    CREATE INDEX jobs_status ON jobs (status);
    """,
    # a domain's list filtered by status (exports/list, media/transcriptions/list, benchmarks/runs/list): count and
    # page newest first from one index, not the status index plus a sort (issue 22: < 5 ms at 10,000 rows)
    "CREATE INDEX jobs_kind_status_created ON jobs (kind, status, created_at);",
]

_Outcome = tuple[JobStatus, dict[str, Any] | None, ErrorInfo | None]
_CANCELLED: _Outcome = (JobStatus.CANCELLED, None, None)


class JobCancelled(Exception):
    """Raised by :meth:`JobContext.check_cancelled` once the job's cancellation was requested."""


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _plain_dict(value: Mapping[str, Any] | BaseModel | None) -> dict[str, Any] | None:
    """A runner's result as a JSON object (validated to serialise), or a TypeError/ValueError."""
    if value is None:
        return None
    if isinstance(value, BaseModel):
        plain = value.model_dump(mode="json")
    elif isinstance(value, Mapping):
        plain = to_jsonable_python(dict(value))
    else:
        raise TypeError(f"a job runner must return a dict or None, not {type(value).__name__}")
    _dumps(plain)
    return plain


def _find(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for sub in exc.exceptions:
            found = _find(sub, kind)
            if found is not None:
                return found
    return None


def _job_from_row(r: sqlite3.Row) -> Job:
    return Job(
        job_id=r["job_id"],
        kind=r["kind"],
        status=JobStatus(r["status"]),
        progress=JobProgress.model_validate_json(r["progress"]) if r["progress"] else None,
        result=json.loads(r["result"]) if r["result"] else None,
        error=ErrorInfo.model_validate_json(r["error"]) if r["error"] else None,
        created_at=r["created_at"],
        started_at=r["started_at"],
        updated_at=r["updated_at"],
        completed_at=r["completed_at"],
    )


class JobContext:
    """What a runner gets: its id and params, progress/event reporting, cancellation."""

    def __init__(self, manager: JobManager, job_id: str, kind: str, params: dict[str, Any]) -> None:
        self.job_id = job_id
        self.kind = kind
        self.params = params
        self._manager = manager
        self._cancel = threading.Event()

    @property
    def cancelled(self) -> bool:
        """True once cancellation was requested (thread-safe)."""
        return self._cancel.is_set()

    def check_cancelled(self) -> None:
        """Raise :class:`JobCancelled` if cancellation was requested. Call it often from worker threads."""
        if self._cancel.is_set():
            raise JobCancelled(self.job_id)

    async def progress(
        self,
        phase: str,
        current: float | None = None,
        total: float | None = None,
        message: str | None = None,
        *,
        percent: float | None = None,
    ) -> JobProgress:
        """Record progress on the job row and append a ``Progress`` event (percent derived if omitted)."""
        if percent is None and current is not None and total:
            percent = round(max(0.0, min(100.0, current * 100.0 / total)), 2)
        prog = JobProgress(phase=phase, current=current, total=total, percent=percent, message=message)
        await self._manager._progress(self.job_id, prog)
        return prog

    async def emit(self, event: str, data: Mapping[str, Any] | None = None) -> StoredEvent:
        """Append a domain event (``ModelLoading``, ...). Terminal events are the manager's to write."""
        if event in TERMINAL_EVENTS:
            raise ValueError(f"{event} is written by the job manager")
        return await self._manager._log.append(self.job_id, event, data)

    def progress_from_thread(
        self, phase: str, current: float | None = None, total: float | None = None, message: str | None = None
    ) -> JobProgress:
        """:meth:`progress` from a worker thread started by ``anyio.to_thread.run_sync``."""
        return anyio.from_thread.run(functools.partial(self.progress, phase, current, total, message))

    def emit_from_thread(self, event: str, data: Mapping[str, Any] | None = None) -> StoredEvent:
        """:meth:`emit` from a worker thread started by ``anyio.to_thread.run_sync``."""
        return anyio.from_thread.run(self.emit, event, data)


@dataclass
class _KindSpec:
    limiter: anyio.CapacityLimiter
    started_event: str | None = None
    failure_code: str | None = None


@dataclass
class _Active:
    job_id: str
    kind: str
    ctx: JobContext
    runner: Runner
    scope: anyio.CancelScope
    done: anyio.Event = field(default_factory=anyio.Event)


class JobManager:
    """Runs jobs in ``task_group`` (the application's long-lived one) and persists them in ``db``."""

    def __init__(
        self,
        db: Database,
        eventlog: EventLog,
        task_group: TaskGroup,
        *,
        write_grace_s: float = DEFAULT_WRITE_GRACE_S,
    ) -> None:
        if eventlog.db is not db:
            raise ValueError("the event log must live in the same database as the jobs")
        self._db = db
        self._log = eventlog
        self._task_group = task_group
        self._write_grace_s = write_grace_s
        self._kinds: dict[str, _KindSpec] = {}
        self._active: dict[str, _Active] = {}
        self._closing = False
        self._migrated = False

    # -- setup -------------------------------------------------------------------------------------

    async def migrate(self) -> None:
        await self._log.migrate()
        await self._db.migrate("jobs", MIGRATIONS)
        self._migrated = True

    async def _ready(self) -> None:
        if not self._migrated:
            await self.migrate()

    def register_kind(
        self, kind: str, concurrency: int = 1, *, started_event: str | None = None, failure_code: str | None = None
    ) -> None:
        """Declare a job kind and how many of its jobs may run at once (re-registering updates it).

        ``started_event`` (optional) is appended when a job of this kind turns ``running``; ``failure_code`` is
        the domain's code for an unexpected exception (see the module doc).
        """
        if not kind or concurrency < 1:
            raise ValueError("kind must not be empty and concurrency must be >= 1")
        spec = self._kinds.get(kind)
        if spec is None:
            self._kinds[kind] = _KindSpec(anyio.CapacityLimiter(concurrency), started_event, failure_code)
        else:
            spec.limiter.total_tokens = concurrency
            spec.started_event = started_event
            spec.failure_code = failure_code

    @property
    def active_count(self) -> int:
        return len(self._active)

    # -- submit and run ----------------------------------------------------------------------------

    async def submit(
        self,
        kind: str,
        params: Mapping[str, Any],
        runner: Runner,
        *,
        job_id: str | None = None,
    ) -> Job:
        """Persist a ``queued`` job (+ ``Queued`` event) and schedule ``runner``; returns at once."""
        if self._closing:
            raise UnavailableError("The sidecar is shutting down.", code="SHUTTING_DOWN")
        if kind not in self._kinds:
            raise ValueError(f"job kind {kind!r} is not registered")
        await self._ready()
        job_id = job_id or f"{kind}_{uuid.uuid4().hex}"
        plain_params = to_jsonable_python(dict(params))
        params_json = _dumps(plain_params)
        now = now_iso()

        def work(conn: sqlite3.Connection, w: EventWriter) -> None:
            try:
                conn.execute(
                    "INSERT INTO jobs (job_id, kind, status, params, created_at, updated_at)"
                    " VALUES (?, ?, 'queued', ?, ?, ?)",
                    (job_id, kind, params_json, now, now),
                )
            except sqlite3.IntegrityError:
                raise ConflictError(
                    "Job already exists.", code="JOB_ALREADY_EXISTS", details={"job_id": job_id}
                ) from None
            w.create_resource(job_id, kind)
            w.append(job_id, "Queued", {"job_id": job_id, "kind": kind})

        # The row and its task go together: a cancelled caller must not leave a queued row behind
        # with nobody to run it.
        with anyio.CancelScope(shield=True):
            await self._log.transaction(work)
            entry = _Active(job_id, kind, JobContext(self, job_id, kind, plain_params), runner, anyio.CancelScope())
            self._active[job_id] = entry
            self._task_group.start_soon(self._run_job, entry, name=f"job {job_id}")
        return Job(job_id=job_id, kind=kind, status=JobStatus.QUEUED, created_at=now, updated_at=now)

    async def _run_job(self, entry: _Active) -> None:
        spec = self._kinds[entry.kind]
        outcome: _Outcome | None = None
        try:
            try:
                with entry.scope:
                    async with spec.limiter:
                        if not await self._mark_running(entry.job_id, spec):
                            return  # ended while queued (cancelled)
                        raw = await entry.runner(entry.ctx)
                        outcome = (JobStatus.COMPLETED, _plain_dict(raw), None)
                if outcome is None:  # our scope was cancelled: cancel() or shutdown()
                    outcome = _CANCELLED
            except Exception as exc:
                outcome = self._classify(entry, exc)
        except BaseException:  # cancelled from outside (the task group is going away)
            if outcome is None:
                outcome = _CANCELLED
            raise
        finally:
            try:
                if outcome is not None:
                    with anyio.move_on_after(self._write_grace_s, shield=True):
                        await self._finish(entry.job_id, outcome)
            except Exception:
                logger.exception("could not record the end of job %s", entry.job_id)
            finally:
                self._active.pop(entry.job_id, None)
                entry.done.set()

    def _classify(self, entry: _Active, exc: Exception) -> _Outcome:
        if entry.ctx.cancelled or _find(exc, JobCancelled) is not None:
            return _CANCELLED
        err = _find(exc, SidecarError)
        if isinstance(err, SidecarError):
            try:
                details = to_jsonable_python(err.details)
                _dumps(details)
            except Exception:
                details = {}
            logger.info("job %s (%s) failed: %s", entry.job_id, entry.kind, err.code)
            return JobStatus.FAILED, None, ErrorInfo(code=err.code, message=err.message, details=details)
        spec = self._kinds.get(entry.kind)
        if spec is None or spec.failure_code is None:
            logger.error("job %s (%s) failed", entry.job_id, entry.kind, exc_info=exc)
            return JobStatus.FAILED, None, ErrorInfo(code="JOB_FAILED", message=JOB_FAILED_MESSAGE)
        incident = f"inc_{uuid.uuid4().hex[:12]}"
        logger.error("job %s (%s) failed, incident %s", entry.job_id, entry.kind, incident, exc_info=exc)
        kind_name = type(exc).__name__
        message = f"The {entry.kind} job failed unexpectedly ({kind_name}; incident {incident} in the sidecar log)."
        details = {"exception": kind_name, "incident": incident}
        return JobStatus.FAILED, None, ErrorInfo(code=spec.failure_code, message=message, details=details)

    async def _mark_running(self, job_id: str, spec: _KindSpec) -> bool:
        now = now_iso()

        def work(conn: sqlite3.Connection, w: EventWriter) -> bool:
            cur = conn.execute(
                "UPDATE jobs SET status = 'running', started_at = ?, updated_at = ?"
                " WHERE job_id = ? AND status = 'queued'",
                (now, now, job_id),
            )
            if cur.rowcount == 0:
                return False
            if spec.started_event:
                w.append(job_id, spec.started_event, {})
            return True

        return await self._log.transaction(work)

    async def _finish(
        self, job_id: str, outcome: _Outcome, *, only_from: frozenset[JobStatus] = ACTIVE_STATUSES
    ) -> bool:
        """Write a terminal state + its event if the job is still in ``only_from``; True if written."""
        status, result, error = outcome
        if status is JobStatus.COMPLETED:
            event, data = "Completed", result or {}
        elif status is JobStatus.FAILED:
            event, data = "Failed", {"error": (error or ErrorInfo(code="JOB_FAILED", message=JOB_FAILED_MESSAGE))}
        else:
            event, data = "Cancelled", {}
        now = now_iso()
        allowed = sorted(s.value for s in only_from)
        marks = ", ".join("?" for _ in allowed)

        def work(conn: sqlite3.Connection, w: EventWriter) -> bool:
            cur = conn.execute(
                "UPDATE jobs SET status = ?, result = ?, error = ?, updated_at = ?, completed_at = ?"
                f" WHERE job_id = ? AND status IN ({marks})",
                (
                    status.value,
                    None if result is None else _dumps(result),
                    None if error is None else error.model_dump_json(),
                    now,
                    now,
                    job_id,
                    *allowed,
                ),
            )
            if cur.rowcount == 0:
                return False
            if not w.ended(job_id):
                w.append(job_id, event, data)
            return True

        return await self._log.transaction(work)

    async def _progress(self, job_id: str, prog: JobProgress) -> None:
        data = prog.model_dump(mode="json")
        encoded = _dumps(data)
        now = now_iso()

        def work(conn: sqlite3.Connection, w: EventWriter) -> None:
            cur = conn.execute(
                "UPDATE jobs SET progress = ?, updated_at = ? WHERE job_id = ? AND status = 'running'",
                (encoded, now, job_id),
            )
            if cur.rowcount:
                w.append(job_id, "Progress", data)

        await self._log.transaction(work)

    # -- queries -----------------------------------------------------------------------------------

    def _not_found(self, job_id: str, code: str) -> NotFoundError:
        return NotFoundError("Job was not found.", code=code, details={"job_id": job_id})

    async def get(self, job_id: str, *, kind: str | None = None, not_found_code: str = "JOB_NOT_FOUND") -> Job:
        """The job; ``NotFoundError`` (``not_found_code``) if unknown or not of ``kind``."""
        await self._ready()

        def work(conn: sqlite3.Connection) -> Job | None:
            row = conn.execute("SELECT * FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
            return None if row is None else _job_from_row(row)

        job = await self._db.read(work)
        if job is None or (kind is not None and job.kind != kind):
            raise self._not_found(job_id, not_found_code)
        return job

    async def get_many(self, job_ids: builtins.list[str]) -> dict[str, Job]:
        """The jobs of ``job_ids`` that exist, by id, in one query (a page of a domain's own list)."""
        if not job_ids:
            return {}
        await self._ready()
        marks = ",".join("?" * len(job_ids))

        def work(conn: sqlite3.Connection) -> dict[str, Job]:
            rows = conn.execute(f"SELECT * FROM jobs WHERE job_id IN ({marks})", job_ids).fetchall()
            return {r["job_id"]: _job_from_row(r) for r in rows}

        return await self._db.read(work)

    async def params_of(
        self, job_id: str, *, kind: str | None = None, not_found_code: str = "JOB_NOT_FOUND"
    ) -> dict[str, Any]:
        """The params the job was submitted with."""
        await self._ready()

        def work(conn: sqlite3.Connection) -> tuple[str, str] | None:
            row = conn.execute("SELECT kind, params FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
            return None if row is None else (row[0], row[1])

        found = await self._db.read(work)
        if found is None or (kind is not None and found[0] != kind):
            raise self._not_found(job_id, not_found_code)
        return json.loads(found[1])

    async def list(
        self,
        kind: str | None = None,
        status: JobStatus | str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> Page[Job]:
        """Jobs, newest first, optionally of one kind and/or status (``processing`` means running)."""
        page, _params = await self.list_with_params(kind, status, limit, offset)
        return page

    async def list_with_params(
        self,
        kind: str | None = None,
        status: JobStatus | str | None = None,
        limit: int = 50,
        offset: int = 0,
        *,
        params_match: Mapping[str, str] | None = None,
    ) -> tuple[Page[Job], builtins.list[dict[str, Any]]]:
        """:meth:`list` plus each job's params, in one query; ``params_match`` keeps the jobs whose params have
        these top-level values (``{"format": "docx"}``), filtered in SQL (issue 21: not a query per job)."""
        if limit < 1 or offset < 0:
            raise BadRequestError("limit must be >= 1 and offset >= 0.")
        try:
            st = None if status is None else JobStatus(status)
        except ValueError:
            raise BadRequestError("Unknown job status.", details={"status": str(status)}) from None
        await self._ready()
        where, args = [], []
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        if st is not None:
            where.append("status = ?")
            args.append(st.value)
        for key, value in (params_match or {}).items():
            if not key.isidentifier():
                raise ValueError(f"not a params key: {key!r}")
            where.append("json_extract(params, ?) = ?")
            args += [f"$.{key}", value]
        clause = f" WHERE {' AND '.join(where)}" if where else ""

        def work(conn: sqlite3.Connection) -> tuple[int, list[Job], list[dict[str, Any]]]:
            total = conn.execute(f"SELECT count(*) FROM jobs{clause}", args).fetchone()[0]
            rows = conn.execute(
                f"SELECT * FROM jobs{clause} ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?",
                [*args, limit, offset],
            ).fetchall()
            return int(total), [_job_from_row(r) for r in rows], [json.loads(r["params"]) for r in rows]

        total, items, params = await self._db.read(work)
        return Page[Job](items=items, page=PageInfo(total=total, limit=limit, offset=offset)), params

    async def events(
        self,
        job_id: str,
        after_sequence: int = 0,
        limit: int = 200,
        *,
        kind: str | None = None,
        not_found_code: str = "JOB_NOT_FOUND",
    ) -> CursorPage[StoredEvent]:
        """The job's events after ``after_sequence`` (seed §4.3 cursor page)."""
        await self.get(job_id, kind=kind, not_found_code=not_found_code)
        return await self._log.read(job_id, after_sequence, limit, not_found_code=not_found_code)

    async def wait(self, job_id: str, *, kind: str | None = None, not_found_code: str = "JOB_NOT_FOUND") -> Job:
        """Wait until the job (if it runs in this process) has finished, then return it."""
        entry = self._active.get(job_id)
        if entry is not None:
            await entry.done.wait()
        return await self.get(job_id, kind=kind, not_found_code=not_found_code)

    # -- cancel, recover, shutdown -----------------------------------------------------------------

    async def cancel(
        self, job_id: str, *, kind: str | None = None, not_found_code: str = "JOB_NOT_FOUND"
    ) -> OperationResponse:
        """Request cancellation. ``accepted`` only means recorded; the job or its event has the end."""
        job = await self.get(job_id, kind=kind, not_found_code=not_found_code)
        if job.status.terminal:
            return OperationResponse(accepted=False, status=job.status.value)
        entry = self._active.get(job_id)
        if entry is not None:
            entry.ctx._cancel.set()
        if job.status is JobStatus.QUEUED and await self._finish(
            job_id, _CANCELLED, only_from=frozenset({JobStatus.QUEUED})
        ):
            if entry is not None:
                entry.scope.cancel()  # it never runs; its task ends without writing
            return OperationResponse(accepted=True, status=JobStatus.CANCELLED.value)
        if entry is not None:
            entry.scope.cancel()  # the job task writes the final state
            return OperationResponse(accepted=True, status=JobStatus.RUNNING.value)
        # Nobody in this process runs it (cannot happen after recover()): end it here.
        wrote = await self._finish(job_id, _CANCELLED)
        current = await self.get(job_id)
        return OperationResponse(accepted=wrote, status=current.status.value)

    async def recover(self) -> builtins.list[str]:
        """At start-up: fail the jobs a crash left ``queued``/``running`` (``JOB_INTERRUPTED``)."""
        await self._ready()
        now = now_iso()
        error = ErrorInfo(code="JOB_INTERRUPTED", message=JOB_INTERRUPTED_MESSAGE)
        error_json = error.model_dump_json()
        mine = set(self._active)

        def work(conn: sqlite3.Connection, w: EventWriter) -> list[str]:
            rows = conn.execute("SELECT job_id, kind FROM jobs WHERE status IN ('queued', 'running')").fetchall()
            recovered: list[str] = []
            for job_id, kind in rows:
                if job_id in mine:
                    continue
                conn.execute(
                    "UPDATE jobs SET status = 'failed', error = ?, updated_at = ?, completed_at = ? WHERE job_id = ?",
                    (error_json, now, now, job_id),
                )
                w.create_resource(job_id, kind, exist_ok=True)
                if not w.ended(job_id):
                    w.append(job_id, "Failed", {"error": error})
                recovered.append(job_id)
            return recovered

        recovered = await self._log.transaction(work)
        if recovered:
            logger.warning("marked %d interrupted job(s) as failed", len(recovered))
        return recovered

    async def shutdown(self, grace_s: float = 5.0) -> None:
        """Refuse new jobs, cancel every queued/running one and wait at most ``grace_s`` for them."""
        self._closing = True
        entries = list(self._active.values())
        for entry in entries:
            entry.ctx._cancel.set()
            entry.scope.cancel()
        with anyio.move_on_after(grace_s):
            for entry in entries:
                await entry.done.wait()
        left = [e.job_id for e in entries if not e.done.is_set()]
        if left:
            logger.warning("jobs still stopping after %.1fs: %s", grace_s, ", ".join(left))
