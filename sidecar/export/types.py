"""The exporter seam (phase-2 §10.3) and what the preparation step hands every exporter."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from .ast import Document, Node
from .models import ExportOptions, ExportResult


@dataclass(slots=True)
class Asset:
    """A node's prepared content: ``svg`` (sanitised markup), ``mathml``, ``omml`` (DOCX maths), ``png``/other
    image bytes (``data``), or a ``data:`` URL for HTML images."""

    kind: str
    text: str | None = None
    data: bytes | None = None
    mime_type: str | None = None
    width: float | None = None
    height: float | None = None


@dataclass(slots=True)
class Prepared:
    """A document ready for an exporter: the AST, every node's asset, the theme, warnings so far, cancellation."""

    document: Document
    assets: dict[str, Asset] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # raw HTML nodes an exporter dropped whole (severe-loss check)
    theme_css: str = ""
    dark: bool = False
    metadata: dict[str, str] = field(default_factory=dict)
    check_cancelled: Callable[[], None] = lambda: None

    def warn(self, code: str, node: Node | None, message: str) -> None:
        where = f"{node.node_id} ({node.type}) " if node is not None else ""
        self.warnings.append(f"{code}: {where}{message}")


class DocumentExporter(Protocol):
    format: str

    async def export(self, document: Prepared, options: ExportOptions) -> ExportResult: ...
