"""Start-up stays light: heavy libraries are not imported by ``initialize``."""

from __future__ import annotations

import pytest

from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e

HEAVY = [
    "lancedb",
    "pyarrow",
    "mcp",
    "torch",
    "torchaudio",
    "faster_whisper",
    "ctranslate2",
    "pyannote.audio",
    "playwright",
    "docx",
    "httpx",
    "lxml",
    "tinycss2",
    "ziamath",
    "latex2mathml",
    "markdown_it",
    "mdit_py_plugins",
    "pygments",
    "PIL",
    "openvino",  # the local model's runtime: only its worker process imports it (issue 15)
    "gguf",
]


def test_heavy_modules_not_imported_after_initialize(ready: Sidecar) -> None:
    assert ready.result("dev/modules", {"names": HEAVY}) == {"loaded": []}


def test_probe_detects_a_loaded_module(ready: Sidecar) -> None:
    # the probe itself must be able to fail: json and anyio are certainly loaded
    assert ready.result("dev/modules", {"names": ["json", "anyio", "lancedb"]}) == {"loaded": ["anyio", "json"]}
