"""The Export Service (phase-2 §10): exports as jobs (kind ``export``), files in ``<data-dir>/exports/``, chunked
download.

``create`` checks everything it can before a job exists (format, source, options, theme), so a bad request
leaves nothing behind. The markdown of a ``markdown`` source lives only in the runner's memory: the job row
records its size and SHA-256, never the text. The runner has the export worker (a child process,
:mod:`sidecar.export.worker`) parse it (AST), prepares what it names (diagrams, maths, images), has the
worker write the format's bytes (PDF: its markup, printed here by the warm browser), then writes
``<job_id>.<ext>`` atomically (temp file, fsync, rename) and returns the file metadata; a failed or cancelled
job leaves no file. A completed file expires (``expires_at``, default 24 h): afterwards
``exports/file`` answers ``EXPORT_FILE_EXPIRED`` and the sweep (at start, before each create, every 10 min)
deletes it.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hashlib
import logging
import os
import re
import unicodedata
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from pydantic import ValidationError

from sidecar.core.common import OperationResponse, Page, iso, utc_now
from sidecar.core.errors import NotFoundError, SidecarError

from .ast import xml_safe
from .errors import (
    ExportFileExpired,
    ExportFileNotReady,
    ExportFormatUnsupported,
    ExportOptionsInvalid,
    ExportSourceNotFound,
    ExportUnsupportedContent,
)
from .models import (
    FORMATS,
    MIME_TYPES,
    ExportCreateParams,
    ExportFile,
    ExportFileChunk,
    ExportJob,
    ExportOptions,
    ExportSource,
)
from .prepare import Preparer
from .types import Assets
from .worker import ExportWork, ExportWorker, ToPrepare

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from sidecar.jobs import Job, JobContext, JobManager
    from sidecar.knowledge.service import KnowledgeService
    from sidecar.render.service import RenderService
    from sidecar.themes.service import ThemeService

logger = logging.getLogger(__name__)

KIND = "export"
NOT_FOUND = "EXPORT_JOB_NOT_FOUND"
DEFAULT_TTL_S = 24 * 3600
SWEEP_EVERY_S = 600.0
EXTENSIONS = {"html": ".html", "pdf": ".pdf", "docx": ".docx"}
RESERVED = {
    "CON",
    "PRN",
    "AUX",
    "NUL",
    "CONIN$",
    "CONOUT$",
    *(f"{dev}{i}" for dev in ("COM", "LPT") for i in [*range(1, 10), "\u00b9", "\u00b2", "\u00b3"]),
}
MAX_NAME_BYTES = 150
_FILE_RE = re.compile(r"^(export_[0-9a-f]{32})\.(html|pdf|docx)$")


def sanitize_file_name(title: str, fmt: str) -> str:
    """A download name from a title: CJK and other letters kept; control and path characters, reserved device
    names, leading/trailing dots and spaces removed; at most 150 UTF-8 bytes; never empty."""
    # a title can be a whole (2 MiB) heading: bound the work first, then cut by bytes in one step (a
    # character-at-a-time cut re-encoded the whole text each time: minutes for a long CJK heading)
    text = unicodedata.normalize("NFC", (title or "").lstrip()[:4096])
    text = "".join(" " if unicodedata.category(ch).startswith(("C", "Z")) else ch for ch in text)
    text = re.sub(r'[\\/:*?"<>|]+', " ", text)
    text = re.sub(r"\s+", " ", text).strip(" .")
    text = text.encode("utf-8")[:MAX_NAME_BYTES].decode("utf-8", "ignore")
    text = text.strip(" .")
    if not text or text.split(".")[0].strip().upper() in RESERVED:
        text = "export" if not text else f"export {text}"
    return text + EXTENSIONS[fmt]


def _options_invalid(exc: ValidationError, prefix: str) -> ExportOptionsInvalid:
    errors = [
        {"field": ".".join([prefix, *(str(p) for p in e["loc"])]), "message": e["msg"]} for e in exc.errors()[:20]
    ]
    return ExportOptionsInvalid(f"Invalid export {prefix}.", details={"errors": errors})


class ExportService:
    def __init__(
        self,
        data_dir: Path,
        jobs: JobManager,
        *,
        render: RenderService | None,
        knowledge: KnowledgeService | None,
        themes: ThemeService | None,
        worker: ExportWorker,
        ttl_s: float = DEFAULT_TTL_S,
    ) -> None:
        """``worker`` parses and writes the documents (a child process, see :mod:`sidecar.export.worker`)."""
        self.root = Path(data_dir) / "exports"
        self._jobs = jobs
        self._render = render
        self._knowledge = knowledge
        self._themes = themes
        self.ttl_s = ttl_s
        self._preparer = Preparer(render, knowledge)
        self._worker = worker
        self._last_sweep = 0.0
        self._formats = {"html", "docx", "pdf"} if render is not None else {"html", "docx"}

    async def _print(self, markup: str, options: ExportOptions) -> tuple[bytes, int]:
        from .pdf import PdfExporter

        assert self._render is not None  # no PDF without a renderer (create refuses it)
        return await PdfExporter(self._render.browser).print(markup, options)

    async def start(self, task_group: TaskGroup | None = None) -> None:
        await self._jobs.migrate()
        self._jobs.register_kind(KIND, concurrency=2, failure_code="EXPORT_RENDER_FAILED")
        await anyio.to_thread.run_sync(lambda: self.root.mkdir(parents=True, exist_ok=True))
        await self.sweep()
        if task_group is not None:
            task_group.start_soon(self._sweep_loop)

    async def _sweep_loop(self) -> None:
        while True:
            await anyio.sleep(SWEEP_EVERY_S)
            try:
                await self.sweep()
            except Exception:
                logger.exception("export sweep failed")

    # ----------------------------------------------------------------------------------------------- create
    async def create(self, p: ExportCreateParams) -> ExportJob:
        fmt = p.format.strip().lower()
        if fmt not in FORMATS or fmt not in self._formats:
            raise ExportFormatUnsupported(
                "Unsupported export format.", details={"format": p.format[:40], "supported": list(FORMATS)}
            )
        try:
            source = ExportSource.model_validate(p.source)
        except ValidationError as exc:
            raise _options_invalid(exc, "source") from None
        try:
            options = ExportOptions.model_validate(p.options)
        except ValidationError as exc:
            raise _options_invalid(exc, "options") from None
        from .html import code_style

        if code_style(options.code_theme) is None:
            raise ExportOptionsInvalid(
                "Unknown code_theme.", details={"errors": [{"field": "options.code_theme", "message": "unknown"}]}
            )
        theme_css, dark, theme_id = await self._theme(options.theme_id)
        markdown, title, record, metadata = await self._source(source)
        title = options.title or source.title or title
        await self.sweep(throttle_s=30.0)
        params = {"format": fmt, "source": record, "options": options.model_dump(mode="json"), "theme_id": theme_id}
        job_id = f"{KIND}_{uuid.uuid4().hex}"

        async def runner(ctx: JobContext) -> dict[str, Any]:
            return await self._run(ctx, fmt, markdown, title, options, theme_css, dark, metadata)

        job = await self._jobs.submit(KIND, params, runner, job_id=job_id)
        return self._view(job, params)

    async def _theme(self, theme_id: str | None) -> tuple[str, bool, str | None]:
        if self._themes is None:
            return "", False, theme_id
        try:
            if theme_id is None:
                enabled = [t for t in await self._themes.list() if t.enabled]
                theme_id = enabled[0].theme_id if enabled else "light"
            theme = await self._themes.get(theme_id)
            css = await self._themes.css(theme_id)
        except NotFoundError:
            raise ExportOptionsInvalid(
                "Unknown theme_id.",
                details={"errors": [{"field": "options.theme_id", "message": "no such theme"}], "theme_id": theme_id},
            ) from None
        return css, theme.is_dark, theme_id

    async def _source(self, source: ExportSource) -> tuple[str, str, dict[str, Any], dict[str, str]]:
        if source.type == "markdown":
            if source.markdown is None:
                raise ExportOptionsInvalid(
                    "A markdown source needs 'markdown'.",
                    details={"errors": [{"field": "source.markdown", "message": "required"}]},
                )
            text = source.markdown
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            return text, "", {"type": "markdown", "chars": len(text), "sha256": digest}, {}
        if not source.note_id:
            raise ExportOptionsInvalid(
                "A note source needs 'note_id'.",
                details={"errors": [{"field": "source.note_id", "message": "required"}]},
            )
        if self._knowledge is None:
            raise ExportSourceNotFound("Notes are not available here.", details={"note_id": source.note_id})
        try:
            note = await self._knowledge.get_note(source.note_id)
        except NotFoundError:
            raise ExportSourceNotFound("Note was not found.", details={"note_id": source.note_id}) from None
        meta = {"note_id": note.note_id, "created_at": note.created_at, "updated_at": note.updated_at}
        if note.folder:
            meta["folder"] = note.folder
        return note.content, note.title, {"type": "note", "note_id": note.note_id}, meta

    # ----------------------------------------------------------------------------------------------- runner
    async def _run(
        self,
        ctx: JobContext,
        fmt: str,
        markdown: str,
        title: str,
        options: ExportOptions,
        theme_css: str,
        dark: bool,
        metadata: dict[str, str],
    ) -> dict[str, Any]:
        await ctx.progress("parse", 0, 4)
        work = ExportWork(
            key=ctx.job_id,
            fmt=fmt,
            markdown=markdown,
            title=title or None,
            options=options.model_dump(mode="json"),
            theme_css=theme_css,
            dark=dark,
            metadata={key: xml_safe(value) for key, value in metadata.items()},
        )
        # parsing, highlighting and writing run in the export worker (a child: they hold the GIL for their time)
        written = await self._worker.start(work)
        ctx.check_cancelled()
        prepared = Assets(dark=dark, check_cancelled=ctx.check_cancelled)
        await ctx.progress("render", 1, 4)
        if isinstance(written, ToPrepare):

            async def progress(phase: str, current: int, total: int) -> None:
                await ctx.progress(phase, current, total, message=f"{current}/{total} diagrams, formulas and images")

            await self._preparer.prepare_nodes(prepared, written.nodes, written.maths, fmt, progress)
            await ctx.progress("export", 2, 4)
            written = await self._worker.finish(work, prepared.assets)
        else:
            await ctx.progress("export", 2, 4)
        content, pages = written.content, None
        if fmt == "pdf":
            content, pages = await self._print(written.content.decode("utf-8"), options)
        warnings = [*prepared.warnings, *written.warnings]
        if written.severe_loss:
            raise ExportUnsupportedContent(
                "Nothing in this document can be exported (it is all raw HTML).",
                details={"nodes": written.dropped[:50], "warnings": warnings[:50]},
            )
        await ctx.progress("write", 3, 4)
        file_name = sanitize_file_name(written.title, fmt)
        target = self.root / f"{ctx.job_id}{EXTENSIONS[fmt]}"
        try:
            digest = await anyio.to_thread.run_sync(_write_atomic, target, content)
            ctx.check_cancelled()
        except BaseException:
            with contextlib.suppress(OSError):
                target.unlink()
            raise
        expires = utc_now() + dt.timedelta(seconds=options.expires_in_s or self.ttl_s)
        file = ExportFile(
            file_name=file_name,
            mime_type=MIME_TYPES[fmt],
            size=len(content),
            sha256=digest,
            expires_at=iso(expires),
        )
        return {"file": file.model_dump(mode="json"), "warnings": warnings, "pages": pages}

    # ----------------------------------------------------------------------------------------------- queries
    def _view(self, job: Job, params: dict[str, Any]) -> ExportJob:
        result = job.result or {}
        file = ExportFile.model_validate(result["file"]) if job.status == "completed" and result.get("file") else None
        return ExportJob(
            job_id=job.job_id,
            status=job.status.value,
            format=str(params.get("format", "")),
            progress=job.progress,
            file=file,
            warnings=list(result.get("warnings") or []),
            error=job.error,
            created_at=job.created_at,
            started_at=job.started_at,
            completed_at=job.completed_at,
        )

    async def get(self, job_id: str) -> ExportJob:
        job = await self._jobs.get(job_id, kind=KIND, not_found_code=NOT_FOUND)
        params = await self._jobs.params_of(job_id, kind=KIND, not_found_code=NOT_FOUND)
        return self._view(job, params)

    async def wait(self, job_id: str) -> ExportJob:
        await self._jobs.wait(job_id, kind=KIND, not_found_code=NOT_FOUND)
        return await self.get(job_id)

    async def list(
        self, status: str | None = None, fmt: str | None = None, limit: int = 50, offset: int = 0
    ) -> Page[ExportJob]:
        if fmt is not None and fmt not in FORMATS:
            raise ExportFormatUnsupported(
                "Unsupported export format.", details={"format": fmt, "supported": list(FORMATS)}
            )
        match = {"format": fmt} if fmt is not None else None
        page, params = await self._jobs.list_with_params(KIND, status, limit, offset, params_match=match)
        views = [self._view(job, p) for job, p in zip(page.items, params, strict=True)]
        return Page[ExportJob](items=views, page=page.page)

    async def cancel(self, job_id: str) -> OperationResponse:
        return await self._jobs.cancel(job_id, kind=KIND, not_found_code=NOT_FOUND)

    async def read(self, job_id: str, offset: int, length: int) -> ExportFileChunk:
        view = await self.get(job_id)
        if view.status != "completed" or view.file is None:
            raise ExportFileNotReady(
                f"The export is {view.status}; it has no file.", details={"job_id": job_id, "status": view.status}
            )
        file = view.file
        path = self.root / f"{job_id}{EXTENSIONS[view.format]}"
        if _expired(file.expires_at):
            await anyio.to_thread.run_sync(_unlink, path)
            raise ExportFileExpired(
                "The exported file has expired.", details={"job_id": job_id, "expires_at": file.expires_at}
            )
        if offset > file.size:
            raise ExportOptionsInvalid(
                "offset is past the end of the file.",
                details={"errors": [{"field": "offset", "message": "past the end"}], "size": file.size},
            )

        def read() -> bytes | None:
            try:
                with path.open("rb") as fh:
                    fh.seek(offset)
                    return fh.read(length)
            except FileNotFoundError:
                return None

        data = await anyio.to_thread.run_sync(read)
        if data is None:
            raise ExportFileExpired("The exported file is gone.", details={"job_id": job_id})
        return ExportFileChunk(
            job_id=job_id,
            file_name=file.file_name,
            mime_type=file.mime_type,
            size=file.size,
            sha256=file.sha256,
            offset=offset,
            length=len(data),
            data_base64=base64.b64encode(data).decode("ascii"),
            eof=offset + len(data) >= file.size,
        )

    # ------------------------------------------------------------------------------------------------ sweep
    async def sweep(self, throttle_s: float = 0.0) -> int:
        """Delete expired files, files of jobs that are not completed, and temp files a crash left behind."""
        now = anyio.current_time()
        if throttle_s and now - self._last_sweep < throttle_s:
            return 0
        self._last_sweep = now
        names = await anyio.to_thread.run_sync(lambda: sorted(os.listdir(self.root)) if self.root.is_dir() else [])
        removed = 0
        for name in names:
            path = self.root / name
            m = _FILE_RE.match(name)
            keep = False
            if m:
                try:
                    view = await self.get(m.group(1))
                    keep = view.status in ("queued", "running") or (
                        view.file is not None and not _expired(view.file.expires_at)
                    )
                except SidecarError:
                    keep = False
            elif name.startswith(".") and name.endswith(".part"):
                job_id = name[1:].split(".", 1)[0]
                try:
                    keep = (await self.get(job_id)).status in ("queued", "running")
                except SidecarError:
                    keep = False
            else:
                keep = True  # not ours: leave it
            if not keep:
                await anyio.to_thread.run_sync(_unlink, path)
                removed += 1
        if removed:
            logger.info("export sweep: removed %d file(s)", removed)
        return removed


def _expired(expires_at: str) -> bool:
    try:
        when = dt.datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    except ValueError:
        return True
    return utc_now() >= when


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _write_atomic(target: Path, content: bytes) -> str:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.part")
    try:
        with tmp.open("wb") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        _unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return hashlib.sha256(content).hexdigest()
