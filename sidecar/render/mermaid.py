"""Mermaid → SVG in the warm browser (the pinned npm ``mermaid`` bundle; ``securityLevel: 'strict'``).

Labels are rendered as SVG text (``htmlLabels: false``), so no ``<foreignObject>`` is needed for flowcharts;
the sanitiser still checks everything that comes back. A parse error becomes ``MERMAID_PARSE_FAILED`` with
the line/column Mermaid reports (its jison parsers give ``hash.loc``; langium-based ones a "line N, column M"
message); anything else that fails, or a render that takes longer than ``timeout_s``, is
``MERMAID_RENDER_FAILED`` (the page is discarded; a browser that died is relaunched once, transparently).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from typing import Any

import anyio

from .assets import MermaidBundle, find_mermaid_bundle
from .browser import BrowserPool, BrowserUnavailable, PageProfile
from .errors import MermaidParseFailed, MermaidRenderFailed, MermaidRenderTimeout, RendererUnavailable
from .models import StaticRenderRequest
from .types import Rendered

logger = logging.getLogger(__name__)

REVISION = "r1"  # bump when the page script or the config below changes: old cache entries stop matching
FONT_FAMILY = '"WenQuanYi Micro Hei", "Noto Sans CJK SC", "DejaVu Sans", sans-serif'
_PAGE_SCRIPT = """
window.__metonaRender = async (src, theme, id) => {
  mermaid.initialize({
    startOnLoad: false, securityLevel: 'strict', theme: theme === 'dark' ? 'dark' : 'default',
    htmlLabels: false, flowchart: { htmlLabels: false }, suppressErrorRendering: true,
    maxTextSize: 200000, deterministicIds: true, deterministicIDSeed: id, fontFamily: __FONT__,
  });
  try {
    await mermaid.parse(src);
  } catch (e) {
    const h = e && e.hash;
    return { ok: false, phase: 'parse', message: String((e && e.message) || e),
             loc: h && h.loc ? h.loc : null, line: h && typeof h.line === 'number' ? h.line : null };
  }
  try {
    const out = await mermaid.render(id, src);
    return { ok: true, svg: out.svg };
  } catch (e) {
    return { ok: false, phase: 'render', message: String((e && e.message) || e) };
  } finally {
    for (const el of document.querySelectorAll('body > *')) el.remove();
  }
};
""".replace("__FONT__", json.dumps(FONT_FAMILY))
_BLANK = "<!doctype html><html><head><meta charset='utf-8'></head><body></body></html>"
_LINE_COL = re.compile(r"line[: ]+(\d+)(?:[, ]+column[: ]+(\d+))?", re.I)
_DEAD = (
    "Target page, context or browser has been closed",
    "Browser has been closed",
    "Target closed",
    "has been disconnected",
    "Connection closed",
)


class MermaidRenderer:
    kind = "mermaid"

    def __init__(self, pool: BrowserPool, bundle: MermaidBundle | None = None, *, timeout_s: float = 15.0) -> None:
        self.pool = pool
        self.bundle = bundle if bundle is not None else find_mermaid_bundle()
        self.timeout_s = timeout_s
        self._script: str | None = None
        self.profile = PageProfile("mermaid", self._setup)

    @property
    def version(self) -> str:
        return f"mermaid-{self.bundle.version if self.bundle else 'missing'}+{REVISION}"

    def unavailable_reason(self) -> str | None:
        if self.bundle is None:
            return "the mermaid bundle is not installed (run scripts/setup: npm ci in tools/render)"
        return self.pool.unavailable_reason()

    async def _setup(self, page: Any) -> None:
        if self._script is None:
            assert self.bundle is not None
            self._script = await anyio.to_thread.run_sync(self.bundle.path.read_text, "utf-8")
        await page.set_content(_BLANK)
        await page.add_script_tag(content=self._script)
        await page.evaluate(_PAGE_SCRIPT)

    async def render(self, request: StaticRenderRequest) -> Rendered:
        reason = self.unavailable_reason()
        if reason:
            raise RendererUnavailable(f"Mermaid rendering is unavailable: {reason}.", details={"kind": "mermaid"})
        element_id = "mmd-" + hashlib.sha256(request.source.encode()).hexdigest()[:10]
        for attempt in (1, 2):
            try:
                out = await self._evaluate(request.source, request.theme, element_id)
            except _BrowserDied:
                if attempt == 2:
                    raise MermaidRenderFailed("The browser stopped while rendering; try again.") from None
                continue
            return self._result(out)
        raise AssertionError("unreachable")

    async def _evaluate(self, source: str, theme: str, element_id: str) -> dict[str, Any]:
        try:
            async with self.pool.page(self.profile) as lease:
                try:
                    with anyio.fail_after(self.timeout_s):
                        return await lease.page.evaluate(
                            "([s, t, i]) => window.__metonaRender(s, t, i)", [source, theme, element_id]
                        )
                except TimeoutError:
                    lease.discard()
                    raise MermaidRenderTimeout(
                        f"The diagram did not render within {self.timeout_s:g} s.",
                        details={"timeout_s": self.timeout_s},
                    ) from None
                except BaseException as exc:
                    lease.discard()
                    if _is_dead(exc):
                        self.pool.mark_dead()
                        raise _BrowserDied from None
                    raise
        except BrowserUnavailable as exc:
            raise RendererUnavailable(
                f"Mermaid rendering is unavailable: {exc}.", details={"kind": "mermaid"}
            ) from None
        except (MermaidRenderTimeout, _BrowserDied):
            raise
        except Exception as exc:
            if _is_dead(exc):
                self.pool.mark_dead()
                raise _BrowserDied from None
            logger.warning("mermaid: browser error: %s", exc)
            raise MermaidRenderFailed("The diagram could not be rendered (browser error).") from None

    def _result(self, out: dict[str, Any]) -> Rendered:
        if out.get("ok"):
            svg = str(out["svg"])
            # Mermaid serialises as HTML: a link (`click A href`, sequence `links`) comes back as xlink:href with
            # no xmlns:xlink on the root, which no XML parser accepts; declare it so the sanitiser can strip it
            if "xlink:" in svg and "xmlns:xlink" not in svg.split(">", 1)[0]:
                svg = svg.replace("<svg", f'<svg xmlns:xlink="{_XLINK_NS}"', 1)
            return Rendered("image/svg+xml", svg, 0, 0, [])
        message = _first_lines(str(out.get("message") or "unknown error"))
        if out.get("phase") == "parse":
            line, column = _position(out)
            details: dict[str, Any] = {"line": line, "column": column, "mermaid_message": message}
            where = f" (line {line}{f', column {column}' if column else ''})" if line else ""
            raise MermaidParseFailed(f"The Mermaid source has a syntax error{where}.", details=details)
        raise MermaidRenderFailed("The diagram could not be rendered.", details={"mermaid_message": message})


_XLINK_NS = "http://www.w3.org/1999/xlink"


class _BrowserDied(Exception):
    pass


def _is_dead(exc: BaseException) -> bool:
    text = str(exc)
    return any(marker in text for marker in _DEAD)


def _position(out: dict[str, Any]) -> tuple[int | None, int | None]:
    loc = out.get("loc")
    if isinstance(loc, dict) and isinstance(loc.get("first_line"), int):
        column = loc.get("first_column")
        return loc["first_line"], (column + 1) if isinstance(column, int) else None
    match = _LINE_COL.search(str(out.get("message") or ""))
    if match:
        return int(match.group(1)), int(match.group(2)) if match.group(2) else None
    if isinstance(out.get("line"), int):
        return out["line"] + 1, None
    return None, None


def _first_lines(text: str, limit: int = 600) -> str:
    return text[:limit]
