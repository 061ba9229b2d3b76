"""Test and conformance methods, served only with ``--dev-methods`` (env ``METONA_DEV_METHODS=1``).

* The JSON-RPC 2.0 specification's example methods (``subtract``, ``sum``, ``update``,
  ``notify_hello``, ``get_data``) so the spec's examples run verbatim against the real process.
* ``dev/*`` probes for the end-to-end tests and benchmarks: a cancellable sleep, a stream of
  MetonaStreamEvent lines, a child process, a stray ``print``, an echo.

They never appear in ``ipc_schema/`` or in ``initialize``'s method list.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import anyio
from pydantic import ConfigDict, Field

from ..core.common import Params
from ..ipc.context import RequestContext
from ..ipc.jsonrpc import RawMethod, success
from ..ipc.router import Method
from ..workers.supervisor import ChildSupervisor


# -- the JSON-RPC 2.0 specification's example methods -------------------------------------------
async def _subtract(ctx: Any, /, *args: Any, **kwargs: Any) -> Any:
    if args:
        minuend, subtrahend = args
    else:
        minuend, subtrahend = kwargs["minuend"], kwargs["subtrahend"]
    return success(minuend - subtrahend)


async def _sum(ctx: Any, /, *args: Any) -> Any:
    return success(sum(args))


async def _update(ctx: Any, /, *args: Any) -> Any:
    return success(None)


async def _notify_hello(ctx: Any, /, *args: Any) -> Any:
    return success(None)


async def _get_data(ctx: Any, /) -> Any:
    return success(["hello", 5])


SPEC_METHODS: dict[str, RawMethod] = {
    "subtract": _subtract,
    "sum": _sum,
    "update": _update,
    "notify_hello": _notify_hello,
    "get_data": _get_data,
}


# -- dev/* probes ---------------------------------------------------------------------------------
class SleepParams(Params):
    ms: int = Field(ge=0, le=600_000)


class StreamParams(Params):
    count: int = Field(ge=0, le=10_000_000)
    delay_ms: float = Field(0, ge=0)
    text: str = "x"
    request_id: str = "r_dev"
    session_id: str = "s_dev"


class SpawnParams(Params):
    seconds: int = Field(300, ge=1, le=3600)


class PrintParams(Params):
    text: str


class ModulesParams(Params):
    names: list[str]


class EchoParams(Params):
    model_config = ConfigDict(extra="allow")


class BigAnswerParams(Params):
    """A small request whose answer is big: ``{"text": <text repeated to `chars` characters>}`` (what a big tool
    result costs the sidecar to encode and write, without the cost of reading it)."""

    chars: int = Field(ge=0, le=64 << 20)
    text: str = Field("结果 ", min_length=1, max_length=1000)


def dev_methods(children: ChildSupervisor) -> list[Method[Any, Any]]:
    async def sleep(ctx: RequestContext, p: SleepParams) -> dict[str, Any]:
        await anyio.sleep(p.ms / 1000)
        return {"slept_ms": p.ms}

    async def stream(ctx: RequestContext, p: StreamParams) -> dict[str, Any]:
        from ..ir import MetonaStreamEvent

        sent = 0
        try:
            for seq in range(p.count):
                now = int(time.time() * 1000)
                event = MetonaStreamEvent.text_delta(p.request_id, p.session_id, 1, seq, now, p.text)
                await ctx.send_line(event.to_line())
                sent += 1
                if p.delay_ms:
                    await anyio.sleep(p.delay_ms / 1000)
        finally:
            # every stream ends with exactly one `done`, cancelled or not
            with anyio.move_on_after(2, shield=True):  # bounded: the host may have stopped reading
                done = MetonaStreamEvent.done(p.request_id, p.session_id, 1, sent, int(time.time() * 1000))
                await ctx.send_line(done.to_line())
        return {"count": sent}

    async def spawn(ctx: RequestContext, p: SpawnParams) -> dict[str, Any]:
        proc = await children.spawn(["sleep", str(p.seconds)], name="dev-sleep")
        return {"pid": proc.pid}

    async def stray_print(ctx: RequestContext, p: PrintParams) -> dict[str, Any]:
        # What a careless library does: write to sys.stdout and to fd 1 directly. Both must land on
        # stderr (claim_stdio), never on the wire.
        sys.stdout.write(p.text + "\n")
        sys.stdout.flush()
        os.write(1, (p.text + "\n").encode())
        return {"printed": True}

    async def modules(ctx: RequestContext, p: ModulesParams) -> dict[str, Any]:
        return {"loaded": sorted(n for n in p.names if n in sys.modules)}

    async def echo(ctx: RequestContext, p: EchoParams) -> dict[str, Any]:
        return dict(p.model_extra or {})

    async def big_answer(ctx: RequestContext, p: BigAnswerParams) -> dict[str, Any]:
        return {"text": (p.text * -(-p.chars // len(p.text)))[: p.chars]}

    return [
        Method("dev/sleep", SleepParams, dict[str, Any], sleep, dev=True),
        Method("dev/stream", StreamParams, dict[str, Any], stream, dev=True),
        Method("dev/spawn", SpawnParams, dict[str, Any], spawn, dev=True),
        Method("dev/print", PrintParams, dict[str, Any], stray_print, dev=True),
        Method("dev/modules", ModulesParams, dict[str, Any], modules, dev=True),
        Method("dev/echo", EchoParams, dict[str, Any], echo, dev=True),
        Method("dev/big_answer", BigAnswerParams, dict[str, Any], big_answer, dev=True),
    ]


# -- dev/jobs/*: a demo job kind that drives the JobManager over real stdio -----------------------
class DemoJobParams(Params):
    steps: int = Field(3, ge=0, le=100_000)
    step_ms: float = Field(10, ge=0, le=60_000)
    fail_code: str | None = None
    in_thread: bool = False


class JobIdParams(Params):
    job_id: str


class JobListParams(Params):
    status: str | None = None
    limit: int = Field(50, ge=1, le=500)
    offset: int = Field(0, ge=0)


class JobEventsParams(Params):
    job_id: str
    after_sequence: int = Field(0, ge=0)
    limit: int = Field(200, ge=1, le=1000)


def dev_job_methods(jobs: Any) -> list[Method[Any, Any]]:
    from ..core.errors import UpstreamError
    from ..jobs import Job, JobContext

    jobs.register_kind("dev-demo", concurrency=2)

    async def create(ctx: RequestContext, p: DemoJobParams) -> Job:
        async def runner(job: JobContext) -> dict[str, Any]:
            for i in range(p.steps):
                if p.in_thread:
                    await anyio.to_thread.run_sync(_sleep_checking, job, p.step_ms / 1000)
                else:
                    await anyio.sleep(p.step_ms / 1000)
                await job.progress("working", i + 1, p.steps, f"step {i + 1} of {p.steps}")
            if p.fail_code:
                raise UpstreamError("The demo job failed on purpose.", code=p.fail_code)
            return {"steps": p.steps}

        return await jobs.submit("dev-demo", p.model_dump(), runner)

    async def get(ctx: RequestContext, p: JobIdParams) -> Job:
        return await jobs.get(p.job_id, kind="dev-demo")

    async def list_jobs(ctx: RequestContext, p: JobListParams) -> Any:
        return await jobs.list("dev-demo", p.status, p.limit, p.offset)

    async def cancel(ctx: RequestContext, p: JobIdParams) -> Any:
        return await jobs.cancel(p.job_id, kind="dev-demo")

    async def events(ctx: RequestContext, p: JobEventsParams) -> Any:
        return await jobs.events(p.job_id, p.after_sequence, p.limit, kind="dev-demo")

    from ..core.common import CursorPage, OperationResponse, Page
    from ..trace.models import StoredEvent

    return [
        Method("dev/jobs/create", DemoJobParams, Job, create, dev=True),
        Method("dev/jobs/get", JobIdParams, Job, get, dev=True),
        Method("dev/jobs/list", JobListParams, Page[Job], list_jobs, dev=True),
        Method("dev/jobs/cancel", JobIdParams, OperationResponse, cancel, dev=True),
        Method("dev/jobs/events", JobEventsParams, CursorPage[StoredEvent], events, dev=True),
    ]


def _sleep_checking(job: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        job.check_cancelled()
        time.sleep(min(0.005, max(0.0, deadline - time.monotonic())))
