"""The environment of a worker child (sidecar/workers/env.py)."""

from __future__ import annotations

import os

from sidecar.core.childenv import scrubbed_environ as without_secrets
from sidecar.workers.env import worker_env


def test_the_worker_gets_no_secrets() -> None:
    env = without_secrets(
        {"PATH": "/bin", "METONA_SECRET_KEY": "k", "METONA_LIVE_DEEPSEEK_API_KEY": "x", "HF_TOKEN": "t"}
    )
    assert env == {"PATH": "/bin"}


def test_telemetry_is_off_unless_said_otherwise_and_the_source_goes_first() -> None:
    env = worker_env(
        {"PATH": "/bin", "HF_HUB_OFFLINE": "0", "PYTHONPATH": "/x", "OPENAI_API_KEY": "k"}, source_root="/src"
    )
    assert env["HF_HUB_OFFLINE"] == "0" and env["TRANSFORMERS_OFFLINE"] == "1"
    assert env["PYANNOTE_METRICS_ENABLED"] == "false" and env["HF_HUB_DISABLE_TELEMETRY"] == "1"
    assert env["PYTHONPATH"] == "/src" + os.pathsep + "/x" and env["PYTHONUNBUFFERED"] == "1"
    assert "OPENAI_API_KEY" not in env
