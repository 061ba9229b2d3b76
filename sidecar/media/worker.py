"""The transcription worker: a child process of the sidecar (``python -m sidecar.media.worker``).

It speaks the one worker protocol (:mod:`sidecar.workers.protocol`) on its own stdin/stdout pipes, never the
sidecar's wire: a hello once its pipeline is imported, then one ``transcribe`` request at a time, answered with
``progress`` events (``ModelLoading``, ``DiarizationStarted``, ``DiarizationCompleted``, ``TranscriptionStarted``,
``Progress``) and exactly one ``result`` or ``error`` (a media error code, :mod:`sidecar.media.errors`). Models
stay loaded between jobs. The sidecar stops a job by killing the worker's process group (a ``cancel`` line is
ignored); the worker also exits on stdin EOF or when its parent dies. faster-whisper, ctranslate2, torch and
pyannote are imported here only — never in the sidecar.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import warnings
from typing import TextIO

from ..core.redact import redact_head
from ..workers.env import TELEMETRY_OFF
from ..workers.io import claim_stdout, exit_with_parent
from ..workers.protocol import Request, WorkerOutput, read_requests
from .errors import TRANSCRIPTION_FAILED

logger = logging.getLogger("sidecar.media.worker")


def serve(stdin: TextIO, out: WorkerOutput) -> None:
    from .pipeline import JobError, Models, run_job

    models = Models()
    out.hello("transcription", os.getpid())
    for message in read_requests(stdin):
        if not isinstance(message, Request):
            continue  # a cancelled job is stopped by a kill of this process
        job_id = message.id
        if message.op != "transcribe":
            out.error(job_id, TRANSCRIPTION_FAILED, "unknown worker op")
            continue
        try:
            result = run_job(message.params, models, functools.partial(out.progress, job_id))
        except JobError as exc:
            out.error(job_id, exc.code, exc.message, exc.details)
        except Exception as exc:
            logger.exception("transcription failed")
            reason = f"{type(exc).__name__}: {redact_head(str(exc), 300)}"
            details = {"reason": "WORKER_ERROR", "detail": reason}
            out.error(job_id, TRANSCRIPTION_FAILED, "The transcription failed.", details)
        else:
            out.result(job_id, result)


def main() -> None:
    for name, value in TELEMETRY_OFF.items():  # also when started by hand
        os.environ.setdefault(name, value)
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
    serve(sys.stdin, WorkerOutput(proto))
    os._exit(0)


if __name__ == "__main__":
    main()
