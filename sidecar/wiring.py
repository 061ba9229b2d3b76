"""The composition root: the one place that builds services, for the stdio server and for every human CLI.

:func:`open_services` assembles the whole domain layer for ``sidecar.app`` (storage, event log, jobs, every
domain) and :func:`domain_methods` / :func:`shutdown_hooks` expose it on the wire; the CLIs under
:mod:`sidecar.cli` build theirs through :func:`open_headless` (``bench``), :func:`open_export_tool` (``export``)
and :func:`open_transcriber` (``transcribe``), which reuse the same smaller factories (:func:`open_storage`,
:func:`open_knowledge`, :func:`open_render`, :func:`open_media`). No other module constructs a domain service.

Importing this module brings in pydantic's model machinery and every domain's models, which is why
``sidecar.app`` loads it in a worker thread once ``initialize`` has answered (heavy third-party
libraries stay lazy inside the domains themselves).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from .agent import rpc as agent_rpc
from .agent.service import AgentService
from .agent.tools import ToolServices, default_registry
from .benchmarks import rpc as benchmarks_rpc
from .benchmarks.agent_run import AgentDeps
from .benchmarks.service import BenchmarkService
from .config import rpc as config_rpc
from .config.service import ConfigService
from .core.settings import Settings, default_secret_key_file
from .documents import rpc as documents_rpc
from .documents.client import DocumentWorker
from .documents.service import DocumentService
from .embeddings import default_embedder
from .export import rpc as export_rpc
from .export.service import ExportService
from .export.worker import ExportWorker
from .ipc.router import Method, Notification
from .jobs import JobManager
from .knowledge import rpc as knowledge_rpc
from .knowledge.service import KnowledgeService
from .mcp_host.rules import PluginToolRules
from .mcp_host.service import McpBridge
from .media import rpc as media_rpc
from .media.client import WorkerClient
from .media.service import MediaService
from .memory import rpc as memory_rpc
from .memory.service import MemoryService
from .plugins import rpc as plugins_rpc
from .plugins.service import PluginService
from .providers import rpc as providers_rpc
from .providers.service import ProviderService
from .render import rpc as render_rpc
from .render.service import RenderService
from .retrieval import rpc as retrieval_rpc
from .retrieval.service import RetrievalService
from .storage.secrets import SecretStore
from .storage.sqlite import Database
from .themes import rpc as themes_rpc
from .themes.service import ThemeService
from .trace import rpc as trace_rpc
from .trace.eventlog import EventLog
from .trace.subscriptions import SubscriptionManager
from .workers import engines
from .workers.supervisor import ChildSupervisor

logger = logging.getLogger("sidecar")

SendNotification = Callable[[str, Any], Awaitable[None]]


@dataclass
class Storage:
    """A database, its event log and the job manager over both (what every job-running assembly needs)."""

    db: Database
    events: EventLog
    jobs: JobManager


async def open_event_log(db: Database, tg: TaskGroup) -> tuple[EventLog, JobManager]:
    """The event log in ``db`` (migrated) and the job manager over it."""
    events = EventLog(db)
    await events.migrate()
    return events, JobManager(db, events, tg)


async def open_storage(data_dir: Path, stack: AsyncExitStack, tg: TaskGroup) -> Storage:
    """Open the database in ``data_dir`` with its event log and jobs (closed by ``stack`` in reverse order)."""
    db = await Database.open(data_dir)
    stack.push_async_callback(db.close)
    events, jobs = await open_event_log(db, tg)
    stack.callback(events.close)
    return Storage(db, events, jobs)


async def open_knowledge(db: Database, data_dir: Path | str, **limits: Any) -> KnowledgeService:
    """Notes and attachments over ``db`` (its migrations are idempotent)."""
    knowledge = KnowledgeService(db, data_dir, **limits)
    await knowledge.migrate()
    return knowledge


def open_render(settings: Settings, children: ChildSupervisor, tg: TaskGroup) -> RenderService:
    """Static rendering: one warm browser per sidecar (shared with exporters), Mermaid, plots, maths (its worker
    child's channel runs in ``tg``)."""
    from .render.browser import BrowserPool
    from .render.mathworker import MathWorker
    from .render.mermaid import MermaidRenderer
    from .render.renderers import FunctionPlotRenderer, MathRenderer
    from .render.types import Renderer
    from .system.capabilities import find_chromium

    browser = BrowserPool(find_chromium(settings), children=children)
    renderers: list[Renderer] = [
        MermaidRenderer(browser),
        FunctionPlotRenderer(),
        MathRenderer(MathWorker(children, tg)),
    ]
    return RenderService(settings.data_dir, browser, renderers)


async def open_media(
    settings: Settings,
    storage: Storage,
    knowledge: KnowledgeService,
    worker: WorkerClient,
    *,
    tmp_dir: Path,
    config: ConfigService | None = None,
) -> MediaService:
    """Transcription jobs; the models run in ``worker`` (a child process started on the first job). ``config``
    gives the app's locale (``app.locale``: the script of Chinese transcripts)."""
    media = MediaService(
        storage.db,
        storage.jobs,
        knowledge,
        worker,
        models_dir=settings.models_dir,
        tmp_dir=tmp_dir,
        whisper_model_dir=engines.model_dir(settings.whisper_model_dir, "whisper_models"),
        diarization_model_dir=engines.model_dir(settings.diarization_model_dir, "diarization_models"),
        app_locale=(lambda: config.get("app.locale")) if config is not None else None,
    )
    await media.migrate()
    return media


async def open_documents(
    storage: Storage, knowledge: KnowledgeService, worker: DocumentWorker, *, tmp_dir: Path
) -> DocumentService:
    """Document imports (issue 31); documents are read in ``worker`` (a child process started on the first import)."""
    documents = DocumentService(storage.db, storage.jobs, knowledge, worker, tmp_dir=tmp_dir)
    await documents.migrate()
    return documents


@dataclass
class Services:
    db: Database
    events: EventLog
    subscriptions: SubscriptionManager
    jobs: JobManager
    children: ChildSupervisor
    config: ConfigService
    providers: ProviderService
    memory: MemoryService
    knowledge: KnowledgeService
    retrieval: RetrievalService
    agent: AgentService
    benchmarks: BenchmarkService
    render: RenderService
    themes: ThemeService
    plugins: PluginService
    bridge: McpBridge
    media: MediaService
    exports: ExportService
    documents: DocumentService


async def open_services(
    settings: Settings,
    stack: AsyncExitStack,
    tg: TaskGroup,
    send_notification: SendNotification,
    children: ChildSupervisor,
) -> Services:
    """Open storage and build the domain services (closed by ``stack`` in reverse order)."""
    storage = await open_storage(settings.data_dir, stack, tg)
    db, events, jobs = storage.db, storage.events, storage.jobs
    subscriptions = SubscriptionManager(events, send_notification, tg)
    interrupted = await jobs.recover()
    if interrupted:
        logger.warning("marked %d job(s) interrupted by the last exit as failed", len(interrupted))
    secrets = await SecretStore.open(db, settings.secret_key_file or default_secret_key_file())
    config = ConfigService(db, secrets)
    await config.migrate()
    # the embedded local model (issue 15): its worker starts on first use, stops when idle and on shutdown
    from .localmodel.client import LocalRuntime

    async def local_progress(data: dict[str, Any]) -> None:
        await send_notification("local/modelProgress", data)

    local_runtime = LocalRuntime(children, settings.models_dir, progress=local_progress, task_group=tg)
    stack.push_async_callback(local_runtime.aclose)
    providers = ProviderService(db, secrets, config, local_runtime=local_runtime)
    await providers.migrate()
    stack.push_async_callback(providers.close)
    memory = MemoryService(settings.data_dir, default_embedder)  # LanceDB and the model load on first use
    knowledge = await open_knowledge(db, settings.data_dir)
    retrieval = RetrievalService(db, settings.data_dir, jobs=jobs, task_group=tg)  # LanceDB, model: on first use
    await retrieval.start()
    knowledge.add_listener(retrieval.changed)  # notes/* answer once their changed blocks are indexed
    tg.start_soon(retrieval.catch_up)  # what a crash left unindexed
    registry = default_registry()
    plugin_rules = PluginToolRules(db)  # the user's "allow always" for plugin tools, trusted annotations
    await plugin_rules.start()
    agent = AgentService(
        events,
        providers,
        config,
        registry,
        tg,
        memories=memory.relevant_memories,
        services=ToolServices(memory=memory, retrieval=retrieval),
        rules=plugin_rules,
    )
    await agent.start()
    # benchmarks: runs are jobs; each case runs through the real retrieval / agent runtime in an isolated store
    benchmarks = BenchmarkService(
        db,
        settings.data_dir,
        jobs,
        embedder_config=lambda: retrieval.embedder_config,
        agent=AgentDeps(
            events=events,
            db=db,
            secrets=secrets,
            config=config,
            registry=agent.registry,
            task_group=tg,
            local_runtime=local_runtime,
        ),
    )
    await benchmarks.start()
    render = open_render(settings, children, tg)  # Chromium starts on the first Mermaid render, not here
    themes = ThemeService(settings.data_dir, settings.app_version)
    await themes.start()
    # plugins: one MCP host per installed plugin, its tools in the agent's registry as <plugin_id>.<tool>
    bridge = McpBridge(registry, children, tg, grace_s=settings.shutdown_grace_s)
    plugins = PluginService(
        db,
        events,
        secrets,
        bridge,
        settings.data_dir,
        development=settings.development,
        app_version=settings.app_version,
        rules=plugin_rules,
    )
    await plugins.migrate()
    await plugins.start()
    media = await open_media(
        settings,
        storage,
        knowledge,
        WorkerClient(children, tg),
        tmp_dir=settings.data_dir / "tmp" / "media",
        config=config,
    )
    # export: jobs (kind "export") over the AST → html/pdf/docx, parsed and written in the export worker (a child,
    # started on the first export); PDF and DOCX rasters use the render browser
    export_worker = ExportWorker(children, tg)
    stack.push_async_callback(export_worker.aclose)
    exports = ExportService(
        settings.data_dir, jobs, render=render, knowledge=knowledge, themes=themes, worker=export_worker
    )
    await exports.start(tg)
    document_worker = DocumentWorker(
        children,
        tg,
        page_timeout_s=settings.document_page_timeout_s,
        import_timeout_s=settings.document_import_timeout_s,
    )
    stack.push_async_callback(document_worker.aclose)
    documents = await open_documents(
        storage, knowledge, document_worker, tmp_dir=settings.data_dir / "tmp" / "documents"
    )
    return Services(
        db=db,
        events=events,
        subscriptions=subscriptions,
        jobs=jobs,
        children=children,
        config=config,
        providers=providers,
        memory=memory,
        knowledge=knowledge,
        retrieval=retrieval,
        agent=agent,
        benchmarks=benchmarks,
        render=render,
        themes=themes,
        plugins=plugins,
        bridge=bridge,
        media=media,
        exports=exports,
        documents=documents,
    )


async def open_headless(settings: Settings, stack: AsyncExitStack, tg: TaskGroup) -> Services:
    """:func:`open_services` for a process with no host to notify (the ``bench`` CLI, the schema generator): its
    notifications are dropped and it has a child supervisor of its own."""

    async def no_send(method: str, params: Any) -> None:
        return None

    return await open_services(settings, stack, tg, no_send, ChildSupervisor())


@dataclass
class ExportTool:
    jobs: JobManager
    exports: ExportService


async def open_export_tool(settings: Settings, work: Path, stack: AsyncExitStack, tg: TaskGroup) -> ExportTool:
    """The ``export`` CLI's assembly: the same ExportService the sidecar serves, its job, event log and files in
    ``work`` (never the data directory of a sidecar that may be running: its job recovery would see our job).
    ``settings.data_dir`` is only read: notes and their attachments (when it holds a database), installed themes
    (not started: a running sidecar's theme staging is left alone). No periodic sweep."""
    storage = await open_storage(work, stack, tg)
    knowledge = None
    if (settings.data_dir / "metona.sqlite3").exists():
        notes_db = await Database.open(settings.data_dir)
        stack.push_async_callback(notes_db.close)
        knowledge = await open_knowledge(notes_db, settings.data_dir)
    children = ChildSupervisor()
    stack.push_async_callback(children.stop_all)
    render = open_render(replace(settings, data_dir=work), children, tg)
    stack.push_async_callback(render.close)
    worker = ExportWorker(children, tg)
    stack.push_async_callback(worker.aclose)
    themes = ThemeService(settings.data_dir, settings.app_version)
    exports = ExportService(work, storage.jobs, render=render, knowledge=knowledge, themes=themes, worker=worker)
    await exports.start()
    return ExportTool(storage.jobs, exports)


@dataclass
class Transcriber:
    events: EventLog
    knowledge: KnowledgeService
    media: MediaService


@asynccontextmanager
async def open_transcriber(settings: Settings, work: Path) -> AsyncIterator[Transcriber]:
    """The ``transcribe`` CLI's assembly: the same MediaService, JobManager and worker process as the sidecar, over
    a throw-away database in ``work`` (the file is not added to the user's data); only ``settings.models_dir`` is
    shared, so the base model is assembled once for both. On leaving, the worker stops and the database closes."""
    children = ChildSupervisor()
    db = await Database.open(work)
    try:
        async with anyio.create_task_group() as tg:
            events, jobs = await open_event_log(db, tg)
            knowledge = await open_knowledge(db, work, max_attachment_bytes=1 << 40)
            worker = WorkerClient(children, tg, idle_s=0)
            media = await open_media(settings, Storage(db, events, jobs), knowledge, worker, tmp_dir=work / "media")
            yield Transcriber(events, knowledge, media)
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await children.stop_all(0.5)
            await db.close()


@dataclass
class Importer:
    events: EventLog
    knowledge: KnowledgeService
    documents: DocumentService


@asynccontextmanager
async def open_importer(settings: Settings) -> AsyncIterator[Importer]:
    """The ``import`` CLI's assembly: the same DocumentService, worker and Knowledge Core as the sidecar, over the
    user's data directory (the note is the point), with the retrieval index so the note is searchable at once. It
    never runs job recovery (a sidecar on the same data directory keeps its jobs). On leaving, the worker stops and
    the database closes."""
    children = ChildSupervisor()
    db = await Database.open(settings.data_dir)
    try:
        async with anyio.create_task_group() as tg:
            events, jobs = await open_event_log(db, tg)
            knowledge = await open_knowledge(db, settings.data_dir)
            retrieval = RetrievalService(db, settings.data_dir, jobs=jobs, task_group=tg)
            await retrieval.start()
            knowledge.add_listener(retrieval.changed)
            worker = DocumentWorker(children, tg, idle_s=0)
            documents = await open_documents(
                Storage(db, events, jobs), knowledge, worker, tmp_dir=settings.data_dir / "tmp" / "documents-cli"
            )
            yield Importer(events, knowledge, documents)
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await children.stop_all(0.5)
            await db.close()


def domain_methods(services: Services, settings: Settings) -> tuple[list[Method[Any, Any]], list[Notification]]:
    """Every domain's methods and notifications (the production table, plus dev ones if enabled)."""
    methods: list[Method[Any, Any]] = [*trace_rpc.methods(services.subscriptions)]
    methods += memory_rpc.methods(services.memory)
    methods += knowledge_rpc.methods(services.knowledge)
    methods += retrieval_rpc.methods(services.retrieval, services.jobs)
    methods += config_rpc.methods(services.config)
    methods += providers_rpc.methods(services.providers)
    methods += agent_rpc.methods(services.agent)
    methods += benchmarks_rpc.methods(services.benchmarks)
    methods += render_rpc.methods(services.render)
    methods += themes_rpc.methods(services.themes)
    methods += plugins_rpc.methods(services.plugins)
    methods += media_rpc.methods(services.media)
    methods += export_rpc.methods(services.exports)
    methods += documents_rpc.methods(services.documents)
    notifications = [*trace_rpc.notifications(), *providers_rpc.notifications(), *providers_rpc.local_notifications()]
    if settings.dev_methods:
        from .system.devtools import dev_job_methods, dev_methods

        methods += dev_methods(services.children)
        methods += dev_job_methods(services.jobs)
    return methods, notifications


def shutdown_hooks(services: Services, settings: Settings) -> list[Callable[[], Awaitable[None]]]:
    """Teardown in order: cancel agent runs (their RunCancelled still reaches subscribers), stop pushing events,
    cancel jobs (child processes are stopped by the app's own hook, which runs after these)."""
    grace = settings.shutdown_grace_s
    return [
        lambda: services.agent.shutdown(grace),
        services.bridge.shutdown,  # every plugin's server and its descendants (process groups)
        services.subscriptions.close_all,
        lambda: services.jobs.shutdown(grace),
        services.render.close,  # the warm browser: closed gracefully, its process group killed if it lingers
    ]
