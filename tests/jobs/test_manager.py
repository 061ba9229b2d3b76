"""JobManager: lifecycle, failures, cancellation (async and threaded), concurrency, recovery."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest

from sidecar.core.common import ErrorInfo
from sidecar.core.errors import NotFoundError, UnavailableError, UpstreamError
from sidecar.jobs import Job, JobCancelled, JobContext, JobProgress, JobStatus
from sidecar.trace.subscriptions import SubscriptionManager
from tests.jobs.conftest import JobEnv

pytestmark = pytest.mark.anyio

EnvFactory = Callable[..., AbstractAsyncContextManager[JobEnv]]


def events_of(page: Any) -> list[tuple[int, str]]:
    return [(e.sequence, e.event) for e in page.items]


async def test_job_completes_with_progress_and_domain_events(env_factory: EnvFactory) -> None:
    started, release = anyio.Event(), anyio.Event()

    async def runner(ctx: JobContext) -> dict[str, Any]:
        assert ctx.params == {"attachment_id": "att_1"}
        started.set()
        await release.wait()
        await ctx.emit("ModelLoading", {"model": "small"})
        prog = await ctx.progress("transcribing", 42, 84, "正在转写音频")
        assert prog.percent == 50.0
        return {"segments": 3}

    async with env_factory() as env:
        env.jobs.register_kind("transcription")
        job = await env.jobs.submit("transcription", {"attachment_id": "att_1"}, runner)
        assert job.status is JobStatus.QUEUED and job.progress is None and job.completed_at is None
        assert job.created_at == job.updated_at and job.created_at.endswith("Z")
        with anyio.fail_after(5):
            await started.wait()
        running = await env.jobs.get(job.job_id)
        assert running.status is JobStatus.RUNNING and running.started_at is not None
        assert running.completed_at is None
        release.set()
        with anyio.fail_after(5):
            done = await env.jobs.wait(job.job_id)
        assert done.status is JobStatus.COMPLETED
        assert done.result == {"segments": 3} and done.error is None
        assert done.progress == JobProgress(
            phase="transcribing", current=42, total=84, percent=50.0, message="正在转写音频"
        )
        assert done.completed_at is not None and done.completed_at >= done.started_at  # type: ignore[operator]
        page = await env.jobs.events(job.job_id)
        assert events_of(page) == [(1, "Queued"), (2, "ModelLoading"), (3, "Progress"), (4, "Completed")]
        assert page.items[2].data == {
            "phase": "transcribing",
            "current": 42,
            "total": 84,
            "percent": 50.0,
            "message": "正在转写音频",
        }
        assert page.items[3].data == {"segments": 3}
        cursor = await env.jobs.events(job.job_id, after_sequence=2, limit=1)
        assert events_of(cursor) == [(3, "Progress")] and cursor.has_more
        # the wire shape: every field present, nulls kept
        wire = done.model_dump(mode="json")
        assert set(wire) == {
            "job_id",
            "kind",
            "status",
            "progress",
            "result",
            "error",
            "created_at",
            "started_at",
            "updated_at",
            "completed_at",
        }
        assert wire["status"] == "completed" and wire["error"] is None


async def test_sidecar_error_fails_the_job_with_its_code(env_factory: EnvFactory) -> None:
    async def runner(ctx: JobContext) -> None:
        raise UpstreamError(
            "The transcription model is not available.",
            code="TRANSCRIPTION_MODEL_UNAVAILABLE",
            details={"profile_id": "default"},
        )

    async with env_factory() as env:
        env.jobs.register_kind("transcription")
        job = await env.jobs.submit("transcription", {}, runner)
        with anyio.fail_after(5):
            done = await env.jobs.wait(job.job_id)
        assert done.status is JobStatus.FAILED and done.completed_at is not None
        assert done.error == ErrorInfo(
            code="TRANSCRIPTION_MODEL_UNAVAILABLE",
            message="The transcription model is not available.",
            details={"profile_id": "default"},
        )
        assert done.result is None
        page = await env.jobs.events(job.job_id)
        assert events_of(page)[-1] == (2, "Failed")
        assert page.items[-1].data == {"error": done.error.model_dump()}  # type: ignore[union-attr]


async def test_plain_exception_fails_with_job_failed_and_no_leak(
    env_factory: EnvFactory, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "token=sk-SECRET at /home/alice/private"

    async def runner(ctx: JobContext) -> None:
        raise RuntimeError(secret)

    async with env_factory() as env:
        env.jobs.register_kind("export")
        with caplog.at_level(logging.ERROR, logger="sidecar.jobs.manager"):
            job = await env.jobs.submit("export", {}, runner)
            with anyio.fail_after(5):
                done = await env.jobs.wait(job.job_id)
        assert done.status is JobStatus.FAILED and done.completed_at is not None
        assert done.error is not None and done.error.code == "JOB_FAILED"
        assert done.error.details == {}
        page = await env.jobs.events(job.job_id)
        everything = done.model_dump_json() + page.model_dump_json()
        assert "SECRET" not in everything and "alice" not in everything and "RuntimeError" not in everything
        # the traceback went to the log instead
        assert any(r.exc_info and secret in str(r.exc_info[1]) for r in caplog.records)


async def test_runner_returning_a_non_object_fails(env_factory: EnvFactory) -> None:
    async def runner(ctx: JobContext) -> Any:
        return [1, 2, 3]

    async with env_factory() as env:
        env.jobs.register_kind("k")
        job = await env.jobs.submit("k", {}, runner)
        with anyio.fail_after(5):
            done = await env.jobs.wait(job.job_id)
        assert done.status is JobStatus.FAILED and done.error.code == "JOB_FAILED"  # type: ignore[union-attr]


async def test_cancel_queued_job_at_once(env_factory: EnvFactory) -> None:
    started, release = anyio.Event(), anyio.Event()
    ran: list[str] = []

    async def blocker(ctx: JobContext) -> dict[str, Any]:
        started.set()
        await release.wait()
        return {}

    async def never(ctx: JobContext) -> None:
        ran.append(ctx.job_id)

    async with env_factory() as env:
        env.jobs.register_kind("k", concurrency=1)
        first = await env.jobs.submit("k", {}, blocker)
        with anyio.fail_after(5):
            await started.wait()
        second = await env.jobs.submit("k", {}, never)
        resp = await env.jobs.cancel(second.job_id)
        assert (resp.accepted, resp.status) == (True, "cancelled")
        got = await env.jobs.get(second.job_id)  # no waiting: it is final already
        assert got.status is JobStatus.CANCELLED and got.completed_at is not None and got.started_at is None
        assert events_of(await env.jobs.events(second.job_id)) == [(1, "Queued"), (2, "Cancelled")]
        again = await env.jobs.cancel(second.job_id)
        assert (again.accepted, again.status) == (False, "cancelled")
        release.set()
        with anyio.fail_after(5):
            assert (await env.jobs.wait(first.job_id)).status is JobStatus.COMPLETED
            await env.jobs.wait(second.job_id)
        assert ran == []
        assert (await env.jobs.get(second.job_id)).status is JobStatus.CANCELLED
        assert env.jobs.active_count == 0


async def test_cancel_running_async_job(env_factory: EnvFactory) -> None:
    started = anyio.Event()
    cleanup: list[str] = []

    async def runner(ctx: JobContext) -> None:
        await ctx.progress("working", 1, 10)
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cleanup.append("ran")

    async with env_factory() as env:
        env.jobs.register_kind("k")
        job = await env.jobs.submit("k", {}, runner)
        with anyio.fail_after(5):
            await started.wait()
        resp = await env.jobs.cancel(job.job_id)
        assert (resp.accepted, resp.status) == (True, "running")
        with anyio.fail_after(5):
            done = await env.jobs.wait(job.job_id)
        assert done.status is JobStatus.CANCELLED and done.completed_at is not None
        assert done.progress is not None and done.progress.percent == 10.0  # kept; not 100
        assert cleanup == ["ran"]
        assert events_of(await env.jobs.events(job.job_id)) == [(1, "Queued"), (2, "Progress"), (3, "Cancelled")]
        assert (await env.jobs.cancel(job.job_id)).accepted is False


async def test_cancel_running_job_in_a_thread(env_factory: EnvFactory) -> None:
    started = anyio.Event()
    observed: list[str] = []

    def work(ctx: JobContext) -> dict[str, Any]:
        ctx.progress_from_thread("decoding", 0, 100)
        anyio.from_thread.run_sync(started.set)
        waker = threading.Event()
        try:
            while True:  # a CPU-bound loop polling for cancellation between chunks
                ctx.check_cancelled()
                waker.wait(0.005)
        except JobCancelled:
            observed.append("cancelled")
            raise

    async def runner(ctx: JobContext) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(work, ctx)

    async with env_factory() as env:
        env.jobs.register_kind("transcription")
        job = await env.jobs.submit("transcription", {}, runner)
        with anyio.fail_after(5):
            await started.wait()
        assert (await env.jobs.get(job.job_id)).progress.phase == "decoding"  # type: ignore[union-attr]
        resp = await env.jobs.cancel(job.job_id)
        assert resp.accepted
        with anyio.fail_after(5):
            done = await env.jobs.wait(job.job_id)
        assert observed == ["cancelled"]
        assert done.status is JobStatus.CANCELLED and done.completed_at is not None and done.error is None
        assert events_of(await env.jobs.events(job.job_id))[-1] == (3, "Cancelled")


async def test_concurrency_limit_per_kind(env_factory: EnvFactory) -> None:
    running = 0
    peak = 0
    order: list[int] = []
    two_running = anyio.Event()
    release = anyio.Event()

    async def runner(ctx: JobContext) -> dict[str, Any]:
        nonlocal running, peak
        order.append(ctx.params["n"])
        running += 1
        peak = max(peak, running)
        if running == 2:
            two_running.set()
        try:
            await release.wait()
        finally:
            running -= 1
        return {"n": ctx.params["n"]}

    other_done = anyio.Event()

    async def other(ctx: JobContext) -> None:
        other_done.set()

    async with env_factory() as env:
        env.jobs.register_kind("bench", concurrency=2)
        env.jobs.register_kind("export", concurrency=1)
        jobs = [await env.jobs.submit("bench", {"n": n}, runner) for n in range(5)]
        await env.jobs.submit("export", {}, other)
        with anyio.fail_after(5):
            await two_running.wait()
            await other_done.wait()  # another kind is not held up by a full one
        await anyio.wait_all_tasks_blocked()
        assert (await env.jobs.list(kind="bench", status="running")).page.total == 2
        assert (await env.jobs.list(kind="bench", status="queued")).page.total == 3
        release.set()
        with anyio.fail_after(10):
            for j in jobs:
                assert (await env.jobs.wait(j.job_id)).status is JobStatus.COMPLETED
        assert peak == 2
        assert order == [0, 1, 2, 3, 4]  # FIFO


async def test_recover_fails_jobs_left_by_a_crash(env_factory: EnvFactory) -> None:
    started = anyio.Event()

    async def stuck(ctx: JobContext) -> None:
        started.set()
        await anyio.sleep_forever()

    # Run 1: one job running, one queued; then the "process dies": the database goes away before
    # the jobs can record anything, exactly like kill -9.
    ids: list[str] = []
    async with env_factory() as env:
        env.jobs.register_kind("k", concurrency=1)
        ids.append((await env.jobs.submit("k", {}, stuck)).job_id)
        with anyio.fail_after(5):
            await started.wait()
        ids.append((await env.jobs.submit("k", {}, stuck)).job_id)
        await env.db.close()
    # Plus a row whose event log is missing entirely (written by an older build, say).
    async with env_factory(recover=False) as env:
        statuses = {j.job_id: j.status for j in (await env.jobs.list()).items}
        assert statuses == {ids[0]: JobStatus.RUNNING, ids[1]: JobStatus.QUEUED}

        def orphan(conn: Any) -> None:
            conn.execute(
                "INSERT INTO jobs (job_id, kind, status, created_at, updated_at)"
                " VALUES ('k_orphan', 'k', 'running', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')"
            )

        await env.db.run(orphan)
        recovered = await env.jobs.recover()
        assert sorted(recovered) == sorted([*ids, "k_orphan"])
        for job_id in [*ids, "k_orphan"]:
            job = await env.jobs.get(job_id)
            assert job.status is JobStatus.FAILED and job.completed_at is not None
            assert job.error is not None and job.error.code == "JOB_INTERRUPTED"
            last = (await env.jobs.events(job_id)).items[-1]
            assert last.event == "Failed" and last.data["error"]["code"] == "JOB_INTERRUPTED"
        assert await env.jobs.recover() == []  # idempotent


async def test_status_processing_maps_to_running() -> None:
    assert JobStatus("processing") is JobStatus.RUNNING
    job = Job.model_validate(
        {
            "job_id": "transcription_1",
            "kind": "transcription",
            "status": "processing",
            "created_at": "2026-08-31T10:30:00Z",
            "updated_at": "2026-08-31T10:30:00Z",
        }
    )
    assert job.status is JobStatus.RUNNING and job.model_dump(mode="json")["status"] == "running"
    with pytest.raises(ValueError):
        JobStatus("exploded")
    assert {s.value for s in JobStatus} == {"queued", "running", "completed", "failed", "cancelled"}


async def test_list_filters_and_pages(env_factory: EnvFactory) -> None:
    async def ok(ctx: JobContext) -> None:
        return None

    async def boom(ctx: JobContext) -> None:
        raise RuntimeError("x")

    async with env_factory() as env:
        env.jobs.register_kind("a", concurrency=4)
        env.jobs.register_kind("b")
        made = [await env.jobs.submit("a", {"i": i}, ok) for i in range(5)]
        made.append(await env.jobs.submit("b", {}, boom))
        with anyio.fail_after(5):
            for j in made:
                await env.jobs.wait(j.job_id)
        everything = await env.jobs.list()
        assert everything.page.total == 6 and len(everything.items) == 6
        assert [j.job_id for j in everything.items] == [j.job_id for j in reversed(made)]  # newest first
        page = await env.jobs.list(kind="a", limit=2, offset=2)
        assert page.page.model_dump() == {"total": 5, "limit": 2, "offset": 2}
        assert [j.job_id for j in page.items] == [made[2].job_id, made[1].job_id]
        assert (await env.jobs.list(status=JobStatus.FAILED)).items[0].kind == "b"
        assert (await env.jobs.list(status="processing")).page.total == 0
        assert await env.jobs.params_of(made[3].job_id) == {"i": 3}
        assert set(Job.model_fields) <= set(everything.items[0].model_dump())
        dumped = everything.model_dump(mode="json")
        assert set(dumped) == {"items", "page"} and json.dumps(dumped)


async def test_not_found_codes(env_factory: EnvFactory) -> None:
    async def ok(ctx: JobContext) -> None:
        return None

    async with env_factory() as env:
        env.jobs.register_kind("transcription")
        with pytest.raises(NotFoundError) as ei:
            await env.jobs.get("nope")
        assert ei.value.code == "JOB_NOT_FOUND" and ei.value.status == 404
        with pytest.raises(NotFoundError) as ei:
            await env.jobs.get("nope", not_found_code="TRANSCRIPTION_NOT_FOUND")
        assert ei.value.code == "TRANSCRIPTION_NOT_FOUND"
        job = await env.jobs.submit("transcription", {}, ok)
        with pytest.raises(NotFoundError) as ei:  # another domain cannot see it
            await env.jobs.get(job.job_id, kind="export", not_found_code="EXPORT_NOT_FOUND")
        assert ei.value.code == "EXPORT_NOT_FOUND"
        for call in (env.jobs.cancel, env.jobs.events):
            with pytest.raises(NotFoundError) as ei:
                await call("nope", not_found_code="X_NOT_FOUND")  # type: ignore[operator]
            assert ei.value.code == "X_NOT_FOUND"
        with pytest.raises(ValueError):
            await env.jobs.submit("unregistered", {}, ok)


async def test_completed_at_on_every_terminal_state(env_factory: EnvFactory) -> None:
    gate = anyio.Event()

    async def ok(ctx: JobContext) -> dict[str, Any]:
        return {"ok": True}

    async def bad(ctx: JobContext) -> None:
        raise UpstreamError("Upstream failed.")

    async def slow(ctx: JobContext) -> None:
        await gate.wait()

    async with env_factory() as env:
        env.jobs.register_kind("k", concurrency=3)
        a = await env.jobs.submit("k", {}, ok)
        b = await env.jobs.submit("k", {}, bad)
        c = await env.jobs.submit("k", {}, slow)
        await env.jobs.cancel(c.job_id)
        with anyio.fail_after(5):
            finals = [await env.jobs.wait(j.job_id) for j in (a, b, c)]
        assert [j.status for j in finals] == [JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED]
        for j in finals:
            assert j.completed_at is not None and j.updated_at == j.completed_at
            assert (await env.jobs.events(j.job_id)).items[-1].terminal


async def test_shutdown_cancels_everything_and_refuses_new_jobs(env_factory: EnvFactory) -> None:
    started = anyio.Event()
    thread_started = anyio.Event()
    thread_saw_cancel = threading.Event()

    async def stuck(ctx: JobContext) -> None:
        started.set()
        await anyio.sleep_forever()

    def spin(ctx: JobContext) -> None:
        w = threading.Event()
        anyio.from_thread.run_sync(thread_started.set)
        while not ctx.cancelled:
            w.wait(0.005)
        thread_saw_cancel.set()
        ctx.check_cancelled()

    async def threaded(ctx: JobContext) -> None:
        await anyio.to_thread.run_sync(spin, ctx)

    async with env_factory() as env:
        env.jobs.register_kind("k", concurrency=2)
        a = await env.jobs.submit("k", {}, stuck)
        b = await env.jobs.submit("k", {}, threaded)
        c = await env.jobs.submit("k", {}, stuck)  # queued
        with anyio.fail_after(5):
            await started.wait()
            await thread_started.wait()
        with anyio.fail_after(5):
            await env.jobs.shutdown(grace_s=3)
        assert env.jobs.active_count == 0 and thread_saw_cancel.is_set()
        for j in (a, b, c):
            got = await env.jobs.get(j.job_id)
            assert got.status is JobStatus.CANCELLED and got.completed_at is not None
        with pytest.raises(UnavailableError):
            await env.jobs.submit("k", {}, stuck)


async def test_task_group_cancellation_still_records_the_end(env_factory: EnvFactory) -> None:
    started = anyio.Event()

    async def stuck(ctx: JobContext) -> None:
        started.set()
        await anyio.sleep_forever()

    async with env_factory() as env:
        env.jobs.register_kind("k")
        async with anyio.create_task_group() as inner:
            from sidecar.jobs import JobManager

            jm = JobManager(env.db, env.log, inner)
            jm.register_kind("k")
            job = await jm.submit("k", {}, stuck)
            with anyio.fail_after(5):
                await started.wait()
            inner.cancel_scope.cancel()  # the app's task group goes away without shutdown()
        got = await env.jobs.get(job.job_id)
        assert got.status is JobStatus.CANCELLED and got.completed_at is not None
        assert (await env.jobs.events(job.job_id)).items[-1].event == "Cancelled"


async def test_job_events_flow_through_a_subscription(env_factory: EnvFactory) -> None:
    release = anyio.Event()

    async def runner(ctx: JobContext) -> dict[str, Any]:
        await release.wait()
        for i in range(1, 4):
            await ctx.progress("work", i, 3)
        return {"done": True}

    sent: list[dict[str, Any]] = []

    async def send(method: str, params: Any) -> None:
        sent.append(params)

    async with env_factory() as env:
        env.jobs.register_kind("k")
        job = await env.jobs.submit("k", {}, runner)
        subs = SubscriptionManager(env.log, send, env.tg)
        sub = await subs.subscribe(job.job_id)
        sub.start()
        release.set()
        with anyio.fail_after(5):
            await sub.wait()
        assert [(p["id"], p["event"]) for p in sent] == [
            (1, "Queued"),
            (2, "Progress"),
            (3, "Progress"),
            (4, "Progress"),
            (5, "Completed"),
        ]
        assert sent[3]["data"]["data"]["percent"] == 100.0
        assert sent[-1]["data"]["data"] == {"done": True}


async def test_an_unexpected_exception_of_a_kind_with_a_code_is_typed_and_traceable(
    env_factory: EnvFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 21: a bare JOB_FAILED told the user nothing; the kind's code, the exception's type and an incident id
    that the log's traceback line carries too — still never the exception's text."""
    secret = "token=sk-SECRET at /home/alice/private"

    async def runner(ctx: JobContext) -> None:
        raise ImportError(secret)

    async with env_factory() as env:
        env.jobs.register_kind("export", failure_code="EXPORT_RENDER_FAILED")
        with caplog.at_level(logging.ERROR, logger="sidecar.jobs.manager"):
            job = await env.jobs.submit("export", {}, runner)
            with anyio.fail_after(5):
                done = await env.jobs.wait(job.job_id)
        assert done.error is not None and done.error.code == "EXPORT_RENDER_FAILED"
        incident = done.error.details["incident"]
        assert done.error.details == {"exception": "ImportError", "incident": incident}
        assert incident in done.error.message and "ImportError" in done.error.message
        page = await env.jobs.events(job.job_id)
        everything = done.model_dump_json() + page.model_dump_json()
        assert "SECRET" not in everything and "alice" not in everything
        assert any(incident in r.getMessage() and r.exc_info for r in caplog.records)
