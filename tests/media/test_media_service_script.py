"""The media service's side of the Chinese script (issue 34): which script a job asks the worker for (request
locale, else the app's), the ``Segment`` events it forwards, and the note it makes.

The worker is a stand-in (``run`` returns a canned result and reports events through ``on_event``, as
:class:`~sidecar.media.client.WorkerClient` does) because what is tested is the service's wiring, not a model; the
real worker runs in tests/e2e/test_media_e2e.py.
"""

from __future__ import annotations

import wave
from pathlib import Path
from typing import Any

import pytest

from sidecar.jobs import JobStatus
from sidecar.media.models import CreateTranscriptionParams, TranscriptNoteParams
from sidecar.media.service import MediaService
from tests.retrieval.conftest import Env

pytestmark = pytest.mark.anyio

TRADITIONAL_SEGMENT = {
    "segment_id": "segment_001",
    "speaker": None,
    "start_time": 0.0,
    "end_time": 2.0,
    "text": "廣州市房地產中介協會分析",
    "confidence": 0.9,
    "words": [],
}


class FakeWorker:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    async def run(self, request: dict[str, Any], on_event: Any) -> dict[str, Any]:
        self.requests.append(request)
        await on_event("TranscriptionStarted", {"duration": 2.0, "language": None})
        await on_event("Segment", TRADITIONAL_SEGMENT)
        await on_event("Progress", {"current": 2.0, "total": 2.0})
        # as a worker before issue 34 would have written it: the script conversion is the worker's, not tested here
        text = TRADITIONAL_SEGMENT["text"]
        return {"language": "zh", "segments": [TRADITIONAL_SEGMENT], "text": text, "duration": 2.0}


def _wav(path: Path) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16_000)
        w.writeframes(b"\0\0" * 16_000)
    return path


async def _service(env: Env, app_locale: str | None) -> tuple[MediaService, FakeWorker]:
    worker = FakeWorker()

    async def locale() -> str | None:
        return app_locale

    media = MediaService(
        env.db,
        env.jobs,
        env.knowledge,
        worker,  # type: ignore[arg-type]
        models_dir=env.data_dir / "models",
        tmp_dir=env.data_dir / "tmp",
        app_locale=locale,
    )
    await media.migrate()
    return media, worker


async def test_the_script_comes_from_the_request_then_the_app(env: Env, tmp_path: Path) -> None:
    media, worker = await _service(env, "zh-TW")
    att = await env.knowledge.import_attachment(str(_wav(tmp_path / "a.wav")))
    by_app = await media.create(CreateTranscriptionParams(attachment_id=att.attachment_id))
    by_request = await media.create(CreateTranscriptionParams(attachment_id=att.attachment_id, locale="zh-CN"))
    assert (by_app.script, by_request.script) == ("traditional", "simplified")
    for job in (by_app, by_request):
        done = await media.wait(job.job_id)
        assert done.status is JobStatus.COMPLETED, done.error
    assert [r["script"] for r in worker.requests] == [
        {"script": "traditional", "config": "s2tw"},
        {"script": "simplified", "config": ""},
    ]
    events = [e.event for e in (await media.events(by_app.job_id)).items]
    assert events == ["Queued", "TranscriptionStarted", "Segment", "Progress", "Completed"]
    segment = next(e for e in (await media.events(by_app.job_id)).items if e.event == "Segment")
    assert segment.data == TRADITIONAL_SEGMENT


async def test_the_note_is_in_the_jobs_script_and_found_from_either(env: Env, tmp_path: Path) -> None:
    media, _ = await _service(env, None)
    att = await env.knowledge.import_attachment(str(_wav(tmp_path / "a.wav")))
    job = await media.create(CreateTranscriptionParams(attachment_id=att.attachment_id))
    await media.wait(job.job_id)
    note = await media.to_note(TranscriptNoteParams(job_id=job.job_id, include_timestamps=False))
    assert [b.text for b in note.blocks] == ["广州市房地产中介协会分析"]
    for query in ("房地產中介", "房地产中介"):
        hits = await env.retrieval.search(query, "fts")
        assert [h.note_id for h in hits.items] == [note.note_id], query
