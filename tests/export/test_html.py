"""The HTML writer on what the CommonMark file does not cover: raw HTML next to the exporter's own assets, the
sanitiser's warnings, a raw element that would swallow the document, the AST attributes the writer relies on."""

from __future__ import annotations

from sidecar.export.ast import parse_markdown
from sidecar.export.html import render_html, safe_href
from sidecar.export.models import ExportOptions
from sidecar.export.types import Asset, Prepared

from .cmark import export_body


def test_loose_and_tight_lists_start_numbers_and_empty_code() -> None:
    doc = parse_markdown("- a\n\n- b\n\n7. x\n8. y\n\n```\n```\n")
    lists = [n for n in doc.walk() if n.type == "list"]
    assert [(n.attributes["tight"], n.attributes["start"]) for n in lists] == [(False, None), (True, 7)]
    body, _ = export_body("- a\n\n- b\n\n7. x\n8. y\n\n```\n```\n")
    assert "<li><p>a</p>\n</li>" in body and '<ol start="7">\n<li>x</li>' in body
    assert '<pre class="highlight"><code></code></pre>' in body


def test_raw_html_is_sanitised_and_what_goes_is_named() -> None:
    md = 'H<sub>2</sub>O, <kbd>Ctrl</kbd> <span onclick="steal()">x</span>\n\n'
    md += "<details><summary>s</summary>\n\nin\n\n</details>\n"
    body, warnings = export_body(md)
    assert "H<sub>2</sub>O, <kbd>Ctrl</kbd> <span>x</span>" in body
    assert "<details><summary>s</summary>" in body and "<p>in</p>" in body and "</details>" in body
    assert "onclick" not in body and "steal" not in body
    assert warnings == ["EXPORT_CONTENT_DROPPED: node_0012 (html) raw HTML sanitised: removed span@onclick"]


def test_script_and_unclosed_rawtext_do_not_swallow_the_document() -> None:
    body, warnings = export_body("a <style> b\n\n<script>alert(1)</script>\n\nafter\n")
    assert "alert" not in body and "<p>after</p>" in body and "<style" not in body
    assert any("(html) raw HTML opens <style> and never closes it" in w for w in warnings)
    assert any("(html) raw HTML sanitised: removed <script>" in w for w in warnings)


def test_assets_survive_the_sanitiser_untouched() -> None:
    doc = parse_markdown("<b>raw</b>\n\n```mermaid\ngraph TD; A-->B\n```\n\n- [x] done\n\n$x$\n")
    prepared = Prepared(doc)
    diagram = next(n for n in doc.walk() if n.type == "mermaid")
    maths = next(n for n in doc.walk() if n.type == "math_inline")
    svg = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"><foreignObject><p>A</p></foreignObject></svg>'
    prepared.assets[diagram.node_id] = Asset("svg", text=svg)
    prepared.assets[maths.node_id] = Asset("mathml", text='<math display="inline"><mi>x</mi></math>')
    out = render_html(prepared, ExportOptions(include_title=False))
    assert svg in out and '<math display="inline"><mi>x</mi></math>' in out and "<b>raw</b>" in out
    assert '<input type="checkbox" disabled checked>' in out and "\ue000" not in out
    assert 'role="img" aria-label="Mermaid diagram: graph TD; A--&gt;B"' in out  # the tagged PDF's Figure /Alt


def test_link_schemes() -> None:
    assert safe_href("foo):") == "foo):" and safe_href("/a:b") == "/a:b" and safe_href("#x") == "#x"
    assert safe_href("HTTPS://x") == "HTTPS://x" and safe_href("mailto:a@b") == "mailto:a@b"
    assert safe_href("javascript:alert(1)") is None and safe_href("irc://x") is None and safe_href("data:x") is None
