"""The Export Service in-process without a browser: jobs, files, codes, expiry + sweep, warnings, HTML and DOCX
content (the browser-backed paths — PDF, PNG diagrams — are covered over stdio in tests/e2e/test_export_e2e.py)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.core.errors import NotFoundError, SidecarError
from sidecar.export.models import ExportCreateParams
from sidecar.export.service import ExportService
from sidecar.jobs import JobManager
from sidecar.render.browser import BrowserPool
from sidecar.render.mermaid import MermaidRenderer
from sidecar.render.renderers import FunctionPlotRenderer, MathRenderer
from sidecar.render.service import RenderService
from sidecar.storage.sqlite import Database
from sidecar.themes.service import ThemeService
from sidecar.trace.eventlog import EventLog
from tests.support.export_worker import export_worker
from tests.support.math_worker import math_worker

pytestmark = pytest.mark.anyio

PNG_1PX = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
DOC = f"""# 报告 Report

Inline $x^2$ and a note[^a].

- a
  - b

| h1 | h2 |
|---|---|
| 1 | 2 |

```mermaid
graph TD; A-->B
```

```function_plot
expressions: [sin(x)]
```

$$\\frac{{1}}{{2}}$$

![px](data:image/png;base64,{base64.b64encode(PNG_1PX).decode()}) ![att](attachment:att_ok)
![gone](attachment:att_missing)
![remote](https://example.com/x.png)

[^a]: 脚注 footnote.
"""


class FakeKnowledge:
    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "att_ok.png").write_bytes(PNG_1PX)

    async def attachment_path(self, attachment_id: str) -> Path:
        if attachment_id != "att_ok":
            raise NotFoundError("no", code="ATTACHMENT_NOT_FOUND")
        return self.root / "att_ok.png"

    async def get_note(self, note_id: str) -> Any:
        if note_id != "note_1":
            raise NotFoundError("no", code="NOTE_NOT_FOUND")

        class N:
            note_id = "note_1"
            title = "笔记/Note: 1"
            folder = None
            content = DOC
            created_at = updated_at = "2026-01-01T00:00:00.000Z"

        return N()


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[tuple[ExportService, Path, JobManager]]:
    data = tmp_path / "data"
    data.mkdir()
    db = await Database.open(data)
    log = EventLog(db)
    await log.migrate()
    async with math_worker() as maths, export_worker() as worker, anyio.create_task_group() as tg:
        jobs = JobManager(db, log, tg)
        pool = BrowserPool(None)  # no browser: the raster/PDF paths degrade with their warnings/codes
        render = RenderService(data, pool, [MermaidRenderer(pool), FunctionPlotRenderer(), MathRenderer(maths)])
        themes = ThemeService(data, "1.0.0")
        await themes.start()
        svc = ExportService(data, jobs, render=render, knowledge=FakeKnowledge(tmp_path), themes=themes, worker=worker)  # type: ignore[arg-type]
        await svc.start()
        yield svc, data, jobs
        await jobs.shutdown(1)
        tg.cancel_scope.cancel()
    await db.close()


async def _run(svc: ExportService, fmt: str, source: dict[str, Any] | None = None, **options: Any) -> Any:
    job = await svc.create(
        ExportCreateParams(source=source or {"type": "note", "note_id": "note_1"}, format=fmt, options=options)
    )
    return await svc.wait(job.job_id)


async def _bytes(svc: ExportService, job_id: str, chunk: int = 1000) -> bytes:
    out, offset = b"", 0
    while True:
        part = await svc.read(job_id, offset, chunk)
        out += base64.b64decode(part.data_base64)
        offset += part.length
        if part.eof:
            return out


async def _code(coro: Any) -> str:
    with pytest.raises(SidecarError) as info:
        await coro
    return info.value.code


async def test_html_export_file_metadata_and_chunks(env) -> None:
    svc, data, _ = env
    job = await _run(svc, "html")
    assert job.status == "completed" and job.file is not None
    content = await _bytes(svc, job.job_id)
    assert len(content) == job.file.size and hashlib.sha256(content).hexdigest() == job.file.sha256
    assert job.file.file_name == "笔记 Note 1.html" and job.file.mime_type == "text/html; charset=utf-8"
    assert (data / "exports" / f"{job.job_id}.html").read_bytes() == content
    html = content.decode()
    assert "<script" not in html and html.count("<math") == 2 and "<svg" in html  # maths + the plot
    assert html.count('src="data:image/png;base64,') == 2  # the data URL and the attachment
    assert 'id="fn-1"' in html and "脚注 footnote." in html
    codes = sorted({w.split(":")[0] for w in job.warnings})
    assert codes == ["EXPORT_IMAGE_MISSING", "EXPORT_IMAGE_SKIPPED", "EXPORT_RENDER_FAILED"]
    failed = next(w for w in job.warnings if w.startswith("EXPORT_RENDER_FAILED"))
    assert "(mermaid)" in failed and "RENDERER_UNAVAILABLE" in failed  # named, and shown as source
    assert "graph TD; A--&gt;B" in html


async def test_docx_export_without_a_browser_keeps_content_and_warns(env) -> None:
    import docx

    svc, _, _ = env
    job = await _run(svc, "docx")
    assert job.status == "completed"
    content = await _bytes(svc, job.job_id, 4096)
    doc = docx.Document(io.BytesIO(content))
    assert [p.style.name for p in doc.paragraphs if p.text == "报告 Report"] == ["Heading 1"]
    assert [p.style.name for p in doc.paragraphs if p.text in ("a", "b")] == ["List Bullet", "List Bullet 2"]
    assert len(doc.tables) == 1 and "w:tblHeader" in doc.tables[0].rows[0]._tr.xml
    assert len(doc.inline_shapes) == 2  # the two PNG images; the plot needs the browser: shown as source
    assert any(p.style.name == "Source Code" and "sin(x)" in p.text for p in doc.paragraphs)
    z = zipfile.ZipFile(io.BytesIO(content))
    body = z.read("word/document.xml")
    assert body.count(b"<m:oMathPara") == 1 and body.count(b"<m:oMath ") + body.count(b"<m:oMath>") == 2
    assert b"footnotes+xml" in z.read("[Content_Types].xml") and "脚注" in z.read("word/footnotes.xml").decode()
    assert any("(function_plot)" in w and w.startswith("EXPORT_RENDER_FAILED") for w in job.warnings)


async def test_pdf_without_a_browser_fails_with_render_failed_and_writes_nothing(env) -> None:
    svc, data, _ = env
    job = await _run(svc, "pdf")
    assert job.status == "failed" and job.error.code == "EXPORT_RENDER_FAILED" and job.file is None
    assert os.listdir(data / "exports") == []
    assert await _code(svc.read(job.job_id, 0, 10)) == "EXPORT_FILE_NOT_READY"


async def test_bad_requests_have_codes_and_leave_nothing(env) -> None:
    svc, data, _jobs = env
    note = {"type": "note", "note_id": "note_1"}
    bad = [
        ({"source": {"type": "note", "note_id": "nope"}, "format": "html"}, "EXPORT_SOURCE_NOT_FOUND"),
        ({"source": note, "format": "rtf"}, "EXPORT_FORMAT_UNSUPPORTED"),
        ({"source": note, "format": "html", "options": {"page_size": "A9"}}, "EXPORT_OPTIONS_INVALID"),
        ({"source": note, "format": "html", "options": {"theme_id": "missing"}}, "EXPORT_OPTIONS_INVALID"),
        ({"source": note, "format": "html", "options": {"margin_mm": -1}}, "EXPORT_OPTIONS_INVALID"),
        ({"source": {"type": "note"}, "format": "html"}, "EXPORT_OPTIONS_INVALID"),
        (
            {"source": {"type": "markdown", "markdown": "x" * (2 * 1024 * 1024 + 1)}, "format": "html"},
            "EXPORT_OPTIONS_INVALID",
        ),
    ]
    for params, code in bad:
        assert await _code(svc.create(ExportCreateParams(**params))) == code, params
    assert (await svc.list()).page.total == 0 and os.listdir(data / "exports") == []
    assert await _code(svc.get("export_x")) == "EXPORT_JOB_NOT_FOUND"


async def test_markdown_source_text_is_not_stored_with_the_job(env) -> None:
    svc, _, jobs = env
    job = await _run(svc, "html", {"type": "markdown", "markdown": "# T\n\nsecret words"})
    params = await jobs.params_of(job.job_id)
    assert "secret" not in json.dumps(params) and params["source"]["chars"] == len("# T\n\nsecret words")


async def test_expiry_offset_and_sweep(env) -> None:
    svc, data, _ = env
    job = await _run(svc, "html", expires_in_s=1)
    size = job.file.size
    tail = await svc.read(job.job_id, size, 10)
    assert tail.eof and tail.length == 0
    assert await _code(svc.read(job.job_id, size + 1, 10)) == "EXPORT_OPTIONS_INVALID"
    keep = await _run(svc, "docx")
    (data / "exports" / ".export_deadbeef.html.1234.part").write_bytes(b"partial")  # a crash's temp file
    (data / "exports" / f"export_{'0' * 32}.pdf").write_bytes(b"orphan")  # a file without its job
    (data / "exports" / "README.txt").write_bytes(b"not ours")
    await anyio.sleep(1.1)
    assert await svc.sweep() == 3
    left = sorted(os.listdir(data / "exports"))
    assert left == sorted(["README.txt", f"{keep.job_id}.docx"])
    assert await _code(svc.read(job.job_id, 0, 10)) == "EXPORT_FILE_EXPIRED"


async def test_list_filters_and_cancel_of_a_queued_job(env) -> None:
    svc, _, _ = env
    await _run(svc, "html")
    await _run(svc, "docx")
    assert [j.format for j in (await svc.list(fmt="docx")).items] == ["docx"]
    assert (await svc.list(status="completed")).page.total == 2
    assert await _code(svc.list(fmt="odt")) == "EXPORT_FORMAT_UNSUPPORTED"
    # three at once with concurrency 2: the third waits queued and is cancelled there
    created = [
        await svc.create(ExportCreateParams(source={"type": "note", "note_id": "note_1"}, format="docx"))
        for _ in range(3)
    ]
    result = await svc.cancel(created[2].job_id)
    assert result.accepted
    final = await svc.wait(created[2].job_id)
    assert final.status == "cancelled" and final.file is None
    for job in created[:2]:
        assert (await svc.wait(job.job_id)).status == "completed"


async def test_severe_loss_fails_the_export(env) -> None:
    svc, data, _ = env
    only_html = {"type": "markdown", "markdown": "<div>only</div>\n\n<p>html</p>\n"}
    job = await _run(svc, "docx", only_html)  # Word has no <div>/<p> to give it
    assert job.status == "failed" and job.error.code == "EXPORT_UNSUPPORTED_CONTENT"
    removed = {"type": "markdown", "markdown": "<script>alert(1)</script>\n\n<style>p {}</style>\n"}
    job = await _run(svc, "html", removed)  # the sanitiser removes all of it
    assert job.status == "failed" and job.error.code == "EXPORT_UNSUPPORTED_CONTENT"
    assert os.listdir(data / "exports") == []
    kept = await _run(svc, "html", only_html)  # safe raw HTML is kept in HTML
    assert kept.status == "completed" and not kept.warnings


async def test_list_reads_one_page_whatever_the_number_of_jobs(env) -> None:
    """Issue 21: exports/list read every export job ever made, in pages of 500, with one params query per job."""
    svc, _, jobs = env
    real = await _run(svc, "html")
    params = await jobs.params_of(real.job_id)

    async def fails(ctx: Any) -> None:
        raise NotFoundError("gone", code="EXPORT_SOURCE_NOT_FOUND")

    for i in range(60):
        await jobs.wait((await jobs.submit("export", {**params, "format": "docx" if i % 2 else "html"}, fails)).job_id)
    statements: list[str] = []
    conn = jobs._db._conn
    conn.set_trace_callback(lambda sql: statements.append(sql) if sql.lstrip().upper().startswith("SELECT") else None)
    try:
        page = await svc.list(fmt="html", limit=5)
        counted = len(statements)
        everything = await svc.list(limit=5, offset=55)
    finally:
        conn.set_trace_callback(None)
    assert page.page.total == 31 and len(page.items) == 5 and {j.format for j in page.items} == {"html"}
    assert everything.page.total == 61 and len(everything.items) == 5
    assert counted <= 3 and len(statements) <= 6, statements
