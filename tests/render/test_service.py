"""RenderService with a fake renderer: the hash check, cache keys (incl. renderer version), LRU eviction,
sanitising and sizing of every output; the math renderer; the SVG sizing rules."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from sidecar.core.errors import SidecarError
from sidecar.render.browser import BrowserPool
from sidecar.render.cache import RenderCache
from sidecar.render.models import StaticRenderRequest
from sidecar.render.renderers import FunctionPlotRenderer, MathRenderer
from sidecar.render.service import RenderService, source_hash
from sidecar.render.svgsize import fit_svg
from sidecar.render.types import Rendered
from tests.support.math_worker import math_worker
from tests.support.render_check import assert_safe_svg

pytestmark = pytest.mark.anyio


class FakeMermaid:
    """Stands in for the browser renderer: returns what a hostile diagram could, counts its calls."""

    kind = "mermaid"

    def __init__(self, version: str = "fake-1") -> None:
        self.version = version
        self.calls = 0

    def unavailable_reason(self) -> str | None:
        return None

    async def render(self, request: StaticRenderRequest) -> Rendered:
        self.calls += 1
        svg = (
            '<svg xmlns="http://www.w3.org/2000/svg" width="100%" style="max-width: 200px;" '
            f'viewBox="0 0 200 100" onload="x()"><script>y()</script><text>{request.theme}</text></svg>'
        )
        return Rendered("image/svg+xml", svg, 0, 0, ["renderer warning"])


def _service(tmp_path: Path, *renderers, max_bytes: int = 1 << 20) -> RenderService:
    return RenderService(tmp_path, BrowserPool(None), list(renderers), cache_max_bytes=max_bytes)


async def test_outputs_are_sanitised_sized_and_cached(tmp_path: Path) -> None:
    fake = FakeMermaid()
    svc = _service(tmp_path, fake)
    first = await svc.render_source("mermaid", "graph TD; A-->B")
    assert_safe_svg(first.content)
    assert (first.width, first.height) == (200, 100)
    assert first.warnings == [
        "renderer warning",
        "SVG_SANITIZED: removed <script> element",
        "SVG_SANITIZED: removed event-handler attributes (on*)",
    ]
    assert await svc.render_source("mermaid", "graph TD; A-->B") == first
    assert fake.calls == 1
    sized = await svc.render_source("mermaid", "graph TD; A-->B", width=400)
    assert (sized.width, sized.height) == (400, 200) and fake.calls == 2
    await svc.render_source("mermaid", "graph TD; A-->B", theme="dark")
    assert fake.calls == 3
    stats = svc.stats().cache
    assert (stats.entries, stats.hits, stats.misses) == (3, 1, 3)
    newer = _service(tmp_path, FakeMermaid("fake-2"))  # same cache dir, new renderer version: no stale image
    await newer.render_source("mermaid", "graph TD; A-->B")
    assert newer.renderers["mermaid"].calls == 1  # type: ignore[attr-defined]


async def test_a_sanitiser_revision_invalidates_cached_images(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # review: the key held the renderer's version only, so an image cleaned by a sanitiser with a known bypass
    # stayed on disk and was served after the fix
    import sidecar.render.service as service_module

    fake = FakeMermaid()
    await _service(tmp_path, fake).render_source("mermaid", "graph TD; A-->B")
    monkeypatch.setattr(service_module, "SANITIZER_REVISION", "sanitize-next")
    await _service(tmp_path, fake).render_source("mermaid", "graph TD; A-->B")
    assert fake.calls == 2


async def test_the_source_hash_is_checked(tmp_path: Path) -> None:
    svc = _service(tmp_path, FakeMermaid())
    source = "graph TD; A-->B"
    ok = StaticRenderRequest(kind="mermaid", source=source, source_hash="sha256:" + source_hash(source).upper())
    await svc.render(ok)
    with pytest.raises(SidecarError) as info:
        await svc.render(StaticRenderRequest(kind="mermaid", source=source, source_hash=source_hash("other")))
    assert (info.value.status, info.value.code) == (400, "EXPORT_OPTIONS_INVALID")
    for given, text in (("中文", source), ("é" * 64, source)):  # found by the fuzz: INTERNAL_ERROR
        with pytest.raises(SidecarError) as info:
            await svc.render(StaticRenderRequest(kind="mermaid", source=text, source_hash=given))
        assert info.value.code == "EXPORT_OPTIONS_INVALID"


async def test_a_kind_without_renderer_is_unavailable(tmp_path: Path) -> None:
    svc = _service(tmp_path)
    with pytest.raises(SidecarError) as info:
        await svc.render_source("mermaid", "graph TD")
    assert (info.value.status, info.value.code) == (503, "RENDERER_UNAVAILABLE")


async def test_function_plot_and_math_through_the_service(tmp_path: Path) -> None:
    async with math_worker() as worker:
        await _plot_and_math(_service(tmp_path, FunctionPlotRenderer(), MathRenderer(worker)))


async def _plot_and_math(svc: RenderService) -> None:
    plot = await svc.render_source("function_plot", "expressions: [sin(x)]\n", width=300, height=200)
    assert (plot.width, plot.height, plot.warnings) == (300, 200, [])
    svg = await svc.render_source("math", "$$\\frac{a}{b}$$", theme="dark")
    assert svg.mime_type == "image/svg+xml" and "#e6edf3" in svg.content and svg.width > 0
    mathml = await svc.render_source("math", "$x^2$", format="mathml")
    assert mathml.mime_type == "application/mathml+xml" and 'display="inline"' in mathml.content
    unknown = await svc.render_source("math", "\\foo x", format="mathml")
    assert unknown.warnings == ["MATH_UNKNOWN_COMMAND: \\foo is not a known TeX command; shown as text"]
    for source, code in (
        ("expressions: [x.y]", "FUNCTION_PLOT_EXPRESSION_UNSAFE"),
        ("expressions: [sin(]", "FUNCTION_PLOT_PARSE_FAILED"),
    ):
        with pytest.raises(SidecarError) as info:
            await svc.render_source("function_plot", source)
        assert info.value.code == code and info.value.details["line"] == 1
    with pytest.raises(SidecarError) as info:
        await svc.render_source("math", "$\\frac{1}{$")
    assert info.value.code == "MATH_PARSE_FAILED"


def test_cache_evicts_least_recently_used(tmp_path: Path) -> None:
    cache = RenderCache(tmp_path / "c", max_bytes=300)
    for i in range(3):
        cache.put(f"{i:064x}", {"content": "x" * 80})
        os.utime(cache._path(f"{i:064x}"), ns=(i * 10**9, i * 10**9))
    assert cache.get(f"{0:064x}") is not None  # touch 0: now 1 is the oldest
    cache.put(f"{3:064x}", {"content": "x" * 80})
    assert cache.get(f"{1:064x}") is None
    assert all(cache.get(f"{i:064x}") is not None for i in (0, 2, 3))
    assert cache.stats()["bytes"] <= 300
    cache._path(f"{2:064x}").write_text("{broken")  # a damaged entry is a miss, and removed
    assert cache.get(f"{2:064x}") is None and not cache._path(f"{2:064x}").exists()
    reopened = RenderCache(tmp_path / "c", max_bytes=300)
    assert reopened.stats()["entries"] == 2


@pytest.mark.parametrize(
    ("attrs", "width", "height", "want"),
    [
        ('viewBox="0 0 200 100"', None, None, (200, 100)),
        ('viewBox="0 0 200 100"', 100, None, (100, 50)),
        ('viewBox="0 0 200 100"', None, 300, (600, 300)),
        ('viewBox="0 0 200 100"', 50, 50, (50, 50)),
        ('width="30pt" height="15pt"', None, None, (40, 20)),
        ('width="100%" style="max-width: 120px;" height="60"', None, None, (120, 60)),
    ],
)
def test_fit_svg(attrs: str, width, height, want) -> None:
    out, w, h = fit_svg(f'<svg xmlns="http://www.w3.org/2000/svg" {attrs}/>', width, height)
    assert (w, h) == want
    assert "max-width" not in out and 'viewBox="' in out


def test_source_hash_is_sha256_hex() -> None:
    assert source_hash("图") == hashlib.sha256("图".encode()).hexdigest()


async def test_function_plot_parsing_runs_off_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21: render/function_plot/parse parsed on the event loop (256 KiB: ~0.6 s with every request waiting)."""
    import threading

    from sidecar.render import service as service_module

    seen: list[str] = []
    real = service_module.parse_function_plot

    def spy(source: str) -> Any:
        seen.append(threading.current_thread().name)
        return real(source)

    monkeypatch.setattr(service_module, "parse_function_plot", spy)
    result = await _service(tmp_path).parse_function_plot("expressions: [sin(x)]\n")
    assert result.plot is not None and seen and seen[0] != threading.main_thread().name
