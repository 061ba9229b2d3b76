"""Issue 31 over real stdio: documents the user already has become cited, searchable notes.

One sidecar for the module (the corpus: pypdf's and python-docx's own test files, scripts/documents_corpus.py):
a 19-page data model imported as a job (``Page`` events, ping
answered throughout), its blocks citing their page, a sentence of page N found first with ``page: N`` in every
search mode, the attachment kept while cited; a scan read by OCR; a DOCX with heading-path labels; the typed
errors (unknown attachment, unsupported format, encrypted, fuzzed, zip bomb, unknown job); a cancel within a
second leaving no note and no worker; a worker that hangs (SIGSTOP) or dies mid-import failing only that import,
the next one getting a fresh worker.
"""

from __future__ import annotations

import os
import signal
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.documents.oracle import DOCXS, PDFS, need_corpus
from tests.support.sidecar_proc import Sidecar, worker_pids

pytestmark = pytest.mark.e2e

GEOBASE = PDFS / "GeoBase_NHNC1_Data_Model_UML_EN.pdf"
SLOW = 180.0
PAGE_LIMIT_S = 60
HANG_LIMIT_S = 2
TERMINAL = {"completed", "failed", "cancelled"}


@pytest.fixture(scope="module")
def sc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    need_corpus()
    data = tmp_path_factory.mktemp("documents") / "data"
    data.mkdir()
    sidecar = Sidecar(data, env={"METONA_DOCUMENT_PAGE_TIMEOUT_S": str(PAGE_LIMIT_S)})
    sidecar.initialize()
    try:
        yield sidecar
    finally:
        sidecar.close()


def _attach(sc: Sidecar, path: Path) -> str:
    return sc.result("attachments/import", {"path": str(path)})["attachment_id"]


def _wait(sc: Sidecar, job_id: str, timeout: float = SLOW, pings: bool = False) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = sc.result("documents/imports/get", {"job_id": job_id})
        if job["status"] in TERMINAL:
            return job
        assert time.monotonic() < deadline, job
        if pings:
            t0 = time.monotonic()
            assert sc.result("ping", timeout=5) == {}
            assert time.monotonic() - t0 < 2.0  # the wire is never blocked by a document being read
        time.sleep(0.05)


def _import(sc: Sidecar, path: Path, **params: Any) -> dict[str, Any]:
    job = sc.result("documents/imports/create", {"attachment_id": _attach(sc, path), **params})
    assert job["status"] == "queued" and job["note_id"] is None and job["pages"] is None and job["ocr_pages"] == []
    assert job["warnings"] == [] and job["error"] is None and job["created_at"]
    return job


def _worker_pids(sc: Sidecar) -> list[int]:
    return worker_pids(sc.proc.pid, "sidecar.documents.worker", "document-worker")


def test_a_paper_becomes_a_cited_searchable_note(sc: Sidecar) -> None:
    job = _import(sc, GEOBASE, folder="Papers")
    done = _wait(sc, job["job_id"], pings=True)
    assert done["status"] == "completed", done
    assert done["pages"] == 19 and done["ocr_pages"] == [] and done["note_id"] and done["block_count"] > 100
    events = sc.result("documents/imports/events", {"job_id": job["job_id"], "limit": 1000})["items"]
    pages = [e["data"] for e in events if e["event"] == "Page"]
    assert sorted(p["page"] for p in pages) == list(range(1, 20)) and pages[-1]["done"] == 19
    assert events[-1]["event"] == "Completed"

    note = sc.result("notes/get", {"note_id": done["note_id"]})
    assert note["folder"] == "Papers" and note["title"]
    assert len(note["blocks"]) == done["block_count"]
    for block in note["blocks"]:
        (cite,) = block["citations"]
        assert cite["attachment_id"] == job["attachment_id"] and 1 <= cite["page"] <= 19
    assert {b["kind"] for b in note["blocks"]} >= {"heading", "paragraph", "list"}

    # a sentence of page N is found first, citing page N, in every mode
    target = next(
        b
        for b in note["blocks"]
        if b["citations"][0]["page"] == 7 and b["kind"] == "paragraph" and len(b["text"]) > 200
    )
    query = target["text"][:200]
    for mode in ("fts", "vector", "hybrid"):
        hits = sc.result("search/query", {"query": query, "mode": mode}, timeout=SLOW)["items"]
        assert hits and hits[0]["block_id"] == target["block_id"], (mode, hits[:1])
        assert hits[0]["citations"][0]["page"] == 7

    # the attachment stays while a block cites it
    busy = sc.call("attachments/delete", {"attachment_id": job["attachment_id"]})
    assert busy["error"]["data"]["code"] == "ATTACHMENT_IN_USE"

    listed = sc.result("documents/imports/list", {"limit": 1})
    assert listed["items"][0]["job_id"] == job["job_id"]


def test_a_docx_keeps_headings_and_labels(sc: Sidecar) -> None:
    done = _wait(sc, _import(sc, DOCXS / "par-known-styles.docx")["job_id"])
    assert done["status"] == "completed" and done["pages"] is None, done
    note = sc.result("notes/get", {"note_id": done["note_id"]})
    heading = next(b for b in note["blocks"] if b["text"] == "# Heading 1")
    assert heading["kind"] == "heading" and heading["citations"][0]["label"] == "Heading 1"
    assert heading["citations"][0].get("page") is None


def _scan(src: Path, page: int, out: Path) -> Path:
    """A real page rendered to an image-only PDF (what a scanner gives)."""
    import pypdfium2 as pdfium

    image = pdfium.PdfDocument(str(src))[page - 1].render(scale=200 / 72, grayscale=True).to_pil()
    image.save(out, "PDF", resolution=200)
    return out


def test_a_scan_is_read_by_ocr(sc: Sidecar, tmp_path: Path) -> None:
    scan = _scan(PDFS / "pdflatex-outline.pdf", 3, tmp_path / "scan.pdf")
    done = _wait(sc, _import(sc, scan)["job_id"])
    assert done["status"] == "completed" and done["pages"] == 1 and done["ocr_pages"] == [1], done
    note = sc.result("notes/get", {"note_id": done["note_id"]})
    text = " ".join(b["text"] for b in note["blocks"])
    assert "information" in text and "alphabet" in text
    off = _wait(sc, _import(sc, scan, ocr="off")["job_id"])
    assert off["status"] == "failed" and off["error"]["code"] == "DOCUMENT_UNREADABLE"
    assert off["error"]["details"]["reason"] == "NO_TEXT"


def test_typed_errors(sc: Sidecar, tmp_path: Path) -> None:
    missing = sc.call("documents/imports/create", {"attachment_id": "att_nope"})
    assert missing["error"]["code"] == 404 and missing["error"]["data"]["code"] == "ATTACHMENT_NOT_FOUND"
    legacy = tmp_path / "old.doc"
    legacy.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(4096))
    unsupported = sc.call("documents/imports/create", {"attachment_id": _attach(sc, legacy)})
    assert unsupported["error"]["code"] == 415
    assert unsupported["error"]["data"]["code"] == "DOCUMENT_FORMAT_UNSUPPORTED"
    unknown = sc.call("documents/imports/get", {"job_id": "docimp_nope"})
    assert unknown["error"]["code"] == 404 and unknown["error"]["data"]["code"] == "DOCUMENT_IMPORT_JOB_NOT_FOUND"
    bad = sc.call("documents/imports/create", {"attachment_id": "x", "ocr": "sometimes"})
    assert bad["error"]["code"] == -32602

    garbage = tmp_path / "garbage.pdf"
    garbage.write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 40)
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        with z.open("word/document.xml", "w", force_zip64=True) as f:
            for _ in range(300):
                f.write(bytes(1 << 20))
    cases = {
        PDFS / "encryption" / "r6-user-password.pdf": ("DOCUMENT_ENCRYPTED", "PASSWORD_REQUIRED"),
        garbage: ("DOCUMENT_UNREADABLE", "PDF_OPEN_FAILED"),
        bomb: ("DOCUMENT_TOO_LARGE", "EXPANDED_SIZE"),
    }
    for path, (code, reason) in cases.items():
        done = _wait(sc, _import(sc, path)["job_id"])
        assert done["status"] == "failed" and done["note_id"] is None, done
        assert (done["error"]["code"], done["error"]["details"]["reason"]) == (code, reason), path.name


def _first_page_event(sc: Sidecar, job_id: str) -> None:
    deadline = time.monotonic() + SLOW
    while not any(e["event"] == "Page" for e in sc.result("documents/imports/events", {"job_id": job_id})["items"]):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_cancel_stops_the_worker_within_a_second_and_leaves_no_note(sc: Sidecar) -> None:
    notes_before = sc.result("notes/list", {})["page"]["total"]
    job = _import(sc, GEOBASE, ocr="force")
    _first_page_event(sc, job["job_id"])
    assert _worker_pids(sc)
    t0 = time.monotonic()
    assert sc.result("documents/imports/cancel", {"job_id": job["job_id"]})["accepted"] is True
    done = _wait(sc, job["job_id"])
    assert done["status"] == "cancelled" and done["note_id"] is None
    while _worker_pids(sc):
        assert time.monotonic() - t0 < 1.0, "the document worker outlived its cancelled import by a second"
        time.sleep(0.02)
    assert sc.result("notes/list", {})["page"]["total"] == notes_before


def test_a_dead_worker_fails_only_its_import(sc: Sidecar) -> None:
    job = _import(sc, GEOBASE, ocr="force")
    _first_page_event(sc, job["job_id"])
    (pid,) = _worker_pids(sc)
    os.kill(pid, signal.SIGKILL)
    done = _wait(sc, job["job_id"])
    assert done["status"] == "failed" and done["error"]["code"] == "DOCUMENT_UNREADABLE", done
    assert done["error"]["details"]["reason"] == "WORKER_DIED"
    # the next import gets a fresh worker
    ok = _wait(sc, _import(sc, PDFS / "issue-914-xmp-data.pdf")["job_id"])
    assert ok["status"] == "completed" and ok["pages"] == 1, ok
    note = sc.result("notes/get", {"note_id": ok["note_id"]})
    assert "商品编码" in " ".join(b["text"] for b in note["blocks"])


@pytest.mark.skipif(bool(os.environ.get("SIDECAR_CMD")), reason="the worker channel is the same code in the binary")
def test_a_hung_worker_is_killed_at_the_page_limit(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    quick = Sidecar(data, env={"METONA_DOCUMENT_PAGE_TIMEOUT_S": str(HANG_LIMIT_S)})
    try:
        quick.initialize()
        md = tmp_path / "notes.md"
        md.write_text("# Notes\n\nA paragraph.\n", encoding="utf-8")
        first = _wait(quick, _import(quick, md)["job_id"])
        assert first["status"] == "completed", first
        (pid,) = _worker_pids(quick)  # kept for the next import
        os.kill(pid, signal.SIGSTOP)  # a parser that hangs: the worker answers nothing more
        t0 = time.monotonic()
        hung = _wait(quick, _import(quick, md)["job_id"], timeout=HANG_LIMIT_S + 30, pings=True)
        assert hung["status"] == "failed" and hung["error"]["code"] == "DOCUMENT_UNREADABLE", hung
        assert hung["error"]["details"]["reason"] == "PAGE_TIMEOUT"
        assert time.monotonic() - t0 < HANG_LIMIT_S + 10
        deadline = time.monotonic() + 5
        while pid in _worker_pids(quick):
            assert time.monotonic() < deadline, "the hung worker was not killed"
            time.sleep(0.05)
        again = _wait(quick, _import(quick, md)["job_id"])
        assert again["status"] == "completed", again
    finally:
        quick.close()
