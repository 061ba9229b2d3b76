"""TeX → MathML (latex2mathml) for HTML and → SVG (ziamath: glyphs as paths from its bundled STIX Two Math
font, so the SVG needs no font at display time) for PDF/DOCX images. Pure Python, no browser.

The source may carry its delimiters: ``$…$`` / ``\\(…\\)`` render inline, ``$$…$$`` / ``\\[…\\]`` as display
maths; without delimiters the source is TeX in display style.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import MathParseFailed

MAX_TEX_CHARS = 20_000
_DELIMITERS = (("$$", "$$", False), ("\\[", "\\]", False), ("\\(", "\\)", True), ("$", "$", True))
_UNKNOWN_COMMAND = re.compile(r"<mi>(\\[A-Za-z]+)</mi>")
_NON_LATIN = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\u3040-\u30ff]")
TEXT_COLOR = {"light": "#1f2328", "dark": "#e6edf3"}
# ziamath's layout time roughly doubles per nesting level of any group ({…}, \left…\right, \begin…\end):
# 12 nested \sqrt{ took ~7 s, 20 ran for minutes on a worker thread nothing can stop; 10 stays around a second
MAX_SVG_NESTING = 10
_GROUPING = re.compile(r"\\(?:left|right)(?![A-Za-z])|\\(?:begin|end)\s*\{[^{}]*\}|\\.|[{}]", re.S)


@dataclass(frozen=True, slots=True)
class Tex:
    body: str
    inline: bool


def split_delimiters(source: str) -> Tex:
    text = source.strip()
    for opening, closing, inline in _DELIMITERS:
        if len(text) >= len(opening) + len(closing) and text.startswith(opening) and text.endswith(closing):
            body = text[len(opening) : len(text) - len(closing)].strip()
            if body:
                return Tex(body, inline)
    return Tex(text, False)


def _check(tex: Tex) -> None:
    if not tex.body:
        raise MathParseFailed("The formula is empty.")
    if len(tex.body) > MAX_TEX_CHARS:
        raise MathParseFailed(f"The formula is longer than {MAX_TEX_CHARS} characters.")


def tex_to_mathml(source: str) -> tuple[str, list[str]]:
    import latex2mathml.converter

    tex = split_delimiters(source)
    _check(tex)
    try:
        mathml = latex2mathml.converter.convert(tex.body, display="inline" if tex.inline else "block")
    except Exception as exc:
        raise MathParseFailed(f"The TeX could not be parsed ({type(exc).__name__}).") from None
    return mathml, _unknown_commands(mathml)


def _unknown_commands(mathml: str) -> list[str]:
    names = sorted(set(_UNKNOWN_COMMAND.findall(mathml)))
    return [f"MATH_UNKNOWN_COMMAND: {name} is not a known TeX command; shown as text" for name in names]


def tex_to_svg(source: str, theme: str) -> tuple[str, list[str]]:
    import ziamath

    mathml, warnings = check_svg_source(source)
    tex = split_delimiters(source)
    try:
        svg = ziamath.Latex(tex.body, color=TEXT_COLOR.get(theme, TEXT_COLOR["light"]), inline=tex.inline).svg()
    except Exception as exc:
        raise MathParseFailed(f"The TeX could not be typeset ({type(exc).__name__}).") from None
    if _NON_LATIN.search(tex.body):
        warnings.append("MATH_GLYPHS_MISSING: the SVG maths font has no CJK glyphs; use the MathML output for CJK text")
    del mathml
    return svg, warnings


def check_svg_source(source: str) -> tuple[str, list[str]]:
    """The checks before SVG typesetting (TeX parses, nesting within :data:`MAX_SVG_NESTING`); the MathML and
    its warnings."""
    mathml, warnings = tex_to_mathml(source)  # validates, and reports unknown commands once
    tex = split_delimiters(source)
    if (depth := nesting_depth(tex.body)) > MAX_SVG_NESTING:
        raise MathParseFailed(
            f"The formula nests {depth} levels deep; SVG maths is limited to {MAX_SVG_NESTING} "
            "(the MathML output has no such limit)."
        )
    return mathml, warnings


def nesting_depth(body: str) -> int:
    """The deepest nesting of groups: ``{…}``, ``\\left…\\right``, ``\\begin…\\end`` (``\\{`` is a brace glyph)."""
    depth = deepest = 0
    for match in _GROUPING.finditer(body):
        token = match.group()
        if token in ("{", "\\left") or token.startswith("\\begin"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in ("}", "\\right") or token.startswith("\\end"):
            depth = max(depth - 1, 0)
    return deepest
