"""The export's CPU work in a child process over the one worker channel (issue 22: the control lane).

Parsing the Markdown (markdown-it), highlighting code (Pygments' regex lexers) and writing the HTML or DOCX are
pure Python: on a worker thread they held the GIL, and a ``ping`` waited for it (p99 5 ms while exports ran, one
after the other). Here one long-lived child (``python -m sidecar.export.worker``, or ``<binary> export-worker``),
started on the first export and reused, does that work; the sidecar only sends the job and writes the bytes.

An export is one ``export`` request when the document has nothing to prepare (no diagram, formula or image): the
child parses, writes the format's bytes and checks for severe loss in one go. Otherwise the first request answers
the nodes to prepare (the sidecar renders their assets with its browser, maths worker and knowledge store) and
keeps the parsed document; the second, with the assets, writes the bytes (a document the child no longer holds —
a new child, or more than :data:`KEPT_DOCUMENTS` waiting — is parsed again). PDF's markup is written here too; the
print stays in the sidecar's browser.

A child that cannot start, dies or breaks the protocol fails the export with ``EXPORT_RENDER_FAILED`` (the next
export starts a new child); a cancelled export kills the child, as the maths worker does. Every request has a time
limit (:data:`EXPORT_TIMEOUTS_S`, per format; the child's start included, the wait behind another export not): a
document that hangs the parser or a lexer (Pygments is quadratic on some inputs) fails its export with
``EXPORT_RENDER_FAILED`` (504, ``details.reason = "TIMEOUT"``), the child is killed, and the next export starts a
fresh one. The child gets :func:`~sidecar.workers.env.worker_env` and leaves when the sidecar does (stdin EOF, or its
parent changes).
"""

from __future__ import annotations

import base64
import logging
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from sidecar.core.errors import SidecarError
from sidecar.workers.protocol import Error, WorkerOutput, run_worker, serve_requests
from sidecar.workers.single import SingleChild

from .errors import ExportRenderFailed, ExportUnsupportedContent

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from sidecar.workers.channel import WorkerFault
    from sidecar.workers.supervisor import ChildSupervisor

    from .ast import Document, Node
    from .types import Asset

logger = logging.getLogger(__name__)

WORKER_NAME = "export worker"
OP_EXPORT = "export"
HELLO_TIMEOUT_S = 60.0
KEPT_DOCUMENTS = 8
"""Parsed documents the child keeps while the sidecar prepares their assets (the oldest goes first)."""
KEPT_MARKDOWN_CHARS = 32 * 1024 * 1024
"""...and at most this much Markdown among them (an abandoned export's document is dropped first)."""
EXPORT_TIMEOUTS_S: dict[str, float] = {"html": 120.0, "pdf": 120.0, "docx": 240.0}
"""The time limit of one request to the child, per format (the 50-page document writes in well under 5 s)."""
DEFAULT_TIMEOUT_S = 120.0
"""The limit of a format not in :data:`EXPORT_TIMEOUTS_S`."""
RENDER_FAILED = ExportRenderFailed.default_code
_ERRORS: dict[str, type[SidecarError]] = {
    ExportRenderFailed.default_code: ExportRenderFailed,
    ExportUnsupportedContent.default_code: ExportUnsupportedContent,
}
_CONTENT_TYPES = {"text", "image", "math_inline", "math_block", "mermaid", "function_plot", "code_block", "code_inline"}


@dataclass(frozen=True, slots=True)
class ExportWork:
    """What the child needs to write one export (all of it JSON: it crosses a pipe)."""

    key: str
    """The job id: names the parsed document the child keeps between the two requests."""
    fmt: str
    markdown: str
    title: str | None
    options: dict[str, Any]
    theme_css: str
    dark: bool
    metadata: dict[str, str]


@dataclass(frozen=True, slots=True)
class ToPrepare:
    """The first answer for a document with diagrams, formulas or images: the nodes whose assets it needs."""

    nodes: list[Node]
    maths: list[Node]


@dataclass(frozen=True, slots=True)
class Written:
    """The export's bytes (PDF: the HTML to print), the document's title, the writer's warnings, and whether every
    piece of content was dropped (the severe loss the service reports)."""

    content: bytes
    title: str
    warnings: list[str]
    dropped: list[str]
    severe_loss: bool


def _fault(fault: WorkerFault) -> Exception:
    return ExportRenderFailed(
        f"The export could not be rendered: {fault.message}.",
        details={"reason": fault.reason, "exit_code": fault.exit_code},
    )


def _error(error: Error) -> Exception:
    return _ERRORS.get(error.code, ExportRenderFailed)(error.message, code=error.code, details=error.details)


class ExportWorker(SingleChild):
    """The sidecar's side: one child, one request at a time; killed on cancel and started again by the next."""

    def __init__(
        self,
        children: ChildSupervisor,
        task_group: TaskGroup,
        *,
        argv: Sequence[str] | None = None,
        timeouts_s: Mapping[str, float] | None = None,
    ) -> None:
        """``argv`` starts the child (default: :func:`~sidecar.workers.engines.worker_argv` ``export-worker``);
        ``timeouts_s`` replaces :data:`EXPORT_TIMEOUTS_S` for the formats it names."""
        self.timeouts_s = {**EXPORT_TIMEOUTS_S, **(timeouts_s or {})}
        # (imported here: the child imports this module and needs none of the channel's side)
        from sidecar.workers import engines
        from sidecar.workers.channel import WorkerChannel
        from sidecar.workers.env import worker_env

        channel = WorkerChannel(
            children,
            task_group,
            name=WORKER_NAME,
            argv=engines.worker_argv("export-worker") if argv is None else argv,
            env=lambda: worker_env(os.environ),
            on_fault=_fault,
            on_error=_error,
            hello_timeout_s=HELLO_TIMEOUT_S,
            stop_grace_s=0.0,  # its work is ours to drop: nothing to flush
        )
        super().__init__(channel)

    async def start(self, work: ExportWork) -> ToPrepare | Written:
        """Parse ``work`` and write it, or (if it has diagrams, formulas or images) answer the nodes to prepare."""
        from .ast import Node

        data = await self._request(work, None)
        if "prepare" not in data:
            return await self._written(data)
        try:
            return ToPrepare([Node(**n) for n in data["prepare"]], [Node(**n) for n in data["maths"]])
        except (KeyError, TypeError) as exc:
            raise await self._malformed() from exc

    async def finish(self, work: ExportWork, assets: dict[str, Asset]) -> Written:
        """Write ``work`` with the assets of the nodes :meth:`start` named."""
        return await self._written(await self._request(work, assets))

    async def _request(self, work: ExportWork, assets: dict[str, Asset] | None) -> dict[str, Any]:
        params: dict[str, Any] = {
            "key": work.key,
            "format": work.fmt,
            "markdown": work.markdown,
            "title": work.title,
            "options": work.options,
            "theme_css": work.theme_css,
            "dark": work.dark,
            "metadata": work.metadata,
        }
        if assets is not None:
            params["assets"] = {node_id: _asset_data(asset) for node_id, asset in assets.items()}
        import anyio

        limit = self.timeouts_s.get(work.fmt, DEFAULT_TIMEOUT_S)
        async with self._lock:  # the wait behind another export is not this export's time
            try:
                with anyio.fail_after(limit):
                    return await self._channel.request(OP_EXPORT, params)
            except SidecarError:  # the child answered (it stays), or the channel failed and drops it itself
                raise
            except TimeoutError:  # the child is stuck in this document: stop it, the next export starts another
                await self._kill()
                raise ExportRenderFailed(
                    f"The export took longer than {limit:g} s and was stopped; the document may hold content the "
                    "parser or a highlighter cannot finish (a huge code block, say).",
                    status=504,
                    details={"reason": "TIMEOUT", "timeout_s": limit, "format": work.fmt},
                ) from None
            except BaseException:  # cancelled: the child may still be writing, stop it
                await self._kill()
                raise

    async def _written(self, data: dict[str, Any]) -> Written:
        try:
            return Written(
                content=base64.b64decode(data["content_b64"]) if "content_b64" in data else data["text"].encode(),
                title=str(data["title"]),
                warnings=[str(w) for w in data["warnings"]],
                dropped=[str(d) for d in data["dropped"]],
                severe_loss=bool(data["severe_loss"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise await self._malformed() from exc

    async def _malformed(self) -> Exception:
        """An answer that is not an export's: the child is broken; stop it (the next export starts another)."""
        from sidecar.workers.channel import PROTOCOL_ERROR, WorkerFault

        await self._kill()
        return _fault(WorkerFault(PROTOCOL_ERROR, f"the {WORKER_NAME} answered a malformed result"))


def _asset_data(asset: Asset) -> dict[str, Any]:
    return {
        "kind": asset.kind,
        "text": asset.text,
        "data_b64": None if asset.data is None else base64.b64encode(asset.data).decode("ascii"),
        "mime_type": asset.mime_type,
        "width": asset.width,
        "height": asset.height,
    }


def _asset(data: dict[str, Any]) -> Asset:
    from .types import Asset

    raw = data.get("data_b64")
    return Asset(
        str(data["kind"]),
        text=data.get("text"),
        data=None if raw is None else base64.b64decode(raw),
        mime_type=data.get("mime_type"),
        width=data.get("width"),
        height=data.get("height"),
    )


# ---- the work (the child's; also callable in-process) ------------------------------------------------------------


def nodes_to_prepare(document: Document) -> tuple[list[Node], list[Node]]:
    """The diagrams and images, and the formulas, of ``document`` and its footnotes (one pass; a 50-page document
    has ~8,000 nodes)."""
    nodes: list[Node] = []
    maths: list[Node] = []
    for n in document.walk():
        if n.type in ("mermaid", "function_plot", "image"):
            nodes.append(n)
        elif n.type in ("math_inline", "math_block"):
            maths.append(n)
    for f in document.footnotes:
        for n in f.walk():
            if n.type == "image":
                nodes.append(n)
            elif n.type == "math_inline":
                maths.append(n)
    return nodes, maths


def severe_loss(document: Document, dropped: list[str]) -> bool:
    """Severe loss: the document had content, and every piece of it was dropped (raw HTML that the format cannot
    carry or the sanitiser removed whole, say)."""
    content = [n for n in document.walk() if n.type in _CONTENT_TYPES and (n.text or "").strip()]
    raw = [n for n in document.walk() if n.type == "html"]
    return bool(dropped) and not content and all(n.node_id in set(dropped) for n in raw)


def write_document(document: Document, params: dict[str, Any], assets: dict[str, Asset]) -> dict[str, Any]:
    """The export's bytes from a parsed document and its assets: HTML (PDF: the print markup) or DOCX."""
    from .models import ExportOptions
    from .types import Prepared

    fmt = params["format"]
    options = ExportOptions.model_validate(params["options"])
    prepared = Prepared(
        document,
        assets=assets,
        theme_css=str(params["theme_css"]),
        dark=bool(params["dark"]),
        metadata=dict(params["metadata"]),
    )
    data: dict[str, Any]
    if fmt == "docx":
        from .docx import render_docx

        data = {"content_b64": base64.b64encode(render_docx(prepared, options)).decode("ascii")}
    else:
        from .html import render_html

        data = {"text": render_html(prepared, options, print_mode=fmt == "pdf")}
    data.update(
        title=document.title,
        warnings=prepared.warnings,
        dropped=prepared.dropped,
        severe_loss=severe_loss(document, prepared.dropped),
    )
    return data


class ExportWriter:
    """The child's state: the parsed documents waiting for their assets (bounded)."""

    def __init__(self) -> None:
        self.kept: OrderedDict[str, Document] = OrderedDict()
        self._sizes: dict[str, int] = {}  # key → the length of its Markdown

    def _keep(self, key: str, document: Document, size: int) -> None:
        """Keep ``document`` for its second request; the oldest go first past :data:`KEPT_DOCUMENTS` documents or
        :data:`KEPT_MARKDOWN_CHARS` of Markdown (an export abandoned between its requests is never asked for)."""
        self.kept[key] = document
        self._sizes[key] = size
        while len(self.kept) > KEPT_DOCUMENTS or (
            len(self.kept) > 1 and sum(self._sizes.values()) > KEPT_MARKDOWN_CHARS
        ):
            old, _ = self.kept.popitem(last=False)
            self._sizes.pop(old, None)

    def _take(self, key: str) -> Document | None:
        self._sizes.pop(key, None)
        return self.kept.pop(key, None)

    def export(self, params: dict[str, Any]) -> dict[str, Any]:
        from .ast import parse_markdown

        key = str(params["key"])
        raw_assets = params.get("assets")
        markdown = str(params["markdown"])
        document = self._take(key) if raw_assets is not None else None
        if document is None:
            document = parse_markdown(markdown, params.get("title") or None)
        if raw_assets is None:
            nodes, maths = nodes_to_prepare(document)
            if nodes or maths:
                self._keep(key, document, len(markdown))
                return {"prepare": [_node_data(n) for n in nodes], "maths": [_node_data(n) for n in maths]}
            raw_assets = {}
        assets = {str(node_id): _asset(a) for node_id, a in raw_assets.items()}
        return write_document(document, params, assets)


def _node_data(n: Node) -> dict[str, Any]:
    """A node to prepare, without its children (the preparation reads its id, type, text and attributes)."""
    return {"node_id": n.node_id, "type": n.type, "attributes": dict(n.attributes), "text": n.text}


# ---- the child ---------------------------------------------------------------------------------------------------


def serve(stdin: TextIO, out: WorkerOutput) -> None:
    """Send the worker's hello once the parser, Pygments and the HTML writer are imported (DOCX's on its first
    use), then answer one request at a time."""
    from . import html  # noqa: F401 - loaded before the hello
    from .ast import parse_markdown

    parse_markdown("")  # builds the parser (its plugins, linkify)
    out.hello("export", os.getpid())
    serve_requests(
        stdin,
        out,
        OP_EXPORT,
        ExportWriter().export,
        RENDER_FAILED,
        lambda exc: f"The export failed unexpectedly ({type(exc).__name__}).",
    )


def main() -> None:
    run_worker(serve)


if __name__ == "__main__":
    main()
