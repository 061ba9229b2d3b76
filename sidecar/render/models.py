"""Static rendering types: StaticRenderRequest / StaticRenderResult (phase-2 §10.4) and the FunctionPlot model
with its parse result (§12.2). camelCase, exactly as the seed's TypeScript writes them (``sourceHash``,
``mimeType``, ``xLabel``), on the IR's :class:`~sidecar.ir.base.WireModel`.

Additions where the seed is silent (ipc_schema/README.md "Static rendering"): the kind ``math`` (TeX) with
an optional ``format`` (``svg`` default, or ``mathml``, answered as ``application/mathml+xml``), and the
stats object of ``render/stats``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from sidecar.ir.base import WireModel

RenderKind = Literal["mermaid", "function_plot", "math"]
RenderTheme = Literal["light", "dark"]
RenderMime = Literal["image/svg+xml", "image/png", "application/mathml+xml"]
MAX_SOURCE_CHARS = 256 * 1024
MAX_SIDE = 8192


class StaticRenderRequest(WireModel):
    model_config = ConfigDict(extra="forbid")

    kind: RenderKind
    source: str = Field(max_length=MAX_SOURCE_CHARS)
    source_hash: str = Field(min_length=1, max_length=200)
    """Lowercase hex SHA-256 of the UTF-8 ``source`` (a ``sha256:`` prefix is accepted); checked."""
    theme: RenderTheme = "light"
    width: int | None = Field(None, ge=16, le=MAX_SIDE)
    height: int | None = Field(None, ge=16, le=MAX_SIDE)
    format: Literal["svg", "mathml"] | None = None
    """Only for ``kind: math``: ``mathml`` for HTML, ``svg`` (default) for PDF/DOCX images."""


class StaticRenderResult(WireModel):
    mime_type: RenderMime
    content: str
    width: float
    height: float
    warnings: list[str] = Field(default_factory=list)


class FunctionPlotExpression(WireModel):
    expression: str
    label: str | None = None
    color: str | None = None


class FunctionPlotAxes(WireModel):
    x_label: str | None = None
    y_label: str | None = None
    grid: bool = True


class FunctionPlot(WireModel):
    version: Literal[1] = 1
    expressions: list[FunctionPlotExpression]
    domain: tuple[float, float] | None = None
    range: tuple[float, float] | None = None
    axes: FunctionPlotAxes = Field(default_factory=FunctionPlotAxes)


class Diagnostic(WireModel):
    severity: Literal["warning", "error"]
    code: str
    message: str
    line: int | None = None
    column: int | None = None


class FunctionPlotParseResult(WireModel):
    plot: FunctionPlot | None = None
    diagnostics: list[Diagnostic] = Field(default_factory=list)


class FunctionPlotParseParams(WireModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field(max_length=MAX_SOURCE_CHARS)


class CacheStats(WireModel):
    entries: int
    bytes: int
    max_bytes: int
    hits: int
    misses: int


class BrowserStats(WireModel):
    running: bool
    pid: int | None = None
    """The Chromium browser process (its own process group), while running."""
    launches: int
    pages: int
    blocked_requests: int
    """Requests for any URL other than ``about:``/``data:`` that the route handler aborted."""


class RenderStats(WireModel):
    cache: CacheStats
    browser: BrowserStats
    renderers: dict[str, str]
    """kind → renderer version (part of every cache key)."""
