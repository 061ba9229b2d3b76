"""RenderService: ``render/static`` for every kind, behind one cache and one sanitiser.

Other domains (the exporter) call :meth:`RenderService.render` or :meth:`RenderService.render_source`
in-process; the browser pool (:attr:`RenderService.browser`) is shared with them for HTML → PDF.

Pipeline: check ``sourceHash`` → cache lookup (key: renderer version, kind, theme, size, format, source hash)
→ renderer → sanitiser (SVG or MathML allow-list; warnings for whatever it removed) → size → cache store.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from pathlib import Path
from typing import Any

import anyio

from .browser import BrowserPool
from .cache import DEFAULT_MAX_BYTES, RenderCache, cache_key
from .errors import MermaidSvgUnsafe, RendererUnavailable, SourceHashMismatch
from .models import (
    BrowserStats,
    CacheStats,
    FunctionPlotParseResult,
    RenderStats,
    StaticRenderRequest,
    StaticRenderResult,
)
from .plot.parse import parse_function_plot
from .types import Rendered, Renderer

logger = logging.getLogger(__name__)


def source_hash(source: str) -> str:
    """The ``sourceHash`` of a source: lowercase hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()  # a lone surrogate: no crash


class RenderService:
    def __init__(
        self,
        data_dir: Path,
        browser: BrowserPool,
        renderers: list[Renderer],
        *,
        cache_max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.browser = browser
        self.cache = RenderCache(data_dir / "render-cache", cache_max_bytes)
        self.renderers: dict[str, Renderer] = {r.kind: r for r in renderers}

    async def render_source(self, kind: str, source: str, **options: Any) -> StaticRenderResult:
        """In-process convenience: hash the source here (exporters hold the source, not its hash)."""
        # validated like a wire request: ``kind`` is a document's fence name, any string
        request = StaticRenderRequest.model_validate(
            {"kind": kind, "source": source, "source_hash": source_hash(source), **options}
        )
        return await self.render(request)

    async def render(self, request: StaticRenderRequest) -> StaticRenderResult:
        _check_hash(request)
        renderer = self.renderers.get(request.kind)
        if renderer is None:
            raise RendererUnavailable(f"No renderer for kind {request.kind!r}.", details={"kind": request.kind})
        key = cache_key(
            SANITIZER_REVISION,
            renderer.version,
            request.kind,
            request.theme,
            request.width,
            request.height,
            request.format or "",
            source_hash(request.source),
        )
        cached = await anyio.to_thread.run_sync(self.cache.get, key)
        if cached is not None:
            try:
                return StaticRenderResult.model_validate(cached)
            except ValueError:
                logger.warning("render cache: entry %s does not validate; re-rendering", key[:12])
        rendered = await renderer.render(request)
        result = await anyio.to_thread.run_sync(_finish, request, rendered)
        await anyio.to_thread.run_sync(self.cache.put, key, result.model_dump(mode="json"))
        return result

    async def parse_function_plot(self, source: str) -> FunctionPlotParseResult:
        """Parsed on a worker thread: 256 KiB of YAML takes ~0.6 s, which froze every request on the event loop."""
        return await anyio.to_thread.run_sync(parse_function_plot, source, abandon_on_cancel=True)

    def unavailable(self) -> dict[str, str]:
        """kind → reason, for the kinds that cannot work on this machine."""
        return {k: reason for k, r in self.renderers.items() if (reason := r.unavailable_reason())}

    def stats(self) -> RenderStats:
        return RenderStats(
            cache=CacheStats(**self.cache.stats()),
            browser=BrowserStats(**self.browser.stats()),
            renderers={k: r.version for k, r in self.renderers.items()},
        )

    async def close(self) -> None:
        """The warm browser, then a renderer's own child (the math worker)."""
        await self.browser.close()
        for renderer in self.renderers.values():
            aclose = getattr(renderer, "aclose", None)
            if aclose is not None:
                await aclose()


# part of every cache key: an image cleaned by an older sanitiser is never served again after a sanitiser fix.
# Bump it with every change to sanitize.py's output (r2: CSS-escaped and image-set() URLs are external).
SANITIZER_REVISION = "sanitize-r2"


def _check_hash(request: StaticRenderRequest) -> None:
    given = request.source_hash.strip().lower().removeprefix("sha256:")
    if not hmac.compare_digest(given.encode("utf-8", "surrogatepass"), source_hash(request.source).encode()):
        raise SourceHashMismatch(
            "sourceHash does not match the source (expected the hex SHA-256 of its UTF-8 bytes).",
            details={"field": "sourceHash"},
        )


def _finish(request: StaticRenderRequest, rendered: Rendered) -> StaticRenderResult:
    """Sanitise and size what a renderer produced (blocking: runs in a worker thread)."""
    from .sanitize import UnsafeSvgError, sanitize_mathml, sanitize_svg  # lxml + tinycss2: on first render
    from .svgsize import fit_svg

    warnings = list(rendered.warnings)
    try:
        if rendered.mime_type == "application/mathml+xml":
            content, removed = sanitize_mathml(rendered.content)
            width, height = rendered.width, rendered.height
        else:
            content, removed = sanitize_svg(rendered.content)
            content, width, height = fit_svg(content, request.width, request.height)
    except UnsafeSvgError as exc:
        raise MermaidSvgUnsafe(
            f"The {request.kind} output could not be made safe: {exc}", details={"kind": request.kind}
        ) from None
    return StaticRenderResult(
        mime_type=rendered.mime_type, content=content, width=width, height=height, warnings=warnings + removed
    )
