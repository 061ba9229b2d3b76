"""Adaptive sampling of ``y = f(x)`` into polyline pieces, broken at discontinuities.

Start from a uniform grid (one sample per output pixel), then bisect an interval while its midpoint is
far (in pixels) from the chord or the two ends jump by more than the visible height. A jump that does not
shrink under bisection down to the depth limit is a discontinuity (``tan`` at π/2, ``1/x`` at 0): the path is
broken there, so no vertical line crosses an asymptote. NaN/inf (outside the domain of ``sqrt``/``log``) break
the path too, with the edge of the defined part located by bisection.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

MAX_DEPTH = 10
MAX_EVALUATIONS = 60_000  # per expression: a wildly oscillating f (sin(1/x)) stays bounded in time
TIME_LIMIT_S = 5.0  # per plot: 16 long oscillating expressions at 8192 px took ~30 s of CPU without it
Fn = Callable[[float], float]
Piece = list[tuple[float, float]]
Point = tuple[float, float] | None  # None: the path breaks here


class SamplingTimeout(Exception):
    """The plot's sampling passed its deadline."""


def sample(fn: Fn, x0: float, x1: float, y0: float, y1: float, pixels: int, deadline: float = math.inf) -> list[Piece]:
    """Pieces of (x, y) points over [x0, x1]; [y0, y1] is the visible y range, ``pixels`` the plot width;
    :class:`SamplingTimeout` once ``time.monotonic()`` passes ``deadline``."""
    y_span = y1 - y0
    n = max(16, pixels)  # one sample per pixel; bisection adds what curvature and jumps need
    xs = [x0 + (x1 - x0) * i / n for i in range(n + 1)]
    ys = [fn(x) for x in xs]
    if time.monotonic() > deadline:
        raise SamplingTimeout
    tol = (y_span / max(pixels, 1)) * 0.5 if y_span > 0 else 1e-3  # half a pixel, in y units
    points: list[Point] = []
    ctx = _Ctx(fn, tol, y0 - y_span, y1 + y_span, deadline)
    for i in range(n):
        _segment(ctx, xs[i], ys[i], xs[i + 1], ys[i + 1], 0, points)
    points.append((xs[-1], ys[-1]) if math.isfinite(ys[-1]) else None)
    return _split(points)


class _Ctx:
    __slots__ = ("budget", "deadline", "fn", "hi", "lo", "tol")

    def __init__(self, fn: Fn, tol: float, lo: float, hi: float, deadline: float) -> None:
        self.fn, self.tol, self.lo, self.hi, self.deadline = fn, tol, lo, hi, deadline
        self.budget = MAX_EVALUATIONS


def _segment(ctx: _Ctx, a: float, fa: float, b: float, fb: float, depth: int, out: list[Point]) -> None:
    """Append ``(a, fa)`` and the refined points strictly between a and b (or break markers) to ``out``."""
    fin_a, fin_b = math.isfinite(fa), math.isfinite(fb)
    if not fin_a and not fin_b:
        out.append(None)
        return
    fm = _split_at(ctx, a, fa, b, fb) if depth < MAX_DEPTH and ctx.budget > 0 else None
    if fm is not None:
        ctx.budget -= 1
        if ctx.budget % 512 == 0 and time.monotonic() > ctx.deadline:
            raise SamplingTimeout
        m = (a + b) / 2
        _segment(ctx, a, fa, m, fm, depth + 1, out)
        _segment(ctx, m, fm, b, fb, depth + 1, out)
        return
    out.append((a, fa) if fin_a else None)
    if fin_a and (not fin_b or (depth >= MAX_DEPTH and abs(fb - fa) > 4 * ctx.tol)):
        out.append(None)  # undefined beyond, or still jumping at the finest level: a discontinuity


def _split_at(ctx: _Ctx, a: float, fa: float, b: float, fb: float) -> float | None:
    """f at the midpoint when [a, b] must be bisected, else None (the midpoint value is reused by the caller)."""
    if not (math.isfinite(fa) and math.isfinite(fb)):
        return ctx.fn((a + b) / 2)  # find the edge of the defined part
    if (fa > ctx.hi and fb > ctx.hi) or (fa < ctx.lo and fb < ctx.lo):
        return None  # both well off-screen on the same side: nothing to draw there
    fm = ctx.fn((a + b) / 2)
    if abs(fb - fa) > 8 * ctx.tol:
        return fm  # a jump of more than 4 px: steep, or a discontinuity
    return fm if not math.isfinite(fm) or abs(fm - (fa + fb) / 2) > ctx.tol else None


def _split(points: list[Point]) -> list[Piece]:
    pieces: list[Piece] = []
    current: Piece = []
    for point in points:
        if point is None:
            if len(current) > 1:
                pieces.append(current)
            current = []
        else:
            current.append(point)
    if len(current) > 1:
        pieces.append(current)
    return pieces
