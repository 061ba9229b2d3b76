"""The SVG/MathML sanitiser: what is removed, what is kept, and the warning for each kind of removal."""

from __future__ import annotations

import pytest

from sidecar.render.sanitize import UnsafeSvgError, sanitize_mathml, sanitize_svg
from tests.support.render_check import assert_safe_svg

SVG = '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">{}</svg>'


@pytest.mark.parametrize(
    ("body", "warning"),
    [
        ("<script>alert(1)</script>", "removed <script> element"),
        ('<rect onclick="alert(1)" onload="x"/>', "removed event-handler attributes (on*) (2x)"),
        ('<a href="javascript:alert(1)"><text>x</text></a>', "removed external or script href"),
        ('<a xlink:href="https://evil.example/"><text>x</text></a>', "removed external or script href"),
        ('<use href="https://evil.example/s.svg#a"/>', "removed external or script href"),
        ('<image href="file:///etc/passwd"/>', "removed external or script href"),
        ('<rect fill="url(https://evil.example/#p)"/>', "removed external url() references"),
        ('<rect style="fill:red;background:url(//evil.example/x.png)"/>', "removed external url() references"),
        ("<style>@import url(http://evil.example/x.css); rect{fill:red}</style>", "removed CSS @import rule"),
        ("<style>@font-face{src:url(http://e/f.woff)}</style>", "removed CSS @font-face rule"),
        ('<rect style="width:expression(alert(1))"/>', "removed CSS expression()"),
        ('<rect style="behavior:url(x.htc)"/>', "removed CSS property 'behavior'"),
        ('<rect style="-moz-binding:url(x.xml#b)"/>', "removed CSS property '-moz-binding'"),
        ('<animate attributeName="href" to="javascript:alert(1)"/>', "removed <animate> element"),
        ('<set attributeName="onclick" to="alert(1)"/>', "removed <set> element"),
        (
            '<foreignObject><iframe xmlns="http://www.w3.org/1999/xhtml" src="x"/></foreignObject>',
            "removed <iframe> element",
        ),
        (
            '<foreignObject><div xmlns="http://www.w3.org/1999/xhtml"><img src="x" onerror="a()"/></div>'
            "</foreignObject>",
            "removed <img> element",
        ),
        ('<rect xmlns:ev="http://www.w3.org/2001/xml-events" ev:event="click"/>', "removed attribute 'event'"),
    ],
)
def test_unsafe_parts_are_removed_with_a_warning(body: str, warning: str) -> None:
    out, warnings = sanitize_svg(SVG.format(body))
    assert_safe_svg(out)
    assert "SVG_SANITIZED: " + warning in warnings, warnings
    assert "evil.example" not in out and "alert" not in out


def test_safe_content_is_kept_unchanged_in_meaning() -> None:
    body = (
        '<defs><linearGradient id="g"><stop offset="0" stop-color="#fff"/></linearGradient>'
        '<symbol id="s"><path d="M0 0L1 1"/></symbol></defs>'
        "<style>#m .node rect{fill:#eee;stroke:#333}@keyframes dash{to{stroke-dashoffset:0}}</style>"
        '<g class="node" data-id="A"><rect fill="url(#g)" style="stroke-width:2px"/>'
        '<text x="1" y="2">开始 &lt;b&gt;</text></g><use xlink:href="#s"/><use href="#s"/>'
        '<image href="data:image/png;base64,iVBORw0KGgo="/>'
        '<foreignObject><div xmlns="http://www.w3.org/1999/xhtml" class="l"><span>标签</span></div></foreignObject>'
    )
    out, warnings = sanitize_svg(SVG.format(body))
    assert warnings == []
    for kept in (
        'fill="url(#g)"',
        'xlink:href="#s"',
        'href="#s"',
        "开始 &lt;b&gt;",
        "stroke-dashoffset:0",
        "data:image/png",
        "<span>标签</span>",
        'data-id="A"',
        "#m .node rect{fill:#eee;stroke:#333}",
    ):
        assert kept in out, kept


def test_entities_and_doctype_are_never_expanded() -> None:
    laughs = (
        '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>'
        '<svg xmlns="http://www.w3.org/2000/svg"><text>&b;</text></svg>'
    )
    out, warnings = sanitize_svg(laughs)
    assert "aaaa" not in out and "<!DOCTYPE" not in out and "ENTITY" not in out
    assert "SVG_SANITIZED: removed DOCTYPE/ENTITY declarations" in warnings
    xxe = (
        '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        '<svg xmlns="http://www.w3.org/2000/svg"><text>&x;</text></svg>'
    )
    out, _ = sanitize_svg(xxe)
    assert "root:" not in out


@pytest.mark.parametrize("markup", ["not xml", "<html><script/></html>", "<svg", ""])
def test_what_cannot_be_made_safe_is_refused(markup: str) -> None:
    with pytest.raises(UnsafeSvgError):
        sanitize_svg(markup)


def test_mathml_allow_list() -> None:
    out, warnings = sanitize_mathml(
        '<math xmlns="http://www.w3.org/1998/Math/MathML"><mrow href="javascript:x()"><mi>x</mi>'
        '<maction actiontype="statusline"><mi>y</mi></maction></mrow></math>'
    )
    assert "javascript" not in out and "maction" not in out and "<mi>x</mi>" in out
    assert "SVG_SANITIZED: removed external or script href" in warnings


@pytest.mark.parametrize(
    "body",
    [
        # Chromium parses presentation attributes as CSS: the escaped "url(" fetched http://evil.example/fill
        '<rect width="9" height="9" fill="\\75 rl(http://evil.example/fill#a)"/>',
        '<rect mask="\\75rl(&quot;//evil.example/m#a&quot;)"/>',
        # image-set() takes a bare string as a URL: both fetched before the fix
        '<foreignObject><div xmlns="http://www.w3.org/1999/xhtml" '
        "style=\"background-image:image-set('http://evil.example/a.png' 1x)\">x</div></foreignObject>",
        '<style>div{background-image:-webkit-image-set("http://evil.example/b.png" 1x)}</style>',
        '<rect style="fill:red;background:cross-fade(&quot;https://evil.example/c.png&quot; 50%, red)"/>',
    ],
)
def test_css_escaped_and_string_urls_are_external_references(body: str) -> None:
    out, warnings = sanitize_svg(SVG.format(body))
    assert "evil.example" not in out, out
    assert "SVG_SANITIZED: removed external url() references" in warnings, warnings


def test_internal_image_set_and_plain_attribute_values_are_kept() -> None:
    body = '<rect fill="#f00" d="M0 0" style="background-image:image-set(&quot;#g&quot; 1x)"/><text>url ok</text>'
    out, warnings = sanitize_svg(SVG.format(body))
    assert warnings == [] and 'fill="#f00"' in out and "image-set" in out
