"""What this machine can do, found without importing anything heavy (``initialize`` must be fast).

Each component is ``{available, version?, path?, detail?}`` (``ComponentStatus`` in
:mod:`sidecar.ipc.lifecycle_models`). Plain dicts: this runs before pydantic models are loaded.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from .. import PROTOCOL_VERSION, SERVER_NAME, __version__
from ..core.packages import installed_versions, normalise
from ..core.settings import Settings
from ..ipc.early import ServerInfo
from ..workers import engines

Component = dict[str, Any]


def _status(
    available: bool, *, version: str | None = None, path: str | None = None, detail: str | None = None
) -> Component:
    out: Component = {"available": available}
    if version is not None:
        out["version"] = version
    if path is not None:
        out["path"] = path
    if detail is not None:
        out["detail"] = detail
    return out


def _package(module: str, dist: str) -> Component:
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return _status(False, detail=f"python package {dist!r} is not installed")
    return _status(True, version=installed_versions().get(normalise(dist)))


def which(name: str) -> str | None:
    """``shutil.which(name)``: shutil is imported only off POSIX (with its bz2/lzma imports it was a noticeable
    part of `initialize`, issue 22); on POSIX the search is the same (PATH, else the system's default path)."""
    if os.name != "posix":
        import shutil

        return shutil.which(name)
    if os.path.dirname(name):
        return name if _executable(name) else None
    path = os.environ.get("PATH")
    if path is None:
        try:
            path = os.confstr("CS_PATH")
        except (AttributeError, ValueError):
            path = os.defpath
    for folder in path.split(os.pathsep) if path else ():  # PATH="" finds nothing, ":" looks in the current dir
        candidate = os.path.join(folder, name)
        if _executable(candidate):
            return candidate
    return None


def _executable(path: str) -> bool:
    return os.path.exists(path) and os.access(path, os.X_OK) and not os.path.isdir(path)


def find_chromium(settings: Settings) -> str | None:
    if settings.chromium_path:
        return settings.chromium_path if Path(settings.chromium_path).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = which(name)
        if path:
            return path
    return None


def _mermaid(components: dict[str, Component]) -> Component:
    """Mermaid needs playwright (+ its node driver), Chromium and the pinned npm bundle (render/static)."""
    from ..render.assets import find_mermaid_bundle

    bundle = find_mermaid_bundle()
    missing = [name for name in ("playwright", "chromium") if not components[name]["available"]]
    if components["playwright"]["available"] and not _playwright_driver():
        missing.append("playwright's node driver")
    if bundle is None:
        missing.append("the mermaid bundle (scripts/setup: npm ci in tools/render)")
    if missing or bundle is None:  # no bundle is always in missing; the second test narrows for the type checker
        return _status(False, detail="missing: " + ", ".join(missing))
    return _status(True, version=bundle.version, path=str(bundle.path))


def _playwright_driver() -> bool:
    if os.environ.get("PLAYWRIGHT_NODEJS_PATH"):
        return Path(os.environ["PLAYWRIGHT_NODEJS_PATH"]).exists()
    try:
        spec = importlib.util.find_spec("playwright")
    except (ImportError, ValueError):
        return False
    for location in (spec.submodule_search_locations or []) if spec else []:
        driver = Path(location) / "driver"
        if (driver / "node").exists() or (driver / "node.exe").exists():
            return True
    return False


def _engine_package(module: str, dist: str) -> Component:
    """An engine's package: in the binary it is in the engines folder (its version from their manifest)."""
    if not engines.frozen():
        return _package(module, dist)
    found, why = engines.current()
    if found is None:
        return _status(False, detail=why)
    return _status(True, version=found.version(dist), path=str(found.root))


def _all_packages(*pairs: tuple[str, str]) -> Component:
    for module, dist in pairs:
        status = _package(module, dist)
        if not status["available"]:
            return status
    return _status(True, version=_package(*pairs[-1]).get("version"))


def server_info(settings: Settings) -> ServerInfo:
    """What ``initialize`` answers for these settings (before the event loop, or through the lifecycle methods);
    the components are detected when it answers."""
    return ServerInfo(
        SERVER_NAME,
        __version__,
        PROTOCOL_VERSION,
        str(settings.data_dir),
        settings.max_line_bytes,
        lambda: detect_components(settings),
    )


def detect_components(settings: Settings) -> dict[str, Component]:
    components = {
        "lancedb": _package("lancedb", "lancedb"),
        "mcp": _package("mcp", "mcp"),
        "httpx": _package("httpx", "httpx"),
        "python_docx": _package("docx", "python-docx"),
        "playwright": _package("playwright", "playwright"),
        "faster_whisper": _engine_package("faster_whisper", "faster-whisper"),
        "pyannote_audio": _engine_package("pyannote.audio", "pyannote.audio"),
        "matplotlib": _package("matplotlib", "matplotlib"),  # the plots of benchmark HTML reports
    }
    chromium = find_chromium(settings)
    components["chromium"] = (
        _status(True, path=chromium)
        if chromium
        else _status(False, detail="no Chromium executable found (set METONA_CHROMIUM_PATH)")
    )
    components["mermaid"] = _mermaid(components)
    components["math"] = _all_packages(("latex2mathml", "latex2mathml"), ("ziamath", "ziamath"))
    components["export"] = _all_packages(  # Markdown → AST → html/docx (pdf also needs chromium)
        ("markdown_it", "markdown-it-py"), ("mdit_py_plugins", "mdit-py-plugins"), ("pygments", "pygments")
    )
    ffmpeg = which("ffmpeg")
    components["ffmpeg"] = _status(ffmpeg is not None, path=ffmpeg)
    # document import (issue 31): PDFium for PDFs; Tesseract for scans and unusable text layers (without it such
    # pages are skipped with the import's warning OCR_UNAVAILABLE)
    components["pdfium"] = _package("pypdfium2", "pypdfium2")
    tesseract = which("tesseract")
    components["ocr"] = (
        _status(True, path=tesseract)
        if tesseract
        else _status(False, detail="tesseract is not installed (scripts/setup: tesseract-ocr, tesseract-ocr-chi-sim)")
    )
    # media (transcription/diarization): models from installed packages or a configured local dir, never a hub
    from ..media.resolve import components as media_components

    whisper_dir = engines.model_dir(settings.whisper_model_dir, "whisper_models")
    diarization_dir = engines.model_dir(settings.diarization_model_dir, "diarization_models")
    components.update(media_components(settings.models_dir, whisper_dir, diarization_dir))
    components["local_model"] = _local_model(settings)
    return components


def _local_model(settings: Settings) -> Component:
    """The embedded model of the ``local`` provider (issue 15): its runtime and weights packages installed;
    ``path`` is where it is (or will be) assembled and converted. A configured ``model_path`` needs only the runtime."""
    from ..localmodel import assets

    ok, why = assets.status()
    root = str(assets.model_root(settings.models_dir))
    if not ok:
        return _status(False, path=root, detail=why)
    found, _ = engines.current()
    if found is not None:  # the binary: the model is the engines' own, converted when they were built
        return _status(True, version=found.version("openvino-genai"), path=str(found.path("local_model")))
    return _status(True, version=installed_versions().get("openvino_genai"), path=root)
