"""The pure-Python renderers: function plots and TeX maths (no browser)."""

from __future__ import annotations

import anyio

from .errors import (
    FunctionPlotExpressionUnsafe,
    FunctionPlotParseFailed,
    FunctionPlotRenderFailed,
    FunctionPlotRenderTimeout,
)
from .math import check_svg_source, tex_to_mathml
from .mathworker import MathWorker
from .models import StaticRenderRequest
from .plot.grammar import UNSAFE
from .plot.parse import parse_function_plot
from .plot.sample import TIME_LIMIT_S, SamplingTimeout
from .plot.svg import render_plot_svg
from .types import Rendered

PLOT_REVISION = "function_plot-r1"


class FunctionPlotRenderer:
    kind = "function_plot"
    version = PLOT_REVISION

    def unavailable_reason(self) -> str | None:
        return None

    async def render(self, request: StaticRenderRequest) -> Rendered:
        return await anyio.to_thread.run_sync(self._render, request)

    def _render(self, request: StaticRenderRequest) -> Rendered:
        parsed = parse_function_plot(request.source)
        errors = [d for d in parsed.diagnostics if d.severity == "error"]
        if parsed.plot is None or errors:
            first = errors[0] if errors else None
            cls = FunctionPlotExpressionUnsafe if first and first.code == UNSAFE else FunctionPlotParseFailed
            where = f" (line {first.line}, column {first.column})" if first and first.line else ""
            raise cls(
                f"{first.message if first else 'The function plot could not be parsed'}{where}",
                details={
                    "diagnostics": [d.model_dump() for d in parsed.diagnostics],
                    "line": first.line if first else None,
                    "column": first.column if first else None,
                },
            )
        try:
            svg, width, height = render_plot_svg(parsed.plot, request.theme, request.width, request.height)
        except SamplingTimeout:
            raise FunctionPlotRenderTimeout(
                f"The function plot took longer than {TIME_LIMIT_S:g} s to sample; simplify its expressions."
            ) from None
        except (ValueError, ArithmeticError) as exc:
            raise FunctionPlotRenderFailed(f"The function plot could not be drawn ({type(exc).__name__}).") from None
        warnings = [f"{d.code}: {d.message}" + (f" (line {d.line})" if d.line else "") for d in parsed.diagnostics]
        return Rendered("image/svg+xml", svg, width, height, warnings)


def _math_version() -> str:
    from ..core.packages import installed_versions

    versions = installed_versions()
    return f"math-ziamath-{versions.get('ziamath', '?')}+latex2mathml-{versions.get('latex2mathml', '?')}+r1"


class MathRenderer:
    kind = "math"

    def __init__(self, worker: MathWorker) -> None:
        self.version = _math_version()
        self.worker = worker

    async def aclose(self) -> None:
        await self.worker.aclose()

    def unavailable_reason(self) -> str | None:
        import importlib.util

        missing = [m for m in ("latex2mathml", "ziamath") if importlib.util.find_spec(m) is None]
        return f"python package(s) {', '.join(missing)} not installed" if missing else None

    async def render(self, request: StaticRenderRequest) -> Rendered:
        if request.format == "mathml":  # linear time: a worker thread
            mathml, warnings = await anyio.to_thread.run_sync(tex_to_mathml, request.source)
            return Rendered("application/mathml+xml", mathml, 0, 0, warnings)
        await anyio.to_thread.run_sync(check_svg_source, request.source)  # refused here at once, no child needed
        svg, warnings = await self.worker.svg(request.source, request.theme)  # bounded in time, cancellable
        return Rendered("image/svg+xml", svg, 0, 0, warnings)
