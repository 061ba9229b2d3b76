"""The stdio of a worker child (transcription, local model, maths SVG, export): stdlib only, loaded before any heavy
library."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

PIPE_BYTES = 1 << 20
"""The capacity asked for the worker's stdin and stdout pipes (Linux; capped by ``/proc/sys/fs/pipe-max-size``)."""


def claim_stdout() -> TextIO:
    """Keep fd 1 for the worker's protocol; anything a library prints lands on stderr."""
    widen_pipes(0, 1)
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto


def widen_pipes(*fds: int) -> None:
    """Ask for :data:`PIPE_BYTES` of room in the pipes ``fds`` (Linux; elsewhere, or not a pipe: left as is). An
    answer of a few hundred KB (an export's HTML) then crosses in one write and wakes its reader once, rather than
    once per 64 KB — and on a loaded machine each wake-up waits for a time slice (issue 22: +100 ms per export)."""
    try:
        import fcntl
    except ImportError:  # Windows
        return
    size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if size is None:
        return
    for fd in fds:
        try:
            fcntl.fcntl(fd, size, PIPE_BYTES)
        except OSError:  # not a pipe, or more than the system allows an unprivileged process
            continue


def exit_with_parent(on_gone: Callable[[], object], interval_s: float = 0.5) -> None:
    """Call ``on_gone`` (which must leave the process) once the parent changes: the sidecar died, even by SIGKILL."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                on_gone()

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
