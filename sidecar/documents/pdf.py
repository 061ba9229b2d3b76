"""PDF → blocks with pypdfium2 (PDFium: Apache-2.0/BSD), page by page, OCR where the text layer is unusable.

Why PDFium (measured on pdf.js's test PDFs, README "Documents"): 14 pages of tracemonkey.pdf in 0.1 s with word
recall 0.987 against poppler's ``pdftotext``, where pdfminer.six took 4 s for 0.968. It also renders a page for OCR.

Per page: the text layer's lines with their font size, weight, font and position (a few sampled characters a
line). A page is read by OCR when ``ocr`` is ``force``; with ``auto`` when it has no text but has content (a scan),
or when its text is mojibake: control, private-use or unassigned characters (a font without a usable ToUnicode map)
— unless it is GBK read as Latin-1 (a common Chinese font fault), which decodes back exactly. Lines that repeat at
the top or bottom of most pages (running headers, footers) and bare page numbers are not body text.

Blocks: lines join into paragraphs (a hyphen that breaks a word is removed) until a gap, an indent, a move up a
column or a change of font size; lines in a font clearly larger than the body's, or short bold lines, are headings
(level by size); bullet or numbered lines are list items; monospaced lines are code. A block never spans pages, so
its ``page`` is exact.
"""

from __future__ import annotations

import ctypes
import re
import statistics
import unicodedata
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import ocr
from .blocks import DocBlock, HeadingPath, Parsed, clean_inline, code_text, heading_text, join_lines, list_text
from .errors import DocumentEncrypted, DocumentTooLarge, DocumentUnreadable

OnPage = Callable[[int, int, bool], None]
"""``(page, pages, by_ocr)`` after each page."""

_BULLET = re.compile(
    r"^\s*([\u2022\u25cf\u25aa\u25a0\u2023\u2043\u2219\u25e6\u00b7*\u2013\u2014-]|\(?\d{1,3}[.)]|\(?[a-z][.)])\s+"
)
_PAGE_NUMBER = re.compile(r"^\W*(page\s+)?(\d{1,4}|[ivxlcdm]{1,7})(\s*(of|/)\s*\d{1,4})?\W*$|^第\s*\d+\s*页", re.I)
_MONO = re.compile(r"mono|courier|consol|menlo|inconsolata|typewriter|cmtt|sfmono|code", re.I)
_SENTENCE_END = re.compile(r"[.!?:;。！？：；”\"')\]]$")
_CAPTION = re.compile(r"^(fig(ure)?|table|tab|listing|algorithm|图|表)\s*\.?\s*\d", re.I)
MAX_FURNITURE_CHARS = 200
"""A running header or footer is short: a longer block that repeats is the document's own text."""
MOJIBAKE_SHARE = 0.15
"""A page whose text has more than this share of unusable characters is read by OCR."""


@dataclass
class Line:
    text: str
    size: float
    bold: bool
    mono: bool
    top: float
    bottom: float
    left: float
    right: float


@dataclass
class PageText:
    number: int
    lines: list[Line]
    has_content: bool
    width: float
    height: float


def _open(path: Path) -> Any:
    import pypdfium2 as pdfium

    try:
        return pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        text = str(exc).lower()
        if "password" in text:
            raise DocumentEncrypted(
                "The PDF is protected by a password.", details={"reason": "PASSWORD_REQUIRED"}
            ) from None
        raise DocumentUnreadable(
            "The PDF could not be opened: it is damaged or not a PDF.",
            details={"reason": "PDF_OPEN_FAILED", "detail": str(exc)[:200]},
        ) from None


def _lines(textpage: Any) -> list[Line]:
    import pypdfium2.raw as raw

    text: str = textpage.get_text_range()
    tp = textpage.raw
    l_, r_, b_, t_ = (ctypes.c_double() for _ in range(4))
    name_buf = ctypes.create_string_buffer(128)
    flags = ctypes.c_int()
    out: list[Line] = []
    start = 0
    for part in text.split("\r\n"):
        end = start + len(part)
        idx = [start + i for i, ch in enumerate(part) if not ch.isspace()]
        if idx:
            sample = idx if len(idx) <= 6 else [idx[int(k * (len(idx) - 1) / 5)] for k in range(6)]
            sizes, weights, tops, bottoms, monos = [], [], [], [], 0
            for i in sample:
                sizes.append(raw.FPDFText_GetFontSize(tp, i))
                weights.append(raw.FPDFText_GetFontWeight(tp, i))
                if raw.FPDFText_GetCharBox(tp, i, l_, r_, b_, t_):
                    tops.append(t_.value)
                    bottoms.append(b_.value)
                if raw.FPDFText_GetFontInfo(tp, i, name_buf, 128, ctypes.byref(flags)):
                    monos += bool(_MONO.search(name_buf.value.decode("latin-1", "replace"))) or bool(flags.value & 1)
            left = right = 0.0
            if raw.FPDFText_GetCharBox(tp, idx[0], l_, r_, b_, t_):
                left = l_.value
            if raw.FPDFText_GetCharBox(tp, idx[-1], l_, r_, b_, t_):
                right = r_.value
            out.append(
                Line(
                    text=part,
                    size=statistics.median(sizes),
                    bold=min(weights) >= 600,
                    mono=monos > len(sample) // 2,
                    top=max(tops) if tops else 0.0,
                    bottom=min(bottoms) if bottoms else 0.0,
                    left=left,
                    right=right,
                )
            )
        start = end + 2
    return out


def _page_text(doc: Any, index: int) -> PageText:
    import pypdfium2.raw as raw

    page = doc[index]
    try:
        width, height = page.get_size()
        textpage = page.get_textpage()
        try:
            lines = _lines(textpage)
        finally:
            textpage.close()
        has_content = raw.FPDFPage_CountObjects(page.raw) > 0
    finally:
        page.close()
    return PageText(index + 1, lines, has_content, width, height)


def unusable_share(text: str) -> float:
    chars = [c for c in text if not c.isspace()]
    if not chars:
        return 0.0
    bad = sum(1 for c in chars if c == "\ufffd" or unicodedata.category(c) in ("Cc", "Cf", "Co", "Cn", "Cs"))
    return bad / len(chars)


def repair_gbk(text: str) -> str | None:
    """GBK bytes that a font without a ToUnicode map handed out as Latin-1 (``¹ØÓÚ`` for 关于), decoded back; None
    when the text is not that."""
    chars = [c for c in text if not c.isspace()]
    if not chars or sum(1 for c in chars if "\u0080" <= c <= "\u00ff") < 0.3 * len(chars):
        return None
    try:
        fixed = text.encode("latin-1").decode("gb18030")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return None
    fixed_chars = [c for c in fixed if not c.isspace()]
    cjk = sum(
        1 for c in fixed_chars if "\u4e00" <= c <= "\u9fff" or "\u3000" <= c <= "\u303f" or "\uff00" <= c <= "\uffef"
    )
    return fixed if fixed_chars and cjk >= 0.5 * len(fixed_chars) else None


def _furniture(pages: list[PageText]) -> set[tuple[int, int]]:
    """(page, line index) of running headers/footers and bare page numbers: lines among a page's first or last two
    whose digit-blind text repeats there on at least half the pages (and on three)."""
    edge: dict[tuple[int, int], str] = {}
    for p in pages:
        n = len(p.lines)
        for i in {0, 1, n - 2, n - 1}:
            if 0 <= i < n:
                edge[(p.number, i)] = re.sub(r"\d+", "#", p.lines[i].text.strip().lower())
    counts = Counter(set((k[0], v) for k, v in edge.items()))
    per_key = Counter(v for _, v in counts)
    need = max(3, (len(pages) + 1) // 2)
    out = set()
    for key, text in edge.items():
        if not text:
            continue
        page = next(p for p in pages if p.number == key[0])
        raw_text = page.lines[key[1]].text.strip()
        if per_key[text] >= need or (_PAGE_NUMBER.match(raw_text) and len(raw_text) <= 20):
            out.add(key)
    return out


def _body_size(pages: list[PageText]) -> float:
    sizes: Counter[float] = Counter()
    for p in pages:
        for line in p.lines:
            sizes[round(line.size * 2) / 2] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else 10.0


def _heading_level(line: Line, body: float, big_sizes: list[float]) -> int | None:
    text = line.text.strip()
    if len(text) > 150 or not any(ch.isalpha() or ch.isdigit() for ch in text):
        return None
    if text.count(",") >= 2 or _CAPTION.match(text):  # an author list, a figure's or table's caption
        return None
    if line.size >= body * 1.15:
        for level, size in enumerate(big_sizes, 1):
            if line.size >= size - 0.25:
                return min(level, 6)
        return min(len(big_sizes), 6) or 1
    if line.bold and len(text) <= 80 and not _SENTENCE_END.search(text) and abs(line.size - body) < 1.0:
        return min(len(big_sizes) + 1, 6)
    return None


def page_blocks(page: PageText, skip: set[int], body: float, big_sizes: list[float]) -> list[DocBlock]:
    blocks: list[DocBlock] = []
    para: list[Line] = []
    items: list[list[Line]] = []
    head: list[Line] = []
    head_level = 0

    def flush_para() -> None:
        if not para:
            return
        if all(line.mono for line in para):
            blocks.append(DocBlock("code", code_text("\n".join(line.text.rstrip() for line in para)), page.number))
        else:
            text = clean_inline(join_lines(line.text for line in para))
            if text:
                blocks.append(DocBlock("paragraph", text, page.number))
        para.clear()

    def flush_items() -> None:
        if items:
            texts = [_BULLET.sub("", join_lines(line.text for line in item), count=1) for item in items]
            ordered = bool(re.match(r"^\s*\(?\d", items[0][0].text))
            blocks.append(DocBlock("list", list_text([clean_inline(t) for t in texts], ordered), page.number))
            items.clear()

    def flush_head() -> None:
        if head:
            text = clean_inline(join_lines(line.text for line in head))
            if text:
                blocks.append(DocBlock("heading", heading_text(head_level, text), page.number))
            head.clear()

    prev: Line | None = None
    for i, line in enumerate(page.lines):
        if i in skip or not line.text.strip():
            continue
        level = _heading_level(line, body, big_sizes)
        if level is not None:
            if head and (level != head_level or (prev is not None and line.top < prev.bottom - 2.5 * line.size)):
                flush_head()
            flush_para()
            flush_items()
            head.append(line)
            head_level = level
            prev = line
            continue
        flush_head()
        if _BULLET.match(line.text) and not line.mono:
            flush_para()
            items.append([line])
            prev = line
            continue
        if items and prev is not None and _continues(prev, line) and line.left > items[-1][0].left + 1:
            items[-1].append(line)
            prev = line
            continue
        flush_items()
        if para and prev is not None and not _continues(prev, line):
            flush_para()
        if para and para[-1].mono != line.mono:
            flush_para()
        para.append(line)
        prev = line
    flush_head()
    flush_para()
    flush_items()
    return blocks


def _continues(prev: Line, line: Line) -> bool:
    """Whether ``line`` goes on the paragraph that ``prev`` ends."""
    height = max(prev.size, line.size, 1.0)
    if abs(prev.size - line.size) > 1.0:
        return False
    if line.top > prev.top + 0.5 * height:  # moved up: a new column or a new region
        return False
    gap = prev.bottom - line.top
    if gap > 1.0 * height:
        return False
    if line.left > prev.left + 0.8 * height and _SENTENCE_END.search(prev.text.strip()):  # an indented first line
        return False
    return True


def read_pdf(
    path: Path,
    *,
    ocr_mode: str,
    languages: list[str] | None,
    tmp_dir: Path,
    max_pages: int,
    page_timeout_s: float,
    on_page: OnPage,
    ocr_workers: int = 2,
) -> Parsed:
    parsed = Parsed()
    doc = _open(path)
    try:
        count = len(doc)
        if count == 0:
            raise DocumentUnreadable("The PDF has no pages.", details={"reason": "NO_PAGES"})
        if count > max_pages:
            raise DocumentTooLarge(
                f"The PDF has {count} pages; at most {max_pages} are imported at once.",
                details={"reason": "TOO_MANY_PAGES", "pages": count, "limit": max_pages},
            )
        parsed.pages = count
        pages: list[PageText] = []
        to_ocr: list[int] = []
        for index in range(count):
            try:
                page = _page_text(doc, index)
            except Exception as exc:
                parsed.warn(
                    "PAGE_UNREADABLE", f"Page {index + 1} could not be read.", page=index + 1, detail=type(exc).__name__
                )
                pages.append(PageText(index + 1, [], True, 612, 792))
                to_ocr.append(index + 1) if ocr_mode != "off" else None
                continue
            text = "\n".join(line.text for line in page.lines)
            chars = sum(1 for c in text if not c.isspace())
            fixed = repair_gbk(text) if chars else None
            if fixed is not None:
                for line, new in zip(page.lines, fixed.split("\n"), strict=True):
                    line.text = new
                parsed.warn(
                    "TEXT_REPAIRED",
                    f"Page {page.number}'s text was GBK read as Latin-1; decoded again.",
                    page=page.number,
                )
            bad = unusable_share(text) if fixed is None else 0.0
            if ocr_mode == "force" or (
                ocr_mode == "auto" and ((chars < 10 and page.has_content) or bad > MOJIBAKE_SHARE)
            ):
                to_ocr.append(page.number)
            elif bad > MOJIBAKE_SHARE:
                parsed.warn(
                    "PAGE_TEXT_UNUSABLE",
                    f"Page {page.number}'s text layer is unusable and OCR is off.",
                    page=page.number,
                    unusable_share=round(bad, 3),
                )
                page.lines = []
            pages.append(page)
            if page.number not in to_ocr:
                on_page(page.number, count, False)
        ocr_blocks = _ocr_pages(
            doc, to_ocr, pages, languages, tmp_dir, page_timeout_s, on_page, count, parsed, ocr_workers
        )
    finally:
        doc.close()
    text_pages = [p for p in pages if p.number not in ocr_blocks]
    furniture = _furniture(text_pages) if len(text_pages) >= 3 else set()
    body = _body_size(text_pages)
    big = sorted(
        {
            round(line.size * 2) / 2
            for p in text_pages
            for line in p.lines
            if line.size >= body * 1.15 and len(line.text.strip()) <= 150
        },
        reverse=True,
    )[:5]
    per_page: dict[int, list[DocBlock]] = {}
    for page in pages:
        if page.number in ocr_blocks:
            per_page[page.number] = ocr_blocks[page.number]
            continue
        skip = {i for (n, i) in furniture if n == page.number}
        per_page[page.number] = page_blocks(page, skip, body, big)
    drop_furniture_blocks(per_page)
    for n in ocr_blocks:
        per_page[n] = merge_broken_paragraphs(per_page[n])
    blocks = [b for n in sorted(per_page) for b in per_page[n]]
    label_blocks(blocks)
    parsed.blocks = blocks
    parsed.ocr_pages = sorted(ocr_blocks)
    parsed.title = next((b.text.lstrip("# ") for b in blocks if b.kind == "heading" and b.page == 1), None)
    return parsed


def drop_furniture_blocks(per_page: dict[int, list[DocBlock]]) -> None:
    """What the line-level pass cannot see (OCR'd pages, a header that became its own block): among each page's
    first two and last three blocks, the short ones whose digit-blind text repeats there on at least half the pages
    (and on three) — a paragraph that a document repeats is body text —, and bare page numbers."""

    def key(b: DocBlock) -> str:
        return re.sub(r"\d+", "#", b.text.lstrip("# ").strip().lower())

    edges: dict[int, list[int]] = {}
    counts: Counter[str] = Counter()
    for n, blocks in per_page.items():
        idx = sorted({i for i in (0, 1, len(blocks) - 3, len(blocks) - 2, len(blocks) - 1) if 0 <= i < len(blocks)})
        edges[n] = idx
        counts.update({key(blocks[i]) for i in idx})
    need = max(3, (len(per_page) + 1) // 2)
    for n, blocks in per_page.items():
        drop = set()
        for i in edges[n]:
            text = blocks[i].text.lstrip("# ").strip()
            repeated = counts[key(blocks[i])] >= need and len(per_page) >= 3 and len(text) <= MAX_FURNITURE_CHARS
            if repeated or (_PAGE_NUMBER.match(text) and len(text) <= 20):
                drop.add(i)
        if drop:
            per_page[n] = [b for i, b in enumerate(blocks) if i not in drop]


def merge_broken_paragraphs(blocks: list[DocBlock]) -> list[DocBlock]:
    """OCR's layout analysis may cut a paragraph where a line is short: a long paragraph that ends without a
    sentence's end goes on with the next paragraph."""
    out: list[DocBlock] = []
    for b in blocks:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.kind == b.kind == "paragraph"
            and len(prev.text) >= 60
            and not _SENTENCE_END.search(prev.text)
        ):
            prev.text = join_lines([prev.text, b.text])
        else:
            out.append(b)
    return out


def label_blocks(blocks: list[DocBlock]) -> None:
    path = HeadingPath()
    for block in blocks:
        if block.kind == "heading":
            level = len(block.text) - len(block.text.lstrip("#"))
            path.push(level or 1, block.text.lstrip("# "))
        block.label = path.label


def _ocr_pages(
    doc: Any,
    numbers: list[int],
    pages: list[PageText],
    languages: list[str] | None,
    tmp_dir: Path,
    timeout_s: float,
    on_page: OnPage,
    count: int,
    parsed: Parsed,
    workers: int,
) -> dict[int, list[DocBlock]]:
    if not numbers:
        return {}
    if ocr.executable() is None:
        parsed.warn(
            "OCR_UNAVAILABLE", "Pages without a usable text layer were skipped: OCR is not installed.", pages=numbers
        )
        for n in numbers:
            on_page(n, count, False)
        return {}
    langs = languages or _languages_for(pages)
    detect = languages is None and langs == list(ocr.DEFAULT_LANGUAGES)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    images: dict[int, Path] = {}
    for n in numbers:  # PDFium is not thread-safe: render here, OCR in parallel
        try:
            page = doc[n - 1]
            try:
                bitmap = page.render(scale=ocr.DPI / 72, grayscale=True)
            finally:
                page.close()
            image = tmp_dir / f"page-{n}.png"
            bitmap.to_pil().save(image)
            images[n] = image
        except Exception as exc:
            parsed.warn(
                "PAGE_UNREADABLE", f"Page {n} could not be rendered for OCR.", page=n, detail=type(exc).__name__
            )
            on_page(n, count, False)
    if detect and images:  # no text tells the script (a scan): ask Tesseract on the first page
        langs = ocr.detect_languages(images[min(images)], timeout_s) or langs
    out: dict[int, list[DocBlock]] = {}

    def one(n: int) -> tuple[int, list[DocBlock] | ocr.OcrFailed]:
        try:
            return n, ocr.page_blocks(images[n], langs, timeout_s, n)
        except ocr.OcrFailed as exc:
            return n, exc
        finally:
            images[n].unlink(missing_ok=True)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for n, got in pool.map(one, sorted(images)):
            if isinstance(got, ocr.OcrFailed):
                parsed.warn(got.reason, f"Page {n} could not be read by OCR.", page=n, detail=got.detail[:200])
            else:
                out[n] = got
            on_page(n, count, True)
    return out


def _languages_for(pages: list[PageText]) -> list[str]:
    """OCR languages when none were asked: English alone when the document's usable text is Latin, else Chinese
    (simplified) and English — the note's script (twice as slow, measured); a document with no usable text at all
    (a scan) is then asked of Tesseract's script detection."""
    text = "".join(line.text for p in pages for line in p.lines)
    letters = [c for c in text if c.isalpha()]
    usable = [c for c in letters if unicodedata.category(c) not in ("Co", "Cn")]
    if len(usable) >= 200 and sum(1 for c in usable if c.isascii()) >= 0.95 * len(usable):
        return ["eng"]
    return list(ocr.DEFAULT_LANGUAGES)
