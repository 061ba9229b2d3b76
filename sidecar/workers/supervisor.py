"""Owns every child process the sidecar starts (MCP servers, browsers, helpers) and stops them all.

Each child runs in its own process group (POSIX) so its grandchildren (``npx`` → node, shells) are
stopped with it: SIGTERM to the group, a bounded grace, then SIGKILL.

A SIGKILL of the sidecar itself cannot be caught, so nothing of ours would run and a child that ignores EOF on
its stdin (or a grandchild that never reads it) would live on. The :class:`OrphanGuard` covers that: one tiny
POSIX ``sh`` per sidecar (no Python, no start of the binary: ``/bin/sh`` exists on every POSIX host),
started on the first ``spawn``/``adopt``, in a session of its own (a kill of the sidecar's process group does not
reach it). Its stdin is a pipe whose write end only the sidecar holds (close-on-exec, and closed in the child of a
``fork``); the sidecar writes ``+<pgid>`` when a child's group is tracked and ``-<pgid>`` when it is forgotten or
stopped. At EOF — the sidecar died, or closed the pipe at the end of a clean shutdown — the guard SIGTERMs the
groups still listed, waits up to ``GUARD_GRACE_S`` for them to go, SIGKILLs what is left and exits.

* Only groups a child leads apart from ours are tracked (never the sidecar's own group, nor pgid 0 or 1).
* pgid reuse: a group is removed on ``forget``, and a group found empty is dropped before every new one is added
  (a pgid can only be reused once its group has no member left).
* A guard that died (killed by hand) is started again on the next ``spawn``/``adopt`` with every tracked group.
* Windows: no guard (no process groups here; a Job Object with KILL_ON_JOB_CLOSE would be the equivalent).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
from anyio.abc import Process

from sidecar.core.childenv import scrubbed_environ

logger = logging.getLogger(__name__)

GUARD_NAME = "metona-child-guard"
"""The guard's ``$0``: how it shows in ``ps`` (its arguments: the grace in tenths of a second, the sidecar's pid)."""
GUARD_GRACE_S = 1.0
"""After the sidecar's death: how long the guard waits between SIGTERM and SIGKILL of the groups left."""

# POSIX sh only (dash, bash, busybox, macOS sh): builtins for the protocol; ``sleep`` only after EOF.
GUARD_SCRIPT = r"""
trap '' INT HUP PIPE
tenths=$1
groups=' '
while IFS= read -r line; do
  g=${line#?}
  case $g in ''|*[!0-9]*|0|1) continue ;; esac
  case $line in
    +*) case $groups in *" $g "*) ;; *) groups="$groups$g " ;; esac ;;
    -*) case $groups in *" $g "*) groups="${groups%% $g *} ${groups#* $g }" ;; esac ;;
  esac
done
set -f
set -- $groups
[ $# -gt 0 ] || exit 0
for g do kill -s TERM -- "-$g" 2>/dev/null; done
n=0
while [ "$n" -lt "$tenths" ]; do
  left=
  for g do kill -s 0 -- "-$g" 2>/dev/null && left=1; done
  [ -n "$left" ] || exit 0
  sleep 0.1 2>/dev/null
  n=$((n + 1))
done
for g do kill -s KILL -- "-$g" 2>/dev/null; done
exit 0
"""

_GUARD_FDS: set[int] = set()
"""Write ends of live guard pipes: closed in the child of a bare ``fork`` (``exec`` closes them anyway)."""


def _close_guard_fds_in_child() -> None:
    for fd in _GUARD_FDS:
        with contextlib.suppress(OSError):
            os.close(fd)
    _GUARD_FDS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_guard_fds_in_child)


class OrphanGuard:
    """The sidecar's side of the guard process (see the module doc): a mirror of the listed groups, the pipe."""

    def __init__(self, grace_s: float = GUARD_GRACE_S, shell: str = "/bin/sh") -> None:
        self.grace_s = grace_s
        self.shell = shell
        self.groups: set[int] = set()
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._fd: int | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def running(self) -> bool:
        return self._proc is not None and self._fd is not None and self._proc.poll() is None

    def add(self, pgid: int) -> None:
        """List ``pgid`` (starting the guard if it is not running: a guard that died is replaced here)."""
        if pgid <= 1:
            return
        if pgid in self.groups:
            self.ensure()
            return
        self.groups.add(pgid)
        self._send(f"+{pgid}\n")

    def remove(self, pgid: int) -> None:
        if pgid not in self.groups:
            return
        self.groups.discard(pgid)
        if self.running():  # never start a guard only to tell it to forget
            self._send(f"-{pgid}\n")

    def ensure(self) -> None:
        """Start the guard if it is not running (with every listed group)."""
        if not self.running():
            self._start()

    def _send(self, line: str) -> None:
        if self.running():
            assert self._fd is not None
            try:
                os.write(self._fd, line.encode())
                return
            except OSError:  # the guard died since the check: start another with the whole list
                logger.warning("the child guard (pid %s) is gone; starting another", self.pid)
        self._start()

    def _start(self) -> None:
        self._drop()
        read_fd, write_fd = os.pipe()  # both close-on-exec: no other child ever holds the write end
        try:
            proc = subprocess.Popen(
                [self.shell, "-c", GUARD_SCRIPT, GUARD_NAME, str(max(0, round(self.grace_s * 10))), str(os.getpid())],
                stdin=read_fd,
                stdout=subprocess.DEVNULL,  # never our stdout (the wire) nor our stderr (it may be gone first)
                stderr=subprocess.DEVNULL,
                cwd="/",
                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},  # not the binary's LD_LIBRARY_PATH
                start_new_session=True,  # a kill of our process group does not reach it
            )
        except OSError as exc:
            os.close(write_fd)
            logger.warning("the child guard could not be started (%s): children may outlive a SIGKILL", exc)
            return
        finally:
            os.close(read_fd)
        self._proc, self._fd = proc, write_fd
        _GUARD_FDS.add(write_fd)
        self.starts += 1
        listed = "".join(f"+{g}\n" for g in sorted(self.groups)).encode()
        with contextlib.suppress(OSError):
            os.write(write_fd, listed)
        logger.debug("child guard started (pid %s, %d group(s))", proc.pid, len(self.groups))

    def _drop(self) -> None:
        """Close our end of the pipe (EOF: the guard stops the groups it still lists, then exits)."""
        if self._fd is not None:
            _GUARD_FDS.discard(self._fd)
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        if self._proc is not None:
            self._proc.poll()  # reap it if it is gone already

    async def close(self, timeout_s: float | None = None) -> None:
        """End the guard: EOF, then wait (bounded) for it to stop what it still lists and exit."""
        proc = self._proc
        self._drop()
        self._proc = None
        if proc is None:
            return
        limit = self.grace_s + 1.0 if timeout_s is None else timeout_s
        with anyio.move_on_after(limit, shield=True):
            while proc.poll() is None:  # noqa: ASYNC110 - a Popen: nothing to wait on but its pid
                await anyio.sleep(0.01)


class ChildSupervisor:
    def __init__(self, guard: OrphanGuard | None = None) -> None:
        self._pids: dict[int, str] = {}
        self._processes: dict[int, Process] = {}
        self._groups: dict[int, int] = {}  # pid → the process group it leads apart from ours (guarded)
        self.guard = guard if guard is not None else OrphanGuard()

    @property
    def pids(self) -> list[int]:
        return sorted(self._pids)

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        name: str = "",
        env: Mapping[str, str] | None = None,
        secrets: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> Process:
        """Start a child in its own process group, with its own pipes (never our stdout).

        Its environment is ``env`` (the sidecar's own by default) without the variables that carry a secret
        (:func:`~sidecar.core.childenv.scrubbed_environ`), whoever calls: a new kind of child gets no master key and
        no provider key for free. A child that does need a secret names it in ``secrets`` (added after the scrub)."""
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        kwargs.setdefault("stdout", subprocess.DEVNULL)
        kwargs.setdefault("stderr", sys.stderr.fileno())
        if os.name == "posix":
            kwargs.setdefault("start_new_session", True)
        child_env = scrubbed_environ(env) | dict(secrets or {})
        process = await anyio.open_process(list(argv), env=child_env, **kwargs)
        self._pids[process.pid] = name or argv[0]
        self._processes[process.pid] = process
        self._guard(process.pid)
        return process

    def adopt(self, pid: int, name: str = "") -> None:
        """Track a child started by a library (e.g. the MCP SDK's stdio client)."""
        self._pids[pid] = name
        self._guard(pid)

    def forget(self, pid: int) -> None:
        self._pids.pop(pid, None)
        self._processes.pop(pid, None)
        self._untrack(pid)

    def _guard(self, pid: int) -> None:
        """List the child's process group with the guard (which is started now if it is not running)."""
        if os.name != "posix":
            return
        try:
            pgid = os.getpgid(pid)
        except OSError:  # gone already
            return
        if pgid <= 1 or pgid == os.getpgrp():  # not a group of its own: the guard must never kill ours
            return
        for other, group in list(self._groups.items()):  # a group with no member left may be reused: drop it
            if group != pgid and not _group_exists(group):
                self._untrack(other)
        self._groups[pid] = pgid
        self.guard.add(pgid)

    def _untrack(self, pid: int) -> None:
        pgid = self._groups.pop(pid, None)
        if pgid is not None and pgid not in self._groups.values():
            self.guard.remove(pgid)

    async def stop(self, pid: int, grace_s: float = 2.0) -> None:
        _signal_group(pid, signal.SIGTERM)
        process = self._processes.get(pid)
        with anyio.move_on_after(grace_s, shield=True):
            if process is not None:
                await process.wait()
            else:
                while _alive(pid):  # noqa: ASYNC110 - not our child: nothing to wait on but the pid
                    await anyio.sleep(0.02)
        # our own child is asked through its Process (a waitpid here would steal asyncio's exit status)
        if (process.returncode is None) if process is not None else _alive(pid):
            _signal_group(pid, signal.SIGKILL)
            if process is not None:
                with anyio.move_on_after(1.0, shield=True):
                    await process.wait()
        self.forget(pid)

    async def stop_all(self, grace_s: float = 2.0) -> None:
        """Stop every child, then end the guard (it stops whatever is still listed, then exits)."""
        pids = list(self._pids)
        if pids:
            logger.info("stopping %d child process(es)", len(pids))
            async with anyio.create_task_group() as tg:
                for pid in pids:
                    tg.start_soon(self.stop, pid, grace_s)
        await self.guard.close()


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


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists
        return True
    return True


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if os.name == "posix":
            os.killpg(os.getpgid(pid), sig)
        else:
            os.kill(pid, sig)
