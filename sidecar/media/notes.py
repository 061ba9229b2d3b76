"""A transcript as note blocks (phase-2 §5.4): one block per speaker turn, each citing its stretch of audio.

Consecutive segments of one speaker merge into one block while it stays short (≤ 60 s, ≤ 1,200 characters),
so a search hit points at a few seconds of audio, not at the whole recording. Each block's citation carries
``source_audio`` (the attachment id), ``start_time``, ``end_time`` and ``speaker``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .models import TranscriptSegment

MAX_BLOCK_SECONDS = 60.0
MAX_BLOCK_CHARS = 1_200


def clock(seconds: float) -> str:
    """``MM:SS`` (or ``H:MM:SS`` from an hour on)."""
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def _turns(segments: Sequence[TranscriptSegment], by_speaker: bool) -> Iterator[list[TranscriptSegment]]:
    turn: list[TranscriptSegment] = []
    for seg in segments:
        if turn:
            same = (seg.speaker == turn[0].speaker) if by_speaker else True
            long = seg.end_time - turn[0].start_time > MAX_BLOCK_SECONDS
            big = sum(len(s.text) + 1 for s in turn) + len(seg.text) > MAX_BLOCK_CHARS
            if not same or long or big:
                yield turn
                turn = []
        turn.append(seg)
    if turn:
        yield turn


def transcript_blocks(
    segments: Sequence[TranscriptSegment],
    attachment_id: str,
    *,
    include_timestamps: bool = True,
    include_speakers: bool = True,
) -> list[tuple[str, dict[str, Any]]]:
    """``(text, citation)`` per block, in order."""
    out = []
    for turn in _turns(segments, by_speaker=any(s.speaker for s in segments)):
        start, end, speaker = turn[0].start_time, turn[-1].end_time, turn[0].speaker
        prefix = []
        if include_timestamps:
            prefix.append(f"[{clock(start)}–{clock(end)}]")
        if include_speakers and speaker:
            prefix.append(f"{speaker}:")
        text = " ".join(s.text for s in turn)
        out.append(
            (
                " ".join([*prefix, text]),
                {"source_audio": attachment_id, "start_time": start, "end_time": end, "speaker": speaker},
            )
        )
    return out


def pack_blocks(
    blocks: Sequence[tuple[str, dict[str, Any]]], *, max_blocks: int, max_chars: int, max_citations: int
) -> list[tuple[str, list[dict[str, Any]]]]:
    """The blocks as they go into a note: one per turn while they are at most ``max_blocks``; beyond that
    (issue 21: a long diarized recording has more than 5,000 turns) consecutive turns share a block, one line and
    one citation each, as evenly as ``max_chars`` and ``max_citations`` per block allow."""
    per_block = max(1, -(-len(blocks) // max_blocks))  # ceil: turns per block
    out: list[tuple[str, list[dict[str, Any]]]] = []
    lines: list[str] = []
    cites: list[dict[str, Any]] = []
    size = 0
    for text, citation in blocks:
        full = len(lines) >= min(per_block, max_citations) or (lines and size + 1 + len(text) > max_chars)
        if full:
            out.append(("\n".join(lines), cites))
            lines, cites, size = [], [], 0
        lines.append(text)
        cites.append(citation)
        size += len(text) + (1 if size else 0)
    if lines:
        out.append(("\n".join(lines), cites))
    return out
