"""The SVG (and MathML) sanitiser every ``render/static`` output passes through.

A real XML parser (lxml, entities never resolved, no network, no DTD) and an allow-list walk — no regexes over
markup. CSS (``<style>`` and ``style=""``) is parsed with tinycss2 and re-serialised from its tokens. Removed:
``<script>`` and every element not on the list (animation elements too: they can set ``href``), ``on*`` and
other unknown attributes, ``href``/``xlink:href`` that are not a same-document ``#fragment`` (or, on
``<image>``, an inline raster ``data:`` URL), ``url()`` that is not ``#fragment``/inline raster, ``@import``,
``@font-face``, ``expression()``, ``javascript:``, ``behavior``, ``-moz-binding``, DOCTYPE/``<!ENTITY>``,
comments and processing instructions. HTML inside ``<foreignObject>`` is kept only on a strict inline allow-list
(Mermaid's HTML labels), everything else in it is dropped. Each kind of removal becomes one warning.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import tinycss2
from lxml import etree

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
XHTML_NS = "http://www.w3.org/1999/xhtml"
MATHML_NS = "http://www.w3.org/1998/Math/MathML"
XML_NS = "http://www.w3.org/XML/1998/namespace"

SVG_ELEMENTS = frozenset(
    "svg g defs symbol use path rect circle ellipse line polyline polygon text tspan textPath title desc marker "
    "clipPath mask linearGradient radialGradient stop pattern style a switch image foreignObject filter "
    "feGaussianBlur feOffset feBlend feFlood feComposite feMerge feMergeNode feColorMatrix feDropShadow "
    "feMorphology feComponentTransfer feFuncA feFuncR feFuncG feFuncB".split()
)
XHTML_ELEMENTS = frozenset("div span p br b i em strong code pre sub sup small u s ul ol li table tr td th".split())
MATHML_ELEMENTS = frozenset(
    "math mrow mi mn mo ms mtext mspace msup msub msubsup mfrac msqrt mroot mstyle mtable mtr mtd mlabeledtr "
    "munder mover munderover mpadded mphantom menclose merror semantics annotation mfenced mmultiscripts "
    "mprescripts none".split()
)
_XHTML_ATTRS = frozenset({"class", "style", "dir", "lang"})
_MATHML_ATTRS = frozenset(
    "display mathvariant mathsize mathcolor mathbackground stretchy fence separator accent accentunder "
    "movablelimits largeop lspace rspace linethickness columnalign rowalign columnspacing rowspacing "
    "columnlines rowlines frame notation width height depth voffset scriptlevel displaystyle open close "
    "separators encoding class style dir xmlns minsize maxsize form symmetric align".split()
)
# every SVG attribute whose value cannot carry a reference or script (checked for url() anyway)
_SVG_ATTRS = frozenset(
    "id class style x y x1 y1 x2 y2 cx cy r rx ry dx dy width height viewBox preserveAspectRatio d points "
    "transform fill fill-opacity fill-rule stroke stroke-width stroke-opacity stroke-linecap stroke-linejoin "
    "stroke-dasharray stroke-dashoffset stroke-miterlimit opacity color display visibility font-family "
    "font-size font-weight font-style font-variant text-anchor dominant-baseline alignment-baseline "
    "baseline-shift letter-spacing word-spacing text-decoration writing-mode clip-path clip-rule clipPathUnits "
    "mask maskUnits maskContentUnits marker-start marker-mid marker-end markerWidth markerHeight markerUnits "
    "refX refY orient offset stop-color stop-opacity gradientUnits gradientTransform spreadMethod fx fy fr "
    "patternUnits patternContentUnits patternTransform filter filterUnits primitiveUnits in in2 result "
    "stdDeviation mode operator k1 k2 k3 k4 values type flood-color flood-opacity radius tableValues slope "
    "intercept amplitude exponent lengthAdjust textLength startOffset method spacing role aria-label "
    "aria-roledescription aria-labelledby aria-describedby focusable version baseProfile xmlns "
    "shape-rendering text-rendering image-rendering color-interpolation-filters overflow pointer-events "
    "vector-effect paint-order rotate side path data-id data-node data-et data-look data-edge data-points "
    "data-look data-type name".split()
)
_DANGEROUS_CSS = re.compile(r"expression\s*\(|javascript:|vbscript:|behavior|-moz-binding|@import", re.I)
_SAFE_DATA_URL = re.compile(r"data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*\Z", re.I)
_URL_STRING_FUNCTIONS = frozenset(
    {"image-set", "-webkit-image-set", "cross-fade", "-webkit-cross-fade", "image", "-webkit-image", "src"}
)
_URL_IN_ATTR = re.compile(r"url\(\s*['\"]?\s*([^)'\"]*)", re.I)


class UnsafeSvgError(ValueError):
    """The input cannot be made safe (not XML, or not an ``<svg>``/``<math>`` document)."""


@dataclass
class _Report:
    removed: Counter[str] = field(default_factory=Counter)

    def warnings(self) -> list[str]:
        return [
            f"SVG_SANITIZED: removed {what} ({n}x)" if n > 1 else f"SVG_SANITIZED: removed {what}"
            for what, n in sorted(self.removed.items())
        ]


def sanitize_svg(markup: str) -> tuple[str, list[str]]:
    """Sanitised ``<svg>`` markup + one warning per kind of removal."""
    return _sanitize(markup, SVG_NS, "svg")


def sanitize_mathml(markup: str) -> tuple[str, list[str]]:
    return _sanitize(markup, MATHML_NS, "math")


def _sanitize(markup: str, ns: str, root_name: str) -> tuple[str, list[str]]:
    report = _Report()
    root = _parse(markup, report)
    if _local(root) != root_name or _ns(root) not in (ns, ""):
        raise UnsafeSvgError(f"not an <{root_name}> document")
    _walk(root, ns, report, in_foreign=False)
    out = etree.tostring(root, encoding="unicode")
    return out, report.warnings()


def _parse(markup: str, report: _Report) -> etree._Element:
    parser = etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
        recover=False,
    )
    try:
        root = etree.fromstring(markup.encode("utf-8"), parser)
    except (etree.XMLSyntaxError, ValueError) as exc:
        raise UnsafeSvgError(f"not well-formed XML: {exc}") from None
    if root.getroottree().docinfo.doctype or "<!ENTITY" in markup:
        report.removed["DOCTYPE/ENTITY declarations"] += 1
    for node in list(root.iter(etree.Entity)):
        report.removed["entity references"] += 1
        _drop(node)
    return root


def _local(el: etree._Element) -> str:
    return etree.QName(el).localname


def _ns(el: etree._Element) -> str:
    return etree.QName(el).namespace or ""


def _drop(el: etree._Element) -> None:
    """Remove ``el`` but keep its tail text (which belongs to the parent)."""
    parent = el.getparent()
    if parent is None:
        return
    tail = el.tail
    prev = el.getprevious()
    if tail:
        if prev is not None:
            prev.tail = (prev.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(el)


def _walk(el: etree._Element, ns: str, report: _Report, *, in_foreign: bool) -> None:
    for child in list(el):
        if not isinstance(child.tag, str):  # comments/PIs that survived, entities
            _drop(child)
            continue
        name, child_ns = _local(child), _ns(child)
        if in_foreign:
            allowed = child_ns in (XHTML_NS, "") and name in XHTML_ELEMENTS
        elif ns == SVG_NS:
            allowed = child_ns in (SVG_NS, "") and name in SVG_ELEMENTS
        else:
            allowed = child_ns in (MATHML_NS, "") and name in MATHML_ELEMENTS
        if not allowed:
            report.removed[f"<{name}> element"] += 1
            _drop(child)
            continue
        _clean_attributes(child, ns, report, in_foreign=in_foreign)
        if name == "style" and not in_foreign:
            child.text = _clean_stylesheet(child.text or "", report)
            for sub in list(child):
                _drop(sub)
            continue
        _walk(child, ns, report, in_foreign=in_foreign or name == "foreignObject")
    if el.getparent() is None:
        _clean_attributes(el, ns, report, in_foreign=False)


def _clean_attributes(el: etree._Element, ns: str, report: _Report, *, in_foreign: bool) -> None:
    name = _local(el)
    for key in list(el.attrib):
        qn = etree.QName(key)
        local, attr_ns = qn.localname, qn.namespace
        value = el.attrib[key]
        if local.lower().startswith("on"):
            report.removed["event-handler attributes (on*)"] += 1
            del el.attrib[key]
        elif local == "href" and attr_ns in (None, XLINK_NS) and not in_foreign:
            if not (value.startswith("#") or (name == "image" and _SAFE_DATA_URL.match(value))):
                report.removed["external or script href"] += 1
                del el.attrib[key]
        elif attr_ns == XML_NS and local in ("space", "lang"):
            continue
        elif attr_ns is not None or not _attr_allowed(local, ns, in_foreign):
            report.removed[f"attribute {local!r}"] += 1
            del el.attrib[key]
        elif local == "style":
            cleaned = _clean_declarations(value, report)
            if cleaned.strip():
                el.attrib[key] = cleaned
            else:
                del el.attrib[key]
        elif ("url(" in value.lower() and not _urls_internal(value)) or _value_safe(
            tinycss2.parse_component_value_list(value)
        ) == "external url() references":
            # presentation attributes are CSS values to the browser: escapes (``\75 rl(``) and image-set() count
            report.removed["external url() references"] += 1
            del el.attrib[key]
        elif _DANGEROUS_CSS.search(value):
            report.removed["script-like attribute values"] += 1
            del el.attrib[key]


def _attr_allowed(local: str, ns: str, in_foreign: bool) -> bool:
    if in_foreign:
        return local in _XHTML_ATTRS
    if ns == MATHML_NS:
        return local in _MATHML_ATTRS
    return local in _SVG_ATTRS or local.startswith(("aria-", "data-"))


def _urls_internal(value: str) -> bool:
    return all(u.strip().startswith("#") or _SAFE_DATA_URL.match(u.strip()) for u in _URL_IN_ATTR.findall(value))


# ------------------------------------------------------------------------------------------------ CSS
def _url_ok(token: tinycss2.ast.Node) -> bool:
    if isinstance(token, tinycss2.ast.URLToken):
        url = token.value.strip()
    elif isinstance(token, tinycss2.ast.FunctionBlock) and token.lower_name == "url":
        strings = [t for t in token.arguments if isinstance(t, tinycss2.ast.StringToken)]
        url = strings[0].value.strip() if strings else ""
    elif isinstance(token, tinycss2.ast.FunctionBlock) and token.lower_name in _URL_STRING_FUNCTIONS:
        # image-set("https://…" 1x) and its kin take a bare string as a URL
        strings = [t.value.strip() for t in token.arguments if isinstance(t, tinycss2.ast.StringToken)]
        return all(u.startswith("#") or _SAFE_DATA_URL.match(u) for u in strings)
    else:
        return True
    return url.startswith("#") or bool(_SAFE_DATA_URL.match(url))


def _value_safe(tokens: list[tinycss2.ast.Node]) -> str | None:
    """None when the value is safe, else the reason."""
    for token in tokens:
        if isinstance(token, tinycss2.ast.URLToken | tinycss2.ast.FunctionBlock):
            if not _url_ok(token):
                return "external url() references"
            if isinstance(token, tinycss2.ast.FunctionBlock):
                if token.lower_name == "expression":
                    return "CSS expression()"
                inner = _value_safe(token.arguments)
                if inner:
                    return inner
        elif isinstance(token, tinycss2.ast.IdentToken | tinycss2.ast.StringToken):
            if _DANGEROUS_CSS.search(token.value):
                return "script in CSS"
        elif hasattr(token, "content") and token.content:  # () [] {} blocks
            inner = _value_safe(token.content)
            if inner:
                return inner
    return None


def _clean_decl_list(nodes: list[tinycss2.ast.Node], report: _Report) -> str:
    kept: list[str] = []
    for decl in nodes:
        if isinstance(decl, tinycss2.ast.Declaration):
            if decl.lower_name in ("behavior", "-moz-binding") or decl.lower_name.startswith("-ms-behavior"):
                report.removed[f"CSS property {decl.lower_name!r}"] += 1
                continue
            reason = _value_safe(decl.value)
            if reason:
                report.removed[reason] += 1
                continue
            important = " !important" if decl.important else ""
            kept.append(f"{decl.name}:{tinycss2.serialize(decl.value).strip()}{important}")
        elif isinstance(decl, tinycss2.ast.AtRule):
            report.removed[f"CSS @{decl.lower_at_keyword} rule"] += 1
    return ";".join(kept)


def _clean_declarations(text: str, report: _Report) -> str:
    nodes = tinycss2.parse_blocks_contents(text, skip_comments=True, skip_whitespace=True)
    return _clean_decl_list(nodes, report)


def _clean_stylesheet(text: str, report: _Report) -> str:
    out: list[str] = []
    for rule in tinycss2.parse_stylesheet(text, skip_comments=True, skip_whitespace=True):
        if isinstance(rule, tinycss2.ast.QualifiedRule):
            prelude = tinycss2.serialize(rule.prelude).strip()
            if _DANGEROUS_CSS.search(prelude):
                report.removed["script in CSS"] += 1
                continue
            out.append(f"{prelude}{{{_clean_decl_list(_decls(rule.content), report)}}}")
        elif isinstance(rule, tinycss2.ast.AtRule):
            if rule.lower_at_keyword in ("media", "supports", "keyframes") and rule.content is not None:
                inner = _clean_stylesheet(tinycss2.serialize(rule.content), report)
                out.append(f"@{rule.at_keyword} {tinycss2.serialize(rule.prelude).strip()}{{{inner}}}")
            else:
                report.removed[f"CSS @{rule.lower_at_keyword} rule"] += 1
        else:  # parse errors
            report.removed["unparsable CSS"] += 1
    return "".join(out)


def _decls(content: list[tinycss2.ast.Node]) -> list[tinycss2.ast.Node]:
    return tinycss2.parse_blocks_contents(content, skip_comments=True, skip_whitespace=True)
