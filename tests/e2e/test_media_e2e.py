"""Transcription over real stdio: espeak-ng speech by three voices → en-fast and default profiles, diarization,
a note whose search hit cites the audio, cancel within 1 s while ping answers, bad files, no worker left.

One sidecar serves the module (its worker keeps the models loaded between tests). Against the binary
(SIDECAR_CMD) the same tests run with its worker started from the engines folder beside it (dist/metona/metona-engines);
a binary without engines reports transcription unavailable, with its reason.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import speech
from tests.support.sidecar_proc import Sidecar, worker_pids

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not speech.have_espeak(), reason="espeak-ng is not installed")]

SLOW = 300.0
BINARY = bool(os.environ.get("SIDECAR_CMD"))
TERMINAL = frozenset({"Completed", "Failed", "Cancelled"})


@pytest.fixture(scope="module")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("media")


@pytest.fixture(scope="module")
def audio(media_dir: Path) -> dict[str, Any]:
    """Every input file, made once for the module."""
    turns_path = media_dir / "meeting.wav"
    turns = speech.conversation(turns_path)
    long_path = media_dir / "long.wav"
    speech.conversation(long_path, repeat=8)
    mp3 = speech.to_mp3(turns_path, media_dir / "meeting.mp3")
    text = media_dir / "notes.txt"
    text.write_text("this is not audio\n" * 50)
    empty = media_dir / "empty.wav"
    empty.write_bytes(b"")
    return {
        "turns": turns,
        "meeting": turns_path,
        "long": long_path,
        "silence": speech.silence(media_dir / "silence.wav", 40.0),
        "truncated_mp3": speech.truncate(mp3, media_dir / "truncated.mp3"),
        "text": text,
        "empty": empty,
    }


@pytest.fixture(scope="module")
def sc(media_dir: Path) -> Iterator[Sidecar]:
    data = media_dir / "data"
    data.mkdir()
    sidecar = Sidecar(data)
    try:
        sidecar.initialize()
        yield sidecar
    finally:
        sidecar.close()


def _import(sc: Sidecar, path: Path) -> str:
    return sc.result("attachments/import", {"path": str(path)})["attachment_id"]


def _events(sc: Sidecar, subscription_id: str, until: frozenset[str] = TERMINAL) -> list[dict[str, Any]]:
    """The subscription's events up to and including the first of ``until``."""
    out: list[dict[str, Any]] = []
    while True:
        msg = sc.next(SLOW)
        if not (isinstance(msg, dict) and msg.get("method") == "event"):
            continue
        if msg["params"]["subscription_id"] == subscription_id:
            out.append(msg["params"])
            if msg["params"]["event"] in until:
                return out


def _start_long_job(sc: Sidecar, audio: dict[str, Any], profile_id: str) -> tuple[str, str]:
    """A long job, returned once the worker transcribes: (job_id, subscription_id)."""
    params = {"attachment_id": _import(sc, audio["long"]), "profile_id": profile_id, "diarization": False}
    job = sc.result("media/transcriptions/create", params)
    sub = sc.result("events/subscribe", {"resource_id": job["job_id"]})
    _events(sc, sub["subscription_id"], frozenset({"TranscriptionStarted"}))
    return job["job_id"], sub["subscription_id"]


def _run_events(sc: Sidecar, attachment_id: str, **params: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    job = sc.result("media/transcriptions/create", {"attachment_id": attachment_id, **params})
    assert job["status"] == "queued" and job["segments"] == [] and job["text"] is None
    sub = sc.result("events/subscribe", {"resource_id": job["job_id"]})
    events = _events(sc, sub["subscription_id"])
    return sc.result("media/transcriptions/get", {"job_id": job["job_id"]}), events


def _run(sc: Sidecar, attachment_id: str, **params: Any) -> tuple[dict[str, Any], list[str]]:
    job, events = _run_events(sc, attachment_id, **params)
    return job, [e["event"] for e in events]


def _worker_pids(sidecar_pid: int) -> list[int]:
    return worker_pids(sidecar_pid, "sidecar.media.worker", "media-worker")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return stat[0] != "Z"


@pytest.mark.skipif(not BINARY, reason="the binary's own report; the package sidecar has its engines in its venv")
def test_binary_without_engines_reports_transcription_unavailable(audio: dict[str, Any], media_dir: Path) -> None:
    data = media_dir / "data-bin"
    data.mkdir()
    other = Sidecar(data, env={"METONA_ENGINES_DIR": str(media_dir / "no-engines-here")})
    try:
        comps = other.initialize()["capabilities"]["components"]
        assert comps["transcription"]["available"] is False
        assert "no engines folder" in comps["transcription"]["detail"]
        assert comps["diarization"]["available"] is False
        profiles = other.result("media/profiles/list", {})["items"]
        assert {p["profile_id"] for p in profiles} == {"default", "en-fast"}
        assert all(p["available"] is False and p["unavailable_reason"] for p in profiles)
        att = _import(other, audio["meeting"])
        err = other.call("media/transcriptions/create", {"attachment_id": att, "profile_id": "en-fast"})["error"]
        assert err["code"] == 503 and err["data"]["code"] == "TRANSCRIPTION_MODEL_UNAVAILABLE"
        assert err["data"]["details"]["reason"]
    finally:
        other.close()


@pytest.fixture(scope="module")
def transcribing(sc: Sidecar) -> None:
    """Every sidecar under test transcribes: the source install, and the binary with its engines beside it."""
    profiles = sc.result("media/profiles/list", {})["items"]
    assert profiles and all(p["available"] is True for p in profiles), profiles


def test_three_voices_en_fast_with_speakers_and_words(sc: Sidecar, audio: dict[str, Any], transcribing: None) -> None:
    att = _import(sc, audio["meeting"])
    job, events = _run_events(sc, att, profile_id="en-fast", diarization=True, word_timestamps=True)
    names = [e["event"] for e in events]
    assert names[0] == "Queued" and names[-1] == "Completed", names
    order = [n for n in names if n not in {"Progress", "Segment"}]
    assert order == [
        "Queued",
        "ModelLoading",
        "TranscriptionStarted",
        "DiarizationStarted",
        "DiarizationCompleted",
        "SpeakersAssigned",
        "Completed",
    ], names
    assert "Progress" in names
    # segments stream as recognised, before diarization, without speakers; speakers come in one batch after it
    streamed = [e["data"]["data"] for e in events if e["event"] == "Segment"]
    assert streamed and max(i for i, n in enumerate(names) if n == "Segment") < names.index("DiarizationStarted")
    unlabelled = [s | {"speaker": None, "words": [w | {"speaker": None} for w in s["words"]]} for s in job["segments"]]
    assert unlabelled == streamed
    (assigned,) = [e["data"]["data"] for e in events if e["event"] == "SpeakersAssigned"]
    assert assigned["segments"] == [{"segment_id": s["segment_id"], "speaker": s["speaker"]} for s in job["segments"]]
    assert job["script"] == "simplified"
    assert job["status"] == "completed" and job["error"] is None and job["warnings"] == []
    assert job["language"] == "en" and job["diarization_enabled"] is True and job["completed_at"]
    segs = job["segments"]
    assert segs, job
    for a, b in itertools.pairwise(segs):
        assert a["end_time"] <= b["start_time"] + 1e-6
    for s in segs:
        assert s["end_time"] >= s["start_time"] >= 0
        assert 0 <= s["confidence"] <= 1
        assert s["words"] and all(w["start"] >= s["start_time"] - 0.5 for w in s["words"])
    reference = " ".join(t.text for t in audio["turns"])
    error_rate = speech.wer(reference, job["text"])
    print(f"en-fast WER on espeak speech: {error_rate:.3f}")
    assert error_rate < 0.25, job["text"]
    # diarization: each turn's speaker is the label of the segments inside it; A, B, C, B
    labels = []
    for turn in audio["turns"]:
        inside = [s["speaker"] for s in segs if turn.start - 0.5 <= s["start_time"] < turn.end]
        assert inside, (turn, segs)
        labels.append(max(set(inside), key=inside.count))
    assert labels == ["SPEAKER_00", "SPEAKER_01", "SPEAKER_02", "SPEAKER_01"], labels
    # events: the pull page has the same log with cursors
    page = sc.result("media/transcriptions/events", {"job_id": job["job_id"], "limit": 2})
    assert [i["event"] for i in page["items"]] == ["Queued", "ModelLoading"] and page["has_more"] is True
    rest = sc.result("media/transcriptions/events", {"job_id": job["job_id"], "after_sequence": page["next_sequence"]})
    assert rest["has_more"] is False and rest["items"][-1]["event"] == "Completed"
    # the models ran in the worker: the sidecar itself never imported them
    heavy = ["torch", "ctranslate2", "faster_whisper", "pyannote.audio", "av", "onnxruntime"]
    assert sc.result("dev/modules", {"names": heavy})["loaded"] == []


def test_default_profile_detects_the_language(sc: Sidecar, audio: dict[str, Any], transcribing: None) -> None:
    att = _import(sc, audio["meeting"])
    job, names = _run(sc, att, profile_id="default", diarization=False, locale="zh-TW")
    assert job["status"] == "completed", job
    assert job["script"] == "traditional"  # the reader's script is recorded; English text is not touched by it
    assert "DiarizationStarted" not in names
    assert job["language"] == "en"
    assert all(s["speaker"] is None and s["words"] == [] for s in job["segments"])
    error_rate = speech.wer(" ".join(t.text for t in audio["turns"]), job["text"])
    print(f"default (base) WER on espeak speech: {error_rate:.3f}")
    assert error_rate < 0.35, job["text"]
    listed = sc.result("media/transcriptions/list", {"status": "completed", "limit": 1})
    assert listed["page"]["total"] >= 1 and listed["items"][0]["job_id"] == job["job_id"]
    assert listed["items"][0]["segment_count"] == len(job["segments"])


def test_transcript_becomes_a_cited_searchable_note(sc: Sidecar, audio: dict[str, Any], transcribing: None) -> None:
    att = _import(sc, audio["meeting"])
    job, _ = _run(sc, att, profile_id="en-fast", diarization=True)
    note = sc.result(
        "media/transcriptions/notes",
        {"job_id": job["job_id"], "title": "Weekly meeting", "folder": "Meetings/2026"},
        timeout=SLOW,
    )
    assert note["title"] == "Weekly meeting" and note["folder"] == "Meetings/2026"
    assert len(note["blocks"]) == 4  # one block per speaker turn
    for block in note["blocks"]:
        (cite,) = block["citations"]
        assert cite["source_audio"] == att and cite["speaker"].startswith("SPEAKER_")
    weather = audio["turns"][2]
    for mode in ("fts", "vector", "hybrid"):
        hits = sc.result("search/query", {"query": "weather tomorrow sunny breeze", "mode": mode}, timeout=SLOW)
        top = hits["items"][0]
        assert top["note_id"] == note["note_id"], (mode, hits)
        (cite,) = top["citations"]
        assert cite["source_audio"] == att
        assert abs(cite["start_time"] - weather.start) <= 1.0 and abs(cite["end_time"] - weather.end) <= 1.0
        assert cite["speaker"] == "SPEAKER_02"


def test_cancel_mid_job_within_a_second_while_ping_answers(
    sc: Sidecar, audio: dict[str, Any], transcribing: None
) -> None:
    job_id, sub_id = _start_long_job(sc, audio, "default")
    pings = []
    for _ in range(20):
        t0 = time.perf_counter()
        assert sc.result("ping") == {}
        pings.append(time.perf_counter() - t0)
    pings.sort()
    print(f"ping while transcribing: median {pings[10] * 1000:.2f} ms, max {pings[-1] * 1000:.2f} ms")
    assert pings[10] < 0.05
    (worker,) = _worker_pids(sc.proc.pid)
    t0 = time.monotonic()
    answer = sc.result("media/transcriptions/cancel", {"job_id": job_id})
    assert answer["accepted"] is True
    rest = _events(sc, sub_id)
    elapsed = time.monotonic() - t0
    print(f"cancel → Cancelled event: {elapsed * 1000:.0f} ms")
    assert rest[-1]["event"] == "Cancelled"
    assert elapsed < 1.0
    final = sc.result("media/transcriptions/get", {"job_id": job_id})
    assert final["status"] == "cancelled" and final["error"]["code"] == "TRANSCRIPTION_CANCELLED"
    assert final["segments"] == [] and final["text"] is None and final["completed_at"]
    assert not _alive(worker)
    err = sc.call("media/transcriptions/notes", {"job_id": job_id})["error"]
    assert err["code"] == 409 and err["data"]["code"] == "TRANSCRIPT_NOT_READY"


def test_a_killed_worker_fails_its_job_and_the_next_job_gets_a_fresh_one(
    sc: Sidecar, audio: dict[str, Any], transcribing: None
) -> None:
    job_id, sub_id = _start_long_job(sc, audio, "en-fast")
    (worker,) = _worker_pids(sc.proc.pid)
    os.kill(worker, signal.SIGKILL)
    events = _events(sc, sub_id)
    assert events[-1]["event"] == "Failed"
    final = sc.result("media/transcriptions/get", {"job_id": job_id})
    assert final["status"] == "failed" and final["error"]["code"] == "TRANSCRIPTION_FAILED"
    assert "signal 9" in final["error"]["message"] and final["error"]["details"]["reason"] == "WORKER_DIED"
    again, _ = _run(sc, _import(sc, audio["meeting"]), profile_id="en-fast", diarization=False)
    assert again["status"] == "completed" and again["segments"]
    assert _worker_pids(sc.proc.pid) != [worker]


def test_silence_completes_with_no_segments_and_jobs_queue_one_at_a_time(
    sc: Sidecar, audio: dict[str, Any], transcribing: None
) -> None:
    att = _import(sc, audio["silence"])
    params = {"attachment_id": att, "profile_id": "en-fast", "diarization": False}
    first = sc.result("media/transcriptions/create", params)
    second = sc.result("media/transcriptions/create", params)
    sub = sc.result("events/subscribe", {"resource_id": second["job_id"]})
    _events(sc, sub["subscription_id"])
    one, two = (sc.result("media/transcriptions/get", {"job_id": j["job_id"]}) for j in (first, second))
    for job in (one, two):
        assert job["status"] == "completed" and job["segments"] == [] and job["text"] == ""
        assert job["duration"] == pytest.approx(40.0, abs=0.1)
    assert two["started_at"] >= one["completed_at"], "the second job waited for the first"


def test_bad_inputs_get_their_codes(sc: Sidecar, audio: dict[str, Any], transcribing: None) -> None:
    for name, reason in (("text", "UNRECOGNISED_FORMAT"), ("empty", "EMPTY_FILE")):
        err = sc.call("media/transcriptions/create", {"attachment_id": _import(sc, audio[name])})["error"]
        assert err["code"] == 400 and err["data"]["code"] == "UNSUPPORTED_AUDIO_FORMAT", name
        assert err["data"]["details"]["reason"] == reason
    job, names = _run(sc, _import(sc, audio["truncated_mp3"]), profile_id="en-fast", diarization=False)
    assert names[-1] == "Failed" and job["status"] == "failed"
    assert job["error"]["code"] == "TRANSCRIPTION_FAILED" and job["error"]["details"]["reason"] == "AUDIO_TRUNCATED"
    assert job["segments"] == []
    meeting = _import(sc, audio["meeting"])
    err = sc.call("media/transcriptions/create", {"attachment_id": meeting, "profile_id": "nope"})["error"]
    assert err["code"] == 404 and err["data"]["code"] == "TRANSCRIPTION_PROFILE_NOT_FOUND"
    err = sc.call("media/transcriptions/create", {"attachment_id": "att_missing"})["error"]
    assert err["code"] == 404 and err["data"]["code"] == "ATTACHMENT_NOT_FOUND"
    err = sc.call("media/transcriptions/create", {"attachment_id": meeting, "language": "klingon"})["error"]
    assert err["code"] == -32602
    err = sc.call("media/transcriptions/create", {"attachment_id": meeting, "model_path": "/tmp/x"})["error"]
    assert err["code"] == -32602  # a request never names a model directory
    err = sc.call("media/transcriptions/notes", {"job_id": job["job_id"]})["error"]
    assert err["code"] == 409 and err["data"]["code"] == "TRANSCRIPT_NOT_READY"
    err = sc.call("media/transcriptions/get", {"job_id": "transcription_nope"})["error"]
    assert err["code"] == 404


def test_profiles_are_data(sc: Sidecar, transcribing: None) -> None:
    items = {p["profile_id"]: p for p in sc.result("media/profiles/list", {})["items"]}
    assert items["default"]["model"] == "whisper-base" and items["default"]["multilingual"] is True
    assert items["en-fast"]["model"] == "whisper-tiny.en" and items["en-fast"]["multilingual"] is False
    assert items["en-fast"]["languages"] == ["en"] and {"zh", "en"} <= set(items["default"]["languages"])
    for p in items.values():
        assert p["available"] is True and p["vad_filter"] is True and p["beam_size"] >= 1
        assert p["diarization"]["segmentation_step"] > 0


def test_missing_models_and_weights_are_reported(media_dir: Path, audio: dict[str, Any], transcribing: None) -> None:
    empty = media_dir / "no-models"
    empty.mkdir()
    data = media_dir / "data-missing"
    data.mkdir()
    other = Sidecar(data, env={"METONA_WHISPER_MODEL_DIR": str(empty), "METONA_DIARIZATION_MODEL_DIR": str(empty)})
    try:
        comps = other.initialize()["capabilities"]["components"]
        assert (
            comps["transcription"]["available"] is False
            and "METONA_WHISPER_MODEL_DIR" in comps["transcription"]["detail"]
        )
        assert comps["diarization"]["available"] is False and comps["diarization"]["detail"]
        att = _import(other, audio["meeting"])
        err = other.call("media/transcriptions/create", {"attachment_id": att})["error"]
        assert err["code"] == 503 and err["data"]["code"] == "TRANSCRIPTION_MODEL_UNAVAILABLE"
    finally:
        other.close()


def test_missing_diarization_weights_complete_without_speakers(
    media_dir: Path, audio: dict[str, Any], transcribing: None
) -> None:
    empty = media_dir / "no-weights"
    empty.mkdir()
    data = media_dir / "data-nodiar"
    data.mkdir()
    other = Sidecar(data, env={"METONA_DIARIZATION_MODEL_DIR": str(empty)})
    try:
        comps = other.initialize()["capabilities"]["components"]
        assert comps["diarization"]["available"] is False
        job, names = _run(other, _import(other, audio["meeting"]), profile_id="en-fast", diarization=True)
        assert job["status"] == "completed" and job["segments"]
        assert "DiarizationStarted" not in names
        (warning,) = job["warnings"]
        assert warning["code"] == "DIARIZATION_UNAVAILABLE"
        assert warning["details"]["reason"] == "DIARIZATION_MODEL_UNAVAILABLE"
        assert all(s["speaker"] is None for s in job["segments"])
        # shutdown leaves no worker behind
        (worker,) = _worker_pids(other.proc.pid)
        assert other.result("shutdown") is None
        other.notify("exit")
        assert other.wait() == 0
        assert not _alive(worker)
    finally:
        other.close()


def test_a_job_left_running_by_a_crash_is_failed_on_the_next_start(
    media_dir: Path, audio: dict[str, Any], transcribing: None
) -> None:
    data = media_dir / "data-crash"
    data.mkdir()
    first = Sidecar(data)
    try:
        first.initialize()
        done, _ = _run(first, _import(first, audio["meeting"]), profile_id="en-fast", diarization=False)
        job_id, _ = _start_long_job(first, audio, "en-fast")
        (worker,) = _worker_pids(first.proc.pid)
        first.kill_9()
    finally:
        first.close()
    deadline = time.monotonic() + 5
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(worker), "the orphaned worker exits once its parent is gone"
    second = Sidecar(data)
    try:
        second.initialize()
        job = second.result("media/transcriptions/get", {"job_id": job_id})
        assert job["status"] == "failed" and job["error"]["code"] == "JOB_INTERRUPTED"
        assert job["segments"] == [] and job["completed_at"]
        assert second.result("media/transcriptions/get", {"job_id": done["job_id"]}) == done  # persisted as it was
    finally:
        second.close()
