"""FunctionPlot → a static SVG (axes, grid, tick labels, axis labels, legend; theme colours), no browser."""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from ..models import FunctionPlot
from .grammar import compile_expression
from .sample import TIME_LIMIT_S, Piece, sample

DEFAULT_WIDTH = 640
DEFAULT_HEIGHT = 400
DEFAULT_DOMAIN = (-10.0, 10.0)
FONT = "'WenQuanYi Micro Hei', 'Noto Sans CJK SC', 'DejaVu Sans', sans-serif"


@dataclass(frozen=True, slots=True)
class Palette:
    background: str
    foreground: str
    grid: str
    axis: str
    series: tuple[str, ...]


PALETTES = {
    "light": Palette(
        "#ffffff",
        "#1f2328",
        "#e6e8eb",
        "#57606a",
        ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"),
    ),
    "dark": Palette(
        "#0d1117",
        "#e6edf3",
        "#30363d",
        "#8b949e",
        ("#58a6ff", "#ff7b72", "#3fb950", "#f0883e", "#d2a8ff", "#e3b341", "#ff9bce", "#39c5cf"),
    ),
}


@dataclass(frozen=True, slots=True)
class _Frame:
    """Data → pixel transform of the plot area."""

    x0: float
    x1: float
    y0: float
    y1: float
    left: float
    top: float
    width: float
    height: float

    def px(self, x: float) -> float:
        return self.left + (x - self.x0) / (self.x1 - self.x0) * self.width

    def py(self, y: float) -> float:
        span = self.y1 - self.y0
        y = min(max(y, self.y0 - 2 * span), self.y1 + 2 * span)  # off-screen points stay near (clipped anyway)
        return self.top + (self.y1 - y) / span * self.height


def render_plot_svg(plot: FunctionPlot, theme: str, width: int | None, height: int | None) -> tuple[str, int, int]:
    w, h = width or DEFAULT_WIDTH, height or DEFAULT_HEIGHT
    pal = PALETTES.get(theme, PALETTES["light"])
    fns = [compile_expression(e.expression) for e in plot.expressions]
    x0, x1 = plot.domain or DEFAULT_DOMAIN
    y0, y1 = plot.range or _auto_range(fns, x0, x1)
    left = 56 if plot.axes.y_label else 44
    bottom = 44 if plot.axes.x_label else 28
    frame = _Frame(x0, x1, y0, y1, left, 12, max(w - left - 16, 10), max(h - 12 - bottom, 10))
    clip = "fp-" + hashlib.sha256(repr((plot.model_dump(), theme, w, h)).encode()).hexdigest()[:10]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        f'font-family="{FONT}" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="{pal.background}"/>',
        f'<defs><clipPath id="{clip}"><rect x="{frame.left}" y="{frame.top}" width="{frame.width}" '
        f'height="{frame.height}"/></clipPath></defs>',
    ]
    parts += _axes(plot, frame, pal)
    parts.append(f'<g clip-path="url(#{clip})" fill="none" stroke-width="2" stroke-linejoin="round">')
    colors = [e.color or pal.series[i % len(pal.series)] for i, e in enumerate(plot.expressions)]
    deadline = time.monotonic() + TIME_LIMIT_S
    for fn, color in zip(fns, colors, strict=True):
        pieces = sample(fn, x0, x1, y0, y1, int(frame.width), deadline)
        if pieces:
            parts.append(f'<path stroke={quoteattr(color)} d="{_path(pieces, frame)}"/>')
    parts.append("</g>")
    parts += _legend(plot, colors, frame, pal)
    parts.append("</svg>")
    return "".join(parts), w, h


def _auto_range(fns: list, x0: float, x1: float) -> tuple[float, float]:
    values: list[float] = []
    for fn in fns:
        for i in range(401):
            y = fn(x0 + (x1 - x0) * i / 400)
            if math.isfinite(y):
                values.append(y)
    if not values:
        return (-1.0, 1.0)
    values.sort()
    lo = values[int(0.02 * (len(values) - 1))]
    hi = values[int(0.98 * (len(values) - 1))]
    if hi - lo < 1e-9:
        lo, hi = lo - 1, hi + 1
    pad = (hi - lo) * 0.08
    return (lo - pad, hi + pad)


def nice_ticks(lo: float, hi: float, target: int) -> list[float]:
    raw = (hi - lo) / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    ticks: list[float] = []
    v = first
    while v <= hi + step * 1e-9 and len(ticks) < 50:
        ticks.append(0.0 if abs(v) < step * 1e-9 else v)
        v += step
    return ticks


def _fmt(v: float) -> str:
    if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
        return f"{v:.2g}"
    return f"{v:.6g}"


def _axes(plot: FunctionPlot, f: _Frame, pal: Palette) -> list[str]:
    out: list[str] = []
    xt = nice_ticks(f.x0, f.x1, max(int(f.width / 80), 2))
    yt = nice_ticks(f.y0, f.y1, max(int(f.height / 50), 2))
    bottom, right = f.top + f.height, f.left + f.width
    if plot.axes.grid:
        lines = [f"M{f.px(x):.2f} {f.top:.2f}V{bottom:.2f}" for x in xt]
        lines += [f"M{f.left:.2f} {f.py(y):.2f}H{right:.2f}" for y in yt]
        out.append(f'<path stroke="{pal.grid}" stroke-width="1" fill="none" d="{"".join(lines)}"/>')
    axis_y = f.py(0.0) if f.y0 <= 0 <= f.y1 else bottom
    axis_x = f.px(0.0) if f.x0 <= 0 <= f.x1 else f.left
    out.append(
        f'<path stroke="{pal.axis}" stroke-width="1.2" fill="none" '
        f'd="M{f.left:.2f} {axis_y:.2f}H{right:.2f}M{axis_x:.2f} {f.top:.2f}V{bottom:.2f}"/>'
    )
    out.append(
        f'<rect x="{f.left}" y="{f.top}" width="{f.width}" height="{f.height}" fill="none" '
        f'stroke="{pal.axis}" stroke-width="1"/>'
    )
    out.append(f'<g fill="{pal.foreground}" font-size="11">')
    out += [f'<text x="{f.px(x):.2f}" y="{bottom + 14:.2f}" text-anchor="middle">{_fmt(x)}</text>' for x in xt]
    out += [f'<text x="{f.left - 5:.2f}" y="{f.py(y) + 4:.2f}" text-anchor="end">{_fmt(y)}</text>' for y in yt]
    out.append("</g>")
    if plot.axes.x_label:
        out.append(
            f'<text x="{f.left + f.width / 2:.2f}" y="{bottom + 34:.2f}" text-anchor="middle" '
            f'fill="{pal.foreground}">{escape(plot.axes.x_label)}</text>'
        )
    if plot.axes.y_label:
        cy = f.top + f.height / 2
        out.append(
            f'<text x="14" y="{cy:.2f}" text-anchor="middle" transform="rotate(-90 14 {cy:.2f})" '
            f'fill="{pal.foreground}">{escape(plot.axes.y_label)}</text>'
        )
    return out


def _legend(plot: FunctionPlot, colors: list[str], f: _Frame, pal: Palette) -> list[str]:
    names = [e.label or e.expression for e in plot.expressions]
    names = [n if len(n) <= 40 else n[:39] + "…" for n in names]
    box_w = 34 + 7 * max(_text_units(n) for n in names)
    box_h = 8 + 18 * len(names)
    x = f.left + f.width - box_w - 8
    y = f.top + 8
    out = [
        f'<g><rect x="{x:.2f}" y="{y:.2f}" width="{box_w:.2f}" height="{box_h}" rx="3" fill="{pal.background}" '
        f'fill-opacity="0.85" stroke="{pal.grid}"/>'
    ]
    for i, (name, color) in enumerate(zip(names, colors, strict=True)):
        ly = y + 14 + 18 * i
        out.append(f'<path stroke={quoteattr(color)} stroke-width="2.5" d="M{x + 8:.2f} {ly - 4:.2f}h18"/>')
        out.append(f'<text x="{x + 30:.2f}" y="{ly:.2f}" fill="{pal.foreground}">{escape(name)}</text>')
    out.append("</g>")
    return out


def _text_units(text: str) -> float:
    """Rough width in units of an average Latin glyph (a CJK glyph counts double)."""
    return sum(2.0 if ord(ch) > 0x2E80 else 1.0 for ch in text)


def _path(pieces: list[Piece], f: _Frame) -> str:
    out: list[str] = []
    for piece in pieces:
        x, y = piece[0]
        out.append(f"M{f.px(x):.2f} {f.py(y):.2f}")
        out.append("L" + " ".join(f"{f.px(x):.2f} {f.py(y):.2f}" for x, y in piece[1:]))
    return "".join(out)
