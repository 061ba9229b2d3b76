"""The environment a worker child starts with: the sidecar's, minus every secret, with telemetry off.

A worker needs no credential: the master key (``METONA_SECRET_KEY``, ``METONA_SECRET_KEY_FILE``), provider keys
(``OPENAI_API_KEY``, ``METONA_LIVE_DEEPSEEK_API_KEY``, ...) and hub tokens (``HF_TOKEN``) are all left out, by any
name that carries one of :data:`SECRET_MARKERS`. Hubs are offline and telemetry is off (Hugging Face, pyannote;
openvino's is blocked inside the worker, see :func:`sidecar.localmodel.convert.block_telemetry`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

SECRET_MARKERS = ("SECRET", "API_KEY", "TOKEN", "PASSWORD", "CREDENTIAL")
"""A variable whose name (upper-cased) contains one of these never reaches a worker."""

TELEMETRY_OFF: Mapping[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "PYANNOTE_METRICS_ENABLED": "false",
}
"""Defaults a worker gets unless the sidecar's environment says otherwise."""


def without_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in environ.items() if not any(m in k.upper() for m in SECRET_MARKERS)}


def worker_env(environ: Mapping[str, str], *, source_root: str | None = None) -> dict[str, str]:
    """The environment for a worker: ``environ`` without secrets, telemetry off, unbuffered; ``source_root`` (the
    folder holding the ``sidecar`` package) goes first on ``PYTHONPATH`` so the worker imports the same code."""
    env = without_secrets(environ)
    for name, value in TELEMETRY_OFF.items():
        env.setdefault(name, value)
    env["PYTHONUNBUFFERED"] = "1"
    if source_root:
        rest = env.get("PYTHONPATH")
        env["PYTHONPATH"] = source_root + (os.pathsep + rest if rest else "")
    return env
