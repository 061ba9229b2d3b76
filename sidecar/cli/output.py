"""What the human CLIs (``bench``, ``export``, ``transcribe``, ``local-model``, ``demo``) print on stderr: the one
start-up that makes it pass through the process's redaction, a progress bar and a typed error."""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import TYPE_CHECKING, TextIO

from ..core.redact import RedactingStream, redact_logs, remember_environment_secrets

if TYPE_CHECKING:
    from ..core.errors import SidecarError


def start_cli(level: int = logging.WARNING) -> None:
    """The first call of every human CLI's ``main`` (issue 21): whatever it writes on stderr — its own lines,
    argparse's errors, log records and their tracebacks — goes through :func:`sidecar.core.redact.cut_credentials`,
    the stdio server's redaction, with the values of the credential variables of the environment among the known
    secrets. Logs go to stderr at ``level``. Calling it twice changes nothing."""
    remember_environment_secrets(os.environ)
    if not isinstance(sys.stderr, RedactingStream):
        sys.stderr = RedactingStream(sys.stderr)
    logging.basicConfig(stream=sys.stderr, level=level, format="%(levelname)s %(name)s: %(message)s")
    redact_logs()


def bar(percent: float, label: str, width: int = 30) -> str:
    """``\\r[#####.....]  42.0% label`` — redrawn in place on a terminal."""
    filled = int(width * percent / 100)
    return f"\r[{'#' * filled}{'.' * (width - filled)}] {percent:5.1f}% {label}"


def write_error(err: TextIO, exc: SidecarError) -> None:
    """The error's code and message, then its details (cut at 2,000 characters)."""
    err.write(f"error: {exc.code}: {exc.message}\n")
    if exc.details:
        err.write(json.dumps(exc.details, ensure_ascii=False)[:2000] + "\n")
