"""The document readers in-process, held against independent readers on documents nobody here wrote: pdf.js's test
PDFs (a 14-page paper, a Chinese PDF, a GBK font fault, encrypted, fuzzed files) against poppler's ``pdftotext``,
pandoc's DOCX and HTML reader tests against ``pandoc -t plain`` (sources: tests/fixtures/documents/README.md)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from sidecar.documents.blocks import DocBlock, join_lines, split_long
from sidecar.documents.docx import read_docx
from sidecar.documents.errors import DocumentEncrypted, DocumentTooLarge, DocumentUnreadable
from sidecar.documents.formats import sniff
from sidecar.documents.pdf import drop_furniture_blocks, merge_broken_paragraphs, read_pdf, repair_gbk, unusable_share
from sidecar.documents.text import read_html, read_markdown, read_text

from .oracle import CORPUS, on_cited_page, pandoc_plain, pdf_word_recall, recall, words

PDFS = CORPUS / "pdfjs"
PANDOC = CORPUS / "pandoc"


def _pdf(name: str, tmp_path: Path, ocr: str = "auto", pages: list[tuple[int, int, bool]] | None = None):  # noqa: ANN202
    seen = pages if pages is not None else []
    return read_pdf(
        PDFS / name,
        ocr_mode=ocr,
        languages=None,
        tmp_dir=tmp_path / "ocr",
        max_pages=2000,
        page_timeout_s=60,
        on_page=lambda *a: seen.append(a),
    )


def test_paper_pdf_recall_structure_and_pages(tmp_path: Path) -> None:
    seen: list[tuple[int, int, bool]] = []
    parsed = _pdf("tracemonkey.pdf", tmp_path, pages=seen)
    assert parsed.pages == 14 and parsed.ocr_pages == [] and parsed.warnings == []
    assert sorted(p for p, _, _ in seen) == list(range(1, 15))
    text = "\n".join(b.text for b in parsed.blocks)
    assert pdf_word_recall(PDFS / "tracemonkey.pdf", text) >= 0.97
    cited = [(b.text, b.page) for b in parsed.blocks if b.page is not None]
    assert len(cited) == len(parsed.blocks)
    assert on_cited_page(PDFS / "tracemonkey.pdf", cited) >= 0.95
    kinds = {b.kind for b in parsed.blocks}
    assert {"heading", "paragraph", "list", "code"} <= kinds
    headings = [b.text for b in parsed.blocks if b.kind == "heading"]
    assert "## 1. Introduction" in headings and any(h.endswith("Related Work") for h in headings)
    # never a block per line nor per page: paragraphs are several lines long on average
    paragraphs = [b for b in parsed.blocks if b.kind == "paragraph"]
    assert 14 * 3 < len(paragraphs) < 1000 and sum(len(b.text) for b in paragraphs) / len(paragraphs) > 150
    # a word broken at a line end is joined ("inter-" + "preter" on one of the paper's pages)
    assert "interpreter" in words(text)
    label = next(b.label for b in parsed.blocks if "LuaJIT" in b.text)
    assert label and "Related Work" in label


def test_chinese_pdf_text_is_exact(tmp_path: Path) -> None:
    parsed = _pdf("issue12823.pdf", tmp_path)
    got = "".join(b.text for b in parsed.blocks)
    want = "".join(c for c in pdf_text(PDFS / "issue12823.pdf") if "\u4e00" <= c <= "\u9fff" or c in "，。、")
    assert "".join(c for c in got if "\u4e00" <= c <= "\u9fff" or c in "，。、") == want
    assert parsed.ocr_pages == []


def pdf_text(path: Path) -> str:
    from .oracle import pdftotext

    return pdftotext(path)


def test_chinese_font_that_poppler_reads_as_latin1(tmp_path: Path) -> None:
    parsed = _pdf("XiaoBiaoSong.pdf", tmp_path)
    text = "\n".join(b.text for b in parsed.blocks)
    assert "关于红军作战的原则" in text and "对国防问题的意见" in text
    assert repair_gbk("hello world") is None and repair_gbk("¹ØÓÚºì¾ü") == "关于红军"


def test_running_headers_footers_and_page_numbers_are_not_body() -> None:
    names = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}

    def page(n: int) -> list[DocBlock]:
        return [
            DocBlock("paragraph", "Journal of Things, Vol. 9 (2009)", n),
            DocBlock("paragraph", f"Body text of page {names[n]} that says something of its own.", n),
            DocBlock("paragraph", f"Another paragraph, page {names[n]}.", n),
            DocBlock("paragraph", f"Page {n} of 5", n),
        ]

    per_page = {n: page(n) for n in range(1, 6)}
    drop_furniture_blocks(per_page)
    assert all([b.text for b in blocks] == [f"Body text of page {names[n]} that says something of its own.",
                                            f"Another paragraph, page {names[n]}."] for n, blocks in per_page.items())
    merged = merge_broken_paragraphs([DocBlock("paragraph", "A long sentence that the layout analysis of OCR cut in the middle of", 1),
                                      DocBlock("paragraph", "its course.", 1), DocBlock("paragraph", "Next.", 1)])
    assert [b.text for b in merged] == ["A long sentence that the layout analysis of OCR cut in the middle of its course.", "Next."]


def test_mojibake_share() -> None:
    assert unusable_share("\x04\x05\x06 Abstract") < 0.5 < unusable_share("\x04\x05\x06\x07\x08 ab")
    assert unusable_share("plain English text") == 0.0


def test_encrypted_fuzzed_and_not_a_pdf(tmp_path: Path) -> None:
    with pytest.raises(DocumentEncrypted):
        _pdf("issue6010_1.pdf", tmp_path)
    with pytest.raises(DocumentUnreadable) as info:
        _pdf("poppler-742-0-fuzzed.pdf", tmp_path)
    assert info.value.details["reason"] == "PDF_OPEN_FAILED"
    # a file whose only page cannot be loaded: a warning per page, never an exception out of the reader
    parsed = _pdf("poppler-937-0-fuzzed.pdf", tmp_path, ocr="off")
    assert parsed.blocks == [] and {w["code"] for w in parsed.warnings} == {"PAGE_UNREADABLE"}
    truncated = tmp_path / "truncated.pdf"
    truncated.write_bytes((PDFS / "tracemonkey.pdf").read_bytes()[:300_000])
    try:
        cut = read_pdf(truncated, ocr_mode="off", languages=None, tmp_dir=tmp_path, max_pages=2000,
                       page_timeout_s=60, on_page=lambda *a: None)
    except DocumentUnreadable:
        pass  # PDFium could not rebuild the cross-reference table: typed
    else:  # or it recovered pages: what it read is kept, what it lost is a warning
        assert cut.pages is not None


def test_too_many_pages(tmp_path: Path) -> None:
    with pytest.raises(DocumentTooLarge) as info:
        read_pdf(PDFS / "tracemonkey.pdf", ocr_mode="off", languages=None, tmp_dir=tmp_path, max_pages=10,
                 page_timeout_s=60, on_page=lambda *a: None)
    assert info.value.details == {"reason": "TOO_MANY_PAGES", "pages": 14, "limit": 10}


@pytest.mark.parametrize("name", sorted(p.name for p in PANDOC.glob("*.docx")))
def test_docx_against_pandoc(name: str) -> None:
    parsed = read_docx(PANDOC / name, max_expanded_bytes=256 << 20)
    got = "\n".join(b.text for b in parsed.blocks)
    assert recall(words(pandoc_plain(PANDOC / name)), words(got)) >= 0.9, name


def test_docx_kinds_and_labels() -> None:
    headers = read_docx(PANDOC / "headers.docx", max_expanded_bytes=256 << 20).blocks
    assert [b.text for b in headers if b.kind == "heading"][:3] == ["# A Test of Headers", "## Second Level", "### Third level"]
    third = next(b for b in headers if b.kind == "paragraph" and b.label and b.label.endswith("Third level"))
    assert third.label == "A Test of Headers > Second Level > Third level"
    tables = read_docx(PANDOC / "tables.docx", max_expanded_bytes=256 << 20).blocks
    assert sum(b.kind == "table" for b in tables) == 3 and all(b.text.startswith("| ") for b in tables if b.kind == "table")
    lists = read_docx(PANDOC / "lists_continuing.docx", max_expanded_bytes=256 << 20).blocks
    assert [b.text for b in lists if b.kind == "list"] == ["1. Foo\n2. Bar\n3. Baz", "4. Bop"]
    code = read_docx(PANDOC / "adjacent_codeblocks.docx", max_expanded_bytes=256 << 20).blocks
    assert [b.kind for b in code].count("code") >= 1
    quotes = read_docx(PANDOC / "block_quotes.docx", max_expanded_bytes=256 << 20).blocks
    assert any(b.kind == "quote" and b.text.startswith("> ") for b in quotes)
    changes = read_docx(PANDOC / "track_changes_deletion.docx", max_expanded_bytes=256 << 20).blocks
    assert words(" ".join(b.text for b in changes)) == words(pandoc_plain(PANDOC / "track_changes_deletion.docx"))


def _zip_bomb(path: Path) -> None:
    """A DOCX-shaped package whose document part declares 300 MB of zeros (a few hundred KB compressed)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        with z.open("word/document.xml", "w", force_zip64=True) as f:
            chunk = bytes(1 << 20)
            for _ in range(300):
                f.write(chunk)


def test_zip_bomb_refused_before_expansion(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.docx"
    _zip_bomb(bomb)
    assert bomb.stat().st_size < 2_000_000 and sniff(bomb, "bomb.docx") == "docx"
    with pytest.raises(DocumentTooLarge) as info:
        read_docx(bomb, max_expanded_bytes=256 << 20)
    assert info.value.details["reason"] == "EXPANDED_SIZE"
    with pytest.raises(DocumentTooLarge) as info:
        read_docx(bomb, max_expanded_bytes=1 << 40)
    assert info.value.details["reason"] == "COMPRESSION_RATIO"
    broken = tmp_path / "broken.docx"
    broken.write_bytes((PANDOC / "headers.docx").read_bytes()[:5000])
    with pytest.raises(DocumentUnreadable):
        read_docx(broken, max_expanded_bytes=256 << 20)


def test_html_against_pandoc() -> None:
    for name in ("html-reader.html", "tables.html5"):
        data = (PANDOC / name).read_bytes()
        parsed = read_html(data)
        got = "\n".join(b.text for b in parsed.blocks)
        assert recall(words(pandoc_plain(PANDOC / name)), words(got)) >= 0.97, name
    parsed = read_html((PANDOC / "html-reader.html").read_bytes())
    kinds = {b.kind for b in parsed.blocks}
    assert {"heading", "paragraph", "list", "table", "code", "quote"} <= kinds
    assert parsed.title == "Pandoc Test Suite"


def test_html_drops_scripts_and_styles() -> None:
    page = b"<html><head><style>p{color:red}</style><script>alert('x')</script><title>T</title></head><body>" \
           b"<h1>One</h1><p>Kept <b>text</b>.</p><script>var secret = 1;</script><noscript>no</noscript>" \
           b"<h2>Two</h2><ul><li>a</li><li>b</li></ul><pre>x = 1\n</pre></body></html>"
    blocks = read_html(page).blocks
    assert [(b.kind, b.text) for b in blocks] == [
        ("heading", "# One"), ("paragraph", "Kept text ."), ("heading", "## Two"), ("list", "- a\n- b"),
        ("code", "```\nx = 1\n```"),
    ]
    assert blocks[3].label == "One > Two"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("第一段，\n继续。\n\nSecond para-\ngraph here.".encode("gb18030"), ["第一段，继续。", "Second paragraph here."]),
        ("\ufeffUTF-8 with BOM\n\nzwei".encode(), ["UTF-8 with BOM", "zwei"]),
        ("UTF-16 文本\n\n第二".encode("utf-16"), ["UTF-16 文本", "第二"]),
        (b"", []),
    ],
)
def test_text_encodings(data: bytes, expected: list[str]) -> None:
    assert [b.text for b in read_text(data).blocks] == expected


def test_markdown_keeps_kinds_and_labels() -> None:
    md = "# Guide\n\nIntro.\n\n## Install\n\n- one\n- two\n\n```sh\nmake\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    parsed = read_markdown(md.encode())
    assert [b.kind for b in parsed.blocks] == ["heading", "paragraph", "heading", "list", "code", "table"]
    assert parsed.blocks[-1].label == "Guide > Install" and parsed.title == "Guide"


def test_sniff(tmp_path: Path) -> None:
    cases = {
        "a.pdf": b"%PDF-1.7\n", "a.txt": "纯文本".encode("gb18030"), "a.md": b"# x\n", "page": b"<!DOCTYPE html><p>x",
        "a.png": b"\x89PNG\r\n\x1a\n" + bytes(10), "a.doc": b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(100),
        "a.bin": bytes(range(256)), "a.zip": _plain_zip(),
    }
    got = {}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        got[name] = sniff(tmp_path / name, name)
    assert got == {"a.pdf": "pdf", "a.txt": "text", "a.md": "markdown", "page": "html", "a.png": "image",
                   "a.doc": None, "a.bin": None, "a.zip": None}


def _plain_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("x.txt", "x")
    return buf.getvalue()


def test_join_lines_and_split_long() -> None:
    assert join_lines(["an inter-", "preter and", "Just-", "In-Time"]) == "an interpreter and Just- In-Time"
    assert join_lines(["中文", "续行", "and English"]) == "中文续行and English"
    parts = list(split_long(DocBlock("paragraph", "One sentence. " * 300, 3, "L"), 1000))
    assert all(len(p.text) <= 1000 and p.page == 3 and p.label == "L" for p in parts) and len(parts) >= 4
    code = list(split_long(DocBlock("code", "```\n" + "x = 1\n" * 500 + "```", 1), 400))
    assert all(p.text.startswith("```\n") and p.text.endswith("\n```") for p in code)
