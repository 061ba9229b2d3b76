"""Audio in (worker side): sniffing at create, PyAV decoding to a 16 kHz mono float32 file, windows.

:func:`sniff_audio` runs in the sidecar (no PyAV: a few header bytes). Everything else runs in the worker.
Decoding goes the way faster-whisper's ``decode_audio`` goes (PyAV, resampled to 16 kHz mono), but streams the
samples into a temporary file that is then memory-mapped: a long file never sits in memory as one array, and the
transcription reads it window by window (:func:`windows`).
"""

from __future__ import annotations

import contextlib
import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import TRANSCRIPTION_FAILED, UNSUPPORTED_AUDIO_FORMAT

SAMPLE_RATE = 16_000
WINDOW_S = 120.0  # transcription window: two minutes of samples (and their features) in memory at a time
FIRST_WINDOW_S = 10.0
"""The first window is short: Whisper yields a window's segments only once its 30 s chunk is decoded, so the first
words of a recording arrive after the decoding of at most 10 s of speech, not 30 (issue 34: first words fast)."""
SPLIT_SEARCH_S = 8.0  # a window ends at the quietest 0.1 s within its last seconds
TRUNCATED_RATIO = 0.9  # decoded < 90 % of the declared duration → truncated

# Formats PyAV decodes that the contract accepts (seed §5: wav, mp3, m4a/aac, ogg/opus, flac, webm).
_SUFFIXES = {".wav", ".wave", ".mp3", ".m4a", ".mp4", ".aac", ".ogg", ".oga", ".opus", ".flac", ".webm", ".weba"}


class AudioError(Exception):
    """A file the worker cannot use; ``code`` is the seed's, ``reason`` a stable detail."""

    def __init__(self, code: str, reason: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details


def _looks_like_mpeg_audio(head: bytes) -> bool:
    # an MPEG audio frame sync (11 bits set) with a valid layer, or ADTS AAC
    if len(head) < 2 or head[0] != 0xFF:
        return False
    mpeg = (head[1] & 0xE0) == 0xE0 and (head[1] & 0x06) != 0
    adts = (head[1] & 0xF6) == 0xF0  # 12-bit sync, layer 00: ADTS (the layer check above refused it)
    return mpeg or adts


def sniff_audio(head: bytes, filename: str) -> str | None:
    """The container family from the first bytes, or None when it is not an accepted audio format."""
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "wav"
    if head.startswith(b"ID3") or _looks_like_mpeg_audio(head):
        return "mp3/aac"
    if head.startswith(b"OggS"):
        return "ogg"
    if head.startswith(b"fLaC"):
        return "flac"
    if head[4:8] == b"ftyp":
        return "mp4"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "webm"
    return None


def accepted_suffix(filename: str) -> bool:
    return Path(filename).suffix.lower() in _SUFFIXES


@dataclass
class Decoded:
    path: Path
    samples: int
    declared_s: float | None

    @property
    def duration(self) -> float:
        return self.samples / SAMPLE_RATE


def _declared_seconds(container: Any, stream: Any) -> float | None:
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration:
        return container.duration / 1_000_000
    return None


def _wav_header_seconds(source: Path) -> float | None:
    """What a WAV header declares (FFmpeg trusts the file size instead, so a cut WAV looks complete to it)."""
    import wave

    try:
        with wave.open(str(source), "rb") as w:
            return w.getnframes() / w.getframerate() if w.getframerate() else None
    except (wave.Error, EOFError, OSError, ValueError):
        return None


def decode_to_file(source: Path, out: Path) -> Decoded:
    """Decode ``source`` into ``out`` (raw float32, 16 kHz mono); raise :class:`AudioError`."""
    import av
    import numpy as np

    try:
        container = av.open(str(source), metadata_errors="ignore")
    except (av.FFmpegError, OSError, UnicodeDecodeError) as exc:
        raise AudioError(
            UNSUPPORTED_AUDIO_FORMAT, "UNREADABLE_CONTAINER", "The file is not an audio format that can be read."
        ) from exc
    samples = 0
    decode_error = False
    with container:
        if not container.streams.audio:
            raise AudioError(UNSUPPORTED_AUDIO_FORMAT, "NO_AUDIO_STREAM", "The file has no audio stream.")
        stream = container.streams.audio[0]
        declared = _declared_seconds(container, stream)
        header = _wav_header_seconds(source) if container.format.name == "wav" else None
        if header and (declared is None or header > declared):
            declared = header
        resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
        with open(out, "wb") as f:

            def write(frames: Any) -> None:
                nonlocal samples
                for rf in frames:
                    arr = rf.to_ndarray().reshape(-1).astype(np.float32) / 32768.0
                    samples += arr.size
                    f.write(arr.tobytes())

            try:
                for frame in container.decode(stream):
                    write(resampler.resample(frame))
            except (av.FFmpegError, ValueError):
                decode_error = True
            write(resampler.resample(None))
    if samples == 0:
        raise AudioError(
            TRANSCRIPTION_FAILED, "AUDIO_UNDECODABLE", "No audio could be decoded from the file (corrupt or empty)."
        )
    decoded = samples / SAMPLE_RATE
    if declared and decoded < TRUNCATED_RATIO * declared - 0.5:
        raise AudioError(
            TRANSCRIPTION_FAILED,
            "AUDIO_TRUNCATED",
            f"The file is truncated or corrupt: {decoded:.1f} s decoded of {declared:.1f} s declared.",
            decoded_seconds=round(decoded, 2),
            declared_seconds=round(declared, 2),
            decode_error=decode_error,
        )
    return Decoded(out, samples, declared)


def open_samples(decoded: Decoded) -> Any:
    """The decoded samples as a read-only memory map (pages come and go with the OS, not our heap)."""
    import numpy as np

    return np.memmap(decoded.path, dtype=np.float32, mode="r", shape=(decoded.samples,))


def _quiet_point(samples: Any, lo: int, hi: int) -> int:
    import numpy as np

    frame = SAMPLE_RATE // 10
    region = np.asarray(samples[lo:hi], dtype=np.float32)
    n = region.size // frame
    if n < 2:
        return hi
    energy = (region[: n * frame].reshape(n, frame) ** 2).mean(axis=1)
    return lo + int(np.argmin(energy)) * frame + frame // 2


def windows(samples: Any, window_s: float = WINDOW_S, first_s: float | None = None) -> Iterator[tuple[float, Any]]:
    """``(offset_seconds, float32 array)`` windows of at most ``window_s`` (the first of at most ``first_s``), each
    cut at a quiet moment of its last ``SPLIT_SEARCH_S`` seconds."""
    import numpy as np

    total = samples.shape[0]
    size = int(window_s * SAMPLE_RATE)
    search = int(SPLIT_SEARCH_S * SAMPLE_RATE)
    start = 0
    while start < total:
        end = min(start + (size if start or first_s is None else int(first_s * SAMPLE_RATE)), total)
        if end < total:
            end = _quiet_point(samples, max(start + 1, end - search), end)
        yield start / SAMPLE_RATE, np.array(samples[start:end], dtype=np.float32)
        release(samples, start, end)
        start = end


def release(samples: Any, start: int, end: int) -> None:
    """Drop the mapped pages of a finished window from our resident set (they are clean: the file has them)."""
    mm = getattr(samples, "_mmap", None)
    if mm is None or not hasattr(mm, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
        return
    page = mmap.PAGESIZE
    lo = (start * 4) // page * page
    hi = (end * 4) // page * page
    if hi > lo:
        with contextlib.suppress(OSError, ValueError):
            mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
