#!/usr/bin/env python3
"""Delete torchaudio's CUDA-linked compiled libraries so torchaudio runs in pure-Python mode.

Why (see README "Known issue: torchaudio / CUDA" and shared research dependencies.md §1.4):

* We pin ``torch==2.13.0+cpu`` (the CPU build from the machine's on-disk wheel folder).
* PyPI's Linux wheels of ``torchaudio 2.11.1`` (and ``torchcodec 0.17.0``) are CUDA builds: the files
  ``torchaudio/lib/{_torchaudio,libtorchaudio,torchaudio_prefixctc}.so`` link ``libtorch_cuda.so``,
  ``libc10_cuda.so`` and ``libcudart.so.13``, which a CPU torch does not have.
* So ``import torchaudio`` fails with ``OSError: libc10_cuda.so: cannot open shared object file``, and
  because ``pyannote.audio`` imports torchaudio, ``import pyannote.audio`` fails too.
* torchaudio's loader (``torchaudio._extension.utils._load_lib``) returns "no extension" when the library
  file does not exist, and torchaudio then works in pure-Python mode. That mode covers what pyannote.audio 4
  uses (``compliance.kaldi.fbank``, ``transforms.MFCC``, ``functional.resample``).

So after every (re)install of torchaudio, this script deletes every ``.so`` file under the torchaudio
package that links a CUDA library. It locates the package with ``importlib.util.find_spec`` and never
imports torchaudio (importing it is exactly what fails). It is idempotent: a second run removes nothing.
torchcodec is left alone: pyannote.audio only warns that it is unusable; decode audio with PyAV instead.

Usage:
    python scripts/strip_torchaudio_cuda_libs.py           # delete, print what was removed
    python scripts/strip_torchaudio_cuda_libs.py --check   # delete nothing; exit 1 if any are left

Run it with the venv's interpreter (``.venv/bin/python``): it acts on the torchaudio that interpreter sees.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

# Sonames whose presence in a library's dynamic section (or anywhere in the file) marks a CUDA build.
CUDA_MARKERS = (
    b"libtorch_cuda.so",
    b"libc10_cuda.so",
    b"libcudart.so",
    b"libnvrtc.so",
    b"libcublas.so",
    b"libcudnn.so",
)


def torchaudio_dir() -> Path | None:
    """The installed torchaudio package folder, found without importing torchaudio."""
    spec = importlib.util.find_spec("torchaudio")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def links_cuda(path: Path) -> bool:
    """True when the shared object names a CUDA library (a plain byte scan; no readelf/ldd needed)."""
    data = path.read_bytes()
    return any(marker in data for marker in CUDA_MARKERS)


def cuda_linked_libs(pkg: Path) -> list[Path]:
    libs = sorted(p for p in pkg.rglob("*.so*") if p.is_file() and not p.is_symlink())
    return [p for p in libs if links_cuda(p)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report; exit 1 if CUDA-linked libraries remain")
    args = parser.parse_args(argv)

    pkg = torchaudio_dir()
    if pkg is None:
        print("strip_torchaudio_cuda_libs: torchaudio is not installed; nothing to do", file=sys.stderr)
        return 0

    found = cuda_linked_libs(pkg)
    if args.check:
        for p in found:
            print(f"strip_torchaudio_cuda_libs: CUDA-linked library still present: {p}", file=sys.stderr)
        if not found:
            print(f"strip_torchaudio_cuda_libs: no CUDA-linked libraries under {pkg}", file=sys.stderr)
        return 1 if found else 0

    for p in found:
        size = p.stat().st_size
        p.unlink()
        print(f"strip_torchaudio_cuda_libs: removed {p} ({size / 2**20:.1f} MiB)", file=sys.stderr)
    if not found:
        print(f"strip_torchaudio_cuda_libs: nothing to remove under {pkg} (already stripped)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
