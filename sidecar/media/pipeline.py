"""One transcription job inside the worker: decode → transcribe window by window → (diarize) → result.

``emit(event, data)`` reports ``ModelLoading``, ``TranscriptionStarted``, ``Segment`` (each segment as soon as it is
recognised, already cleaned, numbered and in the reader's script), ``Progress``, then with diarization
``DiarizationStarted``, ``DiarizationCompleted`` and one ``SpeakersAssigned`` (``{"segments": [{segment_id,
speaker}]}`` for every segment) as they happen; the return value is the whole result. Transcription comes first so
that the first words reach the user within seconds of the start, and the diarization stack (torch, pyannote) is
imported only when a job asks for speakers. Failures raise :class:`JobError` (a seed error code + a stable
reason); the worker reports them and stays alive.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.redact import redact_head
from . import audio as audio_mod
from .diarize import Diarizer, Turn, speaker_for
from .errors import DIARIZATION_UNAVAILABLE, TRANSCRIPTION_MODEL_UNAVAILABLE
from .resolve import DiarizationFiles, ModelUnavailable, WhisperSource, ensure_whisper_model, locate_diarization

Emit = Callable[[str, dict[str, Any]], None]
PROGRESS_EVERY_S = 0.5


class JobError(Exception):
    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


class Models:
    """What a worker keeps loaded between jobs (one Whisper model per path/compute type, one diarizer)."""

    def __init__(self) -> None:
        self._whisper: dict[tuple[str, str], Any] = {}
        self._diarizer: tuple[tuple[Any, ...], Diarizer] | None = None
        self._diarizer_lock = threading.Lock()  # built in a background thread while a job transcribes

    def whisper(self, path: Path, compute_type: str, threads: int) -> Any:
        key = (str(path), compute_type)
        if key not in self._whisper:
            from faster_whisper import WhisperModel

            self._whisper.clear()  # one at a time: a worker never holds two Whisper models
            self._whisper[key] = WhisperModel(
                str(path), device="cpu", compute_type=compute_type, cpu_threads=threads, local_files_only=True
            )
        return self._whisper[key]

    def diarizer(self, files: DiarizationFiles, settings: dict[str, Any]) -> Diarizer:
        key = (files, tuple(sorted(settings.items())))
        with self._diarizer_lock:
            if self._diarizer is None or self._diarizer[0] != key:
                self._diarizer = (key, Diarizer(files, settings))
            return self._diarizer[1]


def trim_memory() -> None:
    """Give freed heap back to the OS (torch and ctranslate2 leave large freed blocks behind): a long file's
    peak then stays near the size of one window's work instead of growing with the recording."""
    gc.collect()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").malloc_trim(0)


def _warning(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {"code": code, "message": message, "details": details}


def _diarization_files(req: dict[str, Any], warnings: list[dict[str, Any]]) -> DiarizationFiles | None:
    """The diarization weights (stat calls only), or None with a warning: checked before transcribing."""
    configured = req.get("diarization_dir")
    try:
        return locate_diarization(Path(configured) if configured else None)
    except ModelUnavailable as exc:
        warnings.append(
            _warning(
                DIARIZATION_UNAVAILABLE,
                "Speakers were not labelled.",
                reason="DIARIZATION_MODEL_UNAVAILABLE",
                detail=str(exc),
            )
        )
        return None


def _prepare_diarizer(
    req: dict[str, Any], files: DiarizationFiles, models: Models, warnings: list[dict[str, Any]]
) -> Diarizer | None:
    try:
        return models.diarizer(files, req["profile"].get("diarization", {}))
    except Exception as exc:  # torch / pyannote / torchaudio missing or broken
        warnings.append(
            _warning(
                DIARIZATION_UNAVAILABLE,
                "Speakers were not labelled.",
                reason="DIARIZATION_STACK_UNAVAILABLE",
                detail=f"{type(exc).__name__}: {redact_head(str(exc), 300)}",
            )
        )
        return None


class SegmentCleaner:
    """Segments as they stream out of Whisper, made valid one at a time: within the audio, no empty text, no
    back-to-back repeat, never overlapping the previous one, no negative duration, numbered ``segment_001…``."""

    def __init__(self, duration: float) -> None:
        self._duration = duration
        self._prev: dict[str, Any] | None = None
        self.segments: list[dict[str, Any]] = []

    def add(self, s: dict[str, Any]) -> dict[str, Any] | None:
        """The segment as kept (numbered), or None when it is dropped."""
        s["start_time"] = min(s["start_time"], self._duration)
        s["end_time"] = min(s["end_time"], self._duration)
        if not s["text"]:
            return None
        prev = self._prev
        if prev is not None:
            if s["text"] == prev["text"] and s["start_time"] - prev["end_time"] < 2.0:
                return None  # a repeated line: Whisper's loop on a quiet tail
            if s["start_time"] < prev["end_time"]:
                s["start_time"] = prev["end_time"]
        s["end_time"] = max(s["end_time"], s["start_time"])
        self._prev = s
        self.segments.append(s)
        s["segment_id"] = f"segment_{len(self.segments):03d}"
        return s


def _clean(segments: list[dict[str, Any]], duration: float) -> list[dict[str, Any]]:
    """:class:`SegmentCleaner` over a whole list (sorted by start first)."""
    cleaner = SegmentCleaner(duration)
    for s in sorted(segments, key=lambda s: (s["start_time"], s["end_time"])):
        cleaner.add(s)
    return cleaner.segments


def _segment(seg: Any, offset: float, words: bool) -> dict[str, Any]:
    item: dict[str, Any] = {
        "segment_id": "",
        "speaker": None,
        "start_time": round(max(0.0, offset + seg.start), 3),
        "end_time": round(max(0.0, offset + seg.end), 3),
        "text": seg.text.strip(),
        "confidence": round(min(1.0, max(0.0, math.exp(seg.avg_logprob))), 4),
        "words": [],
    }
    if words and seg.words:
        item["words"] = [
            {
                "word": w.word.strip(),
                "start": round(offset + w.start, 3),
                "end": round(offset + max(w.end, w.start), 3),
                "probability": round(float(w.probability), 4),
                "speaker": None,
            }
            for w in seg.words
            if w.word.strip()
        ]
    return item


def _label(segments: list[dict[str, Any]], turns: list[Turn]) -> None:
    for s in segments:
        s["speaker"] = speaker_for(s["start_time"], s["end_time"], turns)
        for w in s["words"]:
            w["speaker"] = speaker_for(w["start"], w["end"], turns)


CHINESE = frozenset({"zh", "yue"})
"""Languages written in Han characters whose script (simplified or traditional) is the reader's choice."""


def _script(req: dict[str, Any]) -> Callable[[str], str]:
    from sidecar.core.chinese import SIMPLIFIED, ScriptChoice, converter

    choice = req.get("script")
    return converter(ScriptChoice(choice["script"], choice["config"]) if choice else SIMPLIFIED)


def _in_script(seg: dict[str, Any], convert: Callable[[str], str]) -> dict[str, Any]:
    seg["text"] = convert(seg["text"])
    for w in seg["words"]:
        w["word"] = convert(w["word"])
    return seg


def run_job(req: dict[str, Any], models: Models, emit: Emit) -> dict[str, Any]:
    profile = req["profile"]
    threads = int(req.get("threads") or os.cpu_count() or 1)
    warnings: list[dict[str, Any]] = []
    emit("ModelLoading", {"model": profile["model"], "profile_id": profile["profile_id"]})
    source = WhisperSource(
        model=req["model"]["model"],
        ready=Path(req["model"]["ready"]) if req["model"].get("ready") else None,
        split_dirs=tuple(Path(p) for p in req["model"].get("split_dirs", [])),
        target=Path(req["model"]["target"]) if req["model"].get("target") else None,
    )
    try:
        model_dir = ensure_whisper_model(source)
        whisper = models.whisper(model_dir, profile.get("compute_type", "int8"), threads)
    except ModelUnavailable as exc:
        raise JobError(TRANSCRIPTION_MODEL_UNAVAILABLE, str(exc), model=profile["model"]) from None
    tmp_dir = Path(req["tmp_dir"])
    tmp_dir.mkdir(parents=True, exist_ok=True)
    fd, raw_name = tempfile.mkstemp(prefix="decoded-", suffix=".f32", dir=tmp_dir)
    os.close(fd)
    raw = Path(raw_name)
    try:
        try:
            decoded = audio_mod.decode_to_file(Path(req["audio"]), raw)
        except audio_mod.AudioError as exc:
            raise JobError(exc.code, exc.message, reason=exc.reason, **exc.details) from None
        samples = audio_mod.open_samples(decoded)
        files = _diarization_files(req, warnings) if req.get("diarize") else None
        build = _DiarizerBuild(req, files, models, warnings) if files is not None else None
        result = _transcribe(
            whisper, samples, decoded.duration, req, profile, emit, after_first_window=build.start if build else None
        )
        if build is not None and result["segments"]:
            _diarize(build, samples, decoded, result["segments"], emit)
        elif build is not None:
            build.wait()  # nothing was said: no speakers to find (the build's warnings still count)
        result["warnings"] = warnings
        result["duration"] = round(decoded.duration, 3)
        return result
    finally:
        raw.unlink(missing_ok=True)


class _DiarizerBuild:
    """The diarizer, built in a thread started once the first window is transcribed: the first job that asks for
    speakers imports torch and pyannote (tens of seconds on a busy machine) while Whisper decodes the rest, not
    after it — and not before the first words either."""

    def __init__(
        self, req: dict[str, Any], files: DiarizationFiles, models: Models, warnings: list[dict[str, Any]]
    ) -> None:
        self._args = (req, files, models, warnings)
        self._thread: threading.Thread | None = None
        self._diarizer: Diarizer | None = None

    def _run(self) -> None:
        self._diarizer = _prepare_diarizer(*self._args)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="diarizer-build", daemon=True)
            self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def result(self) -> Diarizer | None:
        self.start()
        assert self._thread is not None
        self._thread.join()
        return self._diarizer


def _diarize(
    build: _DiarizerBuild, samples: Any, decoded: audio_mod.Decoded, segments: list[dict[str, Any]], emit: Emit
) -> None:
    """Speakers for the finished transcript: turns over the whole recording, then one ``SpeakersAssigned``."""
    diarizer = build.result()
    if diarizer is None:
        return
    emit("DiarizationStarted", {})
    t0 = time.monotonic()
    turns = diarizer(samples)
    audio_mod.release(samples, 0, decoded.samples)
    trim_memory()
    emit(
        "DiarizationCompleted",
        {
            "speakers": len({t.speaker for t in turns}),
            "turns": len(turns),
            "duration_ms": int((time.monotonic() - t0) * 1000),
        },
    )
    _label(segments, turns)
    emit("SpeakersAssigned", {"segments": [{"segment_id": s["segment_id"], "speaker": s["speaker"]} for s in segments]})


def _transcribe(
    whisper: Any,
    samples: Any,
    duration: float,
    req: dict[str, Any],
    profile: dict[str, Any],
    emit: Emit,
    *,
    after_first_window: Callable[[], None] | None = None,
) -> dict[str, Any]:
    language = req.get("language") or (None if profile.get("multilingual", True) else "en")
    emit("TranscriptionStarted", {"duration": round(duration, 3), "language": language})
    cleaner = SegmentCleaner(round(duration, 3))
    convert = _script(req)
    words = bool(req.get("word_timestamps"))
    detected: str | None = language
    last_progress = 0.0
    for offset, chunk in audio_mod.windows(samples, first_s=audio_mod.FIRST_WINDOW_S):
        pieces, info = whisper.transcribe(
            chunk,
            language=detected,
            beam_size=int(profile.get("beam_size", 5)),
            vad_filter=bool(profile.get("vad_filter", True)),
            vad_parameters={"min_silence_duration_ms": int(profile.get("vad_min_silence_ms", 500))},
            word_timestamps=words,
            condition_on_previous_text=bool(profile.get("condition_on_previous_text", False)),
        )
        window_language = detected or info.language
        for seg in pieces:  # a generator: each segment as soon as its 30 s chunk is decoded
            if detected is None:
                detected = info.language
            item = _segment(seg, offset, words)
            if window_language in CHINESE:
                _in_script(item, convert)
            kept = cleaner.add(item)
            if kept is not None:
                emit("Segment", kept)
            now = time.monotonic()
            if now - last_progress >= PROGRESS_EVERY_S:
                last_progress = now
                done = min(duration, offset + seg.end)
                emit("Progress", {"current": round(done, 2), "total": round(duration, 2)})
        trim_memory()
        if after_first_window is not None:
            after_first_window()
        done = min(duration, offset + chunk.shape[0] / audio_mod.SAMPLE_RATE)
        emit("Progress", {"current": round(done, 2), "total": round(duration, 2)})
    segments = cleaner.segments
    final = detected if segments else language
    joiner = "" if final in CHINESE else " "
    return {"language": final, "segments": segments, "text": joiner.join(s["text"] for s in segments)}
