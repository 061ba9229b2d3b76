"""``render/static``, ``render/function_plot/parse``, ``render/stats``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sidecar.core.common import EmptyParams
from sidecar.ipc.router import Method

from .models import (
    FunctionPlotParseParams,
    FunctionPlotParseResult,
    RenderStats,
    StaticRenderRequest,
    StaticRenderResult,
)

if TYPE_CHECKING:
    from sidecar.ipc.context import RequestContext

    from .service import RenderService


def methods(render: RenderService) -> list[Method[Any, Any]]:
    async def static(ctx: RequestContext, p: StaticRenderRequest) -> StaticRenderResult:
        return await render.render(p)

    async def parse_plot(ctx: RequestContext, p: FunctionPlotParseParams) -> FunctionPlotParseResult:
        return await render.parse_function_plot(p.source)

    async def stats(ctx: RequestContext, p: EmptyParams) -> RenderStats:
        return render.stats()

    return [
        Method(
            "render/static",
            StaticRenderRequest,
            StaticRenderResult,
            static,
            summary="Mermaid, function plot or TeX maths → sanitised SVG (or MathML); cached on disk by source "
            "hash, kind, theme, size and renderer version.",
        ),
        Method(
            "render/function_plot/parse",
            FunctionPlotParseParams,
            FunctionPlotParseResult,
            parse_plot,
            summary="A fenced function_plot block (YAML or JSON) → FunctionPlot + diagnostics with line/column.",
        ),
        Method("render/stats", EmptyParams, RenderStats, stats, summary="Render cache and warm-browser figures."),
    ]
