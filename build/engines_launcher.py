"""PyInstaller entry point of the engines folder ``dist/metona/metona-engines/`` (one-folder: nothing is unpacked).

``metona-engines <worker>`` runs one worker child of the sidecar, as ``python -m <module>`` does from the source
install; the sidecar finds this executable with :mod:`sidecar.workers.engines` and picks the worker by the first
argument. ``metona-engines check`` imports every engine inside the frozen folder and prints one JSON line of their
versions (build/build.sh runs it; the engine libraries are imported only then and inside the workers).
"""

import importlib
import json
import sys

from sidecar.workers.engines import IN_ENGINES, WORKERS


def check() -> int:
    from importlib.metadata import version

    out = {}
    for module, dist in (
        ("faster_whisper", "faster-whisper"),
        ("ctranslate2", "ctranslate2"),
        ("av", "av"),
        ("torch", "torch"),
        ("torchaudio", "torchaudio"),
        ("pyannote.audio", "pyannote.audio"),
        ("openvino_genai", "openvino-genai"),
        ("gguf", "gguf"),
    ):
        importlib.import_module(module)
        out[dist] = version(dist)
    for module in ("sidecar.media.pipeline", "sidecar.media.diarize", "sidecar.localmodel.convert"):
        importlib.import_module(module)  # the workers' own imports resolve
    sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")
    return 0


def main() -> None:
    entry = sys.argv[1] if len(sys.argv) > 1 else ""
    if entry in IN_ENGINES:
        importlib.import_module(WORKERS[entry]).main()
    elif entry == "check":
        sys.exit(check())
    else:
        sys.stderr.write(f"usage: metona-engines {'|'.join(sorted(IN_ENGINES))}|check\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
