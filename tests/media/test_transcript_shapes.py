"""Pure parts of the media domain: cleaning segments, speaker assignment, note blocks, SRT/WebVTT, sniffing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sidecar.media import audio, formats
from sidecar.media.diarize import Turn, speaker_for
from sidecar.media.models import TranscriptSegment
from sidecar.media.notes import clock, transcript_blocks
from sidecar.media.pipeline import _clean


def _seg(start: float, end: float, text: str, speaker: str | None = None) -> dict:
    return {"segment_id": "", "speaker": speaker, "start_time": start, "end_time": end, "text": text, "words": []}


def test_segments_are_sorted_non_overlapping_and_within_the_audio() -> None:
    raw = [_seg(5.0, 7.0, "b"), _seg(0.0, 5.5, "a"), _seg(7.0, 7.5, "b"), _seg(8.0, 8.0, ""), _seg(9.0, 12.0, "c")]
    out = _clean(raw, duration=10.0)
    assert [(s["segment_id"], s["start_time"], s["end_time"], s["text"]) for s in out] == [
        ("segment_001", 0.0, 5.5, "a"),
        ("segment_002", 5.5, 7.0, "b"),  # starts where the previous ends; the repeat of "b" is dropped
        ("segment_003", 9.0, 10.0, "c"),  # clipped to the audio
    ]


def test_speaker_by_overlap_then_nearest() -> None:
    turns = [Turn(0.0, 4.0, "SPEAKER_00"), Turn(4.2, 9.0, "SPEAKER_01")]
    assert speaker_for(3.0, 6.0, turns) == "SPEAKER_01"  # 1.8 s of B against 1.0 s of A
    assert speaker_for(9.5, 10.0, turns) == "SPEAKER_01"  # within 1 s of a turn
    assert speaker_for(20.0, 21.0, turns) is None


def _segments() -> list[TranscriptSegment]:
    return [
        TranscriptSegment(segment_id="s1", speaker="SPEAKER_00", start_time=0.0, end_time=3.0, text="Hello there."),
        TranscriptSegment(segment_id="s2", speaker="SPEAKER_00", start_time=3.0, end_time=5.5, text="How are you?"),
        TranscriptSegment(segment_id="s3", speaker="SPEAKER_01", start_time=6.0, end_time=8.25, text="Fine <thanks>."),
    ]


def test_note_blocks_are_speaker_turns_citing_the_audio() -> None:
    blocks = transcript_blocks(_segments(), "att_1")
    assert blocks == [
        (
            "[00:00–00:05] SPEAKER_00: Hello there. How are you?",
            {"source_audio": "att_1", "start_time": 0.0, "end_time": 5.5, "speaker": "SPEAKER_00"},
        ),
        (
            "[00:06–00:08] SPEAKER_01: Fine <thanks>.",
            {"source_audio": "att_1", "start_time": 6.0, "end_time": 8.25, "speaker": "SPEAKER_01"},
        ),
    ]
    plain = transcript_blocks(_segments(), "att_1", include_timestamps=False, include_speakers=False)
    assert [t for t, _ in plain] == ["Hello there. How are you?", "Fine <thanks>."]
    assert plain[0][1]["speaker"] == "SPEAKER_00"  # the citation keeps the speaker either way
    assert clock(3725.2) == "1:02:05"


def test_srt_and_webvtt_as_the_ecosystem_writes_them() -> None:
    assert formats.to_srt(_segments()[2:]) == "1\n00:00:06,000 --> 00:00:08,250\n[SPEAKER_01] Fine <thanks>.\n"
    assert formats.to_vtt(_segments()[2:]) == (
        "WEBVTT\n\n00:00:06.000 --> 00:00:08.250\n<v SPEAKER_01>Fine &lt;thanks&gt;.\n"
    )
    assert formats.timestamp(3661.0004, ",") == "01:01:01,000"
    assert formats.to_text(_segments()[:1]) == "SPEAKER_00: Hello there.\n"


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"RIFF\x00\x00\x00\x00WAVEfmt ", "wav"),
        (b"ID3\x04\x00", "mp3/aac"),
        (b"\xff\xfb\x90\x00", "mp3/aac"),
        (b"\xff\xf1\x5c\x40", "mp3/aac"),  # ADTS AAC (MPEG-4), as ffmpeg writes a .aac
        (b"\xff\xf9\x50\x80", "mp3/aac"),  # ADTS AAC (MPEG-2)
        (b"\xff\xe1\x00\x00", None),  # MPEG audio sync with the reserved layer and no ADTS sync
        (b"OggS\x00", "ogg"),
        (b"fLaC\x00", "flac"),
        (b"\x00\x00\x00\x20ftypM4A ", "mp4"),
        (b"\x1a\x45\xdf\xa3\x01", "webm"),
        (b"this is text", None),
        (b"%PDF-1.7", None),
    ],
)
def test_sniffing(head: bytes, kind: str | None) -> None:
    assert audio.sniff_audio(head, "x") == kind


def test_windows_cut_at_a_quiet_moment_and_cover_everything() -> None:
    rate = audio.SAMPLE_RATE
    samples = np.ones(rate * 25, dtype=np.float32)
    samples[int(8.3 * rate) : int(8.6 * rate)] = 0.0  # a pause inside the search span before 10 s
    pieces = list(audio.windows(samples, window_s=10.0))
    assert abs(pieces[1][0] - 8.45) < 0.11
    assert sum(p.size for _, p in pieces) == samples.size
    assert pieces[0][0] == 0.0
    # a short first window (first words fast), then full ones
    samples = np.ones(rate * 60, dtype=np.float32)
    for pause in (10.0, 38.0):
        samples[int(pause * rate) : int((pause + 0.3) * rate)] = 0.0
    pieces = list(audio.windows(samples, window_s=30.0, first_s=12.0))
    assert [o for o, _ in pieces] == [0.0, pytest.approx(10.15, abs=0.11), pytest.approx(38.15, abs=0.11)]
    assert sum(p.size for _, p in pieces) == samples.size


def test_decode_reports_a_file_without_audio_and_a_truncated_one(tmp_path: Path) -> None:
    import wave

    with pytest.raises(audio.AudioError) as info:
        (tmp_path / "x.wav").write_bytes(b"RIFF....WAVEjunk")
        audio.decode_to_file(tmp_path / "x.wav", tmp_path / "out.f32")
    assert info.value.code in {"UNSUPPORTED_AUDIO_FORMAT", "TRANSCRIPTION_FAILED"}
    good = tmp_path / "tone.wav"
    with wave.open(str(good), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes((np.sin(np.arange(16000 * 4) / 5) * 8000).astype(np.int16).tobytes())
    decoded = audio.decode_to_file(good, tmp_path / "ok.f32")
    assert decoded.samples == 16000 * 4 and decoded.declared_s == pytest.approx(4.0)
    cut = tmp_path / "cut.wav"
    cut.write_bytes(good.read_bytes()[: 44 + 16000 * 2])  # the header still declares 4 s
    with pytest.raises(audio.AudioError) as info:
        audio.decode_to_file(cut, tmp_path / "cut.f32")
    assert info.value.code == "TRANSCRIPTION_FAILED" and info.value.reason == "AUDIO_TRUNCATED"


def test_more_than_5000_speaker_turns_still_make_a_valid_note() -> None:
    """Issue 21: one block per turn, and a long diarized recording (12,001 turns) was VALIDATION_ERROR."""
    from sidecar.knowledge.models import MAX_BLOCK_CHARS, MAX_BLOCKS_PER_NOTE, BlockInput, Citation, CreateNoteParams
    from sidecar.media.notes import pack_blocks

    segments = [
        TranscriptSegment(
            segment_id=f"s{i}",
            speaker=f"SPEAKER_0{i % 2}",
            start_time=i * 2.0,
            end_time=i * 2.0 + 1.5,
            text=f"turn {i}",
        )
        for i in range(12_001)
    ]
    turns = transcript_blocks(segments, "att_1")
    assert len(turns) == 12_001
    packed = pack_blocks(turns, max_blocks=MAX_BLOCKS_PER_NOTE, max_chars=MAX_BLOCK_CHARS, max_citations=100)
    assert len(packed) <= MAX_BLOCKS_PER_NOTE
    blocks = [BlockInput(text=text, citations=[Citation(**c) for c in cites]) for text, cites in packed]
    CreateNoteParams(title="long", blocks=blocks)  # valid: the request the app makes
    assert [c["start_time"] for _, cites in packed for c in cites] == [t[1]["start_time"] for t in turns]
    assert packed[0][0].splitlines()[0] == turns[0][0]  # each turn keeps its own line and citation
    few = pack_blocks(turns[:10], max_blocks=MAX_BLOCKS_PER_NOTE, max_chars=MAX_BLOCK_CHARS, max_citations=100)
    assert few == [(text, [c]) for text, c in turns[:10]], "under the limit: one block per turn, as before"
