"""What this machine can do, found without importing anything heavy (``initialize`` must be fast)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
from pathlib import Path

from pydantic import BaseModel

from .settings import Settings


class ComponentStatus(BaseModel):
    available: bool
    version: str | None = None
    path: str | None = None
    detail: str | None = None


def _package(module: str, dist: str) -> ComponentStatus:
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return ComponentStatus(available=False, detail=f"python package {dist!r} is not installed")
    try:
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        version = None
    return ComponentStatus(available=True, version=version)


def find_chromium(settings: Settings) -> str | None:
    if settings.chromium_path:
        return settings.chromium_path if Path(settings.chromium_path).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _model_dir(path: Path | None, default: Path, marker: str) -> ComponentStatus:
    candidate = path or default
    if (candidate / marker).exists():
        return ComponentStatus(available=True, path=str(candidate))
    return ComponentStatus(
        available=False, path=str(candidate), detail=f"no {marker} under the configured model directory"
    )


def detect_components(settings: Settings) -> dict[str, ComponentStatus]:
    components = {
        "lancedb": _package("lancedb", "lancedb"),
        "mcp": _package("mcp", "mcp"),
        "httpx": _package("httpx", "httpx"),
        "python_docx": _package("docx", "python-docx"),
        "playwright": _package("playwright", "playwright"),
        "faster_whisper": _package("faster_whisper", "faster-whisper"),
        "pyannote_audio": _package("pyannote.audio", "pyannote.audio"),
    }
    chromium = find_chromium(settings)
    components["chromium"] = (
        ComponentStatus(available=True, path=chromium)
        if chromium
        else ComponentStatus(available=False, detail="no Chromium executable found (set METONA_CHROMIUM_PATH)")
    )
    ffmpeg = shutil.which("ffmpeg")
    components["ffmpeg"] = ComponentStatus(available=ffmpeg is not None, path=ffmpeg)
    components["whisper_model"] = _model_dir(settings.whisper_model_dir, settings.models_dir / "whisper", "model.bin")
    components["diarization_weights"] = _model_dir(
        settings.diarization_model_dir, settings.models_dir / "diarization", "config.yaml"
    )
    return components
