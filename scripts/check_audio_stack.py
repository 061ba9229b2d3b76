#!/usr/bin/env python3
"""Check that the audio stack imports and works on CPU torch after the torchaudio fix.

Runs the checks in a fresh subprocess of the same interpreter (so a crash or a half-imported torchaudio
cannot affect the caller) and exits non-zero with a clear message when any of them fails:

1. torch is a CPU build (``torch.__version__`` ends with ``+cpu``, ``torch.version.cuda`` is None);
2. ``import torchaudio`` works;
3. torchaudio reports its C extension as unavailable (``torchaudio._extension._IS_TORCHAUDIO_EXT_AVAILABLE``
   is False), i.e. the CUDA-linked ``.so`` files were stripped by ``scripts/strip_torchaudio_cuda_libs.py``;
4. ``torchaudio.functional.resample`` and ``torchaudio.compliance.kaldi.fbank`` work on a tensor;
5. ``import pyannote.audio`` succeeds (about 8 s on this machine kind).

Background: README "Known issue: torchaudio / CUDA". Used by ``scripts/setup`` and by
``tests/setup/test_audio_stack.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

# The code below runs in the child. It prints one JSON line on stdout as its last line.
CHILD = r"""
import json, sys, time, traceback
out = {"steps": []}
def step(name, fn):
    t = time.perf_counter()
    try:
        detail = fn()
    except BaseException as exc:
        out["steps"].append({"name": name, "ok": False, "seconds": round(time.perf_counter() - t, 2),
                             "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()})
        print(json.dumps(out)); sys.exit(1)
    out["steps"].append({"name": name, "ok": True, "seconds": round(time.perf_counter() - t, 2),
                         "detail": detail})

def torch_is_cpu():
    import torch
    if not torch.__version__.endswith("+cpu"):
        raise RuntimeError(f"torch {torch.__version__} is not the +cpu build")
    if torch.version.cuda is not None:
        raise RuntimeError(f"torch was built with CUDA {torch.version.cuda}")
    return torch.__version__

def import_torchaudio():
    import torchaudio
    return torchaudio.__version__

def extension_unavailable():
    from torchaudio import _extension
    if _extension._IS_TORCHAUDIO_EXT_AVAILABLE:
        raise RuntimeError("torchaudio's C extension is loaded; expected the pure-Python mode")
    return "C extension unavailable (pure-Python mode)"

def resample():
    import torch, torchaudio
    wave = torch.sin(torch.linspace(0, 2 * 3.14159 * 440, 22050)).unsqueeze(0)
    res = torchaudio.functional.resample(wave, 22050, 16000)
    if tuple(res.shape) != (1, 16000):
        raise RuntimeError(f"unexpected shape {tuple(res.shape)}")
    return f"(1, 22050) -> {tuple(res.shape)}"

def fbank():
    import torch, torchaudio
    wave = torch.randn(1, 16000)
    feats = torchaudio.compliance.kaldi.fbank(wave, num_mel_bins=80, sample_frequency=16000)
    if feats.shape[1] != 80 or feats.shape[0] < 90 or not torch.isfinite(feats).all():
        raise RuntimeError(f"unexpected fbank output {tuple(feats.shape)}")
    return f"fbank {tuple(feats.shape)}"

def import_pyannote():
    import pyannote.audio
    return pyannote.audio.__version__

step("torch is a CPU build", torch_is_cpu)
step("import torchaudio", import_torchaudio)
step("torchaudio C extension unavailable", extension_unavailable)
step("torchaudio.functional.resample", resample)
step("torchaudio.compliance.kaldi.fbank", fbank)
step("import pyannote.audio", import_pyannote)
print(json.dumps(out))
"""

HINT = (
    "The audio stack is broken. Usual causes: torchaudio was (re)installed after "
    "scripts/strip_torchaudio_cuda_libs.py ran (run it again: "
    ".venv/bin/python scripts/strip_torchaudio_cuda_libs.py), or torch is not the CPU build 2.13.0+cpu "
    "(re-run: bash scripts/setup). See README 'Known issue: torchaudio / CUDA'."
)


def run(timeout: float = 600.0) -> tuple[bool, list[dict], str]:
    env = dict(os.environ)
    env.setdefault("PYANNOTE_METRICS_ENABLED", "false")  # no telemetry from pyannote
    env.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the model hub during a check
    env.setdefault("PYTHONWARNINGS", "ignore")  # pyannote warns that torchcodec is unusable; expected
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=timeout, check=False
    )
    steps: list[dict] = []
    for line in reversed(proc.stdout.strip().splitlines()):
        try:
            steps = json.loads(line)["steps"]
            break
        except (ValueError, KeyError, TypeError):
            continue
    ok = proc.returncode == 0 and bool(steps) and all(s["ok"] for s in steps)
    return ok, steps, proc.stderr


def main() -> int:
    t0 = time.perf_counter()
    ok, steps, stderr = run()
    for s in steps:
        mark = "ok  " if s["ok"] else "FAIL"
        info = s.get("detail") if s["ok"] else s.get("error")
        print(f"check_audio_stack: [{mark}] {s['name']} ({s['seconds']} s): {info}", file=sys.stderr)
    if not ok:
        failed = [s for s in steps if not s["ok"]]
        if failed and failed[0].get("trace"):
            print(failed[0]["trace"], file=sys.stderr)
        elif not steps:
            print("check_audio_stack: the check subprocess died before reporting. Its stderr:", file=sys.stderr)
            print(stderr[-4000:], file=sys.stderr)
        print(f"check_audio_stack: FAILED. {HINT}", file=sys.stderr)
        return 1
    print(f"check_audio_stack: audio stack OK ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
