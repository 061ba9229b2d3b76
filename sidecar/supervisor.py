"""Owns every child process the sidecar starts (MCP servers, browsers, helpers) and stops them all.

Each child runs in its own process group (POSIX) so its grandchildren (``npx`` → node, shells) are
stopped with it: SIGTERM to the group, a bounded grace, then SIGKILL. (A SIGKILL of the sidecar
itself cannot be caught: children then see EOF on their stdin, which MCP servers honour.)
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import anyio
from anyio.abc import Process

logger = logging.getLogger(__name__)


class ChildSupervisor:
    def __init__(self) -> None:
        self._pids: dict[int, str] = {}
        self._processes: dict[int, Process] = {}

    @property
    def pids(self) -> list[int]:
        return sorted(self._pids)

    async def spawn(
        self, argv: Sequence[str], *, name: str = "", env: dict[str, str] | None = None, **kwargs: Any
    ) -> Process:
        """Start a child in its own process group, with its own pipes (never our stdout)."""
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        kwargs.setdefault("stdout", subprocess.DEVNULL)
        kwargs.setdefault("stderr", sys.stderr.fileno())
        if os.name == "posix":
            kwargs.setdefault("start_new_session", True)
        process = await anyio.open_process(list(argv), env=env, **kwargs)
        self._pids[process.pid] = name or argv[0]
        self._processes[process.pid] = process
        return process

    def adopt(self, pid: int, name: str = "") -> None:
        """Track a child started by a library (e.g. the MCP SDK's stdio client)."""
        self._pids[pid] = name

    def forget(self, pid: int) -> None:
        self._pids.pop(pid, None)
        self._processes.pop(pid, None)

    async def stop(self, pid: int, grace_s: float = 2.0) -> None:
        _signal_group(pid, signal.SIGTERM)
        process = self._processes.get(pid)
        with anyio.move_on_after(grace_s, shield=True):
            if process is not None:
                await process.wait()
            else:
                while _alive(pid):  # noqa: ASYNC110 - not our child: nothing to wait on but the pid
                    await anyio.sleep(0.02)
        if _alive(pid) or (process is not None and process.returncode is None):
            _signal_group(pid, signal.SIGKILL)
            if process is not None:
                with anyio.move_on_after(1.0, shield=True):
                    await process.wait()
        self.forget(pid)

    async def stop_all(self, grace_s: float = 2.0) -> None:
        pids = list(self._pids)
        if not pids:
            return
        logger.info("stopping %d child process(es)", len(pids))
        async with anyio.create_task_group() as tg:
            for pid in pids:
                tg.start_soon(self.stop, pid, grace_s)


def _alive(pid: int) -> bool:
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    except ChildProcessError:
        pass
    except OSError:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if os.name == "posix":
            os.killpg(os.getpgid(pid), sig)
        else:
            os.kill(pid, sig)
