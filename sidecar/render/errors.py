"""Typed errors of static rendering: the phase-2 §12.4 codes (and the §10.5 one for a bad request).

Decisions where the seed is silent (ipc_schema/README.md "Static rendering"): a ``sourceHash`` that does not
match the source is ``EXPORT_OPTIONS_INVALID`` (400); a TeX formula that cannot be parsed is
``MATH_PARSE_FAILED`` (400); a renderer whose browser or bundle is missing is ``RENDERER_UNAVAILABLE`` (503).
"""

from __future__ import annotations

from typing import Any

from sidecar.core.errors import BadRequestError, SidecarError, UnavailableError, UpstreamTimeoutError


class SourceHashMismatch(BadRequestError):
    default_code = "EXPORT_OPTIONS_INVALID"


class MermaidParseFailed(BadRequestError):
    default_code = "MERMAID_PARSE_FAILED"


class MermaidRenderFailed(SidecarError):
    status = 500
    default_code = "MERMAID_RENDER_FAILED"


class MermaidRenderTimeout(UpstreamTimeoutError):
    default_code = "MERMAID_RENDER_FAILED"


class MermaidSvgUnsafe(BadRequestError):
    default_code = "MERMAID_SVG_UNSAFE"


class FunctionPlotParseFailed(BadRequestError):
    default_code = "FUNCTION_PLOT_PARSE_FAILED"


class FunctionPlotExpressionUnsafe(BadRequestError):
    default_code = "FUNCTION_PLOT_EXPRESSION_UNSAFE"


class FunctionPlotRenderFailed(SidecarError):
    status = 500
    default_code = "FUNCTION_PLOT_RENDER_FAILED"


class FunctionPlotRenderTimeout(UpstreamTimeoutError):
    default_code = "FUNCTION_PLOT_RENDER_FAILED"


class MathParseFailed(BadRequestError):
    default_code = "MATH_PARSE_FAILED"


class MathRenderTimeout(UpstreamTimeoutError):
    default_code = "MATH_RENDER_FAILED"


class MathWorkerFailed(SidecarError):
    """The math worker could not start, broke its protocol or died (not the formula's fault)."""

    status = 500
    default_code = "MATH_RENDER_FAILED"


class RendererUnavailable(UnavailableError):
    default_code = "RENDERER_UNAVAILABLE"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)
