"""MermaidRenderer against a fake browser pool: error mapping (parse positions, render failures), the time bound,
a page that died (discarded, pool relaunched, one transparent retry), and the unavailable path."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.core.errors import SidecarError
from sidecar.render.assets import MermaidBundle
from sidecar.render.browser import BrowserPool, Lease
from sidecar.render.mermaid import MermaidRenderer
from sidecar.render.models import StaticRenderRequest
from sidecar.render.service import source_hash

pytestmark = pytest.mark.anyio


class FakePage:
    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers

    async def evaluate(self, script: str, args: Any = None) -> Any:
        answer = self.answers.pop(0)
        if answer == "hang":
            await anyio.sleep(60)
        if isinstance(answer, Exception):
            raise answer
        return answer


class FakePool:
    def __init__(self, answers: list[Any]) -> None:
        self.page_obj = FakePage(answers)
        self.discarded = 0
        self.dead = 0

    def unavailable_reason(self) -> str | None:
        return None

    def mark_dead(self) -> None:
        self.dead += 1

    @contextlib.asynccontextmanager
    async def page(self, profile: Any) -> AsyncIterator[Lease]:
        lease = Lease(self.page_obj)
        try:
            yield lease
        finally:
            self.discarded += lease.discarded


def _renderer(pool: Any, tmp_path: Path, timeout_s: float = 5.0) -> MermaidRenderer:
    bundle = tmp_path / "mermaid.min.js"
    bundle.write_text("/* fake */")
    return MermaidRenderer(pool, MermaidBundle(bundle, "0.0.0"), timeout_s=timeout_s)


def _req(source: str = "flowchart TD\n  A-->B") -> StaticRenderRequest:
    return StaticRenderRequest(kind="mermaid", source=source, source_hash=source_hash(source))


async def _code(renderer: MermaidRenderer) -> SidecarError:
    with pytest.raises(SidecarError) as info:
        await renderer.render(_req())
    return info.value


async def test_ok_and_parse_positions(tmp_path: Path) -> None:
    pool = FakePool(
        [
            {"ok": True, "svg": "<svg/>"},
            {
                "ok": False,
                "phase": "parse",
                "message": "Parse error on line 3",
                "loc": {"first_line": 2, "first_column": 4},
            },
            {"ok": False, "phase": "parse", "message": "Parse error on line 5, column 7: Expecting ':'"},
            {"ok": False, "phase": "render", "message": "boom"},
        ]
    )
    renderer = _renderer(pool, tmp_path)
    assert (await renderer.render(_req())).content == "<svg/>"
    err = await _code(renderer)
    assert (err.code, err.details["line"], err.details["column"]) == ("MERMAID_PARSE_FAILED", 2, 5)
    err = await _code(renderer)
    assert (err.code, err.details["line"], err.details["column"]) == ("MERMAID_PARSE_FAILED", 5, 7)
    err = await _code(renderer)
    assert (err.status, err.code) == (500, "MERMAID_RENDER_FAILED")
    assert pool.discarded == 0


async def test_a_render_is_bounded_in_time_and_its_page_discarded(tmp_path: Path) -> None:
    pool = FakePool(["hang"])
    with anyio.fail_after(10):
        err = await _code(_renderer(pool, tmp_path, timeout_s=0.2))
    assert (err.status, err.code, err.details) == (504, "MERMAID_RENDER_FAILED", {"timeout_s": 0.2})
    assert pool.discarded == 1


async def test_a_dead_browser_is_retried_once_then_reported(tmp_path: Path) -> None:
    closed = RuntimeError("Target page, context or browser has been closed")
    pool = FakePool([closed, {"ok": True, "svg": "<svg/>"}])
    assert (await _renderer(pool, tmp_path).render(_req())).content == "<svg/>"
    assert (pool.dead, pool.discarded) == (1, 1)
    pool = FakePool([closed, closed])
    err = await _code(_renderer(pool, tmp_path))
    assert err.code == "MERMAID_RENDER_FAILED" and pool.dead == 2


async def test_missing_browser_or_bundle_is_renderer_unavailable(tmp_path: Path) -> None:
    err = await _code(MermaidRenderer(BrowserPool(str(tmp_path / "no-chromium")), MermaidBundle(tmp_path, "x")))
    assert (err.status, err.code) == (503, "RENDERER_UNAVAILABLE")
    renderer = MermaidRenderer(FakePool([]), None)
    renderer.bundle = None
    err = await _code(renderer)
    assert (err.status, err.code) == (503, "RENDERER_UNAVAILABLE")
