"""The DOCX exporter (python-docx): headings as Word's ``Heading N`` styles (the navigation pane works), nested
lists as ``List Bullet``/``List Number`` 1–3 (an ordered list restarts its numbering), tables with a repeated
header row, code blocks in a monospace ``Code`` style with Pygments colours, hyperlinks, images, real footnotes
(a footnotes part), diagrams and plots as PNG at ~288 dpi, maths as native equations (OMML) or, where the
conversion fails, an image plus a warning (both prepared in :mod:`sidecar.export.prepare`).

python-docx provides the package: the default template, styles, numbering, image parts, relationships, saving.
The body is written as WordprocessingML text and parsed once (python-docx's element proxies cost ~50 µs per run,
most of a 50-page build): the markup is the same python-docx would make for ``add_paragraph``/``add_run``/
``add_table``/``add_picture`` (``tests/export/test_docx.py`` compares the two), with elements in schema order.
"""

from __future__ import annotations

import io
import re
from typing import Any
from xml.sax.saxutils import escape

import anyio

from . import highlight
from .ast import Node
from .html import code_style
from .models import ExportOptions, ExportResult
from .types import Asset, Prepared

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
FOOTNOTES_CT = "application/vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml"
FOOTNOTES_RT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/footnotes"
MAX_WIDTH_IN = 6.3
CJK_FONT = "Microsoft YaHei"
MONO_FONT = "Consolas"
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


def _ppr(style_id: str | None = None, *, num: str = "", ind: str = "", jc: str | None = None) -> str:
    """``w:pPr`` with its children in schema order (pStyle, numPr, ind, jc); empty when there are none."""
    parts = f'<w:pStyle w:val="{style_id}"/>' if style_id else ""
    parts += num + ind
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
        self._style_nums: dict[str, tuple[str, str] | None] = {}
        self._setup_styles()
        self.code_style = highlight.style(code_style(options.code_theme) or "default")
        self._token_rpr: dict[Any, str] = {}
        self.out: list[str] = []  # the body's block-level markup, in order
        self._shape_id = self.doc.part.next_id  # the next picture id (python-docx: max id in the story + 1)
        self._block_width = self.doc._block_width  # text width of the (only) section, as add_table uses
        self._numbering: Any = None
        self._next_num_id = 0

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
        code = styles.add_style("Code", WD_STYLE_TYPE.PARAGRAPH)
        code.base_style = normal
        code.font.name = MONO_FONT
        code.font.size = Pt(9)
        code.element.get_or_add_pPr().append(  # before w:spacing, as the schema orders them
            _xml(f'<w:shd xmlns:w="{W_NS}" w:val="clear" w:color="auto" w:fill="F6F8FA"/>')
        )
        code.paragraph_format.space_before = Pt(4)
        code.paragraph_format.space_after = Pt(4)
        inline = styles.add_style("Code Char", WD_STYLE_TYPE.CHARACTER)
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
            self.p.warn("EXPORT_CONTENT_DROPPED", n, "raw HTML is not exported")
        else:
            para = _Para()
            self.inlines(para, n.children)
            self.add(para)

    def list(self, n: Node, level: int) -> None:
        from docx.shared import Inches

        ordered = bool(n.attributes.get("ordered"))
        depth = min(level, 3)
        style = ("List Number" if ordered else "List Bullet") + ("" if depth == 1 else f" {depth}")
        restart = self._restart(style, int(n.attributes.get("start") or 1)) if ordered else None
        num = ""
        if restart is not None:
            num = f'<w:numPr><w:ilvl w:val="{restart[1]}"/><w:numId w:val="{restart[0]}"/></w:numPr>'
        ind = f'<w:ind w:left="{Inches(0.25 * (level + 1)).twips}"/>' if level > 3 else ""
        for item in n.children:
            first = True
            for c in item.children:
                if c.type == "paragraph" and first:
                    para = self.para(style, num=num, ind=ind)
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

    def _list_num(self, style_name: str) -> tuple[str, str] | None:
        """The list style's ``(numId, ilvl)``, read once; None when the style has no numbering."""
        from docx.oxml.ns import qn

        if style_name not in self._style_nums:
            num_pr = self.doc.styles[style_name].element.find(qn("w:pPr") + "/" + qn("w:numPr"))
            found = None
            if num_pr is not None and num_pr.find(qn("w:numId")) is not None:
                ilvl = num_pr.find(qn("w:ilvl"))
                found = (
                    num_pr.find(qn("w:numId")).get(qn("w:val")),
                    ilvl.get(qn("w:val")) if ilvl is not None else "0",
                )
            self._style_nums[style_name] = found
        return self._style_nums[style_name]

    def _restart(self, style_name: str, start: int) -> tuple[int, str] | None:
        """A new numbering instance of the style's list, starting at ``start`` (so each ordered list restarts):
        its ``(numId, ilvl)``."""
        from docx.oxml.ns import qn

        base = self._list_num(style_name)
        if base is None:
            return None
        base_id, level = base
        if self._numbering is None:
            self._numbering = self.doc.part.numbering_part.element
            ids = [int(x.get(qn("w:numId"))) for x in self._numbering.findall(qn("w:num"))]
            self._next_num_id = max(ids, default=0) + 1
        abstract = None
        for num in self._numbering.findall(qn("w:num")):
            if num.get(qn("w:numId")) == base_id:
                abstract = num.find(qn("w:abstractNumId")).get(qn("w:val"))
        if abstract is None:
            return None
        new_id = self._next_num_id
        self._next_num_id += 1
        self._numbering.append(
            _xml(
                f'<w:num xmlns:w="{W_NS}" w:numId="{new_id}"><w:abstractNumId w:val="{abstract}"/>'
                f'<w:lvlOverride w:ilvl="{level}"><w:startOverride w:val="{start}"/></w:lvlOverride></w:num>'
            )
        )
        return new_id, level

    def code(self, text: str, language: str | None) -> None:
        from pygments import lex

        para = self.para("Code")
        items = para.items
        rprs = self._token_rpr
        for ttype, value in lex(text.rstrip("\n"), highlight.lexer(language)):
            rpr = rprs.get(ttype)
            if rpr is None:  # b, i, color: the order of w:rPr's children
                style = self.code_style.style_for_token(ttype)
                props = ("<w:b/>" if style.get("bold") else "") + ("<w:i/>" if style.get("italic") else "")
                if style.get("color"):
                    props += f'<w:color w:val="{style["color"].upper()}"/>'
                rpr = rprs[ttype] = f"<w:rPr>{props}</w:rPr>" if props else "<w:rPr/>"
            for i, line in enumerate(value.split("\n")):
                if i:
                    items.append(_BREAK_RUN)
                if line:
                    items.append(f"<w:r>{rpr}{_run_content(line)}</w:r>")
        self.add(para)

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
        para.items.append(self._picture(asset))
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
            para = self.para("Code")
            para.items.append(f"<w:r>{_run_content(n.text or '')}</w:r>")
            self.add(para)

    def _picture(self, asset: Asset, *, height_px: float | None = None) -> str:
        """A picture run. At its CSS size (96 px per inch; PNG rasters are 3× denser, so they print at ~288 dpi), at
        most the text width; without a known size, the image's own size and dpi (python-docx reads them).
        ``height_px``: at that height instead (inline maths images)."""
        from docx.oxml.shape import CT_Inline
        from docx.shared import Inches
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
                cx, cy = limit, int(cy * limit / cx)
        inline = CT_Inline.new_pic_inline(self._shape_id, r_id, image.filename, cx, cy)
        self._shape_id += 1
        return f"<w:r><w:drawing>{etree.tostring(inline, encoding='unicode')}</w:drawing></w:r>"

    # ---------------------------------------------------------------------------------------------- inlines
    def inlines(self, para: _Para, nodes: list[Node], **fmt: Any) -> None:
        for n in nodes:
            self.inline(para, n, fmt)

    def inline(self, para: _Para, n: Node, fmt: dict[str, Any], target: list[str] | None = None) -> None:
        """Text goes into ``target`` (a hyperlink) when there is one; anything else into the paragraph."""
        t = n.type
        if t == "text":
            self._text(para, n.text or "", fmt, target)
        elif t in ("emphasis", "strong", "strikethrough"):
            key = {"emphasis": "italic", "strong": "bold", "strikethrough": "strike"}[t]
            for c in n.children:
                self.inline(para, c, {**fmt, key: True}, target)
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
                for c in n.children:
                    self.inline(para, c, {**fmt, "link": True}, link)
            else:
                for c in n.children:
                    self.inline(para, c, fmt, target)
        elif t == "image":
            asset = self.p.assets.get(n.node_id)
            placed = False
            if asset is not None and asset.data:
                try:  # the user's bytes: python-docx's header readers raise on a truncated or odd image
                    para.items.append(self._picture(asset))
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
            elif asset is not None and asset.data:
                para.items.append(self._picture(asset, height_px=asset.height or 16))
            else:
                self._text(para, n.text or "", {**fmt, "code": True}, target)
        elif t == "footnote_ref":
            self._footnote_ref(para, int(n.attributes.get("index", 0)))
        elif t == "html":
            self.p.warn("EXPORT_CONTENT_DROPPED", n, "raw HTML is not exported")
        else:
            for c in n.children:
                self.inline(para, c, fmt, target)

    def _text(self, para: _Para, text: str, fmt: dict[str, Any], target: list[str] | None) -> None:
        if target is not None:  # in a hyperlink: the Hyperlink character style (inline code keeps it too)
            props = '<w:rStyle w:val="Hyperlink"/>' + _bis(fmt)
            target.append(f'<w:r><w:rPr>{props}</w:rPr><w:t xml:space="preserve">{escape(_clean(text))}</w:t></w:r>')
            return
        props = _bis(fmt)
        if fmt.get("code"):
            props = f'<w:rStyle w:val="{self.style_id("Code Char")}"/>' + props
        rpr = f"<w:rPr>{props}</w:rPr>" if props else ""
        para.items.append(f"<w:r>{rpr}{_run_content(text)}</w:r>")

    def _hyperlink(self, para: _Para, url: str) -> list[str]:
        from docx.opc.constants import RELATIONSHIP_TYPE as RT

        r_id = self.doc.part.relate_to(url, RT.HYPERLINK, is_external=True)
        link = [f'<w:hyperlink r:id="{_attr(r_id)}">']
        para.items.append(link)
        return link

    def _footnote_ref(self, para: _Para, index: int) -> None:
        fid = self.footnote_ids.setdefault(index, len(self.footnote_ids) + 1)
        para.items.append(
            f'<w:r><w:rPr><w:vertAlign w:val="superscript"/></w:rPr><w:footnoteReference w:id="{fid}"/></w:r>'
        )

    def _footnotes_part(self) -> None:
        from docx.opc.packuri import PackURI
        from docx.opc.part import Part

        bodies = [
            '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>',
            '<w:footnote w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p>'
            "</w:footnote>",
        ]
        for fn in self.p.document.footnotes:
            index = int(fn.attributes.get("index", 0))
            fid = self.footnote_ids.get(index)
            if fid is None:
                continue  # defined but never referenced: nothing points at it
            text = " ".join(c.plain_text() for c in fn.children).strip()
            bodies.append(
                f'<w:footnote w:id="{fid}"><w:p><w:r><w:rPr><w:vertAlign w:val="superscript"/></w:rPr>'
                f'<w:footnoteRef/></w:r><w:r><w:rPr><w:sz w:val="18"/></w:rPr>'
                f'<w:t xml:space="preserve"> {escape(_clean(text))}</w:t></w:r></w:p></w:footnote>'
            )
        head = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        xml = f'{head}<w:footnotes xmlns:w="{W_NS}">{"".join(bodies)}</w:footnotes>'
        part = Part(PackURI("/word/footnotes.xml"), FOOTNOTES_CT, xml.encode("utf-8"), self.doc.part.package)
        self.doc.part.relate_to(part, FOOTNOTES_RT)


def _bis(fmt: dict[str, Any]) -> str:
    """Bold, italic, strike: in ``w:rPr``'s schema order."""
    return (
        ("<w:b/>" if fmt.get("bold") else "")
        + ("<w:i/>" if fmt.get("italic") else "")
        + ("<w:strike/>" if fmt.get("strike") else "")
    )


def _xml(markup: str) -> Any:
    from docx.oxml import parse_xml

    return parse_xml(markup)


def render_docx(prepared: Prepared, options: ExportOptions) -> bytes:
    return DocxWriter(prepared, options).build()


class DocxExporter:
    format = "docx"

    async def export(self, document: Prepared, options: ExportOptions) -> ExportResult:
        content = await anyio.to_thread.run_sync(render_docx, document, options, abandon_on_cancel=True)
        return ExportResult(content=content)
