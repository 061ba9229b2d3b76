"""Chinese script (issue 34): which characters a reader gets, and search across both scripts.

The converter is the real OpenCC; no model runs here. The streaming pipeline is driven with a stand-in Whisper
(its ``transcribe`` yields canned segments, as faster-whisper's generator does) because what is tested is what the
pipeline does with recognised text — script, cleaning, event order — not what a model hears (the real-model path
is tests/e2e/test_media_e2e.py).
"""

from __future__ import annotations

import math
import wave
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sidecar.core.chinese import SIMPLIFIED, ScriptChoice, converter, fold, resolve_script, script_for
from sidecar.media import pipeline
from sidecar.media.client import DEFAULT_IDLE_S, idle_from_env
from sidecar.media.models import CreateTranscriptionParams


@pytest.mark.parametrize(
    ("locale", "expected"),
    [
        ("zh-TW", ScriptChoice("traditional", "s2tw")),
        ("zh-HK", ScriptChoice("traditional", "s2hk")),
        ("zh_MO", ScriptChoice("traditional", "s2hk")),
        ("zh-Hant", ScriptChoice("traditional", "s2t")),
        ("zh-Hant-TW", ScriptChoice("traditional", "s2tw")),
        ("zh-Hans-HK", SIMPLIFIED),
        ("zh-CN", SIMPLIFIED),
        ("zh", SIMPLIFIED),
        ("en-US", None),
        (None, None),
    ],
)
def test_locale_names_a_script(locale: str | None, expected: ScriptChoice | None) -> None:
    assert script_for(locale) == expected


def test_the_request_wins_then_the_app_then_simplified() -> None:
    assert resolve_script("zh-CN", "zh-TW") == SIMPLIFIED
    assert resolve_script(None, "zh-TW").script == "traditional"
    assert resolve_script("en-GB", "zh-HK").script == "traditional"  # an English locale says nothing of script
    assert resolve_script(None, None) == SIMPLIFIED


def test_conversion_both_ways_and_only_of_han_text() -> None:
    to_simplified = converter(SIMPLIFIED)
    to_taiwan = converter(resolve_script("zh-TW"))
    assert to_simplified("廣州市房地產中介協會分析") == "广州市房地产中介协会分析"
    assert to_taiwan("广州市房地产中介协会分析") == "廣州市房地產中介協會分析"
    assert to_taiwan("廣州市房地产") == "廣州市房地產"  # Whisper mixes both scripts in one line
    assert to_simplified("Ask not what your country can do") == "Ask not what your country can do"
    assert fold("會議 meeting") == fold("会议 meeting") == "会议 meeting"


def test_locale_is_checked_on_the_wire() -> None:
    assert CreateTranscriptionParams(attachment_id="a", locale="zh-Hant-TW").locale == "zh-Hant-TW"
    for bad in ("", "zh TW", "x" * 40, "../zh"):
        with pytest.raises(ValueError):
            CreateTranscriptionParams(attachment_id="a", locale=bad)


def test_worker_idle_time_is_configurable() -> None:
    assert idle_from_env({}) == DEFAULT_IDLE_S
    assert idle_from_env({"METONA_MEDIA_IDLE_S": "0"}) == 0.0
    assert idle_from_env({"METONA_MEDIA_IDLE_S": "42.5"}) == 42.5
    for bad in ("-1", "soon", "nan", "inf"):
        assert idle_from_env({"METONA_MEDIA_IDLE_S": bad}) == DEFAULT_IDLE_S


# -- the streaming pipeline ---------------------------------------------------------------------------


@dataclass
class _Word:
    word: str
    start: float
    end: float
    probability: float = 0.9


@dataclass
class _Seg:
    start: float
    end: float
    text: str
    avg_logprob: float = -0.1
    words: list[_Word] = field(default_factory=list)


@dataclass
class _Info:
    language: str


class _Whisper:
    """faster-whisper's shape: ``transcribe`` returns (a lazy generator of segments, info)."""

    def __init__(self, language: str, segments: list[_Seg], log: list[str]) -> None:
        self.language, self.segments, self.log = language, segments, log

    def transcribe(self, chunk: Any, **kw: Any) -> tuple[Any, _Info]:
        def gen() -> Any:
            for s in self.segments:
                self.log.append(f"decoded {s.text}")
                yield s

        return gen(), _Info(kw.get("language") or self.language)


def _wav(path: Path, seconds: float) -> Path:
    n = int(seconds * 16_000)
    tone = (0.2 * np.sin(2 * math.pi * 220 * np.arange(n) / 16_000) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16_000)
        w.writeframes(tone.tobytes())
    return path


def _run(tmp_path: Path, language: str, segments: list[_Seg], script: dict[str, str] | None) -> tuple[Any, Any]:
    log: list[str] = []
    events: list[tuple[str, dict[str, Any]]] = []

    class Models(pipeline.Models):
        def whisper(self, path: Path, compute_type: str, threads: int) -> Any:
            return _Whisper(language, segments, log)

    def emit(event: str, data: dict[str, Any]) -> None:
        log.append(event)
        events.append((event, dict(data)))

    req = {
        "audio": str(_wav(tmp_path / "tone.wav", 6.0)),
        "tmp_dir": str(tmp_path / "tmp"),
        "model": {"model": "whisper-base", "ready": str(tmp_path)},
        "profile": {"profile_id": "default", "model": "whisper-base", "multilingual": True},
        "language": None,
        "diarize": False,
        "word_timestamps": True,
        "script": script,
    }
    result = pipeline.run_job(req, Models(), emit)
    return result, (events, log)


SEGMENTS = [
    _Seg(0.0, 2.0, " 廣州市房地產", words=[_Word(" 廣州市", 0.0, 1.0), _Word("房地產", 1.0, 2.0)]),
    _Seg(1.8, 4.0, " 中介協會分析"),
    _Seg(4.0, 4.5, " 中介協會分析"),  # Whisper's repeat on a quiet tail: dropped
]


def test_segments_stream_as_recognised_in_the_readers_script(tmp_path: Path) -> None:
    result, (events, log) = _run(tmp_path, "zh", SEGMENTS, None)
    assert result["language"] == "zh"
    assert [s["text"] for s in result["segments"]] == ["广州市房地产", "中介协会分析"]
    assert [w["word"] for w in result["segments"][0]["words"]] == ["广州市", "房地产"]
    assert result["text"] == "广州市房地产中介协会分析"  # Chinese sentences are joined without spaces
    streamed = [d for e, d in events if e == "Segment"]
    assert streamed == result["segments"]
    assert streamed[1]["segment_id"] == "segment_002" and streamed[1]["start_time"] == 2.0  # no overlap
    # each segment event leaves before the next segment is decoded
    order = [x for x in log if x == "Segment" or x.startswith("decoded")]
    assert order[:4] == ["decoded  廣州市房地產", "Segment", "decoded  中介協會分析", "Segment"]
    names = [e for e, _ in events if e != "Progress"]
    assert names == ["ModelLoading", "TranscriptionStarted", "Segment", "Segment"]


def test_traditional_when_asked_and_other_languages_untouched(tmp_path: Path) -> None:
    tw = {"script": "traditional", "config": "s2tw"}
    result, _ = _run(tmp_path, "zh", [_Seg(0.0, 2.0, "广州市房地产中介协会分析")], tw)
    assert result["text"] == "廣州市房地產中介協會分析"
    # Japanese kanji are not Chinese: never converted, whatever the locale
    result, _ = _run(tmp_path, "ja", [_Seg(0.0, 2.0, "会議の資料")], None)
    assert result["text"] == "会議の資料"
