"""Issue 33 §5: every export worker request has a time limit. A document that hangs the child (Pygments' HTML lexer
is quadratic on unclosed comments: this one would take minutes) fails its export within the limit with
EXPORT_RENDER_FAILED (504), the child is killed, and the export queued behind it, and the next, succeed on a fresh
child. The child's cache of documents waiting for their assets is bounded in count and in size."""

from __future__ import annotations

import anyio
import pytest

from sidecar.core.errors import SidecarError
from sidecar.export import worker as export_worker_module
from sidecar.export.models import ExportOptions
from sidecar.export.worker import EXPORT_TIMEOUTS_S, ExportWork, ExportWriter, Written
from tests.support.export_worker import export_worker
from tests.support.single_child import alive

HANG = "# Hang\n\n```html\n" + "<!--x " * 40_000 + "\n```\n"
PLAIN = "# Fine\n\nSome *text* and `code`.\n"


def _work(markdown: str, fmt: str, key: str) -> ExportWork:
    return ExportWork(
        key=key,
        fmt=fmt,
        markdown=markdown,
        title=None,
        options=ExportOptions.model_validate({}).model_dump(mode="json"),
        theme_css="",
        dark=False,
        metadata={},
    )


def test_every_format_has_a_documented_limit() -> None:
    assert set(EXPORT_TIMEOUTS_S) == {"html", "pdf", "docx"} and all(v > 0 for v in EXPORT_TIMEOUTS_S.values())


@pytest.mark.anyio
async def test_a_hanging_document_fails_within_the_limit_and_the_next_exports_succeed() -> None:
    async with export_worker() as worker:
        first = await worker.start(_work(PLAIN, "html", "warm"))  # the child is up (its start is not timed here)
        assert isinstance(first, Written)
        pid = worker.pid
        assert pid is not None
        worker.timeouts_s["pdf"] = 1.0  # the hanging export's format; html keeps its default for the fresh child
        failure: list[SidecarError] = []
        queued: list[Written] = []

        async def hang() -> None:
            with pytest.raises(SidecarError) as caught:
                await worker.start(_work(HANG, "pdf", "hang"))
            failure.append(caught.value)

        async def behind() -> None:
            written = await worker.start(_work(PLAIN, "html", "behind"))
            assert isinstance(written, Written)
            queued.append(written)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(hang)
                await anyio.wait_all_tasks_blocked()  # the hanging request is in the child
                tg.start_soon(behind)  # a second export queues behind it
        error = failure[0]
        assert (error.code, error.status) == ("EXPORT_RENDER_FAILED", 504)
        assert error.details["reason"] == "TIMEOUT" and error.details["timeout_s"] == 1.0
        assert not alive(pid)  # the stuck child was killed
        assert queued and queued[0].content.startswith(b"<!DOCTYPE html>")
        again = await worker.start(_work(PLAIN, "html", "next"))
        assert isinstance(again, Written) and worker.started == 2


def test_the_childs_cache_of_abandoned_documents_is_bounded_in_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export_worker_module, "KEPT_MARKDOWN_CHARS", 1000)
    writer = ExportWriter()
    with_image = "# Doc\n\n![x](https://example.com/x.png)\n\n"
    for key, pad in (("a", 400), ("b", 400), ("c", 400)):  # three abandoned exports (never finished)
        params = _work(with_image + "p" * pad, "html", key)
        answer = writer.export({"key": key, "format": "html", "markdown": params.markdown, "title": None,
                                "options": params.options, "theme_css": "", "dark": False, "metadata": {}})  # fmt: skip
        assert "prepare" in answer
    assert list(writer.kept) == ["b", "c"]  # the oldest went: the kept Markdown stays under the bound
