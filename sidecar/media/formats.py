"""Transcript output formats of the ``transcribe`` CLI: plain text, SubRip (SRT), WebVTT, JSON.

SRT and WebVTT as the ecosystem writes them: SRT cues numbered from 1, ``HH:MM:SS,mmm --> HH:MM:SS,mmm``;
WebVTT starts with ``WEBVTT``, uses ``HH:MM:SS.mmm`` and names speakers with a voice tag (``<v SPEAKER_00>``).
"""

from __future__ import annotations

from collections.abc import Sequence

from .models import TranscriptionJob, TranscriptSegment

FORMATS = ("text", "srt", "vtt", "json")


def timestamp(seconds: float, sep: str) -> str:
    ms = max(0, round(seconds * 1000))
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def to_text(segments: Sequence[TranscriptSegment]) -> str:
    return "".join(f"{s.speaker}: {s.text}\n" if s.speaker else f"{s.text}\n" for s in segments)


def to_srt(segments: Sequence[TranscriptSegment]) -> str:
    cues = []
    for i, s in enumerate(segments, 1):
        text = f"[{s.speaker}] {s.text}" if s.speaker else s.text
        cues.append(f"{i}\n{timestamp(s.start_time, ',')} --> {timestamp(s.end_time, ',')}\n{text}\n")
    return "\n".join(cues)


def _vtt_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_vtt(segments: Sequence[TranscriptSegment]) -> str:
    out = ["WEBVTT\n"]
    for s in segments:
        text = _vtt_escape(s.text)
        if s.speaker:
            text = f"<v {s.speaker}>{text}"
        out.append(f"{timestamp(s.start_time, '.')} --> {timestamp(s.end_time, '.')}\n{text}\n")
    return "\n".join(out)


def render(job: TranscriptionJob, fmt: str) -> str:
    if fmt == "json":
        return job.model_dump_json(indent=2) + "\n"
    if fmt == "srt":
        return to_srt(job.segments)
    if fmt == "vtt":
        return to_vtt(job.segments)
    return to_text(job.segments)
