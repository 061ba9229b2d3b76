"""exports/* over real stdio: a bilingual note (headings, nested lists, a table, code, footnotes, inline and block
maths, two Mermaid diagrams, a function plot) → HTML, PDF and DOCX, downloaded in chunks and checked with real
readers (html5lib, poppler's pdftotext/pdftoppm/pdffonts, pypdf, python-docx); then the bad inputs with their codes
and nothing written. One sidecar (so one browser) for the module."""

from __future__ import annotations

import base64
import hashlib
import io
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.sidecar_proc import ROOT, Sidecar, sidecar_cmd

pytestmark = pytest.mark.e2e

SLOW = 120.0
SCREENS = ROOT / "build" / "export-screens"
NOTE = """# 操作系统复习 Operating systems

## 进程调度 Scheduling

Round-robin gives each process a *time slice*; **短作业优先** minimises waiting time[^1]. Inline maths
$e^{i\\pi}+1=0$, ~~struck~~, `code` and a link <https://example.com>.

- 第一层 level one
  - 第二层 level two
    1. 第三层 ordered
    2. second
- [x] 已完成 done

| 算法 Algorithm | 平均等待 | 抢占 |
|:---|---:|:---:|
| FCFS | 10.5 | 否 |
| RR | 6.2 | 是 |

```python
def schedule(queue):
    return sorted(queue, key=lambda p: p.burst)  # SJF
```

$$
\\sum_{i=1}^{n} w_i = \\frac{1}{n}\\int_0^1 f(x)\\,dx
$$

## 状态图 Diagrams

```mermaid
flowchart TD
  A[就绪 Ready] --> B[运行 Running]
  B --> C[阻塞 Blocked]
  C --> A
```

```mermaid
sequenceDiagram
  participant 用户
  participant 内核
  用户->>内核: 系统调用
  内核-->>用户: 返回
```

```function_plot
expressions:
  - expression: sin(x)
    label: 正弦曲线
  - x^2/4
domain: [-6, 6]
range: [-4, 4]
```

## 内存管理 Memory

Paging[^2] and segmentation.

[^1]: 见教材第 5 章 — see chapter 5.
[^2]: Page tables map virtual to physical addresses.
"""
HEADINGS = ["操作系统复习 Operating systems", "进程调度 Scheduling", "状态图 Diagrams", "内存管理 Memory"]


@pytest.fixture(scope="module")
def sc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    data = tmp_path_factory.mktemp("export") / "data"
    data.mkdir()
    proc = Sidecar(data)
    proc.data_dir = data  # type: ignore[attr-defined]
    proc.components = proc.initialize()["capabilities"]["components"]  # type: ignore[attr-defined]
    try:
        yield proc
    finally:
        proc.close()


@pytest.fixture(scope="module")
def note_id(sc: Sidecar) -> str:
    note = sc.result("notes/create", {"title": "操作系统复习", "content": NOTE}, timeout=SLOW)
    return str(note["note_id"])


def _wait(sc: Sidecar, job_id: str, timeout: float = SLOW) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = sc.result("exports/get", {"job_id": job_id})
        if job["status"] in ("completed", "failed", "cancelled"):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.1)


def _download(sc: Sidecar, job_id: str, chunk: int = 64 * 1024) -> bytes:
    out, offset = bytearray(), 0
    while True:
        part = sc.result("exports/file", {"job_id": job_id, "offset": offset, "length": chunk})
        assert part["offset"] == offset and part["length"] <= chunk
        out += base64.b64decode(part["data_base64"])
        offset += part["length"]
        if part["eof"]:
            assert offset == part["size"]
            return bytes(out)


def _export(sc: Sidecar, note_id: str, fmt: str, **options: Any) -> tuple[dict[str, Any], bytes]:
    job = sc.result(
        "exports/create", {"source": {"type": "note", "note_id": note_id}, "format": fmt, "options": options}
    )
    assert job["status"] == "queued" and job["format"] == fmt and job["file"] is None
    job = _wait(sc, job["job_id"])
    assert job["status"] == "completed", job
    data = _download(sc, job["job_id"])
    meta = job["file"]
    assert meta["size"] == len(data) and meta["sha256"] == hashlib.sha256(data).hexdigest()
    assert meta["file_name"] == f"操作系统复习.{fmt}"
    return job, data


def _error(sc: Sidecar, method: str, params: dict[str, Any]) -> tuple[int, str]:
    reply = sc.call(method, params, timeout=SLOW)
    assert "error" in reply, reply
    return reply["error"]["code"], reply["error"]["data"]["code"]


def _files(sc: Sidecar) -> set[str]:
    return {p.name for p in (sc.data_dir / "exports").iterdir()}  # type: ignore[attr-defined]


def _mermaid_on(sc: Sidecar) -> bool:
    return bool(sc.components["mermaid"]["available"])  # type: ignore[attr-defined]


def test_html_is_standalone_valid_and_has_no_script(sc: Sidecar, note_id: str) -> None:
    import html5lib

    job, data = _export(sc, note_id, "html")
    text = data.decode("utf-8")
    html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(text)  # raises on any parse error
    low = text.lower()
    assert "<script" not in low and "javascript:" not in low and " onerror" not in low and " onload" not in low
    assert low.count("<math") >= 2 and 'class="highlight"' in low and "<table>" in low
    for heading in HEADINGS:
        assert heading in text
    assert "正弦曲线" in text  # the plot is inline SVG
    if _mermaid_on(sc):
        assert low.count('class="diagram mermaid"') == 2 and "就绪" in text and "系统调用" in text
    assert 'id="fn-1"' in text and "see chapter 5" in text
    assert job["file"]["mime_type"].startswith("text/html")


def test_pdf_has_headings_chinese_text_diagrams_outline_and_page_numbers(sc: Sidecar, note_id: str) -> None:
    if not shutil.which("pdftotext"):
        pytest.skip("poppler-utils (pdftotext) is not installed; scripts/setup installs it")
    if not sc.components["chromium"]["available"]:  # type: ignore[attr-defined]
        job = sc.result("exports/create", {"source": {"type": "note", "note_id": note_id}, "format": "pdf"})
        failed = _wait(sc, job["job_id"])
        assert failed["status"] == "failed" and failed["error"]["code"] == "EXPORT_RENDER_FAILED"
        return
    job, data = _export(sc, note_id, "pdf", page_size="A4")
    assert data.startswith(b"%PDF-")
    SCREENS.mkdir(parents=True, exist_ok=True)
    pdf = SCREENS / "note.pdf"
    pdf.write_bytes(data)
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    for heading in HEADINGS:
        assert heading in text, heading
    assert "短作业优先" in text and "正弦曲线" in text  # body text; the plot's label is vector text
    assert re.search(r"(^|\n)1\s*/\s*\d+\n", text)  # the footer's page number "1 / N"
    if _mermaid_on(sc):
        assert "就绪 Ready" in text and "系统调用" in text  # diagram labels are vector text
    fonts = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout
    assert "WenQuanYi" in fonts  # the CJK font is embedded
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(data))
    box = reader.pages[0].mediabox
    assert abs(float(box.width) - 595.3) < 2 and abs(float(box.height) - 841.9) < 2  # A4 in points
    titles = _outline_titles(reader.outline)
    for heading in HEADINGS:
        assert heading in titles, titles
    assert "/StructTreeRoot" in reader.trailer["/Root"]  # tagged
    tree = _struct_tree(reader.trailer["/Root"]["/StructTreeRoot"])
    kinds = [s for s, _, _ in tree]
    assert [s for s in kinds if re.fullmatch(r"/H[1-6]", s)] == ["/H1", "/H2", "/H2", "/H2"]  # the note's headings
    lists = [(depth, s) for s, depth, _ in tree if s in ("/L", "/LI")]
    assert min(d for d, s in lists if s == "/L") < max(d for d, s in lists if s == "/L")  # a list nested in an item
    assert kinds.count("/LI") == 7 and kinds.count("/Table") == 1 and kinds.count("/TH") == 3  # 5 items + 2 notes
    assert kinds.count("/TR") == 3 and kinds.count("/TD") == 6  # header row + 2 rows of 3
    figures = [alt for s, _, alt in tree if s == "/Figure"]
    # each diagram is a Figure with its alternative text: its kind and source
    assert any(f.startswith("Function plot: expressions: - expression: sin(x) label: 正弦曲线") for f in figures)
    if _mermaid_on(sc):
        assert any(f.startswith("Mermaid diagram: flowchart TD A[就绪 Ready] --> B[运行 Running]") for f in figures)
        assert any(f.startswith("Mermaid diagram: sequenceDiagram participant 用户") for f in figures)
    subprocess.run(["pdftoppm", "-r", "60", "-png", str(pdf), str(SCREENS / "page")], check=True)
    pages = sorted(SCREENS.glob("page-*.png"))
    assert len(pages) == len(reader.pages) >= 2
    from PIL import Image

    for page in pages:  # each page has ink: text and drawings, not blank or boxes only
        with Image.open(page) as im:
            dark = sum(im.convert("L").histogram()[:128])
        assert dark > 500, page


def _struct_tree(node: Any, depth: int = 0) -> list[tuple[str, int, str]]:
    """The tagged PDF's structure elements in document order: (type, depth, alternative text)."""
    import pypdf

    node = node.get_object()
    out: list[tuple[str, int, str]] = []
    if isinstance(node, pypdf.generic.DictionaryObject):
        if "/S" in node:
            out.append((str(node["/S"]), depth, str(node.get("/Alt", ""))))
        kids = node.get("/K")
        if kids is not None:
            for kid in kids if isinstance(kids, pypdf.generic.ArrayObject) else [kids]:
                out += _struct_tree(kid, depth + 1)
    return out


def _outline_titles(outline: Any) -> list[str]:
    titles: list[str] = []
    for item in outline:
        if isinstance(item, list):
            titles += _outline_titles(item)
        else:
            titles.append(str(item.title))
    return titles


def test_docx_has_heading_styles_table_list_levels_images_footnotes_and_equations(sc: Sidecar, note_id: str) -> None:
    import docx

    _job, data = _export(sc, note_id, "docx")
    SCREENS.mkdir(parents=True, exist_ok=True)
    (SCREENS / "note.docx").write_bytes(data)
    doc = docx.Document(io.BytesIO(data))
    styles = {p.text.strip(): p.style.name for p in doc.paragraphs}
    assert styles[HEADINGS[0]] == "Heading 1"
    for heading in HEADINGS[1:]:
        assert styles[heading] == "Heading 2", heading
    assert styles["第一层 level one"] == "List Bullet"
    assert styles["第二层 level two"] == "List Bullet 2"
    assert styles["第三层 ordered"] == "List Number 3"
    assert any(p.style.name == "Source Code" and "def schedule" in p.text for p in doc.paragraphs)
    table = doc.tables[0]
    assert [c.text for c in table.rows[0].cells] == ["算法 Algorithm", "平均等待", "抢占"]
    assert "w:tblHeader" in table.rows[0]._tr.xml and [c.text for c in table.rows[2].cells] == ["RR", "6.2", "是"]
    images = 3 if _mermaid_on(sc) else 1
    assert len(doc.inline_shapes) >= images  # two diagrams and the plot as PNG
    import zipfile

    z = zipfile.ZipFile(io.BytesIO(data))
    body = z.read("word/document.xml").decode()
    assert body.count("<m:oMath") >= 2  # inline and block maths as Word equations
    assert "w:hyperlink" in body and "footnoteReference" in body
    assert "see chapter 5" in z.read("word/footnotes.xml").decode()
    assert 'descr="Function plot: expressions: - expression: sin(x)' in body  # a picture's alternative text
    if shutil.which("soffice"):
        out = SCREENS / "lo"
        subprocess.run(
            ["soffice", "--headless", "--convert-to", "pdf", "--outdir", str(out), str(SCREENS / "note.docx")],
            check=True,
            timeout=120,
        )
        assert (out / "note.pdf").stat().st_size > 0


def test_markdown_source_is_not_persisted_and_warnings_name_nodes(sc: Sidecar) -> None:
    secret = "未保存的预览 unsaved preview text 7f3a"
    md = f'# Draft\n\n{secret}\n\n<div onclick="steal()">raw html</div>\n\n![pic](https://example.com/a.png)\n'
    job = sc.result("exports/create", {"source": {"type": "markdown", "markdown": md}, "format": "html"})
    job = _wait(sc, job["job_id"])
    assert job["status"] == "completed"
    assert any(w.startswith("EXPORT_CONTENT_DROPPED: node_") and "(html)" in w for w in job["warnings"])
    assert any(w.startswith("EXPORT_IMAGE_SKIPPED: node_") for w in job["warnings"])
    page = _download(sc, job["job_id"]).decode()
    assert secret in page and "<div>raw html</div>" in page and "steal" not in page  # kept, sanitised
    db = (sc.data_dir / "metona.sqlite3").read_bytes()  # type: ignore[attr-defined]
    assert secret.encode() not in db
    only_html = sc.result(
        "exports/create", {"source": {"type": "markdown", "markdown": "<div>a</div>\n\n<p>b</p>\n"}, "format": "docx"}
    )
    failed = _wait(sc, only_html["job_id"])
    assert failed["status"] == "failed" and failed["error"]["code"] == "EXPORT_UNSUPPORTED_CONTENT"
    assert _error(sc, "exports/file", {"job_id": failed["job_id"]}) == (409, "EXPORT_FILE_NOT_READY")


def test_bad_inputs_get_their_codes_and_write_nothing(sc: Sidecar, note_id: str) -> None:
    before = _files(sc)
    listed = sc.result("exports/list", {"limit": 500})["page"]["total"]
    note = {"type": "note", "note_id": note_id}
    cases = [
        ({"source": {"type": "note", "note_id": "note_missing"}, "format": "pdf"}, (404, "EXPORT_SOURCE_NOT_FOUND")),
        ({"source": note, "format": "odt"}, (400, "EXPORT_FORMAT_UNSUPPORTED")),
        ({"source": note, "format": "html", "options": {"page_size": "B9"}}, (400, "EXPORT_OPTIONS_INVALID")),
        ({"source": note, "format": "html", "options": {"theme_id": "nope"}}, (400, "EXPORT_OPTIONS_INVALID")),
        ({"source": note, "format": "html", "options": {"code_theme": "nope"}}, (400, "EXPORT_OPTIONS_INVALID")),
        ({"source": note, "format": "html", "options": {"colour": "red"}}, (400, "EXPORT_OPTIONS_INVALID")),
        ({"source": {"type": "url", "url": "http://x"}, "format": "html"}, (400, "EXPORT_OPTIONS_INVALID")),
        ({"source": {"type": "markdown"}, "format": "html"}, (400, "EXPORT_OPTIONS_INVALID")),
    ]
    for params, expected in cases:
        assert _error(sc, "exports/create", params) == expected, params
    assert _error(sc, "exports/get", {"job_id": "export_nope"}) == (404, "EXPORT_JOB_NOT_FOUND")
    assert _error(sc, "exports/cancel", {"job_id": "export_nope"}) == (404, "EXPORT_JOB_NOT_FOUND")
    assert _error(sc, "exports/file", {"job_id": "export_nope"}) == (404, "EXPORT_JOB_NOT_FOUND")
    assert _files(sc) == before
    assert sc.result("exports/list", {"limit": 500})["page"]["total"] == listed

    # an offset past the end; a file past its expiry (and then swept)
    job = sc.result("exports/create", {"source": note, "format": "html", "options": {"expires_in_s": 2}})
    job = _wait(sc, job["job_id"])
    size = job["file"]["size"]
    end = sc.result("exports/file", {"job_id": job["job_id"], "offset": size})
    assert end["eof"] and end["length"] == 0
    assert _error(sc, "exports/file", {"job_id": job["job_id"], "offset": size + 1}) == (400, "EXPORT_OPTIONS_INVALID")
    time.sleep(2.2)
    assert _error(sc, "exports/file", {"job_id": job["job_id"]}) == (410, "EXPORT_FILE_EXPIRED")
    assert not any(name.startswith(job["job_id"]) for name in _files(sc))
    listing = sc.result("exports/list", {"format": "html", "status": "completed"})
    assert all(j["format"] == "html" and j["status"] == "completed" for j in listing["items"])


def test_cancel_stops_a_running_export_within_a_second_and_leaves_no_file(sc: Sidecar) -> None:
    blocks = "\n\n".join(f"```function_plot\nexpressions:\n  - sin(x*{i}.5)/{i + 1}\n```" for i in range(60))
    maths = "\n\n".join(f"$$\\frac{{{i}}}{{x^{i}+1}}$$" for i in range(200))
    md = f"# 取消 cancel\n\n{blocks}\n\n{maths}\n"
    before = _files(sc)
    job = sc.result("exports/create", {"source": {"type": "markdown", "markdown": md}, "format": "docx"})
    deadline = time.monotonic() + 30
    while sc.result("exports/get", {"job_id": job["job_id"]})["status"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.2)
    t0 = time.monotonic()
    assert sc.result("exports/cancel", {"job_id": job["job_id"]})["accepted"] is True
    while (current := sc.result("exports/get", {"job_id": job["job_id"]}))["status"] == "running":
        time.sleep(0.02)
    assert current["status"] == "cancelled" and time.monotonic() - t0 <= 1.0, current
    assert current["file"] is None
    assert _error(sc, "exports/file", {"job_id": job["job_id"]}) == (409, "EXPORT_FILE_NOT_READY")
    time.sleep(0.3)
    assert _files(sc) == before
    sc.assert_alive()


def test_cli_exports_a_markdown_file_and_a_note(sc: Sidecar, note_id: str, tmp_path: Path) -> None:
    import docx

    md = tmp_path / "doc.md"
    md.write_text("# 命令行 CLI\n\n- one\n  - two\n\n$x^2$\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    cmd = [*sidecar_cmd(), "export", str(md), "--format", "docx", "-o", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=SLOW, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    written = Path(done.stdout.strip())
    assert written == out / "命令行 CLI.docx"
    assert [p.style.name for p in docx.Document(str(written)).paragraphs][:3] == [
        "Heading 1",
        "List Bullet",
        "List Bullet 2",
    ]
    data_dir = sc.data_dir  # type: ignore[attr-defined]
    cmd = [
        *sidecar_cmd(),
        "export",
        "--note",
        note_id,
        "--format",
        "html",
        "--data-dir",
        str(data_dir),
        "-o",
        str(out / "n.html"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=SLOW, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "进程调度 Scheduling" in (out / "n.html").read_text("utf-8")
    bad = subprocess.run(
        [*sidecar_cmd(), "export", "--note", "note_missing", "--format", "html", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=SLOW,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and "EXPORT_SOURCE_NOT_FOUND" in bad.stderr
