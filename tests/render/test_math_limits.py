"""TeX → SVG: nesting that ziamath lays out in exponential time is refused before it starts."""

from __future__ import annotations

import time

import pytest

from sidecar.core.errors import SidecarError
from sidecar.render.math import MAX_SVG_NESTING, nesting_depth, tex_to_mathml, tex_to_svg


@pytest.mark.parametrize(
    ("tex", "depth"),
    [
        (r"x = \frac{-b \pm \sqrt{b^2 - 4ac}}{2a}", 2),
        (r"\left\{ x \right.", 1),  # \{ is a brace glyph, not a group
        (r"\leftarrow \rightarrow", 0),
        (r"\begin{pmatrix} a & b \end{pmatrix}", 1),
        (r"\sqrt{" * 12 + "x" + "}" * 12, 12),
        (r"\left(" * 12 + "x" + r"\right)" * 12, 12),
    ],
)
def test_nesting_depth(tex: str, depth: int) -> None:
    assert nesting_depth(tex) == depth


@pytest.mark.parametrize(
    "tex",
    [
        r"\sqrt{" * 20 + "x" + "}" * 20,  # review: ran for minutes (12 levels: ~7 s) on a worker thread
        r"\left(" * 16 + "x" + r"\right)" * 16,
        "x^{" * 30 + "y" + "}" * 30,
    ],
)
def test_too_deep_for_svg_is_refused_at_once_and_mathml_still_works(tex: str) -> None:
    started = time.monotonic()
    with pytest.raises(SidecarError) as caught:
        tex_to_svg(tex, "light")
    assert caught.value.code == "MATH_PARSE_FAILED" and str(MAX_SVG_NESTING) in caught.value.message
    assert time.monotonic() - started < 2
    assert tex_to_mathml(tex)[0].startswith("<math")
