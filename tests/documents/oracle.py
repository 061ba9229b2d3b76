"""The test corpus and the independent readers to hold the import against: poppler's ``pdftotext`` (PDFs, per page) and ``pandoc -t plain``
(DOCX, HTML), both Debian packages the setup installs. Shared by the tests and ``scripts/bench/bench_documents.py``."""

from __future__ import annotations

import re
import subprocess
import unicodedata
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[2] / ".cache" / "documents-corpus"
"""Filled by ``scripts/documents_corpus.py`` (scripts/setup): pypdf's and python-docx's own test files."""
PDFS = CORPUS / "pypdf"
DOCXS = CORPUS / "python-docx"


def need_corpus() -> None:
    if not (CORPUS / "corpus.sha256").is_file():
        raise AssertionError(f"the documents corpus is missing at {CORPUS}: run bash scripts/setup")


_WORD = re.compile(r"\w+")


def usable_word(w: str) -> bool:
    """A word a reader can be asked to recall: letters and digits of a real script, not the private-use, control
    or unassigned code points a font without a ToUnicode map decodes to (pdftotext prints those as they come)."""
    return all(
        (unicodedata.category(c)[0] in "LN" and unicodedata.category(c) not in ("Lo",)) or _cjk(c) for c in w
    ) and any(c.isascii() or _cjk(c) for c in w)


def _cjk(c: str) -> bool:
    return "\u4e00" <= c <= "\u9fff"


def words(text: str) -> list[str]:
    """Lower-case words; a run of CJK characters counts one word per character (CJK has no spaces)."""
    out: list[str] = []
    for w in _WORD.findall(text.lower()):
        w = w.strip("_")  # markup (pandoc writes a subscript as _(x)), not a word
        if not w:
            continue
        if any(_cjk(c) for c in w):
            out += [c for c in w if _cjk(c)]
            rest = "".join(c if not _cjk(c) else " " for c in w).split()
            out += rest
        else:
            out.append(w)
    return out


def recall(reference: Iterable[str], got: Iterable[str]) -> float:
    ref, have = Counter(reference), Counter(got)
    total = sum(ref.values())
    return sum(min(c, have[w]) for w, c in ref.items()) / total if total else 1.0


def pdftotext(path: Path, page: int | None = None) -> str:
    cmd = ["pdftotext", "-q", "-enc", "UTF-8"]
    if page is not None:
        cmd += ["-f", str(page), "-l", str(page)]
    return subprocess.run([*cmd, str(path), "-"], capture_output=True, text=True, check=False).stdout


def pandoc_plain(path: Path) -> str:
    return subprocess.run(
        ["pandoc", "-t", "plain", "--wrap=none", str(path)], capture_output=True, text=True, check=True
    ).stdout


def body_text(path: Path) -> str:
    """pdftotext's text without what a reader of the document does not read as its body: lines that repeat, digits
    aside, on at least half the pages (and on three) — running headers and footers — and lines that are only a
    number (page numbers). An independent, line-based reading of the same rule the import follows."""
    pages = pdftotext(path).split("\f")
    pages = [p for p in pages if p.strip()]
    keys = [{re.sub(r"\d+", "#", ln.strip().lower()) for ln in p.splitlines() if ln.strip()} for p in pages]
    counts = Counter(k for ks in keys for k in ks)
    need = max(3, (len(pages) + 1) // 2)
    out = []
    for p in pages:
        for ln in p.splitlines():
            key = re.sub(r"\d+", "#", ln.strip().lower())
            if (
                not key
                or re.fullmatch(r"\W*#\W*", key)
                or (len(pages) >= 3 and counts[key] >= need and len(key) <= 200)
            ):
                continue
            out.append(ln)
    return "\n".join(out)


def pdf_word_recall(path: Path, blocks_text: str) -> float:
    """Recall of pdftotext's usable body words (:func:`body_text`) in the import's text."""
    return recall([w for w in words(body_text(path)) if usable_word(w)], words(blocks_text))


def on_cited_page(path: Path, blocks: list[tuple[str, int]], threshold: float = 0.8) -> float:
    """Share of ``(text, page)`` blocks whose words are found (≥ ``threshold`` of them) on the page they cite."""
    pages: dict[int, Counter[str]] = {}
    found = 0
    counted = 0
    for text, page in blocks:
        ws = [w for w in words(text) if usable_word(w)]
        if not ws:
            continue
        counted += 1
        if page not in pages:
            pages[page] = Counter(words(pdftotext(path, page)))
        if recall(ws, pages[page].elements()) >= threshold:
            found += 1
    return found / counted if counted else 1.0
