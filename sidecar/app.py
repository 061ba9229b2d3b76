"""Composition root: builds the services, registers every domain's methods, serves stdio.

Only this module imports every domain. Heavy libraries are imported by the domains on first use.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from . import PROTOCOL_VERSION, SERVER_NAME, __version__
from .capabilities import detect_components
from .ipc import lifecycle
from .ipc.dispatcher import Dispatcher
from .ipc.router import Method, Router
from .ipc.stdio import Incoming, LineWriter, claim_stdio, read_lines
from .jobs import JobManager
from .settings import Settings
from .storage.sqlite import Database
from .supervisor import ChildSupervisor
from .trace import rpc as trace_rpc
from .trace.eventlog import EventLog
from .trace.subscriptions import SubscriptionManager

logger = logging.getLogger("sidecar")

DATA_SUBDIRS = ("lancedb", "attachments", "exports", "plugins", "themes", "models", "datasets")


def prepare_data_dir(settings: Settings) -> None:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    for sub in DATA_SUBDIRS:
        (settings.data_dir / sub).mkdir(exist_ok=True)


@dataclass
class Services:
    db: Database
    events: EventLog
    subscriptions: SubscriptionManager
    jobs: JobManager
    children: ChildSupervisor


async def open_services(
    settings: Settings, stack: AsyncExitStack, tg: TaskGroup, send_notification: Callable[[str, Any], Any]
) -> Services:
    """Open storage and build the domain services (closed by ``stack`` in reverse order)."""
    db = await Database.open(settings.data_dir)
    stack.push_async_callback(db.close)
    events = EventLog(db)
    await events.migrate()
    stack.callback(events.close)
    subscriptions = SubscriptionManager(events, send_notification, tg)
    jobs = JobManager(db, events, tg)
    interrupted = await jobs.recover()
    if interrupted:
        logger.warning("marked %d job(s) interrupted by the last exit as failed", len(interrupted))
    return Services(db=db, events=events, subscriptions=subscriptions, jobs=jobs, children=ChildSupervisor())


def domain_methods(services: Services, settings: Settings) -> tuple[list[Method[Any, Any]], list[Any]]:
    """Every domain's methods and notifications (the production table, plus dev ones if enabled)."""
    methods: list[Method[Any, Any]] = [*trace_rpc.methods(services.subscriptions)]
    notifications = [*trace_rpc.notifications()]
    if settings.dev_methods:
        from .devtools import dev_job_methods, dev_methods

        methods += dev_methods(services.children)
        methods += dev_job_methods(services.jobs)
    return methods, notifications


class Watched:
    """The process whose death ends ours: the parent at start, or the host pid from ``initialize``."""

    def __init__(self, settings: Settings) -> None:
        self.original_ppid = os.getppid()
        self.pid: int | None = settings.parent_pid

    def gone(self) -> bool:
        if self.pid is not None:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                return False
            return False
        return os.getppid() != self.original_ppid


async def watch_parent(watched: Watched, on_gone: Callable[[], None], interval_s: float = 0.5) -> None:
    while True:
        await anyio.sleep(interval_s)
        if watched.gone():
            logger.warning("parent process is gone; exiting")
            on_gone()
            return


async def serve(settings: Settings, in_fd: int, out_fd: int) -> int:
    prepare_data_dir(settings)
    writer = LineWriter(out_fd)
    watched = Watched(settings)
    router = Router()
    raw: dict[str, Any] = {}
    if settings.dev_methods:
        from .devtools import SPEC_METHODS

        raw.update(SPEC_METHODS)
    dispatcher = Dispatcher(router, writer, raw)

    def on_initialized(p: lifecycle.InitializeParams) -> None:
        if p.process_id and p.process_id != os.getpid():
            watched.pid = p.process_id

    async with AsyncExitStack() as stack:
        tg = await stack.enter_async_context(anyio.create_task_group())
        tg.start_soon(writer.run)
        services = await open_services(settings, stack, tg, dispatcher.send_notification)
        methods, notifications = domain_methods(services, settings)
        router.add_notifications(*notifications)
        dispatcher.add_methods(methods)
        dispatcher.add_methods(
            lifecycle.methods(
                dispatcher,
                server_info=lifecycle.ServerInfo(name=SERVER_NAME, version=__version__),
                protocol_version=PROTOCOL_VERSION,
                data_dir=str(settings.data_dir),
                max_line_bytes=settings.max_line_bytes,
                components=lambda: detect_components(settings),
                on_initialized=on_initialized,
                grace_s=settings.shutdown_grace_s,
            )
        )
        # Hooks run newest first: stop pushing events, then jobs, then child processes.
        dispatcher.on_shutdown(lambda: services.children.stop_all(settings.shutdown_grace_s))
        dispatcher.on_shutdown(lambda: services.jobs.shutdown(settings.shutdown_grace_s))
        dispatcher.on_shutdown(services.subscriptions.close_all)

        send, receive = anyio.create_memory_object_stream[Incoming](64)
        tg.start_soon(read_lines, in_fd, settings.max_line_bytes, send)
        tg.start_soon(watch_parent, watched, lambda: dispatcher.request_exit(0))
        code = await dispatcher.serve(receive, grace_s=settings.shutdown_grace_s)
        with anyio.CancelScope(shield=True):
            await services.children.stop_all(settings.shutdown_grace_s)
            writer.close()
            with anyio.move_on_after(settings.shutdown_grace_s):
                await writer.wait_drained()
        tg.cancel_scope.cancel()
    return code


def schema_router() -> Router:
    """The production method table, built against throw-away services (for the schema generator)."""

    async def build() -> Router:
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings(data_dir=Path(tmp))
            router = Router()
            async with AsyncExitStack() as stack:
                tg = await stack.enter_async_context(anyio.create_task_group())

                async def no_send(method: str, params: Any) -> None:
                    return None

                services = await open_services(settings, stack, tg, no_send)
                methods, notifications = domain_methods(services, settings)
                router.add(*methods)
                router.add_notifications(*notifications)
                dispatcher = Dispatcher(router, LineWriter(-1))
                router.add(
                    *lifecycle.methods(
                        dispatcher,
                        server_info=lifecycle.ServerInfo(name=SERVER_NAME, version=__version__),
                        protocol_version=PROTOCOL_VERSION,
                        data_dir="",
                        max_line_bytes=settings.max_line_bytes,
                        components=dict,
                    )
                )
                tg.cancel_scope.cancel()
            return router

    return anyio.run(build)


def run(settings: Settings) -> int:
    in_fd, out_fd = claim_stdio()
    return anyio.run(serve, settings, in_fd, out_fd)
