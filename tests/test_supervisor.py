"""The child guard (sidecar/workers/supervisor.py): its line protocol, what it kills at EOF (and what not), a restart
after its own death, and ChildSupervisor's bookkeeping (pgid tracking, forget, stop_all closing it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from sidecar.workers.supervisor import GUARD_NAME, ChildSupervisor, OrphanGuard, _group_exists
from tests.plugins.support import alive, group_members

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(os.name != "posix", reason="process groups, /bin/sh: POSIX")]

IGNORE_TERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"


def leader(*, ignore_term: bool = False) -> subprocess.Popen[bytes]:
    """A group leader (own session) with a grandchild in its group; with ``ignore_term`` both ignore SIGTERM."""
    code = IGNORE_TERM if ignore_term else "import time; time.sleep(60)"
    script = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {code!r}]); exec({code!r})"
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    deadline = time.monotonic() + 10
    while len(group_members(proc.pid)) < 2:
        assert time.monotonic() < deadline, "the grandchild did not start"
        time.sleep(0.02)
    time.sleep(0.2)  # let both install their signal handlers
    return proc


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "30"])


def wait_gone(pgid: int, timeout: float) -> float:
    started = time.monotonic()
    while group_members(pgid):
        assert time.monotonic() - started < timeout, f"group {pgid} still has {group_members(pgid)}"
        time.sleep(0.02)
    return time.monotonic() - started


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(5)


def guard_pids() -> set[int]:
    """Live guards started by this test process."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if GUARD_NAME.encode() in argv and argv[-2:-1] == [str(os.getpid()).encode()] and alive(int(entry)):
                found.add(int(entry))
    return found


async def test_eof_stops_listed_groups_and_spares_forgotten_ones() -> None:
    guard = OrphanGuard(grace_s=0.5)
    kept, forgotten = leader(), leader()
    try:
        guard.add(kept.pid)
        guard.add(forgotten.pid)
        guard.add(kept.pid)  # twice: listed once
        guard.remove(forgotten.pid)
        assert guard.running() and guard.starts == 1 and guard.groups == {kept.pid}
        assert os.getpgid(guard.pid) == guard.pid and os.getsid(guard.pid) == guard.pid, "its own session"
        await guard.close()
        assert wait_gone(kept.pid, 2) < 1.5, "SIGTERM is enough for this one"
        assert len(group_members(forgotten.pid)) == 2, "a forgotten group is never touched"
    finally:
        kill_group(kept)
        kill_group(forgotten)


async def test_a_group_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    guard = OrphanGuard(grace_s=0.3)
    stubborn = leader(ignore_term=True)
    try:
        guard.add(stubborn.pid)
        started = time.monotonic()
        await guard.close()
        wait_gone(stubborn.pid, 3)
        assert 0.25 < time.monotonic() - started < 2.5
    finally:
        kill_group(stubborn)


async def test_invalid_lines_and_pgid_0_or_1_are_ignored() -> None:
    guard = OrphanGuard(grace_s=0.2)
    target = leader()
    try:
        guard.add(1)
        guard.add(0)
        assert not guard.running() and guard.groups == set(), "nothing to guard: no guard started"
        guard.add(target.pid)
        assert guard._fd is not None
        os.write(guard._fd, b"+1\n+0\n+abc\nhello\n-\n+\n")  # what the script itself must refuse
        proc = guard._proc
        await guard.close()
        wait_gone(target.pid, 3)
        assert proc is not None and proc.wait(3) == 0
    finally:
        kill_group(target)


async def test_a_dead_guard_is_started_again_with_every_group() -> None:
    guard = OrphanGuard(grace_s=0.3)
    first, second = leader(), leader()
    try:
        guard.add(first.pid)
        old = guard.pid
        assert old is not None
        os.kill(old, signal.SIGKILL)
        guard._proc.wait(3)  # type: ignore[union-attr]
        assert not guard.running()
        guard.add(first.pid)  # listed already: the dead guard is replaced all the same
        assert guard.running() and guard.pid != old and guard.starts == 2
        guard.add(second.pid)
        assert guard.starts == 2 and guard.groups == {first.pid, second.pid}
        await guard.close()
        wait_gone(first.pid, 3)
        wait_gone(second.pid, 3)
    finally:
        kill_group(first)
        kill_group(second)


def test_the_guard_outlives_a_kill_of_its_owner_and_then_cleans_up(tmp_path: Path) -> None:
    """The real case: the owner is SIGKILLed with its whole process group; the guard sees EOF and acts."""
    owner = tmp_path / "owner.py"
    owner.write_text(
        "import os, subprocess, sys, time\n"
        "from sidecar.workers.supervisor import ChildSupervisor\n"
        "sup = ChildSupervisor()\n"
        f"child = subprocess.Popen([sys.executable, '-c', {IGNORE_TERM!r}], start_new_session=True)\n"
        "sup.adopt(child.pid, 'stubborn')\n"
        "print(child.pid, sup.guard.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen(
        [sys.executable, str(owner)],
        stdout=subprocess.PIPE,
        start_new_session=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
    )
    assert proc.stdout is not None
    child, guard = (int(x) for x in proc.stdout.readline().split())
    try:
        assert alive(child) and alive(guard)
        os.killpg(proc.pid, signal.SIGKILL)  # the owner's whole group: the guard is in a session of its own
        proc.wait(5)
        wait_gone(child, 3)
        deadline = time.monotonic() + 3
        while alive(guard):
            assert time.monotonic() < deadline, "the guard did not exit"
            time.sleep(0.02)
    finally:
        for pid in (child, guard):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


async def test_supervisor_tracks_groups_and_closes_the_guard_in_stop_all() -> None:
    sup = ChildSupervisor(OrphanGuard(grace_s=0.3))
    assert sup.guard.pid is None, "started lazily"
    spawned = await sup.spawn(["sleep", "30"], name="sleeper")
    assert sup.guard.running() and sup.guard.groups == {spawned.pid}
    same_group = sleeper()  # in our own group: never listed (the guard must never kill ours)
    try:
        sup.adopt(same_group.pid, "ours")
        assert sup.guard.groups == {spawned.pid}
        sup.forget(same_group.pid)
        other = leader()
        sup.adopt(other.pid, "other")
        assert sup.guard.groups == {spawned.pid, other.pid}
        sup.forget(other.pid)
        assert sup.guard.groups == {spawned.pid}
        kill_group(other)  # gone and forgotten: no longer listed, its pgid free for reuse
        guard = sup.guard._proc
        await sup.stop_all(grace_s=1)
        assert sup.guard.groups == set() and not sup.guard.running()
        assert guard is not None and guard.poll() == 0, "the guard exits at the end of a clean stop"
        assert not alive(spawned.pid)
        assert alive(same_group.pid), "our own group is left alone"
        # only this guard: in-process tests that ran before may still own guards of their own
        assert guard.pid not in guard_pids()
    finally:
        same_group.kill()
        same_group.wait()


async def test_an_empty_group_is_dropped_before_a_new_one_is_listed() -> None:
    sup = ChildSupervisor(OrphanGuard(grace_s=0.2))
    first = leader()
    sup.adopt(first.pid, "first")
    kill_group(first)  # died without forget (e.g. a crash the owner has not noticed yet)
    deadline = time.monotonic() + 5
    while _group_exists(first.pid):  # its grandchild's zombie still counts until init reaps it
        assert time.monotonic() < deadline
        await anyio.sleep(0.02)
    second = leader()
    try:
        sup.adopt(second.pid, "second")
        assert sup.guard.groups == {second.pid}, "the empty group's pgid is no longer listed (it may be reused)"
    finally:
        await sup.stop_all(grace_s=0.5)
        kill_group(second)


async def test_stop_asks_its_own_child_through_the_process_never_waitpid(monkeypatch: pytest.MonkeyPatch) -> None:
    """A waitpid on a child that asyncio watches would take its exit status (asyncio then reports 255)."""
    from sidecar.workers import supervisor

    asked: list[int] = []
    real_alive = supervisor._alive
    monkeypatch.setattr(supervisor, "_alive", lambda pid: asked.append(pid) or real_alive(pid))
    sup = ChildSupervisor(OrphanGuard(grace_s=0.3))
    code = IGNORE_TERM.replace("time.sleep", "print('ready', flush=True); time.sleep")
    spawned = await sup.spawn([sys.executable, "-c", code], name="stubborn", stdout=subprocess.PIPE)
    try:
        assert spawned.stdout is not None
        seen = b""
        while not seen.endswith(b"\n"):  # SIGTERM is ignored once it has said so
            seen += await spawned.stdout.receive()
        assert seen == b"ready\n"
        await sup.stop(spawned.pid, grace_s=0.2)  # ignores SIGTERM: killed after the grace
        assert spawned.returncode == -signal.SIGKILL, "its exit status reached its Process"
        assert asked == []
    finally:
        await sup.stop_all(grace_s=0.2)
