"""Issue 22: an export's parse and writers run in a long-lived child (sidecar/export/worker.py) — the same bytes as
writing in-process, one child reused across exports, and a child that dies, breaks the protocol or is cancelled
fails only its export, with the export domain's code, and the next export starts a new one."""

from __future__ import annotations

import base64
import io
import os
import signal
import sys
import zipfile
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.core.errors import SidecarError
from sidecar.export.ast import parse_markdown
from sidecar.export.docx import render_docx
from sidecar.export.html import render_html
from sidecar.export.models import ExportOptions
from sidecar.export.prepare import Preparer
from sidecar.export.types import Assets, Prepared
from sidecar.export.worker import ExportWork, ExportWorker, ToPrepare, Written
from tests.support.export_worker import export_worker
from tests.support.single_child import alive

pytestmark = pytest.mark.anyio

PNG_1PX = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PLAIN = """# 报告 Report \x0c

Some *text*, **strong**, ~~gone~~, `code`, <https://example.com> and a note[^a].

- [x] done
  1. nested

| 左 | right |
|:---|---:|
| 1 | 2 |

```python
def f(x):
    return [y * 2 for y in range(x)]  # 注释
```

<div>raw <script>alert(1)</script> html</div>

[^a]: 脚注 footnote.
"""
WITH_ASSETS = (
    PLAIN
    + f"""
Inline $x^2$ and ![px](data:image/png;base64,{base64.b64encode(PNG_1PX).decode()}) ![remote](https://example.com/x.png)

```mermaid
graph TD; A-->B
```
"""
)
META = {"note_id": "note_1", "folder": "课程"}
# a document the child needs seconds for (one section parses and writes in ~0.5 ms)
HEAVY = "\n\n".join(f"## S{i}\n\n*t* `c` [l](https://e.com/{i})\n\n```python\nx = {i}\n```" for i in range(20_000))


def _work(markdown: str, fmt: str, key: str = "export_1", **options: Any) -> ExportWork:
    return ExportWork(
        key=key,
        fmt=fmt,
        markdown=markdown,
        title=None,
        options=ExportOptions.model_validate(options).model_dump(mode="json"),
        theme_css="body { color: #111; }",
        dark=False,
        metadata=META,
    )


def _in_process(markdown: str, fmt: str, **options: Any) -> tuple[bytes, list[str]]:
    """What the thread exporters wrote before the export worker (the same functions, called here)."""
    opts = ExportOptions.model_validate(options)
    prepared = Prepared(parse_markdown(markdown), theme_css="body { color: #111; }", metadata=META)
    anyio.run(Preparer(None, None).prepare, prepared, fmt)
    if fmt == "docx":
        return render_docx(prepared, opts), prepared.warnings
    return render_html(prepared, opts, print_mode=fmt == "pdf").encode(), prepared.warnings


def _members(content: bytes, fmt: str) -> Any:
    """HTML as is; a DOCX as its members in order (the zip headers carry the time of writing)."""
    if fmt != "docx":
        return content
    with zipfile.ZipFile(io.BytesIO(content)) as zf:
        return [(info.filename, zf.read(info)) for info in zf.infolist()]


async def _write(worker: ExportWorker, work: ExportWork) -> tuple[Written, list[str]]:
    first = await worker.start(work)
    if isinstance(first, Written):
        return first, list(first.warnings)
    assets = Assets(dark=work.dark)
    await Preparer(None, None).prepare_nodes(assets, first.nodes, first.maths, work.fmt)
    written = await worker.finish(work, assets.assets)
    return written, [*assets.warnings, *written.warnings]


@pytest.mark.parametrize("fmt", ["html", "pdf", "docx"])
@pytest.mark.parametrize("markdown", [PLAIN, WITH_ASSETS], ids=["plain", "assets"])
async def test_the_child_writes_the_same_bytes_and_warnings_as_in_process(fmt: str, markdown: str) -> None:
    options = {"include_metadata": True, "code_theme": "dark"}
    expected, expected_warnings = await anyio.to_thread.run_sync(lambda: _in_process(markdown, fmt, **options))
    async with export_worker() as worker:
        first = await worker.start(_work(markdown, fmt, **options))
        assert isinstance(first, ToPrepare) == (markdown is WITH_ASSETS)  # one request when nothing to prepare
        written, warnings = await _write(worker, _work(markdown, fmt, key="export_2", **options))
    assert _members(written.content, fmt) == _members(expected, fmt)
    assert warnings == expected_warnings and any("EXPORT_CONTENT_DROPPED" in w for w in warnings)
    assert written.title == "报告 Report" and not written.severe_loss


async def test_one_child_started_on_the_first_export_serves_the_next_ones() -> None:
    async with export_worker() as worker:
        assert worker.pid is None and worker.started == 0  # lazily: nothing runs before the first export
        first, _ = await _write(worker, _work(PLAIN, "html", key="export_1"))
        pid = worker.pid
        second, _ = await _write(worker, _work(WITH_ASSETS, "docx", key="export_2"))
        third, _ = await _write(worker, _work(PLAIN, "html", key="export_3"))
        assert worker.pid == pid and worker.started == 1
        assert third.content == first.content and second.content.startswith(b"PK")


async def test_a_document_the_child_forgot_is_parsed_again() -> None:
    async with export_worker() as worker:
        work = _work(WITH_ASSETS, "html")
        assert isinstance(await worker.start(work), ToPrepare)
        pid = worker.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # the kept document dies with it
        with anyio.fail_after(10):
            while alive(pid):  # noqa: ASYNC110 - a process to reap, nothing to wait on
                await anyio.sleep(0.01)
        written, _ = await _write(worker, work)
        assert worker.started == 2 and written.content.startswith(b"<!DOCTYPE html>")


def _fake_child(tmp_path: Path, misbehave: str) -> list[str]:
    """A child that misbehaves on its first request the first time it starts, then is the real export worker."""
    marker = tmp_path / "started-once"
    script = f"""
import json, os, sys
marker = {str(marker)!r}
if os.path.exists(marker):
    os.execv(sys.executable, [sys.executable, "-m", "sidecar.export.worker"])
open(marker, "w").close()
print(json.dumps({{"type": "hello", "worker": "export", "pid": os.getpid(), "protocol": 1}}), flush=True)
request = json.loads(sys.stdin.readline())
{misbehave}
sys.stdin.read()
"""
    return [sys.executable, "-c", script]


@pytest.mark.parametrize(
    ("misbehave", "reason"),
    [
        ("os._exit(3)", "WORKER_DIED"),
        ("print('Traceback (most recent call last):', flush=True)", "WORKER_PROTOCOL_ERROR"),
        (
            "print(json.dumps({'type': 'result', 'id': request['id'], 'data': {'html': 1}}), flush=True)",
            "WORKER_PROTOCOL_ERROR",
        ),
    ],
    ids=["dies", "prints-garbage", "malformed-result"],
)
async def test_a_broken_child_fails_its_export_typed_and_the_next_export_starts_a_new_one(
    tmp_path: Path, misbehave: str, reason: str
) -> None:
    async with export_worker(_fake_child(tmp_path, misbehave)) as worker:
        with pytest.raises(SidecarError) as info:
            await worker.start(_work(PLAIN, "html"))
        assert info.value.code == "EXPORT_RENDER_FAILED" and info.value.details["reason"] == reason
        assert worker.pid is None
        written, _ = await _write(worker, _work(PLAIN, "html", key="export_2"))
        assert written.content.startswith(b"<!DOCTYPE html>") and worker.started == 2


async def test_a_cancelled_export_kills_the_childs_work() -> None:
    async with export_worker() as worker:
        await _write(worker, _work(PLAIN, "html"))  # warm: the child is up
        pid = worker.pid
        assert pid is not None
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(worker.start, _work(HEAVY, "html", key="export_heavy"))
                await anyio.wait_all_tasks_blocked()  # the request is written; the child is parsing
                scope.cancel()
        assert worker.pid is None and not alive(pid)
        written, _ = await _write(worker, _work(PLAIN, "html", key="export_2"))
        assert written.content.startswith(b"<!DOCTYPE html>") and worker.started == 2
