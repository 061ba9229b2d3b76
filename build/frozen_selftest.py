"""Self-test of the frozen binary: exercises every bundled core library the way the sidecar uses it.

Run the built binary with METONA_FROZEN_SELFTEST=1 (build/launcher.py dispatches here instead of the
sidecar). Prints one line per check to stdout and exits non-zero if any check fails. This catches what the
ping smoke test cannot: a library that PyInstaller left out (or that our excludes/trims broke) is only
imported lazily, on first use.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path


def check_jsonrpcserver(tmp: Path) -> str:
    from jsonrpcserver import Success, dispatch, method  # needs its bundled request-schema.json

    @method
    def add(a: int, b: int):  # type: ignore[no-untyped-def]
        return Success(a + b)

    resp = json.loads(dispatch('{"jsonrpc":"2.0","method":"add","params":[2,40],"id":1}'))
    assert resp["result"] == 42, resp
    bad = json.loads(dispatch('{"jsonrpc":"2.0","method":1,"id":1}'))
    assert bad["error"]["code"] == -32600, bad
    return "dispatch + schema validation"


def check_pydantic_anyio(tmp: Path) -> str:
    import anyio
    import anyio.lowlevel
    from pydantic import BaseModel

    class M(BaseModel):
        x: int

    async def go() -> int:
        await anyio.lowlevel.checkpoint()
        return M.model_validate({"x": "7"}).x

    assert anyio.run(go) == 7
    return "model_validate under anyio.run"


def check_httpx(tmp: Path) -> str:
    import httpx

    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={"ok": True}))
    with httpx.Client(transport=transport) as client:
        assert client.get("http://example.invalid/").json() == {"ok": True}
    return f"httpx {httpx.__version__} MockTransport"


def check_lancedb(tmp: Path) -> str:
    import lancedb
    import pyarrow as pa
    import pyarrow.compute
    import pyarrow.dataset

    db = lancedb.connect(str(tmp / "lancedb"))
    table = db.create_table(
        "t",
        data=pa.table({"id": [1, 2, 3], "vector": [[0.0, 1.0], [1.0, 0.0], [0.7, 0.7]]}),
    )
    hits = table.search([1.0, 0.1]).limit(1).to_list()
    assert hits[0]["id"] == 2, hits

    async def go() -> int:
        adb = await lancedb.connect_async(str(tmp / "lancedb-async"))
        at = await adb.create_table("a", data=[{"id": 1, "vector": [0.5, 0.5]}])
        return await at.count_rows()

    import anyio

    assert anyio.run(go) == 1
    return f"lancedb {lancedb.__version__} sync+async create/search, pyarrow {pa.__version__}"


def check_retrieval(tmp: Path) -> str:
    """The embedded USE model (bundled weights, package metadata) and LanceDB's ICU full-text index."""
    import lancedb
    import pyarrow as pa
    from lancedb.index import FTS
    from lancedb.query import MatchQuery

    from sidecar.embeddings import default_embedder

    emb = default_embedder()
    vecs = emb.embed(["服务器宕机的原因", "Why did the server go down?", "红烧肉的做法"])
    assert vecs.shape == (3, 512), vecs.shape
    assert float(vecs[0] @ vecs[1]) > float(vecs[0] @ vecs[2]), "cross-lingual similarity"
    db = lancedb.connect(str(tmp / "lancedb-fts"))
    table = db.create_table(
        "f", data=pa.table({"id": [1, 2], "text": ["服务器宕机的原因是磁盘满了", "quarterly revenue"]})
    )
    table.create_index("text", config=FTS(base_tokenizer="icu", stem=True, remove_stop_words=True), replace=True)
    hits = table.search(MatchQuery("宕机", "text"), query_type="fts").select(["id", "_score"]).limit(1).to_list()
    assert hits and hits[0]["id"] == 1, hits
    return f"{emb.info.model_id} {emb.info.model_version} 512-d; ICU FTS finds Chinese"


def check_docx(tmp: Path) -> str:
    import docx

    doc = docx.Document()
    doc.add_heading("Frozen", level=1)
    doc.add_table(rows=2, cols=2)
    out = tmp / "t.docx"
    doc.save(str(out))
    assert docx.Document(str(out)).paragraphs[0].text == "Frozen"
    return "write + read .docx"


def check_pdfium(tmp: Path) -> str:
    """The document worker's PDF reader (issue 31): a one-page PDF made here, then its text and a render."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument.new()
    doc.new_page(200, 200)
    out = tmp / "t.pdf"
    with open(out, "wb") as fh:
        doc.save(fh)
    doc.close()
    doc = pdfium.PdfDocument(str(out))
    page = doc[0]
    text = page.get_textpage().get_text_range()
    image = page.render(scale=0.5).to_pil()
    assert text == "" and image.size == (100, 100), (text, image.size)
    return f"PDFium {pdfium.PDFIUM_INFO.version if hasattr(pdfium, 'PDFIUM_INFO') else ''}: open, text, render"


def check_mcp(tmp: Path) -> str:
    import mcp.client.stdio  # noqa: F401
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("selftest")

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    return "MCPServer + stdio client import"


def check_playwright(tmp: Path) -> str:
    names = ("chromium", "chromium-browser", "google-chrome")
    chromium = next((shutil.which(n) for n in names if shutil.which(n)), None)
    from playwright.sync_api import sync_playwright

    if chromium is None:
        return "SKIP: no chromium on PATH (import only)"
    args = [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
    ]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=args)
        page = browser.new_page()
        page.set_content("<h1>frozen</h1>")
        pdf = page.pdf(format="A4")
        browser.close()
    assert pdf.startswith(b"%PDF"), pdf[:8]
    return f"HTML -> PDF via {chromium} ({len(pdf)} bytes)"


def check_report_plots(tmp: Path) -> str:
    """The benchmark report's plots: matplotlib (Agg → SVG) with its fonts, PIL, contourpy, kiwisolver."""
    from sidecar.benchmarks import report

    plt = report._plt()
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.barh([0, 1], [0.25, 0.75], color="#4C78A8")
    ax.set_title("frozen")
    svg = report._svg(fig)
    assert svg.lstrip().startswith("<svg") and "<path" in svg, svg[:120]
    import matplotlib

    return f"matplotlib {matplotlib.__version__} SVG plot ({len(svg)} chars)"


def check_metadata_and_exclusions(tmp: Path) -> str:
    versions = {
        d: importlib.metadata.version(d) for d in ("lancedb", "mcp", "httpx", "python-docx", "playwright", "matplotlib")
    }
    present = [
        m
        for m in ("torch", "torchaudio", "pyannote", "faster_whisper", "openvino", "scipy", "pandas")
        if importlib.util.find_spec(m) is not None
    ]
    if not getattr(sys, "frozen", False):
        return f"metadata {versions}; (not frozen: exclusions not checked)"
    assert not present, f"audio/scientific stack should not be bundled: {present}"
    return f"metadata {versions}; audio stack absent"


CHECKS = [
    check_jsonrpcserver,
    check_pydantic_anyio,
    check_httpx,
    check_lancedb,
    check_retrieval,
    check_docx,
    check_pdfium,
    check_mcp,
    check_playwright,
    check_report_plots,
    check_metadata_and_exclusions,
]


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> int:
    failed = 0
    frozen = getattr(sys, "frozen", False)
    emit({"frozen": frozen, "meipass": getattr(sys, "_MEIPASS", None)})
    with tempfile.TemporaryDirectory(prefix="metona-selftest-") as d:
        for check in CHECKS:
            t0 = time.perf_counter()
            try:
                detail = check(Path(d))
                ok = True
            except Exception as exc:  # report every failure, keep going
                detail = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
                ok = False
                failed += 1
            name = check.__name__.removeprefix("check_")
            emit({"check": name, "ok": ok, "seconds": round(time.perf_counter() - t0, 2), "detail": detail})
    emit({"selftest": "FAILED" if failed else "OK", "failed": failed})
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
