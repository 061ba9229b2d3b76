"""One warm Chromium per sidecar, driven by Playwright, shared by every in-process user (Mermaid now, HTML/PDF
export later): lazy start, a bounded pool of pages per :class:`PageProfile`, transparent restart after a crash,
closed on shutdown with no orphan.

* The system's Chromium (``executable_path``; Playwright never downloads a browser), the flags of a closed
  network (no background networking, component updates, sync), a fresh profile directory that is removed
  again, and a context that is ``offline`` with every request whose URL is not ``about:``/``data:`` aborted.
* Chromium is started by Playwright's driver over ``--remote-debugging-pipe`` in its own process group; it is
  adopted by the sidecar's :class:`~sidecar.workers.supervisor.ChildSupervisor`, which SIGTERM/SIGKILLs its group on
  the way out if the graceful close did not finish. If the sidecar is SIGKILLed, the driver sees EOF on its
  stdin and the browser sees its pipe close: both exit.
* Neither the driver nor Chromium sees a secret: both get :func:`~sidecar.core.childenv.scrubbed_environ`
  (no master key, no provider keys) instead of the sidecar's whole environment.
* Users lease a page: ``async with pool.page(profile) as page``. A profile's ``setup`` runs once per new page
  (e.g. loading the Mermaid bundle), so a leased page is warm. A page whose user failed (``discard()``) or timed
  out is closed, not reused; a browser that died is relaunched on the next lease.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from sidecar.core.childenv import scrubbed_environ

if TYPE_CHECKING:
    from sidecar.workers.supervisor import ChildSupervisor

logger = logging.getLogger(__name__)

CHROMIUM_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--mute-audio",
)
ALLOWED_SCHEMES = ("about:", "data:")


@dataclass(frozen=True)
class PageProfile:
    """How to make a page ready for one kind of work; ``setup`` runs once per new page."""

    name: str
    setup: Callable[[Any], Awaitable[None]]


class BrowserUnavailable(RuntimeError):
    pass


class Lease:
    """A leased page; call :meth:`discard` when the page must not be reused (it failed or timed out)."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.discarded = False

    def discard(self) -> None:
        self.discarded = True


class BrowserPool:
    def __init__(
        self,
        executable: str | None,
        *,
        max_pages: int = 2,
        children: ChildSupervisor | None = None,
        launch_timeout_s: float = 30.0,
    ) -> None:
        self.executable = executable
        self.max_pages = max_pages
        self.children = children
        self.launch_timeout_s = launch_timeout_s
        self.launches = 0
        self.blocked_requests = 0
        self._lock = anyio.Lock()
        self._slots = anyio.Semaphore(max_pages)
        self._pw: Any = None
        self._context: Any = None
        self._profile_dir: Path | None = None
        self._pid: int | None = None
        self._generation = 0
        self._idle: dict[str, list[tuple[int, Any]]] = {}
        self._closed = False
        self._cleanup_tasks: set[Any] = set()  # strong refs to fire-and-forget teardowns of dead browsers

    # ------------------------------------------------------------------------------------------- state
    def unavailable_reason(self) -> str | None:
        if not self.executable or not Path(self.executable).exists():
            return "no Chromium executable found (set METONA_CHROMIUM_PATH)"
        try:
            import importlib.util

            if importlib.util.find_spec("playwright") is None:
                return "the playwright package is not installed"
        except (ImportError, ValueError):
            return "the playwright package is not installed"
        return None

    @property
    def running(self) -> bool:
        return self._context is not None

    @property
    def pid(self) -> int | None:
        return self._pid

    def stats(self) -> dict[str, Any]:
        pages = sum(len(v) for v in self._idle.values())
        return {
            "running": self.running,
            "pid": self._pid,
            "launches": self.launches,
            "pages": pages,
            "blocked_requests": self.blocked_requests,
        }

    # ------------------------------------------------------------------------------------------ leases
    @contextlib.asynccontextmanager
    async def page(self, profile: PageProfile) -> AsyncIterator[Lease]:
        async with self._slots:
            generation, page = await self._take(profile)
            lease = Lease(page)
            ok = False
            try:
                yield lease
                ok = not lease.discarded
            finally:
                if ok and generation == self._generation and not page.is_closed() and not self._closed:
                    self._idle.setdefault(profile.name, []).append((generation, page))
                else:
                    await self._close_page(page)

    async def _take(self, profile: PageProfile) -> tuple[int, Any]:
        await self._ensure()
        idle = self._idle.setdefault(profile.name, [])
        while idle:
            generation, page = idle.pop()
            if generation == self._generation and not page.is_closed():
                return generation, page
        generation = self._generation
        page = await self._context.new_page()
        try:
            await profile.setup(page)
        except BaseException:
            await self._close_page(page)
            raise
        return generation, page

    async def _close_page(self, page: Any) -> None:
        with anyio.move_on_after(5, shield=True):
            with contextlib.suppress(Exception):
                await page.close()

    # -------------------------------------------------------------------------------- launch / restart
    def mark_dead(self) -> None:
        """Forget the browser (it crashed or hangs); the next lease launches a new one."""
        if self._context is None:
            return
        logger.warning("browser: marked dead; it is relaunched on the next use")
        context, pw, pid, profile_dir = self._context, self._pw, self._pid, self._profile_dir
        self._reset()
        self._spawn_cleanup(context, pw, pid, profile_dir)

    def _reset(self) -> None:
        self._context = None
        self._pw = None
        self._pid = None
        self._profile_dir = None
        self._generation += 1
        self._idle.clear()

    def _spawn_cleanup(self, context: Any, pw: Any, pid: int | None, profile_dir: Path | None) -> None:
        import asyncio

        async def cleanup() -> None:
            await self._teardown(context, pw, pid, profile_dir)

        with contextlib.suppress(RuntimeError):
            task = asyncio.get_running_loop().create_task(cleanup())
            self._cleanup_tasks.add(task)
            task.add_done_callback(self._cleanup_tasks.discard)

    async def _ensure(self) -> None:
        if self._context is not None and self._healthy():
            return
        async with self._lock:
            if self._closed:
                raise BrowserUnavailable("the sidecar is shutting down")
            if self._context is not None and not self._healthy():
                self.mark_dead()
            if self._context is None:
                reason = self.unavailable_reason()
                if reason:
                    raise BrowserUnavailable(reason)
                with anyio.fail_after(self.launch_timeout_s):
                    await self._launch()

    def _healthy(self) -> bool:
        browser = self._context.browser if self._context is not None else None
        return browser is None or browser.is_connected()

    async def _launch(self) -> None:
        from playwright.async_api import async_playwright

        scrub_driver_env()
        profile_dir = Path(tempfile.mkdtemp(prefix="metona-chromium-"))
        pw = await async_playwright().start()
        try:
            context = await pw.chromium.launch_persistent_context(
                str(profile_dir),
                executable_path=self.executable,
                headless=True,
                args=list(CHROMIUM_FLAGS),
                offline=True,
                service_workers="block",
                accept_downloads=False,
                handle_sigint=False,
                handle_sigterm=False,
                handle_sighup=False,
                env=dict[str, str | float | bool](scrubbed_environ()),
            )
            await context.route("**/*", self._route)
        except BaseException:
            with anyio.move_on_after(5, shield=True), contextlib.suppress(Exception):
                await pw.stop()
            shutil.rmtree(profile_dir, ignore_errors=True)
            raise
        self._pw, self._context, self._profile_dir = pw, context, profile_dir
        self._pid = _browser_pid(profile_dir)
        if self._pid and self.children is not None:
            self.children.adopt(self._pid, "chromium")
        context.on("close", lambda _ctx: self._on_close(context))
        self.launches += 1
        logger.info("browser: Chromium started (pid %s, launch #%d)", self._pid, self.launches)

    def _on_close(self, context: Any) -> None:
        if context is self._context:
            self.mark_dead()

    async def _route(self, route: Any) -> None:
        url = route.request.url
        if url.startswith(ALLOWED_SCHEMES):
            await route.continue_()
        else:
            self.blocked_requests += 1
            logger.warning("browser: blocked a request to %s", url[:200])
            await route.abort("blockedbyclient")

    # ------------------------------------------------------------------------------------------ close
    async def close(self) -> None:
        self._closed = True
        async with self._lock:
            context, pw, pid, profile_dir = self._context, self._pw, self._pid, self._profile_dir
            self._reset()
        await self._teardown(context, pw, pid, profile_dir)
        for task in list(self._cleanup_tasks):
            with anyio.move_on_after(5, shield=True), contextlib.suppress(BaseException):
                await task

    async def _teardown(self, context: Any, pw: Any, pid: int | None, profile_dir: Path | None) -> None:
        with anyio.move_on_after(5, shield=True):
            if context is not None:
                with contextlib.suppress(Exception):
                    await context.close()
            if pw is not None:
                with contextlib.suppress(Exception):
                    await pw.stop()
        if pid is not None:
            _kill_group(pid)
            if self.children is not None:
                self.children.forget(pid)
        if profile_dir is not None:
            shutil.rmtree(profile_dir, ignore_errors=True)


def _browser_pid(profile_dir: Path) -> int | None:
    """The Chromium browser process: the one whose command line names our fresh profile dir and whose parent
    does not (its renderers and helpers are its children)."""
    marker = f"--user-data-dir={profile_dir}".encode()
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if marker not in cmdline:
                continue
            stat = (entry / "stat").read_text()
            found[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    roots = [pid for pid, ppid in found.items() if ppid not in found]
    return min(roots) if roots else None


def _kill_group(pid: int) -> None:
    import signal

    if os.name != "posix":
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        pgid = os.getpgid(pid)
        if pgid == pid:  # it leads its own group (Playwright starts it detached): stop the whole group
            os.killpg(pgid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)


def scrub_driver_env() -> None:
    """Start Playwright's driver (node) with :func:`scrubbed_environ`: Playwright builds the driver's environment
    from the whole of ``os.environ`` (``_impl.transport.get_driver_env``) and has no option for it, so the
    function it calls is wrapped once. Chromium's own environment is passed at launch (``env=``)."""
    from playwright._impl import transport

    current = transport.get_driver_env
    if getattr(current, "scrubbed", False):
        return

    def driver_env() -> dict[str, str]:
        return scrubbed_environ(current())

    driver_env.scrubbed = True  # type: ignore[attr-defined]
    transport.get_driver_env = driver_env
