"""Tests of the setup work: the torch CPU pin and the torchaudio CUDA-library fix (docs/guides/install.md "Known issue").

These are how the torchaudio workaround is tested: scripts/check_audio_stack.py imports torchaudio and
pyannote.audio in a subprocess and exercises resample/fbank; it fails if setup's strip step did not run.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"


def _installed(dist: str) -> bool:
    try:
        importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


needs_audio = pytest.mark.skipif(not _installed("torchaudio"), reason="audio extra not installed")


@needs_audio
def test_torchaudio_cuda_libs_are_stripped():
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / "strip_torchaudio_cuda_libs.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"CUDA-linked torchaudio libraries present; run bash scripts/setup\n{proc.stderr}"


@needs_audio
def test_audio_stack_check_passes():
    """torchaudio imports without its C extension; resample + kaldi.fbank work; pyannote.audio imports."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / "check_audio_stack.py")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, f"scripts/check_audio_stack.py failed:\n{proc.stderr[-6000:]}"
    assert "audio stack OK" in proc.stderr


@needs_audio
def test_torch_is_the_cpu_build():
    assert importlib.metadata.version("torch").endswith("+cpu")
    # torch.__version__ itself, in a subprocess so this test process does not pay for importing torch
    code = "import torch; print(torch.__version__); print(torch.version.cuda)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    version, cuda = out.stdout.split()
    assert version.endswith("+cpu"), version
    assert cuda == "None", f"torch built with CUDA {cuda}"


def test_no_nvidia_or_triton_distributions():
    names = sorted({(d.metadata["Name"] or "").lower() for d in importlib.metadata.distributions()})
    cuda = [n for n in names if n.startswith(("nvidia", "triton", "cuda-"))]
    assert not cuda, f"CUDA payload installed in the venv: {cuda}"
