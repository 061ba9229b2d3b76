"""The document readers in-process, held against independent readers on documents nobody here wrote: pypdf's test
PDFs (a 19-page data model, a pdflatex document, a scanned book with its OCR layer, a Chinese table, password-
protected files) against poppler's ``pdftotext``, python-docx's test documents and a Debian HTML page against
``pandoc -t plain`` (the corpus: scripts/documents_corpus.py, from the projects' PyPI source archives)."""

from __future__ import annotations

import io
import random
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from sidecar.documents.blocks import DocBlock, join_lines, split_long
from sidecar.documents.docx import read_docx
from sidecar.documents.errors import DocumentEncrypted, DocumentTooLarge, DocumentUnreadable
from sidecar.documents.formats import sniff
from sidecar.documents.pdf import drop_furniture_blocks, merge_broken_paragraphs, read_pdf, repair_gbk, unusable_share
from sidecar.documents.text import read_html, read_markdown, read_text

from .oracle import DOCXS, PDFS, need_corpus, on_cited_page, pandoc_plain, pdf_word_recall, pdftotext, recall, words

GEOBASE = "GeoBase_NHNC1_Data_Model_UML_EN.pdf"
DEBIAN_HTML = Path("/usr/share/doc/base-passwd/users-and-groups.html")


@pytest.fixture(autouse=True, scope="module")
def _corpus() -> None:
    need_corpus()


def _pdf(name: str, tmp_path: Path, ocr: str = "auto", pages: list[tuple[int, int, bool]] | None = None):
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


def test_a_long_pdf_recall_structure_and_pages(tmp_path: Path) -> None:
    seen: list[tuple[int, int, bool]] = []
    parsed = _pdf(GEOBASE, tmp_path, pages=seen)
    assert parsed.pages == 19 and parsed.ocr_pages == [] and parsed.warnings == []
    assert sorted(p for p, _, _ in seen) == list(range(1, 20))
    text = "\n".join(b.text for b in parsed.blocks)
    assert pdf_word_recall(PDFS / GEOBASE, text) >= 0.97
    assert all(b.page is not None for b in parsed.blocks)
    assert on_cited_page(PDFS / GEOBASE, [(b.text, b.page) for b in parsed.blocks]) >= 0.95
    assert {"heading", "paragraph", "list"} <= {b.kind for b in parsed.blocks}
    # the running header of every page ("National Hydro Network ... Edition 1.0, 2004-06") is not body text
    header_pages = {b.page for b in parsed.blocks if "edition 1.0" in b.text.lower() and "2004-06" in b.text}
    assert len(header_pages) <= 2, header_pages
    # never a block per line nor per page
    paragraphs = [b for b in parsed.blocks if b.kind == "paragraph"]
    assert 19 * 2 < len(paragraphs) < len(pdftotext(PDFS / GEOBASE).splitlines()) / 2


def test_a_latex_pdf_keeps_its_section_headings(tmp_path: Path) -> None:
    parsed = _pdf("pdflatex-outline.pdf", tmp_path)
    headings = [(b.page, b.text) for b in parsed.blocks if b.kind == "heading"]
    assert (2, "# 1 Foo") in headings and (4, "# 9 Baz") in headings
    body = next(b for b in parsed.blocks if b.kind == "paragraph" and b.page == 3)
    assert body.label and body.label.split(" > ")[-1] in {"5 Bar", "6 Baz", "7 Foo", "4 Foo"}
    assert pdf_word_recall(PDFS / "pdflatex-outline.pdf", "\n".join(b.text for b in parsed.blocks)) >= 0.97


def test_chinese_pdf_text_is_exact(tmp_path: Path) -> None:
    parsed = _pdf("issue-914-xmp-data.pdf", tmp_path)
    cjk = lambda t: "".join(c for c in t if "\u4e00" <= c <= "\u9fff")  # noqa: E731
    oracle = pdftotext(PDFS / "issue-914-xmp-data.pdf")
    got = cjk("".join(b.text for b in parsed.blocks))
    # every character, exactly (a table: the two readers may walk its cells in another order) ...
    assert len(got) > 500 and Counter(got) == Counter(cjk(oracle))
    # ... and each of the oracle's lines whole
    lines = [cjk(line) for line in oracle.splitlines() if cjk(line)]
    assert sum(line in got for line in lines) >= 0.95 * len(lines)
    assert parsed.ocr_pages == []


def test_a_scanned_book_with_an_ocr_layer_is_read_from_its_layer(tmp_path: Path) -> None:
    parsed = _pdf("Seige_of_Vicksburg_Sample_OCR.pdf", tmp_path)
    assert parsed.pages == 6 and parsed.ocr_pages == []
    assert pdf_word_recall(PDFS / "Seige_of_Vicksburg_Sample_OCR.pdf", "\n".join(b.text for b in parsed.blocks)) >= 0.97


def test_gbk_read_as_latin1_is_decoded_back() -> None:
    assert repair_gbk("hello world") is None and repair_gbk("¹ØÓÚºì¾ü") == "关于红军"
    assert repair_gbk("Ä¿¡¡¡¡Â¼") == "目\u3000\u3000录"


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
    assert all(
        [b.text for b in blocks]
        == [f"Body text of page {names[n]} that says something of its own.", f"Another paragraph, page {names[n]}."]
        for n, blocks in per_page.items()
    )
    merged = merge_broken_paragraphs(
        [
            DocBlock("paragraph", "A long sentence that the layout analysis of OCR cut in the middle of", 1),
            DocBlock("paragraph", "its course.", 1),
            DocBlock("paragraph", "Next.", 1),
        ]
    )
    assert [b.text for b in merged] == [
        "A long sentence that the layout analysis of OCR cut in the middle of its course.",
        "Next.",
    ]


def test_mojibake_share() -> None:
    assert unusable_share("\x04\x05\x06 Abstract") < 0.5 < unusable_share("\x04\x05\x06\x07\x08 ab")
    assert unusable_share("plain English text") == 0.0


def _mutated(src: Path, out: Path, seed: int) -> Path:
    """A real PDF with 40 runs of its bytes overwritten at seeded places (a fuzzer's first mutation)."""
    data = bytearray(src.read_bytes())
    rng = random.Random(seed)
    for _ in range(40):
        at = rng.randrange(len(data) - 64)
        data[at : at + rng.randint(1, 64)] = rng.randbytes(rng.randint(1, 64))
    out.write_bytes(bytes(data))
    return out


def test_encrypted_damaged_and_not_a_pdf(tmp_path: Path) -> None:
    with pytest.raises(DocumentEncrypted):
        _pdf("encryption/r6-user-password.pdf", tmp_path)
    with pytest.raises(DocumentEncrypted):
        _pdf("encryption/r4-user-password.pdf", tmp_path)
    assert _pdf("encryption/r6-owner-password.pdf", tmp_path).blocks  # an owner password alone: it opens
    garbage = tmp_path / "garbage.pdf"
    garbage.write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 40)
    with pytest.raises(DocumentUnreadable) as info:
        read_pdf(
            garbage,
            ocr_mode="off",
            languages=None,
            tmp_dir=tmp_path,
            max_pages=2000,
            page_timeout_s=60,
            on_page=lambda *a: None,
        )
    assert info.value.details["reason"] == "PDF_OPEN_FAILED"
    truncated = tmp_path / "truncated.pdf"
    truncated.write_bytes((PDFS / GEOBASE).read_bytes()[:150_000])
    for path in [truncated] + [_mutated(PDFS / GEOBASE, tmp_path / f"fuzzed-{i}.pdf", i) for i in range(6)]:
        try:
            cut = read_pdf(
                path,
                ocr_mode="off",
                languages=None,
                tmp_dir=tmp_path,
                max_pages=2000,
                page_timeout_s=60,
                on_page=lambda *a: None,
            )
        except DocumentUnreadable:
            continue  # typed: PDFium could not rebuild it
        # or it recovered pages: what it read is kept, a page it lost is a warning, never an exception
        assert cut.pages is not None
        assert all(w["code"] in {"PAGE_UNREADABLE", "PAGE_TEXT_UNUSABLE"} for w in cut.warnings), cut.warnings


def test_too_many_pages(tmp_path: Path) -> None:
    with pytest.raises(DocumentTooLarge) as info:
        read_pdf(
            PDFS / GEOBASE,
            ocr_mode="off",
            languages=None,
            tmp_dir=tmp_path,
            max_pages=10,
            page_timeout_s=60,
            on_page=lambda *a: None,
        )
    assert info.value.details == {"reason": "TOO_MANY_PAGES", "pages": 19, "limit": 10}


def _docx_names() -> list[str]:
    return sorted(p.name for p in DOCXS.glob("*.docx")) or ["(corpus missing)"]


@pytest.mark.parametrize("name", _docx_names())
def test_docx_against_pandoc(name: str) -> None:
    parsed = read_docx(DOCXS / name, max_expanded_bytes=256 << 20)
    got = "\n".join(b.text for b in parsed.blocks)
    assert recall(words(pandoc_plain(DOCXS / name)), words(got)) >= 0.97, name


def test_docx_kinds_and_labels() -> None:
    styles = read_docx(DOCXS / "par-known-styles.docx", max_expanded_bytes=256 << 20).blocks
    assert ("heading", "# Heading 1") in [(b.kind, b.text) for b in styles]
    assert next(b for b in styles if b.kind == "heading").label == "Heading 1"
    tables = read_docx(DOCXS / "tbl-cell-access.docx", max_expanded_bytes=256 << 20).blocks
    assert [b.kind for b in tables].count("table") == 4 and all(
        b.text.startswith("| ") for b in tables if b.kind == "table"
    )
    numbered = read_docx(DOCXS / "num-having-numbering-part.docx", max_expanded_bytes=256 << 20).blocks
    assert any(b.kind == "list" for b in numbered)
    mixed = read_docx(DOCXS / "blk-paras-and-tables.docx", max_expanded_bytes=256 << 20).blocks
    kinds = [b.kind for b in mixed]
    assert "table" in kinds and kinds.index("table") > 0  # in the body's order: text, then the table


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
    broken.write_bytes((DOCXS / "par-known-styles.docx").read_bytes()[:5000])
    with pytest.raises(DocumentUnreadable):
        read_docx(broken, max_expanded_bytes=256 << 20)


@pytest.mark.skipif(not DEBIAN_HTML.is_file(), reason="base-passwd's HTML documentation is not installed")
def test_html_against_pandoc() -> None:
    parsed = read_html(DEBIAN_HTML.read_bytes())
    got = "\n".join(b.text for b in parsed.blocks)
    assert recall(words(pandoc_plain(DEBIAN_HTML)), words(got)) >= 0.97
    assert {"heading", "paragraph"} <= {b.kind for b in parsed.blocks} and parsed.title


def test_html_drops_scripts_and_styles() -> None:
    page = (
        b"<html><head><style>p{color:red}</style><script>alert('x')</script><title>T</title></head><body>"
        b"<h1>One</h1><p>Kept <b>text</b>.</p><script>var secret = 1;</script><noscript>no</noscript>"
        b"<h2>Two</h2><ul><li>a</li><li>b</li></ul><pre>x = 1\n</pre></body></html>"
    )
    blocks = read_html(page).blocks
    assert [(b.kind, b.text) for b in blocks] == [
        ("heading", "# One"),
        ("paragraph", "Kept text ."),
        ("heading", "## Two"),
        ("list", "- a\n- b"),
        ("code", "```\nx = 1\n```"),
    ]
    assert blocks[3].label == "One > Two"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            "第一段，\n继续。\n\nSecond para-\ngraph here.".encode("gb18030"),
            ["第一段，继续。", "Second paragraph here."],
        ),
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
        "a.pdf": b"%PDF-1.7\n",
        "a.txt": "纯文本".encode("gb18030"),
        "a.md": b"# x\n",
        "page": b"<!DOCTYPE html><p>x",
        "a.png": b"\x89PNG\r\n\x1a\n" + bytes(10),
        "a.doc": b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(100),
        "a.bin": bytes(range(256)),
        "a.zip": _plain_zip(),
    }
    got = {}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        got[name] = sniff(tmp_path / name, name)
    assert got == {
        "a.pdf": "pdf",
        "a.txt": "text",
        "a.md": "markdown",
        "page": "html",
        "a.png": "image",
        "a.doc": None,
        "a.bin": None,
        "a.zip": None,
    }


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


def _scan(name: str, page: int, out: Path) -> Path:
    """A real page rendered to an image-only PDF at 200 dpi (what a scanner gives)."""
    import pypdfium2 as pdfium

    image = pdfium.PdfDocument(str(PDFS / name))[page - 1].render(scale=200 / 72, grayscale=True).to_pil()
    image.save(out, "PDF", resolution=200)
    return out


def test_a_scanned_english_page_is_read_by_ocr(tmp_path: Path) -> None:
    """Word recall of the OCR against the page's own text layer (pdflatex's page 3, rendered at 200 dpi)."""
    parsed = read_pdf(
        _scan("pdflatex-outline.pdf", 3, tmp_path / "scan.pdf"),
        ocr_mode="auto",
        languages=None,
        tmp_dir=tmp_path,
        max_pages=10,
        page_timeout_s=120,
        on_page=lambda *a: None,
    )
    assert parsed.ocr_pages == [1] and parsed.pages == 1, parsed.warnings
    reference = words(pdftotext(PDFS / "pdflatex-outline.pdf", 3))
    assert recall(reference, words("\n".join(b.text for b in parsed.blocks))) >= 0.90


CJK_FONT = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")


@pytest.mark.skipif(not CJK_FONT.is_file(), reason="fonts-wqy-microhei (scripts/setup) is not installed")
def test_a_scanned_chinese_page_is_read_by_ocr(tmp_path: Path) -> None:
    """Character recall of the OCR on a printed Chinese page: the text of issue-914's table (a real document's
    words; its own page is a dense table in 7 pt type that no OCR reads), set in 14 pt WenQuanYi at 200 dpi."""
    from PIL import Image, ImageDraw, ImageFont

    lines = [ln.strip() for ln in pdftotext(PDFS / "issue-914-xmp-data.pdf").splitlines()]
    lines = [ln for ln in lines if sum("\u4e00" <= c <= "\u9fff" for c in ln) >= 3][:30]
    font = ImageFont.truetype(str(CJK_FONT), 39)  # 14 pt at 200 dpi
    page = Image.new("L", (1654, 2339), 255)  # A4 at 200 dpi
    draw = ImageDraw.Draw(page)
    for i, line in enumerate(lines):
        draw.text((160, 160 + i * 64), line, font=font, fill=0)
    scan = tmp_path / "scan-zh.pdf"
    page.save(scan, "PDF", resolution=200)
    parsed = read_pdf(
        scan,
        ocr_mode="auto",
        languages=None,
        tmp_dir=tmp_path,
        max_pages=10,
        page_timeout_s=120,
        on_page=lambda *a: None,
    )
    assert parsed.ocr_pages == [1], parsed.warnings
    reference = [c for ln in lines for c in ln if "\u4e00" <= c <= "\u9fff"]
    got = [c for b in parsed.blocks for c in b.text if "\u4e00" <= c <= "\u9fff"]
    assert recall(reference, got) >= 0.85
