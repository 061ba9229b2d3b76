"""Plain text, Markdown and HTML as blocks (stdlib + lxml).

Text is decoded by its byte-order mark (UTF-8, UTF-16), else as UTF-8, else GB18030, else by charset-normalizer's
best guess (a warning says so). Plain text: blank lines separate paragraphs, hard-wrapped lines join. Markdown: the
Knowledge Core's own splitter (headings, fenced code, lists, quotes, tables). HTML: scripts, styles, templates,
forms' controls and the head are dropped; headings, paragraphs, lists, tables, ``pre`` code and quotes keep their
kinds, in the page's order. Each block's label is its heading path.
"""

from __future__ import annotations

import codecs
import re
from typing import Any

from .blocks import (
    DocBlock,
    HeadingPath,
    Parsed,
    clean_inline,
    code_text,
    heading_text,
    join_lines,
    list_text,
    quote_text,
    table_text,
)

_MD_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def decode(data: bytes, parsed: Parsed) -> str:
    for bom, codec in (
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if data.startswith(bom):
            return data[len(bom) :].decode(codec, errors="replace")
    for codec in ("utf-8", "gb18030"):
        try:
            return data.decode(codec)
        except UnicodeDecodeError:
            continue
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None:
        parsed.warn("TEXT_ENCODING_GUESSED", "The text's encoding is unknown; undecodable bytes were replaced.")
        return data.decode("utf-8", errors="replace")
    parsed.warn("TEXT_ENCODING_GUESSED", f"The text's encoding was guessed as {best.encoding}.", encoding=best.encoding)
    return str(best)


def read_text(data: bytes) -> Parsed:
    parsed = Parsed()
    text = decode(data, parsed).replace("\r\n", "\n").replace("\r", "\n")
    for para in re.split(r"\n[ \t\u3000]*\n", text):
        lines = [ln for ln in para.split("\n") if ln.strip()]
        if lines:
            parsed.blocks.append(DocBlock("paragraph", clean_inline(join_lines(lines))))
    return parsed


def read_markdown(data: bytes) -> Parsed:
    from sidecar.knowledge.blocks import split_markdown

    parsed = Parsed()
    path = HeadingPath()
    for draft in split_markdown(decode(data, parsed)):
        if draft.kind == "heading":
            m = _MD_HEADING.match(draft.text)
            if m:
                path.push(len(m.group(1)), m.group(2))
                if parsed.title is None and len(m.group(1)) == 1:
                    parsed.title = m.group(2)
        parsed.blocks.append(DocBlock(draft.kind, draft.text, label=path.label))
    return parsed


# ---- HTML ----------------------------------------------------------------------------------------------------------

_DROP = {
    "script",
    "style",
    "noscript",
    "template",
    "head",
    "iframe",
    "object",
    "embed",
    "svg",
    "math",
    "canvas",
    "select",
    "button",
    "input",
    "textarea",
    "nav",
}
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BLOCKISH = {
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "aside",
    "figure",
    "figcaption",
    "address",
    "li",
    "dd",
    "dt",
    "dl",
    "center",
    "form",
    "fieldset",
    "details",
    "summary",
    "body",
    "html",
    "span",
}


def read_html(data: bytes) -> Parsed:
    import lxml.html

    parsed = Parsed()
    if not data.strip():
        return parsed
    text = decode(data, parsed)
    text = re.sub(r"^\s*<\?xml[^>]*\?>", "", text)  # lxml refuses an encoding declaration in a str
    root = lxml.html.document_fromstring(text)
    title = root.find(".//title")
    if title is not None and (title.text or "").strip():
        parsed.title = clean_inline(title.text or "")
    _HtmlWalker(parsed).walk(root.find("body") if root.find("body") is not None else root)
    return parsed


class _HtmlWalker:
    def __init__(self, parsed: Parsed) -> None:
        self.parsed = parsed
        self.path = HeadingPath()
        self.inline: list[str] = []

    def add(self, kind: str, text: str) -> None:
        if text.strip():
            self.parsed.blocks.append(DocBlock(kind, text, label=self.path.label))

    def flush(self) -> None:
        text = clean_inline(" ".join(self.inline).replace("\n", " "))
        self.inline = []
        self.add("paragraph", text)

    def walk(self, el: Any) -> None:
        self._children(el)
        self.flush()

    def _children(self, el: Any) -> None:
        if el.text:
            self.inline.append(el.text)
        for child in el:
            self._element(child)
            if child.tail:
                self.inline.append(child.tail)

    def _element(self, el: Any) -> None:
        tag = el.tag.lower() if isinstance(el.tag, str) else ""
        if not tag or tag in _DROP:
            return
        if tag in _HEADINGS:
            self.flush()
            text = clean_inline(el.text_content())
            if text:
                self.path.push(_HEADINGS[tag], text)
                self.add("heading", heading_text(_HEADINGS[tag], text))
        elif tag in ("ul", "ol"):
            self.flush()
            items = [_text(li) for li in el if isinstance(li.tag, str) and li.tag.lower() == "li"]
            self.add("list", list_text(items, ordered=tag == "ol"))
        elif tag == "pre":
            self.flush()
            self.add("code", code_text(el.text_content()))
        elif tag == "blockquote":
            self.flush()
            self.add("quote", quote_text(join_lines(_text(el).split("\n"))))
        elif tag == "table":
            self.flush()
            rows = [
                [_text(c) for c in tr if isinstance(c.tag, str) and c.tag.lower() in ("td", "th")]
                for tr in el.iter("tr")
            ]
            caption = el.find("caption")
            if caption is not None:
                self.add("paragraph", clean_inline(caption.text_content()))
            self.add("table", table_text(rows))
        elif tag == "br":
            self.inline.append("\n")
        elif tag in _BLOCKISH:
            if tag != "span":
                self.flush()
            self._children(el)
            if tag != "span":
                self.flush()
        elif tag == "hr":
            self.flush()
        else:
            self._children(el)


def _text(el: Any) -> str:
    """An element's text without what :data:`_DROP` drops."""
    parts: list[str] = []

    def go(node: Any) -> None:
        tag = node.tag.lower() if isinstance(node.tag, str) else ""
        if tag in _DROP:
            return
        if node.text:
            parts.append(node.text)
        for child in node:
            go(child)
            if child.tail:
                parts.append(child.tail)

    go(el)
    return clean_inline(" ".join(parts))
