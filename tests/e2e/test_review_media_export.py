"""Review of the transcription (media/*) and export (exports/*) domains over real stdio: regressions for the bugs
the adversarial review found. One sidecar for the module."""

from __future__ import annotations

import base64
import io
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e

TERMINAL = ("completed", "failed", "cancelled")


@pytest.fixture(scope="module")
def sc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    data = tmp_path_factory.mktemp("review-me") / "data"
    data.mkdir()
    sidecar = Sidecar(data)
    try:
        sidecar.initialize()
        yield sidecar
    finally:
        sidecar.close()


def _wait_export(sc: Sidecar, job_id: str, timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = sc.result("exports/get", {"job_id": job_id}, timeout=timeout)
        if job["status"] in TERMINAL or time.monotonic() > deadline:
            return job
        time.sleep(0.05)


def test_a_huge_heading_does_not_freeze_the_sidecar(sc: Sidecar) -> None:
    """The download name was cut from the first heading one character at a time on the event loop: a 100k-char
    CJK heading froze every request (ping) for seconds; a 2 MiB one for minutes."""
    markdown = "# " + "长" * 300_000 + "\n\nbody\n"
    job = sc.result("exports/create", {"source": {"type": "markdown", "markdown": markdown}, "format": "html"})
    worst = 0.0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        t0 = time.monotonic()
        sc.result("ping", {}, timeout=120)
        view = sc.result("exports/get", {"job_id": job["job_id"]}, timeout=120)
        worst = max(worst, time.monotonic() - t0)
        if view["status"] in TERMINAL:
            break
    assert view["status"] == "completed", view
    assert view["file"]["file_name"] == "长" * 50 + ".html"
    assert worst < 1.0, f"ping + get took {worst:.2f} s while the export ran"


def _download(sc: Sidecar, job_id: str) -> bytes:
    out, offset = b"", 0
    while True:
        chunk = sc.result("exports/file", {"job_id": job_id, "offset": offset, "length": 1 << 20})
        out += base64.b64decode(chunk["data_base64"])
        offset += chunk["length"]
        if chunk["eof"]:
            return out


@pytest.mark.parametrize("fmt", ["docx", "html"])
def test_control_characters_from_pasted_text_export(sc: Sidecar, fmt: str) -> None:
    """A terminal's ESC colour codes, a PDF's form feed, a vertical tab in a title and a NUL in a note's folder
    made python-docx refuse the document: the job failed with the generic JOB_FAILED (a traceback in the log)."""
    note = sc.result(
        "notes/create",
        {
            "title": "Build\x0blog",
            "folder": "logs\x00",
            "content": "# Build log\n\n```\n\x1b[31merror\x1b[0m: failed\n```\n\npage one\x0cpage two \ufffe end\n",
        },
        timeout=120,  # notes/create answers once its blocks are indexed: the module's first one loads the embedder
    )
    job = sc.result(
        "exports/create",
        {"source": {"type": "note", "note_id": note["note_id"]}, "format": fmt, "options": {"include_metadata": True}},
    )
    view = _wait_export(sc, job["job_id"])
    assert view["status"] == "completed", view
    assert view["file"]["file_name"] == f"Build log.{fmt}"
    data = _download(sc, job["job_id"])
    if fmt == "docx":
        import docx

        text = "\n".join(p.text for p in docx.Document(io.BytesIO(data)).paragraphs)
    else:
        text = data.decode("utf-8")
        assert "\x1b" not in text and "\x0c" not in text
    assert "[31merror" in text and "page one page two" in text and "end" in text


def test_an_image_word_cannot_read_becomes_alt_text_and_a_warning(sc: Sidecar) -> None:
    """A data: PNG whose magic bytes are right but whose header is truncated passed the checks, then python-docx
    raised inside the writer: the whole DOCX export failed with JOB_FAILED."""
    bad_png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 20).decode()
    markdown = f"# Pictures\n\nBefore ![a broken chart](data:image/png;base64,{bad_png}) after.\n"
    job = sc.result("exports/create", {"source": {"type": "markdown", "markdown": markdown}, "format": "docx"})
    view = _wait_export(sc, job["job_id"])
    assert view["status"] == "completed", view
    assert any(w.startswith("EXPORT_IMAGE_SKIPPED: ") and "(image)" in w for w in view["warnings"]), view["warnings"]
    import docx

    text = "\n".join(p.text for p in docx.Document(io.BytesIO(_download(sc, job["job_id"]))).paragraphs)
    assert "Before [a broken chart] after." in text


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg makes the ADTS file")
def test_an_adts_aac_file_is_accepted_and_transcribed(sc: Sidecar, tmp_path: Path) -> None:
    """A raw .aac (ADTS, what ffmpeg and many recorders write) was refused at create with
    UNSUPPORTED_AUDIO_FORMAT/UNRECOGNISED_FORMAT: the sniffer's layer check excluded ADTS's layer 00."""
    aac = tmp_path / "memo.aac"
    silence = ["-f", "lavfi", "-i", "anullsrc=r=16000:cl=mono", "-t", "3"]
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *silence, "-c:a", "aac", str(aac)], check=True)
    assert aac.read_bytes()[:2] == b"\xff\xf1"
    att = sc.result("attachments/import", {"path": str(aac)})["attachment_id"]
    reply = sc.call(
        "media/transcriptions/create", {"attachment_id": att, "profile_id": "en-fast", "diarization": False}
    )
    assert "result" in reply, reply
    deadline = time.monotonic() + 180
    while True:
        job = sc.result("media/transcriptions/get", {"job_id": reply["result"]["job_id"]})
        if job["status"] in TERMINAL or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert job["status"] == "completed", job
    assert job["segments"] == [] and 2.5 < job["duration"] < 3.5
