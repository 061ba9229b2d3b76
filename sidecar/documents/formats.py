"""Which reader a file needs, from its bytes first and its name second (stdlib only).

``pdf``, ``docx``, ``html``, ``markdown``, ``text`` and ``image`` (PNG, JPEG, TIFF: read by OCR) are read; anything
else — a legacy ``.doc``, a spreadsheet, an archive, a binary — is ``None`` (``DOCUMENT_FORMAT_UNSUPPORTED``).
Text is told from binary by its first 64 KB: a byte-order mark, or no NUL byte and a clean decode as UTF-8 or
GB18030.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

FORMATS = ("pdf", "docx", "html", "markdown", "text", "image")
HEAD_BYTES = 64 * 1024
_MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdown", ".mkd", ".mkdn"}
_HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")


def sniff(path: Path, filename: str) -> str | None:
    with open(path, "rb") as f:
        head = f.read(HEAD_BYTES)
    suffix = Path(filename).suffix.lower()
    if b"%PDF-" in head[:1024]:
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return "docx" if _is_docx(path) else None
    if head.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*")):
        return "image"
    if not _looks_like_text(head):
        return None
    if suffix in _HTML_SUFFIXES or _looks_like_html(head):
        return "html"
    if suffix in _MARKDOWN_SUFFIXES:
        return "markdown"
    return "text"


def _is_docx(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return False
    return "[Content_Types].xml" in names and any(n.startswith("word/") and n.endswith(".xml") for n in names)


def _looks_like_text(head: bytes) -> bool:
    if not head:
        return True
    if head.startswith(_BOMS):
        return True
    if b"\x00" in head:
        return False
    cut = head
    for _ in range(4):  # the 64 KB cut may split a multi-byte character
        try:
            cut.decode("utf-8")
            return True
        except UnicodeDecodeError as exc:
            if exc.start < len(cut) - 4:
                break
            cut = cut[: exc.start]
    try:
        head[: len(head) - 4].decode("gb18030")
        return True
    except UnicodeDecodeError:
        return False


def _looks_like_html(head: bytes) -> bool:
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:512].lower()
    return start.startswith((b"<!doctype html", b"<html")) or (start.startswith(b"<?xml") and b"<html" in start)
