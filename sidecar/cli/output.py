"""What the human CLIs (``bench``, ``export``, ``transcribe``) print on stderr: a progress bar and a typed error."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from ..core.errors import SidecarError


def bar(percent: float, label: str, width: int = 30) -> str:
    """``\\r[#####.....]  42.0% label`` — redrawn in place on a terminal."""
    filled = int(width * percent / 100)
    return f"\r[{'#' * filled}{'.' * (width - filled)}] {percent:5.1f}% {label}"


def write_error(err: TextIO, exc: SidecarError) -> None:
    """The error's code and message, then its details (cut at 2,000 characters)."""
    err.write(f"error: {exc.code}: {exc.message}\n")
    if exc.details:
        err.write(json.dumps(exc.details, ensure_ascii=False)[:2000] + "\n")
