"""The stdio server: answers at once, loads the domain layer (built by :mod:`sidecar.wiring`) behind ``initialize``.

Start-up in three steps, so the host's first answer does not wait for model machinery:
0. before the event loop exists, ``python -m sidecar`` answers a plain ``initialize`` that is the first line
   (:mod:`sidecar.ipc.early`: settings, stdio and the components only); whatever else came first is served in 1;
1. stdio, the dispatcher and the lifecycle methods (no pydantic models, no domains) — ``initialize``
   can be answered as soon as the interpreter has imported anyio (jsonrpcserver loads in step 2);
2. once ``initialize`` has answered, :mod:`sidecar.wiring` is imported in a worker thread, storage is
   opened, jobs left running by a crash are failed, and every domain's methods are registered.
   A request for a method that is not registered yet waits for step 2 (a few hundred ms at most);
   if step 2 fails (e.g. a corrupt database) such requests answer its typed error instead of the
   process dying before it could say why.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from .core.errors import SidecarError, UnavailableError
from .core.malloc import cap_arenas
from .core.settings import Settings, prepare_data_dir
from .ipc import jsonrpc
from .ipc.dispatcher import Dispatcher
from .ipc.early import FirstRequest, claim_stdio
from .ipc.lifecycle import Lifecycle
from .ipc.router import Router
from .ipc.stdio import Incoming, LineWriter, read_lines
from .system.capabilities import server_info
from .workers.supervisor import ChildSupervisor

logger = logging.getLogger("sidecar")
SWITCH_INTERVAL_S = 0.0005


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


async def exit_on_signals(on_signal: Callable[[], None]) -> None:
    """SIGTERM/SIGINT/SIGHUP end the process like stdin EOF: cancel work, stop children, flush, exit 0."""
    if os.name != "posix":
        return
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            logger.warning("received %s; exiting", signal.Signals(signum).name)
            on_signal()


async def load_domains(
    settings: Settings, dispatcher: Dispatcher, stack: AsyncExitStack, tg: TaskGroup, children: ChildSupervisor
) -> None:
    """Step 2 of start-up: import the domain layer off the loop, open storage, register methods."""
    try:
        await anyio.to_thread.run_sync(jsonrpc.load, abandon_on_cancel=True)  # what other methods dispatch through
        wiring: Any = await anyio.to_thread.run_sync(importlib.import_module, "sidecar.wiring", abandon_on_cancel=True)
        services = await wiring.open_services(settings, stack, tg, dispatcher.send_notification, children)
        methods, notifications = wiring.domain_methods(services, settings)
        dispatcher.router.add_notifications(*notifications)
        dispatcher.add_methods(methods)
        if settings.dev_methods:
            from .system.devtools import SPEC_METHODS

            dispatcher.add_raw_methods(SPEC_METHODS)
        for hook in reversed(wiring.shutdown_hooks(services, settings)):  # hooks run newest first
            dispatcher.on_shutdown(hook)
    except SidecarError as exc:
        logger.error("the domain layer failed to start: %s (%s)", exc.message, exc.code)
        dispatcher.mark_ready(exc)
        return
    except Exception:
        logger.exception("the domain layer failed to start")
        dispatcher.mark_ready(UnavailableError("The sidecar failed to start its services.", code="STARTUP_FAILED"))
        return
    dispatcher.mark_ready()
    logger.debug("domain layer ready")


async def serve(settings: Settings, in_fd: int, out_fd: int, first: FirstRequest | None = None) -> int:
    """Serve the wire; ``first`` is what :func:`sidecar.ipc.early.answer_first` did before the loop started."""
    first = first or FirstRequest()
    prepare_data_dir(settings)
    writer = LineWriter(out_fd, direct=True)
    watched = Watched(settings)
    children = ChildSupervisor()
    dispatcher = Dispatcher(Router(), writer)

    async with AsyncExitStack() as stack:
        tg = await stack.enter_async_context(anyio.create_task_group())
        tg.start_soon(writer.run)
        loading = anyio.Event()

        async def start_domains() -> None:
            try:
                await load_domains(settings, dispatcher, stack, tg, children)
            finally:
                loading.set()

        def on_initialized(process_id: int | None) -> None:
            if process_id and process_id != os.getpid():
                watched.pid = process_id
            tg.start_soon(start_domains)

        info = server_info(settings)
        lifecycle = Lifecycle(
            dispatcher,
            info,
            on_initialized=on_initialized,
            grace_s=settings.shutdown_grace_s,
        )
        lifecycle.before_shutdown(loading.wait)
        dispatcher.add_raw_methods(lifecycle.raw_methods(), direct=True)
        dispatcher.on_shutdown(lambda: children.stop_all(settings.shutdown_grace_s))

        if first.initialized:  # answered before the loop: what Lifecycle.initialize does besides answering
            dispatcher.mark_initialized()
            on_initialized(first.process_id)
        send, receive = anyio.create_memory_object_stream[Incoming](64)
        tg.start_soon(read_lines, in_fd, settings.max_line_bytes, send, first.pending)
        tg.start_soon(watch_parent, watched, lambda: dispatcher.request_exit(0))
        tg.start_soon(exit_on_signals, lambda: dispatcher.request_exit(0))
        code = await dispatcher.serve(receive, grace_s=settings.shutdown_grace_s)  # runs the shutdown hooks
        with anyio.CancelScope(shield=True):
            writer.close()
            with anyio.move_on_after(settings.shutdown_grace_s):
                await writer.wait_drained()
        tg.cancel_scope.cancel()
    return code


def schema_router() -> Router:
    """The production method table, built against throw-away services (for the schema generator)."""
    from .ipc.lifecycle_models import schema_methods
    from .wiring import domain_methods, open_headless

    async def build() -> Router:
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings(data_dir=Path(tmp))
            router = Router()
            async with AsyncExitStack() as stack:
                tg = await stack.enter_async_context(anyio.create_task_group())
                services = await open_headless(settings, stack, tg)
                methods, notifications = domain_methods(services, settings)
                router.add(*methods, *schema_methods())
                router.add_notifications(*notifications)
                tg.cancel_scope.cancel()
            return router

    return anyio.run(build)


def run(settings: Settings, stdio: tuple[int, int] | None = None, first: FirstRequest | None = None) -> int:
    """Serve until exit; ``stdio`` is what :func:`claim_stdio` returned if the caller claimed it already."""
    in_fd, out_fd = stdio or claim_stdio()
    # The event loop answers ping while worker threads render, parse or embed: they hand the GIL back every 0.5 ms
    # instead of 5 ms (issue 22: ping p99 during an export 36-47 -> 7-20 ms; the stream path's CPU unchanged)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    cap_arenas()  # before the worker threads start: a long session must not keep a heap per thread
    return anyio.run(serve, settings, in_fd, out_fd, first)
