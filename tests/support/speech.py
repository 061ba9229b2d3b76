"""Speech made at test time with espeak-ng (no recordings in the repo), and word error rate.

Used by the media tests and by scripts/bench/bench_transcription.py. Voices A, B, C are espeak variants that
the diarization pipeline tells apart (checked with the CAM++ embeddings: cosine ≈ 0.4–0.6 between voices,
≈ 0.85–0.9 within one).
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import tempfile
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

VOICES = {
    "A": ["-v", "en-us+m1", "-p", "30", "-s", "150"],
    "B": ["-v", "en-us+f3", "-p", "60", "-s", "150"],
    "C": ["-v", "en-us+m7", "-p", "90", "-s", "140"],
}

# (voice, text): A, B, C, B — the returning speaker must get B's label again
TURNS = [
    ("A", "The quick brown fox jumps over the lazy dog. Please schedule the project meeting for next Tuesday."),
    ("B", "I think the budget report should be finished before the end of the month."),
    ("C", "The weather tomorrow will be sunny with a light breeze from the west."),
    ("B", "Thank you, I will send the document to everyone this afternoon."),
]
GAP_S = 1.0


@dataclass
class Turn:
    voice: str
    text: str
    start: float
    end: float


def have_espeak() -> bool:
    return shutil.which("espeak-ng") is not None


@functools.cache
def _speak(voice: str, text: str) -> tuple[np.ndarray, int]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "t.wav"
        subprocess.run(["espeak-ng", *VOICES[voice], "-w", str(out), text], check=True, capture_output=True)
        with wave.open(str(out)) as w:
            rate = w.getframerate()
            data = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    return data, rate


def write_wav(path: Path, samples: np.ndarray, rate: int) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.astype(np.int16).tobytes())
    return path


def conversation(path: Path, turns: list[tuple[str, str]] = TURNS, repeat: int = 1) -> list[Turn]:
    """Write the turns (with ``GAP_S`` of silence between) to a WAV file; return each turn's times."""
    pieces: list[np.ndarray] = []
    out: list[Turn] = []
    rate = 22050
    t = 0.0
    for _ in range(repeat):
        for voice, text in turns:
            data, rate = _speak(voice, text)
            out.append(Turn(voice, text, t, t + data.size / rate))
            pieces.append(data)
            t += data.size / rate
            gap = np.zeros(int(GAP_S * rate), dtype=np.int16)
            pieces.append(gap)
            t += gap.size / rate
    write_wav(path, np.concatenate(pieces), rate)
    return out


def silence(path: Path, seconds: float, rate: int = 16000) -> Path:
    return write_wav(path, np.zeros(int(seconds * rate), dtype=np.int16), rate)


def to_mp3(wav: Path, mp3: Path) -> Path:
    """Encode with the system ffmpeg (libmp3lame writes a Xing/Info header with the frame count)."""
    subprocess.run(
        ["ffmpeg", "-loglevel", "error", "-y", "-i", str(wav), "-c:a", "libmp3lame", "-b:a", "64k", str(mp3)],
        check=True,
    )
    return mp3


def truncate(src: Path, dst: Path, keep: float = 0.4) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[: int(len(data) * keep)])
    return dst


_NUMBERS = {"3": "three", "iii": "three"}


def words(text: str) -> list[str]:
    tokens = re.findall(r"[a-z0-9']+", text.lower().replace("o'clock", "oclock"))
    return [_NUMBERS.get(t, t) for t in tokens]


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate: word-level Levenshtein distance / reference length."""
    ref, hyp = words(reference), words(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1] / len(ref)
