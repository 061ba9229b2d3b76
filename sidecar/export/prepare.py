"""Preparation: every node an exporter cannot produce by itself gets its asset, before the exporter runs.

* ``mermaid`` / ``function_plot`` → sanitised SVG through ``RenderService`` (the issue-12 cache and warm browser);
  for DOCX also a PNG at print resolution (the SVG screenshotted in the warm browser at 3×, ~288 dpi).
* maths → MathML (HTML, PDF: Chromium lays MathML out as text); DOCX → OMML converted from that MathML, else the
  SVG rasterised as a PNG with a warning.
* images: ``data:`` URLs (raster or SVG) and ``attachment:<id>`` (an attachment of the knowledge store); nothing
  is fetched from the network or read from a path: any other ``src`` is a warning and its alt text is kept.

A node whose rendering fails is shown as its source in a code block, with a warning naming the node.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import re
from typing import TYPE_CHECKING, Any

import anyio

from sidecar.core.errors import SidecarError

from .ast import Node
from .types import Asset, Assets, Prepared
from .worker import nodes_to_prepare

Preparing = Assets | Prepared

if TYPE_CHECKING:
    from sidecar.knowledge.service import KnowledgeService
    from sidecar.render.service import RenderService

logger = logging.getLogger(__name__)

RASTER_VERSION = "export-raster-1"
RASTER_SCALE = 3  # CSS px → PNG px: 96 dpi × 3 ≈ 288 dpi ("print resolution")
MAX_IMAGE_BYTES = 20 * 1024 * 1024
PROGRESS_EVERY_S = 0.1  # render-phase progress at most this often (plus the final count)
_DATA_URL = re.compile(r"^data:(image/(?:png|jpeg|gif|webp|svg\+xml|bmp));base64,([A-Za-z0-9+/=\s]+)$", re.I)
_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
)


def sniff_image(data: bytes) -> str | None:
    for magic, mime in _IMAGE_MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    head = data[:512].lstrip().lower()
    if head.startswith(b"<svg") or (head.startswith(b"<?xml") and b"<svg" in data[:2048].lower()):
        return "image/svg+xml"
    return None


class Preparer:
    def __init__(self, render: RenderService | None, knowledge: KnowledgeService | None) -> None:
        self.render = render
        self.knowledge = knowledge

    async def prepare(self, prepared: Prepared, fmt: str, progress: Any = None) -> None:
        # the walk of the whole document (~6 ms at 7,000 nodes) runs off the loop (issue 22: the ping's tail)
        nodes, maths = await anyio.to_thread.run_sync(nodes_to_prepare, prepared.document)
        await self.prepare_nodes(prepared, nodes, maths, fmt, progress)

    async def prepare_nodes(
        self, prepared: Preparing, nodes: list[Node], maths: list[Node], fmt: str, progress: Any = None
    ) -> None:
        """The assets of ``nodes`` (diagrams, images) and ``maths`` into ``prepared`` (the export service's
        document is in the export worker: it sends these nodes)."""
        total = len(nodes) + len(maths)
        done = 0
        last = anyio.current_time()
        limiter = anyio.CapacityLimiter(2)

        async def one(node: Node) -> None:
            nonlocal done, last
            async with limiter:
                prepared.check_cancelled()
                if node.type == "image":
                    await self._image(prepared, node, fmt)
                elif node.type in ("mermaid", "function_plot"):
                    await self._diagram(prepared, node, fmt)
                else:
                    await self._math(prepared, node, fmt)
            done += 1
            now = anyio.current_time()
            if progress is not None and (done == total or now - last >= PROGRESS_EVERY_S):
                last = now  # each one is a job-row write + a Progress event: ~10 a second, and the last
                await progress("render", done, total)

        async with anyio.create_task_group() as tg:
            for node in nodes + maths:
                tg.start_soon(one, node)

    # ------------------------------------------------------------------------------------------ diagrams
    async def _diagram(self, prepared: Preparing, node: Node, fmt: str) -> None:
        if self.render is None:
            prepared.warn("EXPORT_RENDER_FAILED", node, "no renderer in this process; shown as its source")
            return
        theme = "dark" if prepared.dark and fmt != "docx" else "light"  # Word pages are white whatever the theme
        try:
            result = await self.render.render_source(node.type, node.text or "", theme=theme)
        except SidecarError as exc:
            prepared.warn("EXPORT_RENDER_FAILED", node, f"{exc.code}: {exc.message}; shown as its source")
            return
        for w in result.warnings:
            prepared.warn("EXPORT_RENDER_WARNING", node, w)
        asset = Asset("svg", text=result.content, width=result.width, height=result.height)
        if fmt == "docx":
            png = await self._raster(prepared, node, result.content, result.width, result.height)
            if png is None:
                return
            asset = Asset("png", data=png, mime_type="image/png", width=result.width, height=result.height)
        prepared.assets[node.node_id] = asset

    async def _raster(self, prepared: Preparing, node: Node, svg: str, width: float, height: float) -> bytes | None:
        """The PNG of a sanitised SVG, through the render cache (a re-export does not screenshot again)."""
        from sidecar.render.cache import cache_key

        key = cache_key(RASTER_VERSION, RASTER_SCALE, width, height, hashlib.sha256(svg.encode()).hexdigest())
        cache = self.render.cache if self.render is not None else None
        if cache is not None:
            hit = await anyio.to_thread.run_sync(cache.get, key)
            if hit is not None and isinstance(hit.get("png"), str):
                return base64.b64decode(hit["png"])
        try:
            png = await rasterise_svg(self.render, svg, width, height)
        except Exception as exc:  # browser missing or crashed: the node degrades to its source, with a warning
            logger.info("export: rasterising %s failed: %s", node.node_id, exc)
            prepared.warn("EXPORT_RENDER_FAILED", node, "the image could not be rasterised for DOCX")
            return None
        if cache is not None:
            await anyio.to_thread.run_sync(cache.put, key, {"png": base64.b64encode(png).decode("ascii")})
        return png

    # --------------------------------------------------------------------------------------------- maths
    async def _math(self, prepared: Preparing, node: Node, fmt: str) -> None:
        if self.render is None:
            prepared.warn("EXPORT_RENDER_FAILED", node, "no maths renderer; shown as TeX")
            return
        tex = node.text or ""
        inline = node.type == "math_inline" and not node.attributes.get("display")
        source = f"${tex}$" if inline else f"$${tex}$$"
        try:
            mathml = await self.render.render_source("math", source, format="mathml")
        except SidecarError as exc:
            prepared.warn("EXPORT_RENDER_FAILED", node, f"{exc.code}: {exc.message}; shown as TeX")
            return
        if fmt != "docx":
            prepared.assets[node.node_id] = Asset("mathml", text=mathml.content)
            return
        from .omml import OmmlUnsupported, mathml_to_omml

        try:
            prepared.assets[node.node_id] = Asset("omml", text=mathml_to_omml(mathml.content))
            return
        except OmmlUnsupported as exc:
            reason = str(exc)
        try:
            svg = await self.render.render_source("math", source, format="svg")
        except SidecarError as exc:
            prepared.warn("EXPORT_RENDER_FAILED", node, f"{exc.code}: {exc.message}; shown as TeX")
            return
        png = await self._raster(prepared, node, svg.content, svg.width, svg.height)
        if png is None:
            return
        prepared.assets[node.node_id] = Asset(
            "png", data=png, mime_type="image/png", width=svg.width, height=svg.height
        )
        prepared.warn("EXPORT_MATH_AS_IMAGE", node, f"no Word equation for this formula ({reason}); inserted as image")

    # -------------------------------------------------------------------------------------------- images
    async def _image(self, prepared: Preparing, node: Node, fmt: str) -> None:
        src = str(node.attributes.get("src") or "").strip()
        data: bytes | None = None
        mime: str | None = None
        m = _DATA_URL.match(src)
        if m:
            try:
                data = base64.b64decode(re.sub(r"\s+", "", m.group(2)), validate=True)
            except (binascii.Error, ValueError):
                data = None
        elif src.lower().startswith("attachment:") and self.knowledge is not None:
            data = await self._attachment(src.split(":", 1)[1].strip().lstrip("/"))
            if data is None:
                prepared.warn("EXPORT_IMAGE_MISSING", node, f"attachment {src[11:80]!r} was not found; alt text kept")
                return
        else:
            prepared.warn(
                "EXPORT_IMAGE_SKIPPED",
                node,
                "only data: URLs and attachment:<id> images are exported "
                "(nothing is fetched from the network or read from a path); alt text kept",
            )
            return
        mime = sniff_image(data or b"")
        if data is None or mime is None or len(data) > MAX_IMAGE_BYTES:
            prepared.warn("EXPORT_IMAGE_INVALID", node, "not a readable PNG/JPEG/GIF/WebP/BMP/SVG image; alt text kept")
            return
        if mime == "image/svg+xml":
            from sidecar.render.sanitize import UnsafeSvgError, sanitize_svg
            from sidecar.render.svgsize import fit_svg

            try:
                svg, removed = sanitize_svg(data.decode("utf-8", "replace"))
                svg, w, h = fit_svg(svg, None, None)
            except (UnsafeSvgError, ValueError):
                prepared.warn("EXPORT_IMAGE_INVALID", node, "the SVG image could not be made safe; alt text kept")
                return
            for r in removed:
                prepared.warn("EXPORT_RENDER_WARNING", node, r)
            if fmt != "docx":
                prepared.assets[node.node_id] = Asset("svg", text=svg, width=w, height=h)
                return
            png = await self._raster(prepared, node, svg, w, h)
            if png is not None:
                prepared.assets[node.node_id] = Asset("png", data=png, mime_type="image/png", width=w, height=h)
            return
        if fmt == "docx" and mime in ("image/webp",):  # Word has no WebP: converted with Pillow where present
            try:
                converted, mime = await anyio.to_thread.run_sync(_to_png, data)
            except Exception:
                prepared.warn(
                    "EXPORT_IMAGE_INVALID", node, "a WebP image could not be converted for DOCX; alt text kept"
                )
                return
            data = converted
        width, height = await anyio.to_thread.run_sync(_image_size, data)
        prepared.assets[node.node_id] = Asset("image", data=data, mime_type=mime, width=width, height=height)

    async def _attachment(self, attachment_id: str) -> bytes | None:
        assert self.knowledge is not None
        try:
            path = await self.knowledge.attachment_path(attachment_id)
        except SidecarError:
            return None

        def read() -> bytes | None:
            try:
                if path.stat().st_size > MAX_IMAGE_BYTES:
                    return b""
                return path.read_bytes()
            except OSError:
                return None

        return await anyio.to_thread.run_sync(read)


def _to_png(data: bytes) -> tuple[bytes, str]:
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        out = io.BytesIO()
        im.save(out, "PNG")
    return out.getvalue(), "image/png"


def _image_size(data: bytes) -> tuple[float | None, float | None]:
    import io

    try:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as im:
            return float(im.width), float(im.height)
    except Exception:
        return None, None


async def _raster_setup(page: Any) -> None:
    await page.set_content("<!DOCTYPE html><html><body style='margin:0;background:#fff'></body></html>")


async def rasterise_svg(render: Any, svg: str, width: float, height: float, scale: int = RASTER_SCALE) -> bytes:
    """A sanitised SVG → PNG (white background) by a screenshot in the warm browser, ``scale``× its CSS size."""
    from sidecar.render.browser import PageProfile

    w = max(1, round(width * scale))
    h = max(1, round(height * scale))
    url = "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")
    async with render.browser.page(PageProfile("export-raster", _raster_setup)) as lease:
        page = lease.page
        try:
            await page.set_viewport_size({"width": min(w, 16384), "height": min(h, 16384)})
            await page.evaluate(
                """async ([url, w, h]) => {
                  document.body.innerHTML = '';
                  const img = new Image(w, h); img.id = 'r'; img.style.display = 'block';
                  img.src = url; document.body.appendChild(img); await img.decode();
                }""",
                [url, w, h],
            )
            return await page.locator("#r").screenshot(type="png", timeout=15000)
        except BaseException:
            lease.discard()
            raise
