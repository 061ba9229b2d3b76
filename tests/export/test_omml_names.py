"""MathML → OMML conversion and its refusals; download file names."""

from __future__ import annotations

import pytest
from lxml import etree

from sidecar.export.omml import M_NS, OmmlUnsupported, mathml_to_omml
from sidecar.export.service import sanitize_file_name


def _omml(tex: str, display: str = "inline") -> etree._Element:
    import latex2mathml.converter

    return etree.fromstring(mathml_to_omml(latex2mathml.converter.convert(tex, display=display)).encode())


@pytest.mark.parametrize(
    ("tex", "element"),
    [
        ("x^2", "sSup"),
        ("a_i", "sSub"),
        ("\\sum_{i=1}^{n} i", "sSubSup"),
        ("\\frac{a}{b}", "f"),
        ("\\sqrt{x}", "rad"),
        ("\\sqrt[3]{x}", "rad"),
        ("\\hat{x}", "acc"),
        ("\\begin{matrix}1&2\\\\3&4\\end{matrix}", "m"),
        ("\\left( x \\right)", "r"),
    ],
)
def test_tex_constructs_become_word_equations(tex: str, element: str) -> None:
    root = _omml(tex)
    assert root.tag == f"{{{M_NS}}}oMath"
    assert root.find(f".//{{{M_NS}}}{element}") is not None


def test_display_maths_is_an_equation_paragraph() -> None:
    root = _omml("E=mc^2", display="block")
    assert root.tag == f"{{{M_NS}}}oMathPara" and root.find(f"{{{M_NS}}}oMath") is not None


def test_unknown_elements_are_refused_not_dropped() -> None:
    with pytest.raises(OmmlUnsupported):
        mathml_to_omml(
            '<math xmlns="http://www.w3.org/1998/Math/MathML"><mmultiscripts><mi>x</mi></mmultiscripts></math>'
        )
    with pytest.raises(OmmlUnsupported):
        mathml_to_omml("<notmath/>")
    with pytest.raises(OmmlUnsupported):
        mathml_to_omml("<math")


@pytest.mark.parametrize(
    ("title", "fmt", "expected"),
    [
        ("操作系统复习", "pdf", "操作系统复习.pdf"),
        ('a/b\\c:d*e?f"g<h>i|j', "html", "a b c d e f g h i j.html"),
        ("../../etc/passwd", "docx", "etc passwd.docx"),
        ("CON", "pdf", "export CON.pdf"),
        ("nul.txt", "pdf", "export nul.txt.pdf"),
        ("  ...  ", "pdf", "export.pdf"),
        ("tab\tnew\nline\x00nul", "pdf", "tab new line nul.pdf"),
        ("", "docx", "export.docx"),
    ],
)
def test_file_names_are_sanitised(title: str, fmt: str, expected: str) -> None:
    assert sanitize_file_name(title, fmt) == expected


def test_long_names_are_cut_on_a_character_boundary() -> None:
    name = sanitize_file_name("长" * 200, "pdf")
    assert len(name.encode()) <= 150 + 4 and name.endswith(".pdf") and "\ufffd" not in name


@pytest.mark.parametrize("title", ["CONIN$", "conout$.txt", "COM\u00b9", "lpt\u00b3.md"])
def test_the_other_windows_device_names_are_reserved_too(title: str) -> None:
    assert sanitize_file_name(title, "pdf") == f"export {title}.pdf"


def test_a_heading_of_megabytes_is_cut_in_linear_time() -> None:
    """Review: the cut re-encoded the whole title once per removed character (51 s for 200k CJK characters, on
    the event loop)."""
    import time

    start = time.perf_counter()
    name = sanitize_file_name("长" * 2_000_000, "docx")
    assert time.perf_counter() - start < 0.5
    assert name == "长" * 50 + ".docx"
    assert sanitize_file_name(" " * 10_000 + "标题", "pdf") == "标题.pdf"


def test_display_limits_on_a_large_operator_are_an_n_ary_object_with_its_operand() -> None:
    root = _omml("\\sum_{i=1}^{n} w_i + \\prod_{k} x", display="block")
    nary = root.findall(f".//{{{M_NS}}}nary")
    assert [n.find(f"{{{M_NS}}}naryPr/{{{M_NS}}}chr").get(f"{{{M_NS}}}val") for n in nary] == ["\u2211", "\u220f"]
    assert nary[0].find(f"{{{M_NS}}}e/{{{M_NS}}}sSub") is not None  # w_i is the sum's operand
    assert "".join(nary[0].find(f"{{{M_NS}}}sup").itertext()) == "n"
    assert nary[1].find(f"{{{M_NS}}}naryPr/{{{M_NS}}}supHide") is not None  # \prod_{k}: no upper limit
    assert root.find(f".//{{{M_NS}}}limUpp") is None and root.find(f".//{{{M_NS}}}limLow") is None
