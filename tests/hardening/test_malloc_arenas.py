"""The sidecar asks glibc for at most two malloc arenas: its threads must not each keep a heap (core.malloc)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = textwrap.dedent(
    """
    import ctypes, sys, threading
    if sys.argv[1] == "cap":
        from sidecar.core.malloc import cap_arenas
        assert cap_arenas(2)
    barrier = threading.Barrier(6)

    def work():
        held = [bytearray(65536) for _ in range(4)]  # malloc, not pymalloc: each thread meets an arena
        barrier.wait()

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ctypes.CDLL("libc.so.6").malloc_stats()  # one "Arena N:" block per arena, on stderr
    """
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")


def arenas(mode: str, **env: str) -> int:
    environ = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | {"PYTHONPATH": str(ROOT), **env}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, env=environ, timeout=60, check=True
    )
    return sum(line.startswith("Arena ") for line in done.stderr.splitlines())


def test_six_threads_share_two_arenas_once_capped() -> None:
    assert arenas("none") > 2  # glibc's default: a thread's first allocation gets an arena of its own
    assert arenas("cap") == 2


def test_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    from sidecar.core.malloc import cap_arenas

    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert cap_arenas() is False
