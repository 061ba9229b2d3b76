"""The PDF exporter: the HTML exporter's markup (print variant) printed by the warm Chromium of ``render/static``
(``page.pdf``): ``page_size`` and margins, page numbers in the footer, a document outline (bookmarks) from the
headings (``outline``), a tagged PDF (``tagged``), diagrams and maths as vectors (inline SVG / MathML), CJK text in
the theme's CJK font (WenQuanYi Micro Hei first), which Chromium embeds as a subset."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import anyio

from .errors import ExportRenderFailed
from .models import ExportOptions

if TYPE_CHECKING:
    from sidecar.render.browser import BrowserPool

FOOTER = (
    '<div style="width:100%;font-size:8px;color:#666;text-align:center;'
    "font-family:'WenQuanYi Micro Hei','DejaVu Sans',sans-serif\">"
    '<span class="pageNumber"></span> / <span class="totalPages"></span></div>'
)
PRINT_TIMEOUT_S = 120.0
_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def count_pages(pdf: bytes) -> int:
    return len(_PAGE.findall(pdf))


async def _setup(page: Any) -> None:
    await page.emulate_media(media="print")


class PdfExporter:
    format = "pdf"

    def __init__(self, browser: BrowserPool) -> None:
        self.browser = browser

    async def print(self, markup: str, options: ExportOptions) -> tuple[bytes, int]:
        """The PDF of the HTML writer's print markup (written in the export worker), and its page count."""
        from sidecar.render.browser import BrowserUnavailable, PageProfile

        margin = f"{options.margin_mm}mm"
        try:
            async with self.browser.page(PageProfile("export-pdf", _setup)) as lease:
                try:
                    with anyio.fail_after(PRINT_TIMEOUT_S):
                        await lease.page.set_content(markup, wait_until="load")
                        pdf = await lease.page.pdf(
                            format=options.page_size,
                            margin={"top": margin, "bottom": margin, "left": margin, "right": margin},
                            display_header_footer=True,
                            header_template="<div></div>",
                            footer_template=FOOTER,
                            print_background=True,
                            outline=True,
                            tagged=True,
                        )
                    await lease.page.set_content("<!DOCTYPE html><html><body></body></html>")
                except BaseException:
                    lease.discard()
                    raise
        except BrowserUnavailable as exc:
            raise ExportRenderFailed(f"PDF export needs Chromium: {exc}.", status=503) from None
        except TimeoutError:
            raise ExportRenderFailed("Printing the PDF took too long.", status=504) from None
        except ExportRenderFailed:
            raise
        except Exception as exc:
            if "cancel" in type(exc).__name__.lower():
                raise
            raise ExportRenderFailed(f"Chromium could not print the PDF ({type(exc).__name__}).") from None
        return pdf, count_pages(pdf)
