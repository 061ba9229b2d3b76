"""The DOCX exporter (python-docx): headings as Word's ``Heading N`` styles (the navigation pane works), lists as
one numbering definition per list with ``w:ilvl`` for nesting (kinds mixed at any depth, start numbers kept; the
``List Bullet``/``List Number`` 1–3 styles for the look; a loose list's items spaced apart), tables with a
repeated header row, code blocks in the ``Source Code`` paragraph style (what pandoc reads as a code block) with
Pygments highlighting as ``Tok …`` character styles, inline code in ``Verbatim Char``, hyperlinks, images with
their alt text (``descr``), real footnotes (a footnotes part), diagrams and plots as PNG at ~288 dpi, maths as
native equations (OMML) or, where the conversion fails, an image plus a warning (both prepared in
:mod:`sidecar.export.prepare`). ``tests/export/test_docx_pandoc.py`` reads the result back with pandoc.

python-docx provides the package: the default template, styles, numbering, image parts, relationships, saving.
The body is written as WordprocessingML text and parsed once (python-docx's element proxies cost ~50 µs per run,
most of a 50-page build): the markup is the same python-docx would make for ``add_paragraph``/``add_run``/
``add_table``/``add_picture`` (``tests/export/test_docx.py`` compares the two), with elements in schema order.
"""

from __future__ import annotations

import builtins
import io
import re
from typing import Any
from xml.sax.saxutils import escape

from . import highlight
from .ast import Node
from .html import code_style, diagram_alt
from .models import ExportOptions
from .types import Asset, Prepared

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
M_NS = "http://schemas.openxmlformats.org/officeDocument/2006/math"
FOOTNOTES_CT = "application/vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml"
FOOTNOTES_RT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/footnotes"
MAX_WIDTH_IN = 6.3
CJK_FONT = "Microsoft YaHei"
MONO_FONT = "Consolas"
CODE_STYLE = "Source Code"  # the names pandoc (and converters after it) read as a code block / inline code
CODE_CHAR_STYLE = "Verbatim Char"
JC = {"left": "left", "right": "right", "center": "center"}
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_RUN_SPLIT = re.compile(r"([\t\r\n])")
_BREAK_RUN = "<w:r><w:br/></w:r>"


def _clean(text: str) -> str:
    """Characters XML 1.0 cannot hold (control characters, lone surrogates) are dropped: lxml would refuse the
    whole document."""
    return _INVALID_XML.sub("", text) if _INVALID_XML.search(text) else text


def _attr(value: str) -> str:
    return escape(_clean(value), {'"': "&quot;"})


def _t(text: str) -> str:
    """A ``w:t``; ``xml:space="preserve"`` when it has leading or trailing white space (as python-docx does)."""
    if len(text.strip()) < len(text):
        return f'<w:t xml:space="preserve">{escape(text)}</w:t>'
    return f"<w:t>{escape(text)}</w:t>"


def _run_content(text: str) -> str:
    """A run's content for ``text``: ``\\t`` → ``w:tab``, ``\\n``/``\\r`` → ``w:br``, the rest in ``w:t``s
    (python-docx's ``_RunContentAppender``)."""
    text = _clean(text)
    if "\t" not in text and "\n" not in text and "\r" not in text:
        return _t(text) if text else ""
    out = []
    for piece in _RUN_SPLIT.split(text):
        if piece == "\t":
            out.append("<w:tab/>")
        elif piece in ("\n", "\r"):
            out.append("<w:br/>")
        elif piece:
            out.append(_t(piece))
    return "".join(out)


def _ppr(
    style_id: str | None = None,
    *,
    num: str = "",
    spacing: str = "",
    ind: str = "",
    tail: str = "",
    jc: str | None = None,
) -> str:
    """``w:pPr`` with its children in schema order (pStyle, numPr, spacing, ind, contextualSpacing as ``tail``,
    jc); empty when there are none."""
    parts = f'<w:pStyle w:val="{style_id}"/>' if style_id else ""
    parts += num + spacing + ind + tail
    if jc:
        parts += f'<w:jc w:val="{jc}"/>'
    return f"<w:pPr>{parts}</w:pPr>" if parts else ""


class _Para:
    """A paragraph being written: its properties and its content, where a hyperlink is a nested list (the runs
    inside it) so that content after it at paragraph level (maths, pictures, footnote marks) follows it."""

    __slots__ = ("items", "ppr")

    def __init__(self, ppr: str = "") -> None:
        self.ppr = ppr
        self.items: list[Any] = []

    def xml(self) -> str:
        body = "".join(x if isinstance(x, str) else "".join(x) + "</w:hyperlink>" for x in self.items)
        return f"<w:p>{self.ppr}{body}</w:p>"


class DocxWriter:
    def __init__(self, prepared: Prepared, options: ExportOptions) -> None:
        from docx import Document

        self.p = prepared
        self.options = options
        self.doc = Document()
        self.count = 0
        self.footnote_ids: dict[int, int] = {}
        self._style_ids: dict[str, str] = {}
        self._setup_styles()
        self.code_style = highlight.style(code_style(options.code_theme) or "default")
        self._token_rpr: dict[Any, str] = {}
        self.out: list[str] = []  # the body's block-level markup, in order
        self._shape_id = self.doc.part.next_id  # the next picture id (python-docx: max id in the story + 1)
        self._block_width = self.doc._block_width  # text width of the (only) section, as add_table uses
        self._numbering: Any = None
        self._link_part: Any = self.doc.part  # where hyperlinks are related: the body, or the footnotes part
        self._in_note = False
        self._next_num_id = 0
        self._next_abstract_id = 0
        self._abstracts: list[str] = []
        self._nums: list[str] = []

    # ----------------------------------------------------------------------------------------------- setup
    def _setup_styles(self) -> None:
        from docx.enum.style import WD_STYLE_TYPE
        from docx.oxml.ns import qn
        from docx.shared import Pt

        styles = self.doc.styles
        normal = styles["Normal"]
        normal.font.name = "Calibri"
        rpr = normal.element.get_or_add_rPr()
        fonts = rpr.find(qn("w:rFonts"))
        if fonts is None:
            fonts = rpr.makeelement(qn("w:rFonts"), {})
            rpr.append(fonts)
        fonts.set(qn("w:eastAsia"), CJK_FONT)
        code = styles.add_style(CODE_STYLE, WD_STYLE_TYPE.PARAGRAPH)
        code.base_style = normal
        code.font.name = MONO_FONT
        code.font.size = Pt(9)
        code.element.get_or_add_pPr().append(  # before w:spacing, as the schema orders them
            _xml(f'<w:shd xmlns:w="{W_NS}" w:val="clear" w:color="auto" w:fill="F6F8FA"/>')
        )
        code.paragraph_format.space_before = Pt(4)
        code.paragraph_format.space_after = Pt(4)
        inline = styles.add_style(CODE_CHAR_STYLE, WD_STYLE_TYPE.CHARACTER)
        inline.font.name = MONO_FONT
        link = styles.add_style("Hyperlink", WD_STYLE_TYPE.CHARACTER)
        link.font.underline = True
        from docx.shared import RGBColor

        link.font.color.rgb = RGBColor(0x05, 0x63, 0xC1)

    def style_id(self, name: str) -> str:
        """A style's id, looked up once (python-docx scans every style on each lookup by name)."""
        sid = self._style_ids.get(name)
        if sid is None:
            sid = self._style_ids[name] = self.doc.styles[name].style_id
        return sid

    def para(self, style: str | None = None, **ppr: Any) -> _Para:
        """A new body paragraph (appended to the body when it is finished: see :meth:`add`)."""
        return _Para(_ppr(self.style_id(style) if style else None, **ppr))

    def add(self, para: _Para) -> None:
        self.out.append(para.xml())

    # ------------------------------------------------------------------------------------------- document
    def build(self) -> bytes:
        doc = self.p.document
        if self.options.include_title and not (
            doc.root.children
            and doc.root.children[0].type == "heading"
            and doc.root.children[0].attributes["level"] == 1
        ):
            para = self.para("Title")
            para.items.append(f"<w:r>{_run_content(doc.title)}</w:r>")
            self.add(para)
        if self.options.include_metadata:
            for key, value in self.p.metadata.items():
                self.out.append(f"<w:p><w:r>{_run_content(f'{key}: {value}')}</w:r></w:p>")
        self.doc.core_properties.title = _clean(doc.title)[:255]  # python-docx refuses longer ones
        for child in doc.root.children:
            self.block(child)
        self._insert_body()
        self._insert_numbering()
        if doc.footnotes:
            self._footnotes_part()
        out = io.BytesIO()
        self.doc.save(out)
        return out.getvalue()

    def _insert_body(self) -> None:
        """The body markup parsed once and moved before the section properties (``w:sectPr`` stays last)."""
        from docx.oxml.ns import nsdecls, qn

        body = self.doc.element.body
        fragment = _xml(f"<w:body {nsdecls('w', 'r', 'm', 'wp', 'a', 'pic')}>{''.join(self.out)}</w:body>")
        sect_pr = body.find(qn("w:sectPr"))
        for el in list(fragment):
            if sect_pr is not None:
                sect_pr.addprevious(el)
            else:
                body.append(el)
        self.out = []

    def block(self, n: Node, *, list_level: int = 0) -> None:
        self.count += 1
        if self.count % 32 == 0:
            self.p.check_cancelled()
        t = n.type
        if t == "heading":
            level = max(1, min(9, int(n.attributes.get("level", 1))))
            para = self.para(f"Heading {level}")
            self.inlines(para, n.children)
            self.add(para)
        elif t == "paragraph":
            centre = len(n.children) == 1 and n.children[0].type == "image"
            para = _Para(_ppr(jc="center") if centre else "")
            self.inlines(para, n.children)
            self.add(para)
        elif t == "list":
            self.list(n, list_level + 1)
        elif t == "blockquote":
            for c in n.children:
                if c.type == "paragraph":
                    para = self.para("Quote")
                    self.inlines(para, c.children)
                    self.add(para)
                else:
                    self.block(c)
        elif t == "code_block":
            self.code(n.text or "", n.attributes.get("language"))
        elif t == "thematic_break":
            self.out.append(
                '<w:p><w:pPr><w:pBdr><w:bottom w:val="single" w:sz="6" w:space="1" w:color="999999"/></w:pBdr>'
                "</w:pPr></w:p>"
            )
        elif t == "table":
            self.table(n)
        elif t == "math_block":
            self.math_block(n)
        elif t in ("mermaid", "function_plot"):
            self.figure(n)
        elif t == "html":
            self._drop_html(n)
        else:
            para = _Para()
            self.inlines(para, n.children)
            self.add(para)

    def list(self, n: Node, level: int) -> None:
        """One numbering definition per list (its kind and start at its own level), items at ``w:ilvl`` = depth
        − 1: Word's outline, "Increase list level", screen readers and pandoc see one nested list, a bullet list
        inside an ordered one and back. The ``List Bullet``/``List Number`` 1–3 styles give the look."""

        ordered = bool(n.attributes.get("ordered"))
        depth = min(level, 3)
        style = ("List Bullet" if not ordered else "List Number") + ("" if depth == 1 else f" {depth}")
        ilvl = min(level, 9) - 1
        start = n.attributes.get("start")
        num_id = self._numbering_for(ordered, int(start) if ordered and start is not None else 1, ilvl)
        num = f'<w:numPr><w:ilvl w:val="{ilvl}"/><w:numId w:val="{num_id}"/></w:numPr>'
        tight = bool(n.attributes.get("tight"))
        spacing = "" if tight else '<w:spacing w:after="120"/>'  # a loose list's items stand apart
        loose = "" if tight else '<w:contextualSpacing w:val="0"/>'
        for item in n.children:
            first = True
            lead = item.children[0] if item.children else None
            if lead is not None and lead.type == "code_block":  # the code paragraph carries the item's marker
                self.code(lead.text or "", lead.attributes.get("language"), num=num)
                first = False
            elif lead is None or lead.type != "paragraph":  # an empty item, or one that opens with a list…
                self.add(self.para(style, num=num, spacing=spacing, tail=loose))
                first = False
            for c in item.children[1:] if lead is not None and lead.type == "code_block" else item.children:
                if c.type == "paragraph" and first:
                    para = self.para(style, num=num, spacing=spacing, tail=loose)
                    checked = item.attributes.get("checked")
                    if checked is not None:
                        para.items.append(f"<w:r>{_t('☑ ' if checked else '☐ ')}</w:r>")
                    self.inlines(para, c.children)
                    self.add(para)
                    first = False
                elif c.type == "list":
                    self.list(c, level + 1)
                elif c.type == "paragraph":
                    para = self.para("List Continue" + ("" if depth == 1 else f" {depth}"))
                    self.inlines(para, c.children)
                    self.add(para)
                else:
                    self.block(c, list_level=level)
                    first = False

    def _numbering_for(self, ordered: bool, start: int, ilvl: int) -> int:
        """A new ``w:abstractNum`` (nine levels of this list's kind, ``start`` at ``ilvl``) and its ``w:num``; the
        numId. Written into the numbering part when the document is built (:meth:`_insert_numbering`)."""
        if self._numbering is None:
            from docx.oxml.ns import qn

            self._numbering = self.doc.part.numbering_part.element
            nums = self._numbering.findall(qn("w:num"))
            abstracts = self._numbering.findall(qn("w:abstractNum"))
            self._next_num_id = max((int(x.get(qn("w:numId"))) for x in nums), default=0) + 1
            self._next_abstract_id = max((int(x.get(qn("w:abstractNumId"))) for x in abstracts), default=-1) + 1
        num_id, abstract_id = self._next_num_id, self._next_abstract_id
        self._next_num_id += 1
        self._next_abstract_id += 1
        levels = "".join(_lvl(k, ordered, start if k == ilvl else 1) for k in range(9))
        self._abstracts.append(
            f'<w:abstractNum w:abstractNumId="{abstract_id}"><w:multiLevelType w:val="multilevel"/>{levels}'
            "</w:abstractNum>"
        )
        self._nums.append(f'<w:num w:numId="{num_id}"><w:abstractNumId w:val="{abstract_id}"/></w:num>')
        return num_id

    def _insert_numbering(self) -> None:
        """The lists' definitions, parsed once: abstract ones before the first ``w:num`` (schema order)."""
        if not self._nums:
            return
        from docx.oxml.ns import qn

        fragment = _xml(f'<w:numbering xmlns:w="{W_NS}">{"".join(self._abstracts)}{"".join(self._nums)}</w:numbering>')
        first_num = self._numbering.find(qn("w:num"))
        for el in list(fragment):
            if el.tag == qn("w:abstractNum") and first_num is not None:
                first_num.addprevious(el)
            else:
                self._numbering.append(el)

    def code(self, text: str, language: str | None, *, num: str = "") -> None:
        from pygments import lex

        para = self.para(CODE_STYLE, num=num)
        items = para.items
        rprs = self._token_rpr
        for ttype, value in lex(text.rstrip("\n"), highlight.lexer(language)):
            rpr = rprs.get(ttype)
            if rpr is None:
                rpr = rprs[ttype] = self._token_style(ttype)
            for i, line in enumerate(value.split("\n")):
                if i:
                    items.append(_BREAK_RUN)
                if line:
                    items.append(f"<w:r>{rpr}{_run_content(line)}</w:r>")
        self.add(para)

    def _token_style(self, ttype: Any) -> str:
        """The run properties for a Pygments token type: its highlighting as a character style (``Tok Keyword``,
        ``Tok Name Function``… in the code theme's bold, italic and colour), added to the styles part on first use
        (as markup: python-docx's ``add_style`` scans every style by name, ~5 ms each)."""
        style = self.code_style.style_for_token(ttype)
        if not (style.get("bold") or style.get("italic") or style.get("color")):
            return ""
        parts = str(ttype).split(".")[1:]
        name, style_id = "Tok " + " ".join(parts), "Tok" + "".join(parts)
        props = ("<w:b/>" if style.get("bold") else "") + ("<w:i/>" if style.get("italic") else "")
        if style.get("color"):
            props += f'<w:color w:val="{style["color"].upper()}"/>'
        self.doc.styles.element.append(
            _xml(
                f'<w:style xmlns:w="{W_NS}" w:type="character" w:customStyle="1" w:styleId="{style_id}">'
                f'<w:name w:val="{name}"/><w:rPr>{props}</w:rPr></w:style>'
            )
        )
        return f'<w:rPr><w:rStyle w:val="{style_id}"/></w:rPr>'

    def table(self, n: Node) -> None:
        from docx.shared import Emu

        rows = n.children
        cols = max((len(r.children) for r in rows), default=0)
        if not rows or not cols:
            return
        width = Emu(self._block_width // cols).twips
        tc_pr = f'<w:tcPr><w:tcW w:type="dxa" w:w="{width}"/></w:tcPr>'
        out = [
            f'<w:tbl><w:tblPr><w:tblStyle w:val="{self.style_id("Table Grid")}"/><w:tblW w:type="auto" w:w="0"/>'
            '<w:tblLook w:firstColumn="1" w:firstRow="1" w:lastColumn="0" w:lastRow="0" w:noHBand="0" '
            'w:noVBand="1" w:val="04A0"/></w:tblPr><w:tblGrid>',
            f'<w:gridCol w:w="{width}"/>' * cols,
            "</w:tblGrid>",
        ]
        for row in rows:
            header = bool(row.attributes.get("header"))
            out.append("<w:tr><w:trPr><w:tblHeader/></w:trPr>" if header else "<w:tr>")
            for cell in row.children:
                para = _Para(_ppr(jc=JC.get(cell.attributes.get("align") or "")))
                self.inlines(para, cell.children, bold=header)
                out.append(f"<w:tc>{tc_pr}{para.xml()}</w:tc>")
            out.append(f"<w:tc>{tc_pr}<w:p/></w:tc>" * (cols - len(row.children)))
            out.append("</w:tr>")
        out.append("</w:tbl>")
        self.out.append("".join(out))

    def figure(self, n: Node) -> None:
        asset = self.p.assets.get(n.node_id)
        if asset is None or asset.data is None:
            self.code(n.text or "", None)
            return
        para = _Para(_ppr(jc="center"))
        para.items.append(self._picture(asset, alt=diagram_alt(n)))
        self.add(para)

    def math_block(self, n: Node) -> None:
        asset = self.p.assets.get(n.node_id)
        if asset is not None and asset.kind == "omml" and asset.text:
            self.out.append(f"<w:p>{asset.text}</w:p>")
        elif asset is not None and asset.data:
            para = _Para(_ppr(jc="center"))
            para.items.append(self._picture(asset))
            self.add(para)
        else:
            para = self.para(CODE_STYLE)
            para.items.append(f"<w:r>{_run_content(n.text or '')}</w:r>")
            self.add(para)

    def _picture(self, asset: Asset, *, height_px: float | None = None, alt: str = "") -> str:
        """A picture run. At its CSS size (96 px per inch; PNG rasters are 3× denser, so they print at ~288 dpi), at
        most the text width; without a known size, the image's own size and dpi (python-docx reads them).
        ``height_px``: at that height instead (inline maths images)."""
        from docx.oxml.shape import CT_Inline
        from docx.shared import Inches, Length
        from lxml import etree

        r_id, image = self.doc.part.get_or_add_image(io.BytesIO(asset.data or b""))
        if height_px is not None:
            cx, cy = image.scaled_dimensions(None, Inches(height_px / 96.0))
        elif asset.width:
            cx, cy = image.scaled_dimensions(Inches(min(asset.width / 96.0, MAX_WIDTH_IN)), None)
        else:
            cx, cy = image.scaled_dimensions(None, None)
            limit = Inches(MAX_WIDTH_IN)
            if cx > limit:
                cx, cy = limit, Length(int(cy * limit / cx))
        inline = CT_Inline.new_pic_inline(self._shape_id, r_id, image.filename, cx, cy)
        if alt:  # the alt text Word's accessibility pane, screen readers and pandoc read
            inline.docPr.set("descr", _clean(alt))
        self._shape_id += 1
        return f"<w:r><w:drawing>{etree.tostring(inline, encoding='unicode')}</w:drawing></w:r>"

    # ---------------------------------------------------------------------------------------------- inlines
    def inlines(self, para: _Para, nodes: builtins.list[Node], **fmt: Any) -> None:
        self.children(para, nodes, fmt, None)

    def children(
        self, para: _Para, nodes: builtins.list[Node], fmt: dict[str, Any], target: builtins.list[str] | None
    ) -> None:
        """Sibling inlines in order. Raw HTML's safe inline tags (``<sup>``, ``<sub>``, ``<kbd>``, ``<mark>``,
        ``<u>``, ``<b>``, ``<i>``, ``<s>``… each its own node, opening and closing) format the siblings between
        them; ``<br>`` is a line break; any other raw HTML is dropped with a warning."""
        opened: builtins.list[str] = []
        for n in nodes:
            tag = _inline_tag(n) if n.type == "html" else None
            if tag is not None:
                closing, name = tag
                if name == "br":
                    para.items.append(_BREAK_RUN)
                elif closing:
                    if name in opened:
                        del opened[len(opened) - 1 - opened[::-1].index(name)]
                else:
                    opened.append(name)
                continue
            if opened:
                self.inline(para, n, {**fmt, **{INLINE_TAGS[t][0]: INLINE_TAGS[t][1] for t in opened}}, target)
            else:
                self.inline(para, n, fmt, target)

    def inline(self, para: _Para, n: Node, fmt: dict[str, Any], target: builtins.list[str] | None = None) -> None:
        """Text goes into ``target`` (a hyperlink) when there is one; anything else into the paragraph."""
        t = n.type
        if t == "text":
            self._text(para, n.text or "", fmt, target)
        elif t in ("emphasis", "strong", "strikethrough"):
            key = {"emphasis": "italic", "strong": "bold", "strikethrough": "strike"}[t]
            self.children(para, n.children, {**fmt, key: True}, target)
        elif t == "code_inline":
            self._text(para, n.text or "", {**fmt, "code": True}, target)
        elif t == "line_break":
            if n.attributes.get("hard"):
                para.items.append(_BREAK_RUN)
            else:
                self._text(para, " ", fmt, target)
        elif t == "link":
            href = str(n.attributes.get("href") or "")
            if href.lower().startswith(("http://", "https://", "mailto:")):
                link = self._hyperlink(para, href)
                self.children(para, n.children, {**fmt, "link": True}, link)
            else:
                self.children(para, n.children, fmt, target)
        elif t == "image":
            asset = self.p.assets.get(n.node_id)
            placed = False
            if asset is not None and asset.data and not self._in_note:
                try:  # the user's bytes: python-docx's header readers raise on a truncated or odd image
                    picture = self._picture(asset, alt=str(n.attributes.get("alt") or ""))
                    (target if target is not None else para.items).append(picture)  # a linked image stays linked
                    placed = True
                except Exception as exc:
                    self.p.warn(
                        "EXPORT_IMAGE_SKIPPED", n, f"Word cannot read this image ({type(exc).__name__}); alt text kept"
                    )
            if not placed and n.attributes.get("alt"):
                self._text(para, f"[{n.attributes['alt']}]", fmt, target)
        elif t == "math_inline":
            asset = self.p.assets.get(n.node_id)
            if asset is not None and asset.kind == "omml" and asset.text:
                para.items.append(asset.text)
            elif asset is not None and asset.data and not self._in_note:
                para.items.append(self._picture(asset, height_px=asset.height or 16))
            else:
                self._text(para, n.text or "", {**fmt, "code": True}, target)
        elif t == "footnote_ref":
            if self._in_note:  # a note citing a note: its number as text
                self._text(para, f"[{int(n.attributes.get('index', 0))}]", fmt, target)
            else:
                self._footnote_ref(para, int(n.attributes.get("index", 0)))
        elif t == "html":
            self._drop_html(n)
        else:
            self.children(para, n.children, fmt, target)

    def _drop_html(self, n: Node) -> None:
        what = n.attributes.get("unsupported") or "raw HTML other than the inline formatting tags"
        self.p.warn("EXPORT_CONTENT_DROPPED", n, f"{what} is not exported to DOCX")
        self.p.dropped.append(n.node_id)

    def _text(self, para: _Para, text: str, fmt: dict[str, Any], target: builtins.list[str] | None) -> None:
        if target is not None:  # in a hyperlink: the Hyperlink character style (inline code keeps it too)
            props = '<w:rStyle w:val="Hyperlink"/>' + _bis(fmt)
            target.append(f'<w:r><w:rPr>{props}</w:rPr><w:t xml:space="preserve">{escape(_clean(text))}</w:t></w:r>')
            return
        props = _bis(fmt)
        if fmt.get("code"):
            props = f'<w:rStyle w:val="{self.style_id(CODE_CHAR_STYLE)}"/>' + props
        rpr = f"<w:rPr>{props}</w:rPr>" if props else ""
        para.items.append(f"<w:r>{rpr}{_run_content(text)}</w:r>")

    def _hyperlink(self, para: _Para, url: str) -> builtins.list[str]:
        from docx.opc.constants import RELATIONSHIP_TYPE as RT

        r_id = self._link_part.relate_to(url, RT.HYPERLINK, is_external=True)
        link = [f'<w:hyperlink r:id="{_attr(r_id)}">']
        para.items.append(link)
        return link

    def _footnote_ref(self, para: _Para, index: int) -> None:
        fid = self.footnote_ids.setdefault(index, len(self.footnote_ids) + 1)
        para.items.append(
            f'<w:r><w:rPr><w:vertAlign w:val="superscript"/></w:rPr><w:footnoteReference w:id="{fid}"/></w:r>'
        )

    def _footnotes_part(self) -> None:
        """The footnotes part: each note's paragraphs with their formatting and links (the links' relationships on
        this part); other blocks in a note as their text; pictures as their alt text (their parts belong to the
        body)."""
        from docx.opc.packuri import PackURI
        from docx.opc.part import Part

        part = Part(PackURI("/word/footnotes.xml"), FOOTNOTES_CT, b"", self.doc.part.package)
        self._link_part, self._in_note = part, True
        bodies = [
            '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>',
            '<w:footnote w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p>'
            "</w:footnote>",
        ]
        small = {"small": True}
        for fn in self.p.document.footnotes:
            index = int(fn.attributes.get("index", 0))
            fid = self.footnote_ids.get(index)
            if fid is None:
                continue  # defined but never referenced: nothing points at it
            paras = []
            for i, c in enumerate(fn.children or [None]):
                para = _Para()
                if i == 0:
                    para.items.append('<w:r><w:rPr><w:vertAlign w:val="superscript"/></w:rPr><w:footnoteRef/></w:r>')
                    self._text(para, " ", small, None)
                if c is not None and c.type == "paragraph":
                    self.children(para, c.children, small, None)
                elif c is not None:
                    self._text(para, c.plain_text().strip(), small, None)
                paras.append(para.xml())
            bodies.append(f'<w:footnote w:id="{fid}">{"".join(paras)}</w:footnote>')
        self._in_note = False
        head = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        xml = f'{head}<w:footnotes xmlns:w="{W_NS}" xmlns:r="{R_NS}" xmlns:m="{M_NS}">{"".join(bodies)}</w:footnotes>'
        part._blob = xml.encode("utf-8")
        self.doc.part.relate_to(part, FOOTNOTES_RT)


_BULLETS = ("\u2022", "\u25e6", "\u25aa")


def _lvl(k: int, ordered: bool, start: int) -> str:
    """Level ``k`` of a list's numbering: decimal ``1.`` or a bullet, indented 0.25 in more per level."""
    left, hanging = 360 * (k + 1), 360
    fmt, text = ("decimal", f"%{k + 1}.") if ordered else ("bullet", _BULLETS[k % 3])
    return (
        f'<w:lvl w:ilvl="{k}"><w:start w:val="{start}"/><w:numFmt w:val="{fmt}"/><w:lvlText w:val="{text}"/>'
        f'<w:lvlJc w:val="left"/><w:pPr><w:ind w:left="{left}" w:hanging="{hanging}"/></w:pPr></w:lvl>'
    )


# Raw HTML inline tags with a Word equivalent: the formatting key they set, and its value.
INLINE_TAGS = {
    "sup": ("valign", "superscript"),
    "sub": ("valign", "subscript"),
    "kbd": ("code", True),
    "code": ("code", True),
    "samp": ("code", True),
    "mark": ("highlight", True),
    "u": ("underline", True),
    "ins": ("underline", True),
    "b": ("bold", True),
    "strong": ("bold", True),
    "i": ("italic", True),
    "em": ("italic", True),
    "s": ("strike", True),
    "del": ("strike", True),
    "strike": ("strike", True),
    "br": ("break", True),  # a line break, not a format
}
_TAG = re.compile(r"^<(/?)([a-zA-Z][a-zA-Z0-9]*)(?:\s[^>]*)?/?>$")


def _inline_tag(n: Node) -> tuple[bool, str] | None:
    """``(closing, name)`` when ``n`` is an inline raw tag in :data:`INLINE_TAGS` (one tag a node, as
    markdown-it splits inline HTML); None for anything else."""
    if n.attributes.get("block") is not False:
        return None
    m = _TAG.match((n.text or "").strip())
    if m is None or m.group(2).lower() not in INLINE_TAGS:
        return None
    return bool(m.group(1)), m.group(2).lower()


def _bis(fmt: dict[str, Any]) -> str:
    """Bold, italic, strike, 9 pt (``small``: footnotes), highlight, underline, super/subscript: in ``w:rPr``'s
    schema order."""
    return (
        ("<w:b/>" if fmt.get("bold") else "")
        + ("<w:i/>" if fmt.get("italic") else "")
        + ("<w:strike/>" if fmt.get("strike") else "")
        + ('<w:sz w:val="18"/>' if fmt.get("small") else "")
        + ('<w:highlight w:val="yellow"/>' if fmt.get("highlight") else "")
        + ('<w:u w:val="single"/>' if fmt.get("underline") else "")
        + (f'<w:vertAlign w:val="{fmt["valign"]}"/>' if fmt.get("valign") else "")
    )


def _xml(markup: str) -> Any:
    from docx.oxml import parse_xml

    return parse_xml(markup)


def render_docx(prepared: Prepared, options: ExportOptions) -> bytes:
    return DocxWriter(prepared, options).build()
