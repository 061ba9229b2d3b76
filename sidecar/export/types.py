"""What the preparation step fills in and hands every writer (phase-2 §10.3)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .ast import Document, Node


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
class Assets:
    """What the preparation fills in (phase-2 §10.3): every node's asset, warnings, cancellation. In the sidecar
    while the document itself stays in the export worker (:mod:`sidecar.export.worker`)."""

    assets: dict[str, Asset] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    dark: bool = False
    check_cancelled: Callable[[], None] = lambda: None

    def warn(self, code: str, node: Node | None, message: str) -> None:
        self.warnings.append(warning(code, node, message))


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
        self.warnings.append(warning(code, node, message))


def warning(code: str, node: Node | None, message: str) -> str:
    where = f"{node.node_id} ({node.type}) " if node is not None else ""
    return f"{code}: {where}{message}"
