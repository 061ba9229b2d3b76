"""MathML (as latex2mathml writes it, sanitised) → OMML, Word's native equations.

Covers the presentation elements TeX maths produces: tokens, rows, scripts, fractions, radicals, accents and
limits, fences, matrices. An element outside that set raises :class:`OmmlUnsupported`; the exporter then inserts
the formula as an image and warns (issue 13: "OMML where the conversion succeeds, else an image plus a warning").
"""

from __future__ import annotations

import functools
from xml.sax.saxutils import escape

M_NS = "http://schemas.openxmlformats.org/officeDocument/2006/math"
MATHML_NS = "http://www.w3.org/1998/Math/MathML"
_TRANSPARENT = {"mrow", "mstyle", "mpadded", "semantics", "menclose"}
_SKIP = {"annotation", "annotation-xml", "mphantom", "none", "mprescripts"}
# Large operators: with limits they are Word's n-ary objects (m:nary), the form Word's own equation editor and
# readers such as pandoc expect (``\sum_{i=1}^{n} x_i``), not a base with scripts.
NARY = set(
    "\u2211\u220f\u2210\u222b\u222c\u222d\u222e\u222f\u2230\u22c3\u22c2\u22c1\u22c0\u2a01\u2a02\u2a00\u2a04\u2a06"
)
# Limits above/below (display style); an operator with scripts (msub/msup/msubsup, inline style) stays sSubSup,
# which Word and pandoc already read as the operator with its scripts.
_SCRIPTED = {"munderover": "undOvr", "munder": "undOvr", "mover": "undOvr"}


class OmmlUnsupported(ValueError):
    pass


def _local(el: object) -> str:
    tag = getattr(el, "tag", "")
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1]


@functools.lru_cache(maxsize=2048)
def mathml_to_omml(mathml: str) -> str:
    """One ``<m:oMath>`` (inline) or ``<m:oMathPara>`` (display) element, with the ``m`` namespace declared.
    Memoised: a document repeats its formulas (``$n$``), and a re-export converts the same MathML again."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    try:
        root = etree.fromstring(mathml.encode("utf-8"), parser)
    except etree.XMLSyntaxError as exc:
        raise OmmlUnsupported(f"unreadable MathML ({exc.msg})") from None
    if _local(root) != "math":
        raise OmmlUnsupported("not a <math> element")
    body = _seq(_kids(root))
    if root.get("display") == "block":
        return f'<m:oMathPara xmlns:m="{M_NS}"><m:oMath>{body}</m:oMath></m:oMathPara>'
    return f'<m:oMath xmlns:m="{M_NS}">{body}</m:oMath>'


def _run(text: str, *, plain: bool = False, normal: bool = False) -> str:
    props = ""
    if normal:
        props = "<m:rPr><m:nor/></m:rPr>"
    elif plain:
        props = '<m:rPr><m:sty m:val="p"/></m:rPr>'
    return f'<m:r>{props}<m:t xml:space="preserve">{escape(text)}</m:t></m:r>'


def _e(tag: str, el: object) -> str:
    return f"<m:{tag}>{_conv(el)}</m:{tag}>"


def _kids(el: object) -> list:
    return [c for c in el if isinstance(getattr(c, "tag", None), str)]  # type: ignore[attr-defined]


def _need(el: object, n: int) -> list:
    kids = _kids(el)
    if len(kids) != n:
        raise OmmlUnsupported(f"<{_local(el)}> with {len(kids)} children")
    return kids


def _seq(kids: list) -> str:
    """A row of elements; a large operator with limits takes the element after it as its operand."""
    out = []
    i = 0
    while i < len(kids):
        if _nary_op(kids[i]) is not None:
            operand = _conv(kids[i + 1]) if i + 1 < len(kids) else ""
            out.append(_nary(kids[i], operand))
            i += 2
            continue
        out.append(_conv(kids[i]))
        i += 1
    return "".join(out)


def _nary_op(el: object) -> str | None:
    """The operator character when ``el`` is a large operator with limits (``∑_{i}^{n}``, ``∫_0^1``)."""
    if _local(el) not in _SCRIPTED:
        return None
    kids = _kids(el)
    if not kids or _local(kids[0]) != "mo":
        return None
    op = (getattr(kids[0], "text", None) or "").strip()
    return op if op in NARY else None


def _nary(el: object, operand: str) -> str:
    name = _local(el)
    op = escape(_nary_op(el) or "", {'"': "&quot;"})
    kids = _kids(el)
    if name == "munderover":
        _need(el, 3)
        sub, sup = kids[1], kids[2]
    elif name == "munder":
        _need(el, 2)
        sub, sup = kids[1], None
    else:
        _need(el, 2)
        sub, sup = None, kids[1]
    props = f'<m:chr m:val="{op}"/><m:limLoc m:val="{_SCRIPTED[name]}"/>'
    props += ('<m:subHide m:val="1"/>' if sub is None else "") + ('<m:supHide m:val="1"/>' if sup is None else "")
    sub_x = _e("sub", sub) if sub is not None else "<m:sub/>"
    sup_x = _e("sup", sup) if sup is not None else "<m:sup/>"
    return f"<m:nary><m:naryPr>{props}</m:naryPr>{sub_x}{sup_x}<m:e>{operand}</m:e></m:nary>"


def _conv(el: object) -> str:
    name = _local(el)
    text = (getattr(el, "text", None) or "").strip()
    if name in _SKIP:
        return ""
    if name in _TRANSPARENT:
        kids = _kids(el)
        if name == "semantics":
            kids = kids[:1]
        return _seq(kids)
    if name == "mi":
        return _run(text, plain=len(text) > 1 or el.get("mathvariant") == "normal")  # type: ignore[attr-defined]
    if name in ("mn", "mo"):
        return _run(text, plain=True)
    if name in ("mtext", "ms"):
        return _run(text, normal=True)
    if name == "mspace":
        return _run("\u2009", plain=True)
    if name == "msup":
        base, sup = _need(el, 2)
        return f"<m:sSup>{_e('e', base)}{_e('sup', sup)}</m:sSup>"
    if name == "msub":
        base, sub = _need(el, 2)
        return f"<m:sSub>{_e('e', base)}{_e('sub', sub)}</m:sSub>"
    if name == "msubsup":
        base, sub, sup = _need(el, 3)
        return f"<m:sSubSup>{_e('e', base)}{_e('sub', sub)}{_e('sup', sup)}</m:sSubSup>"
    if name == "mfrac":
        num, den = _need(el, 2)
        bar = '<m:fPr><m:type m:val="noBar"/></m:fPr>' if el.get("linethickness") in ("0", "0px") else ""  # type: ignore[attr-defined]
        return f"<m:f>{bar}{_e('num', num)}{_e('den', den)}</m:f>"
    if name == "msqrt":
        inner = "".join(_conv(c) for c in _kids(el))
        return f'<m:rad><m:radPr><m:degHide m:val="1"/></m:radPr><m:deg/><m:e>{inner}</m:e></m:rad>'
    if name == "mroot":
        base, index = _need(el, 2)
        return f"<m:rad>{_e('deg', index)}{_e('e', base)}</m:rad>"
    if name in ("mover", "munder"):
        base, script = _need(el, 2)
        stext = (getattr(script, "text", None) or "").strip()
        if name == "mover" and _local(script) == "mo" and len(stext) == 1:
            accent = escape(stext, {'"': "&quot;"})
            return f'<m:acc><m:accPr><m:chr m:val="{accent}"/></m:accPr>{_e("e", base)}</m:acc>'
        tag = "limUpp" if name == "mover" else "limLow"
        return f"<m:{tag}>{_e('e', base)}{_e('lim', script)}</m:{tag}>"
    if name == "munderover":
        base, under, over = _need(el, 3)
        return (
            f"<m:limUpp><m:e><m:limLow>{_e('e', base)}{_e('lim', under)}</m:limLow></m:e>{_e('lim', over)}</m:limUpp>"
        )
    if name == "mfenced":
        open_, close = el.get("open", "("), el.get("close", ")")  # type: ignore[attr-defined]
        inner = "".join(f"<m:e>{_conv(c)}</m:e>" for c in _kids(el))
        return (
            f'<m:d><m:dPr><m:begChr m:val="{escape(open_)}"/><m:endChr m:val="{escape(close)}"/></m:dPr>{inner}</m:d>'
        )
    if name == "mtable":
        rows = []
        for tr in _kids(el):
            if _local(tr) not in ("mtr", "mlabeledtr"):
                raise OmmlUnsupported(f"<{_local(tr)}> in a table")
            cells = "".join(f"<m:e>{_conv(td)}</m:e>" for td in _kids(tr))
            rows.append(f"<m:mr>{cells}</m:mr>")
        return f"<m:m>{''.join(rows)}</m:m>"
    if name == "mtd":
        return "".join(_conv(c) for c in _kids(el))
    raise OmmlUnsupported(f"<{name}> has no Word equation form here")
