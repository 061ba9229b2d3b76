"""Composition root: builds the services, registers every domain's methods, serves stdio.

Only this module imports every domain. Heavy libraries are imported by the domains on first use.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import anyio

from . import PROTOCOL_VERSION, SERVER_NAME, __version__
from .capabilities import detect_components
from .ipc import lifecycle
from .ipc.dispatcher import Dispatcher
from .ipc.router import Router
from .ipc.stdio import Incoming, LineWriter, claim_stdio, read_lines
from .settings import Settings
from .supervisor import ChildSupervisor

logger = logging.getLogger("sidecar")

DATA_SUBDIRS = ("lancedb", "attachments", "exports", "plugins", "themes", "models", "datasets")


def prepare_data_dir(settings: Settings) -> None:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    for sub in DATA_SUBDIRS:
        (settings.data_dir / sub).mkdir(exist_ok=True)


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
    children = ChildSupervisor()
    writer = LineWriter(out_fd)
    watched = Watched(settings)

    router = Router()
    raw: dict[str, Any] = {}
    if settings.dev_methods:
        from .devtools import SPEC_METHODS, dev_methods

        router.add(*dev_methods(children))
        raw.update(SPEC_METHODS)
    # Lifecycle methods need the dispatcher, which needs the full table: build it, then add them.
    dispatcher = Dispatcher(router, writer, raw)

    def on_initialized(p: lifecycle.InitializeParams) -> None:
        if p.process_id and p.process_id != os.getpid():
            watched.pid = p.process_id

    life = lifecycle.methods(
        dispatcher,
        server_info=lifecycle.ServerInfo(name=SERVER_NAME, version=__version__),
        protocol_version=PROTOCOL_VERSION,
        data_dir=str(settings.data_dir),
        max_line_bytes=settings.max_line_bytes,
        components=lambda: detect_components(settings),
        on_initialized=on_initialized,
        grace_s=settings.shutdown_grace_s,
    )
    dispatcher.add_methods(life)
    dispatcher.on_shutdown(lambda: children.stop_all(settings.shutdown_grace_s))

    send, receive = anyio.create_memory_object_stream[Incoming](64)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        tg.start_soon(read_lines, in_fd, settings.max_line_bytes, send)
        tg.start_soon(watch_parent, watched, lambda: dispatcher.request_exit(0))
        code = await dispatcher.serve(receive, grace_s=settings.shutdown_grace_s)
        with anyio.CancelScope(shield=True):
            await children.stop_all(settings.shutdown_grace_s)
            writer.close()
            with anyio.move_on_after(settings.shutdown_grace_s):
                await writer.wait_drained()
        tg.cancel_scope.cancel()
    return code


def run(settings: Settings) -> int:
    in_fd, out_fd = claim_stdio()
    return anyio.run(serve, settings, in_fd, out_fd)
