"""The renderer seam: every kind of ``render/static`` is a :class:`Renderer` (a fake is one small class)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from .models import RenderMime, StaticRenderRequest


@dataclass
class Rendered:
    """What a renderer produced, before sanitising and sizing (``width``/``height`` 0: read from the SVG)."""

    mime_type: RenderMime
    content: str
    width: float
    height: float
    warnings: list[str] = field(default_factory=list)


class Renderer(Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def version(self) -> str:
        """Part of every cache key: a new version never serves an old image."""
        ...

    def unavailable_reason(self) -> str | None:
        """``None`` when the renderer can work on this machine, else why not (for capabilities/errors)."""
        ...

    async def render(self, request: StaticRenderRequest) -> Rendered: ...
