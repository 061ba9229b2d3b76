"""The DOCX writer writes the body as markup: it must be what python-docx's own API makes (runs, tables, pictures),
keep the structure the export promises (styles, numbering, hyperlinks, footnotes, maths) and stay schema-ordered
and loadable whatever characters the text holds."""

from __future__ import annotations

import base64
import io
import zipfile

from docx import Document
from docx.oxml import parse_xml
from docx.oxml.ns import nsdecls, qn
from docx.shared import Inches
from lxml import etree

from sidecar.export.ast import parse_markdown
from sidecar.export.docx import DocxWriter, _run_content, render_docx
from sidecar.export.models import ExportOptions
from sidecar.export.types import Asset, Prepared

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
WP = "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"


def _shape(el: etree._Element) -> list:
    """Tag, attributes, text and children: what a reader sees (namespace declarations aside)."""
    return [el.tag, sorted(el.attrib.items()), el.text or None, [_shape(c) for c in el]]


def _body(data: bytes) -> etree._Element:
    return etree.fromstring(zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml")).find(f"{W}body")


def _export(md: str, assets: dict[str, Asset] | None = None, **options: object) -> tuple[bytes, Prepared]:
    prepared = Prepared(parse_markdown(md, None))
    for node in prepared.document.walk():
        if assets and node.type in assets:
            prepared.assets[node.node_id] = assets[node.type]
    return render_docx(prepared, ExportOptions.model_validate(options)), prepared


def test_runs_are_the_markup_python_docx_makes() -> None:
    para = Document().add_paragraph()
    for text in ["plain", " lead", "trail ", "a\tb", "line\nnext\r", "\t", '中文 & <b> "q"', "x\u3000"]:
        theirs = para.add_run(text)._r
        ours = parse_xml(f"<w:r {nsdecls('w')}>{_run_content(text)}</w:r>")
        assert _shape(ours) == _shape(theirs), text


def test_tables_and_pictures_are_the_markup_python_docx_makes() -> None:
    data, _ = _export(
        "| a | b | c |\n|---|---|---|\n| 1 |\n\n![p](x.png)", {"image": Asset("image", data=PNG, width=192.0)}
    )
    ours = _body(data)
    doc = Document()
    table = doc.add_table(rows=2, cols=3)
    table.style = doc.styles["Table Grid"]
    theirs = table._tbl
    ours_tbl = ours.find(f"{W}tbl")
    ours_tbl.find(f"{W}tr").remove(ours_tbl.find(f"{W}tr/{W}trPr"))  # the header row mark: ours only
    for tc in ours_tbl.iter(f"{W}tc"):
        p = tc.find(f"{W}p")
        for child in list(p):
            p.remove(child)  # cell content aside, the grid is python-docx's
    assert _shape(ours_tbl) == _shape(theirs)
    doc.add_paragraph().add_run().add_picture(io.BytesIO(PNG), width=Inches(2))
    theirs_pic = doc.element.body.findall(f"{W}p")[-1].find(f"{W}r")
    ours_pic = ours.findall(f"{W}p")[-1].find(f"{W}r")
    doc_pr = ours_pic.find(f".//{{{WP}}}docPr")
    assert doc_pr.attrib.pop("descr") == "p"  # the alt text: ours only
    assert _shape(ours_pic) == _shape(theirs_pic)


def test_structure_styles_numbering_links_footnotes_maths_pictures() -> None:
    md = (
        "# T\n\nSee [**the** `x` $m$](https://example.org/?a=1&b=2) after.[^1]\n\n"
        "1. one\n   1. two\n      1. three\n         1. four\n2. next\n\n3. again\n\n"
        "```python\nif x:\n\treturn 1\n```\n\n| h |\n|:-:|\n| c |\n\n![a](a.png) ![b](b.png)\n\n[^1]: note\n"
    )
    omml = '<m:oMath xmlns:m="http://schemas.openxmlformats.org/officeDocument/2006/math"><m:r><m:t>m</m:t></m:r></m:oMath>'
    data, _ = _export(md, {"math_inline": Asset("omml", text=omml), "image": Asset("image", data=PNG, width=10.0)})
    doc = Document(io.BytesIO(data))
    styles = [p.style.name for p in doc.paragraphs]
    assert styles[:7] == [
        "Heading 1",
        "Normal",
        "List Number",
        "List Number 2",
        "List Number 3",
        "List Number 3",
        "List Number",
    ]
    assert "Source Code" in styles and styles.count("List Number") == 3
    body = _body(data)
    link_p = body.findall(f"{W}p")[1]
    # the hyperlink holds the link's text runs (Hyperlink style, bold kept); its maths follows it (in the paragraph)
    assert [etree.QName(c).localname for c in link_p] == ["r", "hyperlink", "oMath", "r", "r"]
    link = link_p.find(f"{W}hyperlink")
    assert [r.find(f"{W}rPr/{W}rStyle").get(f"{W}val") for r in link] == ["Hyperlink"] * 5
    assert link[1].find(f"{W}rPr/{W}b") is not None and link[1].findtext(f"{W}t") == "the"
    assert doc.part.rels[link.get(qn("r:id"))].target_ref == "https://example.org/?a=1&b=2"
    # each list has its own numbering (w:num → its own w:abstractNum), nesting is w:ilvl; a 4th level is ilvl 3,
    # indented by its numbering level (no direct indentation), numPr after pStyle (schema order)
    numbered = [p for p in body.findall(f"{W}p") if p.find(f"{W}pPr/{W}numPr") is not None]
    num_ids = [p.find(f"{W}pPr/{W}numPr/{W}numId").get(f"{W}val") for p in numbered]
    assert len(num_ids) == 6 and len(set(num_ids)) == 4  # one, two, three, four; "next" and "again" in one
    assert [p.find(f"{W}pPr/{W}numPr/{W}ilvl").get(f"{W}val") for p in numbered] == ["0", "1", "2", "3", "0", "0"]
    assert [etree.QName(c).localname for c in numbered[3].find(f"{W}pPr")] == ["pStyle", "numPr"]
    numbering = etree.fromstring(zipfile.ZipFile(io.BytesIO(data)).read("word/numbering.xml"))
    abstract_of = {n.get(f"{W}numId"): n.find(f"{W}abstractNumId").get(f"{W}val") for n in numbering.iter(f"{W}num")}
    assert len({abstract_of[i] for i in num_ids}) == 4
    first_num = list(numbering).index(numbering.find(f"{W}num"))
    assert all(list(numbering).index(a) < first_num for a in numbering.iter(f"{W}abstractNum"))
    code = next(p for p in doc.paragraphs if p.style.name == "Source Code")
    assert code.text.rstrip("\n") == "if x:\n\treturn 1" and code._p.find(f".//{W}tab") is not None
    table = doc.tables[0]
    assert table.style.name == "Table Grid" and "w:tblHeader" in table.rows[0]._tr.xml
    assert table.rows[0].cells[0].paragraphs[0].runs[0].bold and table.rows[0].cells[0].paragraphs[0].alignment == 1
    assert len(doc.inline_shapes) == 2
    assert sorted(
        e.get("id") for e in body.iter("{http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing}docPr")
    ) == ["1", "2"]
    assert "note" in zipfile.ZipFile(io.BytesIO(data)).read("word/footnotes.xml").decode()
    assert body[-1].tag == f"{W}sectPr"


def test_characters_xml_cannot_hold_are_replaced_not_fatal() -> None:
    # the AST replaces them before any exporter sees them (vertical tab/form feed → space, the rest → U+FFFD)
    data, _ = _export("# T\x01itle\n\nbad \x08char [l\x0bnk](https://e.org) `c\x1fd`\n\n```\nx\x00y\n```\n")
    doc = Document(io.BytesIO(data))
    texts = [p.text for p in doc.paragraphs]
    assert texts[0] == "T\ufffditle" and texts[1] == "bad \ufffdchar l nk c\ufffdd"
    assert doc.core_properties.title == "T\ufffditle"


def test_a_title_longer_than_the_core_properties_allow_is_cut_there() -> None:
    data, _ = _export("# " + "长" * 400 + "\n")
    doc = Document(io.BytesIO(data))
    assert doc.paragraphs[0].text == "长" * 400 and doc.core_properties.title == "长" * 255


def test_writer_checks_cancellation_while_building() -> None:
    calls = []
    prepared = Prepared(parse_markdown("\n\n".join(f"p{i}" for i in range(100)), None))
    prepared.check_cancelled = lambda: calls.append(1)
    DocxWriter(prepared, ExportOptions()).build()
    assert len(calls) >= 3


def test_list_kinds_starts_and_code_highlighting_are_in_the_definitions() -> None:
    data, _ = _export("7. seven\n   - bullet\n\n     0. zero\n\n- a\n\n- b\n\n```python\ndef f(): pass\n```\n")
    body = _body(data)
    numbering = etree.fromstring(zipfile.ZipFile(io.BytesIO(data)).read("word/numbering.xml"))
    abstracts = {a.get(f"{W}abstractNumId"): a for a in numbering.iter(f"{W}abstractNum")}
    abstract_of = {n.get(f"{W}numId"): n.find(f"{W}abstractNumId").get(f"{W}val") for n in numbering.iter(f"{W}num")}
    seen = []
    for p in body.findall(f"{W}p"):
        num_pr = p.find(f"{W}pPr/{W}numPr")
        if num_pr is None:
            continue
        ilvl = num_pr.find(f"{W}ilvl").get(f"{W}val")
        lvl = abstracts[abstract_of[num_pr.find(f"{W}numId").get(f"{W}val")]].find(f"{W}lvl[@{W}ilvl='{ilvl}']")
        seen.append((ilvl, lvl.find(f"{W}numFmt").get(f"{W}val"), lvl.find(f"{W}start").get(f"{W}val")))
        # a loose list's items are spaced apart; a tight one keeps the style's contextual spacing
        assert (p.find(f"{W}pPr/{W}spacing") is not None) == (p.xpath("string(.)") in ("bullet", "a", "b"))
    bullets = [("0", "bullet", "1")] * 2
    assert seen == [("0", "decimal", "7"), ("1", "bullet", "1"), ("2", "decimal", "0"), *bullets]
    doc = Document(io.BytesIO(data))
    code = next(p for p in doc.paragraphs if p.style.name == "Source Code")
    tokens = {r.style.name for r in code.runs if r.style is not None and r.style.name.startswith("Tok ")}
    assert "Tok Keyword" in tokens and "Tok Name Function" in tokens


def test_safe_inline_html_tags_are_formatting_and_the_rest_a_warning() -> None:
    md = (
        "H<sub>2</sub>O is <mark>wet</mark>, E=mc<sup>2</sup>, press <kbd>Ctrl</kbd>+<kbd>C</kbd>,"
        " <u>under</u><br>next *<b>bold</b> <span>plain</span>*\n\n<div>block</div>\n"
    )
    data, prepared = _export(md, include_title=False)
    para = _body(data).find(f"{W}p")
    runs = [(r.findtext(f"{W}t") or ("BR" if r.find(f"{W}br") is not None else "")) for r in para.findall(f"{W}r")]
    props = {
        r.findtext(f"{W}t"): {etree.QName(c).localname: c.get(f"{W}val") for c in r.iterfind(f"{W}rPr/*")}
        for r in para.findall(f"{W}r")
        if r.findtext(f"{W}t")
    }
    assert props["2"] == {"vertAlign": "superscript"} and props["O is "] == {}  # the last "2": mc²
    assert para.findall(f"{W}r")[1].find(f"{W}rPr/{W}vertAlign").get(f"{W}val") == "subscript"  # H₂O
    assert next(v for k, v in props.items() if k == "wet") == {"highlight": "yellow"}
    assert props["Ctrl"] == {"rStyle": "VerbatimChar"} and props["under"] == {"u": "single"}
    assert props["bold"] == {"b": None, "i": None} and props["plain"] == {"i": None}
    assert "BR" in runs and runs.index("BR") == runs.index("under") + 1
    assert [w.split(" ", 3)[2] for w in prepared.warnings] == ["(html)"] * 3  # <span>, </span>, <div>
    assert all(w.startswith("EXPORT_CONTENT_DROPPED: node_") for w in prepared.warnings)
