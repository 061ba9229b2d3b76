"""The document worker: a child process of the sidecar (``python -m sidecar.documents.worker``, or
``metona-sidecar document-worker`` in the binary) that reads one document at a time.

A malformed PDF may crash or hang a parser (PDFium is C): here that kills or stalls only this child, and the
sidecar — which answers ``ping`` throughout — kills it (a page or a whole import past its time limit, a cancel)
and starts a fresh one for the next import. It speaks the one worker protocol: a hello, then ``parse`` requests,
each answered with ``Page`` progress events and one result (the blocks, pages, OCR'd pages, warnings, title) or an
error with a document code (:mod:`.errors`). Its address space is capped (:data:`MEMORY_LIMIT_BYTES`) so a
decompression bomb inside a PDF ends as a ``MemoryError`` here, never as the machine swapping.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, TextIO

from sidecar.workers.protocol import Request, WorkerOutput, read_requests, run_worker

logger = logging.getLogger("sidecar.documents.worker")

OP_PARSE = "parse"
MEMORY_LIMIT_BYTES = 6 * 1024**3


def parse(params: dict[str, Any], on_page: Any) -> dict[str, Any]:
    from .blocks import Parsed
    from .errors import DocumentFormatUnsupported, DocumentTooLarge

    path = Path(str(params["path"]))
    fmt = str(params["format"])
    limits = dict(params.get("limits") or {})
    max_bytes = int(limits.get("max_text_bytes", 64 * 1024**2))
    parsed: Parsed
    if fmt == "pdf":
        from .pdf import read_pdf

        parsed = read_pdf(
            path,
            ocr_mode=str(params.get("ocr", "auto")),
            languages=params.get("languages") or None,
            tmp_dir=Path(str(params["tmp_dir"])),
            max_pages=int(limits.get("max_pages", 2000)),
            page_timeout_s=float(limits.get("page_timeout_s", 60)),
            on_page=on_page,
            ocr_workers=int(limits.get("ocr_workers", 2)),
        )
    elif fmt == "docx":
        from .docx import read_docx

        parsed = read_docx(path, max_expanded_bytes=int(limits.get("max_expanded_bytes", 256 * 1024**2)))
    elif fmt == "image":
        parsed = _read_image(path, params, limits)
    elif fmt in ("html", "markdown", "text"):
        if path.stat().st_size > max_bytes:
            raise DocumentTooLarge(
                "The text file is larger than the import limit.",
                details={"reason": "FILE_SIZE", "size_bytes": path.stat().st_size, "limit": max_bytes},
            )
        from . import text

        data = path.read_bytes()
        parsed = {"html": text.read_html, "markdown": text.read_markdown, "text": text.read_text}[fmt](data)
    else:
        raise DocumentFormatUnsupported("This kind of file cannot be imported.", details={"format": fmt})
    return parsed.to_wire()


def _read_image(path: Path, params: dict[str, Any], limits: dict[str, Any]) -> Any:
    from PIL import Image

    from . import ocr
    from .blocks import Parsed
    from .errors import DocumentUnreadable

    parsed = Parsed()
    if params.get("ocr") == "off":
        parsed.warn("OCR_OFF", "An image has no text without OCR; OCR is off.")
        return parsed
    tmp = Path(str(params["tmp_dir"]))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        with Image.open(path) as im:
            im.convert("L").save(tmp / "image.png")
    except Exception as exc:
        raise DocumentUnreadable(
            "The image could not be decoded.", details={"reason": "IMAGE_UNREADABLE", "detail": type(exc).__name__}
        ) from None
    try:
        langs = params.get("languages") or list(ocr.DEFAULT_LANGUAGES)
        parsed.blocks = ocr.page_blocks(tmp / "image.png", langs, float(limits.get("page_timeout_s", 60)), None)
        parsed.ocr_pages = [1]
    except ocr.OcrFailed as exc:
        parsed.warn(exc.reason, "The image could not be read by OCR.", detail=exc.detail[:200])
    finally:
        (tmp / "image.png").unlink(missing_ok=True)
    return parsed


def serve(stdin: TextIO, out: WorkerOutput) -> None:
    from sidecar.core.errors import SidecarError

    from .errors import DOCUMENT_UNREADABLE

    out.hello("documents", os.getpid())
    for message in read_requests(stdin):
        if not isinstance(message, Request):
            continue  # a cancelled import is stopped by a kill of this process
        rid = message.id
        if message.op != OP_PARSE:
            out.error(rid, DOCUMENT_UNREADABLE, "unknown worker op")
            continue

        done = [0]

        def on_page(page: int, pages: int, by_ocr: bool, rid: str = rid, done: list[int] = done) -> None:
            done[0] += 1  # pages read by OCR come after the text layer's: count them, don't echo the number
            out.progress(rid, "Page", {"page": page, "pages": pages, "done": done[0], "ocr": by_ocr})

        try:
            data = parse(message.params, on_page)
        except SidecarError as exc:
            out.error(rid, exc.code, exc.message, exc.details)
        except MemoryError:
            out.error(
                rid,
                DOCUMENT_UNREADABLE,
                "The document needs more memory than an import may use.",
                {"reason": "MEMORY_LIMIT"},
            )
        except Exception as exc:
            logger.warning("parse failed", exc_info=True)
            out.error(
                rid,
                DOCUMENT_UNREADABLE,
                "The document could not be read: it is damaged.",
                {"reason": "PARSER_ERROR", "detail": type(exc).__name__},
            )
        else:
            out.result(rid, data)


def _limit_memory() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ImportError, ValueError, OSError):  # not on this platform, or a lower hard limit already
        pass


def main() -> None:
    _limit_memory()
    run_worker(serve)


if __name__ == "__main__":
    main()
