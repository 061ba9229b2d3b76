"""The environment a worker child starts with: the sidecar's, minus every secret, with telemetry off.

A worker needs no credential: the master key (``METONA_SECRET_KEY``, ``METONA_SECRET_KEY_FILE``), provider keys
(``OPENAI_API_KEY``, ``METONA_LIVE_DEEPSEEK_API_KEY``, ...) and hub tokens (``HF_TOKEN``) are all left out, by any
name :func:`sidecar.core.childenv.is_secret_name` calls a secret (the one rule for every child). Hubs are offline
and telemetry is off (Hugging Face, pyannote; openvino's is blocked inside the worker, see
:func:`sidecar.localmodel.convert.block_telemetry`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from ..core.childenv import scrubbed_environ

TELEMETRY_OFF: Mapping[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "PYANNOTE_METRICS_ENABLED": "false",
}
"""Defaults a worker gets unless the sidecar's environment says otherwise."""


def worker_env(environ: Mapping[str, str], *, source_root: str | None = None) -> dict[str, str]:
    """The environment for a worker: ``environ`` without secrets, telemetry off, unbuffered; ``source_root`` (the
    folder holding the ``sidecar`` package) goes first on ``PYTHONPATH`` so the worker imports the same code."""
    env = scrubbed_environ(environ)
    for name, value in TELEMETRY_OFF.items():
        env.setdefault(name, value)
    env["PYTHONUNBUFFERED"] = "1"
    if getattr(sys, "frozen", False):  # the binary's bootloader pointed LD_LIBRARY_PATH at its own libraries
        _restore_library_path(env)
    if source_root:
        rest = env.get("PYTHONPATH")
        env["PYTHONPATH"] = source_root + (os.pathsep + rest if rest else "")
    return env


def _restore_library_path(env: dict[str, str]) -> None:
    """A PyInstaller bootloader prepends its bundle folder to ``LD_LIBRARY_PATH`` (keeping the host's value in
    ``LD_LIBRARY_PATH_ORIG``): a worker from the engines folder must load its own libraries, not the binary's."""
    original = env.pop("LD_LIBRARY_PATH_ORIG", None)
    if original:
        env["LD_LIBRARY_PATH"] = original
    else:
        env.pop("LD_LIBRARY_PATH", None)
