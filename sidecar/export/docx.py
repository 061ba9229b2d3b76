"""The DOCX exporter (python-docx): headings as Word's ``Heading N`` styles (the navigation pane works), nested
lists as ``List Bullet``/``List Number`` 1–3 (an ordered list restarts its numbering), tables with a repeated
header row, code blocks in a monospace ``Code`` style with Pygments colours, hyperlinks, images, real footnotes
(a footnotes part), diagrams and plots as PNG at ~288 dpi, maths as native equations (OMML) or, where the
conversion fails, an image plus a warning (both prepared in :mod:`sidecar.export.prepare`)."""

from __future__ import annotations

import io
from typing import Any
from xml.sax.saxutils import escape

import anyio

from .ast import Node
from .html import code_style
from .models import ExportOptions, ExportResult
from .types import Prepared

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
FOOTNOTES_CT = "application/vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml"
FOOTNOTES_RT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/footnotes"
MAX_WIDTH_IN = 6.3
CJK_FONT = "Microsoft YaHei"
MONO_FONT = "Consolas"


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
        from pygments.styles import get_style_by_name

        self.code_style = get_style_by_name(code_style(options.code_theme) or "default")

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
        """A style's id, looked up once (python-docx scans every style on each ``style=`` assignment)."""
        sid = self._style_ids.get(name)
        if sid is None:
            sid = self._style_ids[name] = self.doc.styles[name].style_id
        return sid

    def para(self, container: Any, style: str | None = None) -> Any:
        para = container.add_paragraph()
        if style is not None:
            para._p.get_or_add_pPr().style = self.style_id(style)
        return para

    # ------------------------------------------------------------------------------------------- document
    def build(self) -> bytes:
        doc = self.p.document
        if self.options.include_title and not (
            doc.root.children
            and doc.root.children[0].type == "heading"
            and doc.root.children[0].attributes["level"] == 1
        ):
            self.para(self.doc, "Title").add_run(doc.title)
        if self.options.include_metadata:
            for key, value in self.p.metadata.items():
                self.doc.add_paragraph(f"{key}: {value}")
        self.doc.core_properties.title = doc.title
        for child in doc.root.children:
            self.block(child, self.doc)
        if doc.footnotes:
            self._footnotes_part()
        out = io.BytesIO()
        self.doc.save(out)
        return out.getvalue()

    def block(self, n: Node, container: Any, *, list_level: int = 0, list_style: str | None = None) -> None:
        self.count += 1
        if self.count % 32 == 0:
            self.p.check_cancelled()
        t = n.type
        if t == "heading":
            level = max(1, min(9, int(n.attributes.get("level", 1))))
            para = self.para(container, f"Heading {level}")
            self.inlines(para, n.children)
        elif t == "paragraph":
            para = container.add_paragraph()
            self.inlines(para, n.children)
            if len(n.children) == 1 and n.children[0].type == "image":
                from docx.enum.text import WD_ALIGN_PARAGRAPH

                para.alignment = WD_ALIGN_PARAGRAPH.CENTER
        elif t == "list":
            self.list(n, container, list_level + 1)
        elif t == "blockquote":
            for c in n.children:
                if c.type == "paragraph":
                    para = self.para(container, "Quote")
                    self.inlines(para, c.children)
                else:
                    self.block(c, container)
        elif t == "code_block":
            self.code(container, n.text or "", n.attributes.get("language"))
        elif t == "thematic_break":
            para = container.add_paragraph()
            para._p.get_or_add_pPr().append(
                _xml(
                    f'<w:pBdr xmlns:w="{W_NS}"><w:bottom w:val="single" w:sz="6" w:space="1" w:color="999999"/>'
                    "</w:pBdr>"
                )
            )
        elif t == "table":
            self.table(n, container)
        elif t == "math_block":
            self.math_block(n, container)
        elif t in ("mermaid", "function_plot"):
            self.figure(n, container)
        elif t == "html":
            self.p.warn("EXPORT_CONTENT_DROPPED", n, "raw HTML is not exported")
        else:
            para = container.add_paragraph()
            self.inlines(para, n.children)

    def list(self, n: Node, container: Any, level: int) -> None:
        ordered = bool(n.attributes.get("ordered"))
        depth = min(level, 3)
        style = ("List Number" if ordered else "List Bullet") + ("" if depth == 1 else f" {depth}")
        num_id = self._restart(style, int(n.attributes.get("start") or 1)) if ordered else None
        for item in n.children:
            first = True
            for c in item.children:
                if c.type == "paragraph" and first:
                    para = self.para(container, style)
                    if level > 3:
                        from docx.shared import Inches

                        para.paragraph_format.left_indent = Inches(0.25 * (level + 1))
                    if num_id is not None:
                        _set_num(para, num_id, self.doc.styles[style].element)
                    checked = item.attributes.get("checked")
                    if checked is not None:
                        para.add_run("☑ " if checked else "☐ ")
                    self.inlines(para, c.children)
                    first = False
                elif c.type == "list":
                    self.list(c, container, level + 1)
                elif c.type == "paragraph":
                    para = self.para(container, "List Continue" + ("" if depth == 1 else f" {depth}"))
                    self.inlines(para, c.children)
                else:
                    self.block(c, container, list_level=level)
                    first = False

    def _restart(self, style_name: str, start: int) -> int | None:
        """A new numbering instance of the style's list, starting at ``start`` (so each ordered list restarts)."""
        from docx.oxml.ns import qn

        style = self.doc.styles[style_name].element
        num_pr = style.find(qn("w:pPr") + "/" + qn("w:numPr"))
        if num_pr is None or num_pr.find(qn("w:numId")) is None:
            return None
        base_id = num_pr.find(qn("w:numId")).get(qn("w:val"))
        numbering = self.doc.part.numbering_part.element
        abstract = None
        for num in numbering.findall(qn("w:num")):
            if num.get(qn("w:numId")) == base_id:
                abstract = num.find(qn("w:abstractNumId")).get(qn("w:val"))
        if abstract is None:
            return None
        ids = [int(x.get(qn("w:numId"))) for x in numbering.findall(qn("w:num"))]
        new_id = max(ids, default=0) + 1
        ilvl = num_pr.find(qn("w:ilvl"))
        level = ilvl.get(qn("w:val")) if ilvl is not None else "0"
        numbering.append(
            _xml(
                f'<w:num xmlns:w="{W_NS}" w:numId="{new_id}"><w:abstractNumId w:val="{abstract}"/>'
                f'<w:lvlOverride w:ilvl="{level}"><w:startOverride w:val="{start}"/></w:lvlOverride></w:num>'
            )
        )
        return new_id

    def code(self, container: Any, text: str, language: str | None) -> None:
        from docx.shared import RGBColor
        from pygments import lex
        from pygments.lexers import TextLexer, get_lexer_by_name
        from pygments.util import ClassNotFound

        try:
            lexer = get_lexer_by_name(language, stripnl=False) if language else TextLexer(stripnl=False)
        except ClassNotFound:
            lexer = TextLexer(stripnl=False)
        para = self.para(container, "Code")
        for ttype, value in lex(text.rstrip("\n"), lexer):
            style = self.code_style.style_for_token(ttype)
            lines = value.split("\n")
            for i, line in enumerate(lines):
                if i:
                    para.add_run().add_break()
                if not line:
                    continue
                run = para.add_run(line)
                if style.get("color"):
                    run.font.color.rgb = RGBColor.from_string(style["color"].upper())
                run.bold = bool(style.get("bold")) or None
                run.italic = bool(style.get("italic")) or None

    def table(self, n: Node, container: Any) -> None:
        from docx.enum.text import WD_ALIGN_PARAGRAPH

        rows = n.children
        cols = max((len(r.children) for r in rows), default=0)
        if not rows or not cols:
            return
        table = container.add_table(rows=len(rows), cols=cols)
        table.style = self.doc.styles["Table Grid"]
        aligns = {
            "left": WD_ALIGN_PARAGRAPH.LEFT,
            "right": WD_ALIGN_PARAGRAPH.RIGHT,
            "center": WD_ALIGN_PARAGRAPH.CENTER,
        }
        for row, tr in zip(rows, table.rows, strict=True):
            header = bool(row.attributes.get("header"))
            if header:
                tr._tr.get_or_add_trPr().append(_xml(f'<w:tblHeader xmlns:w="{W_NS}"/>'))
            cells = tr.cells  # once per row: table.cell(r, c) walks the whole grid every call
            for c, cell in enumerate(row.children):
                para = cells[c].paragraphs[0]
                self.inlines(para, cell.children, bold=header)
                align = cell.attributes.get("align")
                if align in aligns:
                    para.alignment = aligns[align]

    def figure(self, n: Node, container: Any) -> None:
        asset = self.p.assets.get(n.node_id)
        if asset is None or asset.data is None:
            self.code(container, n.text or "", None)
            return
        from docx.enum.text import WD_ALIGN_PARAGRAPH

        para = container.add_paragraph()
        para.alignment = WD_ALIGN_PARAGRAPH.CENTER
        self._picture(para, asset)

    def math_block(self, n: Node, container: Any) -> None:
        asset = self.p.assets.get(n.node_id)
        para = container.add_paragraph()
        if asset is not None and asset.kind == "omml" and asset.text:
            para._p.append(_xml(asset.text))
        elif asset is not None and asset.data:
            from docx.enum.text import WD_ALIGN_PARAGRAPH

            para.alignment = WD_ALIGN_PARAGRAPH.CENTER
            self._picture(para, asset)
        else:
            para._p.get_or_add_pPr().style = self.style_id("Code")
            para.add_run(n.text or "")

    def _picture(self, para: Any, asset: Any) -> None:
        """At its CSS size (96 px per inch; PNG rasters are 3× denser, so they print at ~288 dpi), at most the
        text width; without a known size python-docx reads the image's own size and dpi."""
        from docx.shared import Inches

        run = para.add_run()
        if asset.width:
            run.add_picture(io.BytesIO(asset.data), width=Inches(min(asset.width / 96.0, MAX_WIDTH_IN)))
            return
        shape = run.add_picture(io.BytesIO(asset.data))
        limit = Inches(MAX_WIDTH_IN)
        if shape.width > limit:
            shape.height = int(shape.height * limit / shape.width)
            shape.width = limit

    # ---------------------------------------------------------------------------------------------- inlines
    def inlines(self, para: Any, nodes: list[Node], **fmt: Any) -> None:
        for n in nodes:
            self.inline(para, n, fmt)

    def inline(self, para: Any, n: Node, fmt: dict[str, Any], target: Any = None) -> None:
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
                para.add_run().add_break()
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
                    self._picture(para, asset)
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
                para._p.append(_xml(asset.text))
            elif asset is not None and asset.data:
                from docx.shared import Inches

                para.add_run().add_picture(io.BytesIO(asset.data), height=Inches((asset.height or 16) / 96.0))
            else:
                self._text(para, n.text or "", {**fmt, "code": True}, target)
        elif t == "footnote_ref":
            self._footnote_ref(para, int(n.attributes.get("index", 0)))
        elif t == "html":
            self.p.warn("EXPORT_CONTENT_DROPPED", n, "raw HTML is not exported")
        else:
            for c in n.children:
                self.inline(para, c, fmt, target)

    def _text(self, para: Any, text: str, fmt: dict[str, Any], target: Any) -> None:
        if target is not None:
            run_xml = _run_xml(text, fmt)
            target.append(_xml(run_xml))
            return
        run = para.add_run(text)
        if fmt.get("bold"):
            run.bold = True
        if fmt.get("italic"):
            run.italic = True
        if fmt.get("strike"):
            run.font.strike = True
        if fmt.get("code"):
            run._r.get_or_add_rPr().style = self.style_id("Code Char")

    def _hyperlink(self, para: Any, url: str) -> Any:
        from docx.opc.constants import RELATIONSHIP_TYPE as RT
        from docx.oxml.ns import qn

        r_id = para.part.relate_to(url, RT.HYPERLINK, is_external=True)
        link = para._p.makeelement(qn("w:hyperlink"), {qn("r:id"): r_id})
        para._p.append(link)
        return link

    def _footnote_ref(self, para: Any, index: int) -> None:
        fid = self.footnote_ids.setdefault(index, len(self.footnote_ids) + 1)
        para._p.append(
            _xml(
                f'<w:r xmlns:w="{W_NS}"><w:rPr><w:vertAlign w:val="superscript"/></w:rPr>'
                f'<w:footnoteReference w:id="{fid}"/></w:r>'
            )
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
                f'<w:t xml:space="preserve"> {escape(text)}</w:t></w:r></w:p></w:footnote>'
            )
        head = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        xml = f'{head}<w:footnotes xmlns:w="{W_NS}">{"".join(bodies)}</w:footnotes>'
        part = Part(PackURI("/word/footnotes.xml"), FOOTNOTES_CT, xml.encode("utf-8"), self.doc.part.package)
        self.doc.part.relate_to(part, FOOTNOTES_RT)


def _run_xml(text: str, fmt: dict[str, Any]) -> str:
    props = ['<w:rStyle w:val="Hyperlink"/>'] if fmt.get("link") else []
    if fmt.get("bold"):
        props.append("<w:b/>")
    if fmt.get("italic"):
        props.append("<w:i/>")
    if fmt.get("strike"):
        props.append("<w:strike/>")
    rpr = f"<w:rPr>{''.join(props)}</w:rPr>" if props else ""
    return f'<w:r xmlns:w="{W_NS}">{rpr}<w:t xml:space="preserve">{escape(text)}</w:t></w:r>'


def _set_num(para: Any, num_id: int, style: Any) -> None:
    from docx.oxml.ns import qn

    ppr = para._p.get_or_add_pPr()
    existing = ppr.find(qn("w:numPr"))
    if existing is not None:
        ppr.remove(existing)
    style_pr = style.find(qn("w:pPr") + "/" + qn("w:numPr") + "/" + qn("w:ilvl"))
    level = style_pr.get(qn("w:val")) if style_pr is not None else "0"
    ppr.append(_xml(f'<w:numPr xmlns:w="{W_NS}"><w:ilvl w:val="{level}"/><w:numId w:val="{num_id}"/></w:numPr>'))


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
