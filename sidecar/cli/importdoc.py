"""``metona-sidecar import FILE [--ocr auto|off|force] [--folder F]``: a document the user has becomes a cited note in
their knowledge base (progress bar on stderr; the note's id and the page count on stdout).

It runs the same :class:`~sidecar.documents.service.DocumentService`, worker child and Knowledge Core as the sidecar
(:func:`sidecar.wiring.open_importer`) over the user's data directory, and indexes the note for search at once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import anyio

from .output import bar, start_cli, write_error


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="metona-sidecar import",
        description="Import a PDF, DOCX, HTML, Markdown, text file or image as a note whose blocks cite their page.",
    )
    p.add_argument("file", type=Path)
    p.add_argument("--ocr", default="auto", choices=("auto", "off", "force"), help="OCR pages without usable text")
    p.add_argument("--languages", default=None, help="OCR languages, comma-separated (eng,chi_sim)")
    p.add_argument("--folder", default=None, help="the note's folder")
    p.add_argument("--title", default=None, help="the note's title (default: the document's)")
    p.add_argument("--data-dir", type=Path, default=None, help="the data directory (env METONA_DATA_DIR)")
    p.add_argument("--json", action="store_true", help="print the finished job as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


async def _run(ns: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from sidecar.core.errors import SidecarError
    from sidecar.core.settings import Settings, default_data_dir
    from sidecar.documents.models import CreateDocumentImportParams
    from sidecar.wiring import open_importer

    env_dir = os.environ.get("METONA_DATA_DIR")
    data_dir = (ns.data_dir or (Path(env_dir) if env_dir else default_data_dir())).expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    async with open_importer(Settings(data_dir=data_dir)) as tool:
        try:
            att = await tool.knowledge.import_attachment(str(ns.file.expanduser().resolve()))
            params = CreateDocumentImportParams(
                attachment_id=att.attachment_id,
                title=ns.title,
                folder=ns.folder,
                ocr=ns.ocr,
                languages=[x for x in ns.languages.split(",") if x] if ns.languages else None,
            )
            job = await tool.documents.create(params)
            with tool.events.listen(job.job_id) as events:
                current = await tool.documents.get(job.job_id)
                while not current.status.terminal:
                    with anyio.move_on_after(0.5):
                        ev = await events.receive()
                        if not ns.quiet and ev.event == "Page":
                            done, pages = ev.data.get("done") or 0, ev.data.get("pages") or 1
                            how = " (OCR)" if ev.data.get("ocr") else ""
                            label = f"{done}/{pages} pages, page {ev.data.get('page')}{how}      "
                            sys.stderr.write(bar(100.0 * done / pages, label))
                            sys.stderr.flush()
                    current = await tool.documents.get(job.job_id)
            if not ns.quiet:
                sys.stderr.write("\n")
        except ValidationError as exc:
            sys.stderr.write(f"error: VALIDATION_ERROR: {exc.errors()[0]['msg']}\n")
            return 2
        except SidecarError as exc:
            write_error(sys.stderr, exc)
            return 2
        for w in current.warnings:
            sys.stderr.write(f"warning: {w.code}: {w.message}\n")
        if current.error is not None:
            sys.stderr.write(f"error: {current.error.code}: {current.error.message}\n")
            if current.error.details:
                sys.stderr.write(json.dumps(current.error.details, ensure_ascii=False)[:2000] + "\n")
            return 1
        if ns.json:
            sys.stdout.write(current.model_dump_json() + "\n")
        else:
            pages = f"{current.pages} pages" if current.pages is not None else "no pages"
            ocr = f", OCR on pages {current.ocr_pages}" if current.ocr_pages else ""
            sys.stdout.write(f"note {current.note_id}: {current.block_count} blocks, {pages}{ocr}\n")
        sys.stdout.flush()
        return 0


def main(argv: list[str]) -> int:
    start_cli()
    ns = _parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        return anyio.run(_run, ns)
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        return 130
