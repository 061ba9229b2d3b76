"""The CommonMark spec as an outside oracle for the HTML exporter: Markdown → AST → HTML (the exporter's own
writer, no renderer or store), the ``<article>`` body compared with the spec's HTML after a structural
normalisation (tag tree, attributes, text with whitespace collapsed outside ``pre``).

The spec file is a pinned copy (``fixtures/commonmark-0.31.2.json``; see ``fixtures/README.md``)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import anyio

from sidecar.export.ast import parse_markdown
from sidecar.export.html import render_html
from sidecar.export.models import ExportOptions
from sidecar.export.prepare import Preparer
from sidecar.export.types import Prepared

SPEC = Path(__file__).parent / "fixtures" / "commonmark-0.31.2.json"
_BODY = re.compile(r'<article class="metona-export">\n(.*)\n</article>', re.S)
BLOCK = {
    "p", "ul", "ol", "li", "blockquote", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "table", "thead",
    "tbody", "tr", "th", "td", "div", "section", "br",
}  # fmt: skip
VOID = {"br", "hr", "img", "input", "col", "area", "base", "embed", "link", "meta", "source", "track", "wbr"}


def examples() -> list[dict]:
    return json.loads(SPEC.read_text("utf-8"))


def export_body(markdown: str) -> tuple[str, list[str]]:
    """The exported HTML body of ``markdown`` and the warnings, as ``exports/create`` would make them."""
    prepared = Prepared(parse_markdown(markdown))
    anyio.run(Preparer(None, None).prepare, prepared, "html")
    markup = render_html(prepared, ExportOptions(include_title=False))
    m = _BODY.search(markup)
    assert m is not None
    return m.group(1), prepared.warnings


class _Normaliser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[tuple] = []
        self.pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.pre and tag == "span":
            return  # the highlighter's spans inside code
        kept = []
        for k, v in attrs:
            if k == "id" and tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
                continue  # our heading anchors
            if k == "class" and tag == "pre":
                continue
            kept.append((k, v or ""))
        self.out.append(("<", tag, tuple(sorted(kept))))
        if tag == "pre":
            self.pre += 1
        if tag in VOID:
            self.out.append((">", tag))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if self.pre and tag == "span":
            return
        if tag == "pre":
            self.pre = max(0, self.pre - 1)
        self.out.append((">", tag))

    def handle_data(self, data: str) -> None:
        if self.out and self.out[-1][0] == "t":
            self.out[-1] = ("t", self.out[-1][1] + data)
        else:
            self.out.append(("t", data))

    def handle_comment(self, data: str) -> None:
        self.out.append(("c", data))

    def handle_pi(self, data: str) -> None:
        self.out.append(("?", data))

    def handle_decl(self, decl: str) -> None:
        self.out.append(("!", decl))

    def unknown_decl(self, data: str) -> None:
        self.out.append(("!", data))


def normalise(html: str) -> list[tuple]:
    """The structure of ``html``: tags with sorted attributes, comments, and text — whitespace collapsed to one space
    outside ``pre`` and dropped next to a block tag (the spec and the exporter lay lines out differently)."""
    p = _Normaliser()
    p.feed(html)
    p.close()
    tokens = p.out
    out: list[tuple] = []
    depth_pre = 0
    for i, tok in enumerate(tokens):
        if tok[0] in "<>" and tok[1] == "pre":
            depth_pre += 1 if tok[0] == "<" else -1
        if tok[0] != "t" or depth_pre > 0:
            out.append(tok)
            continue
        text = re.sub(r"[ \t\n\r\f]+", " ", tok[1])
        prev = tokens[i - 1] if i > 0 else None
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if prev is None or (prev[0] in "<>" and prev[1] in BLOCK):
            text = text.lstrip(" ")
        if nxt is None or (nxt[0] in "<>" and nxt[1] in BLOCK):
            text = text.rstrip(" ")
        if text:
            out.append(("t", text))
    return out
