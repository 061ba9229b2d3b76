"""No orphans after a SIGKILL of the sidecar (sidecar/workers/supervisor.py's child guard), over real stdio.

A fixture plugin whose server ignores EOF on its stdin and SIGTERM, and whose grandchild does the same, plus the
Chromium of a Mermaid render: after ``kill -9`` of the sidecar's whole process group (the venv's or the
binary's: one process either way), every process of those groups, and the guard itself, is gone within ~3 s."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sidecar.workers.supervisor import GUARD_NAME
from tests.plugins.support import SERVER, alive, group_members, make_plugin
from tests.support.render_check import req
from tests.support.sidecar_proc import Sidecar

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(os.name != "posix", reason="process groups: POSIX")]

BUDGET_S = 3.0


def guards_of(owners: list[int]) -> list[int]:
    """Live child guards whose owner (their last argument) is one of ``owners``."""
    found = []
    wanted = {str(p).encode() for p in owners}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if GUARD_NAME.encode() in argv and argv[-2:-1] and argv[-2] in wanted and alive(int(entry)):
            found.append(int(entry))
    return found


def wait_for(check: Callable[[], bool], timeout: float, what: str | Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.05)


def test_the_sticky_fixture_outlives_eof_and_sigterm(tmp_path: Path) -> None:
    """The fixture really is what the next test needs: stdin EOF and SIGTERM leave it and its grandchild."""
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "sticky"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(lambda: len(group_members(proc.pid)) >= 2, 20, "the grandchild did not start")
        time.sleep(0.3)  # both have set SIGTERM aside by now
        assert proc.stdin is not None
        proc.stdin.close()
        os.killpg(proc.pid, signal.SIGTERM)
        time.sleep(1.0)
        assert proc.poll() is None and len(group_members(proc.pid)) >= 2
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def test_kill_9_leaves_no_server_grandchild_browser_or_guard(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    sc = Sidecar(data, args=["--development"])
    try:
        components = sc.initialize()["capabilities"]["components"]
        info = sc.result("plugins/install", {"package_path": str(make_plugin(tmp_path / "pkgs", "sticky", "sticky"))},
                         timeout=40)  # fmt: skip
        assert info["host"]["status"] == "ready", info
        server = info["host"]["pid"]
        assert os.getpgid(server) == server, "the server leads its own process group"
        wait_for(lambda: len(group_members(server)) >= 2, 20, "the fixture's grandchild did not start")
        groups = {"the MCP server's": server}
        if components["mermaid"]["available"]:
            sc.result("render/static", req("mermaid", "flowchart LR\n  K --> L"), timeout=90)
            browser = sc.result("render/stats")["browser"]["pid"]
            assert browser and os.getpgid(browser) == browser
            groups["Chromium's"] = browser
        members = {name: group_members(pgid) for name, pgid in groups.items()}
        sidecar = group_members(sc.proc.pid)  # the sidecar's own group
        guards = guards_of(sidecar)
        assert len(guards) == 1, f"one guard per sidecar: {guards}"
        assert os.getsid(guards[0]) == guards[0], "the guard is in a session of its own"

        sc.kill_9()
        killed = time.monotonic()

        def all_gone() -> bool:
            return not any(group_members(g) for g in groups.values()) and not guards_of(sidecar)

        def left() -> str:
            return f"left: { ({n: group_members(g) for n, g in groups.items()}) }, guards {guards_of(sidecar)}"

        wait_for(all_gone, BUDGET_S + 2, left)
        took = time.monotonic() - killed
        assert took < BUDGET_S, f"orphans lived {took:.2f} s after the SIGKILL"
        for name, pids in members.items():
            assert not any(alive(p) for p in pids), f"{name} group: {pids}"
        if "Chromium's" not in groups:
            pytest.skip("Mermaid is reported unavailable on this build: only the plugin processes were checked")
    finally:
        sc.close()
