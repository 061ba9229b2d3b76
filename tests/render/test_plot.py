"""Function plots without a browser: the whitelist grammar, the block parser's diagnostics, adaptive sampling
across discontinuities, and the SVG."""

from __future__ import annotations

import math
import time

import pytest
from lxml import etree

from sidecar.render.models import Diagnostic
from sidecar.render.plot.grammar import MAX_DEPTH, PARSE_FAILED, UNSAFE, ExpressionError, compile_expression
from sidecar.render.plot.parse import parse_function_plot
from sidecar.render.plot.sample import SamplingTimeout, sample
from sidecar.render.plot.svg import nice_ticks, render_plot_svg
from tests.support.render_check import assert_safe_svg, text_of


@pytest.mark.parametrize(
    ("text", "x", "want"),
    [
        ("sin(x)", 1.0, math.sin(1.0)),
        ("x^2/4", 3.0, 2.25),
        ("-x^2", 3.0, -9.0),
        ("2^3^2", 0.0, 512.0),
        ("2**3", 0.0, 8.0),
        ("-(x - 1) * +2", 3.0, -4.0),
        ("log(8, 2) + ln(e) + log10(100)", 0.0, 6.0),
        ("max(x, 1, 2) + min(x, 0) + pow(2, 3)", 5.0, 13.0),
        ("sqrt(abs(x)) + floor(1.5) + ceil(1.2) + exp(0)", -4.0, 6.0),
        ("pi * e", 0.0, math.pi * math.e),
        (".5e1 + 1.", 0.0, 6.0),
        ("atan(1)*4 - asin(1)*2 - acos(-1) + sinh(0) + cosh(0) + tanh(0) + tan(0) + cos(0)", 0.0, 2 - math.pi),
    ],
)
def test_the_grammar_evaluates(text: str, x: float, want: float) -> None:
    assert compile_expression(text)(x) == pytest.approx(want)


def test_undefined_points_are_nan_not_errors() -> None:
    for text, x in (("1/x", 0.0), ("sqrt(x)", -1.0), ("log(x)", 0.0), ("(-8)^(1/3)", 0.0), ("exp(x)", 1e6)):
        assert math.isnan(compile_expression(text)(x)), text


@pytest.mark.parametrize(
    ("text", "code", "column"),
    [
        ("__import__('os')", UNSAFE, 1),
        ("x.__class__", UNSAFE, 2),
        ("(lambda: 1)()", UNSAFE, 8),
        ("sin(x)(2)", UNSAFE, 7),
        ("(x)(2)", UNSAFE, 4),
        ("open(x)", UNSAFE, 1),
        ("eval(x)", UNSAFE, 1),
        ("x[0]", UNSAFE, 2),
        ("'a'", UNSAFE, 1),
        ("x; y", UNSAFE, 2),
        ("x" * 600, UNSAFE, 1),
        ("9^9^9^9", UNSAFE, 4),
        ("1e999", UNSAFE, 1),
        ("1" * 50, UNSAFE, 1),
        ("(" * (MAX_DEPTH + 5) + "x" + ")" * (MAX_DEPTH + 5), UNSAFE, MAX_DEPTH + 1),
        ("-" * 100 + "x", UNSAFE, MAX_DEPTH + 1),
        ("sin(x", PARSE_FAILED, 6),
        ("sin x", PARSE_FAILED, 5),
        ("2x", PARSE_FAILED, 2),
        ("x +", PARSE_FAILED, 4),
        ("", PARSE_FAILED, 1),
        ("sin(x, 2)", PARSE_FAILED, 1),
        ("1/0", PARSE_FAILED, 2),
        ("x ÷ 2", PARSE_FAILED, 3),
    ],
)
def test_the_grammar_refuses(text: str, code: str, column: int) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expression(text)
    assert (info.value.code, info.value.column) == (code, column), info.value.message


def test_a_block_parses_with_positions_and_warnings() -> None:
    block = (
        "expressions:\n  - expression: sin(x)\n    label: 正弦\n    color: '#f00'\n  - x^2/4\n"
        "domain: [-6, 6]\nextra: 1\n"
    )
    result = parse_function_plot(block)
    assert result.plot is not None
    assert [e.expression for e in result.plot.expressions] == ["sin(x)", "x^2/4"]
    assert result.plot.expressions[0].color == "#f00" and result.plot.domain == (-6.0, 6.0)
    assert result.diagnostics == [
        Diagnostic(
            severity="warning",
            code="FUNCTION_PLOT_UNKNOWN_KEY",
            message="unknown key 'extra' ignored",
            line=7,
            column=1,
        )
    ]
    wire = parse_function_plot('{"expressions": [{"expression": "x", "color": "red\\" onload=\\"x"}]}')
    assert wire.plot is not None and wire.plot.expressions[0].color is None
    assert wire.diagnostics[0].code == "FUNCTION_PLOT_COLOR_INVALID"


@pytest.mark.parametrize(
    ("block", "code", "line", "column"),
    [
        ("expressions:\n  - x + foo\n", UNSAFE, 2, 9),
        ('expressions:\n  - expression: "x.y"\n', UNSAFE, 2, 19),
        ("expressions: [a: b", PARSE_FAILED, 1, 19),
        ('{"expressions": ["x"', PARSE_FAILED, 1, 21),
        ("expressions: []\n", PARSE_FAILED, 1, 14),
        ("- x\n", PARSE_FAILED, 1, 1),
        ("expressions: [x]\ndomain: [1, 0]\n", PARSE_FAILED, 2, 9),
        ("expressions: [x]\nversion: 2\n", PARSE_FAILED, 2, 10),
        ("expressions: [x]\naxes: {grid: maybe}\n", PARSE_FAILED, 2, 14),
        ("", PARSE_FAILED, 1, 1),
    ],
)
def test_block_errors_are_diagnostics_with_a_position(block: str, code: str, line: int, column: int) -> None:
    result = parse_function_plot(block)
    assert result.plot is None
    first = next(d for d in result.diagnostics if d.severity == "error")
    assert (first.code, first.line, first.column) == (code, line, column), first.message


def test_sampling_breaks_at_asymptotes_and_steps() -> None:
    tan = sample(compile_expression("tan(x)"), -5, 5, -4, 4, 500)
    assert len(tan) == 5  # asymptotes at ±π/2, ±3π/2
    for piece in tan:  # no piece crosses an asymptote
        xs = [p[0] for p in piece]
        assert not any(min(xs) < k * math.pi / 2 < max(xs) for k in (-3, -1, 1, 3))
    assert len(sample(compile_expression("1/x"), -1, 1, -10, 10, 400)) == 2
    assert len(sample(compile_expression("floor(x)"), 0.5, 4.5, 0, 5, 400)) == 5
    sqrt = sample(compile_expression("sqrt(x)"), -4, 4, -1, 3, 400)
    assert len(sqrt) == 1 and sqrt[0][0][0] == pytest.approx(0, abs=0.02)
    assert len(sample(compile_expression("sin(x)"), -5, 5, -1, 1, 400)) == 1


def test_the_svg_has_axes_labels_legend_and_theme_colours() -> None:
    plot = parse_function_plot(
        "expressions:\n  - {expression: sin(x), label: 正弦}\n  - tan(x)\naxes: {xLabel: 时间, yLabel: y}\n"
    ).plot
    assert plot is not None
    light, w, h = render_plot_svg(plot, "light", 500, 300)
    dark, _, _ = render_plot_svg(plot, "dark", 500, 300)
    assert (w, h) == (500, 300)
    root = assert_safe_svg(light)
    assert {"正弦", "tan(x)", "时间", "y"} <= set(root.itertext())
    paths = root.findall(".//{http://www.w3.org/2000/svg}path[@stroke]")
    assert len(paths) >= 4  # grid, axes, two curves (+ legend swatches)
    assert "#ffffff" in light and "#0d1117" in dark and light != dark
    assert "0" in text_of(root)
    etree.fromstring(dark.encode())


def test_nice_ticks() -> None:
    assert nice_ticks(-10, 10, 5) == [-10, -5, 0, 5, 10]
    assert nice_ticks(0, 1, 4) == [0, 0.25, 0.5, 0.75, 1.0]


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdef", "bcdefg", strict=True)
)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("a: &a [*a]\n", "refers to itself"),  # was a RecursionError out of parse_function_plot
        ("a: &a {b: *a}\n", "refers to itself"),
        (LAUGHS, "more than"),  # 9^7 values once expanded: was minutes and gigabytes
    ],
)
def test_yaml_alias_cycles_and_bombs_are_parse_diagnostics(source: str, message: str) -> None:
    result = parse_function_plot(source)
    assert result.plot is None
    assert [d.code for d in result.diagnostics] == ["FUNCTION_PLOT_PARSE_FAILED"]
    assert message in result.diagnostics[0].message


HEAVY = "+".join(["sin(1/x)*cos(1/x)"] * 28)[:480].rsplit("+", 1)[0]


def test_sampling_stops_at_its_deadline() -> None:
    fn = compile_expression("sin(1/x)")
    with pytest.raises(SamplingTimeout):
        sample(fn, -1, 1, -1, 1, 800, deadline=time.monotonic() - 1)
    assert sample(fn, -1, 1, -1, 1, 800)  # no deadline: as before


def test_a_plot_too_expensive_to_sample_is_a_timeout_not_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    # review: 16 long oscillating expressions at 8192 px took ~28 s of CPU in one request
    import sidecar.render.plot.svg as svg_module
    from sidecar.render.errors import FunctionPlotRenderTimeout
    from sidecar.render.models import StaticRenderRequest
    from sidecar.render.renderers import FunctionPlotRenderer

    monkeypatch.setattr(svg_module, "TIME_LIMIT_S", 0.2)
    source = "expressions:\n" + "".join(f"  - expression: '{HEAVY}'\n" for _ in range(16))
    request = StaticRenderRequest.model_validate(
        {"kind": "function_plot", "source": source, "sourceHash": "0" * 64, "width": 8192, "height": 8192}
    )
    started = time.monotonic()
    with pytest.raises(FunctionPlotRenderTimeout) as caught:
        FunctionPlotRenderer()._render(request)
    assert caught.value.code == "FUNCTION_PLOT_RENDER_FAILED" and caught.value.status == 504
    assert time.monotonic() - started < 5
