"""Markdown → Document AST (phase-2 §10.3): CommonMark + GFM (tables with alignment, task lists, strikethrough,
autolinks incl. bare ``www.``/URL autolinks), footnotes, ``$…$`` / ``$$…$$`` maths, fenced ``mermaid`` and
``function_plot`` blocks, images.

Parsed with markdown-it-py (+ mdit-py-plugins: footnotes, dollar maths; linkify-it-py for bare links). Every node
has the stable discriminator fields of the seed: ``node_id``, ``type``, ``attributes``, ``children``, ``text``.
``node_id`` is ``node_NNNN`` in document order, so the same source always gives the same ids.

The seed's first-batch types are all produced; the extra types a Markdown document needs beside them are
``strikethrough``, ``code_inline``, ``line_break``, ``thematic_break``, ``table_row``, ``table_cell``,
``footnote_ref``, ``footnote`` (a definition; the document keeps them in its ``footnotes`` attribute order) and
``html`` (raw HTML: never rendered by an exporter; each one is a warning). A task-list item is a ``list_item``
with ``attributes.checked`` true/false.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

NODE_TYPES = (
    "document",
    "heading",
    "paragraph",
    "text",
    "emphasis",
    "strong",
    "link",
    "list",
    "list_item",
    "table",
    "image",
    "blockquote",
    "code_block",
    "math_inline",
    "math_block",
    "mermaid",
    "function_plot",
)
EXTRA_NODE_TYPES = (
    "strikethrough",
    "code_inline",
    "line_break",
    "thematic_break",
    "table_row",
    "table_cell",
    "footnote_ref",
    "footnote",
    "html",
)
BLOCK_DIAGRAMS = {"mermaid": "mermaid", "function_plot": "function_plot", "function-plot": "function_plot"}
MAX_DEPTH = 64
_TASK = re.compile(r"^\[([ xX])\][ \t]+")
_ALIGN = re.compile(r"text-align:\s*(left|right|center)")


@dataclass(slots=True)
class Node:
    node_id: str
    type: str
    attributes: dict[str, Any] = field(default_factory=dict)
    children: list[Node] = field(default_factory=list)
    text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "type": self.type,
            "attributes": dict(self.attributes),
            "children": [c.to_dict() for c in self.children],
            "text": self.text,
        }

    def walk(self) -> Any:
        yield self
        for child in self.children:
            yield from child.walk()

    def plain_text(self) -> str:
        if self.type in ("text", "code_inline", "math_inline"):
            return self.text or ""
        if self.type == "line_break":
            return " "
        return "".join(c.plain_text() for c in self.children)


@dataclass(slots=True)
class Document:
    root: Node
    title: str
    footnotes: list[Node]

    def to_dict(self) -> dict[str, Any]:
        return self.root.to_dict()

    def walk(self) -> Any:
        yield from self.root.walk()

    @property
    def headings(self) -> list[Node]:
        return [n for n in self.root.walk() if n.type == "heading"]


def _parser() -> Any:
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.footnote import footnote_plugin

    md = MarkdownIt("commonmark", {"linkify": True, "html": True})
    md.enable(["table", "strikethrough", "linkify"])
    md.use(footnote_plugin)
    md.use(dollarmath_plugin, allow_labels=False, allow_space=True, allow_digits=False, double_inline=True)
    return md


_MD: Any = None
# characters XML 1.0 (DOCX, and HTML's parser) cannot carry: C0 controls but tab/LF/CR, lone surrogates, U+FFFE/F.
# Pasted text has them (a PDF's form feed, a terminal's ESC colour codes); python-docx refuses the whole document.
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: str) -> str:
    """``text`` with what XML cannot hold replaced: vertical tab / form feed by a space, the rest by U+FFFD (as
    CommonMark does for NUL), so nothing vanishes silently."""
    if not _XML_INVALID.search(text):
        return text
    return _XML_INVALID.sub(lambda m: " " if m.group() in "\x0b\x0c" else "\ufffd", text)


def parse_markdown(source: str, title: str | None = None) -> Document:
    """Parse ``source`` into a Document; ``title`` defaults to the first heading's text."""
    global _MD
    if _MD is None:
        _MD = _parser()
    source, title = xml_safe(source), xml_safe(title) if title else title
    tokens = _MD.parse(source)
    builder = _Builder()
    root = builder.build(tokens)
    first = next((n for n in root.walk() if n.type == "heading"), None)
    doc_title = (title or "").strip() or (first.plain_text().strip() if first else "") or "Untitled"
    root.attributes["title"] = doc_title
    return Document(root=root, title=doc_title, footnotes=builder.footnotes)


def slugify(text: str) -> str:
    slug = re.sub(r"[^\w\- ]+", "", text.strip().lower(), flags=re.UNICODE)
    return re.sub(r"[\s]+", "-", slug).strip("-") or "section"


class _Builder:
    def __init__(self) -> None:
        self.count = 0
        self.footnotes: list[Node] = []
        self.footnote_index: dict[str, int] = {}
        self.slugs: dict[str, int] = {}

    def node(self, type_: str, text: str | None = None, **attributes: Any) -> Node:
        self.count += 1
        return Node(f"node_{self.count:04d}", type_, attributes, [], text)

    def build(self, tokens: list[Any]) -> Node:
        root = self.node("document")
        stack: list[Node] = [root]
        for tok in tokens:
            t = tok.type
            top = stack[-1]
            if t.endswith("_close"):
                if t in ("thead_close", "tbody_close", "footnote_block_close"):
                    continue
                if len(stack) > 1:
                    stack.pop()
                continue
            if t == "inline":
                self.inline(tok.children or [], top)
                continue
            if t in ("thead_open", "tbody_open", "footnote_block_open", "footnote_anchor"):
                continue
            node = self.block(tok, top)
            if node is None:
                continue
            if t == "paragraph_open" and tok.hidden and len(stack) >= 2 and stack[-2].type == "list":
                stack[-2].attributes["tight"] = True
            if t == "footnote_open":
                self.footnotes.append(node)
            else:
                top.children.append(node)
            if t.endswith("_open"):
                if len(stack) >= MAX_DEPTH:
                    node.type = "html"  # too deep to keep as structure: an exporter warns about it
                    node.attributes["unsupported"] = "nesting deeper than 64"
                stack.append(node)
        for item in root.walk():
            if item.type == "list_item":
                self.task(item)
            elif item.type == "table" and item.children:
                item.attributes["align"] = [c.attributes.get("align") for c in item.children[0].children]
        root.attributes["footnotes"] = [n.node_id for n in self.footnotes]
        return root

    def block(self, tok: Any, parent: Node) -> Node | None:
        t = tok.type
        if t == "heading_open":
            return self.node("heading", level=int(tok.tag[1]))
        if t == "paragraph_open":
            return self.node("paragraph")
        if t in ("bullet_list_open", "ordered_list_open"):
            ordered = t == "ordered_list_open"
            start = int(tok.attrs.get("start", 1)) if ordered else None
            return self.node("list", ordered=ordered, start=start, tight=False)
        if t == "list_item_open":
            return self.node("list_item", checked=None)
        if t == "blockquote_open":
            return self.node("blockquote")
        if t == "table_open":
            return self.node("table", align=[])
        if t == "tr_open":
            return self.node("table_row", header=False)
        if t in ("th_open", "td_open"):
            m = _ALIGN.search(str(tok.attrs.get("style", "")))
            align = m.group(1) if m else None
            if t == "th_open":
                parent.attributes["header"] = True
            return self.node("table_cell", header=t == "th_open", align=align)
        if t == "footnote_open":
            label = str(tok.meta.get("label", ""))
            index = self.footnote_index.setdefault(label, len(self.footnote_index) + 1)
            return self.node("footnote", label=label, index=index)
        if t in ("fence", "code_block"):
            from markdown_it.common.utils import unescapeAll

            info = unescapeAll(tok.info or "").strip()
            lang = info.split()[0].lower() if info else ""
            if lang in BLOCK_DIAGRAMS:
                return self.node(BLOCK_DIAGRAMS[lang], tok.content)
            if lang in ("math", "latex", "tex") and t == "fence":
                return self.node("math_block", tok.content.strip())
            return self.node("code_block", tok.content, language=lang or None)
        if t == "math_block":
            return self.node("math_block", tok.content.strip())
        if t == "hr":
            return self.node("thematic_break")
        if t == "html_block":
            return self.node("html", tok.content, block=True)
        return self.node("html", tok.content, unsupported=t)  # a token type this builder does not know: warned

    def inline(self, children: list[Any], parent: Node) -> None:
        if parent.type == "heading":
            parent.text = "".join(c.content for c in children if c.type in ("text", "code_inline"))
            slug = slugify(parent.text or "")
            n = self.slugs.get(slug, 0)
            self.slugs[slug] = n + 1
            parent.attributes["anchor"] = slug if n == 0 else f"{slug}-{n}"
        stack: list[Node] = [parent]
        for tok in children:
            t = tok.type
            top = stack[-1]
            if t.endswith("_close"):
                if len(stack) > 1:
                    stack.pop()
                continue
            if t == "text":
                if top.children and top.children[-1].type == "text":
                    top.children[-1].text = (top.children[-1].text or "") + tok.content
                else:
                    top.children.append(self.node("text", tok.content))
            elif t in ("softbreak", "hardbreak"):
                top.children.append(self.node("line_break", hard=t == "hardbreak"))
            elif t == "code_inline":
                top.children.append(self.node("code_inline", tok.content))
            elif t == "math_inline" or t == "math_inline_double":
                top.children.append(self.node("math_inline", tok.content.strip()))
            elif t == "math_block":
                top.children.append(self.node("math_inline", tok.content.strip(), display=True))
            elif t == "image":
                alt = "".join(c.content for c in (tok.children or []))
                top.children.append(
                    self.node("image", None, src=str(tok.attrs.get("src", "")), alt=alt, title=tok.attrs.get("title"))
                )
            elif t == "footnote_ref":
                label = str(tok.meta.get("label", ""))
                index = self.footnote_index.setdefault(label, len(self.footnote_index) + 1)
                top.children.append(self.node("footnote_ref", None, label=label, index=index))
            elif t == "html_inline":
                top.children.append(self.node("html", tok.content, block=False))
            elif t.endswith("_open"):
                kind = {"em_open": "emphasis", "strong_open": "strong", "s_open": "strikethrough"}.get(t)
                if t == "link_open":
                    node = self.node(
                        "link", href=str(tok.attrs.get("href", "")), title=tok.attrs.get("title"), auto=bool(tok.markup)
                    )
                else:
                    node = self.node(kind, None) if kind else self.node("html", tok.markup, unsupported=t)
                top.children.append(node)
                if len(stack) < MAX_DEPTH:
                    stack.append(node)
            else:
                top.children.append(self.node("html", tok.content, unsupported=t))

    @staticmethod
    def task(item: Node) -> None:
        first = item.children[0] if item.children else None
        if first is None or first.type != "paragraph" or not first.children:
            return
        lead = first.children[0]
        if lead.type != "text" or not lead.text:
            return
        m = _TASK.match(lead.text)
        if m:
            item.attributes["checked"] = m.group(1) != " "
            lead.text = lead.text[m.end() :]
            if not lead.text:
                first.children.pop(0)
