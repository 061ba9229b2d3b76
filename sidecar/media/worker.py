"""The transcription worker: a child process of the sidecar (``python -m sidecar.media.worker``).

Protocol (newline-delimited JSON on its own stdin/stdout pipes, never the sidecar's wire): one request line
``{"op": "transcribe", ...}`` at a time; the worker answers with event lines ``{"event": name, "data": {...}}``
and ends each job with exactly one ``{"result": {...}}`` or ``{"error": {"code", "message", "details"}}``.
Models stay loaded between jobs. The sidecar stops the work by killing the worker's process group; the worker
also exits on stdin EOF or when its parent dies. faster-whisper, ctranslate2, torch and pyannote are imported
here only — never in the sidecar.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import warnings
from typing import Any, TextIO

from ..workers.io import claim_stdout, exit_with_parent

logger = logging.getLogger("sidecar.media.worker")


def serve(stdin: TextIO, proto: TextIO) -> None:
    from .pipeline import JobError, Models, run_job

    lock = threading.Lock()

    def send(obj: dict[str, Any]) -> None:
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        with lock:
            proto.write(line + "\n")
            proto.flush()

    models = Models()
    send({"ready": {"pid": os.getpid()}})
    for line in stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        if req.get("op") != "transcribe":
            send({"error": {"code": "TRANSCRIPTION_FAILED", "message": "unknown worker op", "details": {}}})
            continue
        try:
            result = run_job(req, models, lambda event, data: send({"event": event, "data": data}))
        except JobError as exc:
            send({"error": {"code": exc.code, "message": exc.message, "details": exc.details}})
        except Exception as exc:
            logger.exception("transcription failed")
            reason = f"{type(exc).__name__}: {str(exc)[:300]}"
            send(
                {
                    "error": {
                        "code": "TRANSCRIPTION_FAILED",
                        "message": "The transcription failed.",
                        "details": {"reason": "WORKER_ERROR", "detail": reason},
                    }
                }
            )
        else:
            send({"result": result})


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")  # no telemetry
    # OpenMP threads that spin at barriers make torch 10-20x slower as soon as another process wants a core
    # (measured: diarization of 72 s took 46-68 s instead of 3.5 s on the shared 2-core machine); passive
    # waiting keeps it near its idle speed. Must be set before torch / ctranslate2 load their OpenMP runtime.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s worker: %(message)s")
    logging.getLogger("faster_whisper").setLevel(logging.WARNING)  # per-window chatter
    # known and handled: audio goes to pyannote as a tensor (torchcodec is unusable with the CPU torch), and the
    # memory-mapped samples are read-only on purpose
    warnings.filterwarnings("ignore", message=r"(?s).*torchcodec is not installed correctly")
    warnings.filterwarnings("ignore", message=r"The given NumPy array is not writable")
    proto = claim_stdout()
    exit_with_parent(lambda: os._exit(3))
    serve(sys.stdin, proto)
    os._exit(0)


if __name__ == "__main__":
    main()
