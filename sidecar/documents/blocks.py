"""What every reader of a document hands back: blocks in the document's order, each with where it came from.

Stdlib only: the document worker (:mod:`.worker`) imports this before any parser. A :class:`DocBlock` is one block
of the note to be: its kind (the Knowledge Core's ``heading | paragraph | list | code | quote | table``), its text
as Markdown (a heading keeps its ``#`` level, a list its ``- `` items, code its fence, a table its pipes), the 1-based
page it was read on (PDFs) and a short locator (the heading path, e.g. ``2 Design > 2.1 Tracing``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

MAX_LABEL_CHARS = 200
_SPACES = re.compile(r"[ \t\u00a0\u3000]+")
_CJK = "\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef"
_CJK_GAP = re.compile(rf"(?<=[{_CJK}]) (?=[{_CJK}])")


@dataclass
class DocBlock:
    kind: str
    text: str
    page: int | None = None
    label: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Parsed:
    """A reader's answer: the blocks, the page count (PDFs), the pages read by OCR, warnings and a title."""

    blocks: list[DocBlock] = field(default_factory=list)
    pages: int | None = None
    ocr_pages: list[int] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    title: str | None = None

    def warn(self, code: str, message: str, **details: Any) -> None:
        self.warnings.append({"code": code, "message": message, "details": details})

    def to_wire(self) -> dict[str, Any]:
        return {
            "blocks": [b.to_wire() for b in self.blocks],
            "pages": self.pages,
            "ocr_pages": self.ocr_pages,
            "warnings": self.warnings,
            "title": self.title,
        }


def clean_inline(text: str) -> str:
    """One line of running text: control characters out, runs of spaces as one, no space between two CJK
    characters (OCR and some PDFs put one there)."""
    text = "".join(
        " " if ch in "\t\u00a0" else ch
        for ch in text
        if ch in "\t\n" or unicodedata.category(ch)[0] != "C" or ch == "\u200d"
    )
    text = _SPACES.sub(" ", text).strip()
    return _CJK_GAP.sub("", text)


def is_cjk(ch: str) -> bool:
    return "\u2e80" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff"


def join_lines(lines: Iterable[str]) -> str:
    """Lines of one paragraph as one: a hyphen that breaks a word at a line end is removed (``inter-`` +
    ``preter`` → ``interpreter``; ``Just-`` + ``in-Time`` keeps its hyphen, the next part starts upper case or
    the hyphen joins two words that both stand alone), and no space joins two CJK characters."""
    out = ""
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        if not out:
            out = line
            continue
        if out.endswith(("\u00ad", "\x02")):
            out = out[:-1] + line
        elif out.endswith("-") and len(out) >= 2 and out[-2].isalpha() and line[0].islower():
            out = out[:-1] + line
        elif is_cjk(out[-1]) or is_cjk(line[0]):
            out += line
        else:
            out += " " + line
    return out.replace("\u00ad", "").replace("\x02", "")


class HeadingPath:
    """The headings above the current block: a heading of level n replaces those of level ≥ n."""

    def __init__(self) -> None:
        self._stack: list[tuple[int, str]] = []

    def push(self, level: int, text: str) -> None:
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._stack.append((level, text.strip()[:80]))

    @property
    def label(self) -> str | None:
        if not self._stack:
            return None
        return " > ".join(t for _, t in self._stack)[:MAX_LABEL_CHARS]


def heading_text(level: int, text: str) -> str:
    return "#" * max(1, min(6, level)) + " " + text.strip()


def list_text(items: Iterable[str], ordered: bool = False, start: int = 1) -> str:
    lines = []
    for i, item in enumerate(items, start):
        marker = f"{i}." if ordered else "-"
        body = item.strip().replace("\n", " ")
        if body:
            lines.append(f"{marker} {body}")
    return "\n".join(lines)


def code_text(text: str, language: str = "") -> str:
    body = text.rstrip("\n")
    fence = "```"
    while fence in body:
        fence += "`"
    return f"{fence}{language}\n{body}\n{fence}"


def quote_text(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.strip().split("\n"))


def table_text(rows: list[list[str]]) -> str:
    """Rows (the first is the header) as a pipe table; ragged rows are padded."""
    rows = [[_cell(c) for c in row] for row in rows if any(c.strip() for c in row)]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    out = ["| " + " | ".join(rows[0]) + " |", "|" + "|".join(" --- " for _ in range(width)) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(out)


def _cell(text: str) -> str:
    return clean_inline(text.replace("\n", " ")).replace("|", "\\|")


def split_long(block: DocBlock, max_chars: int) -> Iterator[DocBlock]:
    """A block longer than ``max_chars`` as several of its kind (at line, then sentence, then hard breaks);
    a code block keeps a fence on each part."""
    if len(block.text) <= max_chars:
        yield block
        return
    if block.kind == "code":
        lines = block.text.split("\n")
        fence, body = lines[0], lines[1:-1]
        close = lines[-1]
        for part in _pack(body, max_chars - len(fence) - len(close) - 2, "\n"):
            yield DocBlock("code", f"{fence}\n{part}\n{close}", block.page, block.label)
        return
    pieces = block.text.split("\n") if "\n" in block.text else re.split(r"(?<=[.!?。！？])\s*", block.text)
    for part in _pack([p for p in pieces if p], max_chars, "\n" if "\n" in block.text else " "):
        yield DocBlock(block.kind, part, block.page, block.label)


def _pack(pieces: list[str], limit: int, sep: str) -> Iterator[str]:
    buf = ""
    for piece in pieces:
        while len(piece) > limit:
            if buf:
                yield buf
                buf = ""
            yield piece[:limit]
            piece = piece[limit:]
        if buf and len(buf) + len(sep) + len(piece) > limit:
            yield buf
            buf = ""
        buf = f"{buf}{sep}{piece}" if buf else piece
    if buf:
        yield buf
