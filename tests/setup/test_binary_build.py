"""Checks of the PyInstaller binary (one-folder dist/metona/) and the engines folder inside it (bash build/build.sh).

Marked ``binary``; they run only when SIDECAR_CMD names the built binary, e.g.
    SIDECAR_CMD=dist/metona/metona-sidecar bash scripts/test -m "e2e or binary"
(the e2e suite then also drives the binary through tests/support/sidecar_proc.py).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from sidecar.workers import engines

pytestmark = pytest.mark.binary

ROOT = Path(__file__).resolve().parents[2]
CMD = shlex.split(os.environ.get("SIDECAR_CMD", ""))
if CMD and not os.path.isabs(CMD[0]) and (ROOT / CMD[0]).is_file():
    CMD[0] = str(ROOT / CMD[0])  # relative to the repo root, as tests/support/sidecar_proc.py runs it
needs_binary = pytest.mark.skipif(
    not CMD or not Path(CMD[0]).is_file() or CMD[0].endswith(("python", "python3")),
    reason=f"SIDECAR_CMD does not name the built binary (bash build/build.sh; SIDECAR_CMD={engines.SHIPPED_BINARY})",
)


def _spawn_ping(tmp: Path) -> tuple[float, dict]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*CMD, "--data-dir", str(tmp / "data")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write('{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - t0
    proc.stdin.close()
    proc.wait(timeout=30)
    return elapsed, json.loads(line)


@needs_binary
def test_binary_answers_ping(tmp_path: Path):
    """The binary answers over stdio. Its start time is measured by scripts/bench/bench_binary_start.py."""
    for _ in range(2):
        _elapsed, answer = _spawn_ping(tmp_path)
        assert answer == {"jsonrpc": "2.0", "result": {}, "id": 1}


@needs_binary
def test_binary_frozen_selftest(tmp_path: Path):
    """Every bundled core library works inside the binary (lancedb, pyarrow, playwright→PDF, docx, mcp...)."""
    proc = subprocess.run(
        CMD,
        env={**os.environ, "METONA_FROZEN_SELFTEST": "1"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    failed = [r for r in results if r.get("ok") is False]
    assert proc.returncode == 0 and not failed, json.dumps(failed, indent=1) or proc.stderr[-3000:]
    assert results[-1] == {"selftest": "OK", "failed": 0}


@needs_binary
def test_the_binary_is_one_process_that_unpacks_nothing(tmp_path: Path):
    """One-folder: the spawned process is the sidecar (initialize answers its pid; no bootloader parent), and a start
    writes nothing into TMPDIR, so a SIGKILL leaves nothing behind."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen(
        [*CMD, "--data-dir", str(tmp_path / "data")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n')
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["result"]["pid"] == proc.pid
    assert (Path(CMD[0]).parent / "_internal").is_dir()
    proc.kill()
    proc.wait()
    assert list(tmp.iterdir()) == []


def _engines() -> Path:
    return Path(CMD[0]).parent / "metona-engines"


@needs_binary
def test_the_bundle_has_no_dangling_link():
    """What the app bundles is copied, signed and unpacked by its packager: every link in dist/metona/ must lead
    somewhere (the spec dropped pyarrow's libarrow_flight and left PyInstaller's top-level link to it)."""
    app = Path(CMD[0]).parent
    dangling = [str(p.relative_to(app)) for p in app.rglob("*") if p.is_symlink() and not p.exists()]
    assert dangling == []


@needs_binary
def test_the_engines_folder_beside_the_binary_holds_its_models():
    """dist/metona/metona-engines/: the executable, the manifest the sidecar reads (of the binary's own build), and
    every model ready to load (the local model converted, so no first-use conversion in the app)."""
    root = _engines()
    manifest = json.loads((root / "engines.json").read_text())
    assert manifest["format"] == 1
    own = (Path(CMD[0]).parent / "_internal" / engines.BUILD_ID_FILE).read_text("utf-8").strip()
    assert own and manifest["build_id"] == own
    for dist in ("faster_whisper", "ctranslate2", "torch", "pyannote_audio", "openvino_genai"):
        assert manifest["versions"][dist], dist
    models = {key: root / rel for key, rel in manifest["models"].items()}
    for name in ("whisper-tiny.en", "whisper-base"):
        assert (models["whisper_models"] / name / "model.bin").is_file(), name
    assert (models["diarization_models"] / "camplusplus.py").is_file()
    for key in ("local_model", "local_arguments_model"):
        assert (models[key] / "openvino_model.xml").is_file(), key
        assert (models[key] / "metona-model.json").is_file(), key
    assert models["local_model"] != models["local_arguments_model"]
    done = subprocess.run([str(root / "metona-engines"), "no-such-worker"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "usage" in done.stderr


@needs_binary
def test_initialize_reports_the_engines_available(tmp_path: Path):
    """With the engines beside it the binary transcribes, labels speakers and has the local model; their versions
    come from the engines' manifest (the binary itself imports none of them). The benchmark report's plots
    (matplotlib) are the binary's own."""
    manifest = json.loads((_engines() / "engines.json").read_text())
    proc = subprocess.Popen(
        [*CMD, "--data-dir", str(tmp_path / "data")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n')
    proc.stdin.flush()
    components = json.loads(proc.stdout.readline())["result"]["capabilities"]["components"]
    proc.stdin.close()
    proc.wait(timeout=30)
    for name in ("transcription", "whisper_model", "diarization", "diarization_weights", "local_model", "matplotlib"):
        assert components[name]["available"] is True, (name, components[name])
    assert components["faster_whisper"]["version"] == manifest["versions"]["faster_whisper"]
    assert components["pyannote_audio"]["version"] == manifest["versions"]["pyannote_audio"]
    assert components["local_model"]["version"] == manifest["versions"]["openvino_genai"]
    assert components["local_model"]["path"].startswith(str(_engines()))
