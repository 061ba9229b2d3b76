"""Raw HTML in a note (``<br>``, ``<sup>``, ``<kbd>``, ``<details>``, a hand-written table…) through an allow-list
sanitiser: ``nh3`` (the Rust ``ammonia`` library), never a home-made one.

The HTML exporter writes raw HTML where Markdown puts it and then cleans the whole body once, as a browser would
parse it (a ``<div>`` opened in one block and closed in another stays one element, as CommonMark means it). What
the exporter writes itself and must not be touched (diagram SVG, MathML, ``data:`` images, task check boxes) is
set aside as an opaque marker first and put back afterwards. Each raw node is also cleaned on its own, only to name
what the sanitiser removes from it in a warning.
"""

from __future__ import annotations

import re
import secrets
from html.parser import HTMLParser
from typing import Any

# What a note may carry as raw HTML, and everything the exporter's own markup uses.
TAGS = {
    "a", "abbr", "b", "bdi", "bdo", "blockquote", "br", "caption", "cite", "code", "col", "colgroup", "dd", "del",
    "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
    "i", "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "rp", "rt", "ruby", "s", "samp", "section", "small",
    "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "time", "tr", "u",
    "ul", "var", "wbr",
}  # fmt: skip
ATTRIBUTES = {
    "*": {"class", "id", "title", "lang", "dir"},
    "a": {"href"},
    "ol": {"start", "reversed", "type"},
    "li": {"value"},
    "td": {"colspan", "rowspan", "style"},
    "th": {"colspan", "rowspan", "style", "scope"},
    "col": {"span"},
    "colgroup": {"span"},
    "details": {"open"},
    "time": {"datetime"},
}
URL_SCHEMES = {"http", "https", "mailto"}
STYLE_PROPERTIES = {"text-align"}
DROP_WITH_CONTENT = {"script", "style"}
# Elements whose content a parser reads as plain text up to their end tag: one left open in a node would swallow
# the rest of the document, so such a node is dropped whole.
_RAWTEXT_OPEN = re.compile(r"<(script|style|textarea|title|xmp|iframe|noembed|noframes|noscript|plaintext)\b", re.I)

_CLEANER: Any = None


def _cleaner() -> Any:
    global _CLEANER
    if _CLEANER is None:
        import nh3

        _CLEANER = nh3.Cleaner(
            tags=TAGS,
            clean_content_tags=DROP_WITH_CONTENT,
            attributes=ATTRIBUTES,
            strip_comments=False,
            link_rel=None,
            url_schemes=URL_SCHEMES,
            filter_style_properties=STYLE_PROPERTIES,
        )
    return _CLEANER


def clean(html: str) -> str:
    """``html`` (a body fragment) with everything outside the allow-list removed."""
    return _cleaner().clean(html)


def unclosed_rawtext(fragment: str) -> str | None:
    """The name of a ``<script>``/``<style>``/``<textarea>``… element ``fragment`` opens and does not close."""
    for m in _RAWTEXT_OPEN.finditer(fragment):
        name = m.group(1).lower()
        if not re.search(rf"</{name}\s*>", fragment[m.end() :], re.I):
            return name
    return None


class _Inventory(HTMLParser):
    """The tags and ``tag@attribute`` pairs a fragment holds (to name what cleaning removed, not to clean)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.items: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.items.append(f"<{tag}>")
        self.items.extend(f"{tag}@{k}" for k, _ in attrs)

    def handle_comment(self, data: str) -> None:
        self.items.append("<!--…-->")

    def handle_decl(self, decl: str) -> None:
        self.items.append(f"<!{decl.split()[0] if decl.split() else decl}>")

    def handle_pi(self, data: str) -> None:
        self.items.append("<?…?>")

    def unknown_decl(self, data: str) -> None:
        self.items.append("<![…]>")


def _inventory(html: str) -> list[str]:
    p = _Inventory()
    p.feed(html)
    p.close()
    return p.items


def removed_by_cleaning(fragment: str) -> list[str]:
    """What the sanitiser removes from one raw node (tags as ``<x>``, attributes as ``x@name``), in order."""
    kept = set(_inventory(clean(fragment)))
    out: list[str] = []
    for item in _inventory(fragment):
        if item not in kept and item not in out:
            out.append(item)
    return out


class Vault:
    """Markup the exporter wrote itself, set aside from the sanitiser behind markers no note can forge."""

    def __init__(self) -> None:
        self.nonce = secrets.token_hex(8)
        self.items: list[str] = []

    def keep(self, markup: str) -> str:
        self.items.append(markup)
        return f"\ue000{self.nonce}:{len(self.items) - 1}\ue001"

    def restore(self, html: str) -> str:
        if not self.items:
            return html
        return re.sub(f"\ue000{self.nonce}:(\\d+)\ue001", lambda m: self.items[int(m.group(1))], html)
