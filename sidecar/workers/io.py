"""The stdio of a worker child (transcription, local model, maths SVG, export): stdlib only, loaded before any heavy
library."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO


def claim_stdout() -> TextIO:
    """Keep fd 1 for the worker's protocol; anything a library prints lands on stderr."""
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto


def exit_with_parent(on_gone: Callable[[], object], interval_s: float = 0.5) -> None:
    """Call ``on_gone`` (which must leave the process) once the parent changes: the sidecar died, even by SIGKILL."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                on_gone()

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
