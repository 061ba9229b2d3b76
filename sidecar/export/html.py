"""The HTML exporter: one standalone HTML5 file — theme CSS inlined, maths as MathML, diagrams inline as sanitised
SVG, code highlighted by Pygments, images as ``data:`` URLs, no script (and a CSP that forbids any), nothing
loaded from outside. The PDF exporter prints the same markup (``print=True``: page rules, no max width)."""

from __future__ import annotations

import base64
import re
from html import escape

from . import highlight
from .ast import Node
from .models import ExportOptions
from .rawhtml import Vault, clean, removed_by_cleaning, unclosed_rawtext
from .types import Prepared

CODE_THEMES = {"github-light": "default", "github": "default", "light": "default", "dark": "github-dark"}
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:"
BASE_CSS = """
body { margin: 0; }
article.metona-export { max-width: 52em; margin: 0 auto; padding: 2em 1.5em; }
article.metona-export img, article.metona-export svg { max-width: 100%; height: auto; }
.metona-export h1, .metona-export h2, .metona-export h3 { line-height: 1.25; }
.metona-export pre { padding: 0.8em 1em; overflow-x: auto; border-radius: 4px; line-height: 1.45; }
.metona-export pre code { background: none; }
.metona-export code { font-size: 0.92em; padding: 0.1em 0.25em; border-radius: 3px; }
.metona-export figure.diagram { margin: 1em 0; text-align: center; }
.metona-export figure.diagram svg { display: inline-block; }
.metona-export math[display="block"] { margin: 0.8em 0; }
.metona-export li.task { list-style: none; }
.metona-export li.task input { margin: 0 0.4em 0 -1.3em; }
.metona-export table { margin: 1em 0; }
.metona-export section.footnotes { font-size: 0.9em; border-top: 1px solid var(--border, #ccc); margin-top: 2em; }
.metona-export .metadata { color: var(--muted, #666); font-size: 0.9em; }
"""
PRINT_CSS = """
article.metona-export { max-width: none; padding: 0; }
.metona-export pre { white-space: pre-wrap; word-break: break-all; }
.metona-export h1, .metona-export h2, .metona-export h3, .metona-export h4 { break-after: avoid; }
.metona-export figure.diagram, .metona-export tr, .metona-export img { break-inside: avoid; }
"""


def code_style(name: str) -> str | None:
    """The Pygments style for a ``code_theme`` option, or None if unknown."""
    style = CODE_THEMES.get(name, name)
    return style if style in highlight.style_names() else None


def _lang(text: str) -> str:
    return "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in text[:20000]) else "en"


class HtmlWriter:
    """Document AST → HTML markup (blocking; runs in a worker thread)."""

    def __init__(self, prepared: Prepared, options: ExportOptions, *, print_mode: bool = False) -> None:
        self.p = prepared
        self.options = options
        self.print_mode = print_mode
        self.count = 0
        self.formatter = highlight.html_formatter(style=code_style(options.code_theme) or "default", nowrap=True)
        doc = prepared.document
        raw = any(n.type == "html" for n in doc.walk()) or any(
            n.type == "html" for f in doc.footnotes for n in f.walk()
        )
        self.vault: Vault | None = Vault() if raw else None  # only a document with raw HTML is cleaned

    def trusted(self, markup: str) -> str:
        """Markup this writer made from prepared assets (SVG, MathML, ``data:`` images): kept out of the
        sanitiser's hands, which knows no SVG or MathML."""
        return self.vault.keep(markup) if self.vault is not None else markup

    def document(self) -> str:
        doc = self.p.document
        body: list[str] = []
        if self.options.include_title and not _starts_with_h1(doc.root):
            body.append(f'<h1 class="title">{escape(doc.title)}</h1>')
        if self.options.include_metadata and self.p.metadata:
            rows = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in self.p.metadata.items())
            body.append(f'<dl class="metadata">{rows}</dl>')
        for child in doc.root.children:
            body.append(self.block(child))
        if doc.footnotes:
            items = []
            for fn in doc.footnotes:
                inner = "".join(self.block(c) for c in fn.children)
                back = f' <a href="#fnref-{fn.attributes["index"]}" class="footnote-back">↩</a>'
                items.append(f'<li id="fn-{fn.attributes["index"]}">{inner}{back}</li>')
            body.append(f'<section class="footnotes"><ol>{"".join(items)}</ol></section>')
        content = "".join(body)
        if self.vault is not None:
            content = self.vault.restore(clean(content))
        css = self.p.theme_css + BASE_CSS + self.formatter.get_style_defs(".metona-export .highlight")
        if self.print_mode:
            css += PRINT_CSS
        lang = _lang(doc.title + doc.root.plain_text())
        return (
            f'<!DOCTYPE html>\n<html lang="{lang}">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            '<meta name="generator" content="Metona sidecar">\n'
            f"<title>{escape(doc.title)}</title>\n<style>\n{_style_text(css)}\n</style>\n</head>\n"
            f'<body>\n<article class="metona-export">\n{content}\n</article>\n</body>\n</html>\n'
        )

    # ---------------------------------------------------------------------------------------------- blocks
    def block(self, n: Node) -> str:
        self.count += 1
        if self.count % 64 == 0:
            self.p.check_cancelled()
        t = n.type
        if t == "heading":
            level = int(n.attributes.get("level", 1))
            anchor = escape(str(n.attributes.get("anchor", "")), quote=True)
            return f'<h{level} id="{anchor}">{self.inlines(n.children)}</h{level}>\n'
        if t == "paragraph":
            return f"<p>{self.inlines(n.children)}</p>\n"
        if t == "list":
            tag = "ol" if n.attributes.get("ordered") else "ul"
            start = n.attributes.get("start")
            attr = f' start="{int(start)}"' if tag == "ol" and start not in (None, 1) else ""
            tight = bool(n.attributes.get("tight"))
            return f"<{tag}{attr}>\n{''.join(self.list_item(c, tight) for c in n.children)}</{tag}>\n"
        if t == "list_item":
            return self.list_item(n, False)
        if t == "blockquote":
            return f"<blockquote>\n{''.join(self.block(c) for c in n.children)}</blockquote>\n"
        if t == "code_block":
            return self.code(n)
        if t == "thematic_break":
            return "<hr>\n"
        if t == "table":
            return self.table(n)
        if t == "math_block":
            return f'<div class="math">{self.math(n)}</div>\n'
        if t in ("mermaid", "function_plot"):
            asset = self.p.assets.get(n.node_id)
            if asset is None or asset.text is None:
                return self.code(n, language=t)
            label = escape(diagram_alt(n), quote=True)  # the tagged PDF's Figure /Alt, a screen reader's name
            return self.trusted(
                f'<figure class="diagram {t}" id="{n.node_id}" role="img" aria-label="{label}">{asset.text}</figure>\n'
            )
        if t == "html":
            return self.raw(n)
        return f"<div>{self.inlines(n.children)}</div>\n"

    def list_item(self, n: Node, tight: bool) -> str:
        """A tight list's paragraphs are written without ``<p>`` (CommonMark); a loose list keeps them."""
        parts = []
        for c in n.children:
            if c.type == "paragraph" and tight:
                parts.append(self.inlines(c.children))
            else:
                parts.append(self.block(c))
        checked = n.attributes.get("checked")
        if checked is None:
            return f"<li>{''.join(parts)}</li>\n"
        box = self.trusted('<input type="checkbox" disabled' + (" checked" if checked else "") + ">")
        return f'<li class="task">{box}{"".join(parts)}</li>\n'

    def raw(self, n: Node) -> str:
        """Raw HTML, left for the sanitiser (it cleans the whole body once); what it will remove is a warning."""
        text = n.text or ""
        if n.attributes.get("unsupported"):
            self.p.warn("EXPORT_CONTENT_DROPPED", n, f"{n.attributes['unsupported']} is not exported")
            self.p.dropped.append(n.node_id)
            return ""
        rawtext = unclosed_rawtext(text)
        if rawtext is not None:
            self.p.warn("EXPORT_CONTENT_DROPPED", n, f"raw HTML opens <{rawtext}> and never closes it: removed")
            self.p.dropped.append(n.node_id)
            return ""
        removed = removed_by_cleaning(text)
        if removed:
            self.p.warn("EXPORT_CONTENT_DROPPED", n, "raw HTML sanitised: removed " + ", ".join(removed[:8]))
            if not clean(text).strip():
                self.p.dropped.append(n.node_id)
        return text

    def code(self, n: Node, language: str | None = None) -> str:
        from pygments import highlight as pygmentize

        lang = language or n.attributes.get("language") or ""
        code = pygmentize(n.text, highlight.lexer(lang), self.formatter) if n.text else ""  # an empty block stays empty
        cls = f' class="language-{escape(lang, quote=True)}"' if lang else ""
        return f'<pre class="highlight"><code{cls}>{code}</code></pre>\n'

    def table(self, n: Node) -> str:
        head: list[str] = []
        body: list[str] = []
        for row in n.children:
            cells = []
            for cell in row.children:
                tag = "th" if cell.attributes.get("header") else "td"
                align = cell.attributes.get("align")
                style = f' style="text-align:{align}"' if align in ("left", "right", "center") else ""
                cells.append(f"<{tag}{style}>{self.inlines(cell.children)}</{tag}>")
            (head if row.attributes.get("header") else body).append(f"<tr>{''.join(cells)}</tr>")
        thead = f"<thead>{''.join(head)}</thead>" if head else ""
        tbody = f"<tbody>{''.join(body)}</tbody>" if body else ""
        return f"<table>{thead}{tbody}</table>\n"

    def math(self, n: Node) -> str:
        asset = self.p.assets.get(n.node_id)
        if asset is not None and asset.text:
            return self.trusted(asset.text)
        return f'<code class="math">{escape(n.text or "")}</code>'

    # --------------------------------------------------------------------------------------------- inlines
    def inlines(self, nodes: list[Node]) -> str:
        return "".join(self.inline(c) for c in nodes)

    def inline(self, n: Node) -> str:
        t = n.type
        if t == "text":
            return escape(n.text or "", quote=False)
        if t == "emphasis":
            return f"<em>{self.inlines(n.children)}</em>"
        if t == "strong":
            return f"<strong>{self.inlines(n.children)}</strong>"
        if t == "strikethrough":
            return f"<del>{self.inlines(n.children)}</del>"
        if t == "code_inline":
            return f"<code>{escape(n.text or '', quote=False)}</code>"
        if t == "line_break":
            return "<br>\n" if n.attributes.get("hard") else "\n"
        if t == "link":
            href = safe_href(str(n.attributes.get("href") or ""))
            if href is None:
                self.p.warn("EXPORT_LINK_REMOVED", n, "a link with an unsafe scheme was kept as text")
                return self.inlines(n.children)
            title = n.attributes.get("title")
            tattr = f' title="{escape(str(title), quote=True)}"' if title else ""
            return f'<a href="{escape(href, quote=True)}"{tattr}>{self.inlines(n.children)}</a>'
        if t == "image":
            return self.image(n)
        if t == "math_inline":
            return self.math(n)
        if t == "footnote_ref":
            i = int(n.attributes.get("index", 0))
            return f'<sup class="footnote-ref"><a href="#fn-{i}" id="fnref-{i}">{i}</a></sup>'
        if t == "html":
            return self.raw(n)
        return self.inlines(n.children)

    def image(self, n: Node) -> str:
        alt = escape(str(n.attributes.get("alt") or ""), quote=True)
        asset = self.p.assets.get(n.node_id)
        if asset is None:
            return f'<span class="image-missing">[{alt}]</span>' if alt else ""
        if asset.kind == "svg" and asset.text:
            return self.trusted(f'<span class="image" role="img" aria-label="{alt}">{asset.text}</span>')
        data = base64.b64encode(asset.data or b"").decode("ascii")
        size = ""
        if asset.width and asset.height:
            size = f' width="{round(asset.width)}" height="{round(asset.height)}"'
        return self.trusted(f'<img src="data:{asset.mime_type};base64,{data}" alt="{alt}"{size}>')


_SCHEME = re.compile(r"^([a-z][a-z0-9+.\-]*):", re.I)


def safe_href(href: str) -> str | None:
    """``href`` if it is http(s), mailto, a fragment or relative (harmless in a standalone file), else None."""
    href = href.strip()
    m = _SCHEME.match(href)
    if m is None or m.group(1).lower() in ("http", "https", "mailto"):
        return href
    return None


def diagram_alt(n: Node) -> str:
    """A diagram's alternative text: its kind and its source on one line, cut at 160 characters
    (``Mermaid diagram: flowchart TD A[Ready] --> B[Running] …``)."""
    kind = "Mermaid diagram" if n.type == "mermaid" else "Function plot"
    source = " ".join((n.text or "").split())
    if len(source) > 160:
        source = source[:159] + "…"
    return f"{kind}: {source}" if source else kind


def _starts_with_h1(root: Node) -> bool:
    return bool(root.children) and root.children[0].type == "heading" and root.children[0].attributes.get("level") == 1


def _style_text(css: str) -> str:
    return css.replace("</", "<\\/")  # a theme's CSS can never close the style element


def render_html(prepared: Prepared, options: ExportOptions, *, print_mode: bool = False) -> str:
    return HtmlWriter(prepared, options, print_mode=print_mode).document()
