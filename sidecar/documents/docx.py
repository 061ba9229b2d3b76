"""DOCX → blocks with python-docx (MIT) over the package's own XML, in the body's order.

Refused before anything is expanded: a package whose entries would expand past ``max_expanded_bytes`` in all, or
an entry that claims a compression ratio above :data:`MAX_RATIO` (a zip bomb); ``zipfile`` itself stops at an
entry's declared size and checks its CRC, so a lying header cannot expand further.

Kinds: a paragraph styled ``Heading N`` / ``Title`` or with an outline level is a heading; one with numbering
(``w:numPr``, its own or its style's) or a ``List…`` style is a list item (consecutive items make one list
block); ``Quote``/``Block Text`` styles are quotes; ``Source Code``/``HTML Preformatted``-like styles, or runs all
in a monospaced font, are code; a table is a table (its header row first). Text is what Word shows with changes
accepted: inserted runs kept, deleted and moved-from runs dropped, field codes dropped, their results kept.
Footnotes and endnotes follow the body under a "Notes" heading, as pandoc's plain writer puts them.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

from .blocks import (
    DocBlock,
    HeadingPath,
    Parsed,
    clean_inline,
    code_text,
    heading_text,
    list_text,
    quote_text,
    table_text,
)
from .errors import DocumentTooLarge, DocumentUnreadable

MAX_RATIO = 200
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_HEADING_STYLE = re.compile(r"^(heading|überschrift|titre|标题)\s*(\d)$", re.I)
_LIST_STYLE = re.compile(r"list|bullet|number", re.I)
_QUOTE_STYLE = re.compile(r"quote|block\s*text|引用", re.I)
_CODE_STYLE = re.compile(r"code|preformatted|verbatim|source|plain\s*text", re.I)
_MONO = re.compile(r"mono|courier|consol|menlo|inconsolata", re.I)
_SKIP = {_W + "del", _W + "moveFrom", _W + "instrText", _W + "delText", _W + "commentReference"}
_NOTE_REFS = {_W + "footnoteReference": "", _W + "endnoteReference": "e"}


def check_zip(path: Path, max_expanded_bytes: int) -> None:
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise DocumentUnreadable(
            "The DOCX is damaged: its zip container cannot be read.",
            details={"reason": "ZIP_UNREADABLE", "detail": str(exc)[:200]},
        ) from None
    total = sum(i.file_size for i in infos)
    if total > max_expanded_bytes:
        raise DocumentTooLarge(
            "The DOCX would expand past the import limit.",
            details={"reason": "EXPANDED_SIZE", "expanded_bytes": total, "limit": max_expanded_bytes},
        )
    for info in infos:
        if info.file_size > 1_000_000 and info.file_size > MAX_RATIO * max(1, info.compress_size):
            raise DocumentTooLarge(
                "The DOCX holds an entry that expands too far (a zip bomb).",
                details={
                    "reason": "COMPRESSION_RATIO",
                    "entry": info.filename[:200],
                    "ratio": round(info.file_size / max(1, info.compress_size)),
                },
            )


def read_docx(path: Path, *, max_expanded_bytes: int) -> Parsed:
    check_zip(path, max_expanded_bytes)
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = docx.Document(str(path))
    except (PackageNotFoundError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise DocumentUnreadable(
            "The DOCX could not be read: its main document part is missing or damaged.",
            details={"reason": "DOCX_UNREADABLE", "detail": f"{type(exc).__name__}: {str(exc)[:200]}"},
        ) from None
    except Exception as exc:
        raise DocumentUnreadable(
            "The DOCX could not be read: a part of it is not well-formed.",
            details={"reason": "DOCX_UNREADABLE", "detail": type(exc).__name__},
        ) from None
    reader = _Reader(document)
    reader.body(document.element.body)
    reader.notes()
    parsed = reader.parsed
    title = (document.core_properties.title or "").strip()
    parsed.title = title or next((b.text.lstrip("# ") for b in parsed.blocks if b.kind == "heading"), None)
    return parsed


class _Reader:
    def __init__(self, document: Any) -> None:
        self.document = document
        self.parsed = Parsed()
        self.path = HeadingPath()
        self.items: list[str] = []
        self.ordered = False
        self.start = 1
        self.list_id: str | None = None
        self.counters: dict[str, int] = {}
        """Items seen so far per Word list (numId): a list that Word continues numbers on."""
        self.code: list[str] = []
        self._styles: dict[str, Any] = {}
        try:
            for style in document.styles:
                self._styles[style.style_id] = style
        except Exception:
            pass

    def add(self, kind: str, text: str) -> None:
        if text.strip():
            self.parsed.blocks.append(DocBlock(kind, text, label=self.path.label))

    def flush(self) -> None:
        if self.items:
            self.add("list", list_text(self.items, self.ordered, self.start))
            if self.list_id is not None:
                self.counters[self.list_id] = self.counters.get(self.list_id, 0) + len(self.items)
            self.items = []
        if self.code:
            self.add("code", code_text("\n".join(self.code)))
            self.code = []

    def body(self, body: Any) -> None:
        for child in body.iterchildren():
            if child.tag == _W + "p":
                self.paragraph(child)
            elif child.tag == _W + "tbl":
                self.flush()
                self.add("table", table_text(self.table_rows(child)))
            elif child.tag == _W + "sdt":  # a content control: its content is body content
                content = child.find(_W + "sdtContent")
                if content is not None:
                    self.body(content)
        self.flush()

    def table_rows(self, tbl: Any) -> list[list[str]]:
        rows = []
        for tr in tbl.iter(_W + "tr"):
            if tr.getparent() is not tbl and tr.getparent().tag != _W + "sdtContent":
                continue  # a nested table's rows: read as its cell's text
            cells = []
            for tc in tr.iterchildren(_W + "tc"):
                cells.append(" ".join(t for t in (paragraph_text(p) for p in tc.iter(_W + "p")) if t))
            rows.append(cells)
        return rows

    def style_chain(self, p: Any) -> list[Any]:
        ppr = p.find(_W + "pPr")
        sid = None
        if ppr is not None:
            ps = ppr.find(_W + "pStyle")
            if ps is not None:
                sid = ps.get(_W + "val")
        chain: list[Any] = []
        style = self._styles.get(sid) if sid else None
        while style is not None and len(chain) < 10:
            chain.append(style)
            try:
                style = style.base_style
            except Exception:
                break
        return chain

    def paragraph(self, p: Any) -> None:
        text = paragraph_text(p)
        chain = self.style_chain(p)
        names = [(s.name or "") for s in chain]
        ppr = p.find(_W + "pPr")
        level = _heading_level(names, ppr, chain)
        numbered = (ppr is not None and ppr.find(_W + "numPr") is not None) or any(
            s.element.find(f"{_W}pPr/{_W}numPr") is not None for s in chain
        )
        is_code = any(_CODE_STYLE.search(n) for n in names) or _all_mono(p)
        if is_code and level is None:
            if self.items:
                self.flush()
            self.code.append(text_with_breaks(p))
            return
        if self.code:
            self.flush()
        if not text:
            return
        if level is not None:
            self.flush()
            self.path.push(level, text)
            self.add("heading", heading_text(level, text))
        elif numbered or any(_LIST_STYLE.search(n) for n in names):
            num = ppr.find(f"{_W}numPr/{_W}numId") if ppr is not None else None
            list_id = num.get(_W + "val") if num is not None else None
            if self.items and list_id != self.list_id:
                self.flush()
            if not self.items:
                self.ordered = bool(_numbered_decimal(self.document, ppr)) or any("number" in n.lower() for n in names)
                self.list_id = list_id
                self.start = self.counters.get(list_id, 0) + 1 if list_id is not None else 1
            self.items.append(text)
        elif any(_QUOTE_STYLE.search(n) for n in names):
            self.flush()
            self.add("quote", quote_text(text))
        else:
            self.flush()
            self.add("paragraph", text)

    def notes(self) -> None:
        part = self.document.part
        found: list[str] = []
        for rel in part.rels.values():
            if rel.reltype.endswith(("/footnotes", "/endnotes")):
                try:
                    from lxml import etree

                    root = etree.fromstring(rel.target_part.blob)
                except Exception:
                    self.parsed.warn("NOTES_UNREADABLE", "The document's notes could not be read.")
                    continue
                prefix = "e" if rel.reltype.endswith("/endnotes") else ""
                for note in root:
                    if note.get(_W + "type") in ("separator", "continuationSeparator", "continuationNotice"):
                        continue
                    text = " ".join(t for t in (paragraph_text(p) for p in note.iter(_W + "p")) if t)
                    if text:
                        found.append(f"[^{prefix}{note.get(_W + 'id', '')}]: {text}")
        if found:
            self.flush()
            self.path = HeadingPath()
            self.path.push(1, "Notes")
            self.add("heading", heading_text(2, "Notes"))
            for note_text in found:
                self.add("paragraph", note_text)


def _heading_level(names: list[str], ppr: Any, chain: list[Any]) -> int | None:
    for name in names:
        if name.lower() in ("title",):
            return 1
        m = _HEADING_STYLE.match(name.strip())
        if m:
            return max(1, min(6, int(m.group(2))))
    for el in [ppr, *(s.element.find(_W + "pPr") for s in chain)]:
        if el is not None:
            lvl = el.find(_W + "outlineLvl")
            if lvl is not None:
                try:
                    value = int(lvl.get(_W + "val", "9"))
                except ValueError:
                    continue
                if value < 9:
                    return min(6, value + 1)
    return None


def _numbered_decimal(document: Any, ppr: Any) -> bool:
    if ppr is None:
        return False
    num = ppr.find(f"{_W}numPr/{_W}numId")
    lvl = ppr.find(f"{_W}numPr/{_W}ilvl")
    if num is None:
        return False
    try:
        numbering = document.part.numbering_part.element
    except Exception:
        return False
    num_id = num.get(_W + "val")
    ilvl = lvl.get(_W + "val") if lvl is not None else "0"
    for n in numbering.iter(_W + "num"):
        if n.get(_W + "numId") == num_id:
            abstract = n.find(_W + "abstractNumId")
            aid = abstract.get(_W + "val") if abstract is not None else None
            for a in numbering.iter(_W + "abstractNum"):
                if a.get(_W + "abstractNumId") == aid:
                    for level in a.iter(_W + "lvl"):
                        if level.get(_W + "ilvl") == ilvl:
                            fmt = level.find(_W + "numFmt")
                            return fmt is not None and fmt.get(_W + "val") not in ("bullet", "none")
    return False


def _all_mono(p: Any) -> bool:
    runs = [r for r in p.iter(_W + "r") if (r.findtext(_W + "t") or "").strip()]
    if not runs:
        return False
    for r in runs:
        fonts = r.find(f"{_W}rPr/{_W}rFonts")
        name = (fonts.get(_W + "ascii") or fonts.get(_W + "hAnsi") or "") if fonts is not None else ""
        if not _MONO.search(name):
            return False
    return True


def _walk_text(el: Any, out: list[str], breaks: bool) -> None:
    for child in el.iterchildren():
        tag = child.tag
        if not isinstance(tag, str) or tag in _SKIP:
            continue
        if tag == _W + "t":
            out.append(child.text or "")
        elif tag == _W + "tab":
            out.append("\t")
        elif tag in (_W + "br", _W + "cr"):
            out.append("\n" if breaks else " ")
        elif tag in _NOTE_REFS:  # a Markdown footnote reference; the notes follow the body as [^n]: text
            out.append(f"[^{_NOTE_REFS[tag]}{child.get(_W + 'id', '')}]")
        elif tag == _W + "noBreakHyphen":
            out.append("-")
        elif tag == _W + "p" and out:  # a text box's paragraphs inside a run
            out.append(" ")
            _walk_text(child, out, breaks)
        else:
            _walk_text(child, out, breaks)


def paragraph_text(p: Any) -> str:
    out: list[str] = []
    _walk_text(p, out, breaks=False)
    return clean_inline("".join(out))


def text_with_breaks(p: Any) -> str:
    out: list[str] = []
    _walk_text(p, out, breaks=True)
    return "".join(out).rstrip()
