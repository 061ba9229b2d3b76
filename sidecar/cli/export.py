"""``metona-sidecar export FILE.md|--note ID --format pdf|docx|html [--theme ID] [-o OUT]``: one export through the
same ExportService the sidecar serves (built by :func:`sidecar.wiring.open_export_tool`), with a progress bar on
stderr.

The job, its event log and the intermediate file live in a temporary work directory (never the data directory of
a sidecar that may be running: its job recovery would see our job). The data directory is only read: notes
(``--note``), their attachments, installed themes. Ctrl-C cancels the export. Exit code 0 when written, 1 when
the export failed or was cancelled, 2 for bad options or inputs.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from sidecar.core.errors import SidecarError

from .output import bar, start_cli, write_error


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="metona-sidecar export", description="Export Markdown or a note.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("file", nargs="?", type=Path, help="a Markdown file")
    src.add_argument("--note", help="a note id from the data directory")
    p.add_argument("--format", "-f", required=True, choices=["html", "pdf", "docx"])
    p.add_argument("--theme", default=None, help="theme id (default: the enabled theme)")
    p.add_argument("--page-size", default=None, help="PDF page size: A4 (default), Letter, A3, A5, Legal, Tabloid")
    p.add_argument("--title", default=None, help="document title (default: the note title / first heading)")
    p.add_argument("-o", "--output", default=None, help="output file or folder (default: ./<title>.<ext>)")
    p.add_argument("--data-dir", type=Path, default=None, help="data directory to read notes and themes from")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _bar(progress: Any, width: int = 30) -> str:
    pct = (progress.percent or 0.0) if progress is not None else 0.0
    phase = progress.phase if progress is not None else "queued"
    return bar(pct, phase, width)[:100]


async def _run(ns: argparse.Namespace, data_dir: Path, work: Path) -> int:
    from sidecar.core.settings import Settings
    from sidecar.export.models import ExportCreateParams
    from sidecar.wiring import open_export_tool

    err = sys.stderr
    if ns.file is not None:
        try:
            source: dict[str, Any] = {"type": "markdown", "markdown": ns.file.read_text("utf-8")}
        except (OSError, UnicodeDecodeError) as exc:
            err.write(f"error: cannot read {ns.file}: {exc}\n")
            return 2
    else:
        source = {"type": "note", "note_id": ns.note}
    options: dict[str, Any] = {}
    if ns.theme:
        options["theme_id"] = ns.theme
    if ns.page_size:
        options["page_size"] = ns.page_size
    if ns.title:
        options["title"] = ns.title
    async with AsyncExitStack() as stack:
        tg = await stack.enter_async_context(anyio.create_task_group())
        settings = Settings(data_dir=data_dir, app_version=os.environ.get("METONA_APP_VERSION") or "")
        tool = await open_export_tool(settings, work, stack, tg)
        service = tool.exports
        try:
            job = await service.create(ExportCreateParams(source=source, format=ns.format, options=options))
        except SidecarError as exc:
            write_error(err, exc)
            tg.cancel_scope.cancel()
            return 2
        try:
            shown = ""
            while True:
                current = await service.get(job.job_id)
                line = _bar(current.progress)
                if not ns.quiet and err.isatty() and line != shown:
                    err.write(line)
                    err.flush()
                    shown = line
                if current.status in ("completed", "failed", "cancelled"):
                    break
                await anyio.sleep(0.1)
        except (KeyboardInterrupt, anyio.get_cancelled_exc_class()):
            with anyio.CancelScope(shield=True):
                await service.cancel(job.job_id)
        with anyio.CancelScope(shield=True):
            final = await service.wait(job.job_id)
        if not ns.quiet and err.isatty():
            err.write("\n")
        code = 1
        if final.status == "completed" and final.file is not None:
            target = _target(ns.output, final.file.file_name)
            await _save(service, job.job_id, target)
            sys.stdout.write(f"{target}\n")
            err.write(f"wrote {final.file.size} bytes ({final.file.mime_type}), sha256 {final.file.sha256}\n")
            code = 0
        elif final.error is not None:
            err.write(f"error: {final.error.code}: {final.error.message}\n")
        else:
            err.write(f"export {final.status}\n")
        for warning in final.warnings:
            err.write(f"warning: {warning}\n")
        await tool.jobs.shutdown(2)
        tg.cancel_scope.cancel()
        return code


def _target(output: str | None, file_name: str) -> Path:
    if output is None:
        return Path.cwd() / file_name
    path = Path(output).expanduser()
    if path.is_dir() or output.endswith(("/", os.sep)):
        return path / file_name
    return path


async def _save(service: Any, job_id: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.part")
    offset = 0
    with tmp.open("wb") as fh:
        while True:
            part = await service.read(job_id, offset, 1024 * 1024)
            fh.write(base64.b64decode(part.data_base64))
            offset += part.length
            if part.eof:
                break
    os.replace(tmp, target)


def main(argv: list[str]) -> int:
    start_cli()
    ns = _parser().parse_args(argv)
    from sidecar.core.settings import default_data_dir

    env_dir = os.environ.get("METONA_DATA_DIR")
    data_dir = (ns.data_dir or (Path(env_dir) if env_dir else default_data_dir())).expanduser().resolve()
    work = Path(tempfile.mkdtemp(prefix="metona-export-"))
    try:
        return anyio.run(_run, ns, data_dir, work)
    except KeyboardInterrupt:
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
