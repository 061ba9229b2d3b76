"""How a worker child is started, in one place — and where the binary finds its engines.

From the source install a worker is ``python -m <module>`` with the sidecar's own interpreter. The binary
(``dist/metona/metona-sidecar``, a one-folder build) carries no torch, ctranslate2 or openvino: those live in the
**engines folder**, a PyInstaller one-folder build ``metona-engines/`` beside the binary's executable (or at
``METONA_ENGINES_DIR``), whose executable runs the worker named by its first argument
(``metona-engines media-worker``). The light maths and export workers stay inside the binary
(``metona-sidecar math-worker``, ``metona-sidecar export-worker``).

The engines folder also holds the models, ready to use (``engines.json`` says where): the Whisper models as
CTranslate2 folders, the diarization weights, and the local model already converted for openvino. The engines
carry their own copy of the worker code, so ``engines.json`` records the build id of the build that made them
(:data:`BUILD_ID_FILE` in the binary holds its own): engines from another build are refused. Without usable
engines the binary reports transcription, diarization and the local model unavailable, with the reason.
Stdlib only: ``initialize`` and the workers import this.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENV = "METONA_ENGINES_DIR"
FOLDER = "metona-engines"
EXECUTABLE = FOLDER + (".exe" if os.name == "nt" else "")
MANIFEST = "engines.json"
FORMAT = 1
SHIPPED_BINARY = Path("dist", "metona", "metona-sidecar" + (".exe" if os.name == "nt" else ""))
"""Where build/build.sh puts the binary, relative to the checkout: ``dist/metona/`` is what the app bundles (the
binary's one-folder, with the engines folder inside it)."""
BUILD_ID_FILE = "metona-build-id"
"""In the binary's bundle (``sys._MEIPASS``): the id of the build that made it (build/build_id.py), which the
engines' ``engines.json`` must repeat as ``build_id``."""

WORKERS: Mapping[str, str] = {
    "media-worker": "sidecar.media.worker",
    "local-model-worker": "sidecar.localmodel.worker",
    "math-worker": "sidecar.render.mathworker",
    "export-worker": "sidecar.export.worker",
    "document-worker": "sidecar.documents.worker",
}
"""A worker's entry (the argument the frozen executables take) → its module (``python -m``)."""
IN_ENGINES = frozenset({"media-worker", "local-model-worker"})
"""The workers that run from the engines folder in the binary; the others run from the binary itself."""


@dataclass(frozen=True)
class Engines:
    """An engines folder that has its executable and a readable manifest of this format."""

    root: Path
    manifest: Mapping[str, Any] = field(repr=False)

    @property
    def executable(self) -> Path:
        return self.root / EXECUTABLE

    def path(self, key: str) -> Path | None:
        """A model folder the manifest names (``whisper_models``, ``diarization_models``, ``local_model``,
        ``local_arguments_model``), if it is there."""
        rel = self.manifest.get("models", {}).get(key)
        if not isinstance(rel, str):
            return None
        path = self.root / rel
        return path if path.is_dir() else None

    def version(self, dist: str) -> str | None:
        versions = self.manifest.get("versions", {})
        value = versions.get(_normalise(dist)) if isinstance(versions, dict) else None
        return value if isinstance(value, str) else None


def _normalise(name: str) -> str:
    return name.replace("-", "_").replace(".", "_").lower()


def frozen() -> bool:
    return bool(getattr(sys, "frozen", False))


def expected_root(environ: Mapping[str, str], executable: str) -> Path:
    """Where the engines should be: ``METONA_ENGINES_DIR``, else ``metona-engines/`` beside the executable."""
    configured = environ.get(ENV)
    if configured:
        return Path(configured).expanduser()
    return Path(executable).resolve().parent / FOLDER


def checkout_of(binary: str | Path) -> Path:
    """The checkout a binary at :data:`SHIPPED_BINARY` was built in."""
    return Path(binary).resolve().parents[len(SHIPPED_BINARY.parts) - 1]


def own_build_id() -> str | None:
    """The build id the binary carries (None from the source install, or if the file is missing)."""
    bundle = getattr(sys, "_MEIPASS", None)
    if not bundle:
        return None
    try:
        return (Path(bundle) / BUILD_ID_FILE).read_text("utf-8").strip() or None
    except OSError:
        return None


def locate(root: Path, build_id: str | None) -> tuple[Engines | None, str | None]:
    """The engines at ``root`` made by the build ``build_id``, or why not (safe to show)."""
    if not (root / EXECUTABLE).is_file():
        return None, f"no engines folder at {root} (build/build.sh puts {FOLDER}/ beside the binary; or set {ENV})"
    try:
        manifest = json.loads((root / MANIFEST).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"the engines folder {root} has no readable {MANIFEST}: {exc}"
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return None, f"the engines folder {root} is of another format (expected {FORMAT})"
    theirs = manifest.get("build_id")
    if build_id is None or theirs != build_id:
        return None, (
            f"the engines folder {root} comes from another build (engines: {theirs or 'no build id'}, sidecar:"
            f" {build_id or 'no build id'}); build/build.sh builds both together"
        )
    return Engines(root, manifest), None


@functools.cache
def _current() -> tuple[Engines | None, str | None]:
    return locate(expected_root(os.environ, sys.executable), own_build_id())


def current() -> tuple[Engines | None, str | None]:
    """In the binary: its engines, or why there are none. From the source install: ``(None, None)`` (the
    interpreter has the engines itself)."""
    return _current() if frozen() else (None, None)


def unavailable_reason() -> str | None:
    """Why this process cannot run the engines' workers (None when it can, or when it is not the binary)."""
    engines, why = current()
    return why if engines is None else None


def worker_argv(entry: str) -> list[str]:
    """The command that starts the worker ``entry`` (a key of :data:`WORKERS`): ``python -m`` from the source
    install; in the binary, the engines' executable (or the binary itself for a light worker). A binary without
    engines gets the path they would have: the start fails, and the domain reports it as its own error."""
    module = WORKERS[entry]
    if not frozen():
        return [sys.executable, "-m", module]
    if entry not in IN_ENGINES:
        return [sys.executable, entry]
    return [str(expected_root(os.environ, sys.executable) / EXECUTABLE), entry]


def model_dir(configured: Path | None, key: str) -> Path | None:
    """A model folder the host configured, else (in the binary) the engines' own ``key`` folder."""
    if configured is not None:
        return configured
    engines, _ = current()
    return engines.path(key) if engines else None
